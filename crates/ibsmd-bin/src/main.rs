//! `ibsmd`: run one SM on a fabric, or the three-instance demo.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use ibsm_demo::demo::{Demo, DemoOptions};
use ibsm_transport::FabricSpec;
use ibsmd::auth::{Security, Token};
use ibsmd::config::{FileConfig, LogFormat};
use ibsmd::{Instance, InstanceConfig};

mod cli;
mod settings;
use cli::{Cli, Cmd, DemoFabric};
use settings::{merge, DaemonSettings};

/// InfiniBand subnet manager daemon.
/// Exit code for a bad command line or config file.
const EXIT_USAGE: u8 = 2;

/// The man pages of `ibsmd` and its visible subcommands (clap_mangen, from the clap
/// definitions), into `dir`.
fn write_man_pages(dir: &std::path::Path) -> anyhow::Result<()> {
    use anyhow::Context;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let cmd = <Cli as clap::CommandFactory>::command();
    clap_mangen::generate_to(cmd, dir)
        .with_context(|| format!("writing man pages into {}", dir.display()))
}

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
    match &cli.cmd {
        Some(Cmd::Completions { shell }) => {
            use std::io::Write;
            let mut cmd = <Cli as clap::CommandFactory>::command();
            let mut out = std::io::stdout().lock();
            clap_complete::generate(*shell, &mut cmd, "ibsmd", &mut out);
            let _ = out.flush();
            return std::process::ExitCode::SUCCESS;
        }
        Some(Cmd::Man { dir }) => {
            return match write_man_pages(dir) {
                Ok(()) => std::process::ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("ibsmd man: {e:#}");
                    std::process::ExitCode::FAILURE
                }
            };
        }
        _ => {}
    }
    // Everything from files and flags is checked before anything starts.
    enum Plan {
        Daemon(Box<DaemonSettings>, Security, ibsm_replica::PeerAuth),
        Demo(FabricSpec, DemoOptions, Option<SocketAddr>, DemoWeb),
        IbsimDemo(ibsm_demo::ibsim::IbsimDemoOptions),
        SminfoPoll(FabricSpec, Vec<(String, Vec<u8>)>),
        Judge(ibsm_demo::judge::JudgeOptions),
    }
    let mut log_format = cli.log_format;
    let plan = match cli.cmd {
        Some(Cmd::Demo {
            config,
            fabric,
            base_port,
            metrics,
            web,
            no_web,
            auth_token_file,
            read_only_token_file,
            data_dir,
        }) => {
            let file = match load_config(config.as_ref()) {
                Ok(f) => {
                    log_format = log_format.or(f.log_format);
                    f.demo
                }
                Err(code) => return code,
            };
            if let Some(DemoFabric::Ibsim(netfile)) = &fabric {
                if auth_token_file.is_some() || file.auth_token_file.is_some() {
                    eprintln!("ibsmd: demo on ibsim: --auth-token-file is not supported (the members run --insecure-plaintext on loopback)");
                    return std::process::ExitCode::from(EXIT_USAGE);
                }
                if metrics.is_some() || web.is_some() {
                    eprintln!("ibsmd: demo on ibsim: --metrics and --web are not supported (the members are separate processes)");
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
                let security = match demo_security(
                    auth_token_file.or(file.auth_token_file),
                    read_only_token_file.or(file.read_only_token_file),
                ) {
                    Ok(s) => s,
                    Err(e) => {
                        eprintln!("ibsmd: {e}");
                        return std::process::ExitCode::from(EXIT_USAGE);
                    }
                };
                let web = match (no_web || file.no_web, web.or(file.web)) {
                    (true, _) => DemoWeb::Off,
                    (false, Some(a)) => DemoWeb::At(a),
                    (false, None) => DemoWeb::Default,
                };
                let opts = DemoOptions {
                    base_port: base_port.or(file.base_port).unwrap_or(50051),
                    security,
                    data_dir: data_dir.or(file.data_dir),
                };
                Plan::Demo(fabric, opts, metrics.or(file.metrics), web)
            }
        }
        Some(Cmd::SminfoPoll { fabric, targets }) => Plan::SminfoPoll(fabric, targets),
        Some(Cmd::Judge {
            fabric,
            listen,
            targets,
            auth_token_file,
            read_only_token_file,
            insecure_plaintext,
        }) => {
            let opts = ibsmd::auth::SecurityOptions {
                auth_token_file,
                read_only_token_file,
                insecure_plaintext,
                ..Default::default()
            };
            match opts.load() {
                Ok(security) => Plan::Judge(ibsm_demo::judge::JudgeOptions {
                    fabric,
                    listen,
                    targets,
                    security,
                }),
                // The generic message names TLS flags the judge does not take.
                Err(_) if opts.auth_token_file.is_none() && !opts.insecure_plaintext => {
                    eprintln!("ibsmd judge: no credentials: give --auth-token-file FILE (the token callers must present) or --insecure-plaintext");
                    return std::process::ExitCode::from(EXIT_USAGE);
                }
                Err(e) => {
                    eprintln!("ibsmd judge: {e}");
                    return std::process::ExitCode::from(EXIT_USAGE);
                }
            }
        }
        Some(Cmd::Completions { .. } | Cmd::Man { .. }) => return std::process::ExitCode::SUCCESS,
        None => {
            let file = match load_config(cli.config.as_ref()) {
                Ok(f) => f,
                Err(code) => return code,
            };
            log_format = log_format.or(file.log_format);
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
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new("info,ibsm_core::election=warn,openraft=warn")
    });
    let logs = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter);
    let json_logs = log_format.unwrap_or_default() == LogFormat::Json;
    match log_format.unwrap_or_default() {
        LogFormat::Text => logs
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
        LogFormat::Json => logs.json().with_ansi(false).init(),
    }
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
            Plan::Demo(fabric, opts, metrics, web) => run_demo(fabric, opts, metrics, web).await,
            Plan::IbsimDemo(opts) => run_ibsim_demo(opts).await,
            Plan::SminfoPoll(..) => Ok(()),
            Plan::Judge(opts) => ibsm_demo::judge::run(opts).await,
            Plan::Daemon(settings, security, peer_auth) => {
                run_daemon(*settings, security, peer_auth).await
            }
        }
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            if json_logs {
                // A log pipeline gets why the daemon stopped as one more JSON line.
                tracing::error!(error = %format!("{e:#}"), "ibsmd: {e:#}");
            } else {
                eprintln!("ibsmd: {e:#}");
            }
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
            if text.trim().starts_with("CHANGE-ME") {
                return Err(format!(
                    "--cluster-secret-file {}: it holds the placeholder shipped in deploy/: generate a real secret (e.g. `openssl rand -hex 32`)",
                    p.display()
                ));
            }
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

