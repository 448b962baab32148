//! Small, deterministic formatters shared by report.md and compare.md: counts with thousands
//! separators, shares, markdown tables with escaped cells, file-name slugs.

use std::fmt::Write;

/// The proxy under test as the run recorded its kind (`nginx`, `haproxy`...), or `proxy` for
/// records that did not keep it: headings and labels name the proxy through this.
pub fn proxy_name(env: &model::Env) -> &str {
    env.proxy_kind.as_deref().unwrap_or("proxy")
}

/// An exact count with thousands separators: `788,635`.
pub fn count(n: u64) -> String {
    model::fmt_count(n)
}

/// A signed count with thousands separators: `-1,204`, `+17`.
pub fn signed_count(n: i128) -> String {
    let body = count(n.unsigned_abs() as u64);
    match n.signum() {
        1 => format!("+{body}"),
        -1 => format!("-{body}"),
        _ => body,
    }
}

/// `part` as a percentage of `whole`, with enough digits that a small share does not print as 0:
/// `66.67%`, `0.032%`, `<0.001%`; `n/a` when `whole` is zero.
pub fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "n/a".into();
    }
    pct_value(part as f64 * 100.0 / whole as f64)
}

/// A percentage value printed as [`pct`] does.
pub fn pct_value(p: f64) -> String {
    if p == 0.0 {
        "0%".into()
    } else if p == 100.0 {
        "100%".into()
    } else if p.abs() >= 1.0 {
        format!("{p:.2}%")
    } else if p.abs() >= 0.001 {
        format!("{p:.3}%")
    } else {
        "<0.001%".into()
    }
}

/// A number with two decimals: `466.67`.
pub fn f2(v: f64) -> String {
    format!("{v:.2}")
}

/// Seconds since the run origin with two decimals: `12.34`.
pub fn secs(v: f64) -> String {
    format!("{v:.2}")
}

/// A latency given in microseconds, the way wrk prints it (`632.00us`, `15.02ms`).
pub fn lat(us: u64) -> String {
    units::fmt_us(us as f64)
}

/// Escapes text for one markdown table cell: pipes are escaped and line breaks become spaces.
pub fn cell(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '|' => out.push_str("\\|"),
            '\n' | '\r' => out.push(' '),
            _ => out.push(c),
        }
    }
    out
}

/// A lowercase file-name stem from any name: letters and digits kept, runs of anything else
/// become one `-`: `Scale up (gradual)` becomes `scale-up-gradual`.
pub fn slug(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    if out.is_empty() {
        out.push('x');
    }
    out
}

/// A fenced code block around `text`, with a fence longer than any run of backticks inside it.
pub fn code_block(lang: &str, text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest.max(2) + 1);
    let body = text.trim_end_matches('\n');
    format!("{fence}{lang}\n{body}\n{fence}\n")
}

/// Column alignment in a markdown table.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Text columns.
    Left,
    /// Number columns.
    Right,
}

/// A markdown table built row by row; cells are escaped when added.
pub struct Table {
    head: Vec<(String, Align)>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these columns: a leading `>` in a header marks a right-aligned (number) column.
    pub fn new(columns: &[&str]) -> Table {
        let head = columns
            .iter()
            .map(|c| match c.strip_prefix('>') {
                Some(rest) => (rest.to_string(), Align::Right),
                None => (c.to_string(), Align::Left),
            })
            .collect();
        Table {
            head,
            rows: Vec::new(),
        }
    }

    /// A table whose column names are taken as they are (all left-aligned), for scenario tables.
    pub fn verbatim(columns: &[String]) -> Table {
        Table {
            head: columns.iter().map(|c| (c.clone(), Align::Left)).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; missing cells are left empty, extra cells are kept.
    pub fn row<S: AsRef<str>>(&mut self, cells: impl IntoIterator<Item = S>) {
        self.rows
            .push(cells.into_iter().map(|c| cell(c.as_ref())).collect());
    }

    /// True when no row was added.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as markdown, ending with a newline.
    pub fn render(&self) -> String {
        let width = self
            .rows
            .iter()
            .map(|r| r.len())
            .max()
            .unwrap_or(0)
            .max(self.head.len());
        let mut out = String::new();
        out.push('|');
        for i in 0..width {
            let h = self.head.get(i).map(|h| cell(&h.0)).unwrap_or_default();
            let _ = write!(out, " {h} |");
        }
        out.push_str("\n|");
        for i in 0..width {
            let a = self.head.get(i).map(|h| h.1).unwrap_or(Align::Left);
            out.push_str(if a == Align::Right { "---:|" } else { "---|" });
        }
        out.push('\n');
        for r in &self.rows {
            out.push('|');
            for i in 0..width {
                let c = r.get(i).map(String::as_str).unwrap_or("");
                let _ = write!(out, " {c} |");
            }
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_shares() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(1000), "1,000");
        assert_eq!(count(788635), "788,635");
        assert_eq!(count(1234567890), "1,234,567,890");
        assert_eq!(signed_count(-1204), "-1,204");
        assert_eq!(signed_count(17), "+17");
        assert_eq!(pct(2, 3), "66.67%");
        assert_eq!(pct(32, 100_000), "0.032%");
        assert_eq!(pct(1, 1_000_000), "<0.001%");
        assert_eq!(pct(0, 10), "0%");
        assert_eq!(pct(3, 3), "100%");
        assert_eq!(pct(1, 0), "n/a");
    }

    #[test]
    fn slugs_and_cells() {
        assert_eq!(slug("Scale up (gradual)"), "scale-up-gradual");
        assert_eq!(slug("--"), "x");
        assert_eq!(cell("a|b\nc"), "a\\|b c");
        assert_eq!(code_block("text", "x\n"), "```text\nx\n```\n");
        assert_eq!(code_block("", "a ```` b"), "`````\na ```` b\n`````\n");
    }

    #[test]
    fn table_renders_alignment_and_escapes() {
        let mut t = Table::new(&["Name", ">Count"]);
        t.row(["a|b", "3"]);
        assert_eq!(t.render(), "| Name | Count |\n|---|---:|\n| a\\|b | 3 |\n");
    }
}
