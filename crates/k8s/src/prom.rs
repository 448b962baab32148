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

/// Parses an exposition text; comment lines (`# HELP`, `# TYPE`) and lines that are not a
/// sample are skipped, and a timestamp after the value is ignored.
pub fn parse_prometheus(text: &str) -> Vec<Sample> {
    text.lines().filter_map(parse_line).collect()
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
    }
}
