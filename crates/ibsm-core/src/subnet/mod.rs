//! The master SM's subnet configurator: heavy and light sweeps, traps, and the
//! programming of every switch and end port. Sans-IO, driven like
//! [`crate::transactions::Transactions`].
//!
//! The daemon creates a [`SubnetManager`] and calls [`SubnetManager::become_master`]
//! when its election says MASTER (that sweep also sets PortInfo.ClientReregister
//! so end nodes re-register with the new SA), [`SubnetManager::stop`] when it stops
//! being master. It feeds every received MAD to [`SubnetManager::handle_incoming`],
//! calls [`SubnetManager::handle_timeout`] when [`SubnetManager::poll_timeout`]
//! passes, sends what [`SubnetManager::poll_transmit`] gives (directed route, or
//! LID-routed to `dlid` for TrapRepress) and acts on [`SubnetEvent`]s.
//!
//! # A heavy sweep
//!
//! 1. **Discovery**: [`crate::discovery::Discovery`] (NodeInfo, NodeDescription,
//!    SwitchInfo, PortInfo of every port) through the shared MAD agent, many SMPs
//!    in flight. A node that stops answering is retried by the agent, then left out.
//! 2. **LIDs**: [`ibsm_fabric::lid::LidManager`] (keeps LIDs by port GUID across sweeps;
//!    [`SubnetManager::import_guid2lid`] seeds it, e.g. from the replicated state).
//! 3. **Routing**: [`ibsm_fabric::routing::min_hop`] (default) or
//!    [`ibsm_fabric::routing::up_down`] ([`SubnetConfig::routing`]) -> LFT per switch;
//!    or the tables the switches already hold when nothing routing depends on
//!    changed (same cabling, no LID moved), so routes never move on a stable
//!    fabric. A new master handed [`Inherited`] state reads every LFT back first
//!    and adopts it when it matches the replicated digests (the `inherit` module).
//! 4. **Distribution**, all by directed route (it works before any LFT exists):
//!    SwitchInfo (LinearFDBTop, LifeTimeValue, clears PortStateChange), the LFT
//!    blocks that differ from what the previous sweep programmed, PortInfo (LID,
//!    LMC, MasterSMLID/SL, SubnetTimeOut, NeighborMTU, OperationalVLs) only where
//!    the port reads differently, P_Key tables, SLtoVL and VLArbitration defaults
//!    (only once per port while its state is remembered). Nodes are planned one
//!    after another, but their SMPs share one window: no node waits for another
//!    node's answers.
//! 5. **Activation** (the `activation` module), pipelined with distribution:
//!    once both end nodes of a link are programmed, its ports in Init go Armed,
//!    and once both Arm Sets are answered, its ports go Active (a port goes
//!    Active only across an Armed or Active neighbour). Ready port state Sets go
//!    before further distribution SMPs, so the window stays full to the last SMP
//!    and only the links of the last nodes programmed are activated after
//!    distribution ends. [`PhaseSmps`] counts the SMPs of each phase and how
//!    full the window was kept.
//!
//! LIDs and routing are computed inside one call; to time them without a clock
//! the core finishes each compute phase by asking to be called back at once
//! ([`SubnetManager::poll_timeout`] returns the current time), and the phase's
//! duration is the time between the two calls. With a real-clock driver that is
//! the CPU time spent; in virtual time it is 0.
//!
//! A programming SMP that goes unanswered after the agent's retries marks its
//! node dead for the rest of the sweep (its other SMPs are skipped), so one
//! dead switch costs one timeout chain, not one per SMP.
//!
//! # Light sweep (every `sweep_interval`)
//!
//! SubnGet(SwitchInfo) of every switch (PortStateChange), PortInfo of the SM's
//! own port and of the known SM ports. Anything changed or unanswered -> heavy sweep.
//! Also on demand: [`SubnetManager::start_light_sweep`]. "Changed" for a port
//! read: PortState other than what the last heavy sweep left (Active for a link
//! port it activated), a LID other than the assigned one, a MasterSMLID other
//! than ours (another SM configured it), or, for a known SM port,
//! CapabilityMask.IsSM gone (that SM stopped). A *new* SM port is not looked for
//! here: its trap 144 (IsSM set) or the periodic heavy sweep finds it.
//!
//! Activation does not make the next light sweep heavy: the heavy sweep's
//! SwitchInfo Set clears PortStateChange (write 1) before programming, and port
//! state changes made by SubnSet do not raise it again (IBA 14.2.5.4; ibsim and
//! `ibsm-sim` both behave so, checked on ibsim with `smpquery switchinfo` after
//! subnet up). So neither a second clear after activation nor "ignore what we
//! caused" is needed, and both would cost something: a clear after activation
//! would hide a real link change between the last Set and the clear, and
//! ignoring changes on switches we touched would hide one for a whole sweep
//! interval. What made the first light sweep after subnet up heavy-sweep was the
//! SM's own port read Active against the Init its discovery saw; that port is
//! expected Active now. Test: `light_sweep_right_after_subnet_up_starts_no_heavy_sweep`.
//!
//! A new master that already holds a fresh discovery of the fabric (the daemon's
//! own, from while it was DISCOVERING) hands it to
//! [`SubnetManager::become_master_with_discovery`], so start-up discovers once.
//!
//! # Traps
//!
//! Every SubnTrap(Notice) is answered with SubnTrapRepress, whatever it says, so
//! the sender stops repeating it: a directed-route trap along its return path, a
//! LID-routed one to the LRH SLID it arrived from (the trap's real source, given
//! with [`SubnetManager::handle_incoming_from`]), not to the notice's IssuerLID,
//! which the sender fills in and may get wrong (a port that lost its LID, a
//! forged notice: a repress sent there reaches an innocent port, or nobody, and
//! the real source keeps repeating). Without a known SLID the IssuerLID is used.
//!
//! Storms ([`storm`]): traps are rate-limited per source LID (token bucket,
//! [`SubnetConfig::trap_rate`] / [`SubnetConfig::trap_burst`]). A trap over the
//! rate is still repressed (an unrepressed trap is repeated by its sender, which
//! only feeds the storm) and counted ([`SubnetMetrics::traps_rate_limited`]); it is
//! not logged and raises no event, but a sweep-worthy one still requests the
//! (coalesced, held-down) heavy sweep, so no change is lost. Per-trap log lines
//! are sampled: a few per [`TRAP_LOG_WINDOW`], then one line with the count held
//! back. A trap-triggered heavy sweep starts no sooner than
//! [`SubnetConfig::trap_sweep_hold_down`] after the previous heavy sweep ended:
//! the request is kept and the sweep deferred ([`SubnetMetrics::trap_sweeps_deferred`]),
//! so a port flapping every few milliseconds costs one sweep per hold-down, not
//! back-to-back sweeps; an operator's, a partition change's or a light sweep's
//! request is not held down (it replaces a held trap request).
//!
//! Then, as OpenSM's trap receiver does:
//! * 128 (link state change), 145 (SystemImageGUID changed): a heavy sweep.
//! * 144 (capability mask / local changes): reported ([`SubnetEvent::Trap144`])
//!   for the election, and a heavy sweep, whose [`SweepReport::sm_ports`] is the
//!   refreshed list of SM ports (IsSM set or cleared) the daemon hands to
//!   `Election::handle_sweep`; it also rereads a changed NodeDescription.
//! * 129/130/131 (link integrity, buffer overrun, flow-control watchdog on a
//!   port): counted per (LID, port, trap) ([`SubnetMetrics::port_error_traps`])
//!   and logged at warn on the 1st, 10th, 100th... within
//!   [`PORT_ERROR_WINDOW`]; no sweep: they say a link is noisy, not that the
//!   topology changed (a link that actually drops raises 128/PortStateChange).
//! * 64-67 (GID in/out of service, multicast group created/deleted) are the
//!   SA's own notices to its subscribers; one arriving from a port is logged and
//!   dropped, never forwarded. This module *produces* 64/65
//!   ([`SubnetEvent::Notice`]) after a sweep that found end ports appear or
//!   disappear.
//!
//! Heavy sweeps requested by traps coalesce.
//!
//! # Repair
//!
//! A heavy sweep whose topology only lost cables or nodes (a trap 128 for a pulled
//! cable, a dead switch) keeps every LFT entry that is still a shortest route and
//! moves only the others, so it writes only the blocks holding an entry that had to
//! move; a sweep that finds cables or nodes back computes balanced routing afresh
//! (after a cable down and up: the original tables, in the same blocks). Min-hop
//! routing only; see the `repair` module for the rule and why it stays loop-free.
//!
//! # Partitions at run time
//!
//! [`SubnetManager::set_partitions`] replaces the configured partitions (the
//! daemon feeds it the replicated ones, so an API change reaches the fabric
//! without a restart and survives a failover). It validates like the start-up
//! configuration and requests a heavy sweep; P_Key tables are sent where the
//! wanted table differs from the one recorded as programmed (the record is
//! per (node, port) and holds the table *content*, so a changed partition set
//! always shows as a difference). A set arriving while a sweep distributes waits
//! for the next sweep's distribution, so the record never holds a table that was
//! not the one sent.
//!
//! # M_Key
//!
//! [`SubnetConfig::m_key`] (OpenSM's `m_key`, `m_key_protection_level`,
//! `m_key_lease_period`) is written into every PortInfo Set (configuration and
//! activation alike), so every CA port and switch port 0 ends up holding it and a
//! rogue SM or tool without it cannot reprogram them (IBA 14.2.4: a port's SMA
//! discards a Set, and from level 2 a Get, that carries another key). The MAD
//! agent puts a key on every SMP it sends, discovery included (see
//! [`crate::transactions`]): how the first sweep works on each kind of fabric:
//! * fresh (every M_Key 0): any key passes, the sweep programs ours;
//! * already keyed with ours (a restart, a failover): our key passes;
//! * keyed with another key the replicated state knows
//!   ([`SubnetManager::set_fabric_m_key`], e.g. the operator changed the key, or a
//!   previous master's): at levels 0/1 discovery reads anyway, the Set with our key
//!   goes unanswered and its retry carries the old key, which rekeys the port;
//!   the agent then learns the new key for that route. At level 2 the discovery
//!   Gets take the same one extra timeout per node.
//! * keyed with a key nobody gave us: at level 0 PortInfo shows it and the agent
//!   uses it; otherwise those ports cannot be configured, by design (the lease
//!   period, if the owner set one, eventually lifts the protection).
//!
//! SMInfo is not guarded by the SMA's M_Key check (it is the SM's own attribute;
//! the election applies IBA's SM_Key disclosure rule itself), so standby polls
//! and election traffic keep working whatever the key and level.
//!
//! # Files
//!
//! [`SubnetManager`] and its state are in `manager`; each of `engine`, `traps`,
//! `light`, `heavy` and `repair` (what a sweep after a lost cable keeps of the
//! routes, see "Repair" above) is one `impl SubnetManager` block, `program` plans and
//! encodes the programming SMPs, and `activation` releases port state Sets as
//! links become programmed. The types they share are in leaf files (`events`,
//! `metrics`, `sweep`, `routing_job`, `config`, `inherit`) that they import directly.

