//! A takeover that verifies the fabric it already knows instead of walking it again.
//!
//! A standby sweeps the fabric itself (heavy sweeps every few seconds, see
//! `node::standby`), so when its master goes silent it already holds a discovery of
//! the fabric: every node, its directed route, every cable. A fresh breadth-first
//! discovery of a k=16 fat tree is ~12.5k SMPs (NodeInfo and every switch port's
//! PortInfo, level by level), ~140 ms of what ibsim answers; checking that the known
//! discovery still holds is far less and has no level-by-level dependency:
//!
//! - **NodeInfo** of every node on its known route: the same NodeGUID, PortGUID and
//!   LocalPortNum (the port the route enters it by) as recorded. A node replaced, or
//!   a cable on a route moved, answers with another GUID or port, or not at all.
//! - **SwitchInfo** of every switch: `PortStateChange` clear. A switch raises it when
//!   any of its ports changes state (a cable pulled, plugged or moved anywhere on the
//!   switch, on or off a route) and only an SM clears it: the old master cleared it
//!   when it last swept, so a raised bit means the cabling may differ from what any
//!   sweep recorded. The answer also refreshes LinearFDBTop for the LFT read-back.
//! - **PortInfo** of every end port (CA ports the discovery read, switch port 0): the
//!   same PortState as recorded (LID, CapabilityMask with IsSM, MasterSMLID are
//!   taken as read now: they are what LIDs, programming and the election use).
//!
//! On a k=16 fat tree that is 1344 + 320 + 1344 ≈ 3k Gets, all sent at once. If every
//! answer matches, the known discovery, with the fresh SwitchInfo and end-port
//! PortInfo, is this sweep's discovery; the first answer that differs (or a request
//! that fails) ends the verification and the sweep walks the fabric from scratch, as
//! without a known discovery. Switch external ports' PortInfo (MTU/VL caps, link
//! rates) are kept from the known discovery: they change only with a port state
//! change, which the SwitchInfo bit reports.
//!
//! Gets only: harmless if the master turns out alive. The election's guarantee that a
//! master silent over one route but alive over another is not usurped needs a fresh
//! view of where the SM ports are: a verified discovery gives it (every route and the
//! IsSM bit of every end port confirmed after the master went silent; a cable down on
//! the poll route fails the NodeInfo of the nodes behind it, and raises
//! PortStateChange on the switch at its end, so the sweep falls back to a fresh
//! discovery, which finds the master's new route).

use std::collections::VecDeque;

use ibsm_fabric::NodeIdx;
use ibsm_mad::attr::{NodeInfo, PortState, SwitchInfo};
use ibsm_mad::{AttributeId, PortInfo, Smp};

use crate::discovery::DiscoveryResult;

/// What the verification of a known discovery found
/// (`SubnetManager::last_verification`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerificationReport {
    /// Nodes in the known discovery.
    pub nodes: usize,
    /// Reads answered as expected.
    pub matched: u64,
    /// SMPs the verification sent.
    pub smps: u64,
    /// The first difference (then the fabric was discovered from scratch);
    /// `None`: the known discovery was this sweep's.
    pub difference: Option<String>,
}

/// One verification read (named after the attribute read).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(clippy::enum_variant_names)]
pub(super) enum VerifyOp {
    NodeInfo(u32),
    SwitchInfo(u32),
    PortInfo(u32, u8),
}

impl VerifyOp {
    fn node(self) -> u32 {
        match self {
            VerifyOp::NodeInfo(n) | VerifyOp::SwitchInfo(n) | VerifyOp::PortInfo(n, _) => n,
        }
    }
}

/// Why `res` cannot be verified by a takeover: a cabled port it read was not Active
/// (the master was still bringing the fabric up). A link leaves Active only through
/// Down, which raises SwitchInfo.PortStateChange on its switch ends, so a discovery
/// that saw every link Active, and switches that have raised no PortStateChange
/// since, stand for link ports that are all still Active as read.
pub fn unsettled(res: &DiscoveryResult) -> Option<String> {
    for (idx, node) in res.topology.iter() {
        let read = res.port_info.get(idx.as_usize())?;
        for (num, port) in node.physical_ports() {
            if port.remote.is_none() {
                continue;
            }
            let state = read
                .get(usize::from(num))
                .copied()
                .flatten()
                .map(|p| p.port_state);
            if state != Some(PortState::Active) {
                return Some(format!(
                    "node {:#018x} port {num} was {state:?} when it was discovered, not Active",
                    node.node_guid
                ));
            }
        }
    }
    None
}

/// The verification of a known discovery in progress.
#[derive(Debug)]
pub(super) struct Verify {
    /// The known discovery, refreshed in place with what is read.
    pub(super) res: DiscoveryResult,
    pub(super) queue: VecDeque<VerifyOp>,
    pub(super) outstanding: usize,
    /// Why the known discovery does not hold (the first difference seen).
    pub(super) failed: Option<String>,
    /// Reads answered as expected.
    pub(super) matched: u64,
}

impl Verify {
    /// Plan the reads that verify `res`.
    pub(super) fn new(res: DiscoveryResult) -> Verify {
        let mut queue = VecDeque::new();
        for (idx, node) in res.topology.iter() {
            let Ok(n) = u32::try_from(idx.as_usize()) else {
                continue;
            };
            if res.path(idx).is_none() || res.node_info.get(idx.as_usize()).is_none() {
                continue;
            }
            queue.push_back(VerifyOp::NodeInfo(n));
            if node.is_switch() {
                queue.push_back(VerifyOp::SwitchInfo(n));
                queue.push_back(VerifyOp::PortInfo(n, 0));
                continue;
            }
            let read = res.port_info.get(idx.as_usize());
            for (p, pi) in read.into_iter().flatten().enumerate() {
                if let (Some(_), Ok(p)) = (pi, u8::try_from(p)) {
                    if p != 0 {
                        queue.push_back(VerifyOp::PortInfo(n, p));
                    }
                }
            }
        }
        let failed = if queue.is_empty() {
            Some("nothing to verify".to_string())
        } else {
            unsettled(&res)
        };
        Verify {
            res,
            queue,
            outstanding: 0,
            failed,
            matched: 0,
        }
    }

