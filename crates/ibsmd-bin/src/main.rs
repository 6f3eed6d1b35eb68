//! `ibsmd`: run one SM on a fabric, or the three-instance demo.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};
use ibsm_demo::demo::{Demo, DemoOptions};
use ibsm_transport::FabricSpec;
use ibsmd::auth::{Security, Token};
use ibsmd::config::{parse_m_key, parse_sm_guid, parse_sm_key, FileConfig};
use ibsmd::{Instance, InstanceConfig};

mod settings;
use settings::{merge, DaemonSettings};

/// InfiniBand subnet manager daemon.
#[derive(Debug, Parser)]
#[command(name = "ibsmd", version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    /// TOML file with any of these options (see deploy/ibsmd.toml); the command line wins.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// umad[:CA[:PORT]] (kernel or umad2sim) or sim:NETFILE / gen:... (embedded fabric). Required.
    #[arg(long, value_parser = FabricSpec::parse)]
    fabric: Option<FabricSpec>,
    /// SM priority, 0..=15 (higher wins). Required.
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=15))]
    priority: Option<u8>,
    /// SM_Key (decimal or 0x hex). Default 1 (OpenSM's default).
    #[arg(long, value_parser = parse_sm_key)]
    sm_key: Option<u64>,
    /// Standby: interval between SMInfo polls of the master [default: 25].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    poll_interval_ms: Option<u64>,
    /// Standby: interval of the quick re-polls after a missed poll [default: 20].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    repoll_interval_ms: Option<u64>,
    /// Standby: unanswered polls in a row before the master is declared dead [default: 3].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100))]
    poll_retries: Option<u32>,
    /// Take MASTER when the subnet has had no master this long and the SM that
    /// outranks us still answers STANDBY (an OpenSM polling every 10 s), then hand it
    /// back with HANDOVER once that SM is ready; 0 waits for it however long
    /// (IBA's rule alone) [default: 1000].
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    masterless_takeover_ms: Option<u64>,
    /// gRPC control API address [default: 127.0.0.1:50051].
    #[arg(long)]
    grpc: Option<SocketAddr>,
    /// Serve Prometheus metrics on http://ADDR/metrics (off unless given).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,
    /// State directory (created); with --node-id it holds the replicated fabric state.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// This instance's id in the replication cluster (Raft on the --grpc port; needs --data-dir).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    node_id: Option<u64>,
    /// A member of the first replication cluster, ID=HOST:PORT, this node included (repeat).
    /// The lowest id bootstraps it once. Without --peer, --node-id waits for Cluster/AddMember.
    #[arg(long = "peer", value_name = "ID=ADDR")]
    peers: Vec<ibsm_replica::PeerArg>,
    /// Require `authorization: Bearer <token>` on gRPC calls; FILE holds the token (>= 16 visible ASCII chars).
    #[arg(long, value_name = "FILE")]
    auth_token_file: Option<PathBuf>,
    /// A second token (FILE) that may only read: every Get/List/Watch, nothing that changes the fabric or the cluster.
    #[arg(long, value_name = "FILE")]
    read_only_token_file: Option<PathBuf>,
    /// Client certificates whose subject CN or a DNS name is NAME are read-only (repeatable; needs mutual TLS).
    #[arg(long = "read-only-client-name", value_name = "NAME")]
    read_only_client_names: Vec<String>,
    /// The replication cluster's secret (FILE, >= 16 visible ASCII chars, never the control token): every Raft RPC carries it. With --node-id, this or mutual TLS is required.
    #[arg(long, value_name = "FILE")]
    cluster_secret_file: Option<PathBuf>,
    /// Bootstrap a new replication cluster even though --data-dir says it was a member of one (its store was lost). Use once, then drop it.
    #[arg(long)]
    force_bootstrap: bool,
    /// TLS certificate chain (PEM) of this server.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// TLS private key (PEM) of this server.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// CA (PEM) that client certificates must chain to: mutual TLS.
    #[arg(long, value_name = "FILE")]
    tls_client_ca: Option<PathBuf>,
    /// Run the gRPC API with no authentication at all (loud warning at start).
    #[arg(long)]
    insecure_plaintext: bool,
    /// Test facility, never for production: let an admin cut and heal this member's Raft
    /// traffic through ibsm.v1.FaultInjection/SetRaftIsolation; needs replication
    /// (--node-id). The demo on ibsim starts its members with it for its Raft drills.
    #[arg(long)]
    fault_injection: bool,
    /// Master: LMC, 2^LMC LIDs per end port, 0..=7 [default: 0].
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=7))]
    lmc: Option<u8>,
    /// Master: M_Key programmed on every port and carried on every SMP (decimal or 0x hex) [default: 0 = none].
    #[arg(long, value_parser = parse_m_key)]
    m_key: Option<u64>,
    /// Master: M_KeyProtectBits 0..=3 (1 hides the key from Gets, 2 refuses Gets without it) [default: 0].
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=3))]
    m_key_protection_level: Option<u8>,
    /// Master: M_KeyLeasePeriod in seconds, 0 = protection never lapses [default: 0].
    #[arg(long, value_parser = clap::value_parser!(u16))]
    m_key_lease_period: Option<u16>,
    /// Master: routing engine, minhop or updown [default: minhop].
    #[arg(long)]
    routing: Option<String>,
    /// Master: up/down root switch NodeGUID (repeatable; default: found automatically).
    #[arg(long, value_name = "GUID")]
    root_guid: Vec<String>,
    /// Master: seconds between light sweeps [default: 2].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    sweep_interval_s: Option<u64>,
    /// Master: seconds between periodic heavy sweeps, 0 = only on change (traps, a light sweep that sees one) [default: 60].
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=86_400))]
    heavy_sweep_interval_s: Option<u64>,
    /// Master: partition NAME=PKEY[,ipoib[,rate=R,mtu=M,sl=S,scope=C,Q_Key=Q]]:GUID[:full|limited],... (repeatable; ipoib: the partition's IPoIB broadcast group, as in OpenSM's partitions.conf).
    #[arg(long, value_name = "SPEC")]
    partition: Vec<String>,
    /// Master: SMPs kept in flight, 1..=1024 [default: 64].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1024))]
    smp_window: Option<u64>,
    /// Master: a trap-triggered heavy sweep waits this long after the last one ended, 0 = no hold-down [default: 1000].
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    trap_sweep_hold_down_ms: Option<u64>,
    /// Master: topology cap, nodes one discovery records before it stops growing [default: 65536].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    max_nodes: Option<u64>,
    /// Trust only these SMs (port GUID, repeatable; this SM's own port is always trusted):
    /// any other is never followed nor handed over to, and reads SM_Key 0 [default: trust all].
    #[arg(long = "trusted-sm-guid", value_name = "GUID", value_parser = parse_sm_guid)]
    trusted_sm_guids: Vec<u64>,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Three SM instances on one embedded fabric (or on ibsim: --fabric ibsim:NETFILE), gRPC on base-port..base-port+2 (loopback, plaintext unless --auth-token-file).
    Demo {
        /// TOML file; its [demo] table holds these options.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// gen:fat-tree:K, gen:fat-tree2:K, gen:random:SEED or sim:NETFILE (the embedded fabric, one process) [default: gen:fat-tree:4];
        /// or ibsim:NETFILE: ibsim on NETFILE and, under umad2sim, three `ibsmd --fabric umad` processes
        /// on three HCAs plus an SMInfo poller process on a fourth; the Demo service (drills) then listens
        /// on base-port+3, printed first (needs ibsim-utils; Ctrl-C stops everything).
        #[arg(long, value_parser = parse_demo_fabric)]
        fabric: Option<DemoFabric>,
        /// First gRPC port [default: 50051].
        #[arg(long)]
        base_port: Option<u16>,
        /// Serve Prometheus metrics of all three instances on http://ADDR/metrics.
        #[arg(long, value_name = "ADDR")]
        metrics: Option<SocketAddr>,
        /// Require a bearer token on the demo's endpoints too.
        #[arg(long, value_name = "FILE")]
        auth_token_file: Option<PathBuf>,
        /// Where the three replicas live (sm1/ sm2/ sm3/ under it) [default: a temp dir removed at exit].
        #[arg(long, value_name = "DIR")]
        data_dir: Option<PathBuf>,
    },
    /// Internal (ibsmd demo --fabric ibsim:): read SM ports' SMInfo by directed route every 10 ms
    /// from this umad port and print one JSON line per change on stdout.
    #[command(hide = true)]
    SminfoPoll {
        /// umad[:CA[:PORT]] (run under umad2sim with SIM_HOST for ibsim).
        #[arg(long, default_value = "umad", value_parser = FabricSpec::parse)]
        fabric: FabricSpec,
        /// NAME=P1,P2,...: an SM port's name and directed route (egress ports, ours first). Repeat.
        #[arg(long = "target", value_name = "NAME=PATH", value_parser = ibsm_demo::ibsim::parse_target, required = true)]
        targets: Vec<(String, Vec<u8>)>,
    },
}

