//! Table attributes: GUIDInfo, SLtoVLMappingTable, VLArbitrationTable,
//! RandomForwardingTable, MulticastForwardingTable.

use super::{load, rd16, rd64, wr16, wr64, SmpAttribute};
use crate::attribute_id::AttributeId;
use crate::error::MadError;

/// One 8-entry block of GUIDInfo (IBA 14.2.5.5). Entry 0 of block 0 is the
/// hardwired PortGUID. Block number: [`crate::modifier::GuidBlock`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct GuidInfo {
    /// The 8 GUIDs of the block (0 = unassigned).
    pub guids: [u64; 8],
}

impl SmpAttribute for GuidInfo {
    const ID: AttributeId = AttributeId::GUID_INFO;

    fn decode(data: &[u8]) -> Result<Self, MadError> {
        let b = load(data, 64, "GUIDInfo")?;
        let mut guids = [0u64; 8];
        for (i, g) in guids.iter_mut().enumerate() {
            *g = rd64(&b, i * 8);
        }
        Ok(GuidInfo { guids })
    }

    fn encode(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        for (i, g) in self.guids.iter().enumerate() {
            wr64(&mut b, i * 8, *g);
        }
        b
    }
}

/// SLtoVLMappingTable (IBA 14.2.5.8, 8 bytes): `vl[sl]` is the VL for SL `sl`; on
/// the wire SL 2i is the high nibble of byte i, SL 2i+1 the low nibble. Ports:
/// [`crate::modifier::Sl2VlPorts`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SlToVlMappingTable {
    /// VL (4 bits) per SL 0..=15.
    pub vl: [u8; 16],
}

impl SmpAttribute for SlToVlMappingTable {
    const ID: AttributeId = AttributeId::SL_TO_VL_MAPPING_TABLE;

    fn decode(data: &[u8]) -> Result<Self, MadError> {
        let b = load(data, 8, "SLtoVLMappingTable")?;
        let mut vl = [0u8; 16];
        for (i, pair) in vl.chunks_exact_mut(2).enumerate() {
            pair[0] = b[i] >> 4;
            pair[1] = b[i] & 0x0F;
        }
        Ok(SlToVlMappingTable { vl })
    }

    fn encode(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        for (i, pair) in self.vl.chunks_exact(2).enumerate() {
            b[i] = ((pair[0] & 0x0F) << 4) | (pair[1] & 0x0F);
        }
        b
    }
}

/// One VL arbitration entry: VL (4 bits) and Weight (in 64-byte units).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VlArbEntry {
    /// VL (byte 0 bits 3:0; bits 7:4 reserved).
    pub vl: u8,
    /// Weight (byte 1).
    pub weight: u8,
}

/// One 32-entry quarter of the VL arbitration tables (IBA 14.2.5.9); which quarter
/// is in the modifier ([`crate::modifier::VlArbBlock`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VlArbitrationTable {
    /// The 32 entries.
    pub entries: [VlArbEntry; 32],
}

impl SmpAttribute for VlArbitrationTable {
    const ID: AttributeId = AttributeId::VL_ARBITRATION_TABLE;

    fn decode(data: &[u8]) -> Result<Self, MadError> {
        let b = load(data, 64, "VLArbitrationTable")?;
        let mut entries = [VlArbEntry::default(); 32];
        for (e, w) in entries.iter_mut().zip(b.chunks_exact(2)) {
            e.vl = w[0] & 0x0F;
            e.weight = w[1];
        }
        Ok(VlArbitrationTable { entries })
    }

    fn encode(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        for (e, w) in self.entries.iter().zip(b.chunks_exact_mut(2)) {
            w[0] = e.vl & 0x0F;
            w[1] = e.weight;
        }
        b
    }
}

/// One RandomForwardingTable entry (4 bytes): DLID, Valid, LMC, Port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RftEntry {
    /// DLID (bytes 0..2).
    pub lid: u16,
    /// Valid (byte 2 bit 7).
    pub valid: bool,
    /// LMC (byte 2 bits 6:4; bits 3:0 reserved).
    pub lmc: u8,
    /// Port (byte 3).
    pub port: u8,
}

/// One 16-entry block of the RandomForwardingTable (IBA 14.2.5.11); block number in
/// [`crate::modifier::RftBlock`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RandomForwardingTable {
    /// The 16 entries.
    pub entries: [RftEntry; 16],
}

impl SmpAttribute for RandomForwardingTable {
    const ID: AttributeId = AttributeId::RANDOM_FORWARDING_TABLE;

    fn decode(data: &[u8]) -> Result<Self, MadError> {
        let b = load(data, 64, "RandomForwardingTable")?;
        let mut entries = [RftEntry::default(); 16];
        for (e, w) in entries.iter_mut().zip(b.chunks_exact(4)) {
            e.lid = u16::from_be_bytes([w[0], w[1]]);
            e.valid = w[2] & 0x80 != 0;
            e.lmc = (w[2] >> 4) & 0x07;
            e.port = w[3];
        }
        Ok(RandomForwardingTable { entries })
    }

    fn encode(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        for (e, w) in self.entries.iter().zip(b.chunks_exact_mut(4)) {
            w[..2].copy_from_slice(&e.lid.to_be_bytes());
            w[2] = (u8::from(e.valid) << 7) | ((e.lmc & 0x07) << 4);
            w[3] = e.port;
        }
        b
    }
}

/// One block of the MulticastForwardingTable (IBA 14.2.5.12): 32 MLIDs x a 16-bit
/// PortMask slice; bit `p` of `port_mask[i]` = port `position*16 + p` forwards MLID
/// `0xC000 + block*32 + i`. Block and position: [`crate::modifier::MftBlock`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MulticastForwardingTable {
    /// PortMask per MLID of the block.
    pub port_mask: [u16; 32],
}

impl SmpAttribute for MulticastForwardingTable {
    const ID: AttributeId = AttributeId::MULTICAST_FORWARDING_TABLE;

    fn decode(data: &[u8]) -> Result<Self, MadError> {
        let b = load(data, 64, "MulticastForwardingTable")?;
        let mut port_mask = [0u16; 32];
        for (i, m) in port_mask.iter_mut().enumerate() {
            *m = rd16(&b, i * 2);
        }
        Ok(MulticastForwardingTable { port_mask })
    }

    fn encode(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        for (i, m) in self.port_mask.iter().enumerate() {
            wr16(&mut b, i * 2, *m);
        }
        b
    }
}
