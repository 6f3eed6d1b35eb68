//! Subnet management packets: LID-routed (class 0x01) and directed-route (class 0x81).
//!
//! Wire layout (IBA 14.2.1.1 and 14.2.1.2), byte offsets into the 256-byte MAD:
//!
//! | bytes   | LID-routed            | directed route                              |
//! |---------|-----------------------|---------------------------------------------|
//! | 0..24   | common header         | common header; Status = D(1) + Status(15), ClassSpecific = HopPointer, HopCount |
//! | 24..32  | M_Key                 | M_Key                                       |
//! | 32..64  | Reserved              | DrSLID (32..34), DrDLID (34..36), Reserved  |
//! | 64..128 | Data                  | Data                                        |
//! | 128..256| Reserved              | InitialPath (128..192), ReturnPath (192..256) |

use crate::attr::SmpAttribute;
use crate::attribute_id::AttributeId;
use crate::error::MadError;
use crate::header::{
    MadHeader, Method, MgmtClass, BASE_VERSION, MAD_HEADER_SIZE, MAD_SIZE, SMP_CLASS_VERSION,
    SMP_DATA_SIZE,
};

/// Maximum hop count of a directed route (the 64-byte path arrays have entry 0 unused).
pub const MAX_HOPS: usize = 63;
/// The permissive LID, used as DrSLID/DrDLID for fully directed routes.
pub const PERMISSIVE_LID: u16 = 0xFFFF;

/// A subnet management packet, either routing. `Copy` and heap-free on purpose: the
/// embedded simulator moves about a million of these per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Smp {
    /// Method (R bit included).
    pub method: Method,
    /// Status: 16 bits for LID-routed SMPs, 15 bits for directed-route SMPs (bit 15 of
    /// the wire field is the D bit, held in [`DirectedRoute::direction`]; the encoder
    /// masks bit 15 of this value off for DR SMPs).
    pub status: u16,
    /// TransactionID.
    pub tid: u64,
    /// AttributeID.
    pub attr_id: AttributeId,
    /// AttributeModifier (see [`crate::modifier`] for typed views).
    pub attr_mod: u32,
    /// M_Key.
    pub m_key: u64,
    /// LID-routed or directed route (with the DR-only fields).
    pub route: SmpRoute,
    /// The 64-byte SMP data field, decoded with [`SmpAttribute::decode`].
    pub data: [u8; SMP_DATA_SIZE],
}

/// How an SMP is routed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SmpRoute {
    /// MgmtClass 0x01, routed by the LRH DLID.
    Lid,
    /// MgmtClass 0x81, routed by the paths below.
    Directed(DirectedRoute),
}

/// The directed-route part of a class 0x81 SMP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DirectedRoute {
    /// D bit: false on the outbound (request) trip, true on the return (response) trip.
    pub direction: bool,
    /// HopPointer.
    pub hop_ptr: u8,
    /// HopCount (0..=63; 0 means "the local port").
    pub hop_cnt: u8,
    /// DrSLID.
    pub dr_slid: u16,
    /// DrDLID.
    pub dr_dlid: u16,
    /// InitialPath; entry 0 is unused, entries 1..=hop_cnt are the egress ports.
    pub initial_path: [u8; 64],
    /// ReturnPath; filled in by switches on the way out.
    pub return_path: [u8; 64],
}

impl DirectedRoute {
    /// A fully directed outbound route (DrSLID = DrDLID = permissive LID, HopPointer 0,
    /// D = 0) through `path`, where `path[i]` is the egress port at hop `i + 1`
    /// (the leading 0 of smpdump's "0,1,3" notation is *not* part of `path`).
    pub fn outbound(path: &[u8]) -> Result<DirectedRoute, MadError> {
        if path.len() > MAX_HOPS {
            return Err(MadError::PathTooLong(path.len()));
        }
        let mut initial_path = [0u8; 64];
        initial_path
            .get_mut(1..=path.len())
            .ok_or(MadError::PathTooLong(path.len()))?
            .copy_from_slice(path);
        Ok(DirectedRoute {
            direction: false,
            hop_ptr: 0,
            // path.len() <= 63 checked above.
            hop_cnt: path.len() as u8,
            dr_slid: PERMISSIVE_LID,
            dr_dlid: PERMISSIVE_LID,
            initial_path,
            return_path: [0u8; 64],
        })
    }