/// What `ibsmd demo --fabric` names.
#[derive(Debug, Clone)]
enum DemoFabric {
    /// The embedded simulator (one process).
    Embedded(FabricSpec),
    /// ibsim on this net file, members as processes under umad2sim.
    Ibsim(PathBuf),
}

fn parse_demo_fabric(s: &str) -> Result<DemoFabric, String> {
    match s.strip_prefix(ibsm_demo::ibsim::IBSIM_PREFIX) {
        Some("") => Err("ibsim:NETFILE needs a net file".into()),
        Some(path) => Ok(DemoFabric::Ibsim(PathBuf::from(path))),
        None => FabricSpec::parse(s)
            .map(DemoFabric::Embedded)
            .map_err(|e| e.to_string()),
    }
}

/// Exit code for a bad command line or config file.
const EXIT_USAGE: u8 = 2;

fn load_config(path: Option<&PathBuf>) -> Result<FileConfig, std::process::ExitCode> {
    match path {
        None => Ok(FileConfig::default()),
        Some(p) => FileConfig::load(p).map_err(|e| {
            eprintln!("ibsmd: {e}");
            std::process::ExitCode::from(EXIT_USAGE)
        }),
    }
}

fn main() -> std::process::ExitCode {
    ibsmd::install_panic_exit();
    let cli = Cli::parse();
    // Everything from files and flags is checked before anything starts.
    enum Plan {
        Daemon(Box<DaemonSettings>, Security, ibsm_replica::PeerAuth),
        Demo(FabricSpec, DemoOptions, Option<SocketAddr>),
        IbsimDemo(ibsm_demo::ibsim::IbsimDemoOptions),
        SminfoPoll(FabricSpec, Vec<(String, Vec<u8>)>),
    }
    let plan = match cli.cmd {
        Some(Cmd::Demo {
            config,
            fabric,
            base_port,
            metrics,
            auth_token_file,
            data_dir,
        }) => {
            let file = match load_config(config.as_ref()) {
                Ok(f) => f.demo,
                Err(code) => return code,
            };
            if let Some(DemoFabric::Ibsim(netfile)) = &fabric {
                if auth_token_file.is_some() || file.auth_token_file.is_some() {
                    eprintln!("ibsmd: demo on ibsim: --auth-token-file is not supported (the members run --insecure-plaintext on loopback)");
                    return std::process::ExitCode::from(EXIT_USAGE);
                }
                if metrics.is_some() {
                    eprintln!("ibsmd: demo on ibsim: --metrics is not supported (the members are separate processes)");
                    return std::process::ExitCode::from(EXIT_USAGE);
                }
                let ibsmd = match std::env::current_exe() {
                    Ok(p) => p,
                    Err(e) => {
                        eprintln!("ibsmd: cannot find my own binary to start the members: {e}");
                        return std::process::ExitCode::FAILURE;
                    }
                };
                Plan::IbsimDemo(ibsm_demo::ibsim::IbsimDemoOptions {
                    netfile: netfile.clone(),
                    base_port: base_port.or(file.base_port).unwrap_or(50051),
                    data_dir: data_dir.or(file.data_dir),
                    ibsmd,
                })
            } else {
                let fabric = match fabric
                    .and_then(|f| match f {
                        DemoFabric::Embedded(f) => Some(f),
                        DemoFabric::Ibsim(_) => None,
                    })
                    .or(file.fabric)
                {
                    Some(f) => f,
                    None => match FabricSpec::parse("gen:fat-tree:4") {
                        Ok(f) => f,
                        Err(e) => {
                            eprintln!("ibsmd: default demo fabric: {e}");
                            return std::process::ExitCode::FAILURE;
                        }
                    },
                };
                let security = match auth_token_file.or(file.auth_token_file) {
                    Some(p) => match Token::from_file(&p) {
                        Ok(t) => Security::token(t),
                        Err(e) => {
                            eprintln!("ibsmd: {e}");
                            return std::process::ExitCode::from(EXIT_USAGE);
                        }
                    },
                    None => Security::plaintext(),
                };
                let opts = DemoOptions {
                    base_port: base_port.or(file.base_port).unwrap_or(50051),
                    security,
                    data_dir: data_dir.or(file.data_dir),
                };
                Plan::Demo(fabric, opts, metrics.or(file.metrics))
            }
        }
        Some(Cmd::SminfoPoll { fabric, targets }) => Plan::SminfoPoll(fabric, targets),
        None => {
            let file = match load_config(cli.config.as_ref()) {
                Ok(f) => f,
                Err(code) => return code,
            };
            let settings = match merge(cli, file) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("ibsmd: {e}");
                    return std::process::ExitCode::from(EXIT_USAGE);
                }
            };
            let security = match settings.security.load() {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("ibsmd: {e}");
                    return std::process::ExitCode::from(EXIT_USAGE);
                }
            };
            let peer_auth = match replication_auth(&settings, &security) {
                Ok(a) => a,
                Err(e) => {
                    eprintln!("ibsmd: {e}");
                    return std::process::ExitCode::from(EXIT_USAGE);
                }
            };
            Plan::Daemon(Box::new(settings), security, peer_auth)
        }
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new("info,ibsm_core::election=warn,openraft=warn")
            }),
        )
        .init();
    if let Plan::SminfoPoll(fabric, targets) = &plan {
        // Blocking, no runtime: a thread polls, this one prints.
        return match ibsm_demo::ibsim::run_sminfo_poll(fabric, targets.clone()) {
            Ok(()) => std::process::ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("ibsmd sminfo-poll: {e:#}");
                std::process::ExitCode::FAILURE
            }
        };
    }
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
        match plan {
            Plan::Demo(fabric, opts, metrics) => run_demo(fabric, opts, metrics).await,
            Plan::IbsimDemo(opts) => run_ibsim_demo(opts).await,
            Plan::SminfoPoll(..) => Ok(()),
            Plan::Daemon(settings, security, peer_auth) => {
                run_daemon(*settings, security, peer_auth).await
            }
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

/// How this member authenticates the others on the Raft service, checked before
/// anything starts: `--node-id` needs a cluster secret or mutual TLS, the secret is
/// never the control token, and with mutual TLS this member's certificate must name
/// `ibsm-node-<its id>` (the peers check that name against the node each RPC speaks
/// for).
fn replication_auth(
    cli: &DaemonSettings,
    security: &Security,
) -> Result<ibsm_replica::PeerAuth, String> {
    let Some(node_id) = cli.node_id else {
        if cli.cluster_secret_file.is_some() {
            return Err(
                "--cluster-secret-file needs --node-id (it authenticates replication)".into(),
            );
        }
        return Ok(ibsm_replica::PeerAuth::default());
    };
    let secret = match &cli.cluster_secret_file {
        None => None,
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .map_err(|e| format!("--cluster-secret-file {}: {e}", p.display()))?;
            let secret = ibsm_replica::ClusterSecret::new(text.trim())
                .map_err(|why| format!("--cluster-secret-file {}: {why}", p.display()))?;
            let same_as = |t: &Option<Token>| {
                t.as_ref()
                    .is_some_and(|t| t.matches(secret.as_str().as_bytes()))
            };
            if same_as(&security.token) || same_as(&security.read_only_token) {
                return Err(format!(
                    "--cluster-secret-file {}: the cluster secret must not be a control API token: give replication its own secret",
                    p.display()
                ));
            }
            Some(secret)
        }
    };
    let mtls = security.mtls;
    if mtls {
        let cert = cli
            .security
            .tls_cert
            .as_ref()
            .ok_or("mutual TLS without --tls-cert")?;
        let pem = std::fs::read(cert).map_err(|e| format!("--tls-cert {}: {e}", cert.display()))?;
        match ibsm_replica::network::node_id_of_pem(&pem) {
            Some(id) if id == node_id => {}
            Some(id) => {
                return Err(format!(
                    "--tls-cert {} names node {id} ({}{id}), but this is --node-id {node_id}: each member needs its own certificate naming {}{node_id} (a DNS name or the CN)",
                    cert.display(),
                    ibsm_replica::network::NODE_CERT_PREFIX,
                    ibsm_replica::network::NODE_CERT_PREFIX
                ))
            }
            None => {
                return Err(format!(
                    "--tls-cert {}: replication over mutual TLS binds each member's certificate to its node id: the certificate must name {}{node_id} (a DNS subjectAltName or the subject CN)",
                    cert.display(),
                    ibsm_replica::network::NODE_CERT_PREFIX
                ))
            }
        }
    }
    let auth = ibsm_replica::PeerAuth { secret, mtls };
    if !auth.authenticates() {
        return Err(
            "--node-id: replication must authenticate its members: add --cluster-secret-file FILE (a secret shared by the members, not the control token), or --tls-cert/--tls-key/--tls-client-ca with member certificates naming ibsm-node-<id>"
                .into(),
        );
    }
    Ok(auth)
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

/// Serve metrics in the background if asked.
async fn start_metrics(
    addr: Option<SocketAddr>,
    instances: Vec<(String, Arc<ibsmd::metrics::Metrics>)>,
) -> anyhow::Result<()> {
    if let Some(addr) = addr {
        let (bound, serve) = ibsmd::metrics::bind(instances, addr, std::future::pending()).await?;
        tracing::info!(addr = %bound, "Prometheus metrics on http://{bound}/metrics");
        tokio::spawn(serve);
    }
    Ok(())
}

async fn run_daemon(
    cli: DaemonSettings,
    security: Security,
    peer_auth: ibsm_replica::PeerAuth,
) -> anyhow::Result<()> {
    let (fabric, priority) = (cli.fabric.clone(), cli.priority);
    if let Some(dir) = &cli.data_dir {
        std::fs::create_dir_all(dir)
            .map_err(|e| anyhow::anyhow!("--data-dir {}: {e}", dir.display()))?;
    }
    // Listeners first: a port already in use fails here, with its message, before the
    // fabric device is opened or replication starts.
    let listener = tokio::net::TcpListener::bind(cli.grpc)
        .await
        .map_err(|e| anyhow::anyhow!("cannot listen for gRPC on {}: {e}", cli.grpc))?;
    if cli.fault_injection {
        tracing::warn!(
            replicated = cli.node_id.is_some(),
            "--fault-injection: an admin can cut this member's Raft traffic (FaultInjection/SetRaftIsolation); a test facility, never for production"
        );
    }
    let metrics_listener = match cli.metrics {
        Some(a) => Some(
            tokio::net::TcpListener::bind(a)
                .await
                .map_err(|e| anyhow::anyhow!("cannot listen for metrics on {a}: {e}"))?,
        ),
        None => None,
    };
    let repl = start_replication(&cli, peer_auth).await?;
    let mut cfg = InstanceConfig::new("ibsmd", priority);
    cfg.sm_key = cli.sm_key;
    cfg.poll_interval = Duration::from_millis(cli.poll_interval_ms);
    cfg.repoll_interval = Duration::from_millis(cli.repoll_interval_ms);
    cfg.poll_retries = cli.poll_retries;
    cfg.masterless_takeover =
        (cli.masterless_takeover_ms > 0).then(|| Duration::from_millis(cli.masterless_takeover_ms));
    cfg.subnet = cli.subnet;
    cfg.master_heavy_sweep_interval = cli.master_heavy_sweep_interval;
    cfg.trusted_sm_guids = cli.trusted_sm_guids.clone();
    cfg.replication = repl.clone();
    let metrics = Arc::clone(&cfg.metrics);
    let (dev, keepalive) = ibsmd::open_fabric(&fabric)?;
    let inst = Arc::new(Instance::spawn(cfg, dev, keepalive)?);
    if let Some(l) = metrics_listener {
        let bound = l.local_addr()?;
        tracing::info!(addr = %bound, "Prometheus metrics on http://{bound}/metrics");
        tokio::spawn(ibsmd::metrics::serve_on(
            vec![("ibsmd".to_string(), Arc::clone(&metrics))],
            l,
            std::future::pending(),
        ));
    }
    let slot = ibsmd::server::slot(Arc::clone(&inst));
    if let Some(r) = &repl {
        r.set_metrics(Arc::clone(&metrics));
        r.follow(ibsmd::server::followed_sm(Arc::clone(&slot)));
    }
    let (addr, serve) = ibsmd::server::serve_listener(
        slot,
        "ibsmd",
        listener,
        shutdown_signal(),
        ibsmd::server::ServeOptions {
            security,
            replication: repl.clone(),
            fault_injection: cli.fault_injection,
            ..ibsmd::server::ServeOptions::default()
        },
    )
    .await?;
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
    if let Some(r) = repl {
        r.shutdown().await;
    }
    Ok(())
}

/// The replica when `--node-id` is given (see `ibsmd::replication`).
async fn start_replication(
    cli: &DaemonSettings,
    peer_auth: ibsm_replica::PeerAuth,
) -> anyhow::Result<Option<Arc<ibsmd::replication::Replication>>> {
    let Some(node_id) = cli.node_id else {
        if !cli.peers.is_empty() {
            anyhow::bail!("--peer needs --node-id (this instance's id among the peers)");
        }
        return Ok(None);
    };
    let data_dir = cli
        .data_dir
        .clone()
        .ok_or_else(|| anyhow::anyhow!("--node-id needs --data-dir (where the replica lives)"))?;
    // With TLS the Raft traffic is mutual TLS: the same port, the same certificates.
    let peer_tls = cli.security.peer_tls()?;
    if peer_tls.is_none() {
        tracing::warn!(
            "replication without TLS: Raft traffic between members is authenticated by the cluster secret but not encrypted; give --tls-cert/--tls-key/--tls-client-ca unless the members' network is trusted"
        );
    }
    let mut initial_members = std::collections::BTreeMap::new();
    for p in &cli.peers {
        if let Some(old) = initial_members.insert(p.node_id, p.addr.clone()) {
            anyhow::bail!(
                "--peer {}={}: node {} is given twice (also {old})",
                p.node_id,
                p.addr,
                p.node_id
            );
        }
    }
    let cfg = ibsmd::replication::ClusterConfig {
        node_id,
        grpc_addr: cli.grpc.to_string(),
        initial_members,
        data_dir,
        timers: ibsmd::replication::ClusterConfig::timers_for_daemon(),
        peer_tls,
        peer_auth,
        force_bootstrap: cli.force_bootstrap,
    };
    let r = ibsmd::replication::Replication::start(cfg).await?;
    tracing::info!(node_id, peers = cli.peers.len(), "replication started");
    Ok(Some(r))
}

async fn run_demo(
    fabric: FabricSpec,
    opts: DemoOptions,
    metrics: Option<SocketAddr>,
) -> anyhow::Result<()> {
    let token = opts.security.token.is_some();
    let mut demo = Demo::start_with(&fabric, opts).await?;
    let members = demo.members();
    start_metrics(
        metrics,
        members
            .iter()
            .map(|m| (m.name.clone(), Arc::clone(&m.metrics)))
            .collect(),
    )
    .await?;
    println!("ibsmd demo: three SM instances on one embedded fabric (one process: the simulator is in-process)");
    for m in &members {
        println!(
            "  {} on {:<24} priority {:>2}  gRPC http://{}",
            m.name, m.host, m.priority, m.endpoint
        );
    }
    if !token {
        println!("  (plaintext, no authentication: loopback only; --auth-token-file FILE to require a token)");
    }
    print_try(members.first().map(|m| m.endpoint.to_string()));
    shutdown_signal().await;
    demo.stop().await;
    Ok(())
}

/// The demo's last lines: a first command to try, and how to stop.
fn print_try(first_endpoint: Option<String>) {
    if let Some(ep) = first_endpoint {
        println!("try:  cargo run --release -p ibsmctl -- --endpoint http://{ep} status");
    }
    println!("Ctrl-C to stop.");
}

async fn run_ibsim_demo(opts: ibsm_demo::ibsim::IbsimDemoOptions) -> anyhow::Result<()> {
    let netfile = opts.netfile.clone();
    let mut demo = ibsm_demo::ibsim::IbsimDemo::start(opts).await?;
    println!(
        "ibsmd demo: three ibsmd processes on ibsim ({}, IBSIM_SOCKNAME={}), SMInfo poller process on {}",
        netfile.display(),
        demo.sockname(),
        demo.poller_host()
    );
    // First: drills (ibsmctl drill --endpoint ...) go to the Demo service.
    println!(
        "  Demo service (drills)                gRPC http://{}",
        demo.endpoint
    );
    for m in demo.members() {
        println!(
            "  {} on {:<24} priority {:>2}  gRPC http://{}",
            m.name, m.host, m.priority, m.endpoint
        );
    }
    println!("  (plaintext, no authentication: loopback only)");
    print_try(demo.members().first().map(|m| m.endpoint.to_string()));
    shutdown_signal().await;
    demo.stop().await;
    Ok(())
}
