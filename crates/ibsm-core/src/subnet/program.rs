//! What a heavy sweep sends: the per-node SMP plan (produced lazily, one node
//! at a time, so a 50k-node fabric never holds millions of encoded SMPs) and
//! the encoding of each operation.
//!
//! # Partition enforcement at switches
//!
//! A CA port's P_Key table only stops the CA itself from using other keys; a
//! rogue or misconfigured CA could still send with any P_Key. When a switch
//! implements per-port tables (SwitchInfo.PartitionEnforcementCap > 0) and
//! [`SubnetConfig::partition_enforcement`] is on, the switch external port facing
//! a CA gets a copy of that CA port's P_Key table and
//! PortInfo.PartitionEnforcementInbound/Outbound set, so the switch drops the
//! CA's packets with keys it is not a member of (OpenSM's pkey manager with
//! `no_partition_enforcement FALSE` does the same). If the CA's keys do not fit
//! in the switch port's table, enforcement is switched off there rather than
//! enforcing a truncated table (which would cut the CA off from partitions it
//! belongs to). The table goes out before the enforcement bits.
//!
//! # VLArbitration
//!
//! Every block a port has is written (low-priority table: block 1, and 2 when
//! VLArbitrationLowCap > 32; high-priority: 3, and 4 when
//! VLArbitrationHighCap > 32), so nothing a previous SM left survives, with
//! OpenSM's default tables (`qos_vlarb_high` "0:4,1:0,..,14:0", `qos_vlarb_low`
//! "0:0,1:4,..,14:4", `qos_high_limit` 0 as PortInfo.VLHighLimit). Entries beyond
//! the port's cap are not sent (zero), and an entry for a data VL the link does
//! not operate is written as weight 0.

use ibsm_fabric::{NodeIdx, NodeType};
use ibsm_mad::attr::{
    CapabilityMask, LinearForwardingTable, PKey, PKeyTable, PhysPortState, PortState,
    SlToVlMappingTable, VlArbEntry, VlArbitrationTable,
};
use ibsm_mad::modifier::{PKeyBlock, Sl2VlPorts, VlArbBlock, VlArbSection};
use ibsm_mad::{AttributeId, MadError, PortInfo, Smp, SmpAttribute};

use super::activation;
use super::config::{EndPort, EndPortKind, Membership, SubnetConfig};
use super::events::SweepReport;
use super::lft_stamp::{stamped_block0, Stamp};
use super::lft_write;
use super::sweep::{Op, Programmed, Sweep};
use crate::discovery::DiscoveryResult;
use crate::sa::DEFAULT_SUBNET_PREFIX;

pub(super) fn count(r: &mut SweepReport, op: Op) {
    match op {
        Op::Lft { content: true, .. } => r.lft_blocks_sent += 1,
        Op::Lft { content: false, .. } => r.lft_stamp_sets += 1,
        Op::PortInfo { .. } => r.port_info_sets += 1,
        Op::State { state, .. } => {
            r.port_info_sets += 1;
            if state == 3 {
                r.ports_armed += 1;
            } else {
                r.ports_activated += 1;
            }
        }
        _ => {}
    }
}

/// The next operation: a port state Set that is ready (see `activation`), else
/// the next distribution SMP, planning nodes as needed. Operations of a node
/// found dead are dropped (and count as done).
pub(super) fn next_op(sw: &mut Sweep, cfg: &SubnetConfig, prog: &Programmed) -> Option<Op> {
    loop {
        while let Some(op) = sw
            .pipe
            .ready
            .pop_front()
            .or_else(|| sw.lft_next.pop_front())
            .or_else(|| sw.ops.pop_front())
        {
            if !sw.dead.get(op.node() as usize).copied().unwrap_or(true) {
                return Some(op);
            }
            // Nothing was written, so no stamp to record.
            let _ = lft_write::done(sw, op, lft_write::Outcome::NotSent);
            activation::op_done(sw, op);
        }
        let n = sw.res.topology.len();
        if sw.cursor >= n {
            return None;
        }
        let node = sw.cursor;
        sw.cursor += 1;
        if sw.dead.get(node).copied().unwrap_or(true) {
            activation::planned(sw, node, 0);
            continue;
        }
        let before = sw.ops.len();
        let kept = expand(sw, cfg, prog, node);
        let count = sw.ops.len() - before + kept;
        activation::planned(sw, node, count);
    }
}

