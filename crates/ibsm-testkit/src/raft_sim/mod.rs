//! Seeded simulation of three SMs and their Raft replicas (`ibsm-replica`) under faults,
//! with the replication invariants checked after every step.
//!
//! # What runs
//!
//! Three real `openraft::Raft` instances with the crate's own redb log store and state
//! machine (`ibsm_replica::store`, one data dir each on tmpfs), talking over
//! [`crate::raft_sim_net`] (in-process calls, a fault hook per message), on a tokio
//! current-thread runtime with a paused clock: timers, latency and timeouts are virtual,
//! so 10+ s of cluster life costs a fraction of a second. `Replica` itself is not used:
//! its write retry loop measures its deadline with `std::time::Instant`, which does not
//! advance under a paused clock; the harness's [`sim_write`] does what it does
//! (follower -> leader forwarding, retry on "not leader" until a 1 s write timeout, the
//! daemon's `WRITE_TIMEOUT`) on tokio's clock.
//!
//! The SM election is abstract: one seed drives who the election makes MASTER (a
//! failover picks another live SM; the old master is told to step down only half the
//! time, so a deposed master that still believes it is MASTER keeps writing with its old
//! epoch, as after a partition). Each SM does what `ibsmd::replication` does: a new
//! master claims `local epoch + 1`; once its own replica has applied the claim it seeds
//! its record from the replica's guid2lid and from then on writes `Command::Update
//! { epoch, ops }` with the difference between its record and the replica (new ports get
//! the next free LID, an assigned LID is never changed); a `StaleEpoch` refusal deposes
//! it. Non-masters write `Command::Config` now and then (any instance may).
//!
//! Faults, from the same seed: a node isolated, one directed link cut, all healed,
//! message loss (0-30 %), latency (up to 120 ms one way), a node crashed (its `Raft`
//! shut down and dropped; its SM dies with it) and restarted from its redb data dir.
//!
//! # Invariants (checked after every step, and on every acknowledged write)
//!
//! * an acknowledged write (the write returned `Ok`) is in every replica's state once
//!   that replica has applied past its log index, including after crash/restart;
//! * the epoch in each replica's state machine never decreases;
//! * at most one SM holds an epoch: two acknowledged claims never carry the same epoch,
//!   and an acknowledged `Update` carries the epoch its own SM claimed;
//! * a stale write is refused: no acknowledged `Update{e}` sits in the log after an
//!   acknowledged claim of an epoch > e; claims are ordered in the log by epoch;
//! * the state's `master_guid` is the SM whose claim of the state's epoch was acked;
//! * a port GUID's LID never changes once any replica has it, and no LID is shared;
//! * after the faults stop (links healed, loss 0, every node restarted), all replicas
//!   converge to the same state, containing every acked write and every port of the
//!   fabric, within [`RaftSimConfig::converge_within`] of virtual time.
//!
//! # Determinism
//!
//! The fault schedule, the SM decisions and every message's fate (loss, latency) come
//! from the seed; each node's election timeout is a seed-chosen fixed value (a 1 ms
//! window, because openraft draws it from `rand::thread_rng`, which cannot be seeded);
//! the clock is virtual and the runtime has one thread. openraft's core loop selects
//! `biased`, so the one runtime-seeded choice left is the unbiased `select!` of its
//! replication backoff (backoff timer vs. a new event firing at the same virtual
//! instant). In practice two runs of a seed give identical traces (step lines with
//! every node's role, term, applied/snapshot index and epoch, every write's log index
//! and outcome) and identical message counts: 30 of 30 seeds measured, and
//! `raft_sim_replay_of_a_seed` asserts it.
//!
//! # Planted bugs ([`Plant`])
//!
//! So that a green run means something, the checker is tested against harness bugs:
//! a deposed master that stamps its writes with the newest epoch it sees instead of its
//! own (fencing bypassed), a master that rewrites guid2lid whole and forgets an acked
//! port, and one that renumbers an assigned port.
//!
//! # Files
//!
//! `config.rs` holds the knobs and the cluster's fixed ids, `report.rs` what a run returns,
//! `checker.rs` the invariants above (on acknowledged commands and replica states alone),
//! `cluster.rs` the simulated nodes, network and SMs, `sms.rs` what the SMs write and
//! how they fail over, and `run.rs` the fault schedule, the quiet phase and the step
//! loop; each builds only on the ones before it.

mod checker;
mod cluster;
mod config;
mod report;
mod run;
mod sms;

pub use crate::seeds::seeds;
pub use config::{Plant, RaftSimConfig, NODES};
pub use report::{RaftSimFailure, RaftSimOutcome, Violation};
pub use run::run;
pub use sms::sim_write;
