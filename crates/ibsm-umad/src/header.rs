//! The umad header codec: the 56-byte `ib_user_mad_hdr_old` (agent id, status,
//! timeout, retries, length, the address block) in front of every MAD a umad device
//! reads or writes, where to send a MAD ([`Dest`]), and what a `read` returned
//! ([`Received`], [`decode_read`]), and the mapping between the header's address
//! block and [`MadAddress`], the address a GMP's answer goes back to. Pure (no device),
//! so it is unit-tested and fuzzed; the device code and the errors import it.

use ibsm_mad::{GrhInfo, MadAddress, MadError, Smp, GSI_QKEY};

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
    /// Full control of the address block: how GMPs are sent (`Address::from(&MadAddress)`
    /// fills QPN, Q_Key, SL, path bits and the GRH).
    Address(Address),
}

/// The address block of the umad header (what the kernel sends to / received from).
///
/// What the two implementations put in it, checked in their sources (kernel
/// `drivers/infiniband/core/user_mad.c`, ibsim 0.10 `umad2sim/umad2sim.c`):
///
/// * **Read**: `lid` is the LRH SLID, `qpn` the remote (source) QP, `sl` and
///   `path_bits` (the DLID path bits, i.e. which of our LMC LIDs was addressed) and the
///   GRH fields as received. `qkey` is **always 0**: neither the kernel nor umad2sim
///   reports the Q_Key a packet carried. umad2sim also reports SL 0, path bits 0, no GRH,
///   and as QPN the QP the *sending agent* registered on (0 or 1).
/// * **Write**: `lid` is the DLID, `qpn` the remote QP, `sl`, `path_bits` and the GRH
///   fields are used as given. `qkey` is **ignored** by both: the kernel sends from its
///   GSI QP with that QP's own Q_Key (IB_QP_SET_QKEY, which is the well-known
///   0x8001_0000 for QP1), umad2sim forwards no Q_Key at all. We fill it anyway.
/// * **P_Key index**: the 56-byte header (`ib_user_mad_hdr_old`, see the crate doc for
///   why we never enable the 64-byte one) has no `pkey_index`: the kernel reads and
///   writes index 0 on such a descriptor, so a [`MadAddress`] decoded here has
///   `pkey_index` 0 and a non-zero one cannot be honoured on send.
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

impl From<&MadAddress> for Address {
    /// The header address block that sends a GMP to `a` (its `pkey_index` has no place
    /// in the 56-byte header: see the type's docs).
    fn from(a: &MadAddress) -> Address {
        let g = a.grh.unwrap_or_default();
        Address {
            qpn: a.qpn,
            qkey: a.qkey,
            lid: a.lid,
            sl: a.sl,
            path_bits: a.path_bits,
            grh_present: a.grh.is_some(),
            gid_index: g.gid_index,
            hop_limit: g.hop_limit,
            traffic_class: g.traffic_class,
            gid: g.gid,
            flow_label: g.flow_label,
        }
    }
}

impl Address {
    /// The block as a [`MadAddress`], field for field (`pkey_index` 0: the 56-byte
    /// header has none). [`Received::source_address`] is the one to answer a GMP with: it also
    /// fills in the Q_Key the header never reports.
    pub fn to_mad_address(&self) -> MadAddress {
        MadAddress {
            lid: self.lid,
            qpn: self.qpn,
            qkey: self.qkey,
            sl: self.sl,
            path_bits: self.path_bits,
            pkey_index: 0,
            grh: self.grh_present.then_some(GrhInfo {
                gid: self.gid,
                hop_limit: self.hop_limit,
                traffic_class: self.traffic_class,
                flow_label: self.flow_label,
                gid_index: self.gid_index,
            }),
        }
    }
}

/// The fewest MAD bytes a write may carry: the common MAD header and the RMPP header
/// (36), the kernel's minimum (it refuses a write shorter than the header of the
/// MAD's class too: 56 for SA).
pub const MIN_WRITE_MAD: usize = 36;

