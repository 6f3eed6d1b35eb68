//! Starting the embedded demo (simulator, one Raft cluster, three instances, each
//! with its endpoint and the Demo service, the SMInfo poller) and stopping it.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use ibsm_fabric::NodeIdx;
use ibsm_transport::{FabricSpec, SharedSim};
use tokio::sync::oneshot;

use super::handle::DemoHandle;
use super::shared::{DemoShared, Member};
use super::types::{DemoError, MemberInfo, Selector, DEMO_PRIORITIES};
use ibsmd::auth::Security;
use ibsmd::embedded::{pick_ca_ports, spawn_on_sim_client};
use ibsmd::instance::InstanceConfig;
use ibsmd::replication::{ClusterConfig, Replication};
use ibsmd::server::ServeOptions;

/// Options of [`Demo::start_with`].
#[derive(Debug, Clone, Default)]
pub struct DemoOptions {
    /// First gRPC port (0: ephemeral ports, for tests).
    pub base_port: u16,
    /// What the endpoints enforce (default: plaintext with a warning, loopback only).
    pub security: Security,
    /// Where the members' replicas live (`sm1/`, `sm2/`, `sm3/` under it). `None`: a
    /// fresh directory under the system temp dir, removed when the demo stops.
    pub data_dir: Option<std::path::PathBuf>,
}

/// The running demo.
pub struct Demo {
    /// The shared embedded fabric.
    pub sim: SharedSim,
    shared: Arc<DemoShared>,
    /// The members' replicas (a three-node Raft cluster), in member order.
    replicas: Vec<Arc<Replication>>,
    /// A temp data dir to remove at stop.
    temp_dir: Option<std::path::PathBuf>,
}

impl Demo {
    /// Start three instances on `spec` (an embedded fabric) with plaintext gRPC on
    /// 127.0.0.1:`base_port`..+2 (`base_port` 0: ephemeral ports, for tests).
    pub async fn start(spec: &FabricSpec, base_port: u16) -> anyhow::Result<Demo> {
        Demo::start_with(
            spec,
            DemoOptions {
                base_port,
                security: Security::plaintext(),
                data_dir: None,
            },
        )
        .await
    }