mod activation;
mod config;
mod engine;
mod events;
mod heavy;
pub(crate) mod inherit;
pub mod lft_stamp;
mod lft_write;
mod light;
mod manager;
mod mcast;
mod mcast_state;
mod metrics;
pub mod partitions_conf;
mod port_digest;
mod port_group;
mod program;
mod repair;
mod routing_job;
mod sa_snapshot;
mod sa_snapshot_job;
mod standing;
pub mod storm;
mod sweep;
#[cfg(test)]
mod tests;
mod traps;
mod verified;
mod verify;

pub use config::{
    ConfigError, EndPort, EndPortKind, GroupMember, MKeyConfig, Membership, Partition,
    PartitionIpoib, PartitionMember, PortGroup, RoutingEngine, SubnetConfig,
};
pub use events::{
    Outgoing, PhaseSmps, PhaseTimes, SubnetEvent, SweepKind, SweepReason, SweepReport,
};
pub use ibsm_fabric::routing::ForwardingTables;
pub use inherit::{lft_digest, links_of, InheritReport, Inherited, Link, PortDigest, SeedReport};
pub use manager::SubnetManager;
pub use metrics::{SubnetMetrics, PORT_ERROR_WINDOW, TRAP_LOG_LINES, TRAP_LOG_WINDOW};
pub use routing_job::{RoutingDone, RoutingJob};
pub use sa_snapshot_job::{SaSnapshotDone, SaSnapshotJob};
pub use standing::{
    StandingLft, StandingLfts, StandingStats, STANDING_LFT_RECHECK, STANDING_LFT_WINDOW,
};
pub use verify::{unsettled, VerificationReport};