    /// [`DirectedRoute::outbound`], cutting paths longer than 63 hops (logged).
    pub fn outbound_clamped(path: &[u8]) -> DirectedRoute {
        let n = path.len().min(MAX_HOPS);
        if n < path.len() {
            tracing::error!(
                hops = path.len(),
                max = MAX_HOPS,
                "directed route longer than the IBA maximum, cut to 63 hops"
            );
        }
        let mut dr = DirectedRoute {
            direction: false,
            hop_ptr: 0,
            hop_cnt: 0,
            dr_slid: PERMISSIVE_LID,
            dr_dlid: PERMISSIVE_LID,
            initial_path: [0u8; 64],
            return_path: [0u8; 64],
        };
        for (i, p) in path.iter().take(n).enumerate() {
            if let Some(slot) = dr.initial_path.get_mut(i + 1) {
                *slot = *p;
            }
        }
        // n <= 63.
        dr.hop_cnt = n as u8;
        dr
    }

    /// The egress ports of hops 1..=hop_cnt (without the unused entry 0).
    pub fn path(&self) -> &[u8] {
        let n = usize::from(self.hop_cnt).min(MAX_HOPS);
        self.initial_path.get(1..=n).unwrap_or(&[])
    }
}

impl Smp {
    /// Decodes a 256-byte MAD as an SMP. Bytes past 256 are ignored.
    ///
    /// Rejects: short buffers, BaseVersion != 1, ClassVersion != 1, classes other than
    /// 0x01/0x81 and DR HopCount > 63. Reserved bytes are ignored.
    pub fn decode(buf: &[u8]) -> Result<Smp, MadError> {
        let b: &[u8; MAD_SIZE] =
            buf.get(..MAD_SIZE)
                .and_then(|s| s.try_into().ok())
                .ok_or(MadError::TooShort {
                    what: "SMP",
                    need: MAD_SIZE,
                    got: buf.len(),
                })?;
        let h = MadHeader::decode(b)?;
        if h.base_version != BASE_VERSION {
            return Err(MadError::BadBaseVersion(h.base_version));
        }
        if h.mgmt_class != MgmtClass::SUBN_LID_ROUTED
            && h.mgmt_class != MgmtClass::SUBN_DIRECTED_ROUTE
        {
            return Err(MadError::NotSmpClass(h.mgmt_class.0));
        }
        if h.class_version != SMP_CLASS_VERSION {
            return Err(MadError::BadClassVersion {
                class: h.mgmt_class.0,
                version: h.class_version,
            });
        }
        let m_key = u64::from_be_bytes(arr(b, 24));
        let data: [u8; 64] = arr(b, 64);
        let (status, route) = if h.mgmt_class == MgmtClass::SUBN_DIRECTED_ROUTE {
            let [hop_ptr, hop_cnt] = h.class_specific.to_be_bytes();
            if usize::from(hop_cnt) > MAX_HOPS {
                return Err(MadError::HopCountTooLarge(hop_cnt));
            }
            let dr = DirectedRoute {
                direction: h.status & 0x8000 != 0,
                hop_ptr,
                hop_cnt,
                dr_slid: u16::from_be_bytes(arr(b, 32)),
                dr_dlid: u16::from_be_bytes(arr(b, 34)),
                initial_path: arr(b, 128),
                return_path: arr(b, 192),
            };
            (h.status & 0x7FFF, SmpRoute::Directed(dr))
        } else {
            (h.status, SmpRoute::Lid)
        };
        Ok(Smp {
            method: h.method,
            status,
            tid: h.tid,
            attr_id: h.attr_id,
            attr_mod: h.attr_mod,
            m_key,
            route,
            data,
        })
    }

    /// Encodes into a fresh 256-byte MAD.
    pub fn encode(&self) -> [u8; MAD_SIZE] {
        let mut b = [0u8; MAD_SIZE];
        self.encode_into(&mut b);
        b
    }

