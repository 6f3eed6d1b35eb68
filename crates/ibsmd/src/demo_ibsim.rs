//! `ibsmd demo --fabric ibsim:NETFILE`: the drill demo on ibsim, through the real
//! umad path, behind the same `ibsm.v1.Demo` service as the embedded demo
//! ([`crate::demo`]), so `ibsmctl drill` measures both with one code path.
//!
//! What runs: ibsim on NETFILE (`ibsm_labkit::Ibsim`: its own `IBSIM_SOCKNAME`, its
//! console on a FIFO), three `ibsmd --fabric umad --node-id N --peer ...` processes
//! under umad2sim on three HCAs (priorities [`crate::demo::DEMO_PRIORITIES`], one
//! Raft cluster, data dirs `sm1/ sm2/ sm3/`), and the hidden `ibsmd sminfo-poll`
//! process on a fourth HCA, which reads every SM port's SMInfo by directed route
//! every 10 ms ([`crate::demo_poller`] over a `UmadDevice`) and prints one JSON line
//! per change; this process reads them back and serves them as `PollSmInfo`. The judge
//! of a drill on ibsim is therefore a process on the fabric, as another node of the
//! subnet would see it, not a simulator's internal state.
//!
//! The drills map to what a fabric operator would do: `KillInstance` SIGKILLs the
//! member's process and then drops its ibsim client (ibsim never notices a dead
//! client; a kernel closes a dead process's umad/issm files, see
//! `ibsm_labkit::Ibsim::reap_dead_clients`), `RestartInstance` runs the same command
//! line again (it rejoins its Raft cluster from its data dir), `SetLinkState` is the
//! console's `Unlink`/`Link` of the member's HCA port. `SetRaftIsolation` is passed
//! on to the member process: the members run with `--fault-injection` (a test
//! facility, off by default), so their own `Demo/SetRaftIsolation` with no name and no
//! GUID flips their replica's fault switch (see [`crate::demo_service`]). A TCP proxy
//! in front of each member was the alternative without a flag, but Raft dials the
//! addresses in the replicated membership, one per member, so a proxy cannot tell
//! which peer a connection comes from and could only cut one direction.
//!
//! For the soak (`ibsmctl drill soak`), three more calls, on this demo only:
//! `ListCables` (every cable of the net file, with the member whose CA port it is and
//! whether the poller's directed routes cross it: a fault there would blind the
//! judge), `SetCableFault` (`Unlink`/`Link` any cable, and its SMP loss with ibsim's
//! `Error "node"[port] <rate%>`, rate 0 clearing it), and `ReadFabric`: `ibnetdiscover
//! -p` and `ibroute LID` per switch run under umad2sim on the poller's HCA (ibsim
//! serves several clients on one node), parsed into LIDs and unicast LFT entries, so
//! the soak compares what the switches hold, not what an SM says.
//!
//! The Demo service has its own endpoint (the members are other processes, whose
//! Demo service refuses drills); it is printed first, so `ibsmctl drill
//! --start-demo` (which takes the first endpoint) and `--endpoint` both aim at it.
//!
//! Cleanup: every process is started from one dedicated supervisor thread with
//! `PR_SET_PDEATHSIG` ([`ibsm_labkit::die_with_parent`]), so even a SIGKILLed demo
//! leaves no ibsim or ibsmd behind; a normal stop (Ctrl-C, SIGTERM, drop) kills them
//! itself. Console commands run on that thread too, one at a time.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ibsm_labkit::{ChildGuard, Ibsim, IbsimOptions};
use ibsm_mad::SmState;
use ibsm_proto::v1 as pb;
use ibsm_transport::{FabricSpec, UmadDevice};
use tokio::sync::oneshot;

use crate::demo::{pick_ca_ports, DemoError, DemoHandle, Selector, DEMO_PRIORITIES};
use crate::demo_poller::{dr_path, PollLine, PollView, SmInfoPoller};

/// The `--fabric` prefix that selects this demo.
pub const IBSIM_PREFIX: &str = "ibsim:";

/// How long the members may take to open their gRPC ports at start.
const MEMBER_START: Duration = Duration::from_secs(60);

/// How long the demo waits for a member's own Demo service (Raft isolation).
const MEMBER_RPC: Duration = Duration::from_secs(5);

/// How long one infiniband-diags command may run.
const DIAG_TIMEOUT: Duration = Duration::from_secs(30);

/// Log filter of the member processes.
const MEMBER_LOG: &str = "info,openraft=warn,ibsm_core::election=warn";

