//! The OpenMetrics text format's small pieces: metric family headers, label sets with escaped
//! values, and numbers.

use std::fmt::Write;

/// A family's `# TYPE`, `# UNIT` (when it has one) and `# HELP` lines.
pub fn family(out: &mut String, name: &str, kind: &str, unit: Option<&str>, help: &str) {
    let _ = writeln!(out, "# TYPE {name} {kind}");
    if let Some(u) = unit {
        let _ = writeln!(out, "# UNIT {name} {u}");
    }
    let _ = writeln!(out, "# HELP {name} {}", escape_help(help));
}

/// One sample line: `name{labels} value`.
pub fn sample(out: &mut String, name: &str, labels: &[(&str, &str)], value: impl Value) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (k, v)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(k);
            out.push_str("=\"");
            escape_label(out, v);
            out.push('"');
        }
        out.push('}');
    }
    out.push(' ');
    value.write(out);
    out.push('\n');
}

/// A number as OpenMetrics writes it.
pub trait Value {
    /// Appends the number.
    fn write(&self, out: &mut String);
}

impl Value for &dyn Value {
    fn write(&self, out: &mut String) {
        (**self).write(out)
    }
}

impl Value for u64 {
    fn write(&self, out: &mut String) {
        let _ = write!(out, "{self}");
    }
}

impl Value for f64 {
    fn write(&self, out: &mut String) {
        if self.is_nan() {
            out.push_str("NaN");
        } else if self.is_infinite() {
            out.push_str(if *self > 0.0 { "+Inf" } else { "-Inf" });
        } else {
            // Rust's shortest round-trip decimal, never an exponent: a valid OpenMetrics number.
            let _ = write!(out, "{self}");
        }
    }
}

/// A bucket bound as `le` carries it: OpenMetrics' canonical form (`1.0`, `0.005`, `2.5e-05`).
pub fn le(bound: f64) -> String {
    if bound.is_infinite() {
        return "+Inf".to_string();
    }
    if bound != 0.0 && bound.abs() < 1e-4 {
        // Go's %g (what Prometheus' own clients write) turns to an exponent below 1e-4.
        let s = format!("{bound:e}");
        let (m, e) = s.split_once('e').expect("exponent form");
        let e: i32 = e.parse().expect("exponent");
        return format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs());
    }
    let s = format!("{bound}");
    if s.contains('.') {
        s
    } else {
        s + ".0"
    }
}

fn escape_label(out: &mut String, v: &str) {
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_and_labels_are_written_as_the_format_asks() {
        assert_eq!(le(0.000025), "2.5e-05");
        assert_eq!(le(0.00005), "5e-05");
        assert_eq!(le(0.0001), "0.0001");
        assert_eq!(le(0.25), "0.25");
        assert_eq!(le(1.0), "1.0");
        assert_eq!(le(60.0), "60.0");
        assert_eq!(le(f64::INFINITY), "+Inf");
        let mut out = String::new();
        sample(&mut out, "m_total", &[("load", "a\"b\\c\nd")], 7u64);
        assert_eq!(out, "m_total{load=\"a\\\"b\\\\c\\nd\"} 7\n");
        out.clear();
        sample(&mut out, "g", &[], 0.5f64);
        sample(&mut out, "g", &[], f64::NAN);
        assert_eq!(out, "g 0.5\ng NaN\n");
    }
}
