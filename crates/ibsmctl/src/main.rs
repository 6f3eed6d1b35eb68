//! ibsmctl: the ibsm command-line tool.
//!
//! `ibsmctl discover --fabric <spec> [--json] [--write-net FILE]` walks a fabric
//! by directed route and prints what it found. The fabric is an embedded
//! simulator (`sim:NETFILE`, `gen:fat-tree:K`, ...) or a umad port (`umad`,
//! also under ibsim's umad2sim with LD_PRELOAD). Exit codes: 0 success, 2 bad
//! usage or input (clap's own code for usage errors, and ours for a bad
//! `--fabric` or unreadable net file), 1 a runtime failure.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use ibsm_transport::{run_discovery, DiscoverConfig, FabricSpec, TransportError};

#[derive(Parser, Debug)]
#[command(
    name = "ibsmctl",
    version,
    about = "Control and inspect the ibsm InfiniBand subnet manager"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Discover a fabric by directed route and print its size.
    Discover {
        /// sim:NETFILE | gen:fat-tree:K | gen:fat-tree2:K | gen:random:SEED | umad[:CA[:PORT]]
        #[arg(long)]
        fabric: String,
        /// Print {"nodes":..,"switches":..,"hcas":..,"ports":..,"links":..} on stdout.
        #[arg(long)]
        json: bool,
        /// Also write the discovered topology as an ibnetdiscover-format net file.
        #[arg(long, value_name = "FILE")]
        write_net: Option<PathBuf>,
        /// MADs kept in flight.
        #[arg(long, default_value_t = 16)]
        window: usize,
        /// Per-MAD timeout in milliseconds.
        #[arg(long, default_value_t = 200)]
        timeout_ms: u64,
        /// Retries per MAD before a node counts as unreachable.
        #[arg(long, default_value_t = 3)]
        retries: u32,
    },
}

/// A failure caused by the user's input (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct UsageError(String);

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("ibsmctl: {err:#}");
            if err.downcast_ref::<UsageError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Discover {
            fabric,
            json,
            write_net,
            window,
            timeout_ms,
            retries,
        } => discover(&fabric, json, write_net, window, timeout_ms, retries),
    }
}

fn discover(
    fabric: &str,
    json: bool,
    write_net: Option<PathBuf>,
    window: usize,
    timeout_ms: u64,
    retries: u32,
) -> anyhow::Result<()> {
    let spec = FabricSpec::parse(fabric).map_err(|e| UsageError(e.to_string()))?;
    let mut device = spec
        .open(Duration::from_millis(timeout_ms.max(1)))
        .map_err(|e| match e {
            TransportError::Spec(e) => anyhow::Error::new(UsageError(e.to_string())),
            other => anyhow::Error::new(other).context(format!("cannot open fabric {fabric}")),
        })?;
    let mut config = DiscoverConfig::default();
    config.transactions.window = window.max(1);
    config.transactions.timeout = Duration::from_millis(timeout_ms.max(1));
    config.transactions.retries = retries;
    let report = run_discovery(&mut device, &config)
        .with_context(|| format!("discovery of {fabric} failed"))?;
    let topo = &report.result.topology;
    let c = topo.counts();
    for u in &report.result.unreachable {
        eprintln!("warning: no answer on directed route {:?}", u.path);
    }
    if json {
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
    if let Some(path) = write_net {
        let text = ibsm_fabric::netfile::write(topo);
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
