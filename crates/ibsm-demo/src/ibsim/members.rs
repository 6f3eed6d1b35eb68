//! The running demo on ibsim: its member processes and the drills on them (kill,
//! restart, cable, Raft isolation, cable faults, `ReadFabric`), shared by the Demo
//! service and the demo handle.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ibsm_labkit::{ChildGuard, Ibsim};
use ibsm_mad::SmState;
use ibsm_proto::demo::v1 as pb;
use ibsm_proto::v1 as pb_v1;

use super::options::{MEMBER_LOG, MEMBER_RPC};
use super::read_fabric::read_fabric_with;
use super::supervisor::Supervisor;
use crate::demo::{DemoError, Selector};
use crate::poller::{PollView, SmInfoPoller};

pub(super) struct IbMember {
    pub(super) name: String,
    /// Net-file node id of its HCA (`SIM_HOST`).
    pub(super) host: String,
    pub(super) port: u8,
    /// The other end of its cable (node id, port), for `Link`.
    pub(super) remote: (String, u8),
    pub(super) priority: u8,
    pub(super) endpoint: SocketAddr,
    pub(super) args: Vec<OsString>,
    pub(super) log: PathBuf,
    pub(super) proc: Option<ChildGuard>,
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
    pub(super) sim: Arc<Ibsim>,
    pub(super) ibsmd: PathBuf,
    pub(super) sup: Supervisor,
    pub(super) members: Mutex<Vec<IbMember>>,
    pub(super) drills: tokio::sync::Mutex<()>,
    pub(super) poller: SmInfoPoller,
    pub(super) poller_proc: Mutex<Option<ChildGuard>>,
    pub(super) poller_host: String,
    pub(super) cables: Mutex<Vec<pb::Cable>>,
}

fn pb_state(s: Option<SmState>) -> pb_v1::SmState {
    match s {
        Some(SmState::Discovering) => pb_v1::SmState::Discovering,
        Some(SmState::Standby) => pb_v1::SmState::Standby,
        Some(SmState::Master) => pb_v1::SmState::Master,
        Some(SmState::NotActive) | None => pb_v1::SmState::Notactive,
    }
}

pub(super) fn spawn_member(sim: &Ibsim, ibsmd: &Path, m: &IbMember) -> Result<ChildGuard, String> {
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
                pb_v1::SmState::Notactive
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

    /// Cut or heal member `name`'s Raft traffic: `ibsm.v1.FaultInjection/SetRaftIsolation`
    /// on the member's own endpoint, which it serves because the demo started it with
    /// `--fault-injection`.
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
            pb_v1::fault_injection_client::FaultInjectionClient::connect(format!(
                "http://{endpoint}"
            )),
        )
        .await
        .map_err(|_| unavailable("connect timed out".into()))?
        .map_err(|e| unavailable(e.to_string()))?;
        tokio::time::timeout(
            MEMBER_RPC,
            client.set_raft_isolation(pb_v1::SetRaftIsolationRequest { isolated }),
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
    /// (and with `multicast` `ibroute -M LID`) for each switch, under umad2sim on the
    /// poller's HCA (ibsim serves several clients on one node).
    pub async fn read_fabric(&self, multicast: bool) -> Result<pb::ReadFabricResponse, DemoError> {
        let sim = Arc::clone(&self.sim);
        let host = self.poller_host.clone();
        self.sup
            .run(move || read_fabric_with(&sim, &host, multicast))
            .await?
            .map_err(DemoError::Unavailable)
    }

    /// Where a client attaches to the judge's HCA (the poller's) under umad2sim.
    pub fn describe_judge(&self) -> pb::DescribeJudgeResponse {
        pb::DescribeJudgeResponse {
            host: self.poller_host.clone(),
            sockname: self.sim.sockname().to_string(),
            preload: ibsm_labkit::UMAD2SIM_LIB.to_string(),
            work_dir: self.sim.dir().display().to_string(),
        }
    }

    /// Wait until every member accepts TCP connections on its gRPC port (the drill
    /// connects to all of them at once); fails with the log's tail if one exits.
    pub(super) async fn wait_members_listening(&self, timeout: Duration) -> anyhow::Result<()> {
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
