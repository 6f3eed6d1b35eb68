//! The [`SaFabric`] a heavy sweep leaves for the Subnet Administrator: PortInfo as the
//! sweep wrote it (read-modify-write of what discovery read), with the port states
//! activation left, the P_Key tables and LFTs it programmed.

use std::collections::HashMap;
use std::sync::Arc;

use ibsm_fabric::NodeIdx;
use ibsm_mad::attr::{PhysPortState, PortState};

use crate::sa::{SaFabric, DEFAULT_SUBNET_PREFIX};

use super::config::SubnetConfig;
use super::program::{desired_port_info, pkey_table};
use super::sweep::{Programmed, Sweep};

/// What the SA serves after `sweep` (the master's `sweep_no`-th heavy sweep), LFTs
/// left out: [`fill_lfts`] adds them once the sweep's tables are recorded as
/// programmed.
pub(super) fn sa_snapshot(sw: &Sweep, cfg: &SubnetConfig, sweep_no: u64) -> SaFabric {
    let res = &sw.res;
    let topo = &res.topology;
    let mut port_info = res.port_info.clone();
    for (i, ports) in port_info.iter_mut().enumerate() {
        let Ok(i32) = u32::try_from(i) else { break };
        let idx = NodeIdx(i32);
        for (p, slot) in ports.iter_mut().enumerate() {
            let Some(read) = *slot else { continue };
            let Ok(p) = u8::try_from(p) else { break };
            let mut pi = desired_port_info(sw, cfg, idx, p).unwrap_or(read);
            // Activation takes every trained link to Active; the SA reports what
            // the port holds, not the "no change" of a Set.
            pi.port_physical_state = read.port_physical_state;
            pi.port_state = match read.port_state {
                PortState::Init | PortState::Armed | PortState::Active
                    if read.port_physical_state == PhysPortState::LinkUp
                        || topo.node(idx).is_some_and(|n| n.is_switch() && p == 0) =>
                {
                    PortState::Active
                }
                s => s,
            };
            pi.client_reregister = false;
            *slot = Some(pi);
        }
    }
    let mut pkeys = HashMap::new();
    for (_, node) in topo.iter() {
        for (_, port) in node.physical_ports() {
            if port.port_guid != 0 && !node.is_switch() {
                let t = pkey_table(cfg, port.port_guid);
                let keys = t
                    .keys
                    .iter()
                    .copied()
                    .filter(|k| k.0 & 0x7FFF != 0)
                    .collect();
                pkeys.insert(port.port_guid, keys);
            }
        }
        if node.is_switch() {
            if let Some(p0) = node.port(0) {
                let t = pkey_table(cfg, 0);
                let keys = t
                    .keys
                    .iter()
                    .copied()
                    .filter(|k| k.0 & 0x7FFF != 0)
                    .collect();
                pkeys.insert(p0.port_guid, keys);
            }
        }
    }
    let (sm_port_guid, subnet_prefix) = res
        .local
        .and_then(|(n, p)| {
            let guid = topo.node(n)?.port(p)?.port_guid;
            let prefix = res
                .port_info
                .get(n.as_usize())?
                .get(usize::from(p))?
                .map(|pi| pi.gid_prefix);
            Some((
                guid,
                prefix.filter(|&x| x != 0).unwrap_or(DEFAULT_SUBNET_PREFIX),
            ))
        })
        .unwrap_or((0, DEFAULT_SUBNET_PREFIX));
    SaFabric::new(
        sweep_no,
        subnet_prefix,
        sw.master_lid,
        sm_port_guid,
        topo.clone(),
        res.node_info.clone(),
        port_info,
        res.switch_info.clone(),
        Vec::new(),
        pkeys,
    )
}

/// Put the LFTs the switches hold (as `prog` records them) into `sa`.
pub(super) fn fill_lfts(sa: &mut SaFabric, prog: &Programmed) {
    let mut lfts: Vec<Option<Arc<[u8]>>> = vec![None; sa.topology.len()];
    for (idx, node) in sa.topology.iter() {
        if let (Some((_, lft)), Some(slot)) =
            (prog.lfts.get(&node.node_guid), lfts.get_mut(idx.as_usize()))
        {
            *slot = Some(Arc::from(lft.as_slice()));
        }
    }
    sa.lfts = lfts;
}