/// Options of [`IbsimDemo::start`].
#[derive(Debug, Clone)]
pub struct IbsimDemoOptions {
    /// The ibsim net file (needs 4 HCA ports with a cable: 3 SMs and the poller).
    pub netfile: PathBuf,
    /// First gRPC port: members on base..base+2, the Demo service on base+3
    /// (0: ephemeral ports).
    pub base_port: u16,
    /// Where the members' replicas and logs go (`None`: ibsim's temp dir, removed at
    /// stop).
    pub data_dir: Option<PathBuf>,
    /// The `ibsmd` binary the members and the poller run (normally this one).
    pub ibsmd: PathBuf,
}

type Job = Box<dyn FnOnce() + Send>;

/// The one thread that starts processes (their `PR_SET_PDEATHSIG` follows it) and
/// talks to ibsim's console.
struct Supervisor {
    tx: Mutex<Option<mpsc::Sender<Job>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Supervisor {
    fn start() -> anyhow::Result<Supervisor> {
        let (tx, rx) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name("ibsim-demo-supervisor".into())
            .spawn(move || {
                for job in rx {
                    job();
                }
            })?;
        Ok(Supervisor {
            tx: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Run `f` on the supervisor thread and wait for its result.
    async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, DemoError> {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move || {
            let _ = tx.send(f());
        });
        {
            let guard = self.tx.lock().unwrap_or_else(|p| p.into_inner());
            let sender = guard
                .as_ref()
                .ok_or_else(|| DemoError::Unavailable("the demo is shutting down".into()))?;
            sender.send(job).map_err(|_| {
                DemoError::Unavailable("the demo's supervisor thread is gone".into())
            })?;
        }
        rx.await.map_err(|_| {
            DemoError::Unavailable("the demo's supervisor thread dropped a job".into())
        })
    }

    fn shutdown(&self) {
        drop(self.tx.lock().unwrap_or_else(|p| p.into_inner()).take());
        if let Some(t) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = t.join();
        }
    }
}

struct IbMember {
    name: String,
    /// Net-file node id of its HCA (`SIM_HOST`).
    host: String,
    port: u8,
    /// The other end of its cable (node id, port), for `Link`.
    remote: (String, u8),
    priority: u8,
    endpoint: SocketAddr,
    args: Vec<OsString>,
    log: PathBuf,
    proc: Option<ChildGuard>,
}

impl IbMember {
    fn running(&mut self) -> bool {
        match self.proc.as_mut().map(ChildGuard::try_wait) {
            Some(Ok(None)) => true,
            Some(_) => {
                // Exited on its own (or cannot be waited for): it is not running.
                self.proc = None;
                false
            }
            None => false,
        }
    }
}

/// State shared by the ibsim demo and its Demo service.
pub struct IbsimShared {
    sim: Arc<Ibsim>,
    ibsmd: PathBuf,
    sup: Supervisor,
    members: Mutex<Vec<IbMember>>,
    drills: tokio::sync::Mutex<()>,
    poller: SmInfoPoller,
    poller_proc: Mutex<Option<ChildGuard>>,
    poller_host: String,
    cables: Mutex<Vec<pb::Cable>>,
}

fn pb_state(s: Option<SmState>) -> pb::SmState {
    match s {
        Some(SmState::Discovering) => pb::SmState::Discovering,
        Some(SmState::Standby) => pb::SmState::Standby,
        Some(SmState::Master) => pb::SmState::Master,
        Some(SmState::NotActive) | None => pb::SmState::Notactive,
    }
}

fn spawn_member(sim: &Ibsim, ibsmd: &Path, m: &IbMember) -> Result<ChildGuard, String> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&m.log)
        .map_err(|e| format!("{}: {e}", m.log.display()))?;
    let mut cmd = sim.command_on(&m.host, ibsmd);
    cmd.args(&m.args)
        .env("RUST_LOG", MEMBER_LOG)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    ibsm_labkit::die_with_parent(&mut cmd);
    sim.spawn(&mut cmd)
        .map_err(|e| format!("starting {} on {}: {e}", m.name, m.host))
}

impl IbsimShared {
    /// The members as `ListInstances` shows them; state and GUID as the poller last
    /// saw them on the wire.
    pub fn list(&self) -> Vec<pb::DemoInstance> {
        let mut members = self.members.lock().unwrap_or_else(|p| p.into_inner());
        members.iter_mut().map(|m| self.pb(m)).collect()
    }

    fn pb(&self, m: &mut IbMember) -> pb::DemoInstance {
        let running = m.running();
        let (guid, state) = self.poller.latest(&m.name).unwrap_or((0, None));
        pb::DemoInstance {
            name: m.name.clone(),
            guid,
            endpoint: m.endpoint.to_string(),
            running,
            state: if running {
                pb_state(state)
            } else {
                pb::SmState::Notactive
            } as i32,
            priority: u32::from(m.priority),
            host: m.host.clone(),
        }
    }

