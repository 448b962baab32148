//! Kubernetes names and values as the API accepts them: DNS labels and subdomains, label
//! selectors, image references, pull policies, quantities and Prometheus metric names.

use super::*;

/// Checks a Kubernetes quantity (`100m`, `0.5`, `64Mi`, `1G`, `1e3`): a non-negative decimal
/// number, then at most one suffix.
pub(super) fn quantity(q: &str) -> Result<(), Invalid> {
    let num_end = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(q.len());
    let (num, suffix) = q.split_at(num_end);
    let number = !num.is_empty()
        && num.matches('.').count() <= 1
        && num != "."
        && num.bytes().any(|b| b.is_ascii_digit());
    let exponent = suffix
        .strip_prefix(['e', 'E'])
        .is_some_and(|e| !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit()));
    let known = [
        "", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei",
    ]
    .contains(&suffix);
    if number && (known || exponent) {
        Ok(())
    } else {
        Err(Invalid::from(
            "not a Kubernetes quantity (a number, then m, k, M, G, Ki, Mi, Gi...)",
        ))
    }
}

/// The pull policies the API knows, in its spelling.
pub const PULL_POLICIES: [&str; 3] = ["Always", "IfNotPresent", "Never"];

/// Checks an `imagePullPolicy` value.
pub(super) fn pull_policy(s: &str) -> Result<(), Invalid> {
    if PULL_POLICIES.contains(&s) {
        Ok(())
    } else {
        Err(Invalid::from(format!(
            "not one of {}",
            PULL_POLICIES.join(", ")
        )))
    }
}

/// Checks a Kubernetes object name of the DNS-1123 label form (namespaces, most names).
pub(crate) fn dns_label(s: &str) -> Result<(), Invalid> {
    let ok = !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(Invalid::from("must be 1-63 lowercase letters, digits or '-', starting and ending with a letter or digit"))
    }
}

/// Checks a DNS-1123 subdomain (Deployment names and the like).
pub(crate) fn dns_subdomain(s: &str) -> Result<(), Invalid> {
    if s.is_empty() || s.len() > 253 {
        return Err(Invalid::from("must be 1-253 characters"));
    }
    s.split('.')
        .try_for_each(dns_label)
        .map_err(|_| Invalid::from("must be lowercase letters, digits, '-' and '.'"))
}

/// Checks an image reference: no spaces, not empty.
pub(super) fn image_ref(s: &str) -> Result<(), Invalid> {
    if s.is_empty() || s.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Err(Invalid::from(
            "an image reference has no spaces and is not empty",
        ))
    } else {
        Ok(())
    }
}

/// Checks a label selector in the API's string form: comma-separated `key=value`, `key==value`,
/// `key!=value`, `key`, `!key`, `key in (a,b)`, `key notin (a,b)`.
pub(crate) fn label_selector(s: &str) -> Result<(), Invalid> {
    if s.trim().is_empty() {
        return Err(Invalid::from("the selector is empty"));
    }
    // Split on commas outside parentheses.
    let mut terms = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                terms.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if depth < 0 {
            return Err(Invalid::from("unbalanced ')'"));
        }
    }
    if depth != 0 {
        return Err(Invalid::from("unbalanced '('"));
    }
    terms.push(&s[start..]);
    for t in terms {
        let t = t.trim();
        let bad = || format!("'{t}' is not key=value, key!=value, key, !key or key in (...)");
        let (key, value) = if let Some((k, v)) = t.split_once("!=") {
            (k, Some(v))
        } else if let Some((k, v)) = t.split_once("==") {
            (k, Some(v))
        } else if let Some((k, v)) = t.split_once('=') {
            (k, Some(v))
        } else if let Some((k, rest)) = t.split_once(" in ").or_else(|| t.split_once(" notin ")) {
            let rest = rest.trim();
            let inner = rest
                .strip_prefix('(')
                .and_then(|r| r.strip_suffix(')'))
                .ok_or_else(bad)?;
            for v in inner.split(',') {
                label_value(v.trim()).map_err(|_| bad())?;
            }
            (k, None)
        } else {
            (t.strip_prefix('!').unwrap_or(t), None)
        };
        label_key(key.trim()).map_err(|_| bad())?;
        if let Some(v) = value {
            label_value(v.trim()).map_err(|_| bad())?;
        }
    }
    Ok(())
}

pub(super) fn label_key(k: &str) -> Result<(), ()> {
    let name = match k.rsplit_once('/') {
        Some((prefix, name)) => {
            dns_subdomain(prefix).map_err(|_| ())?;
            name
        }
        None => k,
    };
    if name.is_empty() || name.len() > 63 {
        return Err(());
    }
    label_value(name)
}

pub(super) fn label_value(v: &str) -> Result<(), ()> {
    let ok = v.len() <= 63
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        && v.bytes().next().is_none_or(|b| b.is_ascii_alphanumeric())
        && v.bytes().last().is_none_or(|b| b.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(())
    }
}

pub(super) fn prometheus_name(m: &str) -> bool {
    let mut b = m.bytes();
    b.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_' || c == b':')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b':')
}
