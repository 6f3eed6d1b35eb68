//! `ibsmd demo`: three SM instances on one embedded fabric, each with its own gRPC
//! endpoint. They share one process because the embedded simulator is in-process
//! (each instance still has its own thread, device, agent and election, and talks to
//! the others only through SMPs on the simulated fabric).
//!
//! Drills: [`Demo::kill`] stops an instance abruptly (its thread stops answering
//! MADs, its simulator client is detached so the port stops advertising IsSM, like a
//! SIGKILLed OpenSM whose issm closes) while its gRPC endpoint stays up and answers
//! `UNAVAILABLE`; [`Demo::restart`] starts it again on the same port with the same
//! priority, endpoint and metrics. The `ibsm.demo.v1.Demo` gRPC service exposes both, on
//! every member's endpoint, so `ibsmctl drill kill-master` works against the demo.
//! [`DemoHandle::set_raft_isolation`] (`ibsm.demo.v1.Demo/SetRaftIsolation`) flips a member's
//! replica fault switch, so `ibsmctl drill raft-partition` can cut a running master's
//! Raft traffic from outside the process while its SM keeps running.
//!
//! The same drills on ibsim, with the members as separate `ibsmd --fabric umad`
//! processes, are in [`crate::ibsim`] (`ibsmd demo --fabric ibsim:NETFILE`);
//! [`DemoHandle`] fronts either, so the Demo service and `ibsmctl drill` are shared.
//!
//! Security: the demo binds loopback only and defaults to plaintext with a warning
//! (it is a playground, and `ibsmctl status` should work at once); give it a token
//! ([`DemoOptions::security`], `ibsmd demo --auth-token-file`) to rehearse with one.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Weak};

use ibsm_fabric::NodeIdx;
use ibsm_transport::{FabricSpec, SharedSim};
use tokio::sync::oneshot;

use ibsmd::auth::Security;
use ibsmd::instance::{Instance, InstanceConfig};
use ibsmd::metrics::Metrics;
use ibsmd::replication::{ClusterConfig, Replication};
use ibsmd::server::{InstanceSlot, ServeOptions};

/// Priorities of the demo's instances: distinct, so the expected master is obvious.
pub const DEMO_PRIORITIES: [u8; 3] = [10, 8, 6];

// The embedded-fabric helpers moved to `ibsmd::embedded` (the daemon's
// `--fabric sim:` needs them, the demo is only one user); re-exported for the demo's
// callers.
pub use ibsmd::embedded::{pick_ca_ports, spawn_on_sim, spawn_on_sim_client};

/// Why a drill was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DemoError {
    /// No member matches the selector.
    #[error("{0}")]
    NotFound(String),
    /// The member is not in a state the drill applies to.
    #[error("{0}")]
    FailedPrecondition(String),
    /// The demo is shutting down or the instance could not be started.
    #[error("{0}")]
    Unavailable(String),
}

/// Which member a drill is aimed at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// By name (`sm1`...).
    Name(String),
    /// By port GUID.
    Guid(u64),
    /// Whichever member is MASTER now.
    Master,
}

/// One member as seen from outside.
#[derive(Debug, Clone)]
pub struct MemberInfo {
    /// `sm1`, `sm2`, ...
    pub name: String,
    /// The CA it is attached to (node description).
    pub host: String,
    /// Its configured priority.
    pub priority: u8,
    /// Where its gRPC API listens.
    pub endpoint: SocketAddr,
    /// The instance while it runs.
    pub instance: Option<Arc<Instance>>,
    /// Its metrics (kept across restarts).
    pub metrics: Arc<Metrics>,
    /// For a member just killed: its status right before the kill (state, GUID...).
    pub before_kill: Option<ibsmd::instance::Snapshot>,
}

impl MemberInfo {
    /// Whether its instance thread runs.
    pub fn running(&self) -> bool {
        self.instance.as_ref().is_some_and(|i| i.is_running())
    }
}

struct Member {
    name: String,
    host: String,
    priority: u8,
    node: NodeIdx,
    port: u8,
    /// The running instance's simulator client (detached first on a kill).
    client: Option<ibsm_sim::ClientId>,
    endpoint: SocketAddr,
    slot: InstanceSlot,
    metrics: Arc<Metrics>,
    repl: Arc<Replication>,
    stop: Option<oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
}

impl Member {
    fn info(&self) -> MemberInfo {
        let instance = match self.slot.read() {
            Ok(s) => s.clone(),
            Err(p) => p.into_inner().clone(),
        };
        MemberInfo {
            name: self.name.clone(),
            host: self.host.clone(),
            priority: self.priority,
            endpoint: self.endpoint,
            instance,
            metrics: Arc::clone(&self.metrics),
            before_kill: None,
        }
    }

