//! The [`SaFabric`] a heavy sweep leaves for the Subnet Administrator: PortInfo as the
//! port answered the sweep's SubnSet (its GetResp: what the port holds, not what was
//! written, since "no change" fields and ones a port does not implement keep their
//! value), or as the sweep wrote it when no answer was kept, with the port states
//! activation left, SwitchInfo as it wrote it, the LFTs, P_Key, SLtoVL and
//! VLArbitration tables it programmed.

use std::collections::HashMap;
use std::sync::Arc;

use ibsm_fabric::NodeIdx;
use ibsm_mad::attr::{
    PKey, PKeyTable, PhysPortState, PortState, SlToVlMappingTable, VlArbitrationTable,
};
use ibsm_mad::modifier::VlArbSection;

use crate::sa::{PortTables, SaFabric, DEFAULT_SUBNET_PREFIX};

use super::config::SubnetConfig;
use super::program::{
    desired_port_info, end_port, pkey_table, sl2vl_table, vlarb_sections, vlarb_table,
};
use super::sweep::{Programmed, Sweep};

/// The tables the switches and ports hold once a sweep is recorded (its part of
/// [`Programmed`] the snapshot needs), owned so that a job can take them away.
#[derive(Debug, Default)]
pub(super) struct ProgrammedTables {
    /// `lfts[i]`: the LFT switch `NodeIdx(i)` of the sweep's topology holds.
    pub(super) lfts: Vec<Option<Arc<[u8]>>>,
    /// P_Key block 0 per (node GUID, port), as [`Programmed::pkeys`].
    pub(super) pkeys: HashMap<(u64, u8), [u16; 32]>,
    /// OperationalVLs the QoS tables of (node GUID, port) were written for.
    pub(super) qos: HashMap<(u64, u8), u8>,
}

impl ProgrammedTables {
    /// What `prog` records for the nodes of `topo`.
    pub(super) fn of(prog: &Programmed, topo: &ibsm_fabric::Topology) -> ProgrammedTables {
        let lfts = topo
            .iter()
            .map(|(_, node)| {
                prog.lfts
                    .get(&node.node_guid)
                    .map(|(_, lft)| Arc::clone(lft))
            })
            .collect();
        ProgrammedTables {
            lfts,
            pkeys: prog.pkeys.clone(),
            qos: prog.qos.clone(),
        }
    }
}