fn pi_of(res: &DiscoveryResult, node: NodeIdx, port: u8) -> Option<&PortInfo> {
    res.port_info
        .get(node.as_usize())?
        .get(usize::from(port))?
        .as_ref()
}

/// The LFT blocks of switch `node` (ascending) that differ from what `prog` says
/// it holds; None when the sweep has no table for it.
fn changed_blocks(sw: &Sweep, prog: &Programmed, node: usize, guid: u64) -> Option<Vec<u16>> {
    let lft = sw.tables.lfts.get(node)?.as_ref()?;
    let old = prog.lfts.get(&guid).map(|(_, v)| &v[..]);
    let blocks = lft.len().div_ceil(64);
    let changed = (0..blocks)
        .filter(|&b| {
            let new = lft.get(b * 64..(b * 64 + 64).min(lft.len()));
            let was = old.and_then(|o| o.get(b * 64..(b * 64 + 64).min(o.len())));
            new != was
        })
        .filter_map(|b| u16::try_from(b).ok())
        .collect();
    Some(changed)
}

/// Queue `node`'s distribution SMPs; returns how many more were planned and are
/// held back (an LFT round's, see `lft_write`).
fn expand(sw: &mut Sweep, cfg: &SubnetConfig, prog: &Programmed, node: usize) -> usize {
    let idx = NodeIdx(node as u32);
    let n32 = node as u32;
    let mut kept = 0;
    let res = &sw.res;
    let Some(nd) = res.topology.node(idx) else {
        return 0;
    };
    let is_switch = nd.is_switch();
    let guid = nd.node_guid;
    let ports = activation::link_ports(res, idx);
    if is_switch {
        let si = res.switch_info.get(node).copied().flatten();
        if si.is_none_or(|si| {
            si.port_state_change
                || si.linear_fdb_top != sw.tables.lft_top
                || si.life_time_value != cfg.life_time_value
        }) {
            sw.ops.push_back(Op::SwitchInfo { node: n32 });
        }
        if let Some(changed) = changed_blocks(sw, prog, node, guid) {
            let cur = prog.lft_stamps.get(&guid).copied().unwrap_or(Stamp::None);
            kept = lft_write::plan(sw, n32, &changed, cur);
        }
        if needs_port_info(sw, cfg, idx, 0) {
            sw.ops.push_back(Op::PortInfo { node: n32, port: 0 });
        }
        if prog.pkeys.get(&(guid, 0))
            != Some(
                &pkey_table(cfg, &end_port(&sw.res, idx, 0))
                    .keys
                    .map(|k| k.0),
            )
        {
            sw.ops.push_back(Op::PKey { node: n32, port: 0 });
        }
    }
    let res = &sw.res;
    for &p in &ports {
        if is_switch {
            match enforcement(sw, cfg, idx, p) {
                Enforce::On(pg) => {
                    // The table before the enforcement bits (PortInfo below).
                    if prog.pkeys.get(&(guid, p))
                        != Some(&pkey_table(cfg, &pg).keys.map(|k| k.0))
                    {
                        sw.ops.push_back(Op::PKey { node: n32, port: p });
                    }
                }
                Enforce::TooSmall { entries, cap } => tracing::warn!(
                    switch = format_args!("{guid:#018x}"),
                    port = p,
                    entries,
                    cap,
                    "P_Keys of the CA do not fit the switch port's table: partition enforcement off there"
                ),
                Enforce::Off | Enforce::NotApplicable => {}
            }
        }
        // A port in Init gets its configuration with the Set that arms it (see
        // `activation`): one PortInfo Set fewer per link port on a fresh fabric.
        let arms_later = pi_of(res, idx, p).is_some_and(|pi| pi.port_state == PortState::Init);
        if !arms_later && needs_port_info(sw, cfg, idx, p) {
            sw.ops.push_back(Op::PortInfo { node: n32, port: p });
        }
        if !is_switch {
            let pg = end_port(res, idx, p);
            if prog.pkeys.get(&(guid, p)) != Some(&pkey_table(cfg, &pg).keys.map(|k| k.0)) {
                sw.ops.push_back(Op::PKey { node: n32, port: p });
            }
        }
        let vls = op_vls(sw, cfg, idx, p);
        if prog.qos.get(&(guid, p)) != Some(&vls) {
            if !is_switch {
                sw.ops.push_back(Op::Sl2Vl {
                    node: n32,
                    port: p,
                    in_port: 0,
                });
            } else if cfg.switch_sl2vl {
                for in_port in std::iter::once(0).chain(ports.iter().copied()) {
                    if in_port != p {
                        sw.ops.push_back(Op::Sl2Vl {
                            node: n32,
                            port: p,
                            in_port,
                        });
                    }
                }
            }
            if let Some(caps) = pi_of(res, idx, p) {
                for section in
                    vlarb_sections(caps.vl_arbitration_low_cap, caps.vl_arbitration_high_cap)
                {
                    sw.ops.push_back(Op::VlArb {
                        node: n32,
                        port: p,
                        section,
                    });
                }
            }
        }
    }
    kept
}