    fn take_instance(&self) -> Option<Arc<Instance>> {
        match self.slot.write() {
            Ok(mut s) => s.take(),
            Err(p) => p.into_inner().take(),
        }
    }
}

/// State shared by the demo and the Demo gRPC service of its endpoints.
pub struct DemoShared {
    sim: SharedSim,
    members: Mutex<Vec<Member>>,
    /// Serialises drills so a kill and a restart of one member never overlap.
    drills: tokio::sync::Mutex<()>,
    /// The SMInfo observer on a spare CA port (`None`: the fabric has none).
    poller: Mutex<Option<crate::poller::SmInfoPoller>>,
}

/// What the Demo gRPC service holds: a weak reference, so servers do not keep the
/// demo alive (and no reference cycle forms). Either the embedded demo or the one on
/// ibsim ([`crate::ibsim`]); the service asks [`DemoHandle::ibsim`] first.
#[derive(Clone)]
pub struct DemoHandle(Backend);

#[derive(Clone)]
enum Backend {
    Embedded(Weak<DemoShared>),
    Ibsim(Weak<crate::ibsim::IbsimShared>),
}

impl std::fmt::Debug for DemoHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DemoHandle")
    }
}

impl DemoHandle {
    fn get(&self) -> Result<Arc<DemoShared>, DemoError> {
        match &self.0 {
            Backend::Embedded(w) => w
                .upgrade()
                .ok_or_else(|| DemoError::Unavailable("the demo is shutting down".into())),
            Backend::Ibsim(_) => Err(DemoError::FailedPrecondition(
                "this demo runs on ibsim; the embedded fabric's drills do not apply".into(),
            )),
        }
    }

    /// The handle of a demo on ibsim.
    pub(crate) fn of_ibsim(shared: Weak<crate::ibsim::IbsimShared>) -> DemoHandle {
        DemoHandle(Backend::Ibsim(shared))
    }

    /// `Some` when this demo runs on ibsim (its members are separate processes).
    pub fn ibsim(&self) -> Option<Result<Arc<crate::ibsim::IbsimShared>, DemoError>> {
        match &self.0 {
            Backend::Embedded(_) => None,
            Backend::Ibsim(w) => Some(
                w.upgrade()
                    .ok_or_else(|| DemoError::Unavailable("the demo is shutting down".into())),
            ),
        }
    }

    /// See [`Demo::members`].
    pub fn members(&self) -> Result<Vec<MemberInfo>, DemoError> {
        Ok(self.get()?.members())
    }

    /// See [`Demo::kill`].
    pub async fn kill(&self, sel: &Selector) -> Result<MemberInfo, DemoError> {
        self.get()?.kill(sel).await
    }

    /// See [`Demo::restart`].
    pub async fn restart(&self, name: &str) -> Result<MemberInfo, DemoError> {
        self.get()?.restart(name).await
    }

    /// What the fabric-side SMInfo poller saw after `after_seq`.
    pub fn poll_sm_info(&self, after_seq: u64) -> Result<crate::poller::PollView, DemoError> {
        let shared = self.get()?;
        let p = shared.poller.lock().unwrap_or_else(|p| p.into_inner());
        p.as_ref().map(|p| p.since(after_seq)).ok_or_else(|| {
            DemoError::FailedPrecondition(
                "the demo fabric has no spare CA port for the SMInfo poller (it needs 4 CA ports)"
                    .into(),
            )
        })
    }

    /// Take the cable of member `name`'s CA port down (`up = false`) or up again.
    pub fn set_link(&self, name: &str, up: bool) -> Result<MemberInfo, DemoError> {
        let shared = self.get()?;
        let i = shared.find(&Selector::Name(name.to_string()))?;
        let members = shared.members.lock().unwrap_or_else(|p| p.into_inner());
        let m = members
            .get(i)
            .ok_or_else(|| DemoError::NotFound("member vanished".into()))?;
        let (node, port) = (m.node, m.port);
        shared
            .sim
            .with_sim(|s| {
                if up {
                    s.link_up(node, port)
                } else {
                    s.link_down(node, port)
                }
            })
            .map_err(|e| DemoError::Unavailable(format!("simulator: {e}")))?
            .map_err(|e| DemoError::FailedPrecondition(format!("link of {name}: {e}")))?;
        tracing::warn!(sm = %name, up, "demo drill: cable of the instance's port set");
        Ok(m.info())
    }