pub(crate) fn tid_of(m: &[u8]) -> u64 {
    m.get(8..16)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map_or(0, u64::from_be_bytes)
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

    /// Is this a subnet management packet (class 0x01 or 0x81, QP0)? Everything else
    /// is a GMP and arrived on QP1.
    pub fn is_smp(&self) -> bool {
        matches!(self.mgmt_class(), 0x01 | 0x81)
    }

    /// Where the MAD came from, as the address its answer goes to: the header's address
    /// block ([`Address::to_mad_address`]) with the Q_Key filled in. The header never
    /// reports a Q_Key (it reads 0, kernel and umad2sim alike), but a GMP can only have
    /// reached our QP1 with the well-known GSI Q_Key 0x8001_0000 (QP1 takes no other),
    /// and an answer to QP1 must carry that one too; SMPs (QP0) have
    /// no Q_Key and keep 0.
    pub fn source_address(&self) -> MadAddress {
        let mut a = self.source.to_mad_address();
        if !self.is_smp() && a.qkey == 0 {
            a.qkey = GSI_QKEY;
        }
        a
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

    fn gmp_address() -> MadAddress {
        MadAddress {
            lid: 0x0042,
            qpn: 1,
            qkey: GSI_QKEY,
            sl: 5,
            path_bits: 2,
            pkey_index: 0,
            grh: Some(GrhInfo {
                gid: [
                    0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 2, 0xc9, 3, 0, 0, 0x12, 0x34,
                ],
                hop_limit: 7,
                traffic_class: 0x20,
                flow_label: 0x9_8765,
                gid_index: 3,
            }),
        }
    }

    #[test]
    fn mad_address_round_trips_through_the_header() {
        let to = gmp_address();
        let mut h = [0u8; UMAD_HDR_SIZE];
        Address::from(&to).encode(&mut h);
        // The wire layout: QPN and Q_Key big-endian at 20 and 24, LID at 28, SL at 30,
        // path bits at 31, GRH flag at 32, GID at 36, flow label at 52.
        assert_eq!(&h[20..24], &[0, 0, 0, 1]);
        assert_eq!(&h[24..28], &[0x80, 0x01, 0, 0]);
        assert_eq!(&h[28..32], &[0x00, 0x42, 5, 2]);
        assert_eq!(&h[32..36], &[1, 3, 7, 0x20]);
        assert_eq!(h[36], 0xfe);
        assert_eq!(&h[52..56], &[0, 0x09, 0x87, 0x65]);
        assert_eq!(Address::decode(&h).to_mad_address(), to);
        // Without a GRH the GRH fields stay zero and come back as None.
        let plain = MadAddress::gsi(0x1234);
        let mut h = [0u8; UMAD_HDR_SIZE];
        Address::from(&plain).encode(&mut h);
        assert_eq!(h[32..56], [0u8; 24]);
        assert_eq!(Address::decode(&h).to_mad_address(), plain);
    }

    #[test]
    fn a_gmp_read_gives_its_source_with_the_gsi_qkey() {
        // As the kernel and umad2sim fill a read: Q_Key 0, P_Key index absent.
        let mut source = Address::from(&gmp_address());
        source.qkey = 0;
        let mut mad = [0u8; MAD_SIZE];
        mad[0] = 1;
        mad[1] = crate::device::CLASS_SUBN_ADM;
        mad[2] = crate::device::SA_CLASS_VERSION;
        mad[3] = 0x01;
        let r = Received {
            mad,
            status: 0,
            agent_id: 2,
            length: 256 + 56,
            source,
        };
        let r = decode_read(&r.encode()).expect("header").expect("MAD");
        assert!(!r.is_smp());
        assert_eq!(r.source_address(), gmp_address());
        // An SMP keeps Q_Key 0: QP0 has none.
        let mut smp = r.clone();
        smp.mad[1] = CLASS_SUBN_DIRECTED_ROUTE;
        assert!(smp.is_smp());
        assert_eq!(smp.source_address().qkey, 0);
        // A Q_Key the header did carry is kept.
        let mut other = r;
        other.source.qkey = 0x1234_5678;
        assert_eq!(other.source_address().qkey, 0x1234_5678);
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
                        // The address block maps to a MadAddress and back unchanged (GRH
                        // fields of a block without the GRH flag aside: they have no place
                        // in a MadAddress).
                        let a = r.source.to_mad_address();
                        let back = Address::from(&a);
                        if r.source.grh_present {
                            prop_assert_eq!(back, r.source);
                        } else {
                            prop_assert_eq!(back.to_mad_address(), a);
                        }
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
