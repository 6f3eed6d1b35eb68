//! NodeRecord (IBA 15.2.5.2): LID, NodeInfo and NodeDescription of one node port.

use crate::attr::{NodeDescription, NodeInfo, SmpAttribute};
use crate::sa::attribute_id::SaAttributeId;
use crate::sa::error::SaError;
use crate::sa::wire::{load, put, rd16, sub, wr16};

/// NodeRecord, 108 bytes: LID (0..2), Reserved (2..4), NodeInfo (4..44),
/// NodeDescription (44..108).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NodeRecord {
    /// LID of the port (for a switch, of port 0).
    pub lid: u16,
    /// NodeInfo as the port answers it.
    pub node_info: NodeInfo,
    /// NodeDescription.
    pub node_description: NodeDescription,
}

impl NodeRecord {
    /// Bytes on the wire.
    pub const SIZE: usize = 108;

    /// Decodes from at least 108 bytes.
    pub fn decode(data: &[u8]) -> Result<Self, SaError> {
        let b: [u8; Self::SIZE] = load(data, "NodeRecord")?;
        Ok(NodeRecord {
            lid: rd16(&b, 0),
            node_info: NodeInfo::decode(sub(&b, 4, NodeInfo::WIRE_LEN))?,
            node_description: NodeDescription::decode(sub(&b, 44, NodeDescription::WIRE_LEN))?,
        })
    }

    /// Encodes, reserved bytes zero.
    pub fn encode(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        wr16(&mut b, 0, self.lid);
        put(&mut b, 4, &self.node_info.encode()[..NodeInfo::WIRE_LEN]);
        put(&mut b, 44, &self.node_description.raw);
        b
    }
}

record_components!(NodeRecord, |r, t| {
    /// Component 0: LID.
    LID = 0 => r.lid == t.lid;
    /// Component 1: Reserved.
    RESERVED_1 = 1;
    /// Component 2: NodeInfo.BaseVersion.
    BASE_VERSION = 2 => r.node_info.base_version == t.node_info.base_version;
    /// Component 3: NodeInfo.ClassVersion.
    CLASS_VERSION = 3 => r.node_info.class_version == t.node_info.class_version;
    /// Component 4: NodeInfo.NodeType.
    NODE_TYPE = 4 => r.node_info.node_type == t.node_info.node_type;
    /// Component 5: NodeInfo.NumPorts.
    NUM_PORTS = 5 => r.node_info.num_ports == t.node_info.num_ports;
    /// Component 6: NodeInfo.SystemImageGUID.
    SYSTEM_IMAGE_GUID = 6 => r.node_info.system_image_guid == t.node_info.system_image_guid;
    /// Component 7: NodeInfo.NodeGUID.
    NODE_GUID = 7 => r.node_info.node_guid == t.node_info.node_guid;
    /// Component 8: NodeInfo.PortGUID.
    PORT_GUID = 8 => r.node_info.port_guid == t.node_info.port_guid;
    /// Component 9: NodeInfo.PartitionCap.
    PARTITION_CAP = 9 => r.node_info.partition_cap == t.node_info.partition_cap;
    /// Component 10: NodeInfo.DeviceID.
    DEVICE_ID = 10 => r.node_info.device_id == t.node_info.device_id;
    /// Component 11: NodeInfo.Revision.
    REVISION = 11 => r.node_info.revision == t.node_info.revision;
    /// Component 12: NodeInfo.LocalPortNum.
    LOCAL_PORT_NUM = 12 => r.node_info.local_port_num == t.node_info.local_port_num;
    /// Component 13: NodeInfo.VendorID.
    VENDOR_ID = 13 => r.node_info.vendor_id == t.node_info.vendor_id;
    /// Component 14: NodeDescription.
    NODE_DESCRIPTION = 14 => r.node_description == t.node_description;
});

impl_sa_record!(NodeRecord, SaAttributeId::NODE_RECORD, "NodeRecord");
