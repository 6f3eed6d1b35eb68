//! One SM instance: a dedicated OS thread that drives an [`ibsm_core::node::Node`]
//! (the whole SM, sans-IO) with a [`MadDevice`](ibsm_transport::MadDevice). This file holds no SM policy: it
//! reads the device with a timeout and feeds the node, writes what the node emits,
//! runs the node's routing and SA snapshot jobs on a worker thread, hands it the replicated state when
//! the local replica applied something new, and turns its outputs into the status
//! snapshot, `Watch` events, metrics, command replies and replication writes.
//!
//! Why a plain thread and not tokio: umad2sim hands out fake descriptors that epoll
//! cannot watch, and the embedded simulator's device blocks on a condvar; both are
//! driven by `recv(timeout)`. The thread wakes at least every `MAX_WAIT` to read its
//! command channel, so commands are served within that time. It reads ahead: after
//! each MAD it handles it reads what the device holds, answers a SubnAdmGet of a
//! fabric record (PathRecord, NodeRecord, ...) at once from the SA snapshot
//! ([`ibsm_core::sa::SaReader`], while MASTER) and queues the rest in order, so an SA
//! query never waits behind a batch of SMP answers read before it.
//!
//! Routing is the one long computation (~1.6 s for 48k LIDs): it runs on a second
//! thread per instance (`RoutingWorker`), so this thread keeps answering SMInfo polls
//! meanwhile. Computed inline, a new master stayed silent for the whole computation:
//! its standbys' polls and discovery queries went unanswered and one of them took
//! MASTER beside it (seen in CI on ibsim).
//!
//! # Send errors and alarms
//!
//! Every MAD goes out through `device_send`: a device that refuses one (a full send
//! queue, a port going down under umad) costs that MAD only. It is counted
//! ([`Snapshot::send_errors`], `ibsm_mad_send_errors_total`), logged sampled, and its
//! sender's own timeout and retry take over; the thread never ends on it, because a
//! master that stops answering SMInfo is taken for dead by its standbys. What the
//! master's heavy sweep finds that an operator must resolve (duplicate GUIDs, the
//! topology cap) becomes [`Snapshot::alarms`] (GetStatus `alarms`), `alarm` records
//! on `Watch` and the `ibsm_duplicate_guids`/`ibsm_topology_capped` gauges; the list
//! is replaced by every heavy sweep, so it clears once the cause is gone.
//!
//! # Replication
//!
//! With replication the node gets the replicated state ([`ibsm_core::node::ReplicatedFabric`]) every
//! time the local replica's applied index moves (checked before each batch of
//! inputs, so a HANDOVER that arrives right after its replica caught up sees what it
//! caught up to); its mastership claims go to [`crate::replication::Replication`],
//! and after each heavy sweep as MASTER ([`Output::Publish`](ibsm_core::node::Output::Publish)) the driver publishes
//! what the configurator holds ([`crate::replication::record_of`]) and the
//! [`crate::fabric_view::FabricView`] that `ibsm.v1.Fabric` serves.

mod api;
mod driver;
mod handle;

pub use api::{
    Command, CommandError, EventRecord, InstanceConfig, SaReplica, SettingsView, Snapshot,
};
pub use handle::Instance;
pub use ibsm_core::node::PeerView;
pub use ibsm_core::node::{handover_candidate, DEFAULT_MASTER_HEAVY_SWEEP_INTERVAL};
