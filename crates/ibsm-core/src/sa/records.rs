//! The records of the fabric itself, served from the [`SaFabric`] snapshot:
//! NodeRecord, PortInfoRecord, LinkRecord, SMInfoRecord, and ClassPortInfo.
//!
//! Each query is answered the way OpenSM answers it, so a client sees the same records
//! from either SM: one NodeRecord per CA port (a switch: port 0 only), one
//! PortInfoRecord per port with the end port's base LID, LinkRecords in both
//! directions, and a LID in a query template matches every LID of an LMC range.
//! NodeInfo.LocalPortNum of a NodeRecord is the record's port (0 for a switch). A
//! requester sees only the ports it shares a partition with unless it is trusted.

use ibsm_mad::attr::{NodeDescription, NodeInfo};
use ibsm_mad::sa::{
    ClassPortInfo, ComponentMask, LinkRecord, NodeRecord, PortInfoRecord, SmInfoRecord,
};
use ibsm_mad::GSI_QKEY;

use super::context::{Requester, SaContext};
use super::fabric::{end_port_numbers, SaFabric};

/// ClassPortInfo.CapabilityMask2 bits this SA answers for (IBA 15.2.5.1 / OpenSM's
/// OSM_CAP2_*): extended speeds, 2x link width and HDR speeds are fields of the
/// PortInfo it serves as read.
const CAP2_EXTENDED_SPEEDS: u32 = 1 << 7;
const CAP2_LINK_WIDTH_2X: u32 = 1 << 13;
const CAP2_LINK_SPEED_HDR: u32 = 1 << 15;

/// The SA's ClassPortInfo: class version 2, no redirection (QP1, the GSI Q_Key),
/// Get/Set of Notice (InformInfo subscriptions), UD multicast, the PortInfo
/// CapabilityMask match of PortInfoRecord queries.
pub fn class_port_info(resp_time_value: u8) -> ClassPortInfo {
    ClassPortInfo {
        base_version: 1,
        class_version: 2,
        capability_mask: ClassPortInfo::CAP_IS_GET_SET_SUPPORTED
            | ClassPortInfo::CAP_IS_UD_MULTICAST_SUPPORTED
            | ClassPortInfo::CAP_IS_PORT_INFO_CAPABILITY_MASK_MATCH_SUPPORTED,
        capability_mask2: CAP2_EXTENDED_SPEEDS | CAP2_LINK_WIDTH_2X | CAP2_LINK_SPEED_HDR,
        resp_time_value: resp_time_value & 0x1F,
        redirect_gid: [0; 16],
        redirect_tc: 0,
        redirect_sl: 0,
        redirect_fl: 0,
        redirect_lid: 0,
        redirect_p_key: 0,
        redirect_qp: 1,
        redirect_q_key: GSI_QKEY,
        trap_gid: [0; 16],
        trap_tc: 0,
        trap_sl: 0,
        trap_fl: 0,
        trap_lid: 0,
        trap_p_key: 0,
        trap_hl: 0,
        trap_qp: 0,
        trap_q_key: GSI_QKEY,
    }
}

/// A LID in a template matches the base LID of the LMC range it falls in; this gives
/// the base LID to compare with (`None`: no port answers to it, nothing matches).
fn base_lid_of(fabric: &SaFabric, lid: u16) -> Option<u16> {
    fabric.end_port_by_lid(lid).map(|e| e.lid)
}

/// NodeRecords matching `template` under `mask`.
pub fn node_records(
    ctx: &SaContext<'_>,
    req: &Requester,
    template: &NodeRecord,
    mask: ComponentMask,
) -> Vec<NodeRecord> {
    let Some(f) = ctx.fabric else {
        return Vec::new();
    };
    let mut t = *template;
    if mask.contains(NodeRecord::LID) {
        match base_lid_of(f, t.lid) {
            Some(l) => t.lid = l,
            None => return Vec::new(),
        }
    }
    let mut out = Vec::new();
    for (idx, node) in f.topology.iter() {
        let Some(ni) = f.node_info.get(idx.as_usize()) else {
            continue;
        };
        let ports = end_port_numbers(node);
        for p in ports {
            let Some(port) = node.port(p) else { continue };
            if port.port_guid == 0 || !ctx.visible(req, port.port_guid) {
                continue;
            }
            let rec = NodeRecord {
                lid: port.lid,
                node_info: NodeInfo {
                    port_guid: port.port_guid,
                    // The record's own port (a switch: 0), as OpenSM answers: the
                    // port the SM's discovery happened to enter by means nothing
                    // to a client.
                    local_port_num: p,
                    ..*ni
                },
                node_description: NodeDescription::new(&node.description),
            };
            if rec.matches(&t, mask) {
                out.push(rec);
            }
        }
    }
    out
}

