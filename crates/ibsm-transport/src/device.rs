//! [`MadDevice`], the blocking MAD endpoint the driver talks to, and [`ReceivedMad`],
//! what it receives. A file of its own so the device implementations, the driver and
//! the spec parser import the trait directly.

use std::time::Duration;

use ibsm_mad::MAD_SIZE;

use crate::error::TransportError;

/// One MAD as it arrived, with the LRH source LID of the packet that carried it.
#[derive(Clone, PartialEq, Eq)]
pub struct ReceivedMad {
    /// The 256 MAD bytes.
    pub mad: [u8; MAD_SIZE],
    /// LRH SLID: where a LID-routed answer must go (with [`MadDevice::send_lid`]).
    /// For directed-route SMPs it is usually the permissive LID 0xFFFF (or 0);
    /// their answers follow the return path instead and do not need it.
    pub slid: u16,
}

impl std::fmt::Debug for ReceivedMad {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReceivedMad")
            .field("slid", &self.slid)
            .field("class", &self.mad[1])
            .field("method", &self.mad[3])
            .finish_non_exhaustive()
    }
}

/// A blocking MAD endpoint on QP0 (subnet management).
pub trait MadDevice {
    /// Send one MAD. Directed-route SMPs need no address; LID-routed SMPs
    /// go through [`MadDevice::send_lid`].
    fn send(&mut self, mad: &[u8; MAD_SIZE]) -> Result<(), TransportError>;

    /// Send a LID-routed MAD to `dlid` (the LRH DLID; for an answer, the request's
    /// [`ReceivedMad::slid`]). The default ignores `dlid` and uses
    /// [`MadDevice::send`], for devices that cannot address a LID; both devices here
    /// override it.
    fn send_lid(&mut self, dlid: u16, mad: &[u8; MAD_SIZE]) -> Result<(), TransportError> {
        let _ = dlid;
        self.send(mad)
    }

    /// Wait up to `timeout` for one MAD (responses and unsolicited requests) and
    /// the SLID it came from. Answer a LID-routed request with
    /// `send_lid(received.slid, ..)`.
    fn recv(&mut self, timeout: Duration) -> Result<Option<ReceivedMad>, TransportError>;
}

impl<D: MadDevice + ?Sized> MadDevice for Box<D> {
    fn send(&mut self, mad: &[u8; MAD_SIZE]) -> Result<(), TransportError> {
        (**self).send(mad)
    }
    fn send_lid(&mut self, dlid: u16, mad: &[u8; MAD_SIZE]) -> Result<(), TransportError> {
        (**self).send_lid(dlid, mad)
    }
    fn recv(&mut self, timeout: Duration) -> Result<Option<ReceivedMad>, TransportError> {
        (**self).recv(timeout)
    }
}
