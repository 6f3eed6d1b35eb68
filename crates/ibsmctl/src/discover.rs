//! `ibsmctl discover`: a directed-route walk of a fabric (embedded simulator or a
//! umad port, also under umad2sim), without any daemon.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use ibsm_transport::{run_discovery, DiscoverConfig, FabricSpec, TransportError};

use crate::args::UsageError;

/// Settings of one discovery run.
pub struct DiscoverArgs<'a> {
    pub fabric: &'a str,
    pub json: bool,
    pub write_net: Option<PathBuf>,
    pub window: usize,
    pub timeout_ms: u64,
    pub retries: u32,
}

pub fn discover(a: DiscoverArgs<'_>) -> anyhow::Result<()> {
    let fabric = a.fabric;
    let spec = FabricSpec::parse(fabric).map_err(|e| UsageError(e.to_string()))?;
    let mut device = spec
        .open(Duration::from_millis(a.timeout_ms.max(1)))
        .map_err(|e| match e {
            TransportError::Spec(e) => anyhow::Error::new(UsageError(e.to_string())),
            other => anyhow::Error::new(other).context(format!("cannot open fabric {fabric}")),
        })?;
    let mut config = DiscoverConfig::default();
    config.transactions.window = a.window.max(1);
    config.transactions.timeout = Duration::from_millis(a.timeout_ms.max(1));
    config.transactions.retries = a.retries;
    let report = run_discovery(&mut device, &config)
        .with_context(|| format!("discovery of {fabric} failed"))?;
    let topo = &report.result.topology;
    let c = topo.counts();
    for u in &report.result.unreachable {
        eprintln!("warning: no answer on directed route {:?}", u.path);
    }
    if a.json {
        let v = serde_json::json!({
            "nodes": c.nodes, "switches": c.switches, "hcas": c.hcas,
            "ports": c.ports, "links": c.links,
        });
        println!("{v}");
    } else {
        println!("nodes:       {}", c.nodes);
        println!("switches:    {}", c.switches);
        println!("hcas:        {}", c.hcas);
        println!("ports:       {}", c.ports);
        println!("links:       {}", c.links);
        println!("unreachable: {}", report.result.unreachable.len());
        println!(
            "smps:        {} sent, {} retries, {} failed in {:.3} s",
            report.counters.sent,
            report.counters.retries,
            report.counters.failures,
            report.elapsed.as_secs_f64()
        );
    }
    if let Some(path) = a.write_net {
        let text = ibsm_fabric::netfile::write(topo);
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
