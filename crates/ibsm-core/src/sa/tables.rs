//! The records of switch and port tables, served from the [`SaFabric`] snapshot (and,
//! for multicast, the master's current MFTs): SwitchInfoRecord, GUIDInfoRecord,
//! P_KeyTableRecord, SLtoVLMappingTableRecord, VLArbitrationTableRecord,
//! LinearForwardingTableRecord and MulticastForwardingTableRecord.
//!
//! Which records each query returns follows OpenSM 3.3.23 (`osm_sa_*_record.c`), so
//! a client sees the same answers from either SM:
//!
//! - Switch records (SwitchInfo, LFT, MFT) go switch by switch; a LID in the
//!   template must fall in the LID range of the switch's port 0 (a LID of 0 matches
//!   nothing); the record carries the base LID. LFT blocks run from 0 to
//!   LinearFDBTop / 64, MFT blocks from 0 to the highest block holding a group, every
//!   position the switch has; BlockNum/Position in the mask pick one, and one past
//!   the table matches nothing.
//! - Port-table records (P_Key, SLtoVL, VLArbitration) go end port by end port (a
//!   LID in the mask names one: any LID of its LMC range). A CA answers for its own
//!   port only, whatever port the template names; a switch (its port 0's LID) for
//!   every port, or the one PortNum/OutputPortNum/InputPortNum names. The LID is the
//!   CA port's base LID, a switch's port 0 LID.
//! - GUIDInfoRecords go node by node: a switch's port 0, every port of a CA with a
//!   GUIDCap; a LID in the mask must fall in the port's LMC range, but a LID of 0 is
//!   no filter at all (OpenSM's `if (match_lid)`); BlockNum 255 means every block.
//! - P_KeyTableRecords only to a trusted requester (the SA_Key in the SM_Key field;
//!   IBA p922); anyone else gets ERR_REQ_INVALID, as from OpenSM.
//! - Every record is shown only when the requester shares a partition with the
//!   port it describes (a switch port: the switch's port 0), unless it is trusted
//!   ([`SaContext::visible`]).
//!
//! Where this SA answers differently, and why:
//!
//! - The tables are the ones the master *wrote*, never read back ([`PortTables`]):
//!   a P_KeyTableRecord exists for block 0 of a CA port, of a switch port 0, and of
//!   the switch ports facing a CA with partition enforcement on (OpenSM also answers
//!   for every other switch port and block, from what it read). SLtoVL records exist
//!   for CA link ports, and for switches only with `switch_sl2vl` (then for every
//!   input port the master wrote: 0 and the other link ports, never a port to
//!   itself); VLArbitration records for the blocks the port's caps have (OpenSM
//!   answers blocks 1-4 always). Guessing a table the master did not write would
//!   answer for what a previous SM or the firmware left.
//! - GUIDInfo: the SA assigns no alias GUIDs (no GUIDInfoRecord Set), so block 0
//!   holds the PortGUID at index 0 and every other entry is 0, as OpenSM's table of
//!   a port without aliases. The GUID components are matched entry by entry (IBA);
//!   OpenSM matches a template's GUID 0 of block 0 against the requester's own
//!   PortGUID and restricts the answer to the requester's port.
//! - SwitchInfoRecord matches every SwitchInfo component in the mask (IBA); OpenSM
//!   matches the LID only.
//!
//! Checked by hand on ibsim (net.2sw2path4hca, ibsmd master, saquery under umad2sim
//! from Hca1): `SWIR 2`, `LFTR 2/0`, `GIR 5`, `SL2VL 5`, `VLAR 5/1/1`, `VLAR 2/3/3`,
//! `PKTR --smkey 1 5/1/0` and `PKTR --smkey 1 2` print the tables the master wrote;
//! `PKTR 5` without the key prints SA_ERR_REQ_INVALID. saquery prints zeroed
//! records after the real ones: umad2sim does no RMPP, so it divides the whole
//! segment by the record size (the same with OpenSM; /work/shared/notes/fabric-lab.md).

