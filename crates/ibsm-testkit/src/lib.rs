//! ibsm-testkit: verification harnesses for the SM election of `ibsm-core`. Dev-only.
//!
//! Two tools share one [`World`]: N [`Election`](ibsm_core::election::Election) state
//! machines wired to a message bus (SM i has LID i+1; an SMP to `SmRoute::Lid(l)`
//! reaches SM l-1). The world checks safety invariants after every step (from the
//! events each SM emits): NOTACTIVE is left only on a STANDBY control packet, only the
//! IBA transitions happen, and the state the events announce is the state the SM reports.
//!
//! * [`model`]: an exhaustive explorer (DFS with state hashing, bounded depth) over every
//!   interleaving of deliveries (so reordering and arbitrary delay), drops, timer firings,
//!   crashes and restarts. From every state it reaches it runs a deterministic, loss-free
//!   "settle" continuation for a bounded virtual time and checks that exactly one live SM
//!   is MASTER and that it is the highest-ranked live SM (non-sticky). It returns the
//!   action trace of the first counterexample. Its self-test injects a tie-breaking bug
//!   and asserts a counterexample is found, so a green run means something.
//! * [`sim`]: a seeded random simulation (loss, latency, crash/restart) with the same
//!   invariants; a failure names its seed so `IBSM_SEED=<seed>` replays it exactly.
//!
//! Why our own explorer rather than `stateright`: the election is already a
//! deterministic `Clone + Hash` value, so a search over it is ~200 lines with no extra
//! dependency to compile in CI, and the settle check is domain-specific anyway.
//! The bus abstracts the fabric.
//!
//! * [`fabric_sim`]: the same question on the real thing: 2-4 SMs, each the election plus
//!   the subnet manager with the daemon's SMP routing, on `ibsm-sim`'s embedded fat tree,
//!   with seeded SM crashes, loss bursts, latency changes and pulled cables; it checks
//!   bounded dual mastership, convergence to the best SM, MasterSMLID and LID stability
//!   after every step. `IBSM_SEED=<n> cargo test -p ibsm-testkit fabric_sim` replays a seed.
//! * [`raft_sim`]: the replicated state under the SMs: three real openraft instances of
//!   `ibsm-replica` (its redb store and state machine) over an in-process network with a
//!   per-message fault hook ([`raft_sim_net`]), on a paused tokio clock, driven by one
//!   seed (partitions, loss, latency, crash/restart from the data dir, SM failovers with
//!   deposed masters that keep writing). It checks after every step that acked writes
//!   survive, epochs only rise and fence stale masters, LIDs never change, and that the
//!   replicas converge once the faults stop. `IBSM_SEED=<n> cargo test -p ibsm-testkit
//!   raft_sim` replays a seed (same faults and decisions; openraft's internal `select!`
//!   order is not seedable, see the module doc).

pub mod fabric_sim;
pub mod model;
pub mod raft_sim;
pub mod raft_sim_net;
pub mod rng;
pub mod seeds;
pub mod sim;
mod sim_driver;
pub mod world;

pub use world::{SmSpec, World};
