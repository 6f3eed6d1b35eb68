//! ibsm-transport: the glue between sans-IO cores and real devices.
//!
//! * [`MadDevice`] is the one blocking interface a driver needs: send a MAD,
//!   receive one with a timeout, together with the LRH SLID it came from
//!   ([`ReceivedMad`]). The SLID is not in the 256 MAD bytes, yet an answer to a
//!   LID-routed request (plain `sminfo` reading PortInfo.MasterSMLID and sending a
//!   LID-routed SubnGet(SMInfo) there, a switch's LID-routed trap) must go back
//!   LID-routed to exactly that LID ([`MadDevice::send_lid`]): a umad port has no
//!   other way to address it. Two implementations:
//!   [`SimDevice`] (the embedded simulator, `ibsm-sim`) and [`UmadDevice`]
//!   (`/dev/infiniband/umadN` through `ibsm-umad`, also under ibsim's umad2sim).
//! * [`SharedSim`] lets several devices (several SMs, for failover tests) share
//!   one simulator: one `SimDevice` per attached client. The simulator is
//!   sans-IO, so the hub maps a real clock (`Instant` since the hub was built)
//!   onto the simulator's time and keeps a mailbox per client, because
//!   `Sim::poll_delivery` hands out deliveries for any client.
//! * [`run_discovery`] is the blocking driver for `ibsm_core::discovery`: the
//!   only place here that reads the clock, as the architecture requires.
//! * [`FabricSpec`] parses the `--fabric` strings of the CLI and tests
//!   (`sim:NETFILE`, `gen:fat-tree:K`, `gen:fat-tree2:K`, `gen:random:SEED`,
//!   `umad[:CA[:PORT]]`) and opens the matching device.

mod driver;
mod sim_device;
mod spec;
mod umad_device;

pub use driver::{run_discovery, DiscoverConfig, DiscoveryReport};
pub use sim_device::{SharedSim, SimDevice};
pub use spec::{FabricSpec, SpecError};
pub use umad_device::UmadDevice;

use std::time::Duration;

use ibsm_mad::MAD_SIZE;

/// Why a device or driver failed.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// The umad device failed.
    #[error("umad: {0}")]
    Umad(#[from] ibsm_umad::UmadError),
    /// The embedded simulator refused something.
    #[error("simulator: {0}")]
    Sim(String),
    /// The simulator lock was poisoned by a panicking thread.
    #[error("simulator lock poisoned")]
    Poisoned,
    /// A driver ran past its overall deadline.
    #[error("{what} did not finish within {limit:?}")]
    Deadline {
        /// What was running.
        what: &'static str,
        /// The limit.
        limit: Duration,
    },
    /// The fabric spec could not be turned into a device.
    #[error(transparent)]
    Spec(#[from] SpecError),
}

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
