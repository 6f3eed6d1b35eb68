//! ServiceRecord (IBA 15.2.5.14): a service registered with the SA.

use core::fmt;

use crate::sa::attribute_id::SaAttributeId;
use crate::sa::component_mask::ComponentMask;
use crate::sa::error::SaError;
use crate::sa::wire::{load, put, rd16, rd32, rd64, rd_gid, sub, wr16, wr32, wr64, Gid};

/// ServiceName: 64 bytes of UTF-8, NUL padded; kept raw (no heap).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ServiceName {
    /// The raw field.
    pub raw: [u8; 64],
}

impl Default for ServiceName {
    fn default() -> Self {
        ServiceName { raw: [0u8; 64] }
    }
}

impl ServiceName {
    /// A name from text, cut at 64 bytes (at a char boundary).
    pub fn new(text: &str) -> ServiceName {
        let mut raw = [0u8; 64];
        let mut end = text.len().min(64);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        if let (Some(d), Some(s)) = (raw.get_mut(..end), text.as_bytes().get(..end)) {
            d.copy_from_slice(s);
        }
        ServiceName { raw }
    }

    /// Bytes up to the first NUL.
    pub fn as_bytes(&self) -> &[u8] {
        let end = self.raw.iter().position(|&c| c == 0).unwrap_or(64);
        self.raw.get(..end).unwrap_or(&[])
    }

    /// Text up to the first NUL, or the error if it is not UTF-8.
    pub fn as_str(&self) -> Result<&str, core::str::Utf8Error> {
        core::str::from_utf8(self.as_bytes())
    }
}

impl fmt::Debug for ServiceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ServiceName({:?})",
            String::from_utf8_lossy(self.as_bytes())
        )
    }
}

/// ServiceRecord, 176 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ServiceRecord {
    /// ServiceID (0..8).
    pub service_id: u64,
    /// ServiceGID (8..24).
    pub service_gid: Gid,
    /// ServiceP_Key (24..26; 26..28 reserved).
    pub service_p_key: u16,
    /// ServiceLease (28..32), seconds; 0xFFFFFFFF = infinite.
    pub service_lease: u32,
    /// ServiceKey (32..48).
    pub service_key: [u8; 16],
    /// ServiceName (48..112).
    pub service_name: ServiceName,
    /// ServiceData8 (112..128).
    pub service_data8: [u8; 16],
    /// ServiceData16 (128..144).
    pub service_data16: [u16; 8],
    /// ServiceData32 (144..160).
    pub service_data32: [u32; 4],
    /// ServiceData64 (160..176).
    pub service_data64: [u64; 2],
}

impl ServiceRecord {
    /// Bytes on the wire.
    pub const SIZE: usize = 176;
    /// ServiceLease value meaning "never expires".
    pub const INFINITE_LEASE: u32 = 0xFFFF_FFFF;

    /// All 16 ServiceData8 components.
    pub const SERVICE_DATA8: ComponentMask = ComponentMask(0xFFFF << 7);
    /// All 8 ServiceData16 components.
    pub const SERVICE_DATA16: ComponentMask = ComponentMask(0xFF << 23);
    /// All 4 ServiceData32 components.
    pub const SERVICE_DATA32: ComponentMask = ComponentMask(0xF << 31);
    /// Both ServiceData64 components.
    pub const SERVICE_DATA64: ComponentMask = ComponentMask(0x3 << 35);

    /// Decodes from at least 176 bytes.
    pub fn decode(data: &[u8]) -> Result<Self, SaError> {
        let b: [u8; Self::SIZE] = load(data, "ServiceRecord")?;
        let mut service_key = [0u8; 16];
        service_key.copy_from_slice(sub(&b, 32, 16));
        let mut name = [0u8; 64];
        name.copy_from_slice(sub(&b, 48, 64));
        let mut service_data8 = [0u8; 16];
        service_data8.copy_from_slice(sub(&b, 112, 16));
        let mut service_data16 = [0u16; 8];
        for (i, v) in service_data16.iter_mut().enumerate() {
            *v = rd16(&b, 128 + 2 * i);
        }
        let mut service_data32 = [0u32; 4];
        for (i, v) in service_data32.iter_mut().enumerate() {
            *v = rd32(&b, 144 + 4 * i);
        }
        let mut service_data64 = [0u64; 2];
        for (i, v) in service_data64.iter_mut().enumerate() {
            *v = rd64(&b, 160 + 8 * i);
        }
        Ok(ServiceRecord {
            service_id: rd64(&b, 0),
            service_gid: rd_gid(&b, 8),
            service_p_key: rd16(&b, 24),
            service_lease: rd32(&b, 28),
            service_key,
            service_name: ServiceName { raw: name },
            service_data8,
            service_data16,
            service_data32,
            service_data64,
        })
    }

    /// Encodes, reserved bytes zero.
    pub fn encode(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        wr64(&mut b, 0, self.service_id);
        put(&mut b, 8, &self.service_gid);
        wr16(&mut b, 24, self.service_p_key);
        wr32(&mut b, 28, self.service_lease);
        put(&mut b, 32, &self.service_key);
        put(&mut b, 48, &self.service_name.raw);
        put(&mut b, 112, &self.service_data8);
        for (i, v) in self.service_data16.iter().enumerate() {
            wr16(&mut b, 128 + 2 * i, *v);
        }
        for (i, v) in self.service_data32.iter().enumerate() {
            wr32(&mut b, 144 + 4 * i, *v);
        }
        for (i, v) in self.service_data64.iter().enumerate() {
            wr64(&mut b, 160 + 8 * i, *v);
        }
        b
    }
}