    /// Cut (`isolated = true`) or heal the Raft traffic of the member `sel` names,
    /// through its replica's fault switch. Its SM keeps running: only replication is
    /// cut, so a MASTER stays MASTER and reports itself degraded.
    pub fn set_raft_isolation(
        &self,
        sel: &Selector,
        isolated: bool,
    ) -> Result<MemberInfo, DemoError> {
        let shared = self.get()?;
        let i = shared.find(sel)?;
        let members = shared.members.lock().unwrap_or_else(|p| p.into_inner());
        let m = members
            .get(i)
            .ok_or_else(|| DemoError::NotFound("member vanished".into()))?;
        m.repl.replica().fault_switch().set_isolated(isolated);
        tracing::warn!(sm = %m.name, isolated, "demo drill: Raft traffic of the instance set");
        Ok(m.info())
    }
}

impl DemoShared {
    fn members(&self) -> Vec<MemberInfo> {
        match self.members.lock() {
            Ok(m) => m.iter().map(Member::info).collect(),
            Err(p) => p.into_inner().iter().map(Member::info).collect(),
        }
    }

    fn find(&self, sel: &Selector) -> Result<usize, DemoError> {
        let members = self.members();
        let pos = match sel {
            Selector::Name(n) => members.iter().position(|m| &m.name == n),
            Selector::Guid(g) => members
                .iter()
                .position(|m| m.instance.as_ref().is_some_and(|i| i.status().guid == *g)),
            Selector::Master => members.iter().position(|m| {
                m.instance
                    .as_ref()
                    .is_some_and(|i| i.status().state == ibsm_core::election::SmState::Master)
            }),
        };
        pos.ok_or_else(|| {
            let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
            DemoError::NotFound(match sel {
                Selector::Name(n) => format!("no demo instance named {n:?} (there are {names:?})"),
                Selector::Guid(g) => format!("no running demo instance has port GUID {g:#018x}"),
                Selector::Master => "no demo instance is MASTER right now".into(),
            })
        })
    }

    async fn kill(&self, sel: &Selector) -> Result<MemberInfo, DemoError> {
        let _drill = self.drills.lock().await;
        let i = self.find(sel)?;
        let (inst, info, client) = {
            let mut members = self
                .members
                .lock()
                .map_err(|_| DemoError::Unavailable("demo state poisoned".into()))?;
            let m = members
                .get_mut(i)
                .ok_or_else(|| DemoError::NotFound("member vanished".into()))?;
            let info = m.info();
            (m.take_instance(), info, m.client.take())
        };
        let Some(inst) = inst else {
            return Err(DemoError::FailedPrecondition(format!(
                "{} is already stopped",
                info.name
            )));
        };
        tracing::warn!(sm = %info.name, "demo drill: killing the instance");
        let mut info = info;
        info.before_kill = Some(inst.status());
        // As SIGKILL does: the port stops answering for the SM at this instant (the
        // kernel closes umad and issm), not when the SM thread gets to its shutdown.
        if let Some(client) = client {
            let _ = self.sim.with_sim(|s| s.detach(client));
        }
        let _ = tokio::task::spawn_blocking(move || inst.shutdown()).await;
        info.instance = None;
        Ok(info)
    }

    async fn restart(&self, name: &str) -> Result<MemberInfo, DemoError> {
        let _drill = self.drills.lock().await;
        let i = self.find(&Selector::Name(name.to_string()))?;
        let mut members = self
            .members
            .lock()
            .map_err(|_| DemoError::Unavailable("demo state poisoned".into()))?;
        let m = members
            .get_mut(i)
            .ok_or_else(|| DemoError::NotFound("member vanished".into()))?;
        if m.info().instance.is_some() {
            return Err(DemoError::FailedPrecondition(format!(
                "{} is running; kill it first",
                m.name
            )));
        }
        let mut cfg = InstanceConfig::new(&m.name, m.priority);
        cfg.metrics = Arc::clone(&m.metrics);
        cfg.replication = Some(Arc::clone(&m.repl));
        let (inst, client) = spawn_on_sim_client(&self.sim, m.node, m.port, cfg)
            .map_err(|e| DemoError::Unavailable(format!("cannot restart {}: {e:#}", m.name)))?;
        m.client = Some(client);
        tracing::warn!(sm = %m.name, "demo drill: instance restarted");
        match m.slot.write() {
            Ok(mut s) => *s = Some(Arc::new(inst)),
            Err(p) => *p.into_inner() = Some(Arc::new(inst)),
        }
        Ok(m.info())
    }
}

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
        let handle = DemoHandle(Backend::Embedded(Arc::downgrade(&shared)));
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

    /// The members' replicas, in member order (`sm1` is node 1).
    pub fn replicas(&self) -> &[Arc<Replication>] {
        &self.replicas
    }

    /// What the Demo gRPC service uses.
    pub fn handle(&self) -> DemoHandle {
        DemoHandle(Backend::Embedded(Arc::downgrade(&self.shared)))
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
