//! Minimal SMP byte builders and readers (IBA 14.2.1.2 SMP format), enough for
//! bootstrap queries and lab tests. The full typed codec is `ibsm_mad::Smp`; prefer it.
//!
//! Layout: common header (BaseVersion, MgmtClass, ClassVersion, Method, Status[2],
//! HopPointer, HopCount for DR / ClassSpecific for LID routed, TID[8], AttributeID[2],
//! reserved[2], AttributeModifier[4]) then M_Key[8] at 24, DrSLID[2] at 32, DrDLID[2] at
//! 34, SMP data[64] at 64, InitialPath[64] at 128, ReturnPath[64] at 192. On a DR SMP the
//! top bit of Status is the D (direction) bit.

use crate::{CLASS_SUBN_DIRECTED_ROUTE, CLASS_SUBN_LID_ROUTED, MAD_SIZE, PERMISSIVE_LID};

/// SubnGet.
pub const METHOD_GET: u8 = 0x01;
/// SubnSet.
pub const METHOD_SET: u8 = 0x02;
/// SubnGetResp.
pub const METHOD_GET_RESP: u8 = 0x81;
/// Offset of the 64-byte SMP data.
pub const DATA_OFFSET: usize = 64;
/// Most hops a directed route can have.
pub const MAX_HOPS: usize = 63;

fn header(class: u8, method: u8, tid: u64, attr_id: u16, attr_mod: u32) -> [u8; MAD_SIZE] {
    let mut m = [0u8; MAD_SIZE];
    m[0] = 1; // BaseVersion
    m[1] = class;
    m[2] = 1; // ClassVersion
    m[3] = method;
    m[8..16].copy_from_slice(&tid.to_be_bytes());
    m[16..18].copy_from_slice(&attr_id.to_be_bytes());
    m[20..24].copy_from_slice(&attr_mod.to_be_bytes());
    m
}

/// A directed-route SMP request. `hops` are the egress ports of hops 1..=n (so `&[]`
/// addresses the local port, `&[3]` the node behind local... port 3 of the first switch
/// on the path, as in ibsim's `-D 0,3`); at most [`MAX_HOPS`] are used. DrSLID = DrDLID =
/// 0xFFFF, hop pointer 0, D = 0.
pub fn dr_request(
    method: u8,
    tid: u64,
    attr_id: u16,
    attr_mod: u32,
    hops: &[u8],
    data: &[u8; 64],
) -> [u8; MAD_SIZE] {
    let mut m = header(CLASS_SUBN_DIRECTED_ROUTE, method, tid, attr_id, attr_mod);
    let hops = hops.get(..hops.len().min(MAX_HOPS)).unwrap_or(&[]);
    m[7] = hops.len() as u8; // HopCount (<= 63)
    m[32..34].copy_from_slice(&PERMISSIVE_LID.to_be_bytes());
    m[34..36].copy_from_slice(&PERMISSIVE_LID.to_be_bytes());
    m[DATA_OFFSET..DATA_OFFSET + 64].copy_from_slice(data);
    m[129..129 + hops.len()].copy_from_slice(hops);
    m
}

/// Directed-route SubnGet.
pub fn dr_get(tid: u64, attr_id: u16, attr_mod: u32, hops: &[u8]) -> [u8; MAD_SIZE] {
    dr_request(METHOD_GET, tid, attr_id, attr_mod, hops, &[0; 64])
}

/// LID-routed SubnGet (send it with `Dest::Lid`).
pub fn lid_get(tid: u64, attr_id: u16, attr_mod: u32) -> [u8; MAD_SIZE] {
    header(CLASS_SUBN_LID_ROUTED, METHOD_GET, tid, attr_id, attr_mod)
}

/// The GetResp to `request` carrying `data`: same TID, attribute and paths, method
/// GetResp, status 0, and on a DR SMP the D bit set (what ibsim and real SMAs expect).
pub fn response(request: &[u8; MAD_SIZE], data: &[u8; 64]) -> [u8; MAD_SIZE] {
    let mut m = *request;
    m[3] = METHOD_GET_RESP;
    m[4] = 0;
    m[5] = 0;
    if m[1] == CLASS_SUBN_DIRECTED_ROUTE {
        m[4] = 0x80; // D bit
    }
    m[DATA_OFFSET..DATA_OFFSET + 64].copy_from_slice(data);
    m
}