use ibsm_fabric::multicast::SwitchMft;
use ibsm_fabric::NodeIdx;
use ibsm_mad::attr::{GuidInfo, LinearForwardingTable, MulticastForwardingTable};
use ibsm_mad::sa::{
    ComponentMask, GuidInfoRecord, LinearForwardingTableRecord, MulticastForwardingTableRecord,
    PKeyTableRecord, SaStatus, SlToVlMappingTableRecord, SwitchInfoRecord,
    VlArbitrationTableRecord,
};

use super::context::{Requester, SaContext};
use super::fabric::{end_port_numbers, EndPort, PortTables, SaFabric};

/// A switch as the switch records see it: its node, port 0's LID and GUID.
#[derive(Debug, Clone, Copy)]
struct Switch {
    node: NodeIdx,
    node_guid: u64,
    lid: u16,
    guid: u64,
    num_ports: u8,
}

/// Every switch with a LID and a port GUID, in topology order.
fn switches(f: &SaFabric) -> impl Iterator<Item = Switch> + '_ {
    f.topology.iter().filter_map(|(idx, n)| {
        if !n.is_switch() {
            return None;
        }
        let p0 = n.port(0)?;
        (p0.lid != 0 && p0.port_guid != 0).then_some(Switch {
            node: idx,
            node_guid: n.node_guid,
            lid: p0.lid,
            guid: p0.port_guid,
            num_ports: n.num_ports(),
        })
    })
}

/// True if `lid` is one of the switch's port 0 LIDs (its LMC range).
fn switch_has_lid(f: &SaFabric, sw: &Switch, lid: u16) -> bool {
    lid != 0
        && f.end_port_by_lid(lid)
            .is_some_and(|e| e.node == sw.node && e.port == 0)
}

/// The switches a switch-record query is about: visible to `req`, and holding the
/// template's LID when the mask has it.
fn matching_switches<'a>(
    ctx: &'a SaContext<'a>,
    f: &'a SaFabric,
    req: &'a Requester,
    lid: Option<u16>,
) -> impl Iterator<Item = Switch> + 'a {
    switches(f)
        .filter(move |sw| ctx.visible(req, sw.guid) && lid.is_none_or(|l| switch_has_lid(f, sw, l)))
}

/// SwitchInfoRecords matching `template` under `mask` (SwitchInfo as the master
/// wrote it: its LinearFDBTop and LifeTimeValue, PortStateChange cleared).
pub fn switch_info_records(
    ctx: &SaContext<'_>,
    req: &Requester,
    template: &SwitchInfoRecord,
    mask: ComponentMask,
) -> Vec<SwitchInfoRecord> {
    let Some(f) = ctx.fabric else {
        return Vec::new();
    };
    let lid = mask.contains(SwitchInfoRecord::LID).then_some(template.lid);
    let rest = mask.without(SwitchInfoRecord::LID);
    matching_switches(ctx, f, req, lid)
        .filter_map(|sw| {
            let si = f.switch_info.get(sw.node.as_usize()).copied().flatten()?;
            let rec = SwitchInfoRecord {
                lid: sw.lid,
                switch_info: si,
            };
            rec.matches(template, rest).then_some(rec)
        })
        .collect()
}