/// SIGHUP: read the `--partitions-file` again (`ibsmd::partitions_file::reload`
/// logs what it did, or why nothing changed).
fn reload_partitions_on_sighup(
    path: std::path::PathBuf,
    inst: Arc<Instance>,
) -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            .map_err(|e| anyhow::anyhow!("cannot catch SIGHUP: {e}"))?;
        tokio::spawn(async move {
            while hup.recv().await.is_some() {
                tracing::info!(file = %path.display(), "SIGHUP: reloading the partitions file");
                let _ = ibsmd::partitions_file::reload(&path, &inst).await;
            }
        });
    }
    #[cfg(not(unix))]
    let _ = (path, inst);
    Ok(())
}

/// The demo's credentials: none, an admin token, or an admin and a read-only token.
fn demo_security(
    admin: Option<PathBuf>,
    read_only: Option<PathBuf>,
) -> Result<Security, ibsmd::auth::AuthError> {
    if admin.is_none() && read_only.is_none() {
        return Ok(Security::plaintext());
    }
    ibsmd::auth::SecurityOptions {
        auth_token_file: admin,
        read_only_token_file: read_only,
        ..ibsmd::auth::SecurityOptions::default()
    }
    .load()
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

/// Why a listener could not be bound (the address, and the hint of a second ibsmd),
/// said before anything else starts.
fn listen_error(what: &'static str, addr: SocketAddr, source: std::io::Error) -> anyhow::Error {
    // Its Display already says the socket error: no source chain to repeat it.
    let e = ibsmd::DaemonError::Listen { what, addr, source };
    anyhow::anyhow!("{e}; the fabric was not opened")
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
        .map_err(|e| listen_error("gRPC", cli.grpc, e))?;
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
                .map_err(|e| listen_error("metrics", a, e))?,
        ),
        None => None,
    };
    let web_listener = match cli.web {
        Some(a) => {
            ibsmd::web::check(&security)?;
            Some(
                ibsmd::web::listen(a)
                    .await
                    .map_err(|e| anyhow::anyhow!("{e}; the fabric was not opened"))?,
            )
        }
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
    cfg.sticky_priority = cli.sticky_priority;
    cfg.hung_master_window = cli.hung_master_window_ms.map(Duration::from_millis);
    cfg.leader_heartbeat_grace = cli.leader_heartbeat_grace_ms.map(Duration::from_millis);
    cfg.sm_key_policy = cli.sm_key_policy;
    cfg.sminfo_answer_thread = cli.sminfo_answer_thread;
    if let Some(seed) = &cli.guid2lid {
        tracing::info!(
            file = %seed.path.display(),
            ports = seed.ports,
            "--guid2lid: a first master (no LIDs in the replica yet) assigns these LIDs"
        );
        cfg.guid2lid_seed = Some(seed.text.clone());
    }
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
    if let Some(l) = web_listener {
        let source = ibsmd::web::WebSource {
            name: "ibsmd".into(),
            slot: Arc::clone(&slot),
            repl: repl.clone(),
        };
        let scheme = ibsmd::web::scheme(&security);
        let (bound, serve) =
            ibsmd::web::serve_on(vec![source], security.clone(), l, std::future::pending())?;
        tracing::info!(addr = %bound, "web console on {scheme}://{bound}/");
        tokio::spawn(serve);
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
            partitions_file: cli.partitions_file.clone(),
            ..ibsmd::server::ServeOptions::default()
        },
    )
    .await?;
    tracing::info!(%addr, "gRPC control API listening");
    if let Some(path) = cli.partitions_file.clone() {
        reload_partitions_on_sighup(path, Arc::clone(&inst))?;
    }
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