/// PortInfoRecords matching `template` under `mask`: every port of every node (a
/// switch's ports carry the switch's LID), PortInfo as the master left it.
pub fn port_info_records(
    ctx: &SaContext<'_>,
    req: &Requester,
    template: &PortInfoRecord,
    mask: ComponentMask,
) -> Vec<PortInfoRecord> {
    let Some(f) = ctx.fabric else {
        return Vec::new();
    };
    let mut t = *template;
    if mask.contains(PortInfoRecord::ENDPORT_LID) {
        match base_lid_of(f, t.endport_lid) {
            Some(l) => t.endport_lid = l,
            None => return Vec::new(),
        }
    }
    // CapabilityMask is matched bitwise (ClassPortInfo says so): every bit the
    // template sets must be set in the record.
    let cap_match = mask.contains(PortInfoRecord::CAPABILITY_MASK);
    let mask = mask.without(PortInfoRecord::CAPABILITY_MASK);
    let mut out = Vec::new();
    for (idx, node) in f.topology.iter() {
        let switch_lid = node.port(0).map_or(0, |p| p.lid);
        let first = u8::from(!node.is_switch());
        for p in first..=node.num_ports() {
            let Some(port) = node.port(p) else { continue };
            let Some(pi) = f.port_info_of(idx, p) else {
                continue;
            };
            let owner_guid = if node.is_switch() {
                node.port(0).map_or(0, |p0| p0.port_guid)
            } else {
                port.port_guid
            };
            if owner_guid != 0 && !ctx.visible(req, owner_guid) {
                continue;
            }
            let rec = PortInfoRecord {
                endport_lid: if node.is_switch() {
                    switch_lid
                } else {
                    port.lid
                },
                port_num: p,
                options: 0,
                port_info: *pi,
            };
            if cap_match
                && rec.port_info.capability_mask.0 & t.port_info.capability_mask.0
                    != t.port_info.capability_mask.0
            {
                continue;
            }
            if rec.matches(&t, mask) {
                out.push(rec);
            }
        }
    }
    out
}

/// LinkRecords (both directions of every cable) matching `template` under `mask`.
pub fn link_records(
    ctx: &SaContext<'_>,
    req: &Requester,
    template: &LinkRecord,
    mask: ComponentMask,
) -> Vec<LinkRecord> {
    let Some(f) = ctx.fabric else {
        return Vec::new();
    };
    let lid_of = |n: ibsm_fabric::NodeIdx, p: u8| -> (u16, u64) {
        let Some(node) = f.topology.node(n) else {
            return (0, 0);
        };
        let port = if node.is_switch() { 0 } else { p };
        node.port(port).map_or((0, 0), |x| (x.lid, x.port_guid))
    };
    let mut t = *template;
    for (on, lid) in [
        (mask.contains(LinkRecord::FROM_LID), &mut t.from_lid),
        (mask.contains(LinkRecord::TO_LID), &mut t.to_lid),
    ] {
        if on {
            match base_lid_of(f, *lid) {
                Some(l) => *lid = l,
                None => return Vec::new(),
            }
        }
    }
    let mut out = Vec::new();
    for ((a, pa), (b, pb)) in f.topology.links() {
        for ((x, px), (y, py)) in [((a, pa), (b, pb)), ((b, pb), (a, pa))] {
            let (from_lid, from_guid) = lid_of(x, px);
            let (to_lid, to_guid) = lid_of(y, py);
            if from_lid == 0 || to_lid == 0 {
                continue;
            }
            if !ctx.visible(req, from_guid) || !ctx.visible(req, to_guid) {
                continue;
            }
            let rec = LinkRecord {
                from_lid,
                from_port: px,
                to_port: py,
                to_lid,
            };
            if rec.matches(&t, mask) {
                out.push(rec);
            }
        }
    }
    out.sort_by_key(|r| (r.from_lid, r.from_port));
    out
}

/// SMInfoRecords of the SMs the master knows, matching `template` under `mask`. The
/// SM_Key reads as zero unless the requester is trusted (IBA 14.2.5.13).
pub fn sm_info_records(
    ctx: &SaContext<'_>,
    req: &Requester,
    template: &SmInfoRecord,
    mask: ComponentMask,
) -> Vec<SmInfoRecord> {
    let mut t = *template;
    if let (true, Some(f)) = (mask.contains(SmInfoRecord::LID), ctx.fabric) {
        if let Some(l) = base_lid_of(f, t.lid) {
            t.lid = l;
        }
    }
    ctx.sms
        .iter()
        .map(|r| {
            let mut r = *r;
            if !req.trusted {
                r.sm_info.sm_key = 0;
            }
            r
        })
        .filter(|r| r.matches(&t, mask))
        .collect()
}
