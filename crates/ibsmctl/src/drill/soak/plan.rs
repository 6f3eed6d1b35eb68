//! What a soak does, cycle by cycle: the six actions and the plan that orders them,
//! each block of six a permutation drawn from a seeded RNG, so the same seed
//! replays the same run.

/// The six actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Action {
    KillMaster,
    KillStandby,
    RaftIsolation,
    SmpLoss,
    LinkFlap,
    PlannedHandover,
}

pub const ACTIONS: [Action; 6] = [
    Action::KillMaster,
    Action::KillStandby,
    Action::RaftIsolation,
    Action::SmpLoss,
    Action::LinkFlap,
    Action::PlannedHandover,
];

impl Action {
    pub fn name(self) -> &'static str {
        match self {
            Action::KillMaster => "kill-master",
            Action::KillStandby => "kill-standby",
            Action::RaftIsolation => "raft-isolation",
            Action::SmpLoss => "smp-loss",
            Action::LinkFlap => "link-flap",
            Action::PlannedHandover => "planned-handover",
        }
    }

    /// Whether the action moves mastership (and a failover time is measured).
    pub fn moves_master(self) -> bool {
        matches!(self, Action::KillMaster | Action::PlannedHandover)
    }
}

/// The fabric generator's SplitMix64 (seeded, the same sequence on every machine),
/// with the soak's own `below`, so a seed replays the plans it always did.
#[derive(Debug, Clone)]
pub struct Rng(ibsm_fabric::gen::SplitMix64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(ibsm_fabric::gen::SplitMix64::new(seed))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// 0..n (0 when n is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        usize::try_from(self.next_u64() % u64::try_from(n).unwrap_or(u64::MAX)).unwrap_or(0)
    }
}

/// The actions of `cycles` cycles: each block of six a permutation of [`ACTIONS`].
pub fn plan(rng: &mut Rng, cycles: u32) -> Vec<Action> {
    let mut out = Vec::new();
    while out.len() < usize::try_from(cycles).unwrap_or(0) {
        let mut block = ACTIONS.to_vec();
        for i in (1..block.len()).rev() {
            block.swap(i, rng.below(i + 1));
        }
        out.extend(block);
    }
    out.truncate(usize::try_from(cycles).unwrap_or(0));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_runs_each_action_once_per_block_and_replays_from_its_seed() {
        let a = plan(&mut Rng::new(7), 6);
        let mut sorted = a.clone();
        sorted.sort();
        assert_eq!(sorted, ACTIONS.to_vec());
        assert_eq!(a, plan(&mut Rng::new(7), 6));
        let long = plan(&mut Rng::new(7), 100);
        assert_eq!(long.len(), 100);
        assert_eq!(long.get(..6), Some(a.as_slice()));
        for a in ACTIONS {
            let n = long.iter().filter(|x| **x == a).count();
            assert!((16..=17).contains(&n), "{a:?} {n}");
        }
        assert_ne!(plan(&mut Rng::new(8), 100), long);
        assert_eq!(Rng::new(1).below(0), 0);
    }
}
