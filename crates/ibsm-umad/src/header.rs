//! The umad header codec: the 56-byte `ib_user_mad_hdr_old` (agent id, status,
//! timeout, retries, length, the address block) in front of every MAD a umad device
//! reads or writes, where to send a MAD ([`Dest`]), and what a `read` returned
//! ([`Received`], [`decode_read`]). Pure (no device), so it is unit-tested and
//! fuzzed; the device code and the errors import it.

use ibsm_mad::{MadError, Smp};

/// Size of a MAD.
pub const MAD_SIZE: usize = 256;
/// Size of the `ib_user_mad` header without pkey_index (the layout we always use).
pub const UMAD_HDR_SIZE: usize = 56;
/// The permissive LID: destination of every directed-route SMP.
pub const PERMISSIVE_LID: u16 = 0xFFFF;
/// `status` of a request the kernel gave up on.
pub const STATUS_TIMEOUT: u32 = libc::ETIMEDOUT as u32;

/// Where to send a MAD.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dest {
    /// Directed route: the address block carries the permissive LID 0xFFFF; the path
    /// is in the SMP itself.
    Directed,
    /// LID routed to this LID, QP0.
    Lid(u16),
    /// Full control of the address block.
    Address(Address),
}

/// The address block of the umad header (what the kernel sends to / received from).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Address {
    pub qpn: u32,
    pub qkey: u32,
    pub lid: u16,
    pub sl: u8,
    pub path_bits: u8,
    pub grh_present: bool,
    pub gid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub gid: [u8; 16],
    pub flow_label: u32,
}

impl Address {
    pub(crate) fn encode(&self, b: &mut [u8; UMAD_HDR_SIZE]) {
        b[20..24].copy_from_slice(&self.qpn.to_be_bytes());
        b[24..28].copy_from_slice(&self.qkey.to_be_bytes());
        b[28..30].copy_from_slice(&self.lid.to_be_bytes());
        b[30] = self.sl;
        b[31] = self.path_bits;
        b[32] = u8::from(self.grh_present);
        b[33] = self.gid_index;
        b[34] = self.hop_limit;
        b[35] = self.traffic_class;
        b[36..52].copy_from_slice(&self.gid);
        b[52..56].copy_from_slice(&self.flow_label.to_be_bytes());
    }

    fn decode(b: &[u8; UMAD_HDR_SIZE]) -> Address {
        let mut gid = [0u8; 16];
        gid.copy_from_slice(&b[36..52]);
        Address {
            qpn: be32(b, 20),
            qkey: be32(b, 24),
            lid: u16::from_be_bytes([b[28], b[29]]),
            sl: b[30],
            path_bits: b[31],
            grh_present: b[32] != 0,
            gid_index: b[33],
            hop_limit: b[34],
            traffic_class: b[35],
            gid,
            flow_label: be32(b, 52),
        }
    }
}

pub(crate) fn tid_of(m: &[u8; MAD_SIZE]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&m[8..16]);
    u64::from_be_bytes(w)
}

fn be32(b: &[u8; UMAD_HDR_SIZE], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(w)
}

fn ne32(b: &[u8; UMAD_HDR_SIZE], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_ne_bytes(w)
}

impl Dest {
    pub(crate) fn address(self) -> Address {
        match self {
            Dest::Directed => Address {
                lid: PERMISSIVE_LID,
                ..Address::default()
            },
            Dest::Lid(lid) => Address {
                lid,
                ..Address::default()
            },
            Dest::Address(a) => a,
        }
    }
}

/// A MAD read from the device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// The 256 MAD bytes (for a timeout: the request that timed out).
    pub mad: [u8; MAD_SIZE],
    /// Header status: 0, or [`STATUS_TIMEOUT`] when the kernel gave up on a request.
    pub status: u32,
    /// Agent id from the header. On a kernel, the agent it arrived on (see
    /// [`UmadPort::agent_id`](crate::UmadPort::agent_id)); under umad2sim a response carries ibsim's client id
    /// instead, so do not route on it.
    pub agent_id: u32,
    /// Header `length` field.
    pub length: u32,
    /// Where it came from (LID, QP, SL...). For DR SMPs the LID is usually 0xFFFF or 0.
    pub source: Address,
}