    fn find(&self, members: &[IbMember], sel: &Selector) -> Result<usize, DemoError> {
        let latest = |n: &str| self.poller.latest(n).unwrap_or((0, None));
        let pos = match sel {
            Selector::Name(n) => members.iter().position(|m| &m.name == n),
            Selector::Guid(g) => members.iter().position(|m| latest(&m.name).0 == *g),
            Selector::Master => members
                .iter()
                .position(|m| latest(&m.name).1 == Some(SmState::Master)),
        };
        pos.ok_or_else(|| {
            let names: Vec<&str> = members.iter().map(|m| m.name.as_str()).collect();
            DemoError::NotFound(match sel {
                Selector::Name(n) => format!("no demo instance named {n:?} (there are {names:?})"),
                Selector::Guid(g) => format!("no demo instance has port GUID {g:#018x}"),
                Selector::Master => "no demo instance answers MASTER on the wire right now".into(),
            })
        })
    }

    /// SIGKILL a member's process, then drop its ibsim client as a kernel would.
    pub async fn kill(&self, sel: &Selector) -> Result<pb::DemoInstance, DemoError> {
        let _drill = self.drills.lock().await;
        let (guard, mut info) = {
            let mut members = self.members.lock().unwrap_or_else(|p| p.into_inner());
            let i = self.find(&members, sel)?;
            let m = members
                .get_mut(i)
                .ok_or_else(|| DemoError::NotFound("member vanished".into()))?;
            let info = self.pb(m);
            (m.proc.take(), info)
        };
        let Some(mut guard) = guard else {
            return Err(DemoError::FailedPrecondition(format!(
                "{} is already stopped",
                info.name
            )));
        };
        tracing::warn!(sm = %info.name, pid = guard.pid(), "ibsim demo drill: SIGKILL");
        let sim = Arc::clone(&self.sim);
        let (killed, reaped) = self
            .sup
            .run(move || {
                let k = guard.kill();
                (k, sim.reap_dead_clients())
            })
            .await?;
        killed.map_err(|e| DemoError::Unavailable(format!("killing {}: {e}", info.name)))?;
        match reaped {
            Ok(r) => {
                tracing::info!(sm = %info.name, clients = r.len(), "dead ibsim clients dropped")
            }
            Err(e) => {
                return Err(DemoError::Unavailable(format!(
                    "{} killed, but its ibsim client could not be dropped: {e}",
                    info.name
                )))
            }
        }
        info.running = false;
        Ok(info)
    }

    /// Start a killed member again with the same command line.
    pub async fn restart(&self, name: &str) -> Result<pb::DemoInstance, DemoError> {
        let _drill = self.drills.lock().await;
        let (i, host, args, log, endpoint) = {
            let mut members = self.members.lock().unwrap_or_else(|p| p.into_inner());
            let i = self.find(&members, &Selector::Name(name.to_string()))?;
            let m = members
                .get_mut(i)
                .ok_or_else(|| DemoError::NotFound("member vanished".into()))?;
            if m.running() {
                return Err(DemoError::FailedPrecondition(format!(
                    "{} is running; kill it first",
                    m.name
                )));
            }
            (i, m.host.clone(), m.args.clone(), m.log.clone(), m.endpoint)
        };
        let probe = IbMember {
            name: name.to_string(),
            host,
            port: 0,
            remote: (String::new(), 0),
            priority: 0,
            endpoint,
            args,
            log,
            proc: None,
        };
        let sim = Arc::clone(&self.sim);
        let ibsmd = self.ibsmd.clone();
        let guard = self
            .sup
            .run(move || {
                // A client left behind by a crash would make ibsim refuse the new SM.
                let _ = sim.reap_dead_clients();
                spawn_member(&sim, &ibsmd, &probe)
            })
            .await?
            .map_err(DemoError::Unavailable)?;
        tracing::warn!(sm = %name, pid = guard.pid(), "ibsim demo drill: member restarted");
        let mut members = self.members.lock().unwrap_or_else(|p| p.into_inner());
        let m = members
            .get_mut(i)
            .ok_or_else(|| DemoError::NotFound("member vanished".into()))?;
        m.proc = Some(guard);
        Ok(self.pb(m))
    }

    /// `Unlink` (`up = false`) or `Link` again the cable of a member's HCA port.
    pub async fn set_link(&self, name: &str, up: bool) -> Result<pb::DemoInstance, DemoError> {
        let _drill = self.drills.lock().await;
        let (host, port, remote) = {
            let members = self.members.lock().unwrap_or_else(|p| p.into_inner());
            let i = self.find(&members, &Selector::Name(name.to_string()))?;
            let m = members
                .get(i)
                .ok_or_else(|| DemoError::NotFound("member vanished".into()))?;
            (m.host.clone(), m.port, m.remote.clone())
        };
        let sim = Arc::clone(&self.sim);
        let answer = self
            .sup
            .run(move || {
                if up {
                    sim.link(&host, port, &remote.0, remote.1)
                } else {
                    sim.unlink(&host, Some(port))
                }
            })
            .await?
            .map_err(|e| DemoError::Unavailable(format!("ibsim console: {e}")))?;
        tracing::warn!(sm = %name, up, answer = %answer.trim(), "ibsim demo drill: cable set");
        let mut members = self.members.lock().unwrap_or_else(|p| p.into_inner());
        let i = self.find(&members, &Selector::Name(name.to_string()))?;
        let m = members
            .get_mut(i)
            .ok_or_else(|| DemoError::NotFound("member vanished".into()))?;
        Ok(self.pb(m))
    }

