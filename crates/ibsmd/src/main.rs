//! `ibsmd`: run one SM on a fabric, or the three-instance demo.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};
use ibsm_transport::FabricSpec;
use ibsmd::demo::Demo;
use ibsmd::{Instance, InstanceConfig};

/// InfiniBand subnet manager daemon.
#[derive(Debug, Parser)]
#[command(
    name = "ibsmd",
    version,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    /// umad[:CA[:PORT]] (kernel or umad2sim) or sim:NETFILE / gen:... (embedded fabric).
    #[arg(long, required = true, value_parser = FabricSpec::parse)]
    fabric: Option<FabricSpec>,
    /// SM priority, 0..=15 (higher wins).
    #[arg(long, required = true, value_parser = clap::value_parser!(u8).range(0..=15))]
    priority: Option<u8>,
    /// SM_Key (decimal or 0x hex). OpenSM's default is 1.
    #[arg(long, default_value = "1", value_parser = parse_key)]
    sm_key: u64,
    /// Standby: interval between SMInfo polls of the master.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    poll_interval_ms: u64,
    /// Standby: unanswered polls in a row before the master is declared dead.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    poll_retries: u32,
    /// gRPC control API address (plaintext).
    #[arg(long, default_value = "127.0.0.1:50051")]
    grpc: SocketAddr,
    /// State directory (created; reserved for the replicated SM state).
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Three SM instances on one embedded fabric, gRPC on base-port..base-port+2.
    Demo {
        /// gen:fat-tree:K, gen:fat-tree2:K, gen:random:SEED or sim:NETFILE.
        #[arg(long, default_value = "gen:fat-tree:4", value_parser = FabricSpec::parse)]
        fabric: FabricSpec,
        /// First gRPC port.
        #[arg(long, default_value_t = 50051)]
        base_port: u16,
    },
}

fn parse_key(s: &str) -> Result<u64, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => s.parse(),
    };
    r.map_err(|e| format!("SM_Key {s:?} is not a 64-bit number ({e})"))
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new("info,ibsm_core::election=warn")
            }),
        )
        .init();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ibsmd: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(async move {
        match cli.cmd {
            Some(Cmd::Demo { fabric, base_port }) => run_demo(fabric, base_port).await,
            None => run_daemon(cli).await,
        }
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ibsmd: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Resolves on Ctrl-C or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(t) => t,
                Err(_) => {
                    let _ = ctrl_c.await;
                    return;
                }
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

async fn run_daemon(cli: Cli) -> anyhow::Result<()> {
    let (Some(fabric), Some(priority)) = (cli.fabric, cli.priority) else {
        anyhow::bail!("--fabric and --priority are required");
    };
    if let Some(dir) = &cli.data_dir {
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("--data-dir {}: {e}", dir.display()))?;
    }
    let mut cfg = InstanceConfig::new("ibsmd", priority);
    cfg.sm_key = cli.sm_key;
    cfg.poll_interval = Duration::from_millis(cli.poll_interval_ms);
    cfg.poll_retries = cli.poll_retries;
    let (dev, keepalive) = ibsmd::open_fabric(&fabric)?;
    let inst = Arc::new(Instance::spawn(cfg, dev, keepalive)?);
    let (addr, serve) = ibsmd::server::bind(Arc::clone(&inst), cli.grpc, shutdown_signal()).await?;
    tracing::info!(%addr, "gRPC control API listening");
    let server = tokio::spawn(serve);
    // Stop when the server stops (signal) or the instance dies.
    let watcher = Arc::clone(&inst);
    let died = async move {
        while watcher.is_running() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    tokio::select! {
        r = server => { r??; }
        _ = died => { anyhow::bail!("the SM instance stopped; see the log above"); }
    }
    tokio::task::spawn_blocking(move || inst.shutdown()).await?;
    Ok(())
}

async fn run_demo(fabric: FabricSpec, base_port: u16) -> anyhow::Result<()> {
    let mut demo = Demo::start(&fabric, base_port).await?;
    println!("ibsmd demo: three SM instances on one embedded fabric (one process: the simulator is in-process)");
    for m in &demo.members {
        println!(
            "  {} on {:<24} priority {:>2}  gRPC http://{}",
            m.name, m.host, m.priority, m.endpoint
        );
    }
    if let Some(first) = demo.members.first() {
        println!(
            "try:  cargo run --release -p ibsmctl -- --endpoint http://{} status",
            first.endpoint
        );
    }
    println!("Ctrl-C to stop.");
    shutdown_signal().await;
    demo.stop().await;
    Ok(())
}