/// The DR path on which a Set of `port` of `node` is accepted: a switch's own
/// path; for a CA port cabled to a switch, the switch's path plus that cable (a
/// CA port can only be written through itself).
pub(super) fn port_path(
    res: &DiscoveryResult,
    node: NodeIdx,
    port: u8,
    is_switch: bool,
) -> Option<Vec<u8>> {
    let own = res.path(node)?;
    if is_switch || (res.local == Some((node, port)) && own.is_empty()) {
        return Some(own.to_vec());
    }
    if let Some((rn, rp)) = res.topology.neighbor(node, port) {
        if res.topology.node(rn).is_some_and(|r| r.is_switch()) {
            let mut p = res.path(rn)?.to_vec();
            p.push(rp);
            return Some(p);
        }
    }
    Some(own.to_vec())
}

/// The P_Key block 0 the distribution wants `port` of `node` to hold, where it
/// writes one (switch port 0; a switch port enforcing for a CA; a CA link port).
pub(super) fn desired_pkeys(
    sw: &Sweep,
    cfg: &SubnetConfig,
    node: NodeIdx,
    port: u8,
) -> Option<[u16; 32]> {
    let res = &sw.res;
    let is_switch = res.topology.node(node)?.is_switch();
    let owner = if !is_switch || port == 0 {
        end_port(res, node, port)
    } else {
        match enforcement(sw, cfg, node, port) {
            Enforce::On(pg) => pg,
            _ => return None,
        }
    };
    Some(pkey_table(cfg, &owner).keys.map(|k| k.0))
}

/// OperationalVLs for a link port: min of both ends' VLCap and the config.
pub(super) fn op_vls(sw: &Sweep, cfg: &SubnetConfig, node: NodeIdx, port: u8) -> u8 {
    let res = &sw.res;
    let own = pi_of(res, node, port).map_or(1, |p| p.vl_cap);
    let remote = res
        .topology
        .neighbor(node, port)
        .and_then(|(rn, rp)| pi_of(res, rn, rp))
        .map_or(own, |p| p.vl_cap);
    own.min(remote).min(cfg.max_operational_vls).max(1)
}

fn neighbor_mtu(sw: &Sweep, cfg: &SubnetConfig, node: NodeIdx, port: u8) -> u8 {
    let res = &sw.res;
    let own = pi_of(res, node, port).map_or(1, |p| p.mtu_cap);
    let remote = res
        .topology
        .neighbor(node, port)
        .and_then(|(rn, rp)| pi_of(res, rn, rp))
        .map_or(own, |p| p.mtu_cap);
    own.min(remote).min(cfg.max_mtu).max(1)
}