/// LinearForwardingTableRecords matching `template` under `mask`: blocks 0 to
/// LinearFDBTop / 64 of every switch whose LFT the master programmed.
pub fn lft_records(
    ctx: &SaContext<'_>,
    req: &Requester,
    template: &LinearForwardingTableRecord,
    mask: ComponentMask,
) -> Vec<LinearForwardingTableRecord> {
    let Some(f) = ctx.fabric else {
        return Vec::new();
    };
    let lid = mask
        .contains(LinearForwardingTableRecord::LID)
        .then_some(template.lid);
    let block = mask
        .contains(LinearForwardingTableRecord::BLOCK_NUM)
        .then_some(template.block_num);
    let mut out = Vec::new();
    for sw in matching_switches(ctx, f, req, lid) {
        let Some(lft) = f.lfts.get(sw.node.as_usize()).and_then(|l| l.as_deref()) else {
            continue;
        };
        let top = f
            .switch_info
            .get(sw.node.as_usize())
            .copied()
            .flatten()
            .map_or(lft.len().saturating_sub(1), |si| {
                usize::from(si.linear_fdb_top)
            });
        let max_block = u16::try_from(top / LinearForwardingTable::ENTRIES).unwrap_or(u16::MAX);
        let blocks = match block {
            Some(b) if b > max_block => continue,
            Some(b) => b..=b,
            None => 0..=max_block,
        };
        for b in blocks {
            let mut ports = [LinearForwardingTable::UNASSIGNED; LinearForwardingTable::ENTRIES];
            let first = usize::from(b) * LinearForwardingTable::ENTRIES;
            if let Some(src) = lft.get(first..(first + ports.len()).min(lft.len())) {
                if let Some(dst) = ports.get_mut(..src.len()) {
                    dst.copy_from_slice(src);
                }
            }
            out.push(LinearForwardingTableRecord {
                lid: sw.lid,
                block_num: b,
                linear_forwarding_table: LinearForwardingTable { ports },
            });
        }
    }
    out
}

/// MulticastForwardingTableRecords matching `template` under `mask`: for every
/// switch with multicast that holds a group, blocks 0 to the highest in use, every
/// position (16 ports each, port 0 included).
pub fn mft_records(
    ctx: &SaContext<'_>,
    req: &Requester,
    template: &MulticastForwardingTableRecord,
    mask: ComponentMask,
) -> Vec<MulticastForwardingTableRecord> {
    let (Some(f), Some(mfts)) = (ctx.fabric, ctx.mfts) else {
        return Vec::new();
    };
    let lid = mask
        .contains(MulticastForwardingTableRecord::LID)
        .then_some(template.lid);
    let block = mask
        .contains(MulticastForwardingTableRecord::BLOCK_NUM)
        .then_some(template.block_num);
    let position = mask
        .contains(MulticastForwardingTableRecord::POSITION)
        .then_some(template.position);
    let mut out = Vec::new();
    for sw in matching_switches(ctx, f, req, lid) {
        let mcast = f
            .switch_info
            .get(sw.node.as_usize())
            .copied()
            .flatten()
            .is_some_and(|si| si.multicast_fdb_cap > 0);
        let Some(mft) = mfts.switch(sw.node_guid).filter(|_| mcast) else {
            continue;
        };
        let Some(max_block) = mft.blocks().last() else {
            continue;
        };
        // The positions of the switch as the fabric knows it (its NumPorts).
        let max_position = positions(mft, sw.num_ports).saturating_sub(1);
        let blocks = match block {
            Some(b) if b > max_block => continue,
            Some(b) => b..=b,
            None => 0..=max_block,
        };
        let positions = match position {
            Some(p) if p > max_position => continue,
            Some(p) => p..=p,
            None => 0..=max_position,
        };
        for b in blocks {
            for p in positions.clone() {
                out.push(MulticastForwardingTableRecord {
                    lid: sw.lid,
                    position: p,
                    block_num: b,
                    multicast_forwarding_table: MulticastForwardingTable {
                        port_mask: mft.block_position(b, p),
                    },
                });
            }
        }
    }
    out
}

/// MFT positions of a switch: the topology's NumPorts, else the MFT's own.
fn positions(mft: &SwitchMft, num_ports: u8) -> u8 {
    if num_ports == 0 {
        mft.positions()
    } else {
        ibsm_fabric::multicast::mft_positions(num_ports)
    }
}