    /// Encodes into `b`, overwriting all 256 bytes (reserved bytes become zero).
    pub fn encode_into(&self, b: &mut [u8; MAD_SIZE]) {
        *b = [0u8; MAD_SIZE];
        let (mgmt_class, status, class_specific) = match &self.route {
            SmpRoute::Lid => (MgmtClass::SUBN_LID_ROUTED, self.status, 0),
            SmpRoute::Directed(dr) => (
                MgmtClass::SUBN_DIRECTED_ROUTE,
                (self.status & 0x7FFF) | if dr.direction { 0x8000 } else { 0 },
                u16::from_be_bytes([dr.hop_ptr, dr.hop_cnt]),
            ),
        };
        let h = MadHeader {
            base_version: BASE_VERSION,
            mgmt_class,
            class_version: SMP_CLASS_VERSION,
            method: self.method,
            status,
            class_specific,
            tid: self.tid,
            attr_id: self.attr_id,
            attr_mod: self.attr_mod,
        };
        let mut hdr = [0u8; MAD_HEADER_SIZE];
        h.encode_into(&mut hdr);
        b[..MAD_HEADER_SIZE].copy_from_slice(&hdr);
        b[24..32].copy_from_slice(&self.m_key.to_be_bytes());
        b[64..128].copy_from_slice(&self.data);
        if let SmpRoute::Directed(dr) = &self.route {
            b[32..34].copy_from_slice(&dr.dr_slid.to_be_bytes());
            b[34..36].copy_from_slice(&dr.dr_dlid.to_be_bytes());
            b[128..192].copy_from_slice(&dr.initial_path);
            b[192..256].copy_from_slice(&dr.return_path);
        }
    }

    /// Reads the TransactionID of a raw MAD (see [`crate::peek_tid`]).
    pub fn peek_tid(buf: &[u8]) -> Option<u64> {
        crate::header::peek_tid(buf)
    }

    /// SubnGet by directed route; see [`DirectedRoute::outbound`] for `path`.
    ///
    /// Infallible as the crate contract says; a path longer than the IBA maximum of
    /// 63 hops cannot be sent, so it is cut to 63 hops and a `tracing` error is logged.
    /// Use [`Smp::try_get_dr`] when the path comes from outside (CLI, files).
    pub fn get_dr(path: &[u8], attr_id: AttributeId, attr_mod: u32, tid: u64) -> Smp {
        Smp::request(
            Method::GET,
            SmpRoute::Directed(DirectedRoute::outbound_clamped(path)),
            attr_id,
            attr_mod,
            tid,
            [0u8; SMP_DATA_SIZE],
        )
    }

    /// SubnSet by directed route carrying `data` (path handling as [`Smp::get_dr`]).
    pub fn set_dr(
        path: &[u8],
        attr_id: AttributeId,
        attr_mod: u32,
        tid: u64,
        data: [u8; SMP_DATA_SIZE],
    ) -> Smp {
        Smp::request(
            Method::SET,
            SmpRoute::Directed(DirectedRoute::outbound_clamped(path)),
            attr_id,
            attr_mod,
            tid,
            data,
        )
    }

    /// [`Smp::get_dr`] that fails with [`MadError::PathTooLong`] beyond 63 hops.
    pub fn try_get_dr(
        path: &[u8],
        attr_id: AttributeId,
        attr_mod: u32,
        tid: u64,
    ) -> Result<Smp, MadError> {
        Ok(Smp::request(
            Method::GET,
            SmpRoute::Directed(DirectedRoute::outbound(path)?),
            attr_id,
            attr_mod,
            tid,
            [0u8; SMP_DATA_SIZE],
        ))
    }

    /// [`Smp::set_dr`] that fails with [`MadError::PathTooLong`] beyond 63 hops.
    pub fn try_set_dr(
        path: &[u8],
        attr_id: AttributeId,
        attr_mod: u32,
        tid: u64,
        data: [u8; SMP_DATA_SIZE],
    ) -> Result<Smp, MadError> {
        Ok(Smp::request(
            Method::SET,
            SmpRoute::Directed(DirectedRoute::outbound(path)?),
            attr_id,
            attr_mod,
            tid,
            data,
        ))
    }

    /// SubnGet, LID-routed (the LRH DLID is the transport's business).
    pub fn get_lid(attr_id: AttributeId, attr_mod: u32, tid: u64) -> Smp {
        Smp::request(
            Method::GET,
            SmpRoute::Lid,
            attr_id,
            attr_mod,
            tid,
            [0u8; SMP_DATA_SIZE],
        )
    }

    /// SubnSet, LID-routed, carrying `data`.
    pub fn set_lid(
        attr_id: AttributeId,
        attr_mod: u32,
        tid: u64,
        data: [u8; SMP_DATA_SIZE],
    ) -> Smp {
        Smp::request(Method::SET, SmpRoute::Lid, attr_id, attr_mod, tid, data)
    }