/// The PortInfo we want `port` to hold (read-modify-write of what discovery
/// read), with PortState/PortPhysicalState "no change".
pub(super) fn desired_port_info(
    sw: &Sweep,
    cfg: &SubnetConfig,
    node: NodeIdx,
    port: u8,
) -> Option<PortInfo> {
    let res = &sw.res;
    let cur = *pi_of(res, node, port)?;
    let nd = res.topology.node(node)?;
    let is_switch = nd.is_switch();
    let mut pi = cur;
    pi.port_state = PortState::NoChange;
    pi.port_physical_state = PhysPortState::NoChange;
    pi.link_width_enabled = 0;
    pi.link_speed_enabled = 0;
    pi.link_speed_ext_enabled = 0;
    pi.link_down_default_state = 0;
    pi.client_reregister = false;
    // Every port gets the key (a switch keeps one, port 0's; its other ports take
    // the same values so a read-modify-write never writes a stale key back).
    if sw.manage_m_key {
        pi.m_key = cfg.m_key.key;
        pi.m_key_protect_bits = cfg.m_key.protect_bits;
        pi.m_key_lease_period = cfg.m_key.lease_period;
    }
    let has_lid = !is_switch || port == 0;
    if has_lid {
        let p = nd.port(port)?;
        pi.lid = p.lid;
        pi.lmc = if is_switch { 0 } else { p.lmc };
        // A port's GID is GIDPrefix:PortGUID (IBA 4.1.1); with prefix 0 a client's
        // own GID names no port the SA knows (OpenSM writes its subnet_prefix too).
        pi.gid_prefix = DEFAULT_SUBNET_PREFIX;
        pi.master_sm_lid = sw.master_lid;
        pi.master_sm_sl = cfg.master_sm_sl;
        pi.subnet_timeout = cfg.subnet_timeout;
        if !is_switch
            && sw.client_reregister
            && cur
                .capability_mask
                .contains(CapabilityMask::IS_CLIENT_REREGISTRATION_SUPPORTED)
        {
            pi.client_reregister = true;
        }
    }
    if !(is_switch && port == 0) {
        pi.neighbor_mtu = neighbor_mtu(sw, cfg, node, port);
        pi.operational_vls = op_vls(sw, cfg, node, port);
        pi.vl_high_limit = VL_HIGH_LIMIT;
    }
    if is_switch && port != 0 {
        match enforcement(sw, cfg, node, port) {
            Enforce::On(_) => {
                pi.partition_enforcement_inbound = true;
                pi.partition_enforcement_outbound = true;
            }
            Enforce::Off | Enforce::TooSmall { .. } => {
                pi.partition_enforcement_inbound = false;
                pi.partition_enforcement_outbound = false;
            }
            Enforce::NotApplicable => {}
        }
    }
    Some(pi)
}

/// PortInfo.VLHighLimit programmed on link ports (OpenSM's `qos_high_limit` default).
const VL_HIGH_LIMIT: u8 = 0;

/// Partition enforcement at a switch external port (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Enforce {
    /// Not a switch port facing a CA, or the switch has no per-port tables:
    /// the enforcement bits are left as they read.
    NotApplicable,
    /// Enforcement configured off: bits cleared.
    Off,
    /// The CA's keys need `entries` entries, the switch port holds `cap`: bits cleared.
    TooSmall { entries: usize, cap: u16 },
    /// Copy the P_Key table of this CA port, bits set.
    On(EndPort),
}

fn enforcement(sw: &Sweep, cfg: &SubnetConfig, node: NodeIdx, port: u8) -> Enforce {
    let res = &sw.res;
    let cap = res
        .switch_info
        .get(node.as_usize())
        .copied()
        .flatten()
        .map_or(0, |si| si.partition_enforcement_cap);
    let Some((rn, rp)) = res.topology.neighbor(node, port) else {
        return Enforce::NotApplicable;
    };
    let Some(ca) = res.topology.node(rn).filter(|n| !n.is_switch()) else {
        return Enforce::NotApplicable;
    };
    if cap == 0 {
        return Enforce::NotApplicable;
    }
    if !cfg.partition_enforcement {
        return Enforce::Off;
    }
    let _ = ca;
    let pg = end_port(res, rn, rp);
    let entries = pkey_table(cfg, &pg)
        .keys
        .iter()
        .filter(|k| k.0 & 0x7FFF != 0)
        .count();
    if entries > usize::from(cap) {
        return Enforce::TooSmall { entries, cap };
    }
    Enforce::On(pg)
}

