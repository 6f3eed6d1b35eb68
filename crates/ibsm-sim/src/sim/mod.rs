//! The public simulator: clients, `send`, routing, the delivery queue and faults.
//!
//! The files: `types` (what callers see: [`SimConfig`], [`ClientId`], [`Delivery`],
//! [`SimStats`]), `simulator` ([`Sim`] itself: what it holds, building it, reading its
//! state, the lookups the other files share), `clients` (attach, detach, IsSM, who
//! takes a MAD at a port), `send` (what a client may send, and sending it), `route`
//! (directed-route forwarding and LID routing through the programmed LFTs),
//! `deliver` (a MAD reaching its destination port: the SMA or a client, and the
//! delivery queue), `gmp` (General Services MADs between clients on QP1) and `faults`
//! (links, nodes, loss, latency), and `bringup` (test support: the fabric as a master
//! leaves it, without one). All but `types` are
//! `impl Sim` blocks over the `pub(super)` fields `simulator` declares.

mod bringup;
mod clients;
mod deliver;
mod faults;
mod gmp;
mod route;
mod send;
mod simulator;
mod types;

pub use bringup::BringUp;
pub use simulator::Sim;
pub use types::{ClientId, Delivery, SimConfig, SimStats};
