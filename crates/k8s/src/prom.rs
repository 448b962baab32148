//! The Prometheus text exposition format, parsed into (metric, labels, value): what
//! nginx-prometheus-exporter or a gateway controller's metrics port serves.

use serde::{Deserialize, Serialize};

/// One sample of a scrape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// The metric name (`nginx_http_requests_total`, `nginx_gateway_fabric_nginx_reloads_total`).
    pub metric: String,
    /// Its labels, in the order the exposition gives them.
    pub labels: Vec<(String, String)>,
    /// The value (`NaN` and `±Inf` included).
    pub value: f64,
    /// The type its family's `# TYPE` line gives (`counter`, `gauge`, `histogram`, `summary`,
    /// `untyped`...): a histogram's `_bucket`, `_sum` and `_count` samples and a counter's
    /// `_total` take their family's. Empty when the exposition gives none.
    #[serde(default)]
    pub kind: String,
}

impl Sample {
    /// The value of label `name`, if the sample has it.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Parses an exposition text (Prometheus' or OpenMetrics'); each sample takes the type its
/// family's `# TYPE` line gives; other comment lines and lines that are not a sample are
/// skipped, and a timestamp after the value is ignored.
pub fn parse_prometheus(text: &str) -> Vec<Sample> {
    let mut types: std::collections::HashMap<&str, &str> = std::collections::HashMap::new();
    for line in text.lines() {
        let mut w = line.split_whitespace();
        if let (Some("#"), Some("TYPE"), Some(name), Some(kind)) =
            (w.next(), w.next(), w.next(), w.next())
        {
            types.insert(name, kind);
        }
    }
    text.lines()
        .filter_map(parse_line)
        .map(|mut s| {
            s.kind = family_type(&types, &s.metric).to_string();
            s
        })
        .collect()
}

/// The suffixes a family's samples add to its name, by the family's type.
const SUFFIXES: [(&str, &[&str]); 4] = [
    ("counter", &["_total", "_created"]),
    ("histogram", &["_bucket", "_sum", "_count", "_created"]),
    ("gaugehistogram", &["_bucket", "_gsum", "_gcount"]),
    ("summary", &["_sum", "_count", "_created"]),
];

/// The type of the family sample `metric` belongs to ("" when no `# TYPE` names it).
fn family_type<'a>(types: &std::collections::HashMap<&str, &'a str>, metric: &str) -> &'a str {
    if let Some(t) = types.get(metric) {
        return t;
    }
    for (kind, suffixes) in SUFFIXES {
        for suf in suffixes {
            if let Some(family) = metric.strip_suffix(suf) {
                if types.get(family) == Some(&kind) {
                    return kind;
                }
            }
        }
    }
    ""
}

fn parse_line(line: &str) -> Option<Sample> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line.find(|c: char| c == '{' || c.is_whitespace())?;
    let metric = line[..name_end].to_string();
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if rest.starts_with('{') {
        rest = &rest[1..];
        loop {
            rest = rest.trim_start_matches([' ', ',']);
            if let Some(r) = rest.strip_prefix('}') {
                rest = r;
                break;
            }
            let eq = rest.find('=')?;
            let key = rest[..eq].trim().to_string();
            rest = rest[eq + 1..].trim_start().strip_prefix('"')?;
            let mut value = String::new();
            let mut chars = rest.char_indices();
            let end = loop {
                let (i, c) = chars.next()?;
                match c {
                    '\\' => match chars.next()?.1 {
                        'n' => value.push('\n'),
                        other => value.push(other),
                    },
                    '"' => break i,
                    c => value.push(c),
                }
            };
            labels.push((key, value));
            rest = &rest[end + 1..];
        }
    }
    let v = rest.split_whitespace().next()?;
    let value = match v {
        "+Inf" | "Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        v => v.parse().ok()?,
    };
    Some(Sample {
        metric,
        labels,
        value,
        kind: String::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_lines() {
        let text = "# HELP nginx_up up\n# TYPE nginx_up gauge\nnginx_up 1\n\
                    nginx_http_requests_total{code=\"200\",path=\"/a \\\"b\\\", c\"} 1027 1395066363000\n\
                    h_bucket{le=\"+Inf\",} +Inf\nbroken{x=\"1\" 2\n";
        let s = parse_prometheus(text);
        assert_eq!(s.len(), 3);
        assert_eq!((s[0].metric.as_str(), s[0].value), ("nginx_up", 1.0));
        assert_eq!(s[1].label("code"), Some("200"));
        assert_eq!(s[1].label("path"), Some("/a \"b\", c"));
        assert_eq!(s[1].value, 1027.0);
        assert_eq!(s[2].label("le"), Some("+Inf"));
        assert!(s[2].value.is_infinite());
        assert_eq!(s[0].kind, "gauge");
        assert_eq!(s[1].kind, "");
    }

    #[test]
    fn samples_take_their_familys_type() {
        let text = "# TYPE r counter\nr_total 3\nr_created 1.7e9\n\
                    # TYPE h histogram\nh_bucket{le=\"0.5\"} 1\nh_bucket{le=\"+Inf\"} 2\n\
                    h_sum 0.9\nh_count 2\n# TYPE g gauge\ng 4\n# TYPE old counter\nold 7\n\
                    h_total 1\n";
        let kinds: Vec<(String, String)> = parse_prometheus(text)
            .into_iter()
            .map(|s| (s.metric, s.kind))
            .collect();
        let k = |m: &str| kinds.iter().find(|(n, _)| n == m).unwrap().1.as_str();
        assert_eq!(k("r_total"), "counter");
        assert_eq!(k("r_created"), "counter");
        assert_eq!(k("h_bucket"), "histogram");
        assert_eq!(k("h_sum"), "histogram");
        assert_eq!(k("h_count"), "histogram");
        assert_eq!(k("g"), "gauge");
        // Prometheus' own text format names a counter's samples as its family.
        assert_eq!(k("old"), "counter");
        // A suffix of another type's family is not that family's.
        assert_eq!(k("h_total"), "");
    }
}