fn needs_port_info(sw: &Sweep, cfg: &SubnetConfig, node: NodeIdx, port: u8) -> bool {
    let Some(want) = desired_port_info(sw, cfg, node, port) else {
        return false;
    };
    let Some(cur) = pi_of(&sw.res, node, port) else {
        return false;
    };
    let is_switch = sw.res.topology.node(node).is_some_and(|n| n.is_switch());
    // M_Key lives on CA ports and switch port 0 (a level-1 port read without the
    // key shows M_Key 0, which differs from any key, so it is rewritten: harmless).
    let m_key_differs = sw.manage_m_key
        && (!is_switch || port == 0)
        && (want.m_key, want.m_key_protect_bits, want.m_key_lease_period)
            != (cur.m_key, cur.m_key_protect_bits, cur.m_key_lease_period);
    m_key_differs
        || want.client_reregister
        || (
            want.lid,
            want.lmc,
            want.master_sm_lid,
            want.master_sm_sl,
            want.subnet_timeout,
            want.gid_prefix,
        ) != (
            cur.lid,
            cur.lmc,
            cur.master_sm_lid,
            cur.master_sm_sl,
            cur.subnet_timeout,
            cur.gid_prefix,
        )
        || (want.neighbor_mtu, want.operational_vls) != (cur.neighbor_mtu, cur.operational_vls)
        || want.vl_high_limit != cur.vl_high_limit
        || (
            want.partition_enforcement_inbound,
            want.partition_enforcement_outbound,
        ) != (
            cur.partition_enforcement_inbound,
            cur.partition_enforcement_outbound,
        )
}

/// P_Key block 0 for the end port `port`: the default partition (full, or as a
/// configured 0x7FFF partition says), then every partition the port is a member of
/// in configuration order; an `indx0` partition's key goes first.
pub(super) fn pkey_table(cfg: &SubnetConfig, port: &EndPort) -> PKeyTable {
    let mut list: Vec<PKey> = Vec::with_capacity(4);
    let mut first = None;
    let default = cfg.partitions.iter().find(|p| p.p_key == 0x7FFF);
    let default_m = default.map_or(Some(Membership::Full), |p| p.membership_of(port));
    if let Some(m) = default_m {
        let k = PKey::new(0x7FFF, m == Membership::Full);
        if default.is_some_and(|p| p.index0) {
            first = Some(k);
        } else {
            list.push(k);
        }
    }
    for part in cfg.partitions.iter().filter(|p| p.p_key != 0x7FFF) {
        let Some(m) = part.membership_of(port) else {
            continue;
        };
        let k = PKey::new(part.p_key, m == Membership::Full);
        if part.index0 && first.is_none() {
            first = Some(k);
        } else {
            list.push(k);
        }
    }
    let mut keys = [PKey::INVALID; PKeyTable::ENTRIES];
    for (slot, k) in keys.iter_mut().zip(first.into_iter().chain(list)) {
        *slot = k;
    }
    PKeyTable { keys }
}

/// The end port `port` of `node` as the P_Key tables see it (switches: port 0).
pub(super) fn end_port(res: &DiscoveryResult, node: NodeIdx, port: u8) -> EndPort {
    let nd = res.topology.node(node);
    let kind = match nd.map(|n| n.node_type) {
        Some(NodeType::Switch) => EndPortKind::Switch,
        Some(NodeType::Router) => EndPortKind::Router,
        _ => EndPortKind::Ca,
    };
    let port = if kind == EndPortKind::Switch { 0 } else { port };
    EndPort {
        guid: nd.and_then(|n| n.port(port)).map_or(0, |p| p.port_guid),
        kind,
        is_sm: res
            .local
            .is_some_and(|(n, p)| n == node && (p == port || kind == EndPortKind::Switch)),
    }
}

fn num_vls(op_vls: u8) -> u8 {
    match op_vls {
        0 | 1 => 1,
        2 => 2,
        3 => 4,
        4 => 8,
        _ => 15,
    }
}

/// SLtoVL default: SL s -> VL (s mod number of data VLs).
pub(super) fn sl2vl_table(op_vls: u8) -> SlToVlMappingTable {
    let n = num_vls(op_vls);
    let mut vl = [0u8; 16];
    for (sl, v) in vl.iter_mut().enumerate() {
        *v = (sl as u8) % n;
    }
    SlToVlMappingTable { vl }
}