record_components!(ServiceRecord, |r, t| {
    /// 0: ServiceID.
    SERVICE_ID = 0 => r.service_id == t.service_id;
    /// 1: ServiceGID.
    SERVICE_GID = 1 => r.service_gid == t.service_gid;
    /// 2: ServiceP_Key.
    SERVICE_P_KEY = 2 => r.service_p_key == t.service_p_key;
    /// 3: Reserved.
    RESERVED_3 = 3;
    /// 4: ServiceLease.
    SERVICE_LEASE = 4 => r.service_lease == t.service_lease;
    /// 5: ServiceKey.
    SERVICE_KEY = 5 => r.service_key == t.service_key;
    /// 6: ServiceName.
    SERVICE_NAME = 6 => r.service_name == t.service_name;
    /// 7: ServiceData8.0.
    SERVICE_DATA8_0 = 7 => r.service_data8[0] == t.service_data8[0];
    /// 8: ServiceData8.1.
    SERVICE_DATA8_1 = 8 => r.service_data8[1] == t.service_data8[1];
    /// 9: ServiceData8.2.
    SERVICE_DATA8_2 = 9 => r.service_data8[2] == t.service_data8[2];
    /// 10: ServiceData8.3.
    SERVICE_DATA8_3 = 10 => r.service_data8[3] == t.service_data8[3];
    /// 11: ServiceData8.4.
    SERVICE_DATA8_4 = 11 => r.service_data8[4] == t.service_data8[4];
    /// 12: ServiceData8.5.
    SERVICE_DATA8_5 = 12 => r.service_data8[5] == t.service_data8[5];
    /// 13: ServiceData8.6.
    SERVICE_DATA8_6 = 13 => r.service_data8[6] == t.service_data8[6];
    /// 14: ServiceData8.7.
    SERVICE_DATA8_7 = 14 => r.service_data8[7] == t.service_data8[7];
    /// 15: ServiceData8.8.
    SERVICE_DATA8_8 = 15 => r.service_data8[8] == t.service_data8[8];
    /// 16: ServiceData8.9.
    SERVICE_DATA8_9 = 16 => r.service_data8[9] == t.service_data8[9];
    /// 17: ServiceData8.10.
    SERVICE_DATA8_10 = 17 => r.service_data8[10] == t.service_data8[10];
    /// 18: ServiceData8.11.
    SERVICE_DATA8_11 = 18 => r.service_data8[11] == t.service_data8[11];
    /// 19: ServiceData8.12.
    SERVICE_DATA8_12 = 19 => r.service_data8[12] == t.service_data8[12];
    /// 20: ServiceData8.13.
    SERVICE_DATA8_13 = 20 => r.service_data8[13] == t.service_data8[13];
    /// 21: ServiceData8.14.
    SERVICE_DATA8_14 = 21 => r.service_data8[14] == t.service_data8[14];
    /// 22: ServiceData8.15.
    SERVICE_DATA8_15 = 22 => r.service_data8[15] == t.service_data8[15];
    /// 23: ServiceData16.0.
    SERVICE_DATA16_0 = 23 => r.service_data16[0] == t.service_data16[0];
    /// 24: ServiceData16.1.
    SERVICE_DATA16_1 = 24 => r.service_data16[1] == t.service_data16[1];
    /// 25: ServiceData16.2.
    SERVICE_DATA16_2 = 25 => r.service_data16[2] == t.service_data16[2];
    /// 26: ServiceData16.3.
    SERVICE_DATA16_3 = 26 => r.service_data16[3] == t.service_data16[3];
    /// 27: ServiceData16.4.
    SERVICE_DATA16_4 = 27 => r.service_data16[4] == t.service_data16[4];
    /// 28: ServiceData16.5.
    SERVICE_DATA16_5 = 28 => r.service_data16[5] == t.service_data16[5];
    /// 29: ServiceData16.6.
    SERVICE_DATA16_6 = 29 => r.service_data16[6] == t.service_data16[6];
    /// 30: ServiceData16.7.
    SERVICE_DATA16_7 = 30 => r.service_data16[7] == t.service_data16[7];
    /// 31: ServiceData32.0.
    SERVICE_DATA32_0 = 31 => r.service_data32[0] == t.service_data32[0];
    /// 32: ServiceData32.1.
    SERVICE_DATA32_1 = 32 => r.service_data32[1] == t.service_data32[1];
    /// 33: ServiceData32.2.
    SERVICE_DATA32_2 = 33 => r.service_data32[2] == t.service_data32[2];
    /// 34: ServiceData32.3.
    SERVICE_DATA32_3 = 34 => r.service_data32[3] == t.service_data32[3];
    /// 35: ServiceData64.0.
    SERVICE_DATA64_0 = 35 => r.service_data64[0] == t.service_data64[0];
    /// 36: ServiceData64.1.
    SERVICE_DATA64_1 = 36 => r.service_data64[1] == t.service_data64[1];
});

impl_sa_record!(
    ServiceRecord,
    SaAttributeId::SERVICE_RECORD,
    "ServiceRecord"
);
