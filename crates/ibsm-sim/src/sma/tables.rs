//! The SMA's block tables: GUIDInfo, P_KeyTable, SLtoVLMappingTable,
//! VLArbitrationTable, LinearForwardingTable and MulticastForwardingTable. The
//! rarely written ones live in the sparse maps of `crate::state` (defaults never
//! stored), the LFT grows only as far as the SM writes it.

use crate::state::{Fabric, NONE};
use crate::SimConfig;

use super::common::{blocks, AttrResult, STATUS_INVALID_VALUE, STATUS_UNSUPPORTED_ATTR};

impl Fabric {
    pub(super) fn guid_info(
        &mut self,
        cfg: &SimConfig,
        arr: u32,
        amod: u32,
        set: Option<&[u8; 64]>,
    ) -> AttrResult {
        let (node, _, is_switch, _) = self.whereami(arr).ok_or(STATUS_INVALID_VALUE)?;
        // On a switch only the management port has GUIDInfo.
        let idx = if is_switch {
            self.nodes.get(node as usize).map_or(NONE, |n| n.first_port)
        } else {
            arr
        };
        let cap = u32::from(cfg.guid_cap);
        if cap == 0 {
            return Err(STATUS_UNSUPPORTED_ATTR);
        }
        if amod >= blocks(cap, 8) {
            return Err(STATUS_INVALID_VALUE);
        }
        let first = (amod * 8) as usize;
        if let Some(d) = set {
            let table = self
                .tables
                .guids
                .entry(idx)
                .or_insert_with(|| vec![0u64; cap as usize].into_boxed_slice());
            for (i, chunk) in d.chunks_exact(8).enumerate() {
                let e = first + i;
                // Entry 0 is the hardwired PortGUID: read-only.
                if e == 0 || e >= cap as usize {
                    continue;
                }
                if let (Some(slot), Ok(bytes)) = (table.get_mut(e), <[u8; 8]>::try_from(chunk)) {
                    *slot = u64::from_be_bytes(bytes);
                }
            }
        }
        let hw = self.guids_hw.get(idx as usize).copied().unwrap_or(0);
        let stored = self.tables.guids.get(&idx);
        let mut out = [0u8; 64];
        for (i, chunk) in out.chunks_exact_mut(8).enumerate() {
            let e = first + i;
            let v = if e >= cap as usize {
                0
            } else if e == 0 {
                hw
            } else {
                stored.and_then(|t| t.get(e).copied()).unwrap_or(0)
            };
            chunk.copy_from_slice(&v.to_be_bytes());
        }
        Ok(out)
    }

    pub(super) fn pkey_table(
        &mut self,
        cfg: &SimConfig,
        arr: u32,
        amod: u32,
        set: Option<&[u8; 64]>,
    ) -> AttrResult {
        let (node, _, is_switch, _) = self.whereami(arr).ok_or(STATUS_INVALID_VALUE)?;
        let n = self.nodes.get(node as usize).ok_or(STATUS_INVALID_VALUE)?;
        let block = amod & 0xFFFF;
        let (idx, size) = if is_switch {
            let port = amod >> 16;
            if port > u32::from(n.num_ports) {
                return Err(STATUS_INVALID_VALUE);
            }
            let size = if port == 0 {
                cfg.partition_cap
            } else {
                cfg.partition_enforcement_cap
            };
            (n.first_port + port, size)
        } else {
            (arr, cfg.partition_cap)
        };
        if size == 0 {
            return Err(STATUS_UNSUPPORTED_ATTR);
        }
        if block >= blocks(u32::from(size), 32) {
            return Err(STATUS_INVALID_VALUE);
        }
        let first = (block * 32) as usize;
        if let Some(d) = set {
            let table = self
                .tables
                .pkeys
                .entry(idx)
                .or_insert_with(|| default_pkeys(size));
            for (i, chunk) in d.chunks_exact(2).enumerate() {
                if let (Some(slot), [a, b]) = (table.get_mut(first + i), chunk) {
                    *slot = u16::from_be_bytes([*a, *b]);
                }
            }
        }
        let stored = self.tables.pkeys.get(&idx);
        let mut out = [0u8; 64];
        for (i, chunk) in out.chunks_exact_mut(2).enumerate() {
            let e = first + i;
            let v = match stored {
                Some(t) => t.get(e).copied().unwrap_or(0),
                None if e == 0 => 0xFFFF,
                None => 0,
            };
            chunk.copy_from_slice(&v.to_be_bytes());
        }
        Ok(out)
    }