/// The VLArbitration blocks a port with these caps has, in the order they are written.
pub(super) fn vlarb_sections(low_cap: u8, high_cap: u8) -> Vec<VlArbSection> {
    let mut out = Vec::with_capacity(4);
    for (cap, lower, upper) in [
        (low_cap, VlArbSection::LowLower, VlArbSection::LowUpper),
        (high_cap, VlArbSection::HighLower, VlArbSection::HighUpper),
    ] {
        if cap > 0 {
            out.push(lower);
        }
        if cap > 32 {
            out.push(upper);
        }
    }
    out
}

/// Entry `i` (0..64) of OpenSM's default table: high "0:4,1:0,..,14:0", low
/// "0:0,1:4,..,14:4"; entries past the 15 listed are VL0 weight 0.
fn default_vlarb_entry(high: bool, i: usize) -> VlArbEntry {
    match u8::try_from(i) {
        Ok(vl) if vl < 15 => VlArbEntry {
            vl,
            weight: match (high, vl) {
                (true, 0) | (false, 1..) => 4,
                _ => 0,
            },
        },
        _ => VlArbEntry::default(),
    }
}

/// One VLArbitration block: the default table's entries for `section`, only up
/// to the table's `cap`, with entries for VLs the link does not run (by
/// OperationalVLs) at weight 0.
pub(super) fn vlarb_table(op_vls: u8, cap: u8, section: VlArbSection) -> VlArbitrationTable {
    let high = matches!(section, VlArbSection::HighLower | VlArbSection::HighUpper);
    let base = match section {
        VlArbSection::LowUpper | VlArbSection::HighUpper => 32,
        VlArbSection::LowLower | VlArbSection::HighLower => 0,
    };
    let vls = num_vls(op_vls);
    let mut entries = [VlArbEntry::default(); 32];
    for (j, e) in entries.iter_mut().enumerate() {
        let i = base + j;
        if i >= usize::from(cap) {
            break;
        }
        let d = default_vlarb_entry(high, i);
        if d.vl < vls {
            *e = d;
        }
    }
    VlArbitrationTable { entries }
}

