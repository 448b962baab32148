//! A case's load run by agents: started on the platform, driven through the coordinator, and
//! merged exactly into one result.

use super::case::{Distributed, LoadOut};
use crate::error::{LoadError, LoadProblem};
use crate::platform;
use crate::progress::Progress;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Runs one load on its agents through the coordinator (the start at `origin` + the load's
/// start, or as soon as the agents have their jobs), then stops the agents. The outcome is the
/// merge, as a local load's; the agents' parts and rows go to the record.
pub(super) fn on_agents(
    name: &str,
    mut agents: Box<dyn platform::Agents>,
    cfg: &load::Config,
    (origin_unix_ns, start): (u64, Duration),
    stop: Arc<AtomicBool>,
    (progress, feed): (&Progress, Option<&openmetrics::LoadFeed>),
) -> Result<LoadOut, LoadError> {
    let show = |row: &model::Second, hdr: &model::SecondHdr, _: &[Option<u64>]| {
        if let Some(f) = feed {
            f.second(row, hdr);
        }
        progress.second(name, row)
    };
    let run = platform::agents::run_load(
        agents.as_ref(),
        cfg,
        Some((origin_unix_ns, start)),
        Some(stop),
        Some(&show),
    );
    let place = agents.place().to_string();
    let left = agents.close();
    let d = run.map_err(|e| {
        LoadError::new(
            name,
            LoadProblem::Agents {
                source: e.into(),
                left: left.clone(),
            },
        )
    })?;
    let record = model::DistributedLoad {
        load: name.to_string(),
        place,
        files: String::new(),
        agents: d.merged.ext.agents.clone(),
        clock_uncertainty_us: d
            .parts
            .iter()
            .map(|p| p.ext.agent.as_ref().map_or(0, |a| a.clock_uncertainty_us))
            .collect(),
        lost: d.lost,
    };
    let mut summary = d.merged.summary;
    summary.name = name.to_string();
    Ok(LoadOut {
        outcome: load::Outcome {
            summary,
            records: None,
            seconds_hdr: d.merged.ext.seconds_hdr,
            origin_unix_ns: d.merged.ext.origin_unix_ns,
        },
        distributed: Some(Distributed {
            record,
            parts: d.parts,
            left,
        }),
    })
}
