//! Start-up: learn our port (0-hop SubnGet(NodeInfo), then PortInfo) before the
//! election can run, keeping what else arrives meanwhile (see the module doc of
//! [`super`]).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use ibsm_mad::{AttributeId, Method, NodeInfo, PortInfo, Smp, MAD_SIZE};

use crate::subnet::Outgoing;

use super::config::{NodeConfig, STARTUP_BACKLOG_MAX, STARTUP_TIMEOUT, STARTUP_TRIES};
use super::state::{Backlogged, STARTUP_TIDS};
use super::types::{NodeCommand, NodeError, Output, ReplicatedFabric};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StartupStep {
    Waiting,
    Done,
}

/// A node that does not know its port yet.
pub(crate) struct Startup {
    pub cfg: NodeConfig,
    /// NodeInfo read (the second read asks PortInfo of its LocalPortNum).
    node_info: Option<NodeInfo>,
    /// (port GUID, LID, local port number) once both reads answered.
    pub port: Option<(u64, u16, u8)>,
    tries: u32,
    /// When the current read is retried.
    pub deadline: Duration,
    pub backlog: VecDeque<Backlogged>,
    pub commands: Vec<(u64, NodeCommand)>,
    pub replicated: Option<Arc<ReplicatedFabric>>,
    pub failed: bool,
}

impl Startup {
    pub(crate) fn new(cfg: NodeConfig, now: Duration, out: &mut VecDeque<Output>) -> Startup {
        let mut s = Startup {
            cfg,
            node_info: None,
            port: None,
            tries: 0,
            deadline: now,
            backlog: VecDeque::new(),
            commands: Vec::new(),
            replicated: None,
            failed: false,
        };
        s.send(now, out);
        s
    }

    fn current(&self) -> (AttributeId, u32, u32, &'static str) {
        match &self.node_info {
            None => (AttributeId::NODE_INFO, 0, 1, "NodeInfo"),
            Some(ni) => (
                AttributeId::PORT_INFO,
                u32::from(ni.local_port_num),
                2,
                "PortInfo",
            ),
        }
    }

    /// (Re)send the current read. Every SMP carries the fabric's M_Key (IBA
    /// 14.2.4): at protection level 2 our own port's reads need it too.
    fn send(&mut self, now: Duration, out: &mut VecDeque<Output>) {
        let (attr, attr_mod, seq, name) = self.current();
        if self.tries >= STARTUP_TRIES {
            self.failed = true;
            out.push_back(Output::Failed(NodeError::LocalPortSilent {
                attr: name,
                tries: STARTUP_TRIES,
            }));
            return;
        }
        self.tries += 1;
        self.deadline = now.saturating_add(STARTUP_TIMEOUT);
        let tid = u64::from(STARTUP_TIDS.nth(seq));
        match Smp::try_get_dr(&[], attr, attr_mod, tid) {
            Ok(mut smp) => {
                smp.m_key = self.cfg.subnet.m_key.key;
                out.push_back(Output::Transmit(Outgoing {
                    dlid: None,
                    mad: smp.encode(),
                }));
            }
            Err(err) => tracing::warn!(%err, "cannot address our own port"),
        }
    }

    pub(crate) fn handle_timeout(&mut self, now: Duration, out: &mut VecDeque<Output>) {
        if !self.failed && now >= self.deadline {
            self.send(now, out);
        }
    }

    pub(crate) fn handle_mad(
        &mut self,
        now: Duration,
        mad: &[u8; MAD_SIZE],
        slid: u16,
        out: &mut VecDeque<Output>,
    ) -> StartupStep {
        if self.failed {
            return StartupStep::Waiting;
        }
        let (attr, _, seq, name) = self.current();
        let ours = Smp::decode(mad).ok().filter(|smp| {
            smp.method == Method::GET_RESP
                && smp.tid as u32 == STARTUP_TIDS.nth(seq)
                && smp.attr_id == attr
        });
        let Some(smp) = ours else {
            if self.backlog.len() < STARTUP_BACKLOG_MAX {
                self.backlog.push_back((Box::new(*mad), slid));
            } else {
                tracing::warn!("start-up backlog full: MAD dropped");
            }
            return StartupStep::Waiting;
        };
        if smp.status != 0 {
            self.failed = true;
            out.push_back(Output::Failed(NodeError::LocalPortStatus {
                attr: name,
                status: smp.status,
            }));
            return StartupStep::Waiting;
        }
        match &self.node_info {
            None => match smp.attribute::<NodeInfo>() {
                Ok(ni) if ni.port_guid == 0 => {
                    self.failed = true;
                    out.push_back(Output::Failed(NodeError::NoPortGuid));
                }
                Ok(ni) => {
                    self.node_info = Some(ni);
                    self.tries = 0;
                    self.send(now, out);
                }
                Err(err) => tracing::warn!(%err, "undecodable local NodeInfo: asking again"),
            },
            Some(ni) => match smp.attribute::<PortInfo>() {
                Ok(pi) => {
                    self.port = Some((ni.port_guid, pi.lid, ni.local_port_num));
                    return StartupStep::Done;
                }
                Err(err) => tracing::warn!(%err, "undecodable local PortInfo: asking again"),
            },
        }
        StartupStep::Waiting
    }
}