/// The SubnSet for `op`.
pub(super) fn op_smp(sw: &Sweep, cfg: &SubnetConfig, op: Op) -> Result<Smp, MadError> {
    let res = &sw.res;
    let idx = NodeIdx(op.node());
    let is_switch = res.topology.node(idx).is_some_and(|n| n.is_switch());
    let path = |port: u8| {
        port_path(res, idx, port, is_switch).ok_or(MadError::InvalidField {
            attr: "directed route",
            field: "path",
            value: u64::from(op.node()),
            why: "node has no recorded path",
        })
    };
    let missing = |what: &'static str| MadError::InvalidField {
        attr: what,
        field: "node/port",
        value: u64::from(op.node()),
        why: "not known to this sweep",
    };
    match op {
        Op::SwitchInfo { .. } => {
            let mut si = res
                .switch_info
                .get(idx.as_usize())
                .copied()
                .flatten()
                .unwrap_or_default();
            si.linear_fdb_top = sw.tables.lft_top;
            si.life_time_value = cfg.life_time_value;
            si.port_state_change = true; // write 1 to clear
            Smp::try_set_dr(&path(0)?, AttributeId::SWITCH_INFO, 0, 0, si.encode())
        }
        Op::Lft { block, stamp, .. } => {
            let lft = sw
                .tables
                .lfts
                .get(idx.as_usize())
                .and_then(|l| l.as_ref())
                .ok_or(missing("LinearForwardingTable"))?;
            let mut ports = [LinearForwardingTable::UNASSIGNED; 64];
            let first = usize::from(block) * 64;
            if let Some(src) = lft.get(first..(first + 64).min(lft.len())) {
                if let Some(dst) = ports.get_mut(..src.len()) {
                    dst.copy_from_slice(src);
                }
            }
            // Block 0 carries the stamp in LID 0's entry (see `lft_stamp`).
            if let (0, Some(stamp)) = (block, stamp) {
                ports = stamped_block0(&ports, stamp);
            }
            let data = LinearForwardingTable { ports }.encode();
            Smp::try_set_dr(
                &path(0)?,
                AttributeId::LINEAR_FORWARDING_TABLE,
                u32::from(block),
                0,
                data,
            )
        }
        Op::PortInfo { port, .. } => {
            let pi = desired_port_info(sw, cfg, idx, port).ok_or(missing("PortInfo"))?;
            Smp::try_set_dr(
                &path(port)?,
                AttributeId::PORT_INFO,
                u32::from(port),
                0,
                pi.encode(),
            )
        }
        Op::State { port, state, .. } => {
            let mut pi = desired_port_info(sw, cfg, idx, port).ok_or(missing("PortInfo"))?;
            pi.port_state = PortState::from(state);
            // The Arm Set of a port in Init carries its configuration, ClientReregister
            // included; nothing else needs it again.
            if pi.port_state != PortState::Armed {
                pi.client_reregister = false;
            }
            Smp::try_set_dr(
                &path(port)?,
                AttributeId::PORT_INFO,
                u32::from(port),
                0,
                pi.encode(),
            )
        }
        Op::PKey { port, .. } => {
            let guid = pkey_owner(sw, cfg, idx, port);
            let amod = PKeyBlock {
                block: 0,
                port: if is_switch { port } else { 0 },
            }
            .attr_mod();
            Smp::try_set_dr(
                &path(port)?,
                AttributeId::P_KEY_TABLE,
                amod,
                0,
                pkey_table(cfg, &guid).encode(),
            )
        }
        Op::Sl2Vl { port, in_port, .. } => {
            let amod = if is_switch {
                Sl2VlPorts {
                    in_port,
                    out_port: port,
                    all_in_ports: false,
                    all_out_ports: false,
                }
                .attr_mod()
            } else {
                0
            };
            let t = sl2vl_table(op_vls(sw, cfg, idx, port));
            Smp::try_set_dr(
                &path(port)?,
                AttributeId::SL_TO_VL_MAPPING_TABLE,
                amod,
                0,
                t.encode(),
            )
        }
        Op::VlArb { port, section, .. } => {
            let caps = pi_of(res, idx, port).ok_or(missing("PortInfo"))?;
            let cap = match section {
                VlArbSection::HighLower | VlArbSection::HighUpper => caps.vl_arbitration_high_cap,
                VlArbSection::LowLower | VlArbSection::LowUpper => caps.vl_arbitration_low_cap,
            };
            let amod = VlArbBlock {
                section,
                port: if is_switch { port } else { 0 },
            }
            .attr_mod();
            let t = vlarb_table(op_vls(sw, cfg, idx, port), cap, section);
            Smp::try_set_dr(
                &path(port)?,
                AttributeId::VL_ARBITRATION_TABLE,
                amod,
                0,
                t.encode(),
            )
        }
    }
}

/// Whose P_Key table `port` of `node` holds: a CA port its own, a switch port
/// facing a CA (enforcement on) that CA port's, the switch management port 0 its
/// own (the switch's end port); other switch ports the default partition only.
fn pkey_owner(sw: &Sweep, cfg: &SubnetConfig, node: NodeIdx, port: u8) -> EndPort {
    let res = &sw.res;
    let Some(nd) = res.topology.node(node) else {
        return end_port(res, node, port);
    };
    if !nd.is_switch() {
        return end_port(res, node, port);
    }
    match (port, enforcement(sw, cfg, node, port)) {
        (0, _) => end_port(res, node, 0),
        (_, Enforce::On(pg)) => pg,
        _ => EndPort {
            guid: 0,
            kind: EndPortKind::Ca,
            is_sm: false,
        },
    }
}

/// Record a Set that succeeded, so later sweeps do not repeat it.
pub(super) fn remember(sw: &Sweep, cfg: &SubnetConfig, prog: &mut Programmed, op: Op) {
    let idx = NodeIdx(op.node());
    let Some(nd) = sw.res.topology.node(idx) else {
        return;
    };
    let guid = nd.node_guid;
    match op {
        Op::PKey { port, .. } => {
            let pg = pkey_owner(sw, cfg, idx, port);
            prog.pkeys
                .insert((guid, port), pkey_table(cfg, &pg).keys.map(|k| k.0));
        }
        Op::Sl2Vl { port, .. } | Op::VlArb { port, .. } => {
            prog.qos.insert((guid, port), op_vls(sw, cfg, idx, port));
        }
        _ => {}
    }
}