    pub(super) fn sl2vl(&mut self, arr: u32, amod: u32, set: Option<&[u8; 64]>) -> AttrResult {
        let (node, _, is_switch, _) = self.whereami(arr).ok_or(STATUS_INVALID_VALUE)?;
        let n = self.nodes.get(node as usize).ok_or(STATUS_INVALID_VALUE)?;
        let key = if is_switch {
            let in_port = (amod >> 8) & 0xFF;
            let out_port = amod & 0xFF;
            if amod >> 16 != 0
                || in_port > u32::from(n.num_ports)
                || out_port == 0
                || out_port > u32::from(n.num_ports)
            {
                return Err(STATUS_INVALID_VALUE);
            }
            // in_port <= 255 by the mask.
            (n.first_port + out_port, in_port as u8)
        } else {
            (arr, 0)
        };
        if let Some(d) = set {
            let mut t = [0u8; 8];
            t.copy_from_slice(d.get(..8).unwrap_or(&[0u8; 8]));
            if t == [0u8; 8] {
                self.tables.sl2vl.remove(&key);
            } else {
                self.tables.sl2vl.insert(key, t);
            }
        }
        let mut out = [0u8; 64];
        if let Some(t) = self.tables.sl2vl.get(&key) {
            out[..8].copy_from_slice(t);
        }
        Ok(out)
    }

    pub(super) fn vlarb(&mut self, arr: u32, amod: u32, set: Option<&[u8; 64]>) -> AttrResult {
        let (node, _, is_switch, _) = self.whereami(arr).ok_or(STATUS_INVALID_VALUE)?;
        let n = self.nodes.get(node as usize).ok_or(STATUS_INVALID_VALUE)?;
        let block = amod >> 16;
        if !(1..=4).contains(&block) {
            return Err(STATUS_INVALID_VALUE);
        }
        let idx = if is_switch {
            let port = amod & 0xFFFF;
            if port == 0 || port > u32::from(n.num_ports) {
                return Err(STATUS_INVALID_VALUE);
            }
            n.first_port + port
        } else {
            arr
        };
        // Blocks 1/2 are the low-priority table's lower/upper 32 entries, 3/4 the
        // high-priority table's: a block beyond the port's cap does not exist.
        let pi = self
            .port_info
            .get(idx as usize)
            .ok_or(STATUS_INVALID_VALUE)?;
        let cap = if block <= 2 {
            pi.vl_arbitration_low_cap
        } else {
            pi.vl_arbitration_high_cap
        };
        let upper = block == 2 || block == 4;
        if cap == 0 || (upper && cap <= 32) {
            return Err(STATUS_INVALID_VALUE);
        }
        // block is 1..=4.
        let key = (idx, block as u8);
        if let Some(d) = set {
            self.tables.vlarb.insert(key, *d);
        }
        Ok(self.tables.vlarb.get(&key).copied().unwrap_or([0u8; 64]))
    }

    pub(super) fn lft(
        &mut self,
        cfg: &SimConfig,
        arr: u32,
        amod: u32,
        set: Option<&[u8; 64]>,
    ) -> AttrResult {
        let (_, _, is_switch, sw) = self.whereami(arr).ok_or(STATUS_INVALID_VALUE)?;
        if !is_switch || cfg.linear_fdb_cap == 0 {
            return Err(STATUS_UNSUPPORTED_ATTR);
        }
        if amod >= blocks(u32::from(cfg.linear_fdb_cap), 64) {
            return Err(STATUS_INVALID_VALUE);
        }
        let rec = self
            .switches
            .get_mut(sw as usize)
            .ok_or(STATUS_INVALID_VALUE)?;
        let first = (amod * 64) as usize;
        if let Some(d) = set {
            if rec.lft.len() < first + 64 {
                // Lazily grown: only as far as the SM has programmed.
                rec.lft.resize(first + 64, 0xFF);
            }
            if let Some(dst) = rec.lft.get_mut(first..first + 64) {
                dst.copy_from_slice(d);
            }
        }
        let mut out = [0xFFu8; 64];
        if let Some(src) = rec.lft.get(first..first + 64) {
            out.copy_from_slice(src);
        }
        Ok(out)
    }

    pub(super) fn mft(
        &mut self,
        cfg: &SimConfig,
        arr: u32,
        amod: u32,
        set: Option<&[u8; 64]>,
    ) -> AttrResult {
        let (node, _, is_switch, sw) = self.whereami(arr).ok_or(STATUS_INVALID_VALUE)?;
        if !is_switch || cfg.multicast_fdb_cap == 0 {
            return Err(STATUS_UNSUPPORTED_ATTR);
        }
        let n = self.nodes.get(node as usize).ok_or(STATUS_INVALID_VALUE)?;
        let position = amod >> 28;
        let block = amod & 0x1FF;
        if amod & 0x0FFF_FE00 != 0
            || block >= blocks(u32::from(cfg.multicast_fdb_cap), 32)
            || position > u32::from(n.num_ports) / 16
        {
            return Err(STATUS_INVALID_VALUE);
        }
        // block < 512 and position < 16 by the masks.
        let key = (sw, block as u16, position as u8);
        if let Some(d) = set {
            if *d == [0u8; 64] {
                self.tables.mft.remove(&key);
            } else {
                self.tables.mft.insert(key, *d);
            }
        }
        Ok(self.tables.mft.get(&key).copied().unwrap_or([0u8; 64]))
    }
}

fn default_pkeys(size: u16) -> Box<[u16]> {
    let mut v = vec![0u16; usize::from(size)];
    if let Some(first) = v.first_mut() {
        *first = 0xFFFF;
    }
    v.into_boxed_slice()
}
