//! The one error type of this crate.

use ibsm_fabric::NodeIdx;

use crate::ClientId;

/// Why the simulator refused a call. Only *caller* mistakes are errors: a MAD that
/// is well formed but cannot be delivered (link down, unprogrammed LFT, loss, no SM
/// at the target) is silently dropped, exactly as a fabric would, and shows up as a
/// timeout plus a counter in [`crate::SimStats`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    /// The node index is not in the topology the simulator was built from.
    #[error("node {0} is not part of this simulated fabric")]
    UnknownNode(NodeIdx),
    /// The node has no such port.
    #[error("node {node} has no port {port} (NumPorts {num_ports})")]
    NoSuchPort {
        /// The node.
        node: NodeIdx,
        /// The port number asked for.
        port: u8,
        /// NodeInfo.NumPorts of the node.
        num_ports: u8,
    },
    /// Clients (umad endpoints) live on CA or router ports 1..=NumPorts.
    #[error("node {node} port {port}: an SM client attaches to a CA/router port 1..=NumPorts, not to a switch")]
    NotCaPort {
        /// The node.
        node: NodeIdx,
        /// The port number asked for.
        port: u8,
    },
    /// The node was removed with `remove_node`.
    #[error("node {0} has been removed from the fabric")]
    NodeRemoved(NodeIdx),
    /// The client id was never handed out, or the client detached.
    #[error("client {0} is unknown or detached")]
    UnknownClient(ClientId),
    /// `send` got something other than one 256-byte MAD.
    #[error("MAD is {got} bytes long; a MAD is exactly 256 bytes")]
    BadLength {
        /// Bytes given.
        got: usize,
    },
    /// The common MAD header is not that of a subnet management packet.
    #[error("MAD header: {field} = {value:#x}: {why}")]
    BadHeader {
        /// Header field (IBA name).
        field: &'static str,
        /// Its value.
        value: u32,
        /// Why it is refused.
        why: &'static str,
    },
    /// A directed-route SMP breaks the IBA 14.2.2 rules for what an originator may send.
    #[error("directed-route SMP: {field} = {value:#x}: {why}")]
    BadDirectedRoute {
        /// DR field (IBA name: HopPointer, HopCount, DrSLID, `InitialPath[1]`, D...).
        field: &'static str,
        /// Its value.
        value: u32,
        /// Why it is refused.
        why: &'static str,
    },
    /// Something IBA allows that this simulator does not model (yet).
    #[error("not supported by the simulator: {0}")]
    Unsupported(&'static str),
    /// `set_loss` got a rate outside 0.0..=1.0 (or NaN).
    #[error("loss rate {0} is not within 0.0..=1.0")]
    BadLossRate(f64),
    /// [`Sim::register_gsi_class`](crate::Sim::register_gsi_class) for a class another
    /// client of the same port holds (a kernel refuses the second umad agent too).
    #[error("GMP class {class:#04x} is already registered by {holder} on that port")]
    ClassInUse {
        /// The management class.
        class: u8,
        /// The client holding it.
        holder: ClientId,
    },
    /// A GMP call was given a subnet management class (0x01, 0x81): SMPs go through
    /// `send`/`send_to` and need no registration.
    #[error("class {0:#04x} is subnet management (QP0), not a GMP class")]
    NotGmpClass(u8),
    /// A GMP's destination address cannot be sent to.
    #[error("GMP address: {field} = {value:#x}: {why}")]
    BadAddress {
        /// Field of the [`ibsm_mad::MadAddress`].
        field: &'static str,
        /// Its value.
        value: u32,
        /// Why it is refused.
        why: &'static str,
    },
    /// More than `u32::MAX` clients were attached over the life of the simulator.
    #[error("client ids exhausted")]
    TooManyClients,
}
