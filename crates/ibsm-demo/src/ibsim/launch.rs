//! Starting the demo on ibsim (ibsim, the three members, the SMInfo poller, the Demo
//! service's own endpoint) and stopping it.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ibsm_labkit::{ChildGuard, Ibsim, IbsimOptions};
use ibsm_proto::demo::v1 as pb;
use tokio::sync::oneshot;

use super::members::{spawn_member, IbMember, IbsimShared};
use super::options::{IbsimDemoOptions, MEMBER_START};
use super::plan::plan;
use super::sminfo_poll::format_target;
use super::supervisor::Supervisor;
use crate::demo::{DemoHandle, DEMO_PRIORITIES};
use crate::poller::SmInfoPoller;

/// One member as printed at start.
#[derive(Debug, Clone)]
pub struct IbsimMemberInfo {
    pub name: String,
    pub host: String,
    pub priority: u8,
    pub endpoint: SocketAddr,
}

/// The running demo on ibsim. Drop (or [`IbsimDemo::stop`]) kills every process.
pub struct IbsimDemo {
    shared: Option<Arc<IbsimShared>>,
    /// The Demo service's endpoint.
    pub endpoint: SocketAddr,
    members: Vec<IbsimMemberInfo>,
    stop: Option<oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<Result<(), tonic::transport::Error>>>,
}

fn bind_port(base: u16, i: u16) -> anyhow::Result<std::net::TcpListener> {
    let port = if base == 0 {
        0
    } else {
        base.checked_add(i)
            .ok_or_else(|| anyhow::anyhow!("--base-port {base} leaves no room for 4 ports"))?
    };
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    std::net::TcpListener::bind(addr).map_err(|e| anyhow::anyhow!("cannot listen on {addr}: {e}"))
}