    /// [`Demo::start`] with options.
    pub async fn start_with(spec: &FabricSpec, opts: DemoOptions) -> anyhow::Result<Demo> {
        let base_port = opts.base_port;
        let topology = spec.topology()?.ok_or_else(|| {
            anyhow::anyhow!("the demo needs an embedded fabric (sim:NETFILE or gen:...), not umad")
        })?;
        let hosts = pick_ca_ports(&topology, DEMO_PRIORITIES.len());
        // The SMInfo poller sits on a CA port no instance uses.
        let spare = pick_ca_ports(&topology, usize::MAX)
            .into_iter()
            .find(|(n, p, _)| !hosts.iter().any(|(hn, hp, _)| hn == n && hp == p));
        let poll_targets: Vec<(String, NodeIdx, u8)> = hosts
            .iter()
            .enumerate()
            .map(|(i, (n, p, _))| (format!("sm{}", i + 1), *n, *p))
            .collect();
        if hosts.len() < DEMO_PRIORITIES.len() {
            anyhow::bail!(
                "the fabric has {} CA ports with a cable; the demo needs {}",
                hosts.len(),
                DEMO_PRIORITIES.len()
            );
        }
        let sim = SharedSim::new(&topology);
        let shared = Arc::new(DemoShared {
            sim: sim.clone(),
            members: Mutex::new(Vec::new()),
            drills: tokio::sync::Mutex::new(()),
            poller: Mutex::new(None),
        });
        let handle = DemoHandle::of_embedded(Arc::downgrade(&shared));
        // The endpoints are bound first: the replicas (one three-node Raft cluster on
        // the same ports) must know every member's address before they start.
        let mut listeners = Vec::new();
        for i in 0..DEMO_PRIORITIES.len() {
            let port_num = if base_port == 0 {
                0
            } else {
                base_port.checked_add(u16::try_from(i)?).ok_or_else(|| {
                    anyhow::anyhow!("--base-port {base_port} leaves no room for 3 ports")
                })?
            };
            let addr = SocketAddr::from(([127, 0, 0, 1], port_num));
            let l = tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| anyhow::anyhow!("cannot listen for gRPC on {addr}: {e}"))?;
            listeners.push(l);
        }
        let mut members_at = std::collections::BTreeMap::new();
        for (i, l) in listeners.iter().enumerate() {
            members_at.insert(u64::try_from(i)? + 1, l.local_addr()?.to_string());
        }
        let (root, temp_dir) = match &opts.data_dir {
            Some(d) => (d.clone(), None),
            None => {
                let d = std::env::temp_dir().join(format!(
                    "ibsmd-demo-{}-{}",
                    std::process::id(),
                    members_at
                        .values()
                        .next()
                        .map_or(String::new(), |a| a.replace([':', '.'], "_"))
                ));
                (d.clone(), Some(d))
            }
        };
        // The demo's members authenticate each other with a secret made for this run:
        // a Raft call from outside is refused here as in production.
        let secret = ibsmd::replication::random_cluster_secret()
            .map_err(|e| anyhow::anyhow!("demo: cannot make a cluster secret: {e}"))?;
        let mut replicas = Vec::new();
        for (id, addr) in &members_at {
            let r = Replication::start(ClusterConfig {
                node_id: *id,
                grpc_addr: addr.clone(),
                initial_members: members_at.clone(),
                data_dir: root.join(format!("sm{id}")),
                timers: ClusterConfig::timers_for_daemon(),
                peer_tls: None,
                peer_auth: ibsm_replica::PeerAuth {
                    secret: Some(secret.clone()),
                    mtls: false,
                },
                force_bootstrap: false,
            })
            .await
            .map_err(|e| anyhow::anyhow!("demo replica {id}: {e}"))?;
            replicas.push(r);
        }
        let demo = Demo {
            sim: sim.clone(),
            shared: Arc::clone(&shared),
            replicas: replicas.clone(),
            temp_dir,
        };
        for (i, (((node, port, host), prio), (listener, repl))) in hosts
            .into_iter()
            .zip(DEMO_PRIORITIES)
            .zip(listeners.into_iter().zip(replicas))
            .enumerate()
        {
            let name = format!("sm{}", i + 1);
            let mut cfg = InstanceConfig::new(&name, prio);
            cfg.replication = Some(Arc::clone(&repl));
            let metrics = Arc::clone(&cfg.metrics);
            let (inst, client) = spawn_on_sim_client(&sim, node, port, cfg)?;
            let inst = Arc::new(inst);
            let (stop_tx, stop_rx) = oneshot::channel::<()>();
            let slot = ibsmd::server::slot(inst);
            // The member's replication figures on /metrics (kept across restarts, as
            // the metrics are).
            repl.set_metrics(Arc::clone(&metrics));
            repl.follow(ibsmd::server::followed_sm(Arc::clone(&slot)));
            let mut serve_opts = ServeOptions {
                security: opts.security.clone(),
                replication: Some(Arc::clone(&repl)),
                ..ServeOptions::default()
            };
            crate::service::serve_on(&mut serve_opts, handle.clone());
            let (endpoint, serve) = ibsmd::server::serve_listener(
                Arc::clone(&slot),
                &name,
                listener,
                async {
                    let _ = stop_rx.await;
                },
                serve_opts,
            )
            .await?;
            let server = tokio::spawn(serve);
            let member = Member {
                name,
                host,
                priority: prio,
                node,
                port,
                client: Some(client),
                endpoint,
                slot,
                metrics,
                repl,
                stop: Some(stop_tx),
                server: Some(server),
            };
            match shared.members.lock() {
                Ok(mut m) => m.push(member),
                Err(p) => p.into_inner().push(member),
            }
        }
        if let Some((n, p, _)) = spare {
            match crate::poller::SmInfoPoller::start(&sim, &topology, (n, p), &poll_targets) {
                Ok(poller) => {
                    *shared.poller.lock().unwrap_or_else(|p| p.into_inner()) = Some(poller);
                }
                Err(e) => tracing::warn!(%e, "demo: no SMInfo poller"),
            }
        }
        Ok(demo)
    }

    /// The members in priority order (a snapshot).
    pub fn members(&self) -> Vec<MemberInfo> {
        self.shared.members()
    }

    /// Every member's metrics under its name, as `ibsmd::metrics::bind` serves them
    /// (each instance's series labelled `sm="<name>"`).
    pub fn metrics_instances(&self) -> Vec<(String, Arc<ibsmd::metrics::Metrics>)> {
        self.members()
            .into_iter()
            .map(|m| (m.name, m.metrics))
            .collect()
    }

    /// What the web console serves: every member (its slot, so a restart is seen).
    pub fn web_sources(&self) -> Vec<ibsmd::web::WebSource> {
        self.shared.web_sources()
    }

    /// The members' replicas, in member order (`sm1` is node 1).
    pub fn replicas(&self) -> &[Arc<Replication>] {
        &self.replicas
    }

    /// What the Demo gRPC service uses.
    pub fn handle(&self) -> DemoHandle {
        DemoHandle::of_embedded(Arc::downgrade(&self.shared))
    }

    /// Abrupt stop of one member's SM (its endpoint stays up, answering UNAVAILABLE).
    pub async fn kill(&self, sel: &Selector) -> Result<MemberInfo, DemoError> {
        self.shared.kill(sel).await
    }

    /// Start a killed member again (same port, priority, endpoint, metrics).
    pub async fn restart(&self, name: &str) -> Result<MemberInfo, DemoError> {
        self.shared.restart(name).await
    }

    /// Stop everything: instances, then servers.
    pub async fn stop(&mut self) {
        let (insts, servers): (Vec<_>, Vec<_>) = {
            let mut members = match self.shared.members.lock() {
                Ok(m) => m,
                Err(p) => p.into_inner(),
            };
            members
                .iter_mut()
                .map(|m| {
                    if let Some(stop) = m.stop.take() {
                        let _ = stop.send(());
                    }
                    (m.take_instance(), m.server.take())
                })
                .unzip()
        };
        let poller = self
            .shared
            .poller
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        drop(poller);
        for inst in insts.into_iter().flatten() {
            let _ = tokio::task::spawn_blocking(move || inst.shutdown()).await;
        }
        for server in servers.into_iter().flatten() {
            // Open Watch streams end when their instance stops; do not wait forever.
            if tokio::time::timeout(std::time::Duration::from_secs(3), server)
                .await
                .is_err()
            {
                tracing::debug!("a demo gRPC server did not drain in 3 s");
            }
        }
        for r in self.replicas.drain(..) {
            r.shutdown().await;
        }
        if let Some(d) = self.temp_dir.take() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}
