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
    /// Control/StepDown on the MASTER: it drops to priority 0 and hands over to the best
    /// standby for --step-down-hold-s; then its priority returns (and with it, unless
    /// sticky, the subnet through a HANDOVER).
    MasterStepDown,
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
            Scenario::MasterStepDown => "master-step-down",
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
    /// A deployed cluster instead of a demo.
    pub cluster: ClusterArgs,
}

/// `ibsmctl drill` against a deployed cluster: no Demo service; the members' own APIs
/// for the actions they have, operator commands for the rest; the cluster's own view
/// (every member's Status and ListSms, with how long ago each SM last answered SMInfo)
/// as the judge, and optionally `ibsmd judge` on a host of the fabric beside it.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ClusterArgs {
    /// A deployed cluster: every member's API endpoint (comma-separated or repeated); the
    /// drill then uses no Demo service (not with --start-demo). The judge is the members'
    /// own view: each member's GetStatus and ListSms every 25 ms; a member whose API is
    /// gone keeps the state the others last saw it answer on the fabric, dated by their
    /// answered_ms_ago. LIDs are read on the wire: the master's heavy sweep (Control/Sweep)
    /// reads every port's PortInfo, and Fabric/GetTopology gives that LID as read
    /// (read_lid), not the SM's LID table.
    #[arg(long = "members", value_name = "ENDPOINT", value_delimiter = ',')]
    pub members: Vec<String>,
    /// With --members, optional: also `ibsmd judge`, serving what a host of the fabric reads
    /// (SMInfo of every SM port every 10 ms, LIDs from PortInfo through ibnetdiscover -p).
    /// The report then carries its view beside the members' (primary) and says where
    /// they disagree.
    #[arg(long, value_name = "ENDPOINT")]
    pub judge: Option<String>,
    /// With --members, kill-master: the command that kills an SM, run with `sh -c`, e.g.
    /// `ssh {host} systemctl kill -s KILL ibsmd`. {name} (the drill's name of the member),
    /// {endpoint} {host} {guid} are replaced.
    #[arg(long, value_name = "COMMAND")]
    pub kill_cmd: Option<String>,
    /// With --members, kill-master: the command that starts it again (same placeholders),
    /// e.g. `ssh {host} systemctl start ibsmd`.
    #[arg(long, value_name = "COMMAND")]
    pub restart_cmd: Option<String>,
    /// master-step-down: how long the master stays at priority 0.
    #[arg(long, value_name = "SECONDS", default_value_t = 5)]
    pub step_down_hold_s: u64,
}

impl ClusterArgs {
    /// Whether the drill runs against a deployed cluster.
    pub fn deployed(&self) -> bool {
        !self.members.is_empty()
    }
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
        self.check_cluster()?;
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

impl DrillArgs {
    fn check_cluster(&self) -> Result<(), DrillError> {
        let c = &self.cluster;
        if !c.deployed() {
            if c.judge.is_some() || c.kill_cmd.is_some() || c.restart_cmd.is_some() {
                return Err(DrillError::Setup(
                    "--judge, --kill-cmd and --restart-cmd are for a deployed cluster: give its \
                     members with --members EP1,EP2,..."
                        .into(),
                ));
            }
            return Ok(());
        }
        if self.start_demo {
            return Err(DrillError::Setup(
                "--members names a deployed cluster; --start-demo starts a demo: give one".into(),
            ));
        }
        if c.members.len() < 2 {
            return Err(DrillError::Setup(format!(
                "a drill needs at least two SMs; --members names {}",
                c.members.len()
            )));
        }
        match self.scenario {
            Scenario::KillMaster if c.kill_cmd.is_none() || c.restart_cmd.is_none() => {
                Err(DrillError::Setup(
                    "kill-master against a deployed cluster needs --kill-cmd and --restart-cmd \
                     (e.g. 'ssh {host} systemctl kill -s KILL ibsmd' and 'ssh {host} systemctl \
                     start ibsmd')"
                        .into(),
                ))
            }
            Scenario::MasterPortDown | Scenario::RaftPartition | Scenario::Soak => {
                Err(DrillError::Setup(format!(
                    "{} pulls cables or cuts Raft traffic through the demo's fault injection; \
                     against a deployed cluster the drill runs kill-master, planned-handover, \
                     master-step-down and priority-flap",
                    self.scenario.name()
                )))
            }
            _ => Ok(()),
        }
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
            cluster: ClusterArgs::default(),
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

    #[test]
    fn a_deployed_cluster_needs_operator_commands_to_kill_but_no_judge() {
        let msg = |a: &DrillArgs| a.check().err().map(|e| e.to_string()).unwrap_or_default();
        let mut a = DrillArgs {
            scenario: Scenario::KillMaster,
            cycles: 1,
            start_demo: false,
            ibsmd: None,
            report_dir: PathBuf::from("x"),
            dual_master_bound_ms: 0,
            fabric: None,
            seed: None,
            deadline: None,
            cluster: ClusterArgs {
                members: vec!["a:1".into(), "b:2".into()],
                ..ClusterArgs::default()
            },
        };
        // The members judge themselves: --judge is optional.
        assert!(
            msg(&a).contains("--kill-cmd and --restart-cmd"),
            "{}",
            msg(&a)
        );
        a.cluster.kill_cmd = Some("k".into());
        a.cluster.restart_cmd = Some("r".into());
        assert!(a.check().is_ok());
        a.cluster.judge = Some("j:3".into());
        assert!(a.check().is_ok());
        for s in [
            Scenario::MasterStepDown,
            Scenario::PlannedHandover,
            Scenario::PriorityFlap,
        ] {
            a.scenario = s;
            assert!(a.check().is_ok(), "{s:?}");
        }
        for s in [
            Scenario::MasterPortDown,
            Scenario::RaftPartition,
            Scenario::Soak,
        ] {
            a.scenario = s;
            assert!(msg(&a).contains("fault injection"), "{s:?}: {}", msg(&a));
        }
        a.scenario = Scenario::KillMaster;
        a.start_demo = true;
        assert!(msg(&a).contains("give one"), "{}", msg(&a));
        a.start_demo = false;
        a.cluster.members.truncate(1);
        assert!(msg(&a).contains("at least two"), "{}", msg(&a));
        // Cluster flags without --members are refused, not ignored.
        a.cluster.members.clear();
        assert!(msg(&a).contains("--members"), "{}", msg(&a));
    }
}