impl Received {
    /// The kernel timed out the request in [`Received::mad`].
    pub fn is_timeout(&self) -> bool {
        self.status == STATUS_TIMEOUT
    }

    /// Management class byte of the MAD.
    pub fn mgmt_class(&self) -> u8 {
        self.mad[1]
    }

    /// Method byte of the MAD.
    pub fn method(&self) -> u8 {
        self.mad[3]
    }

    /// The MAD's TID (on a request we sent, the upper 32 bits are the agent's, set by
    /// the kernel or ibsim).
    pub fn tid(&self) -> u64 {
        tid_of(&self.mad)
    }

    /// Decode the MAD as an SMP.
    pub fn smp(&self) -> Result<Smp, MadError> {
        Smp::decode(&self.mad)
    }
}

/// Size of one read or write on the device: the header and a MAD.
pub const UMAD_READ_SIZE: usize = UMAD_HDR_SIZE + MAD_SIZE;

/// Why the bytes of a `read` are not a MAD (the device-free half of
/// [`UmadError::ShortRead`](crate::UmadError::ShortRead)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// Fewer bytes than the 56-byte header.
    #[error("short read: {len} bytes, need at least {UMAD_HDR_SIZE}")]
    Short { len: usize },
}

/// Decode what one `read` of a umad descriptor returned (`bytes` is exactly the bytes
/// read). Pure, so it is unit-tested and fuzzed without a device. `Ok(None)` is
/// umad2sim's "no packet" (a header with status EAGAIN and less than a MAD header
/// behind it). A MAD shorter than 256 bytes is zero-filled; bytes past
/// [`UMAD_READ_SIZE`] are ignored (a read never returns more).
pub fn decode_read(bytes: &[u8]) -> Result<Option<Received>, ReadError> {
    let Some(hdr) = bytes
        .get(..UMAD_HDR_SIZE)
        .and_then(|h| <&[u8; UMAD_HDR_SIZE]>::try_from(h).ok())
    else {
        return Err(ReadError::Short { len: bytes.len() });
    };
    let n = bytes.len().min(UMAD_READ_SIZE);
    let status = ne32(hdr, 4);
    if n < UMAD_HDR_SIZE + 24 && status == libc::EAGAIN as u32 {
        return Ok(None);
    }
    let mut mad = [0u8; MAD_SIZE];
    let body = bytes.get(UMAD_HDR_SIZE..n).unwrap_or(&[]);
    mad[..body.len()].copy_from_slice(body);
    Ok(Some(Received {
        mad,
        status,
        agent_id: ne32(hdr, 0),
        length: ne32(hdr, 16),
        source: Address::decode(hdr),
    }))
}