    /// What the poller process reported after `after_seq`.
    pub fn poll_sm_info(&self, after_seq: u64) -> Result<PollView, DemoError> {
        let alive = self
            .poller_proc
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
            .is_some_and(|g| matches!(g.try_wait(), Ok(None)));
        if !alive {
            return Err(DemoError::Unavailable(format!(
                "the SMInfo poller process on {} has exited; see poller.log in the demo's data dir",
                self.poller_host
            )));
        }
        Ok(self.poller.since(after_seq))
    }

    /// Cut or heal member `name`'s Raft traffic: `Demo/SetRaftIsolation` (name and
    /// GUID empty) on the member's own endpoint, which it accepts because the demo
    /// started it with `--fault-injection`.
    pub async fn set_raft_isolation(
        &self,
        name: &str,
        isolated: bool,
    ) -> Result<pb::DemoInstance, DemoError> {
        let _drill = self.drills.lock().await;
        let endpoint = {
            let mut members = self.members.lock().unwrap_or_else(|p| p.into_inner());
            let i = self.find(&members, &Selector::Name(name.to_string()))?;
            let m = members
                .get_mut(i)
                .ok_or_else(|| DemoError::NotFound("member vanished".into()))?;
            if !m.running() {
                return Err(DemoError::FailedPrecondition(format!(
                    "{name} is not running"
                )));
            }
            m.endpoint
        };
        let unavailable = |e: String| DemoError::Unavailable(format!("{name} at {endpoint}: {e}"));
        let mut client = tokio::time::timeout(
            MEMBER_RPC,
            pb::demo_client::DemoClient::connect(format!("http://{endpoint}")),
        )
        .await
        .map_err(|_| unavailable("connect timed out".into()))?
        .map_err(|e| unavailable(e.to_string()))?;
        tokio::time::timeout(
            MEMBER_RPC,
            client.set_raft_isolation(pb::SetRaftIsolationRequest {
                isolated,
                ..Default::default()
            }),
        )
        .await
        .map_err(|_| unavailable("SetRaftIsolation timed out".into()))?
        .map_err(|e| unavailable(e.message().to_string()))?;
        tracing::warn!(sm = %name, isolated, "ibsim demo drill: Raft traffic of the member set");
        let mut members = self.members.lock().unwrap_or_else(|p| p.into_inner());
        let i = self.find(&members, &Selector::Name(name.to_string()))?;
        let m = members
            .get_mut(i)
            .ok_or_else(|| DemoError::NotFound("member vanished".into()))?;
        Ok(self.pb(m))
    }