fn be16(m: &[u8; MAD_SIZE], at: usize) -> u16 {
    u16::from_be_bytes([m[at], m[at + 1]])
}

fn be32(m: &[u8; MAD_SIZE], at: usize) -> u32 {
    u32::from_be_bytes([m[at], m[at + 1], m[at + 2], m[at + 3]])
}

fn be64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    if let Some(s) = b.get(at..at + 8) {
        w.copy_from_slice(s);
    }
    u64::from_be_bytes(w)
}

/// TID.
pub fn tid(m: &[u8; MAD_SIZE]) -> u64 {
    be64_at(m, 8)
}

/// AttributeID.
pub fn attr_id(m: &[u8; MAD_SIZE]) -> u16 {
    be16(m, 16)
}

/// AttributeModifier.
pub fn attr_mod(m: &[u8; MAD_SIZE]) -> u32 {
    be32(m, 20)
}

/// Status (15 bits on a DR SMP, without the D bit).
pub fn status(m: &[u8; MAD_SIZE]) -> u16 {
    let s = be16(m, 4);
    if m[1] == CLASS_SUBN_DIRECTED_ROUTE {
        s & 0x7fff
    } else {
        s
    }
}

/// D bit of a DR SMP.
pub fn direction(m: &[u8; MAD_SIZE]) -> bool {
    m[1] == CLASS_SUBN_DIRECTED_ROUTE && m[4] & 0x80 != 0
}

/// The 64-byte SMP data.
pub fn data(m: &[u8; MAD_SIZE]) -> [u8; 64] {
    let mut d = [0u8; 64];
    d.copy_from_slice(&m[DATA_OFFSET..DATA_OFFSET + 64]);
    d
}

/// The NodeInfo fields the bootstrap needs (IBA 14.2.5.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeInfoIds {
    pub node_type: u8,
    pub num_ports: u8,
    pub system_image_guid: u64,
    pub node_guid: u64,
    pub port_guid: u64,
    pub local_port_num: u8,
}

/// Read [`NodeInfoIds`] from NodeInfo SMP data.
pub fn node_info_ids(d: &[u8; 64]) -> NodeInfoIds {
    NodeInfoIds {
        node_type: d[2],
        num_ports: d[3],
        system_image_guid: be64_at(d, 4),
        node_guid: be64_at(d, 12),
        port_guid: be64_at(d, 20),
        local_port_num: d[36],
    }
}

/// PortInfo.CapabilityMask (offset 20) from PortInfo SMP data.
pub fn port_info_capability_mask(d: &[u8; 64]) -> u32 {
    u32::from_be_bytes([d[20], d[21], d[22], d[23]])
}

/// PortInfo.LID (offset 16) from PortInfo SMP data.
pub fn port_info_lid(d: &[u8; 64]) -> u16 {
    u16::from_be_bytes([d[16], d[17]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dr_get_layout() {
        let m = dr_get(0x1122_3344_5566_7788, 0x0011, 5, &[1, 3]);
        assert_eq!(&m[..4], &[1, 0x81, 1, 1]);
        assert_eq!((m[6], m[7]), (0, 2));
        assert_eq!(tid(&m), 0x1122_3344_5566_7788);
        assert_eq!((attr_id(&m), attr_mod(&m)), (0x11, 5));
        assert_eq!(&m[32..36], &[0xff; 4]);
        assert_eq!(&m[128..131], &[0, 1, 3]);
        assert!(!direction(&m));
        let r = response(&m, &[9; 64]);
        assert_eq!(r[3], METHOD_GET_RESP);
        assert!(direction(&r));
        assert_eq!(status(&r), 0);
        assert_eq!(data(&r), [9; 64]);
        assert_eq!(&r[128..], &m[128..]);
    }

    #[test]
    fn too_long_paths_are_cut_not_panicking() {
        let m = dr_get(1, 0x11, 0, &[1; 100]);
        assert_eq!(usize::from(m[7]), MAX_HOPS);
    }
}