impl IbsimDemo {
    /// Start ibsim, the three members and the poller; serve the Demo service.
    pub async fn start(opts: IbsimDemoOptions) -> anyhow::Result<IbsimDemo> {
        // ibsim and the members run in ibsim's temp dir: every path must be absolute.
        let netfile = std::fs::canonicalize(&opts.netfile)
            .map_err(|e| anyhow::anyhow!("net file {}: {e}", opts.netfile.display()))?;
        let plan = plan(&netfile)?;
        ibsm_labkit::require_umad2sim()?;
        ibsm_labkit::require_tool("ibsim")?;
        let sup = Supervisor::start()?;
        let nf = netfile.clone();
        let sim = sup
            .run(move || {
                Ibsim::start(
                    &nf,
                    IbsimOptions {
                        die_with_parent: true,
                        ..IbsimOptions::default()
                    },
                )
            })
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))??;
        let sim = Arc::new(sim);
        let root = match &opts.data_dir {
            Some(d) => {
                std::fs::create_dir_all(d)
                    .map_err(|e| anyhow::anyhow!("--data-dir {}: {e}", d.display()))?;
                std::fs::canonicalize(d)
                    .map_err(|e| anyhow::anyhow!("--data-dir {}: {e}", d.display()))?
            }
            None => sim.dir().join("data"),
        };
        std::fs::create_dir_all(&root).map_err(|e| anyhow::anyhow!("{}: {e}", root.display()))?;
        // The members authenticate each other with a secret made for this run.
        let secret_file = root.join("cluster-secret");
        write_private(
            &secret_file,
            ibsmd::replication::random_cluster_secret()
                .map_err(|e| anyhow::anyhow!("demo: cannot make a cluster secret: {e}"))?
                .as_str(),
        )
        .map_err(|e| anyhow::anyhow!("{}: {e}", secret_file.display()))?;
        // Members' ports: bound here to learn them (ephemeral), released for the child.
        let mut endpoints = Vec::new();
        for i in 0..plan.hosts.len() {
            let l = bind_port(opts.base_port, u16::try_from(i)?)?;
            endpoints.push(l.local_addr()?);
        }
        let demo_listener = bind_port(opts.base_port, u16::try_from(plan.hosts.len())?)?;
        demo_listener.set_nonblocking(true)?;
        let demo_listener = tokio::net::TcpListener::from_std(demo_listener)?;
        let endpoint = demo_listener.local_addr()?;
        let mut members = Vec::new();
        for (i, ((host, port, rhost, rport), prio)) in
            plan.hosts.iter().zip(DEMO_PRIORITIES).enumerate()
        {
            let id = i + 1;
            let mut args: Vec<OsString> = [
                "--fabric",
                "umad",
                "--priority",
                &prio.to_string(),
                "--insecure-plaintext",
                "--grpc",
                &endpoints
                    .get(i)
                    .map(ToString::to_string)
                    .unwrap_or_default(),
                "--node-id",
                &id.to_string(),
                // FaultInjection/SetRaftIsolation reaches the member's own replica switch.
                "--fault-injection",
                "--data-dir",
            ]
            .iter()
            .map(OsString::from)
            .collect();
            args.push(root.join(format!("sm{id}")).into_os_string());
            args.push("--cluster-secret-file".into());
            args.push(secret_file.clone().into_os_string());
            for (j, ep) in endpoints.iter().enumerate() {
                args.push("--peer".into());
                args.push(format!("{}={ep}", j + 1).into());
            }
            members.push(IbMember {
                name: format!("sm{id}"),
                host: host.clone(),
                port: *port,
                remote: (rhost.clone(), *rport),
                priority: prio,
                endpoint: endpoints
                    .get(i)
                    .copied()
                    .ok_or_else(|| anyhow::anyhow!("no endpoint for sm{id}"))?,
                args,
                log: root.join(format!("sm{id}.log")),
                proc: None,
            });
        }
        // Start the members and the poller on the supervisor thread.
        let targets: Vec<String> = members
            .iter()
            .zip(&plan.paths)
            .map(|(m, p)| format_target(&m.name, p))
            .collect();
        let (sim2, ibsmd) = (Arc::clone(&sim), opts.ibsmd.clone());
        let poller_host = plan.poller_host.clone();
        let poller_log = root.join("poller.log");
        type Started = (Vec<IbMember>, ChildGuard);
        let started: Result<Started, String> = sup
            .run(move || {
                for m in &mut members {
                    m.proc = Some(spawn_member(&sim2, &ibsmd, m)?);
                }
                let log = std::fs::File::create(&poller_log)
                    .map_err(|e| format!("{}: {e}", poller_log.display()))?;
                let mut cmd = sim2.command_on(&poller_host, &ibsmd);
                cmd.args(["sminfo-poll", "--fabric", "umad"]);
                for t in &targets {
                    cmd.arg("--target").arg(t);
                }
                cmd.env("RUST_LOG", "info")
                    .env("NO_COLOR", "1")
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(log);
                ibsm_labkit::die_with_parent(&mut cmd);
                let poller = sim2
                    .spawn(&mut cmd)
                    .map_err(|e| format!("starting the SMInfo poller on {poller_host}: {e}"))?;
                Ok((members, poller))
            })
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let (members, mut poller_proc) = started.map_err(anyhow::Error::msg)?;
        let stdout = poller_proc
            .take_stdout()
            .ok_or_else(|| anyhow::anyhow!("the SMInfo poller has no stdout pipe"))?;
        let poller = SmInfoPoller::from_lines(std::io::BufReader::new(stdout));
        let info: Vec<IbsimMemberInfo> = members
            .iter()
            .map(|m| IbsimMemberInfo {
                name: m.name.clone(),
                host: m.host.clone(),
                priority: m.priority,
                endpoint: m.endpoint,
            })
            .collect();
        let shared = Arc::new(IbsimShared {
            sim,
            ibsmd: opts.ibsmd.clone(),
            sup,
            members: Mutex::new(members),
            drills: tokio::sync::Mutex::new(()),
            poller,
            poller_proc: Mutex::new(Some(poller_proc)),
            poller_host: plan.poller_host.clone(),
            cables: Mutex::new(plan.cables.clone()),
        });
        shared.wait_members_listening(MEMBER_START).await?;
        let handle = DemoHandle::of_ibsim(Arc::downgrade(&shared));
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let incoming = tokio_stream::wrappers::TcpListenerStream::new(demo_listener);
        let (health, health_service) = tonic_health::server::health_reporter();
        health
            .set_serving::<pb::demo_server::DemoServer<crate::service::DemoService>>()
            .await;
        let router = tonic::transport::Server::builder()
            .add_service(health_service)
            .add_service(pb::demo_server::DemoServer::new(
                crate::service::DemoService::new(handle),
            ));
        let server = tokio::spawn(router.serve_with_incoming_shutdown(incoming, async {
            let _ = stop_rx.await;
        }));
        tracing::info!(%endpoint, sockname = %shared.sim.sockname(), "ibsim demo: Demo service listening");
        Ok(IbsimDemo {
            shared: Some(shared),
            endpoint,
            members: info,
            stop: Some(stop_tx),
            server: Some(server),
        })
    }

    /// The members, in order.
    pub fn members(&self) -> &[IbsimMemberInfo] {
        &self.members
    }

    /// The HCA the SMInfo poller runs on.
    pub fn poller_host(&self) -> &str {
        self.shared.as_ref().map_or("", |s| s.poller_host.as_str())
    }

    /// ibsim's `IBSIM_SOCKNAME` (to attach diags: `IBSIM_SOCKNAME=... LD_PRELOAD=...`).
    pub fn sockname(&self) -> String {
        self.shared
            .as_ref()
            .map_or(String::new(), |s| s.sim.sockname().to_string())
    }

    /// Stop the Demo service, then every process and ibsim.
    pub async fn stop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(server) = self.server.take() {
            let _ = tokio::time::timeout(Duration::from_secs(3), server).await;
        }
        if let Some(shared) = self.shared.take() {
            // Dropping the last reference kills the processes and ibsim (blocking).
            let _ = tokio::task::spawn_blocking(move || drop(shared)).await;
        }
    }
}

impl Drop for IbsimDemo {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

/// Write `text` to a new file only its owner can read.
fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    o.open(path)?.write_all(text.as_bytes())
}
