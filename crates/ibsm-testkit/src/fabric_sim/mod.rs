//! A deterministic multi-SM simulation on the embedded fabric (`ibsm-sim`), replayable
//! from a seed.
//!
//! N SMs ([`SmNode`]: the shipped `ibsm_core::node::Node`, driven as the daemon does) are
//! attached at HCAs under different leaf switches of a generated 2-level fat tree. One
//! event loop advances virtual time to the next thing due (a delivery, a timer of any
//! SM, a fault) and steps the simulator and the SMs; nothing reads a clock and nothing
//! iterates a hash map, so a seed determines the run bit for bit.
//!
//! # Run shape
//!
//! 1. **Warm-up** (no faults) until one master has brought the subnet up and every end
//!    port has a LID: the LID invariant below is about *keeping* LIDs, so the first
//!    assignment must happen on a quiet fabric.
//! 2. **Faulty phase** (`faulty_for`): at seeded gaps, one of: SM crash (client
//!    detached, IsSM cleared, state dropped) or restart (re-attached, IsSM set, fresh
//!    state), a MAD loss burst (`Sim::set_loss` for a while), a latency change, a
//!    cable pulled and plugged back later (any cable, SM HCAs' included).
//! 3. **Quiet phase** (`quiet_for`): every cable back, no loss, base latency, and
//!    crashed SMs restarted or not (seeded). Then the end checks.
//!
//! # Invariants, checked after every step
//!
//! * **Bounded dual mastership**: two SMs in MASTER that can reach each other (same
//!   connected component of live cables) must not stay so for longer than
//!   `handover_window`, counted from when the fabric last let them talk (they both became
//!   master and connected, and no loss burst since). Partitions legitimately have one
//!   master each, so they are not counted; total dual-master time is reported.
//! * **Convergence**: from `converge_within` after the quiet phase starts to the end,
//!   exactly one live SM is MASTER and it is the highest-ranked live SM (priority, then
//!   lower port GUID).
//! * **MasterSMLID**: after every heavy sweep of a sole master that ran with no fault
//!   injected and no SMP failure, every Active port in its component (CA ports, switch
//!   port 0) has MasterSMLID = the master's LID; and at the end, after the master's
//!   first clean sweep since convergence.
//! * **LIDs are kept**: once an end port (CA port, switch port 0) has a LID, it never
//!   changes to another non-zero LID, across failovers and partitions.
//! * **No harness bug**: every SMP an SM builds is accepted by the simulator; no livelock.
//!
//! A failure is a [`Failure`] whose `Display` ends with
//! `IBSM_SEED=<n> cargo test -p ibsm-testkit fabric_sim`, which replays it exactly.
//!
//! # Files
//!
//! `config.rs` holds the knobs, `report.rs` what a run returns, `world.rs` the simulated
//! fabric and its SMs, `invariants.rs` the checks above, `faults.rs` the seeded fault
//! schedule and `run.rs` the phases and the event loop; each builds only on the ones
//! before it.

mod config;
mod faults;
mod invariants;
mod report;
mod run;
mod world;

pub use crate::seeds::seeds;
pub use crate::sim_driver::{NodeNote, NodeTimers, SmNode};
pub use config::FabricSimConfig;
pub use report::{FabricSimOutcome, Failure};
pub use run::run;