/// GUIDInfoRecords matching `template` under `mask` (see the module doc).
pub fn guid_info_records(
    ctx: &SaContext<'_>,
    req: &Requester,
    template: &GuidInfoRecord,
    mask: ComponentMask,
) -> Vec<GuidInfoRecord> {
    let Some(f) = ctx.fabric else {
        return Vec::new();
    };
    let lid = if mask.contains(GuidInfoRecord::LID) {
        template.lid
    } else {
        0
    };
    let block = if mask.contains(GuidInfoRecord::BLOCK_NUM) {
        template.block_num
    } else {
        255
    };
    let rest = mask
        .without(GuidInfoRecord::LID)
        .without(GuidInfoRecord::BLOCK_NUM);
    let mut out = Vec::new();
    for (idx, node) in f.topology.iter() {
        let ports = end_port_numbers(node);
        for p in ports {
            let Some(port) = node.port(p) else { continue };
            let Some(pi) = f.port_info_of(idx, p) else {
                continue;
            };
            if port.port_guid == 0 || pi.guid_cap == 0 || !ctx.visible(req, port.port_guid) {
                continue;
            }
            let lmc = if node.is_switch() { 0 } else { port.lmc.min(7) };
            let last = u32::from(port.lid) + (1u32 << lmc) - 1;
            if lid != 0 && !(u32::from(port.lid)..=last).contains(&u32::from(lid)) {
                continue;
            }
            let num_blocks = pi.guid_cap.div_ceil(8);
            let blocks = match block {
                255 => 0..=num_blocks - 1,
                b if b >= num_blocks => continue,
                b => b..=b,
            };
            for b in blocks {
                let mut guids = [0u64; 8];
                if b == 0 {
                    guids[0] = port.port_guid;
                }
                let rec = GuidInfoRecord {
                    lid: port.lid,
                    block_num: b,
                    guid_info: GuidInfo { guids },
                };
                if rec.matches(template, rest) {
                    out.push(rec);
                }
            }
        }
    }
    out
}

/// The end ports a port-table query is about: the one answering to the template's
/// LID when the mask has it (none: no records), else every end port.
fn end_ports_for(f: &SaFabric, lid: Option<u16>) -> Vec<EndPort> {
    match lid {
        Some(l) => f.end_port_by_lid(l).into_iter().collect(),
        None => f.end_ports(),
    }
}

/// The ports of `ep`'s node a port-table record is about, each with the GUID its
/// visibility is judged by: a CA its own port; a switch `port` if given (none past
/// its last port), else every port 0..=NumPorts.
fn table_ports(f: &SaFabric, ep: &EndPort, port: Option<u8>) -> Vec<(u8, u64)> {
    let Some(node) = f.topology.node(ep.node) else {
        return Vec::new();
    };
    if !node.is_switch() {
        return vec![(ep.port, ep.port_guid)];
    }
    match port {
        Some(p) if p > node.num_ports() => Vec::new(),
        Some(p) => vec![(p, ep.port_guid)],
        None => (0..=node.num_ports()).map(|p| (p, ep.port_guid)).collect(),
    }
}

/// The tables of the ports a port-table query is about, visible to `req`.
fn port_tables<'a>(
    ctx: &SaContext<'_>,
    f: &'a SaFabric,
    req: &Requester,
    lid: Option<u16>,
    port: Option<u8>,
) -> Vec<(EndPort, u8, &'a PortTables)> {
    let mut out = Vec::new();
    for ep in end_ports_for(f, lid) {
        for (p, guid) in table_ports(f, &ep, port) {
            if !ctx.visible(req, guid) {
                continue;
            }
            if let Some(t) = f.port_tables_of(ep.node, p) {
                out.push((ep, p, t));
            }
        }
    }
    out
}

