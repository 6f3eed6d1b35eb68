//! The embedded demo's members (instance, simulator client, endpoint, replica) and
//! the drills on them, behind one lock.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use ibsm_fabric::NodeIdx;
use ibsm_transport::SharedSim;
use tokio::sync::oneshot;

use super::types::{DemoError, MemberInfo, Selector};
use ibsmd::embedded::spawn_on_sim_client;
use ibsmd::instance::{Instance, InstanceConfig};
use ibsmd::metrics::Metrics;
use ibsmd::replication::Replication;
use ibsmd::server::InstanceSlot;

pub(super) struct Member {
    pub(super) name: String,
    pub(super) host: String,
    pub(super) priority: u8,
    pub(super) node: NodeIdx,
    pub(super) port: u8,
    /// The running instance's simulator client (detached first on a kill).
    pub(super) client: Option<ibsm_sim::ClientId>,
    pub(super) endpoint: SocketAddr,
    pub(super) slot: InstanceSlot,
    pub(super) metrics: Arc<Metrics>,
    pub(super) repl: Arc<Replication>,
    pub(super) stop: Option<oneshot::Sender<()>>,
    pub(super) server: Option<tokio::task::JoinHandle<Result<(), ibsmd::DaemonError>>>,
}

impl Member {
    pub(super) fn info(&self) -> MemberInfo {
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

    pub(super) fn take_instance(&self) -> Option<Arc<Instance>> {
        match self.slot.write() {
            Ok(mut s) => s.take(),
            Err(p) => p.into_inner().take(),
        }
    }
}

/// State shared by the demo and the Demo gRPC service of its endpoints.
pub struct DemoShared {
    pub(super) sim: SharedSim,
    pub(super) members: Mutex<Vec<Member>>,
    /// Serialises drills so a kill and a restart of one member never overlap.
    pub(super) drills: tokio::sync::Mutex<()>,
    /// The SMInfo observer on a spare CA port (`None`: the fabric has none).
    pub(super) poller: Mutex<Option<crate::poller::SmInfoPoller>>,
}

impl DemoShared {
    pub(super) fn members(&self) -> Vec<MemberInfo> {
        match self.members.lock() {
            Ok(m) => m.iter().map(Member::info).collect(),
            Err(p) => p.into_inner().iter().map(Member::info).collect(),
        }
    }

    /// What the web console serves: every member's slot and replica.
    pub(super) fn web_sources(&self) -> Vec<ibsmd::web::WebSource> {
        let members = match self.members.lock() {
            Ok(m) => m,
            Err(p) => p.into_inner(),
        };
        members
            .iter()
            .map(|m| ibsmd::web::WebSource {
                name: m.name.clone(),
                slot: Arc::clone(&m.slot),
                repl: Some(Arc::clone(&m.repl)),
            })
            .collect()
    }

    pub(super) fn find(&self, sel: &Selector) -> Result<usize, DemoError> {
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

    pub(super) async fn kill(&self, sel: &Selector) -> Result<MemberInfo, DemoError> {
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

    pub(super) async fn restart(&self, name: &str) -> Result<MemberInfo, DemoError> {
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
