//! What travels with a load's config to its agents. A coordinator sends each agent the
//! [`load::Config`] itself (JSON, in [`crate::proto::Job`]); the request body travels inside it,
//! and the one file it names, the CA file, is sent beside it: placed in the agents' directory
//! (a local directory, or a pod's Secret volume), with the config naming the agents' copy.

/// The CA file's name in the agents' directory.
pub const CACERT: &str = "cacert.pem";

/// The files to put in the agents' directory, (name, contents): the CA file `cfg` names, if
/// any. Fails only when it cannot be read.
pub fn agent_files(cfg: &load::Config) -> Result<Vec<(String, Vec<u8>)>, crate::Error> {
    let mut files = Vec::new();
    if let Some(ca) = &cfg.cacert {
        let pem = std::fs::read(ca)
            .map_err(|e| crate::Error::Config(format!("cannot read {}: {e}", ca.display())))?;
        files.push((CACERT.to_string(), pem));
    }
    Ok(files)
}

/// `cfg` as agents whose directory is `dir` run it: the CA file is their copy there.
pub fn config_at(cfg: &load::Config, dir: &str) -> load::Config {
    let mut c = cfg.clone();
    if c.cacert.is_some() {
        c.cacert = Some(std::path::Path::new(dir).join(CACERT));
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Every field an agent runs with arrives as the coordinator holds it, through the JSON of
    /// a job, bytes of the body and sub-microsecond durations included.
    #[test]
    fn the_config_arrives_whole_and_the_ca_file_beside_it() {
        let dir = std::env::temp_dir().join(format!("pb-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = dir.join("ca.pem");
        std::fs::write(&ca, b"PEM").unwrap();
        let mut cfg = load::Config::new("https://cafe.example.com:8443/tea").unwrap();
        cfg.connections = 12;
        cfg.threads = 3;
        cfg.duration = Some(Duration::from_nanos(2_345_678_901));
        cfg.requests = Some(5000);
        cfg.rate = Some(1333.3);
        cfg.arrivals = load::Arrivals::Poisson;
        cfg.seed = 99;
        cfg.timeout = Duration::from_micros(1500);
        cfg.method = "POST".into();
        cfg.add_header_line("X-Trace: a: b").unwrap();
        cfg.body = Some(b"@starts-with-at\n\xff".to_vec());
        cfg.host = Some("tea.example.com".into());
        cfg.resolve
            .push(load::Resolve::parse("cafe.example.com:8443:127.0.0.2").unwrap());
        cfg.resolve.push(load::Resolve::parse("x:1:[::1]").unwrap());
        cfg.insecure = true;
        cfg.cacert = Some(ca);
        cfg.io = load::IoMode::Epoll;
        cfg.http2 = true;
        cfg.streams = 7;
        cfg.retry_idle_closed = true;
        assert_eq!(
            agent_files(&cfg).unwrap(),
            vec![(CACERT.to_string(), b"PEM".to_vec())]
        );
        let sent = config_at(&cfg, "/var/run/pb");
        let job = crate::coordinator::split(&sent, 3).unwrap().remove(0);
        let text = serde_json::to_string(&job).unwrap();
        let got: crate::proto::Job = serde_json::from_str(&text).unwrap();
        let got = got.config;
        assert_eq!(got.url, cfg.url);
        assert_eq!(got.connections, 12);
        assert_eq!(got.threads, 3);
        assert_eq!(got.duration, cfg.duration);
        assert_eq!(got.requests, cfg.requests);
        assert_eq!(got.rate, cfg.rate);
        assert_eq!(got.arrivals, cfg.arrivals);
        assert_eq!(got.seed, 99);
        assert_eq!(got.timeout, cfg.timeout);
        assert_eq!(got.method, "POST");
        assert_eq!(got.headers, cfg.headers);
        assert_eq!(got.body, cfg.body);
        assert_eq!(got.host, cfg.host);
        assert_eq!(got.resolve, cfg.resolve);
        assert!(got.insecure);
        assert_eq!(
            got.cacert,
            Some(std::path::PathBuf::from("/var/run/pb/cacert.pem"))
        );
        assert_eq!(got.io, load::IoMode::Epoll);
        assert!(got.http2);
        assert_eq!(got.streams, 7);
        assert!(got.retry_idle_closed);
        // Without a CA file nothing travels beside the config, and its path is left alone.
        let plain = load::Config::new("http://127.0.0.1:8080/coffee").unwrap();
        assert!(agent_files(&plain).unwrap().is_empty());
        assert_eq!(config_at(&plain, "/x").cacert, None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