    /// Every read answered (or the verification failed and nothing is in flight).
    /// Every read answered, or one differed (the rest are not waited for).
    pub(super) fn is_done(&self) -> bool {
        self.failed.is_some() || (self.outstanding == 0 && self.queue.is_empty())
    }

    /// The next read to send, if the verification still stands.
    pub(super) fn next(&mut self) -> Option<(VerifyOp, Smp)> {
        if self.failed.is_some() {
            return None;
        }
        let op = self.queue.pop_front()?;
        let (attr, attr_mod) = match op {
            VerifyOp::NodeInfo(_) => (AttributeId::NODE_INFO, 0),
            VerifyOp::SwitchInfo(_) => (AttributeId::SWITCH_INFO, 0),
            VerifyOp::PortInfo(_, p) => (AttributeId::PORT_INFO, u32::from(p)),
        };
        let smp = match self.res.path(NodeIdx(op.node())) {
            Some(path) => Smp::try_get_dr(path, attr, attr_mod, 0).map_err(|e| e.to_string()),
            None => Err("no route known".to_string()),
        };
        match smp {
            Ok(smp) => {
                self.outstanding += 1;
                Some((op, smp))
            }
            Err(err) => {
                self.fail(op, &format!("cannot address it: {err}"));
                None
            }
        }
    }

    fn fail(&mut self, op: VerifyOp, why: &str) {
        if self.failed.is_none() {
            let path = self
                .res
                .path(NodeIdx(op.node()))
                .map(|p| format!("{p:?}"))
                .unwrap_or_default();
            self.failed = Some(format!("{op:?} at route {path}: {why}"));
        }
    }

    /// A read failed after its retries.
    pub(super) fn on_failure(&mut self, op: VerifyOp) {
        self.outstanding = self.outstanding.saturating_sub(1);
        self.fail(op, "no answer");
    }

    /// The answer to `op`: compare with the known discovery, keep what is fresh.
    pub(super) fn on_response(&mut self, op: VerifyOp, smp: &Smp) {
        self.outstanding = self.outstanding.saturating_sub(1);
        if self.failed.is_some() {
            return;
        }
        if smp.status != 0 {
            self.fail(op, &format!("status {:#06x}", smp.status));
            return;
        }
        let i = op.node() as usize;
        let why = match op {
            VerifyOp::NodeInfo(_) => match smp.attribute::<NodeInfo>() {
                Ok(ni) => match self.res.node_info.get(i) {
                    Some(known)
                        if known.node_guid == ni.node_guid
                            && known.port_guid == ni.port_guid
                            && known.local_port_num == ni.local_port_num =>
                    {
                        None
                    }
                    Some(known) => Some(format!(
                        "NodeGUID {:#018x} port {} answered, {:#018x} port {} known",
                        ni.node_guid, ni.local_port_num, known.node_guid, known.local_port_num
                    )),
                    None => Some("unknown node".to_string()),
                },
                Err(e) => Some(format!("bad NodeInfo: {e}")),
            },
            VerifyOp::SwitchInfo(_) => match smp.attribute::<SwitchInfo>() {
                Ok(si) if si.port_state_change => {
                    Some("SwitchInfo.PortStateChange is set: a port changed state".to_string())
                }
                Ok(si)
                    if self
                        .res
                        .switch_info
                        .get(i)
                        .copied()
                        .flatten()
                        .map(|k| k.linear_fdb_top)
                        != Some(si.linear_fdb_top) =>
                {
                    Some(format!(
                        "LinearFDBTop {:#06x} read, another known (the LFT read-back used it)",
                        si.linear_fdb_top
                    ))
                }
                Ok(si) => {
                    if let Some(slot) = self.res.switch_info.get_mut(i) {
                        *slot = Some(si);
                    }
                    None
                }
                Err(e) => Some(format!("bad SwitchInfo: {e}")),
            },
            VerifyOp::PortInfo(n, p) => match smp.attribute::<PortInfo>() {
                Ok(pi) => self.fresh_port_info(n, p, pi),
                Err(e) => Some(format!("bad PortInfo: {e}")),
            },
        };
        match why {
            None => self.matched += 1,
            Some(why) => self.fail(op, &why),
        }
    }

    /// Keep an end port's fresh PortInfo (its LID into the topology too, as
    /// discovery records it) if its PortState is the one recorded.
    fn fresh_port_info(&mut self, n: u32, p: u8, pi: PortInfo) -> Option<String> {
        let slot = self
            .res
            .port_info
            .get_mut(n as usize)
            .and_then(|v| v.get_mut(usize::from(p)))?;
        let known = (*slot)?;
        if known.port_state != pi.port_state {
            return Some(format!(
                "PortState {:?} read, {:?} known",
                pi.port_state, known.port_state
            ));
        }
        *slot = Some(pi);
        if let Err(err) = self
            .res
            .topology
            .set_port_lid(NodeIdx(n), p, pi.lid, pi.lmc)
        {
            return Some(format!("cannot record LID: {err}"));
        }
        None
    }
}
