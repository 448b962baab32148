//! `--metrics-listen` and its companions on `run`, `load` and `agent`: the flags, the listener
//! bound before anything runs (a port in use is bad input), and the linger at the end.

use crate::CliError;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Where live OpenMetrics are served.
#[derive(clap::Args, Clone)]
pub(crate) struct MetricsFlags {
    /// Serve live OpenMetrics at http://ADDR/metrics while it runs, for Prometheus: a port
    /// alone (9464) listens on 127.0.0.1; HOST:PORT takes an IP address or localhost.
    #[arg(long = "metrics-listen", value_name = "ADDR")]
    metrics_listen: Option<String>,
    /// Allow --metrics-listen on an address other machines can reach (not loopback).
    #[arg(long = "metrics-allow-remote")]
    metrics_allow_remote: bool,
}

/// How long the final values stay up for a last scrape.
#[derive(clap::Args, Clone)]
pub(crate) struct LingerFlag {
    /// With --metrics-listen: after the run (or Ctrl-C), keep serving /metrics until a scrape
    /// has read the final values, at most this long (0s: exit at once).
    #[arg(
        long = "metrics-linger",
        value_name = "DURATION",
        default_value = "15s"
    )]
    metrics_linger: String,
}

impl LingerFlag {
    /// The linger, checked.
    fn duration(&self) -> Result<Duration, CliError> {
        units::parse_duration(&self.metrics_linger)
            .map_err(|e| CliError::usage(format!("--metrics-linger: {e}")))
    }
}

/// A running metrics endpoint.
pub(crate) struct Live {
    /// What the loads and cases feed.
    pub registry: Arc<openmetrics::Registry>,
    server: openmetrics::Server,
    linger: Duration,
}

impl MetricsFlags {
    /// Whether --metrics-listen was given (a stream load refuses it: it feeds no live metrics).
    pub(crate) fn is_set(&self) -> bool {
        self.metrics_listen.is_some()
    }

    /// Binds and starts serving when asked (None otherwise). Called before the run starts, so a
    /// bad or taken address stops the command with one line and exit 2.
    pub(crate) fn start(
        &self,
        info: openmetrics::Info,
        linger: Option<&LingerFlag>,
    ) -> Result<Option<Live>, CliError> {
        let linger = match linger {
            Some(l) => l.duration()?,
            None => Duration::ZERO,
        };
        let Some(addr) = &self.metrics_listen else {
            if self.metrics_allow_remote {
                return Err(CliError::usage(
                    "--metrics-allow-remote goes with --metrics-listen",
                ));
            }
            return Ok(None);
        };
        let listener = openmetrics::bind(addr, self.metrics_allow_remote)
            .map_err(|e| CliError::usage(e.to_string()))?;
        let registry = openmetrics::Registry::new(info);
        let server = openmetrics::serve(listener, registry.clone())
            .map_err(|e| CliError::runtime(format!("cannot serve the metrics: {e}")))?;
        if openmetrics::parse_listen(addr, true).is_ok_and(|a| a.port() == 0) {
            // The system chose the port: say which. (Any other address is the one given, and
            // bad input found after this point stays one line.)
            eprintln!("proxybench: metrics at http://{}/metrics", server.addr());
        }
        Ok(Some(Live {
            registry,
            server,
            linger,
        }))
    }
}

impl Live {
    /// The run is over: the values are final. Keeps serving until a scrape has read them (at
    /// most the linger; a Ctrl-C during it ends it, a second one exits at once).
    pub(crate) fn finish(&self, stop: &AtomicBool) {
        self.registry.finish();
        if self.linger.is_zero() {
            return;
        }
        eprintln!(
            "proxybench: serving the final metrics at http://{}/metrics until a scrape reads them \
             (at most {:?})",
            self.server.addr(),
            self.linger
        );
        if !self.server.linger(self.linger, stop) {
            eprintln!("proxybench: no scrape read the final metrics");
        }
    }
}

/// A flag Ctrl-C (or SIGTERM) sets, registered beside the run's own handlers, that ends a
/// linger begun after the run ended by itself.
pub(crate) fn linger_flag() -> Result<Arc<AtomicBool>, CliError> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())
            .map_err(|e| CliError::runtime(format!("cannot install signal handlers: {e}")))?;
    }
    Ok(stop)
}
