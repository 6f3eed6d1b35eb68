//! ibsm-transport: the glue between sans-IO cores and real devices.
//!
//! * [`MadDevice`] is the one blocking interface a driver needs: send a MAD,
//!   receive one with a timeout. Two implementations:
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

/// A blocking MAD endpoint on QP0 (subnet management).
pub trait MadDevice {
    /// Send one MAD. Directed-route SMPs need no address; LID-routed SMPs
    /// go through [`MadDevice::send_lid`].
    fn send(&mut self, mad: &[u8; MAD_SIZE]) -> Result<(), TransportError>;

    /// Send a LID-routed MAD to `dlid`. The default sends it like a
    /// directed-route one, which is what the embedded simulator needs.
    fn send_lid(&mut self, dlid: u16, mad: &[u8; MAD_SIZE]) -> Result<(), TransportError> {
        let _ = dlid;
        self.send(mad)
    }

    /// Wait up to `timeout` for one MAD (responses and unsolicited requests).
    fn recv(&mut self, timeout: Duration) -> Result<Option<[u8; MAD_SIZE]>, TransportError>;
}

impl<D: MadDevice + ?Sized> MadDevice for Box<D> {
    fn send(&mut self, mad: &[u8; MAD_SIZE]) -> Result<(), TransportError> {
        (**self).send(mad)
    }
    fn send_lid(&mut self, dlid: u16, mad: &[u8; MAD_SIZE]) -> Result<(), TransportError> {
        (**self).send_lid(dlid, mad)
    }
    fn recv(&mut self, timeout: Duration) -> Result<Option<[u8; MAD_SIZE]>, TransportError> {
        (**self).recv(timeout)
    }
}