impl Received {
    /// The bytes a `read` returns for this MAD (timeout_ms and retries 0):
    /// [`decode_read`] of them gives `self` back. Tests and fuzzing use it; the device
    /// writes with [`UmadPort::send_with`](crate::UmadPort::send_with).
    pub fn encode(&self) -> [u8; UMAD_READ_SIZE] {
        let mut hdr = [0u8; UMAD_HDR_SIZE];
        hdr[0..4].copy_from_slice(&self.agent_id.to_ne_bytes());
        hdr[4..8].copy_from_slice(&self.status.to_ne_bytes());
        hdr[16..20].copy_from_slice(&self.length.to_ne_bytes());
        self.source.encode(&mut hdr);
        let mut out = [0u8; UMAD_READ_SIZE];
        out[..UMAD_HDR_SIZE].copy_from_slice(&hdr);
        out[UMAD_HDR_SIZE..].copy_from_slice(&self.mad);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::CLASS_SUBN_DIRECTED_ROUTE;

    #[test]
    fn address_block_round_trips() {
        let a = Address {
            qpn: 1,
            qkey: 0x8001_0000,
            lid: 0x1234,
            sl: 3,
            path_bits: 1,
            grh_present: true,
            gid_index: 2,
            hop_limit: 64,
            traffic_class: 5,
            gid: [7; 16],
            flow_label: 0xabcde,
        };
        let mut h = [0u8; UMAD_HDR_SIZE];
        a.encode(&mut h);
        assert_eq!(Address::decode(&h), a);
        // LID is big-endian at offset 28.
        assert_eq!(&h[28..30], &[0x12, 0x34]);
        let mut h = [0u8; UMAD_HDR_SIZE];
        Dest::Directed.address().encode(&mut h);
        assert_eq!(&h[28..30], &[0xff, 0xff]);
    }

    #[test]
    fn read_decodes_the_header_and_zero_fills_a_short_mad() {
        let mut b = vec![0u8; UMAD_HDR_SIZE + 40];
        b[0..4].copy_from_slice(&7u32.to_ne_bytes());
        b[4..8].copy_from_slice(&STATUS_TIMEOUT.to_ne_bytes());
        b[16..20].copy_from_slice(&256u32.to_ne_bytes());
        b[28..30].copy_from_slice(&0x0012u16.to_be_bytes());
        b[UMAD_HDR_SIZE + 1] = CLASS_SUBN_DIRECTED_ROUTE;
        b[UMAD_HDR_SIZE + 3] = 0x81;
        b[UMAD_HDR_SIZE + 39] = 0xAB;
        let r = decode_read(&b).expect("a header").expect("a MAD");
        assert_eq!(r.agent_id, 7);
        assert!(r.is_timeout());
        assert_eq!(r.length, 256);
        assert_eq!(r.source.lid, 0x12);
        assert_eq!(r.mgmt_class(), CLASS_SUBN_DIRECTED_ROUTE);
        assert_eq!(r.method(), 0x81);
        assert_eq!(r.mad[39], 0xAB);
        assert!(r.mad[40..].iter().all(|&x| x == 0));
        assert_eq!(decode_read(&r.encode()), Ok(Some(r)));
    }

    #[test]
    fn read_shorter_than_a_header_is_an_error() {
        assert_eq!(decode_read(&[0; 55]), Err(ReadError::Short { len: 55 }));
        assert_eq!(decode_read(&[]), Err(ReadError::Short { len: 0 }));
    }

    #[test]
    fn umad2sim_eagain_header_is_no_packet() {
        let mut b = [0u8; UMAD_HDR_SIZE];
        b[4..8].copy_from_slice(&(libc::EAGAIN as u32).to_ne_bytes());
        assert_eq!(decode_read(&b), Ok(None));
        // With a whole MAD behind it the status is the MAD's, not "nothing".
        let mut full = [0u8; UMAD_READ_SIZE];
        full[..UMAD_HDR_SIZE].copy_from_slice(&b);
        assert!(matches!(decode_read(&full), Ok(Some(_))));
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn read_decode_never_panics_and_round_trips(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
                match decode_read(&bytes) {
                    Err(ReadError::Short { len }) => prop_assert!(len < UMAD_HDR_SIZE),
                    Ok(None) => prop_assert!(bytes.len() < UMAD_HDR_SIZE + 24),
                    Ok(Some(r)) => {
                        let n = bytes.len().min(UMAD_READ_SIZE);
                        prop_assert_eq!(&r.mad[..n - UMAD_HDR_SIZE], &bytes[UMAD_HDR_SIZE..n]);
                        prop_assert_eq!(decode_read(&r.encode()), Ok(Some(r)));
                    }
                }
            }

            #[test]
            fn address_round_trips(qpn: u32, qkey: u32, lid: u16, sl: u8, path_bits: u8, grh_present: bool,
                                   gid_index: u8, hop_limit: u8, traffic_class: u8, gid: [u8; 16], flow_label: u32) {
                let a = Address { qpn, qkey, lid, sl, path_bits, grh_present, gid_index, hop_limit, traffic_class, gid, flow_label };
                let mut h = [0u8; UMAD_HDR_SIZE];
                a.encode(&mut h);
                prop_assert_eq!(Address::decode(&h), a);
                // The agent/status/timeout/retries/length words are not touched.
                prop_assert_eq!(&h[..20], &[0u8; 20]);
            }
        }
    }
}