    /// The cables of the net file, as the drills left them.
    pub fn cables(&self) -> Vec<pb::Cable> {
        self.cables
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Take the cable at `node`[`port`] (either end) down or up, and set the SMP loss
    /// through its first end (`Error "node"[port] <rate%>`; 0 clears it).
    pub async fn set_cable_fault(
        &self,
        node: &str,
        port: u8,
        up: bool,
        loss_percent: u8,
    ) -> Result<(), DemoError> {
        let _drill = self.drills.lock().await;
        let cable = {
            let cables = self.cables.lock().unwrap_or_else(|p| p.into_inner());
            cables
                .iter()
                .find(|c| {
                    (c.node == node && c.port == u32::from(port))
                        || (c.remote == node && c.remote_port == u32::from(port))
                })
                .cloned()
                .ok_or_else(|| {
                    DemoError::NotFound(format!("no cable at \"{node}\"[{port}] in the net file"))
                })?
        };
        let (a, ap) = (cable.node.clone(), u8::try_from(cable.port).unwrap_or(0));
        let (b, bp) = (
            cable.remote.clone(),
            u8::try_from(cable.remote_port).unwrap_or(0),
        );
        let was_up = cable.up;
        let sim = Arc::clone(&self.sim);
        let answers = self
            .sup
            .run(move || -> Result<Vec<String>, ibsm_labkit::LabError> {
                let mut out = Vec::new();
                if !up {
                    if was_up {
                        out.push(sim.unlink(&a, Some(ap))?);
                    }
                    return Ok(out);
                }
                if !was_up {
                    out.push(sim.link(&a, ap, &b, bp)?);
                }
                out.push(sim.error_rate(&a, ap, loss_percent, None)?);
                Ok(out)
            })
            .await?
            .map_err(|e| DemoError::Unavailable(format!("ibsim console: {e}")))?;
        tracing::warn!(node = %cable.node, port = cable.port, up, loss_percent,
            answer = %answers.join(" / ").trim(), "ibsim demo drill: cable fault set");
        let mut cables = self.cables.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = cables
            .iter_mut()
            .find(|c| c.node == cable.node && c.port == cable.port)
        {
            c.up = up;
            if up {
                c.loss_percent = u32::from(loss_percent);
            }
        }
        Ok(())
    }

    /// LIDs and LFTs as the switches hold them: `ibnetdiscover -p`, then `ibroute LID`
    /// for each switch, under umad2sim on the poller's HCA (ibsim serves several
    /// clients on one node).
    pub async fn read_fabric(&self) -> Result<pb::ReadFabricResponse, DemoError> {
        let sim = Arc::clone(&self.sim);
        let host = self.poller_host.clone();
        self.sup
            .run(move || read_fabric_with(&sim, &host))
            .await?
            .map_err(DemoError::Unavailable)
    }

    /// Wait until every member accepts TCP connections on its gRPC port (the drill
    /// connects to all of them at once); fails with the log's tail if one exits.
    async fn wait_members_listening(&self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        let eps: Vec<(String, SocketAddr, PathBuf)> = {
            let members = self.members.lock().unwrap_or_else(|p| p.into_inner());
            members
                .iter()
                .map(|m| (m.name.clone(), m.endpoint, m.log.clone()))
                .collect()
        };
        for (name, ep, log) in eps {
            loop {
                if tokio::net::TcpStream::connect(ep).await.is_ok() {
                    break;
                }
                let running = {
                    let mut members = self.members.lock().unwrap_or_else(|p| p.into_inner());
                    members
                        .iter_mut()
                        .find(|m| m.name == name)
                        .is_some_and(IbMember::running)
                };
                if !running || Instant::now() > deadline {
                    let text = std::fs::read_to_string(&log).unwrap_or_default();
                    let tail: Vec<&str> = text.lines().rev().take(10).collect();
                    let tail: Vec<&str> = tail.into_iter().rev().collect();
                    anyhow::bail!(
                        "{name} {} its gRPC port {ep}; {}:\n{}",
                        if running {
                            "did not open"
                        } else {
                            "exited before opening"
                        },
                        log.display(),
                        tail.join("\n")
                    );
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        Ok(())
    }

    fn kill_all(&self) {
        let procs: Vec<ChildGuard> = {
            let mut members = self.members.lock().unwrap_or_else(|p| p.into_inner());
            members.iter_mut().filter_map(|m| m.proc.take()).collect()
        };
        for mut p in procs {
            let _ = p.kill();
        }
        if let Some(mut p) = self
            .poller_proc
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            let _ = p.kill();
        }
    }
}

impl Drop for IbsimShared {
    fn drop(&mut self) {
        self.kill_all();
        self.sup.shutdown();
    }
}

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

/// The members' HCAs, the poller's HCA and the DR paths from it, out of a net file.
struct Plan {
    /// (node id, port, remote node id, remote port)
    hosts: Vec<(String, u8, String, u8)>,
    poller_host: String,
    paths: Vec<Vec<u8>>,
    /// Every cable once, with what a fault on it would hit.
    cables: Vec<pb::Cable>,
}

/// Every cable of `t` once (from its lower (node, port) end), marked with the member
/// whose CA port it is and whether the poller's directed routes (from `spare`) cross it.
fn cables_of(
    t: &ibsm_fabric::Topology,
    hosts: &[(ibsm_fabric::NodeIdx, u8, String)],
    spare: (ibsm_fabric::NodeIdx, u8),
    paths: &[Vec<u8>],
) -> Vec<pb::Cable> {
    let mut judged = std::collections::HashSet::new();
    for path in paths {
        let mut at = spare.0;
        for p in path {
            let Some(next) = t.node(at).and_then(|n| n.port(*p)).and_then(|q| q.remote) else {
                break;
            };
            judged.insert(((at, *p).min(next), (at, *p).max(next)));
            at = next.0;
        }
    }
    let name_of = |i| t.node(i).map(|n| n.name.clone()).unwrap_or_default();
    let mut out = Vec::new();
    for (idx, node) in t.iter() {
        for (p, port) in node.physical_ports() {
            let Some(r) = port.remote else { continue };
            if (idx, p) > r {
                continue;
            }
            let sm = hosts
                .iter()
                .position(|(h, hp, _)| (*h, *hp) == (idx, p) || (*h, *hp) == r)
                .map_or(String::new(), |i| format!("sm{}", i + 1));
            out.push(pb::Cable {
                node: node.name.clone(),
                port: u32::from(p),
                remote: name_of(r.0),
                remote_port: u32::from(r.1),
                switch_to_switch: node.is_switch()
                    && t.node(r.0).is_some_and(ibsm_fabric::Node::is_switch),
                sm,
                judge_path: judged.contains(&((idx, p), r)),
                up: true,
                loss_percent: 0,
            });
        }
    }
    out
}

fn plan(netfile: &Path) -> anyhow::Result<Plan> {
    let text = std::fs::read_to_string(netfile)
        .map_err(|e| anyhow::anyhow!("net file {}: {e}", netfile.display()))?;
    let t = ibsm_fabric::netfile::parse(&text)
        .map_err(|e| anyhow::anyhow!("net file {}: {e}", netfile.display()))?;
    let n = DEMO_PRIORITIES.len();
    let hosts = pick_ca_ports(&t, n);
    let spare = pick_ca_ports(&t, usize::MAX)
        .into_iter()
        .find(|(a, p, _)| !hosts.iter().any(|(b, q, _)| a == b && p == q));
    let (Some(spare), true) = (spare, hosts.len() == n) else {
        anyhow::bail!(
            "net file {}: the ibsim demo needs {} CA ports with a cable ({n} SMs and the SMInfo poller)",
            netfile.display(),
            n + 1
        );
    };
    let name_of = |idx| {
        t.node(idx)
            .map(|node| node.name.clone())
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    let mut paths = Vec::new();
    for (idx, port, _) in &hosts {
        let (ridx, rport) = t
            .node(*idx)
            .and_then(|node| node.port(*port))
            .and_then(|p| p.remote)
            .ok_or_else(|| anyhow::anyhow!("{} port {port} has no cable", name_of(*idx)))?;
        let path = dr_path(&t, (spare.0, spare.1), (*idx, *port)).ok_or_else(|| {
            anyhow::anyhow!(
                "no directed route from {} to {}",
                name_of(spare.0),
                name_of(*idx)
            )
        })?;
        out.push((name_of(*idx), *port, name_of(ridx), rport));
        paths.push(path);
    }
    if out.iter().any(|h| h.0.is_empty()) || name_of(spare.0).is_empty() {
        anyhow::bail!("net file {}: a CA without a node id", netfile.display());
    }
    let cables = cables_of(&t, &hosts, (spare.0, spare.1), &paths);
    Ok(Plan {
        hosts: out,
        poller_host: name_of(spare.0),
        paths,
        cables,
    })
}

/// Run `ibnetdiscover -p` and `ibroute LID` for each switch on `host`; parse them.
fn read_fabric_with(sim: &Ibsim, host: &str) -> Result<pb::ReadFabricResponse, String> {
    let run = |args: &[&str]| -> Result<String, String> {
        let tool = args.first().copied().unwrap_or_default();
        ibsm_labkit::require_tool(tool).map_err(|e| e.to_string())?;
        let mut cmd = sim.command_on(host, tool);
        cmd.args(args.get(1..).unwrap_or(&[]))
            .stdin(Stdio::null())
            .env_remove("RUST_LOG");
        let out = sim
            .run(&mut cmd, DIAG_TIMEOUT)
            .map_err(|e| format!("{}: {e}", args.join(" ")))?;
        if !out.status.success() {
            return Err(format!(
                "{} on {host} failed ({}): {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let mut commands = vec![format!("SIM_HOST={host} ibnetdiscover -p")];
    let lids = parse_ibnetdiscover_ports(&run(&["ibnetdiscover", "-p"])?);
    let mut switches = Vec::new();
    for l in lids.iter().filter(|l| l.kind == "SW") {
        let lid = l.lid.to_string();
        commands.push(format!("SIM_HOST={host} ibroute {lid}"));
        let text = run(&["ibroute", &lid])?;
        switches.push(pb::SwitchLft {
            node_guid: l.port_guid,
            lid: l.lid,
            description: l.description.clone(),
            entries: parse_ibroute(&text),
        });
    }
    Ok(pb::ReadFabricResponse {
        lids,
        switches,
        commands,
    })
}

/// The ports `ibnetdiscover -p` lists, one per port GUID (a switch once, by its port
/// 0 GUID and LID): `CA  3  1 0x000000000010000a 4x SDR - SW ... ( 'Hca4' - 'Switch2' )`.
pub fn parse_ibnetdiscover_ports(text: &str) -> Vec<pb::FabricLid> {
    let mut seen = std::collections::BTreeMap::new();
    for line in text.lines() {
        let mut w = line.split_whitespace();
        let (Some(kind), Some(lid), Some(_port), Some(guid)) =
            (w.next(), w.next(), w.next(), w.next())
        else {
            continue;
        };
        if kind != "CA" && kind != "SW" {
            continue;
        }
        let (Ok(lid), Some(Ok(guid))) = (
            lid.parse::<u32>(),
            guid.strip_prefix("0x").map(|g| u64::from_str_radix(g, 16)),
        ) else {
            continue;
        };
        let description = line
            .split('\'')
            .nth(1)
            .map(str::to_string)
            .unwrap_or_default();
        seen.entry(guid).or_insert(pb::FabricLid {
            port_guid: guid,
            lid,
            kind: kind.to_string(),
            description,
        });
    }
    seen.into_values().collect()
}

/// The entries `ibroute` prints: `0x0003 002 : (Channel Adapter portguid ...)`.
pub fn parse_ibroute(text: &str) -> Vec<pb::LftEntry> {
    text.lines()
        .filter_map(|line| {
            let mut w = line.split_whitespace();
            let lid = w.next()?.strip_prefix("0x")?;
            let port = w.next()?;
            if w.next() != Some(":") {
                return None;
            }
            Some(pb::LftEntry {
                lid: u32::from_str_radix(lid, 16).ok()?,
                port: port.parse().ok()?,
            })
        })
        .collect()
}

/// `--target` value of `ibsmd sminfo-poll`: `NAME=P1,P2,...`.
pub fn format_target(name: &str, path: &[u8]) -> String {
    let p: Vec<String> = path.iter().map(u8::to_string).collect();
    format!("{name}={}", p.join(","))
}

/// Parse `NAME=P1,P2,...` (a directed route: egress ports, the first one ours).
pub fn parse_target(s: &str) -> Result<(String, Vec<u8>), String> {
    let (name, path) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected NAME=P1,P2,... (a directed route)"))?;
    if name.is_empty() {
        return Err(format!("{s:?}: empty name"));
    }
    let ports = path
        .split(',')
        .map(|p| {
            p.trim()
                .parse::<u8>()
                .map_err(|e| format!("{s:?}: port {p:?}: {e}"))
        })
        .collect::<Result<Vec<u8>, String>>()?;
    if ports.is_empty() || ports.len() > 63 || ports.first() == Some(&0) {
        return Err(format!(
            "{s:?}: a directed route has 1..=63 hops and starts at our port (not 0)"
        ));
    }
    Ok((name.to_string(), ports))
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
            crate::replication::random_cluster_secret()
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
                // Demo/SetRaftIsolation reaches the member's own replica switch.
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
            .set_serving::<pb::demo_server::DemoServer<crate::demo_service::DemoService>>()
            .await;
        let router = tonic::transport::Server::builder()
            .add_service(health_service)
            .add_service(pb::demo_server::DemoServer::new(
                crate::demo_service::DemoService::new(Some(handle)),
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

/// `ibsmd sminfo-poll`: poll `targets` from this process's umad port (run it under
/// umad2sim with `SIM_HOST` set) and print one [`PollLine`] per change, plus a
/// heartbeat per second, until stdout closes.
pub fn run_sminfo_poll(fabric: &FabricSpec, targets: Vec<(String, Vec<u8>)>) -> anyhow::Result<()> {
    use std::io::Write;
    let FabricSpec::Umad(port) = fabric else {
        anyhow::bail!("sminfo-poll reads SMInfo through umad: give --fabric umad[:CA[:PORT]]");
    };
    if targets.is_empty() {
        anyhow::bail!("sminfo-poll needs at least one --target NAME=PATH");
    }
    let dev = UmadDevice::open(port, Duration::from_millis(200))?;
    let poller = SmInfoPoller::start_on_device(Box::new(dev), targets)?;
    let mut cursor = 0;
    let mut beat = Instant::now();
    let stdout = std::io::stdout();
    loop {
        std::thread::sleep(crate::demo_poller::INTERVAL);
        let v = poller.since(cursor);
        let mut out = stdout.lock();
        for s in &v.samples {
            serde_json::to_writer(&mut out, &PollLine::of_sample(s, v.rounds))?;
            out.write_all(b"\n")?;
        }
        cursor = v.next_seq;
        if beat.elapsed() >= Duration::from_secs(1) {
            beat = Instant::now();
            serde_json::to_writer(
                &mut out,
                &PollLine {
                    rounds: v.rounds,
                    sample: None,
                },
            )?;
            out.write_all(b"\n")?;
        }
        // A closed pipe (the demo is gone) ends the poller.
        out.flush()?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diag_output_is_parsed_into_lids_and_lft_entries() {
        let disc = "CA     3  1 0x000000000010000a 4x SDR - SW     2  2 0x0000000000200001 ( 'Hca4' - 'Switch2' )\n\
SW     2  8 0x0000000000200001 4x SDR                                    'Switch2'\n\
SW     2  5 0x0000000000200001 4x SDR - SW     4  5 0x0000000000200000 ( 'Switch2' - 'Switch1' )\n\
# garbage\nCA x 1 0xzz\n";
        let l = parse_ibnetdiscover_ports(disc);
        assert_eq!(l.len(), 2, "{l:?}");
        let hca = l.iter().find(|x| x.kind == "CA").expect("CA");
        assert_eq!(
            (hca.port_guid, hca.lid, hca.description.as_str()),
            (0x10000a, 3, "Hca4")
        );
        let sw = l.iter().find(|x| x.kind == "SW").expect("SW");
        assert_eq!(
            (sw.port_guid, sw.lid, sw.description.as_str()),
            (0x200001, 2, "Switch2")
        );
        let route = "Unicast lids [0x0-0x6] of switch Lid 2 guid 0x0000000000200001 (Switch2):\n  Lid  Out   Destination\n       Port     Info \n0x0001 001 : (Channel Adapter portguid 0x0000000000100004: 'Hca2')\n0x0002 000 : (Switch portguid 0x0000000000200001: 'Switch2')\n6 valid lids dumped \n";
        let e = parse_ibroute(route);
        assert_eq!(
            e.iter().map(|x| (x.lid, x.port)).collect::<Vec<_>>(),
            [(1, 1), (2, 0)]
        );
        assert!(parse_ibroute("nonsense\n0x zz : x\n").is_empty());
    }

    #[test]
    fn targets_round_trip_and_bad_ones_are_refused() {
        let t = format_target("sm2", &[1, 3, 1]);
        assert_eq!(t, "sm2=1,3,1");
        assert_eq!(parse_target(&t), Ok(("sm2".to_string(), vec![1, 3, 1])));
        for bad in ["sm1", "=1", "sm1=", "sm1=0,1", "sm1=1,x", "sm1=1,256"] {
            assert!(parse_target(bad).is_err(), "{bad}");
        }
    }

    /// The topology of ibsim-utils' net.2sw2path4hca (inline: this test needs no lab).
    const NET: &str = "Switch\t8 \"Switch1\"\n[1]\t\"Hca1\"[1]\n[2]\t\"Hca3\"[1]\n[3]\t\"Switch2\"[3]\n[5]\t\"Switch2\"[5]\n\nSwitch 8 \"Switch2\"\n[1]\t\"Hca2\"[1]\n[2]\t\"Hca4\"[1]\n[3]\t\"Switch1\"[3]\n[5]\t\"Switch1\"[5]\n\nHca\t2 \"Hca1\"\n[1]\t\"Switch1\"[1]\n\nHca\t2 \"Hca2\"\n[1]\t\"Switch2\"[1]\n\nHca\t2 \"Hca3\"\n[1]\t\"Switch1\"[2]\n\nHca\t2 \"Hca4\"\n[1]\t\"Switch2\"[2]\n";

    #[test]
    fn the_example_net_gives_three_members_and_a_poller_with_routes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let net = dir.path().join("net");
        std::fs::write(&net, NET).expect("write");
        let p = plan(&net).expect("plan");
        let names: Vec<&str> = p.hosts.iter().map(|h| h.0.as_str()).collect();
        assert_eq!(names, ["Hca1", "Hca2", "Hca4"]);
        assert_eq!(p.poller_host, "Hca3");
        assert_eq!(
            p.hosts[0],
            ("Hca1".to_string(), 1, "Switch1".to_string(), 1)
        );
        // From Hca3 (on Switch1 port 2): Hca1 is one switch away, Hca2/Hca4 two.
        assert_eq!(p.paths[0], vec![1, 1]);
        assert_eq!(p.paths[1].len(), 3);
        assert_eq!(p.paths[1].last(), Some(&1));
        assert_eq!(p.paths[2].last(), Some(&2));
        // Cables: 4 CA cables and 2 between the switches, one of those on the judge's
        // routes (the poller reaches Switch2 over it), the other free to fault.
        assert_eq!(p.cables.len(), 6, "{:?}", p.cables);
        let isl: Vec<&pb::Cable> = p.cables.iter().filter(|c| c.switch_to_switch).collect();
        assert_eq!(isl.len(), 2);
        assert_eq!(isl.iter().filter(|c| c.judge_path).count(), 1, "{isl:?}");
        let sms: Vec<&str> = p
            .cables
            .iter()
            .map(|c| c.sm.as_str())
            .filter(|s| !s.is_empty())
            .collect();
        assert_eq!(sms.len(), 3, "{:?}", p.cables);
        // A net file with too few CAs is refused with a reason.
        let small = dir.path().join("small");
        std::fs::write(
            &small,
            "Switch\t8 \"S\"\n[1]\t\"H\"[1]\n\nHca\t2 \"H\"\n[1]\t\"S\"[1]\n",
        )
        .expect("write");
        let e = plan(&small)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("needs 4 CA ports"), "{e}");
    }
}
