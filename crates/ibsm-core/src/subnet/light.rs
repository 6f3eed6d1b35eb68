//! The light sweep: SubnGet(SwitchInfo) of every switch (PortStateChange) and
//! PortInfo of our own port and of the known SM ports, each compared with what the
//! last heavy sweep left; any change or silence requests a heavy sweep. Also the
//! SM ports (IsSM) a discovery found, with their DR paths, which the heavy sweep
//! reports too.

use std::time::Duration;

use ibsm_fabric::NodeIdx;
use ibsm_mad::attr::{CapabilityMask, PortState};
use ibsm_mad::{AttributeId, PortInfo, Smp, SwitchInfo};

use crate::discovery::DiscoveryResult;

use super::events::SweepReason;
use super::manager::SubnetManager;
use super::program;
use super::sweep::{LightOp, PortExpect, Stage, Tagged, Token};

impl SubnetManager {
    pub(super) fn start_light(&mut self, now: Duration) {
        let Some(last) = self.last.as_ref() else {
            self.request_heavy(SweepReason::LightSweepChange);
            return;
        };
        self.next_light = None;
        self.light_smps_start = self.tx.counters().sent;
        let mut outstanding = 0;
        let mut reqs: Vec<(Smp, Token)> = Vec::new();
        for (idx, node) in last.topology.iter() {
            let Some(path) = last.path(idx) else { continue };
            if node.is_switch() {
                if let Ok(smp) = Smp::try_get_dr(path, AttributeId::SWITCH_INFO, 0, 0) {
                    reqs.push((smp, Token::Light(LightOp::SwitchInfo)));
                }
            }
        }
        let master_sm_lid = last
            .local
            .and_then(|(n, p)| last.topology.node(n)?.port(p).map(|p| p.lid))
            .unwrap_or(0);
        let expect = |node: NodeIdx, port: u8, sm: bool| PortExpect {
            state: match port_state(last, node, port) {
                // The heavy sweep activated every trained link port.
                PortState::Init | PortState::Armed => PortState::Active,
                s => s,
            },
            lid: last
                .topology
                .node(node)
                .and_then(|n| n.port(port))
                .map_or(0, |p| p.lid),
            master_sm_lid,
            sm,
        };
        if let Some((node, port)) = last.local {
            if let Ok(smp) = Smp::try_get_dr(&[], AttributeId::PORT_INFO, u32::from(port), 0) {
                reqs.push((
                    smp,
                    Token::Light(LightOp::PortInfo(expect(node, port, false))),
                ));
            }
        }
        for (node, port, path) in sm_port_paths(last) {
            if let Ok(smp) = Smp::try_get_dr(&path, AttributeId::PORT_INFO, u32::from(port), 0) {
                reqs.push((
                    smp,
                    Token::Light(LightOp::PortInfo(expect(node, port, true))),
                ));
            }
        }
        for (smp, token) in reqs {
            outstanding += 1;
            self.tx.submit(
                now,
                smp,
                Tagged {
                    generation: self.generation,
                    token,
                },
            );
        }
        self.stage = Stage::Light {
            outstanding,
            changed: false,
        };
    }

    pub(super) fn on_light(&mut self, op: LightOp, smp: Option<&Smp>) {
        let Stage::Light {
            outstanding,
            changed,
        } = &mut self.stage
        else {
            return;
        };
        *outstanding = outstanding.saturating_sub(1);
        let Some(smp) = smp.filter(|s| s.status == 0) else {
            *changed = true;
            return;
        };
        match op {
            LightOp::SwitchInfo => {
                if smp
                    .attribute::<SwitchInfo>()
                    .map_or(true, |si| si.port_state_change)
                {
                    *changed = true;
                }
            }
            LightOp::PortInfo(want) => match smp.attribute::<PortInfo>() {
                Ok(pi) => {
                    let why = if pi.port_state != want.state {
                        Some("PortState")
                    } else if pi.lid != want.lid {
                        Some("LID")
                    } else if pi.master_sm_lid != want.master_sm_lid {
                        Some("MasterSMLID")
                    } else if want.sm && !pi.capability_mask.contains(CapabilityMask::IS_SM) {
                        Some("IsSM cleared")
                    } else {
                        None
                    };
                    if let Some(why) = why {
                        tracing::info!(
                            why,
                            lid = pi.lid,
                            state = ?pi.port_state,
                            master_sm_lid = pi.master_sm_lid,
                            sm_port = want.sm,
                            "light sweep: an SM port reads differently"
                        );
                        *changed = true;
                    }
                }
                Err(_) => *changed = true,
            },
        }
    }
}

/// PortState of a port as the last discovery read it.
fn port_state(res: &DiscoveryResult, node: NodeIdx, port: u8) -> PortState {
    res.port_info
        .get(node.as_usize())
        .and_then(|v| v.get(usize::from(port)))
        .and_then(|p| p.as_ref())
        .map_or(PortState::Down, |p| p.port_state)
}

/// Ports other than ours with CapabilityMask.IsSM, with the DR path that reaches them.
pub(super) fn sm_port_paths(res: &DiscoveryResult) -> Vec<(NodeIdx, u8, Vec<u8>)> {
    let mut out = Vec::new();
    for (idx, node) in res.topology.iter() {
        let Some(pis) = res.port_info.get(idx.as_usize()) else {
            continue;
        };
        for (port, pi) in pis.iter().enumerate() {
            let Some(pi) = pi else { continue };
            let Ok(port) = u8::try_from(port) else {
                continue;
            };
            if !pi.capability_mask.contains(CapabilityMask::IS_SM) || res.local == Some((idx, port))
            {
                continue;
            }
            if let Some(path) = program::port_path(res, idx, port, node.is_switch()) {
                out.push((idx, port, path));
            }
        }
    }
    out
}
