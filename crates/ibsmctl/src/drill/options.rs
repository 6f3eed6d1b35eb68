//! What a drill is asked to do and how it ends: the scenario, the options
//! `ibsmctl drill` was given (with the combinations refused before anything starts)
//! and why a drill stopped, with its exit code.
//!
//! A leaf of the `drill` module: every other drill file may use these types; this
//! one uses none of theirs.

use std::path::PathBuf;
use std::time::Duration;

use crate::control::CtlError;

/// Exit code of a drill whose invariants broke.
pub const EXIT_INVARIANT: u8 = 5;

/// The scenarios.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// Abrupt stop of the MASTER (Demo/KillInstance), then restart it.
    KillMaster,
    /// Handover RPC from the MASTER to the best standby.
    PlannedHandover,
    /// Pull the cable of the MASTER's port (Demo/SetLinkState), then plug it back.
    MasterPortDown,
    /// Cut the MASTER's Raft traffic (Demo/SetRaftIsolation), then heal it: the master
    /// must stay MASTER, report degraded, and converge after the heal.
    RaftPartition,
    /// Raise the lowest standby to priority 15, then give it its priority back.
    PriorityFlap,
    /// On ibsim only: a seeded mix of master kill, standby kill, Raft isolation, 5 %
    /// SMP loss on a cable, a link flap and a planned handover, with LIDs and LFTs read
    /// back from the fabric (ibnetdiscover, ibroute) and every replica checked after
    /// each cycle (see the `soak` module).
    Soak,
}

impl Scenario {
    pub(super) fn name(self) -> &'static str {
        match self {
            Scenario::KillMaster => "kill-master",
            Scenario::PlannedHandover => "planned-handover",
            Scenario::MasterPortDown => "master-port-down",
            Scenario::RaftPartition => "raft-partition",
            Scenario::PriorityFlap => "priority-flap",
            Scenario::Soak => "soak",
        }
    }
}

/// Options of a drill.
#[derive(Debug, Clone)]
pub struct DrillArgs {
    pub scenario: Scenario,
    pub cycles: u32,
    pub start_demo: bool,
    pub ibsmd: Option<PathBuf>,
    pub report_dir: PathBuf,
    pub dual_master_bound_ms: u64,
    /// `--fabric` for the demo `--start-demo` starts (`None`: its default, embedded).
    pub fabric: Option<String>,
    /// soak: the RNG seed (`None`: from the clock; the report prints it).
    pub seed: Option<u64>,
    /// Stop starting cycles after this long (the report says so); `None`: no bound.
    pub deadline: Option<Duration>,
}

/// The `--fabric` prefix of the demo on ibsim.
pub const IBSIM_PREFIX: &str = "ibsim:";

impl DrillArgs {
    /// Whether the demo this drill starts runs on ibsim.
    pub fn on_ibsim(&self) -> bool {
        self.fabric
            .as_deref()
            .is_some_and(|f| f.starts_with(IBSIM_PREFIX))
    }

    /// Refuse combinations that cannot work, before anything starts.
    pub fn check(&self) -> Result<(), DrillError> {
        if self.fabric.is_some() && !self.start_demo {
            return Err(DrillError::Setup(
                "--fabric is for the demo --start-demo starts; without --start-demo, \
                 --endpoint names the demo (for a demo on ibsim: its Demo service endpoint)"
                    .into(),
            ));
        }
        if self.scenario == Scenario::Soak && self.start_demo && !self.on_ibsim() {
            return Err(DrillError::Setup(
                "soak runs on the demo on ibsim only (it reads LIDs and LFTs back with \
                 ibnetdiscover/ibroute and faults cables through ibsim): give --fabric \
                 ibsim:NETFILE"
                    .into(),
            ));
        }
        Ok(())
    }
}

/// Why a drill stopped (exit code per [`DrillError::exit_code`]).
#[derive(Debug, thiserror::Error)]
pub enum DrillError {
    #[error(transparent)]
    Ctl(#[from] CtlError),
    #[error("{0}")]
    Setup(String),
    #[error("drill invariants broken: {0}")]
    Invariant(String),
}

impl DrillError {
    pub fn exit_code(&self) -> u8 {
        match self {
            DrillError::Ctl(e) => e.exit_code(),
            DrillError::Setup(_) => 1,
            DrillError::Invariant(_) => EXIT_INVARIANT,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn soak_off_ibsim_and_a_fabric_without_start_demo_are_refused_up_front() {
        let mut args = DrillArgs {
            scenario: Scenario::RaftPartition,
            cycles: 1,
            start_demo: true,
            ibsmd: None,
            report_dir: PathBuf::from("x"),
            dual_master_bound_ms: 0,
            fabric: Some("ibsim:/n".into()),
            seed: None,
            deadline: None,
        };
        assert!(args.on_ibsim());
        // raft-partition runs on ibsim too now (--fault-injection on the members).
        assert!(args.check().is_ok());
        args.scenario = Scenario::Soak;
        assert!(args.check().is_ok());
        args.start_demo = false;
        assert!(args.check().is_err());
        args.fabric = Some("gen:fat-tree:4".into());
        args.start_demo = true;
        assert!(!args.on_ibsim());
        let e = args
            .check()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("ibsim only"), "{e}");
        args.scenario = Scenario::RaftPartition;
        assert!(args.check().is_ok());
    }
}