/// What the SA serves after `sweep` (the master's `sweep_no`-th heavy sweep), LFTs
/// left out: [`fill_lfts`] adds them once the sweep's tables are recorded as
/// programmed ([`ProgrammedTables`]). The sweep's topology and NodeInfo move into
/// the snapshot (the sweep is the snapshot's to use up).
pub(super) fn sa_snapshot(sw: &mut Sweep, cfg: &SubnetConfig, sweep_no: u64) -> SaFabric {
    let port_tables = sl2vl_plan(sw, cfg);
    let res = &sw.res;
    let topo = &res.topology;
    let mut port_info = res.port_info.clone();
    for (i, ports) in port_info.iter_mut().enumerate() {
        let Ok(i32) = u32::try_from(i) else { break };
        let idx = NodeIdx(i32);
        for (p, slot) in ports.iter_mut().enumerate() {
            let Some(read) = *slot else { continue };
            let Ok(p) = u8::try_from(p) else { break };
            let mut pi = sw
                .port_info_set
                .get(&(i32, p))
                .copied()
                .or_else(|| desired_port_info(sw, cfg, idx, p))
                .unwrap_or(read);
            // Fields a Set writes as "no change" (0) are what the port kept.
            if pi.link_width_enabled == 0 {
                pi.link_width_enabled = read.link_width_enabled;
            }
            if pi.link_speed_enabled == 0 {
                pi.link_speed_enabled = read.link_speed_enabled;
            }
            if pi.link_speed_ext_enabled == 0 {
                pi.link_speed_ext_enabled = read.link_speed_ext_enabled;
            }
            if pi.link_down_default_state == 0 {
                pi.link_down_default_state = read.link_down_default_state;
            }
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
    // SwitchInfo as the sweep's SubnSet(SwitchInfo) leaves it: its LinearFDBTop
    // and LifeTimeValue, PortStateChange cleared (written 1 to clear).
    let mut switch_info = res.switch_info.clone();
    for si in switch_info.iter_mut().flatten() {
        si.linear_fdb_top = sw.tables.lft_top;
        si.life_time_value = cfg.life_time_value;
        si.port_state_change = false;
    }
    let mut pkeys = HashMap::new();
    for (idx, node) in topo.iter() {
        for (pn, port) in node.physical_ports() {
            if port.port_guid != 0 && !node.is_switch() {
                let t = pkey_table(cfg, &end_port(res, idx, pn));
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
                let t = pkey_table(cfg, &end_port(res, idx, 0));
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
    let master_lid = sw.master_lid;
    let res = &mut sw.res;
    let mut sa = SaFabric::new(
        sweep_no,
        subnet_prefix,
        master_lid,
        sm_port_guid,
        std::mem::take(&mut res.topology),
        std::mem::take(&mut res.node_info),
        port_info,
        switch_info,
        Vec::new(),
        pkeys,
    );
    sa.port_tables = port_tables;
    sa
}

/// Which SLtoVL tables the sweep writes, as `program::expand` sends them: a CA's
/// link ports (and the SM's own port), one table each (input port `[0]`); a switch's
/// link ports only with `switch_sl2vl`, one per input port (0 and every other link
/// port). The tables themselves are put in by [`fill_lfts`], for the ports whose
/// QoS tables were acknowledged; a plan entry of a port never written is dropped there.
fn sl2vl_plan(sw: &Sweep, cfg: &SubnetConfig) -> Vec<Vec<PortTables>> {
    let res = &sw.res;
    let mut out = Vec::with_capacity(res.topology.len());
    for (idx, node) in res.topology.iter() {
        let mut ports = vec![PortTables::default(); usize::from(node.num_ports()) + 1];
        let mut links: Vec<u8> = node
            .physical_ports()
            .filter(|(_, p)| p.remote.is_some())
            .map(|(n, _)| n)
            .collect();
        if !node.is_switch() {
            if let Some((l, lp)) = res.local {
                if l == idx && !links.contains(&lp) {
                    links.push(lp);
                }
            }
        }
        for &p in &links {
            let in_ports: Vec<u8> = if !node.is_switch() {
                vec![0]
            } else if cfg.switch_sl2vl {
                std::iter::once(0)
                    .chain(links.iter().copied().filter(|&q| q != p))
                    .collect()
            } else {
                continue;
            };
            if let Some(t) = ports.get_mut(usize::from(p)) {
                t.sl2vl = Some((SlToVlMappingTable::default(), in_ports.into()));
            }
        }
        out.push(ports);
    }
    out
}

/// Put the LFTs the switches hold (as `prog` records them, indexed like the
/// snapshot's topology) into `sa`, and the P_Key, SLtoVL and VLArbitration tables
/// the ports hold.
pub(super) fn fill_lfts(sa: &mut SaFabric, prog: ProgrammedTables) {
    fill_port_tables(sa, &prog);
    let mut lfts = prog.lfts;
    lfts.resize(sa.topology.len(), None);
    sa.lfts = lfts;
}

/// The P_Key, SLtoVL and VLArbitration tables of every port as `prog` records them
/// written: P_Key block 0 as sent; SLtoVL and VLArbitration recomputed from the
/// OperationalVLs they were written for (`program::sl2vl_table`, `vlarb_table`, the
/// blocks `vlarb_sections` gives the port's caps). Shared tables are one `Arc`.
fn fill_port_tables(sa: &mut SaFabric, prog: &ProgrammedTables) {
    let mut pkey_cache: HashMap<[u16; 32], Arc<PKeyTable>> = HashMap::new();
    let mut vlarb_cache: HashMap<(u8, u8, VlArbSection), Arc<VlArbitrationTable>> = HashMap::new();
    let mut all = std::mem::take(&mut sa.port_tables);
    all.resize_with(sa.topology.len(), Vec::new);
    for (idx, node) in sa.topology.iter() {
        let Some(ports) = all.get_mut(idx.as_usize()) else {
            continue;
        };
        ports.resize_with(usize::from(node.num_ports()) + 1, PortTables::default);
        for (p, t) in ports.iter_mut().enumerate() {
            let Ok(p) = u8::try_from(p) else { break };
            let key = (node.node_guid, p);
            t.pkey = prog.pkeys.get(&key).map(|keys| {
                pkey_cache
                    .entry(*keys)
                    .or_insert_with(|| {
                        Arc::new(PKeyTable {
                            keys: keys.map(PKey),
                        })
                    })
                    .clone()
            });
            let Some(&vls) = prog.qos.get(&key) else {
                t.sl2vl = None;
                t.vlarb.clear();
                continue;
            };
            if let Some((table, _)) = t.sl2vl.as_mut() {
                *table = sl2vl_table(vls);
            }
            let caps = sa.port_info_of(idx, p).map_or((0, 0), |pi| {
                (pi.vl_arbitration_low_cap, pi.vl_arbitration_high_cap)
            });
            t.vlarb = vlarb_sections(caps.0, caps.1)
                .into_iter()
                .map(|section| {
                    let cap = match section {
                        VlArbSection::LowLower | VlArbSection::LowUpper => caps.0,
                        VlArbSection::HighLower | VlArbSection::HighUpper => caps.1,
                    };
                    let table = vlarb_cache
                        .entry((vls, cap, section))
                        .or_insert_with(|| Arc::new(vlarb_table(vls, cap, section)))
                        .clone();
                    (section as u8, table)
                })
                .collect();
        }
    }
    sa.port_tables = all;
}