/// Where the demo's web console goes: off, an address the user chose (a busy one is an
/// error), or the default (a free port when the default one is taken).
#[derive(Debug, Clone, Copy)]
enum DemoWeb {
    Off,
    At(SocketAddr),
    Default,
}

/// The default address of the demo's web console.
const DEMO_WEB: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 8080);

async fn demo_web_listener(web: DemoWeb) -> anyhow::Result<Option<tokio::net::TcpListener>> {
    Ok(match web {
        DemoWeb::Off => None,
        DemoWeb::At(a) => Some(ibsmd::web::listen(a).await?),
        DemoWeb::Default => match ibsmd::web::listen(DEMO_WEB).await {
            Ok(l) => Some(l),
            Err(e) => {
                tracing::info!(%e, "demo: the web console's default port is taken; using a free one");
                Some(ibsmd::web::listen(SocketAddr::new(DEMO_WEB.ip(), 0)).await?)
            }
        },
    })
}

async fn run_demo(
    fabric: FabricSpec,
    opts: DemoOptions,
    metrics: Option<SocketAddr>,
    web: DemoWeb,
) -> anyhow::Result<()> {
    let token = opts.security.token.is_some();
    let security = opts.security.clone();
    let web_listener = demo_web_listener(web).await?;
    let mut demo = Demo::start_with(&fabric, opts).await?;
    let members = demo.members();
    start_metrics(metrics, demo.metrics_instances()).await?;
    println!("ibsmd demo: three SM instances on one embedded fabric (one process: the simulator is in-process)");
    for m in &members {
        println!(
            "  {} on {:<24} priority {:>2}  gRPC http://{}",
            m.name, m.host, m.priority, m.endpoint
        );
    }
    if let Some(l) = web_listener {
        let scheme = ibsmd::web::scheme(&security);
        let (bound, serve) =
            ibsmd::web::serve_on(demo.web_sources(), security, l, std::future::pending())?;
        tokio::spawn(serve);
        println!(
            "  {:<49} {scheme}://{bound}/",
            "web console of all three (open in a browser)"
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
