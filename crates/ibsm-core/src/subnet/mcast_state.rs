//! The multicast state the configurator keeps (see `mcast` for what it does with it):
//! a file of its own so `manager` can hold it without importing `mcast`, which
//! imports `manager`.

use std::collections::{BTreeMap, BTreeSet, HashSet, VecDeque};
use std::time::Duration;

use ibsm_fabric::multicast::{McastFabric, McastMember, MftSet, MftWrite};

/// Multicast state of the configurator.
#[derive(Debug, Default)]
pub(super) struct Mcast {
    /// MLID -> members, as the SA last set them.
    pub(super) groups: BTreeMap<u16, Vec<McastMember>>,
    /// Switch distances of the topology of heavy sweep `fabric_sweep`.
    pub(super) fabric: Option<McastFabric>,
    pub(super) fabric_sweep: u64,
    /// What the switches should hold.
    pub(super) desired: MftSet,
    /// What our writes left on them.
    pub(super) programmed: MftSet,
    /// Switches whose MFT is not known to hold `programmed`.
    pub(super) unknown: HashSet<u64>,
    /// Switches written at least once in this mastership.
    pub(super) known: HashSet<u64>,
    /// MLIDs to recompute.
    pub(super) dirty: BTreeSet<u16>,
    /// When the marked MLIDs are recomputed: a join or leave waits for the hold-off
    /// (see `mcast`), a sweep or a new mastership is due at once (`Duration::ZERO`).
    pub(super) due: Option<Duration>,
    /// Writes to send.
    pub(super) queue: VecDeque<MftWrite>,
    /// Writes sent, and those a switch refused or never answered.
    pub(super) writes: u64,
    pub(super) failures: u64,
}

impl Mcast {
    /// A new mastership: nothing is known about the switches.
    pub(super) fn reset_knowledge(&mut self) {
        self.programmed = MftSet::new();
        self.known.clear();
        self.unknown.clear();
        self.queue.clear();
        self.fabric = None;
        self.dirty.extend(self.groups.keys().copied());
        self.due = Some(Duration::ZERO);
    }
}
