//! NodeInfo (0x0011) and NodeDescription (0x0010).

use super::{load, rd16, rd24, rd32, rd64, wr16, wr24, wr32, wr64, SmpAttribute};
use crate::attribute_id::AttributeId;
use crate::error::MadError;

open_enum! {
    /// NodeInfo.NodeType.
    NodeType: 0xFF {
        /// Channel adapter (HCA/TCA).
        Ca = 1,
        /// Switch.
        Switch = 2,
        /// Router.
        Router = 3,
    }
}

/// NodeInfo (IBA 14.2.5.3), 40 bytes:
/// BaseVersion, ClassVersion, NodeType, NumPorts, SystemImageGUID, NodeGUID, PortGUID,
/// PartitionCap, DeviceID, Revision, LocalPortNum, VendorID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NodeInfo {
    /// BaseVersion (1).
    pub base_version: u8,
    /// ClassVersion (1).
    pub class_version: u8,
    /// NodeType.
    pub node_type: NodeType,
    /// NumPorts (physical ports, not counting switch port 0).
    pub num_ports: u8,
    /// SystemImageGUID (zero if not supported).
    pub system_image_guid: u64,
    /// NodeGUID.
    pub node_guid: u64,
    /// PortGUID of the receiving port (for a switch, of port 0).
    pub port_guid: u64,
    /// PartitionCap.
    pub partition_cap: u16,
    /// DeviceID.
    pub device_id: u16,
    /// Revision.
    pub revision: u32,
    /// LocalPortNum: the port that received the SMP.
    pub local_port_num: u8,
    /// VendorID (24 bits).
    pub vendor_id: u32,
}

impl NodeInfo {
    /// Bytes of the attribute on the wire.
    pub const WIRE_LEN: usize = 40;
}

impl SmpAttribute for NodeInfo {
    const ID: AttributeId = AttributeId::NODE_INFO;

    fn decode(data: &[u8]) -> Result<Self, MadError> {
        let b = load(data, Self::WIRE_LEN, "NodeInfo")?;
        Ok(NodeInfo {
            base_version: b[0],
            class_version: b[1],
            node_type: NodeType::from(b[2]),
            num_ports: b[3],
            system_image_guid: rd64(&b, 4),
            node_guid: rd64(&b, 12),
            port_guid: rd64(&b, 20),
            partition_cap: rd16(&b, 28),
            device_id: rd16(&b, 30),
            revision: rd32(&b, 32),
            local_port_num: b[36],
            vendor_id: rd24(&b, 37),
        })
    }

    fn encode(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        b[0] = self.base_version;
        b[1] = self.class_version;
        b[2] = u8::from(self.node_type);
        b[3] = self.num_ports;
        wr64(&mut b, 4, self.system_image_guid);
        wr64(&mut b, 12, self.node_guid);
        wr64(&mut b, 20, self.port_guid);
        wr16(&mut b, 28, self.partition_cap);
        wr16(&mut b, 30, self.device_id);
        wr32(&mut b, 32, self.revision);
        b[36] = self.local_port_num;
        wr24(&mut b, 37, self.vendor_id & 0x00FF_FFFF);
        b
    }
}

/// NodeDescription (IBA 14.2.5.2): 64 bytes of UTF-8, NUL padded.
///
/// Kept as the raw 64 bytes (no heap); [`NodeDescription::as_str`] gives the text up
/// to the first NUL, lossy-free only when the device sent valid UTF-8.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct NodeDescription {
    /// The raw 64-byte field.
    pub raw: [u8; 64],
}

impl Default for NodeDescription {
    fn default() -> Self {
        NodeDescription { raw: [0u8; 64] }
    }
}

impl NodeDescription {
    /// Bytes of the attribute on the wire.
    pub const WIRE_LEN: usize = 64;

    /// Builds a description from text, cut at 64 bytes (at a char boundary).
    pub fn new(text: &str) -> NodeDescription {
        let mut raw = [0u8; 64];
        let mut end = text.len().min(64);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        if let (Some(dst), Some(src)) = (raw.get_mut(..end), text.as_bytes().get(..end)) {
            dst.copy_from_slice(src);
        }
        NodeDescription { raw }
    }

    /// Bytes up to the first NUL.
    pub fn as_bytes(&self) -> &[u8] {
        let end = self.raw.iter().position(|&c| c == 0).unwrap_or(64);
        self.raw.get(..end).unwrap_or(&[])
    }

    /// Text up to the first NUL, or the error if the device sent invalid UTF-8.
    pub fn as_str(&self) -> Result<&str, core::str::Utf8Error> {
        core::str::from_utf8(self.as_bytes())
    }
}

impl core::fmt::Debug for NodeDescription {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "NodeDescription({:?})",
            String::from_utf8_lossy(self.as_bytes())
        )
    }
}

impl SmpAttribute for NodeDescription {
    const ID: AttributeId = AttributeId::NODE_DESCRIPTION;

    fn decode(data: &[u8]) -> Result<Self, MadError> {
        Ok(NodeDescription {
            raw: load(data, Self::WIRE_LEN, "NodeDescription")?,
        })
    }

    fn encode(&self) -> [u8; 64] {
        self.raw
    }
}