/// P_KeyTableRecords matching `template` under `mask`, to a trusted requester only
/// (ERR_REQ_INVALID otherwise, as OpenSM answers).
pub fn pkey_table_records(
    ctx: &SaContext<'_>,
    req: &Requester,
    template: &PKeyTableRecord,
    mask: ComponentMask,
) -> Result<Vec<PKeyTableRecord>, SaStatus> {
    if !req.trusted {
        tracing::debug!(
            lid = req.from.lid,
            "SA: P_KeyTableRecord query without the SA_Key refused"
        );
        return Err(SaStatus::ERR_REQ_INVALID);
    }
    let Some(f) = ctx.fabric else {
        return Ok(Vec::new());
    };
    let lid = mask.contains(PKeyTableRecord::LID).then_some(template.lid);
    let port = mask
        .contains(PKeyTableRecord::PORT_NUM)
        .then_some(template.port_num);
    // Only block 0 is written; a BlockNum naming another block matches nothing.
    if mask.contains(PKeyTableRecord::BLOCK_NUM) && template.block_num != 0 {
        return Ok(Vec::new());
    }
    Ok(port_tables(ctx, f, req, lid, port)
        .into_iter()
        .filter_map(|(ep, p, t)| {
            Some(PKeyTableRecord {
                lid: ep.lid,
                block_num: 0,
                port_num: p,
                p_key_table: **t.pkey.as_ref()?,
            })
        })
        .collect())
}

/// SLtoVLMappingTableRecords matching `template` under `mask`: a CA port's one
/// table (its port components ignored, as OpenSM does), a switch's (output, input)
/// pairs the master wrote.
pub fn sl2vl_records(
    ctx: &SaContext<'_>,
    req: &Requester,
    template: &SlToVlMappingTableRecord,
    mask: ComponentMask,
) -> Vec<SlToVlMappingTableRecord> {
    let Some(f) = ctx.fabric else {
        return Vec::new();
    };
    let lid = mask
        .contains(SlToVlMappingTableRecord::LID)
        .then_some(template.lid);
    let out_port = mask
        .contains(SlToVlMappingTableRecord::OUTPUT_PORT_NUM)
        .then_some(template.output_port_num);
    let in_port = mask
        .contains(SlToVlMappingTableRecord::INPUT_PORT_NUM)
        .then_some(template.input_port_num);
    let mut out = Vec::new();
    for (ep, p, t) in port_tables(ctx, f, req, lid, out_port) {
        let Some((table, ins)) = t.sl2vl.as_ref() else {
            continue;
        };
        let is_switch = f.topology.node(ep.node).is_some_and(|n| n.is_switch());
        if !is_switch {
            out.push(SlToVlMappingTableRecord {
                lid: ep.lid,
                input_port_num: 0,
                output_port_num: 0,
                sl_to_vl_mapping_table: *table,
            });
            continue;
        }
        for &i in ins.iter().filter(|&&i| in_port.is_none_or(|x| x == i)) {
            out.push(SlToVlMappingTableRecord {
                lid: ep.lid,
                input_port_num: i,
                output_port_num: p,
                sl_to_vl_mapping_table: *table,
            });
        }
    }
    out
}

/// VLArbitrationTableRecords matching `template` under `mask`: the blocks the
/// master wrote on each port (a CA: its own port whatever the template names).
pub fn vlarb_records(
    ctx: &SaContext<'_>,
    req: &Requester,
    template: &VlArbitrationTableRecord,
    mask: ComponentMask,
) -> Vec<VlArbitrationTableRecord> {
    let Some(f) = ctx.fabric else {
        return Vec::new();
    };
    let lid = mask
        .contains(VlArbitrationTableRecord::LID)
        .then_some(template.lid);
    let port = mask
        .contains(VlArbitrationTableRecord::OUTPUT_PORT_NUM)
        .then_some(template.output_port_num);
    let block = mask
        .contains(VlArbitrationTableRecord::BLOCK_NUM)
        .then_some(template.block_num);
    let mut out = Vec::new();
    for (ep, p, t) in port_tables(ctx, f, req, lid, port) {
        for (b, table) in &t.vlarb {
            if block.is_some_and(|x| x != *b) {
                continue;
            }
            out.push(VlArbitrationTableRecord {
                lid: ep.lid,
                output_port_num: p,
                block_num: *b,
                vl_arbitration_table: **table,
            });
        }
    }
    out
}
