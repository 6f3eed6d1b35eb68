//! ibsm-core: the sans-IO subnet manager.
//!
//! Everything here is a state machine that reads no clock and does no I/O:
//! time comes in as a `Duration` since the driver's epoch, MADs come in as
//! bytes and go out through `poll_transmit()`. That is what lets the same code
//! run against the embedded simulator in virtual time (tests, benchmarks, the
//! model checker), the embedded simulator in real time, and a real umad port
//! (`ibsm-transport` holds the blocking drivers).
//!
//! * [`transactions`]: the MAD agent. TIDs, a bounded window of SMPs in flight,
//!   per-request timeout and retries, response matching, unsolicited requests
//!   (another SM's SMInfo, traps) surfaced as events, and the M_Key on every SMP
//!   (a retry tries the next candidate key: a failed M_Key check is a silent drop).
//! * [`discovery`]: a directed-route breadth-first walk of the fabric that
//!   produces an `ibsm_fabric::Topology` plus the DR path of every node. It
//!   emits requests and consumes outcomes; the MAD agent sits between it and
//!   the wire, so many SMPs are in flight at once.
//!
//! * [`node`]: one whole SM instance on one port (election, standby sweeps, the
//!   MASTER's configurator, start-up, the watch of its link) behind one
//!   input/output contract, driven alike by the daemon and the simulations.
//!
//! Layers talk through tokens, not callbacks: the discovery hands the agent a
//! token with every request and gets it back with the response or failure.
//! That keeps ownership simple (no shared mutable state) and makes every step
//! replayable in a test.

pub mod discovery;
pub mod election;
pub mod node;
pub mod sa;
pub mod subnet;
pub mod transactions;
