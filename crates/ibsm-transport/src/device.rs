//! [`MadDevice`], the blocking MAD endpoint the driver talks to, and [`ReceivedMad`],
//! what it receives. A file of its own so the device implementations, the driver and
//! the spec parser import the trait directly.

use std::time::Duration;

use ibsm_mad::{MadAddress, MAD_SIZE};

use crate::error::TransportError;

/// One MAD as it arrived, with the source address of the packet that carried it.
#[derive(Clone, PartialEq, Eq)]
pub struct ReceivedMad {
    /// The 256 MAD bytes.
    pub mad: [u8; MAD_SIZE],
    /// Where it came from. For an SMP only the LID means something (the LRH SLID,
    /// [`ReceivedMad::slid`]; QPN 0, no Q_Key). For a GMP it is the whole address its
    /// answer goes to with [`MadDevice::send_gmp`]: the requester's LID and QP (1 for
    /// any umad agent), the GSI Q_Key, SL, path bits, P_Key index and GRH.
    pub from: MadAddress,
}

impl ReceivedMad {
    /// An SMP that came from LRH SLID `slid` (QP0: no Q_Key, no GRH).
    pub fn smp(mad: [u8; MAD_SIZE], slid: u16) -> ReceivedMad {
        ReceivedMad {
            mad,
            from: MadAddress {
                lid: slid,
                qpn: 0,
                qkey: 0,
                sl: 0,
                path_bits: 0,
                pkey_index: 0,
                grh: None,
            },
        }
    }

    /// LRH SLID: where a LID-routed answer must go (with [`MadDevice::send_lid`]).
    /// For directed-route SMPs it is usually the permissive LID 0xFFFF (or 0);
    /// their answers follow the return path instead and do not need it.
    pub fn slid(&self) -> u16 {
        self.from.lid
    }

    /// Management class byte: 0x01/0x81 for SMPs, anything else is a GMP.
    pub fn mgmt_class(&self) -> u8 {
        self.mad[1]
    }

    /// Is this an SMP (class 0x01 or 0x81, QP0)?
    pub fn is_smp(&self) -> bool {
        matches!(self.mgmt_class(), 0x01 | 0x81)
    }
}

impl std::fmt::Debug for ReceivedMad {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReceivedMad")
            .field("slid", &self.from.lid)
            .field("qpn", &self.from.qpn)
            .field("class", &self.mad[1])
            .field("method", &self.mad[3])
            .finish_non_exhaustive()
    }
}

/// A blocking MAD endpoint: SMPs on QP0 and, where the device has GSI agents, GMPs on
/// QP1.
pub trait MadDevice {
    /// Send one MAD. Directed-route SMPs need no address; LID-routed SMPs
    /// go through [`MadDevice::send_lid`], GMPs through [`MadDevice::send_gmp`].
    fn send(&mut self, mad: &[u8; MAD_SIZE]) -> Result<(), TransportError>;

    /// Send a LID-routed MAD to `dlid` (the LRH DLID; for an answer, the request's
    /// [`ReceivedMad::slid`]). The default ignores `dlid` and uses
    /// [`MadDevice::send`], for devices that cannot address a LID; both devices here
    /// override it.
    fn send_lid(&mut self, dlid: u16, mad: &[u8; MAD_SIZE]) -> Result<(), TransportError> {
        let _ = dlid;
        self.send(mad)
    }

    /// Send a GMP (any class but 0x01/0x81) to `to`: its LID and QP with its Q_Key, SL,
    /// path bits, P_Key index and GRH. An answer goes to the request's
    /// [`ReceivedMad::from`] unchanged; a Report to a subscriber's address. Requests
    /// (a Report) are sent so that their response comes back through
    /// [`MadDevice::recv`]. The device must have an agent for the class
    /// ([`crate::UmadDevice::open_with_sa`], [`crate::SimDevice::register_gsi_class`]);
    /// the default refuses ([`TransportError::GmpUnsupported`]), for devices that carry
    /// SMPs only. `mad` is what to write: a whole 256-byte MAD, or a shorter one (at
    /// least the MAD and RMPP headers, 36 bytes), as the last segment of an RMPP
    /// transfer is written; on the wire it is a 256-byte MAD padded with zeros, and
    /// a umad reader under umad2sim reads exactly the bytes written.
    fn send_gmp(&mut self, to: &MadAddress, mad: &[u8]) -> Result<(), TransportError> {
        let _ = to;
        Err(TransportError::GmpUnsupported {
            class: mad.get(1).copied().unwrap_or(0),
        })
    }

    /// Wait up to `timeout` for one MAD (responses and unsolicited requests, SMPs and
    /// the GMPs of the classes the device registered) and where it came from. Answer a
    /// LID-routed SMP with `send_lid(received.slid(), ..)`, a GMP with
    /// `send_gmp(&received.from, ..)`.
    fn recv(&mut self, timeout: Duration) -> Result<Option<ReceivedMad>, TransportError>;

    /// A second handle on the same port, for another thread: both may send, and one of
    /// them (only one) receives. What a driver needs to read the port on a thread of its
    /// own while another sends (ibsmd answers SMInfo polls on its reader thread). `None`:
    /// this device cannot be shared (the default); then one thread does both.
    /// [`crate::UmadDevice`] shares its descriptor (a kernel umad fd takes concurrent
    /// `write` and `read`; so does umad2sim, which serializes writes under its device lock
    /// and queues reads per descriptor), [`crate::SimDevice`] its simulator client.
    fn try_share(&self) -> Option<Box<dyn MadDevice + Send>> {
        None
    }
}

impl<D: MadDevice + ?Sized> MadDevice for Box<D> {
    fn send(&mut self, mad: &[u8; MAD_SIZE]) -> Result<(), TransportError> {
        (**self).send(mad)
    }
    fn send_lid(&mut self, dlid: u16, mad: &[u8; MAD_SIZE]) -> Result<(), TransportError> {
        (**self).send_lid(dlid, mad)
    }
    fn send_gmp(&mut self, to: &MadAddress, mad: &[u8]) -> Result<(), TransportError> {
        (**self).send_gmp(to, mad)
    }
    fn recv(&mut self, timeout: Duration) -> Result<Option<ReceivedMad>, TransportError> {
        (**self).recv(timeout)
    }
    fn try_share(&self) -> Option<Box<dyn MadDevice + Send>> {
        (**self).try_share()
    }
}

/// The management class of a GMP to send, checked: 36..=256 bytes (the MAD and RMPP
/// headers at least) and not an SMP class. Both devices check with it.
pub(crate) fn gmp_class(mad: &[u8]) -> Result<u8, TransportError> {
    if !(ibsm_umad::MIN_WRITE_MAD..=MAD_SIZE).contains(&mad.len()) {
        return Err(TransportError::GmpLength { len: mad.len() });
    }
    let class = mad.get(1).copied().unwrap_or(0);
    if matches!(class, 0x01 | 0x81) {
        return Err(TransportError::NotGmp { class });
    }
    Ok(class)
}
