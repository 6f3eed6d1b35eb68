//! ibsm-transport: the glue between sans-IO cores and real devices.
//!
//! * [`MadDevice`] is the one blocking interface a driver needs: send a MAD,
//!   receive one with a timeout, together with the address it came from
//!   ([`ReceivedMad::from`], an [`ibsm_mad::MadAddress`]). The SLID is not in the 256 MAD
//!   bytes, yet an answer to a LID-routed request (plain `sminfo` reading
//!   PortInfo.MasterSMLID and sending a LID-routed SubnGet(SMInfo) there, a switch's
//!   LID-routed trap) must go back LID-routed to exactly that LID
//!   ([`MadDevice::send_lid`] with [`ReceivedMad::slid`]): a umad port has no other way
//!   to address it. A GMP (the SA's class 0x03 on QP1) needs more: its answer goes to
//!   the requester's LID *and* QP with the GSI Q_Key, SL, P_Key index and GRH, which
//!   is the whole [`ReceivedMad::from`], sent with [`MadDevice::send_gmp`] (also how a
//!   Report reaches a subscriber). Devices that carry SMPs only refuse `send_gmp` (its
//!   default), and receive GMPs only of classes they registered
//!   ([`UmadDevice::open_with_sa`], [`SimDevice::register_gsi_class`]). Two
//!   implementations:
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

mod device;
mod driver;
mod error;
mod sim_device;
mod spec;
mod umad_device;

pub use device::{MadDevice, ReceivedMad};
pub use driver::{run_discovery, DiscoverConfig, DiscoveryReport};
pub use error::{SpecError, TransportError};
pub use sim_device::{SharedSim, SimDevice};
pub use spec::FabricSpec;
pub use umad_device::UmadDevice;
