//! The `proxybench load` arguments of an engine config: what a coordinator that holds a
//! [`load::Config`] (a scenario's load, a load started on Kubernetes) sends its agents, which
//! parse them as `proxybench load` does. Files the load reads (the request body, the CA file)
//! travel beside the arguments, named by where the agent will find them, so any bytes do.

use load::{Arrivals, IoMode};
use std::time::Duration;

/// The arguments, and the files they name: (file name, contents), the agent's copy living at
/// `DIR/NAME` where `dir` is the directory given.
pub struct LoadArgv {
    /// Everything after `proxybench load`, the URL last.
    pub argv: Vec<String>,
    /// Files to put in `dir` on the agent's side.
    pub files: Vec<(String, Vec<u8>)>,
}

/// A duration as `load -d` reads it, exactly (the largest unit that divides it).
pub fn duration_arg(d: Duration) -> String {
    let ns = d.as_nanos();
    for (unit, per) in [("s", 1_000_000_000u128), ("ms", 1_000_000), ("us", 1_000)] {
        if ns % per == 0 {
            return format!("{}{unit}", ns / per);
        }
    }
    format!("{ns}ns")
}

/// The arguments that give an agent `cfg` (the split then sets its share), with the body and
/// the CA file as files in `dir`. Fails only when the CA file cannot be read.
pub fn load_argv(cfg: &load::Config, dir: &str) -> Result<LoadArgv, crate::Error> {
    let mut a: Vec<String> = Vec::new();
    let mut files = Vec::new();
    let push = |a: &mut Vec<String>, k: &str, v: String| {
        a.push(k.to_string());
        a.push(v);
    };
    push(&mut a, "-c", cfg.connections.to_string());
    push(
        &mut a,
        "-t",
        cfg.threads.min(cfg.connections).max(1).to_string(),
    );
    if let Some(d) = cfg.duration {
        push(&mut a, "-d", duration_arg(d));
    }
    if let Some(n) = cfg.requests {
        push(&mut a, "-n", n.to_string());
    }
    if let Some(r) = cfg.rate {
        // Rust prints the shortest text that reads back as the same f64.
        push(&mut a, "-R", format!("{r}"));
        push(
            &mut a,
            "--arrivals",
            match cfg.arrivals {
                Arrivals::Even => "even",
                Arrivals::Poisson => "poisson",
            }
            .to_string(),
        );
    }
    push(&mut a, "--seed", cfg.seed.to_string());
    push(&mut a, "--timeout", duration_arg(cfg.timeout));
    push(&mut a, "-X", cfg.method.clone());
    for (k, v) in &cfg.headers {
        push(&mut a, "-H", format!("{k}: {v}"));
    }
    if let Some(b) = &cfg.body {
        files.push(("body".to_string(), b.clone()));
        push(&mut a, "--body", format!("@{dir}/body"));
    }
    if let Some(h) = &cfg.host {
        push(&mut a, "--host", h.clone());
    }
    for r in &cfg.resolve {
        let addr = match r.addr {
            std::net::IpAddr::V6(v6) => format!("[{v6}]"),
            v4 => v4.to_string(),
        };
        push(&mut a, "--resolve", format!("{}:{}:{addr}", r.host, r.port));
    }
    if let Some(ca) = &cfg.cacert {
        let pem = std::fs::read(ca)
            .map_err(|e| crate::Error::Config(format!("cannot read {}: {e}", ca.display())))?;
        files.push(("cacert.pem".to_string(), pem));
        push(&mut a, "--cacert", format!("{dir}/cacert.pem"));
    }
    push(
        &mut a,
        "--io",
        match cfg.io {
            IoMode::Auto => "auto",
            IoMode::Epoll => "epoll",
            IoMode::Uring => "uring",
        }
        .to_string(),
    );
    if cfg.http2 {
        a.push("--http2".to_string());
        push(&mut a, "-m", cfg.streams.to_string());
    }
    if cfg.insecure {
        a.push("-k".to_string());
    }
    if cfg.retry_idle_closed {
        a.push("--retry-idle-closed".to_string());
    }
    a.push(cfg.url.clone());
    Ok(LoadArgv { argv: a, files })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_keep_every_nanosecond() {
        assert_eq!(duration_arg(Duration::from_secs(10)), "10s");
        assert_eq!(duration_arg(Duration::from_millis(1500)), "1500ms");
        assert_eq!(duration_arg(Duration::from_micros(2345)), "2345us");
        assert_eq!(duration_arg(Duration::from_nanos(7)), "7ns");
        for d in [
            Duration::from_millis(1500),
            Duration::from_nanos(123_456_789_012),
        ] {
            assert_eq!(units::parse_duration(&duration_arg(d)).unwrap(), d);
        }
    }

    #[test]
    fn body_and_ca_go_as_files() {
        let dir = std::env::temp_dir().join(format!("pb-argv-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, b"PEM").unwrap();
        let mut cfg = load::Config::new("https://cafe.example.com:8443/tea").unwrap();
        cfg.body = Some(b"@not-a-file\xff".to_vec());
        cfg.cacert = Some(ca);
        cfg.rate = Some(1333.3);
        cfg.add_header_line("X-A: b: c").unwrap();
        cfg.resolve
            .push(load::Resolve::parse("cafe.example.com:8443:127.0.0.1").unwrap());
        let a = load_argv(&cfg, "/var/run/pb").unwrap();
        let s = a.argv.join(" ");
        assert!(s.contains("--body @/var/run/pb/body"), "{s}");
        assert!(s.contains("--cacert /var/run/pb/cacert.pem"), "{s}");
        assert!(s.contains("-R 1333.3 --arrivals even"), "{s}");
        assert!(
            s.contains("--resolve cafe.example.com:8443:127.0.0.1"),
            "{s}"
        );
        assert!(s.ends_with(" https://cafe.example.com:8443/tea"), "{s}");
        assert_eq!(a.argv.iter().filter(|x| *x == "-H").count(), 1);
        assert!(a.argv.contains(&"X-A: b: c".to_string()));
        assert_eq!(
            a.files,
            vec![
                ("body".to_string(), b"@not-a-file\xff".to_vec()),
                ("cacert.pem".to_string(), b"PEM".to_vec())
            ]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
