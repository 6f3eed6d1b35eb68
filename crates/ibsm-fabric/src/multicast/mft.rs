//! The MulticastForwardingTable block layer: the desired MFT of every switch for
//! every group ([`MftSet`], keyed by switch NodeGUID so two sweeps' sets compare
//! even though NodeIdx does not survive a rediscovery) and the SubnSet(MFT) writes
//! that turn one set into another ([`changed_blocks`]).
//!
//! IBA layout (14.2.5.12): MLIDs start at 0xC000; a block holds 32 consecutive
//! MLIDs (block `(mlid - 0xC000) / 32`), each entry a 16-bit PortMask per
//! *position* (position `p` covers ports `16p .. 16p + 15`, bit `i` port
//! `16p + i`). One SubnSet carries one (block, position): attribute modifier
//! bits 31:28 the position, bits 8:0 the block. A switch with `N` ports has
//! `N / 16 + 1` positions (port 0 included).

use std::collections::{BTreeMap, BTreeSet};

use super::mask::PortMask;
use super::member::McastError;
use super::tree::McastTree;
use crate::topology::Topology;

/// The first multicast LID.
pub const MLID_BASE: u16 = 0xC000;
/// The last multicast LID (0xFFFF is the permissive LID).
pub const MLID_LAST: u16 = 0xFFFE;
/// MLIDs per MFT block.
pub const MFT_BLOCK_MLIDS: usize = 32;
/// Ports per MFT position.
pub const MFT_POSITION_PORTS: u8 = 16;

/// (block, index in the block) of a multicast LID.
pub fn mft_block(mlid: u16) -> Result<(u16, usize), McastError> {
    if !(MLID_BASE..=MLID_LAST).contains(&mlid) {
        return Err(McastError::BadMlid(mlid));
    }
    let off = mlid - MLID_BASE;
    Ok((
        off / MFT_BLOCK_MLIDS as u16,
        usize::from(off) % MFT_BLOCK_MLIDS,
    ))
}

/// Positions of a switch with `num_ports` physical ports (ports 0 ..= num_ports).
pub fn mft_positions(num_ports: u8) -> u8 {
    num_ports / MFT_POSITION_PORTS + 1
}

/// The desired MFT of one switch: the blocks that hold a group. Blocks whose
/// every entry is empty are not kept.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SwitchMft {
    num_ports: u8,
    blocks: BTreeMap<u16, Box<[PortMask; MFT_BLOCK_MLIDS]>>,
}

impl SwitchMft {
    /// NodeInfo.NumPorts of the switch.
    pub fn num_ports(&self) -> u8 {
        self.num_ports
    }

    /// Positions this switch's MFT has.
    pub fn positions(&self) -> u8 {
        mft_positions(self.num_ports)
    }

    /// The entry for `mlid` (empty when the switch does not forward it or the
    /// LID is not multicast).
    pub fn entry(&self, mlid: u16) -> PortMask {
        let Ok((b, i)) = mft_block(mlid) else {
            return PortMask::EMPTY;
        };
        self.blocks
            .get(&b)
            .and_then(|blk| blk.get(i))
            .copied()
            .unwrap_or_default()
    }

    /// The 32 PortMasks of one (block, position), as one SubnSet(MFT) carries
    /// them (host order; the MAD layer writes them big-endian).
    pub fn block_position(&self, block: u16, position: u8) -> [u16; MFT_BLOCK_MLIDS] {
        let mut out = [0u16; MFT_BLOCK_MLIDS];
        if let Some(blk) = self.blocks.get(&block) {
            for (o, m) in out.iter_mut().zip(blk.iter()) {
                *o = m.position(position);
            }
        }
        out
    }

    /// The blocks that hold a group, in order.
    pub fn blocks(&self) -> impl Iterator<Item = u16> + '_ {
        self.blocks.keys().copied()
    }

    fn clear(&mut self, mlid: u16) {
        let Ok((b, i)) = mft_block(mlid) else { return };
        if let Some(blk) = self.blocks.get_mut(&b) {
            if let Some(e) = blk.get_mut(i) {
                *e = PortMask::EMPTY;
            }
            if blk.iter().all(PortMask::is_empty) {
                self.blocks.remove(&b);
            }
        }
    }

    fn set(&mut self, block: u16, index: usize, mask: PortMask) {
        let blk = self
            .blocks
            .entry(block)
            .or_insert_with(|| Box::new([PortMask::EMPTY; MFT_BLOCK_MLIDS]));
        if let Some(e) = blk.get_mut(index) {
            *e = e.union(mask);
        }
    }
}

/// One SubnSet(MulticastForwardingTable): 32 MLIDs' PortMasks for one
/// position of one block of one switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MftWrite {
    /// Switch NodeGUID.
    pub switch: u64,
    /// Block number (0 ..= 511): MLIDs `0xC000 + 32 * block ..`.
    pub block: u16,
    /// Position (0 ..= 15): ports `16 * position ..= 16 * position + 15`.
    pub position: u8,
    /// PortMask of each of the block's 32 MLIDs (bit `i` = port `16 * position + i`).
    pub port_masks: [u16; MFT_BLOCK_MLIDS],
}

impl MftWrite {
    /// The SMP attribute modifier: position in bits 31:28, block in bits 8:0.
    pub fn attribute_modifier(&self) -> u32 {
        (u32::from(self.position & 0x0F) << 28) | u32::from(self.block & 0x1FF)
    }
}

