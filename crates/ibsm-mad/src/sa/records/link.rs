//! LinkRecord (IBA 15.2.5.13): one cabled link, from (LID, port) to (LID, port).

use crate::sa::attribute_id::SaAttributeId;
use crate::sa::error::SaError;
use crate::sa::wire::{load, rd16, wr16};

/// LinkRecord, 6 bytes (padded to 8 in tables).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct LinkRecord {
    /// FromLID (0..2): LID of the node (port 0 for a switch).
    pub from_lid: u16,
    /// FromPort (2).
    pub from_port: u8,
    /// ToPort (3).
    pub to_port: u8,
    /// ToLID (4..6).
    pub to_lid: u16,
}

impl LinkRecord {
    /// Bytes on the wire.
    pub const SIZE: usize = 6;

    /// Decodes from at least 6 bytes.
    pub fn decode(data: &[u8]) -> Result<Self, SaError> {
        let b: [u8; Self::SIZE] = load(data, "LinkRecord")?;
        Ok(LinkRecord {
            from_lid: rd16(&b, 0),
            from_port: b[2],
            to_port: b[3],
            to_lid: rd16(&b, 4),
        })
    }

    /// Encodes.
    pub fn encode(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        wr16(&mut b, 0, self.from_lid);
        b[2] = self.from_port;
        b[3] = self.to_port;
        wr16(&mut b, 4, self.to_lid);
        b
    }
}

record_components!(LinkRecord, |r, t| {
    /// Component 0: FromLID.
    FROM_LID = 0 => r.from_lid == t.from_lid;
    /// Component 1: FromPort.
    FROM_PORT = 1 => r.from_port == t.from_port;
    /// Component 2: ToPort.
    TO_PORT = 2 => r.to_port == t.to_port;
    /// Component 3: ToLID.
    TO_LID = 3 => r.to_lid == t.to_lid;
});

impl_sa_record!(LinkRecord, SaAttributeId::LINK_RECORD, "LinkRecord");