    /// Typed SubnGet by directed route: the attribute id comes from `A`.
    pub fn get_dr_attr<A: SmpAttribute>(path: &[u8], attr_mod: u32, tid: u64) -> Smp {
        Smp::get_dr(path, A::ID, attr_mod, tid)
    }

    /// Typed SubnSet by directed route.
    pub fn set_dr_attr<A: SmpAttribute>(path: &[u8], attr_mod: u32, tid: u64, value: &A) -> Smp {
        Smp::set_dr(path, A::ID, attr_mod, tid, value.encode())
    }

    /// Typed SubnGet, LID-routed.
    pub fn get_lid_attr<A: SmpAttribute>(attr_mod: u32, tid: u64) -> Smp {
        Smp::get_lid(A::ID, attr_mod, tid)
    }

    /// Typed SubnSet, LID-routed.
    pub fn set_lid_attr<A: SmpAttribute>(attr_mod: u32, tid: u64, value: &A) -> Smp {
        Smp::set_lid(A::ID, attr_mod, tid, value.encode())
    }

    /// Any request with M_Key 0 and status 0.
    pub fn request(
        method: Method,
        route: SmpRoute,
        attr_id: AttributeId,
        attr_mod: u32,
        tid: u64,
        data: [u8; SMP_DATA_SIZE],
    ) -> Smp {
        Smp {
            method,
            status: 0,
            tid,
            attr_id,
            attr_mod,
            m_key: 0,
            route,
            data,
        }
    }

    /// The GetResp for this request: same TID, attribute, modifier, M_Key and paths;
    /// Method = GetResp; for DR SMPs the D bit set. Data and status are kept (set them
    /// with [`Smp::with_data`] / [`Smp::with_status`]). HopPointer handling on the
    /// return trip is the responder's job (IBA 14.2.2), so it is left unchanged here.
    pub fn response(&self) -> Smp {
        let mut r = *self;
        r.method = Method::GET_RESP;
        if let SmpRoute::Directed(dr) = &mut r.route {
            dr.direction = true;
        }
        r
    }

    /// Replaces the data field.
    pub fn with_data(mut self, data: [u8; SMP_DATA_SIZE]) -> Smp {
        self.data = data;
        self
    }

    /// Replaces the data field with an encoded attribute.
    pub fn with_attribute<A: SmpAttribute>(mut self, value: &A) -> Smp {
        self.data = value.encode();
        self
    }

    /// Replaces the status.
    pub fn with_status(mut self, status: u16) -> Smp {
        self.status = status;
        self
    }

    /// Decodes the data field as `A`, checking that the SMP carries `A::ID`.
    pub fn attribute<A: SmpAttribute>(&self) -> Result<A, MadError> {
        if self.attr_id != A::ID {
            return Err(MadError::AttributeMismatch {
                expected: A::ID,
                got: self.attr_id,
            });
        }
        A::decode(&self.data)
    }

    /// True for class 0x81.
    pub fn is_directed(&self) -> bool {
        matches!(self.route, SmpRoute::Directed(_))
    }

    /// The MgmtClass this SMP encodes to.
    pub fn mgmt_class(&self) -> MgmtClass {
        match self.route {
            SmpRoute::Lid => MgmtClass::SUBN_LID_ROUTED,
            SmpRoute::Directed(_) => MgmtClass::SUBN_DIRECTED_ROUTE,
        }
    }

    /// The directed-route fields, if any.
    pub fn directed(&self) -> Option<&DirectedRoute> {
        match &self.route {
            SmpRoute::Directed(dr) => Some(dr),
            SmpRoute::Lid => None,
        }
    }

    /// Mutable directed-route fields, if any.
    pub fn directed_mut(&mut self) -> Option<&mut DirectedRoute> {
        match &mut self.route {
            SmpRoute::Directed(dr) => Some(dr),
            SmpRoute::Lid => None,
        }
    }
}

/// Copies `N` bytes at constant offset `off` out of the fixed-size MAD. Offsets are
/// code constants within 256, never input, so this cannot fail at run time.
fn arr<const N: usize>(b: &[u8; MAD_SIZE], off: usize) -> [u8; N] {
    let mut out = [0u8; N];
    if let Some(s) = b.get(off..off + N) {
        out.copy_from_slice(s);
    }
    out
}