/// The desired MFTs of all switches for all groups, by switch NodeGUID.
///
/// Built group by group: [`MftSet::set_group`] replaces one MLID's entries, so
/// a join, leave or a recomputed tree touches only that group. Two switches
/// sharing a NodeGUID (a duplicate GUID) share an entry: their masks are
/// OR-ed, as the LFTs programmed by GUID would also be.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MftSet {
    switches: BTreeMap<u64, SwitchMft>,
    /// MLID -> switches holding an entry for it.
    groups: BTreeMap<u16, BTreeSet<u64>>,
}

impl MftSet {
    /// No group.
    pub fn new() -> MftSet {
        MftSet::default()
    }

    /// The set for every `(mlid, tree)`; a later tree for the same MLID
    /// replaces an earlier one.
    pub fn build<'a>(
        topo: &Topology,
        groups: impl IntoIterator<Item = (u16, &'a McastTree)>,
    ) -> Result<MftSet, McastError> {
        let mut set = MftSet::new();
        for (mlid, tree) in groups {
            set.set_group(topo, mlid, tree)?;
        }
        Ok(set)
    }

    /// Replace the entries of `mlid` with `tree` (computed on `topo`). On an
    /// error (a bad MLID, a tree naming a non-switch or a port the switch does
    /// not have) nothing changes.
    pub fn set_group(
        &mut self,
        topo: &Topology,
        mlid: u16,
        tree: &McastTree,
    ) -> Result<(), McastError> {
        let (block, index) = mft_block(mlid)?;
        let mut rows = Vec::with_capacity(tree.per_switch.len());
        for (&sw, &mask) in &tree.per_switch {
            let node = topo
                .node(sw)
                .filter(|n| n.is_switch())
                .ok_or(McastError::NotASwitch(sw))?;
            if let Some(port) = mask.highest().filter(|&p| p > node.num_ports()) {
                return Err(McastError::NoSuchPort { switch: sw, port });
            }
            rows.push((node.node_guid, node.num_ports(), mask));
        }
        self.remove_group(mlid)?;
        let holders = self.groups.entry(mlid).or_default();
        for (guid, num_ports, mask) in rows {
            if mask.is_empty() {
                continue;
            }
            let sw = self.switches.entry(guid).or_default();
            sw.num_ports = num_ports;
            sw.set(block, index, mask);
            holders.insert(guid);
        }
        if holders.is_empty() {
            self.groups.remove(&mlid);
        }
        Ok(())
    }

    /// Drop the entries of `mlid` (the group was deleted). Blocks left empty
    /// disappear, so [`changed_blocks`] zeroes them on the switches.
    pub fn remove_group(&mut self, mlid: u16) -> Result<(), McastError> {
        mft_block(mlid)?;
        for guid in self.groups.remove(&mlid).unwrap_or_default() {
            if let Some(sw) = self.switches.get_mut(&guid) {
                sw.clear(mlid);
                if sw.blocks.is_empty() {
                    self.switches.remove(&guid);
                }
            }
        }
        Ok(())
    }

    /// The MLIDs with at least one entry.
    pub fn mlids(&self) -> impl Iterator<Item = u16> + '_ {
        self.groups.keys().copied()
    }

    /// The desired MFT of a switch (`None`: it forwards no group).
    pub fn switch(&self, guid: u64) -> Option<&SwitchMft> {
        self.switches.get(&guid)
    }

    /// Every switch with an entry, by NodeGUID.
    pub fn switches(&self) -> impl Iterator<Item = (u64, &SwitchMft)> + '_ {
        self.switches.iter().map(|(&g, s)| (g, s))
    }

    /// The entry of one switch for one MLID.
    pub fn entry(&self, guid: u64, mlid: u16) -> PortMask {
        self.switches
            .get(&guid)
            .map(|s| s.entry(mlid))
            .unwrap_or_default()
    }

    /// Every (switch, block, position) of every block that holds a group: what
    /// to write to switches whose MFT is unknown (first programming, a new
    /// switch). Positions of such a block that are all zero are written too.
    pub fn writes(&self) -> Vec<MftWrite> {
        let mut out = Vec::new();
        for (&guid, sw) in &self.switches {
            for &block in sw.blocks.keys() {
                for position in 0..sw.positions() {
                    out.push(MftWrite {
                        switch: guid,
                        block,
                        position,
                        port_masks: sw.block_position(block, position),
                    });
                }
            }
        }
        out
    }
}

/// The writes that turn switches programmed as `old` into `new`: every
/// (switch, block, position) whose 32 PortMasks differ, with `new`'s values,
/// in (switch GUID, block, position) order. A block that only `old` holds (its
/// groups were deleted) is written as zeros where it was not zero already.
pub fn changed_blocks(old: &MftSet, new: &MftSet) -> Vec<MftWrite> {
    let empty = SwitchMft::default();
    let guids: BTreeSet<u64> = old
        .switches
        .keys()
        .chain(new.switches.keys())
        .copied()
        .collect();
    let mut out = Vec::new();
    for guid in guids {
        let o = old.switches.get(&guid).unwrap_or(&empty);
        let n = new.switches.get(&guid).unwrap_or(&empty);
        let positions = o.positions().max(n.positions());
        let blocks: BTreeSet<u16> = o.blocks.keys().chain(n.blocks.keys()).copied().collect();
        for block in blocks {
            if o.blocks.get(&block) == n.blocks.get(&block) {
                continue;
            }
            for position in 0..positions {
                let was = o.block_position(block, position);
                let now = n.block_position(block, position);
                if was != now {
                    out.push(MftWrite {
                        switch: guid,
                        block,
                        position,
                        port_masks: now,
                    });
                }
            }
        }
    }
    out
}
