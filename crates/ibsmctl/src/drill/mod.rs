//! `ibsmctl drill`: repeat a failover scenario against `ibsmd demo` and measure it as
//! the fabric sees it.
//!
//! The judge is the demo's SMInfo poller (`ibsm.v1.Demo/PollSmInfo`): a client on a
//! spare CA port that reads every SM port's SMInfo by directed route every 10 ms. What
//! each SM says about itself through its API is not trusted for "no master" or "two
//! masters": a killed SM has no API and an isolated one may still believe it is MASTER.
//!
//! On ibsim (`--start-demo --fabric ibsim:NETFILE`, `ibsmd::demo_ibsim`) the same
//! drill runs unchanged against members that are separate `ibsmd --fabric umad`
//! processes under umad2sim, and the judge is the `ibsmd sminfo-poll` process on a
//! fourth HCA of the fabric: a real umad client reading SMInfo through ibsim, not the
//! embedded simulator's state. A kill is a SIGKILL plus dropping the dead process's
//! ibsim client (what a kernel does when it closes the umad/issm files), a pulled
//! cable is ibsim's `Unlink`, and `raft-partition` asks the member process itself
//! (the demo starts its members with `--fault-injection`, see `ibsmd::demo_service`).
//!
//! `soak` (ibsim only, module `soak`) mixes six actions cycle by cycle from a seeded
//! RNG (master kill, standby kill, Raft isolation, 5 % SMP loss on a cable, a link
//! flap, a planned handover) and after every cycle reads LIDs and LFTs back from the
//! fabric with infiniband-diags (`Demo/ReadFabric`) and the replicated state from every
//! member; an LFT entry that changed where the master's routing did not ask for it
//! breaks the run, as a LID change does. `--deadline-s` bounds any drill: no cycle
//! starts after it, and the report says it stopped early.
//!
//! Per cycle: wait until the cluster is stable (one MASTER on the wire, every running
//! instance answering, the master's own fabric view published), read the LIDs, act
//! (kill / hand over / pull the master's cable / raise a standby's priority), then
//! measure: detection (first survivor seen leaving STANDBY), failover (a new MASTER
//! seen), fabric verified (the new master published a view from a heavy sweep that
//! started after the action), LIDs (compared with GetLids before), masterless and
//! dual-master time in the poller's timeline, and the Raft epoch (must rise on a
//! failover). Then it restores (restart, cable up, priority back) and waits for
//! stability again, and that part counts too: a restarted higher-priority SM takes the
//! subnet back through a HANDOVER, which must not show two masters either.
//!
//! Invariants (exit code 5 when broken): no LID changed, a new master found in every
//! cycle, dual-master time within `--dual-master-bound-ms` (default 0: the SMInfo
//! handover protocol never needs two masters; a 10 ms poller can only see one if both
//! really answered MASTER in the same round), and no write lost.
//!
//! Writes lost: before each cycle's action the drill writes a marker through the API
//! that goes through the replica (`Fabric/SetPartition` of the partition
//! [`MARKER_P_KEY`], named after the run and the cycle, the master's port its only
//! member). Every cycle overwrites the same partition (the master programs replicated
//! partitions, and a P_Key per cycle would soon fill the 32-entry P_Key block of the
//! ports that were master), and the drill deletes it at the end
//! (`Fabric/DeletePartition`). Once the cycle's master is verified, every running instance must
//! list it (`Fabric/ListPartitions`, within [`MARKER_TIMEOUT`]: standbys apply the log
//! asynchronously); an acknowledged marker missing anywhere is a lost write.
//!
//! `raft-partition` is not a failover: mastership is in-band SMInfo, not Raft. The
//! drill cuts the MASTER's Raft traffic (`Demo/SetRaftIsolation`) and expects it to
//! stay MASTER (no other MASTER on the wire, no LID change) and to report `degraded`
//! in GetStatus within [`DEGRADED_BOUND`]; then it heals the cut and expects
//! `degraded` to clear and every replica to converge (same epoch and applied index).
//! It records `degraded_ms` and `heal_ms` where the other scenarios record failover.
//!
//! Outputs in `--report-dir`: `report.txt`, `report.json` and `timeline.svg` (one lane
//! per SM, colored by SMState as the poller saw it; hand-written SVG, no dependency).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ibsm_proto::v1 as pb;
use ibsm_proto::v1::control_client::ControlClient;
use ibsm_proto::v1::demo_client::DemoClient;
use ibsm_proto::v1::fabric_client::FabricClient;
use serde_json::{json, Value};

use crate::args::fmt_guid;
use crate::control::{channel, unary, AuthChannel, CtlError, Target};

mod soak;

/// Exit code of a drill whose invariants broke.
pub const EXIT_INVARIANT: u8 = 5;

/// How long one step (stability, a new master, a verified fabric) may take.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a new master may take to show an epoch above the old one.
const EPOCH_WAIT: Duration = Duration::from_secs(10);

/// How long every running instance may take to list an acknowledged marker.
pub const MARKER_TIMEOUT: Duration = Duration::from_secs(20);

/// How long a Raft-isolated MASTER may take to report `degraded` (and, healed, to
/// clear it): the daemon needs about one write timeout (1 s) or 500 ms without a
/// quorum acknowledgement; the rest is slack for a loaded machine.
pub const DEGRADED_BOUND: Duration = Duration::from_secs(20);

/// How long a planned handover is retried while the master says its best standby
/// is not ready yet.
const HANDOVER_RETRY_MS: u64 = 10_000;

/// How long to watch a Raft-isolated MASTER keep its mastership once it is degraded.
const ISOLATION_HOLD: Duration = Duration::from_secs(2);

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
    fn name(self) -> &'static str {
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

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// One change the poller saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub at: u64,
    pub seq: u64,
    pub name: String,
    /// `None`: no SMInfo answer.
    pub state: Option<&'static str>,
}

fn state_of(s: &pb::SmInfoSample) -> Option<&'static str> {
    if !s.answered {
        return None;
    }
    Some(match pb::SmState::try_from(s.state) {
        Ok(pb::SmState::Master) => "MASTER",
        Ok(pb::SmState::Standby) => "STANDBY",
        Ok(pb::SmState::Discovering) => "DISCOVERING",
        _ => "NOTACTIVE",
    })
}

/// Time with no MASTER, the longest such stretch, time with two or more MASTERs and
/// the number of separate stretches with two or more, within `[from, to)`, from a
/// change timeline (states hold until the next change).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Gaps {
    pub none_total: u64,
    pub none_max: u64,
    pub dual: u64,
    pub dual_windows: u64,
}

/// See [`Gaps`].
pub fn master_gaps_windows(changes: &[Change], from: u64, to: u64) -> Gaps {
    let mut sorted: Vec<&Change> = changes.iter().collect();
    sorted.sort_by_key(|c| (c.at, c.seq));
    let mut state: BTreeMap<&str, Option<&str>> = BTreeMap::new();
    let (mut none_total, mut none_max, mut run, mut dual) = (0u64, 0u64, 0u64, 0u64);
    let (mut windows, mut in_dual) = (0u64, false);
    let mut i = 0;
    while i < sorted.len() {
        let t = sorted.get(i).map_or(0, |c| c.at);
        while let Some(c) = sorted.get(i).filter(|c| c.at == t) {
            state.insert(c.name.as_str(), c.state);
            i += 1;
        }
        let next = sorted.get(i).map_or(to, |c| c.at.min(to));
        let (a, b) = (t.max(from), next.min(to));
        if b <= a {
            continue;
        }
        let masters = state.values().filter(|s| **s == Some("MASTER")).count();
        let d = b - a;
        if masters > 1 && !in_dual {
            windows += 1;
        }
        in_dual = masters > 1;
        if masters == 0 {
            none_total += d;
            run += d;
            none_max = none_max.max(run);
        } else {
            run = 0;
            if masters > 1 {
                dual += d;
            }
        }
    }
    Gaps {
        none_total,
        none_max,
        dual,
        dual_windows: windows,
    }
}

/// One cycle's measurements.
#[derive(Debug, Clone, Default)]
pub struct Cycle {
    pub index: u32,
    pub old_master: String,
    pub new_master: Option<String>,
    pub action_at: u64,
    pub detection_ms: Option<u64>,
    pub failover_ms: Option<u64>,
    pub verified_ms: Option<u64>,
    pub lid_changes: u64,
    pub lid_change_detail: Vec<String>,
    pub masterless_ms: u64,
    pub masterless_max_ms: u64,
    pub dual_master_ms: u64,
    pub epoch_before: u64,
    pub epoch_after: u64,
    pub end_at: u64,
    pub note: String,
    /// The marker partition written before the action, and whether it was acknowledged.
    pub marker: Option<String>,
    pub marker_acked: bool,
    /// Acknowledged markers some running instance does not list (and where).
    pub writes_lost: u64,
    pub writes_lost_detail: Vec<String>,
    /// raft-partition: cut -> GetStatus degraded, heal -> degraded cleared, and
    /// whether the replicas converged (same epoch and applied index) after the heal.
    pub degraded_ms: Option<u64>,
    pub heal_ms: Option<u64>,
    pub converged: Option<bool>,
    /// soak: the action, LFT entries changed that routing did not ask for (and did),
    /// members whose guid2lid differs from the master's, stretches with two MASTERs.
    pub action: Option<&'static str>,
    pub lft_unasked: u64,
    pub lft_asked: u64,
    /// link-flap: LFT entries routing moved around the unlinked cable.
    pub lft_rerouted: Option<u64>,
    pub lft_detail: Vec<String>,
    pub guid2lid_detail: Vec<String>,
    pub dual_windows: u64,
}

impl Cycle {
    fn json(&self) -> Value {
        json!({
            "cycle": self.index,
            "old_master": self.old_master,
            "new_master": self.new_master,
            "new_master_found": self.new_master.is_some(),
            "action_unix_ms": self.action_at,
            "detection_ms": self.detection_ms,
            "failover_ms": self.failover_ms,
            "verified_ms": self.verified_ms,
            "lid_changes": self.lid_changes,
            "lid_change_detail": self.lid_change_detail,
            "masterless_ms": self.masterless_ms,
            "masterless_max_ms": self.masterless_max_ms,
            "dual_master_ms": self.dual_master_ms,
            "epoch_before": self.epoch_before,
            "epoch_after": self.epoch_after,
            "note": self.note,
            "marker": self.marker,
            "marker_acked": self.marker_acked,
            "writes_lost": self.writes_lost,
            "writes_lost_detail": self.writes_lost_detail,
            "degraded_ms": self.degraded_ms,
            "degraded_seen": self.degraded_ms.is_some(),
            "heal_ms": self.heal_ms,
            "degraded_cleared": self.heal_ms.is_some(),
            "converged": self.converged,
            "action": self.action,
            "lft_unasked": self.lft_unasked,
            "lft_asked": self.lft_asked,
            "lft_rerouted_with_cable_down": self.lft_rerouted,
            "lft_detail": self.lft_detail,
            "guid2lid_detail": self.guid2lid_detail,
            "dual_master_windows": self.dual_windows,
        })
    }
}

/// {min, median, max} of the values present (nulls when none).
pub fn stats(values: &[u64]) -> Value {
    let mut v = values.to_vec();
    v.sort_unstable();
    match (v.first(), v.last()) {
        (Some(min), Some(max)) => {
            let median = v.get(v.len() / 2).copied().unwrap_or(*min);
            json!({"min": min, "median": median, "max": max, "n": v.len()})
        }
        _ => json!({"min": null, "median": null, "max": null, "n": 0}),
    }
}

struct Member {
    name: String,
    priority: u32,
    target: Target,
    control: ControlClient<AuthChannel>,
    fabric: FabricClient<AuthChannel>,
}

struct Drill {
    target: Target,
    demo: DemoClient<AuthChannel>,
    members: Vec<Member>,
    cursor: u64,
    changes: Vec<Change>,
    started: u64,
    /// When an action that had to be retried finally went through (unix ms).
    acted_at: Option<u64>,
}

/// Stops the demo it started (also on panic or error): SIGTERM first, so a demo on
/// ibsim stops its ibsim and member processes and removes its temp dir, then SIGKILL
/// after [`DEMO_STOP_GRACE`] (its children die with it anyway: PR_SET_PDEATHSIG).
struct DemoProcess(Child);

/// How long a started demo may take to stop after SIGTERM.
const DEMO_STOP_GRACE: Duration = Duration::from_secs(10);

impl Drop for DemoProcess {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            // No signal crate here: kill(1) sends the SIGTERM.
            let termed = Command::new("kill")
                .args(["-TERM", &self.0.id().to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if termed {
                let deadline = std::time::Instant::now() + DEMO_STOP_GRACE;
                while std::time::Instant::now() < deadline {
                    if !matches!(self.0.try_wait(), Ok(None)) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn find_ibsmd(given: Option<&Path>) -> PathBuf {
    if let Some(p) = given {
        return p.to_path_buf();
    }
    if let Some(sib) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join("ibsmd")))
        .filter(|p| p.exists())
    {
        return sib;
    }
    PathBuf::from("ibsmd")
}

/// Start `ibsmd demo --base-port 0 [--fabric F]` and read its endpoints from stdout
/// (the first is where the Demo service answers).
fn start_demo(
    ibsmd: &Path,
    dir: &Path,
    fabric: Option<&str>,
) -> Result<(DemoProcess, Vec<String>), DrillError> {
    let log = std::fs::File::create(dir.join("ibsmd-demo.log"))
        .map_err(|e| DrillError::Setup(format!("{}: {e}", dir.join("ibsmd-demo.log").display())))?;
    let mut cmd = Command::new(ibsmd);
    cmd.args(["demo", "--base-port", "0"]);
    if let Some(f) = fabric {
        cmd.arg("--fabric").arg(f);
    }
    let mut child = cmd
        .arg("--data-dir")
        .arg(dir.join("demo-data"))
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .map_err(|e| {
            DrillError::Setup(format!(
                "cannot start {} demo: {e} (give --ibsmd PATH)",
                ibsmd.display()
            ))
        })?;
    let stdout = child.stdout.take();
    let proc_ = DemoProcess(child);
    let stdout = stdout.ok_or_else(|| DrillError::Setup("ibsmd demo: no stdout".into()))?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut eps = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(at) = line.find("gRPC http://") {
                if let Some(ep) = line.get(at + 5..) {
                    eps.push(ep.trim().to_string());
                }
            }
            if line.starts_with("Ctrl-C") {
                let _ = tx.send(std::mem::take(&mut eps));
            }
        }
        // Keep draining nothing more: the pipe closes when the demo exits.
    });
    let eps = rx.recv_timeout(Duration::from_secs(120)).map_err(|_| {
        let log = std::fs::read_to_string(dir.join("ibsmd-demo.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(8).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        DrillError::Setup(format!(
            "ibsmd demo did not print its endpoints (it exited or took over 120 s); {}:\n{}",
            dir.join("ibsmd-demo.log").display(),
            tail.join("\n")
        ))
    })?;
    if eps.is_empty() {
        return Err(DrillError::Setup(
            "ibsmd demo printed no gRPC endpoint".into(),
        ));
    }
    Ok((proc_, eps))
}

impl Drill {
    async fn connect(target: &Target) -> Result<Drill, DrillError> {
        let ch = channel(target).await?;
        let mut demo = DemoClient::new(ch);
        let list = unary(
            target,
            "ListInstances",
            demo.list_instances(pb::ListInstancesRequest {}),
        )
        .await?;
        let mut members = Vec::new();
        for inst in list.instances {
            let mut t = target.clone();
            t.endpoint = if inst.endpoint.contains("://") {
                inst.endpoint.clone()
            } else {
                format!("http://{}", inst.endpoint)
            };
            let ch = channel(&t).await?;
            members.push(Member {
                name: inst.name.clone(),
                priority: inst.priority,
                target: t,
                control: ControlClient::new(ch.clone()),
                fabric: FabricClient::new(ch),
            });
        }
        if members.len() < 2 {
            return Err(DrillError::Setup(format!(
                "a drill needs at least two SM instances; the demo has {}",
                members.len()
            )));
        }
        Ok(Drill {
            target: target.clone(),
            demo,
            members,
            cursor: 0,
            changes: Vec::new(),
            started: now_ms(),
            acted_at: None,
        })
    }

    async fn poll(&mut self) -> Result<u64, DrillError> {
        let r = unary(
            &self.target,
            "PollSmInfo",
            self.demo.poll_sm_info(pb::PollSmInfoRequest {
                after_seq: self.cursor,
            }),
        )
        .await?;
        for s in &r.samples {
            self.changes.push(Change {
                at: s.at_unix_ms,
                seq: s.seq,
                name: s.name.clone(),
                state: state_of(s),
            });
        }
        self.cursor = r.next_seq;
        Ok(r.now_unix_ms)
    }

    /// The latest state of each member on the wire.
    fn wire_states(&self) -> BTreeMap<String, Option<&'static str>> {
        let mut sorted: Vec<&Change> = self.changes.iter().collect();
        sorted.sort_by_key(|c| (c.at, c.seq));
        let mut out = BTreeMap::new();
        for c in sorted {
            out.insert(c.name.clone(), c.state);
        }
        out
    }

    fn member(&mut self, name: &str) -> Result<&mut Member, DrillError> {
        self.members
            .iter_mut()
            .find(|m| m.name == name)
            .ok_or_else(|| DrillError::Setup(format!("no member {name}")))
    }

    /// One MASTER on the wire, every running instance answering STANDBY or MASTER,
    /// and the master's own view published; twice in a row 200 ms apart.
    async fn wait_stable(&mut self) -> Result<String, DrillError> {
        let deadline = now_ms() + u64::try_from(STEP_TIMEOUT.as_millis()).unwrap_or(60_000);
        let mut good_once: Option<String> = None;
        loop {
            self.poll().await?;
            let list = unary(
                &self.target,
                "ListInstances",
                self.demo.list_instances(pb::ListInstancesRequest {}),
            )
            .await?;
            let states = self.wire_states();
            let masters: Vec<&String> = states
                .iter()
                .filter(|(_, s)| **s == Some("MASTER"))
                .map(|(n, _)| n)
                .collect();
            let running_ok = list
                .instances
                .iter()
                .filter(|i| i.running)
                .all(|i| matches!(states.get(&i.name), Some(Some("MASTER" | "STANDBY"))));
            let mut ok = None;
            if let ([m], true) = (masters.as_slice(), running_ok) {
                let m = (*m).clone();
                let member = self.member(&m)?;
                let t = member.target.clone();
                let view = unary(
                    &t,
                    "GetTopology",
                    member.fabric.get_topology(pb::GetTopologyRequest {}),
                )
                .await;
                if view.is_ok_and(|v| v.source == "master") {
                    ok = Some(m);
                }
            }
            match (ok, &good_once) {
                (Some(m), Some(prev)) if &m == prev => return Ok(m),
                (Some(m), _) => good_once = Some(m),
                (None, _) => good_once = None,
            }
            if now_ms() > deadline {
                return Err(DrillError::Invariant(format!(
                    "the demo did not settle (one MASTER, every running SM answering) within {STEP_TIMEOUT:?}; wire states {states:?}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    async fn lids(&mut self, name: &str) -> Result<BTreeMap<u64, (u32, u32)>, DrillError> {
        let m = self.member(name)?;
        let t = m.target.clone();
        let r = unary(&t, "GetLids", m.fabric.get_lids(pb::GetLidsRequest {})).await?;
        Ok(r.lids
            .iter()
            .map(|l| (l.port_guid, (l.base_lid, l.lmc)))
            .collect())
    }

    /// The SM's port GUID (GetStatus), 0 if it does not answer.
    async fn port_guid(&mut self, name: &str) -> u64 {
        self.status(name).await.map_or(0, |s| s.guid)
    }

    /// The SM's mastership epoch (GetStatus), 0 if it does not answer.
    async fn epoch(&mut self, name: &str) -> u64 {
        self.status(name).await.map_or(0, |s| s.epoch)
    }

    /// `name`'s epoch once it is above `floor`, or the last one read after
    /// [`EPOCH_WAIT`]: a new master claims its epoch through the replica, which can
    /// land a little after its first heavy sweep (separate processes on ibsim).
    async fn epoch_above(&mut self, name: &str, floor: u64) -> u64 {
        let deadline = now_ms() + u64::try_from(EPOCH_WAIT.as_millis()).unwrap_or(10_000);
        loop {
            let e = self.epoch(name).await;
            if e > floor || now_ms() > deadline {
                return e;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Wait for a MASTER other than `old` on the wire (or `expect` if given).
    async fn wait_new_master(
        &mut self,
        old: &str,
        since: u64,
    ) -> Result<Option<(String, u64)>, DrillError> {
        let deadline = now_ms() + u64::try_from(STEP_TIMEOUT.as_millis()).unwrap_or(60_000);
        loop {
            self.poll().await?;
            let mut after: Vec<&Change> = self.changes.iter().filter(|c| c.at >= since).collect();
            after.sort_by_key(|c| (c.at, c.seq));
            if let Some(c) = after
                .iter()
                .find(|c| c.name != old && c.state == Some("MASTER"))
            {
                return Ok(Some((c.name.clone(), c.at)));
            }
            if now_ms() > deadline {
                return Ok(None);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Wait until `name` answers GetTopology from a master view taken after `since`.
    async fn wait_verified(&mut self, name: &str, since: u64) -> Result<Option<u64>, DrillError> {
        let deadline = now_ms() + u64::try_from(STEP_TIMEOUT.as_millis()).unwrap_or(60_000);
        loop {
            let m = self.member(name)?;
            let t = m.target.clone();
            if let Ok(v) = unary(
                &t,
                "GetTopology",
                m.fabric.get_topology(pb::GetTopologyRequest {}),
            )
            .await
            {
                if v.source == "master" && v.taken_unix_ms >= since {
                    return Ok(Some(v.taken_unix_ms));
                }
            }
            if now_ms() > deadline {
                return Ok(None);
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    async fn act(
        &mut self,
        scenario: Scenario,
        master: &str,
    ) -> Result<(String, Restore), DrillError> {
        let t = self.target.clone();
        match scenario {
            Scenario::KillMaster => {
                unary(
                    &t,
                    "KillInstance",
                    self.demo.kill_instance(pb::KillInstanceRequest {
                        name: master.to_string(),
                        ..Default::default()
                    }),
                )
                .await?;
                Ok((
                    format!("killed {master}"),
                    Restore::Restart(master.to_string()),
                ))
            }
            Scenario::PlannedHandover => {
                let m = self.member(master)?;
                let mt = m.target.clone();
                // The master refuses (FAILED_PRECONDITION, "retry") while the best
                // standby is still settling, e.g. re-discovering after the last
                // cycle's handover: retry as an operator would, bounded.
                let deadline = now_ms() + HANDOVER_RETRY_MS;
                let mut attempt_at;
                let r = loop {
                    attempt_at = now_ms();
                    match unary(
                        &mt,
                        "Handover",
                        m.control.handover(pb::HandoverRequest { to_guid: 0 }),
                    )
                    .await
                    {
                        Err(CtlError::Rpc { status, .. })
                            if status.code() == tonic::Code::FailedPrecondition
                                && status.message().contains("retry")
                                && now_ms() < deadline =>
                        {
                            tokio::time::sleep(Duration::from_millis(100)).await;
                        }
                        other => break other?,
                    }
                };
                // The cycle is measured from the handover that went through.
                self.acted_at = Some(attempt_at);
                Ok((
                    format!("handover to {}: {}", fmt_guid(r.target_guid), r.outcome),
                    Restore::Nothing,
                ))
            }
            Scenario::MasterPortDown => {
                unary(
                    &t,
                    "SetLinkState",
                    self.demo.set_link_state(pb::SetLinkStateRequest {
                        name: master.to_string(),
                        up: false,
                    }),
                )
                .await?;
                Ok((
                    format!("cable of {master} pulled"),
                    Restore::LinkUp(master.to_string()),
                ))
            }
            Scenario::PriorityFlap => {
                let lowest = self
                    .members
                    .iter()
                    .filter(|m| m.name != master)
                    .min_by_key(|m| m.priority)
                    .map(|m| (m.name.clone(), m.priority))
                    .ok_or_else(|| DrillError::Setup("no standby to raise".into()))?;
                let m = self.member(&lowest.0)?;
                let mt = m.target.clone();
                unary(
                    &mt,
                    "SetPriority",
                    m.control
                        .set_priority(pb::SetPriorityRequest { priority: 15 }),
                )
                .await?;
                Ok((
                    format!("{} raised to priority 15", lowest.0),
                    Restore::Priority(lowest.0, lowest.1),
                ))
            }
            Scenario::Soak => Err(DrillError::Setup(
                "soak is a mix of actions, not one action".into(),
            )),
            Scenario::RaftPartition => {
                unary(
                    &t,
                    "SetRaftIsolation",
                    self.demo.set_raft_isolation(pb::SetRaftIsolationRequest {
                        name: master.to_string(),
                        isolated: true,
                        ..Default::default()
                    }),
                )
                .await?;
                Ok((
                    format!("Raft traffic of {master} cut"),
                    Restore::HealRaft(master.to_string()),
                ))
            }
        }
    }

    async fn restore(&mut self, r: Restore) -> Result<(), DrillError> {
        let t = self.target.clone();
        match r {
            Restore::Nothing => {}
            Restore::Restart(name) => {
                unary(
                    &t,
                    "RestartInstance",
                    self.demo
                        .restart_instance(pb::RestartInstanceRequest { name }),
                )
                .await?;
            }
            Restore::LinkUp(name) => {
                unary(
                    &t,
                    "SetLinkState",
                    self.demo
                        .set_link_state(pb::SetLinkStateRequest { name, up: true }),
                )
                .await?;
            }
            Restore::HealRaft(name) => {
                unary(
                    &t,
                    "SetRaftIsolation",
                    self.demo.set_raft_isolation(pb::SetRaftIsolationRequest {
                        name,
                        isolated: false,
                        ..Default::default()
                    }),
                )
                .await?;
            }
            Restore::Priority(name, p) => {
                let m = self.member(&name)?;
                let mt = m.target.clone();
                unary(
                    &mt,
                    "SetPriority",
                    m.control
                        .set_priority(pb::SetPriorityRequest { priority: p }),
                )
                .await?;
            }
        }
        Ok(())
    }

    /// Write cycle `index`'s marker partition through `master`'s API (a replicated
    /// write: `Fabric/SetPartition` commits it to the replica before answering).
    async fn write_marker(&mut self, master: &str, index: u32) -> Result<Marker, DrillError> {
        let guid = self.port_guid(master).await;
        let name = format!("drill-{}-c{index}", self.started);
        let p_key = MARKER_P_KEY;
        let m = self.member(master)?;
        let t = m.target.clone();
        let request = pb::SetPartitionRequest {
            partition: Some(pb::PartitionEntry {
                name: name.clone(),
                p_key,
                members: vec![pb::PartitionMemberEntry {
                    port_guid: guid,
                    full: true,
                }],
            }),
        };
        let acked = if guid == 0 {
            Err(format!("{master} did not tell its port GUID"))
        } else {
            // As any client of the API would: an UNAVAILABLE answer (no Raft leader
            // for the moment, the write timed out) or a call that timed out is tried
            // again; SetPartition is idempotent, so a retry cannot write twice.
            let mut failures = Vec::new();
            loop {
                let r = unary(&t, "SetPartition", m.fabric.set_partition(request.clone())).await;
                let retry = match &r {
                    Ok(_) => break Ok(()),
                    Err(CtlError::Rpc { status, .. }) => status.code() == tonic::Code::Unavailable,
                    Err(CtlError::Timeout { .. }) => true,
                    Err(_) => false,
                };
                failures.push(r.err().map(|e| e.to_string()).unwrap_or_default());
                if !retry || failures.len() >= MARKER_ATTEMPTS {
                    break Err(failures.join("; then "));
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        };
        Ok(Marker { name, p_key, acked })
    }

    /// Take the marker partition out again (best effort, through the first member
    /// that answers), so a drill leaves no P_Key behind on a running demo.
    async fn remove_marker(&mut self) {
        for m in &mut self.members {
            let t = m.target.clone();
            let r = unary(
                &t,
                "DeletePartition",
                m.fabric.delete_partition(pb::DeletePartitionRequest {
                    p_key: MARKER_P_KEY,
                }),
            )
            .await;
            match r {
                Ok(_) => return,
                Err(e) => eprintln!(
                    "drill: marker partition not removed through {}: {e}",
                    m.name
                ),
            }
        }
    }

    /// Every running instance must list an acknowledged marker within
    /// [`MARKER_TIMEOUT`]; each one that does not is a lost write.
    async fn check_marker(&mut self, marker: &Marker, c: &mut Cycle) -> Result<(), DrillError> {
        if marker.acked.is_err() {
            return Ok(());
        }
        let list = unary(
            &self.target,
            "ListInstances",
            self.demo.list_instances(pb::ListInstancesRequest {}),
        )
        .await?;
        let deadline = now_ms() + u64::try_from(MARKER_TIMEOUT.as_millis()).unwrap_or(20_000);
        let mut missing = Vec::new();
        for inst in list.instances.iter().filter(|i| i.running) {
            let m = self.member(&inst.name)?;
            let t = m.target.clone();
            let mut last = String::new();
            let found = loop {
                match unary(
                    &t,
                    "ListPartitions",
                    m.fabric.list_partitions(pb::ListPartitionsRequest {}),
                )
                .await
                {
                    Ok(r) => {
                        if r.partitions
                            .iter()
                            .any(|p| p.p_key == marker.p_key && p.name == marker.name)
                        {
                            break true;
                        }
                        last = format!("not among {} partitions", r.partitions.len());
                    }
                    Err(e) => last = e.to_string(),
                }
                if now_ms() > deadline {
                    break false;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            };
            if !found {
                missing.push(format!(
                    "{} ({:#06x}) missing on {}: {last}",
                    marker.name, marker.p_key, inst.name
                ));
            }
        }
        if !missing.is_empty() {
            c.writes_lost += 1;
            c.writes_lost_detail.extend(missing);
        }
        Ok(())
    }

    async fn status(&mut self, name: &str) -> Result<pb::Status, DrillError> {
        let m = self.member(name)?;
        let t = m.target.clone();
        Ok(unary(
            &t,
            "GetStatus",
            m.control.get_status(pb::GetStatusRequest {}),
        )
        .await?)
    }

    /// Poll `name`'s GetStatus until `degraded == want` (ms since `since`), within
    /// [`DEGRADED_BOUND`]; keeps the wire timeline current meanwhile.
    async fn wait_degraded(
        &mut self,
        name: &str,
        want: bool,
        since: u64,
    ) -> Result<Option<u64>, DrillError> {
        let deadline = now_ms() + u64::try_from(DEGRADED_BOUND.as_millis()).unwrap_or(20_000);
        loop {
            self.poll().await?;
            if self.status(name).await.is_ok_and(|s| s.degraded == want) {
                return Ok(Some(now_ms().saturating_sub(since)));
            }
            if now_ms() > deadline {
                return Ok(None);
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Every running instance at the same epoch and applied index (twice in a row,
    /// 200 ms apart), within [`STEP_TIMEOUT`].
    async fn wait_converged(&mut self) -> Result<bool, DrillError> {
        let deadline = now_ms() + u64::try_from(STEP_TIMEOUT.as_millis()).unwrap_or(60_000);
        let names: Vec<String> = self.members.iter().map(|m| m.name.clone()).collect();
        let mut once: Option<(u64, u64)> = None;
        loop {
            let mut seen = Vec::new();
            for n in &names {
                match self.status(n).await {
                    Ok(s) => seen.push((s.epoch, s.applied_index)),
                    Err(_) => seen.push((u64::MAX, u64::MAX)),
                }
            }
            let same = seen.windows(2).all(|w| w.first() == w.get(1));
            let now = seen.first().copied().filter(|_| same);
            match (now, once) {
                (Some(a), Some(b)) if a == b => return Ok(true),
                (a, _) => once = a,
            }
            if now_ms() > deadline {
                return Ok(false);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// raft-partition: cut the MASTER's Raft traffic, check it stays MASTER and
    /// reports degraded with the fabric unchanged, heal, check degraded clears and the
    /// replicas converge, and that the marker written before the cut survived.
    async fn cycle_raft_partition(&mut self, index: u32) -> Result<Cycle, DrillError> {
        let master = self.wait_stable().await?;
        let before = self.lids(&master).await?;
        let epoch_before = self.epoch(&master).await;
        let marker = self.write_marker(&master, index).await?;
        let t0 = self.poll().await?.max(now_ms());
        let (note, restore) = self.act(Scenario::RaftPartition, &master).await?;
        let mut c = Cycle {
            index,
            old_master: master.clone(),
            action_at: t0,
            epoch_before,
            note,
            ..Cycle::default()
        };
        c.set_marker(&marker);
        c.degraded_ms = self.wait_degraded(&master, true, t0).await?;
        // Hold the cut a little longer: the master must keep its mastership on the
        // wire (no other MASTER, no change of its state) while degraded.
        let hold_until = now_ms() + u64::try_from(ISOLATION_HOLD.as_millis()).unwrap_or(2_000);
        while now_ms() < hold_until {
            self.poll().await?;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let during = self.lids(&master).await?;
        diff_lids(&before, &during, "while Raft-isolated", None, &mut c);
        let t1 = self.poll().await?.max(now_ms());
        self.restore(restore).await?;
        c.heal_ms = self.wait_degraded(&master, false, t1).await?;
        c.converged = Some(self.wait_converged().await?);
        self.check_marker(&marker, &mut c).await?;
        let settled = self.wait_stable().await?;
        let end = self.lids(&settled).await?;
        diff_lids(&before, &end, "after heal", None, &mut c);
        c.epoch_after = self.epoch(&settled).await;
        c.end_at = self.poll().await?;
        // The master "found" is the one that kept mastership: nobody else MASTER on
        // the wire since the cut, and it is the settled master.
        let mut after: Vec<&Change> = self.changes.iter().filter(|x| x.at >= t0).collect();
        after.sort_by_key(|x| (x.at, x.seq));
        let usurper = after
            .iter()
            .find(|x| x.name != master && x.state == Some("MASTER"))
            .map(|x| x.name.clone());
        let left = after
            .iter()
            .any(|x| x.name == master && x.state != Some("MASTER"));
        c.new_master = match usurper {
            Some(u) => Some(u),
            None if !left && settled == master => Some(master.clone()),
            None => None,
        };
        c.detection_ms = after
            .iter()
            .find(|x| x.name != master && matches!(x.state, Some("DISCOVERING" | "MASTER")))
            .map(|x| x.at.saturating_sub(t0));
        let g = master_gaps_windows(&self.changes, t0, c.end_at);
        c.masterless_ms = g.none_total;
        c.masterless_max_ms = g.none_max;
        c.dual_master_ms = g.dual;
        c.dual_windows = g.dual_windows;
        Ok(c)
    }

    async fn cycle(&mut self, scenario: Scenario, index: u32) -> Result<Cycle, DrillError> {
        if scenario == Scenario::RaftPartition {
            return self.cycle_raft_partition(index).await;
        }
        let master = self.wait_stable().await?;
        let before = self.lids(&master).await?;
        let epoch_before = self.epoch(&master).await;
        let marker = self.write_marker(&master, index).await?;
        // A pulled cable takes the master's port off the fabric: the new master cannot
        // read (or list) a LID there until the cable is back, and "after restore" checks
        // that it has its old LID again.
        let off_fabric = match scenario {
            Scenario::MasterPortDown => Some(self.port_guid(&master).await).filter(|g| *g != 0),
            _ => None,
        };
        let t0 = self.poll().await?.max(now_ms());
        self.acted_at = None;
        let (note, restore) = self.act(scenario, &master).await?;
        let t0 = self.acted_at.take().map_or(t0, |a| a.max(t0));
        let mut c = Cycle {
            index,
            old_master: master.clone(),
            action_at: t0,
            epoch_before,
            note,
            ..Cycle::default()
        };
        c.set_marker(&marker);
        let found = self.wait_new_master(&master, t0).await?;
        if let Some((new, at)) = &found {
            c.new_master = Some(new.clone());
            c.failover_ms = Some(at.saturating_sub(t0));
            c.verified_ms = self
                .wait_verified(new, t0)
                .await?
                .map(|_| now_ms().saturating_sub(t0));
            let after = self.lids(new).await?;
            diff_lids(&before, &after, "after failover", off_fabric, &mut c);
            c.epoch_after = self.epoch_above(new, epoch_before).await;
        }
        // The new master is verified (or none came): every running instance must
        // list the acknowledged marker.
        self.check_marker(&marker, &mut c).await?;
        let mut sorted: Vec<&Change> = self.changes.iter().filter(|x| x.at >= t0).collect();
        sorted.sort_by_key(|x| (x.at, x.seq));
        c.detection_ms = sorted
            .iter()
            .find(|x| x.name != master && matches!(x.state, Some("DISCOVERING" | "MASTER")))
            .map(|x| x.at.saturating_sub(t0));
        self.restore(restore).await?;
        let settled = self.wait_stable().await?;
        let end = self.lids(&settled).await?;
        diff_lids(&before, &end, "after restore", None, &mut c);
        c.end_at = self.poll().await?;
        let g = master_gaps_windows(&self.changes, t0, c.end_at);
        c.masterless_ms = g.none_total;
        c.masterless_max_ms = g.none_max;
        c.dual_master_ms = g.dual;
        c.dual_windows = g.dual_windows;
        Ok(c)
    }
}

/// A marker write: the partition's name and P_Key, and whether the API acknowledged it
/// (with why not).
#[derive(Debug, Clone)]
struct Marker {
    name: String,
    p_key: u32,
    acked: Result<(), String>,
}

impl Cycle {
    fn set_marker(&mut self, m: &Marker) {
        self.marker = Some(format!("{} P_Key {:#06x}", m.name, m.p_key));
        self.marker_acked = m.acked.is_ok();
        if let Err(e) = &m.acked {
            self.note = format!("{}; marker not acknowledged: {e}", self.note);
        }
    }
}

/// How many times a drill tries to write its marker before the cycle says it was not
/// acknowledged.
const MARKER_ATTEMPTS: usize = 4;

/// The P_Key of the drills' marker partition (the highest one below the default
/// 0x7fff, out of the way of hand-made partitions).
pub const MARKER_P_KEY: u32 = 0x7ffe;

enum Restore {
    Nothing,
    Restart(String),
    LinkUp(String),
    Priority(String, u32),
    HealRaft(String),
}

fn diff_lids(
    before: &BTreeMap<u64, (u32, u32)>,
    after: &BTreeMap<u64, (u32, u32)>,
    when: &str,
    off_fabric: Option<u64>,
    c: &mut Cycle,
) {
    for (g, b) in before {
        match after.get(g) {
            Some(a) if a == b => {}
            // Unplugged on purpose: no LID to list, not a LID change.
            None if off_fabric == Some(*g) => {}
            Some(a) => {
                c.lid_changes += 1;
                c.lid_change_detail.push(format!(
                    "{when}: {} LID {}/lmc{} -> {}/lmc{}",
                    fmt_guid(*g),
                    b.0,
                    b.1,
                    a.0,
                    a.1
                ));
            }
            None => {
                c.lid_changes += 1;
                c.lid_change_detail.push(format!(
                    "{when}: {} (LID {}) no longer has a LID",
                    fmt_guid(*g),
                    b.0
                ));
            }
        }
    }
}

/// The SVG timeline: one lane per SM, a rectangle per state interval.
pub fn svg(
    names: &[String],
    changes: &[Change],
    from: u64,
    to: u64,
    marks: &[(u64, String)],
) -> String {
    let (left, width, lane_h, top) = (90.0_f64, 1000.0_f64, 28.0_f64, 30.0_f64);
    let span = to.saturating_sub(from).max(1) as f64;
    let x = |t: u64| left + (t.saturating_sub(from).min(to - from.min(to))) as f64 / span * width;
    let color = |s: Option<&str>| match s {
        Some("MASTER") => "#2e7d32",
        Some("STANDBY") => "#1565c0",
        Some("DISCOVERING") => "#ef6c00",
        Some(_) => "#9e9e9e",
        None => "#eeeeee",
    };
    let height = top + lane_h * names.len() as f64 + 40.0;
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\" font-family=\"monospace\" font-size=\"11\">\n<text x=\"4\" y=\"14\">SMInfo as the fabric poller saw it, {} ms (green MASTER, blue STANDBY, orange DISCOVERING, grey other, light: no answer)</text>\n",
        left + width + 20.0,
        to.saturating_sub(from)
    );
    for (i, name) in names.iter().enumerate() {
        let y = top + lane_h * i as f64;
        out.push_str(&format!(
            "<g class=\"lane\" data-sm=\"{name}\">\n<text x=\"4\" y=\"{}\">{name}</text>\n",
            y + 17.0
        ));
        let mut mine: Vec<&Change> = changes.iter().filter(|c| &c.name == name).collect();
        mine.sort_by_key(|c| (c.at, c.seq));
        for (k, c) in mine.iter().enumerate() {
            let end = mine.get(k + 1).map_or(to, |n| n.at).min(to);
            let start = c.at.max(from);
            if end <= start {
                continue;
            }
            out.push_str(&format!(
                "<rect x=\"{:.1}\" y=\"{y}\" width=\"{:.1}\" height=\"{}\" fill=\"{}\"><title>{name} {} {} ms</title></rect>\n",
                x(start),
                (x(end) - x(start)).max(0.5),
                lane_h - 6.0,
                color(c.state),
                c.state.unwrap_or("no answer"),
                end - start
            ));
        }
        out.push_str("</g>\n");
    }
    for (t, label) in marks {
        let xx = x(*t);
        out.push_str(&format!(
            "<line x1=\"{xx:.1}\" y1=\"{}\" x2=\"{xx:.1}\" y2=\"{}\" stroke=\"#c62828\"/><text x=\"{xx:.1}\" y=\"{}\" fill=\"#c62828\">{}</text>\n",
            top - 4.0,
            top + lane_h * names.len() as f64,
            top + lane_h * names.len() as f64 + 14.0,
            xml_escape(label)
        ));
    }
    out.push_str("</svg>\n");
    out
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Run the drill; prints the text report and writes the three files.
pub async fn run(target: &Target, args: &DrillArgs) -> Result<(), DrillError> {
    std::fs::create_dir_all(&args.report_dir).map_err(|e| {
        DrillError::Setup(format!("--report-dir {}: {e}", args.report_dir.display()))
    })?;
    args.check()?;
    let mut _demo = None;
    let mut target = target.clone();
    if args.start_demo {
        let (p, eps) = start_demo(
            &find_ibsmd(args.ibsmd.as_deref()),
            &args.report_dir,
            args.fabric.as_deref(),
        )?;
        _demo = Some(p);
        target.endpoint = eps.first().cloned().unwrap_or_default();
    }
    let mut d = Drill::connect(&target).await?;
    let mut cycles = Vec::new();
    let mut marks = Vec::new();
    let mut aborted = None;
    let is_soak = args.scenario == Scenario::Soak;
    let seed = args.seed.unwrap_or_else(now_ms);
    let mut rng = soak::Rng::new(seed);
    let plan = if is_soak {
        soak::plan(&mut rng, args.cycles.max(1))
    } else {
        Vec::new()
    };
    if is_soak {
        eprintln!(
            "soak: seed {seed}, {} cycles: {}",
            plan.len(),
            plan.iter().map(|a| a.name()).collect::<Vec<_>>().join(" ")
        );
    }
    let mut snap = None;
    let begun = std::time::Instant::now();
    let mut stopped = None;
    for i in 1..=args.cycles.max(1) {
        if let Some(limit) = args.deadline.filter(|l| begun.elapsed() >= *l) {
            stopped = Some(format!(
                "deadline of {} s reached: stopped after {} of {} cycles",
                limit.as_secs(),
                i - 1,
                args.cycles
            ));
            break;
        }
        let action = usize::try_from(i - 1)
            .ok()
            .and_then(|k| plan.get(k))
            .copied();
        let r = match action {
            Some(a) => d.soak_cycle(a, i, &mut rng, &mut snap).await,
            None => d.cycle(args.scenario, i).await,
        };
        let c = match r {
            Ok(c) => c,
            // Still write the report of the cycles run (and this one's timeline); a
            // soak reports whatever stopped it.
            Err(e @ DrillError::Invariant(_)) => {
                aborted = Some(format!("cycle {i} aborted: {e}"));
                break;
            }
            Err(e) if is_soak => {
                aborted = Some(format!(
                    "cycle {i} ({}) aborted: {e}",
                    action.map_or("?", |a| a.name())
                ));
                break;
            }
            Err(e) => return Err(e),
        };
        eprintln!(
            "cycle {i}{}: {} -> {}: failover {:?} ms, degraded {:?} ms, heal {:?} ms, masterless {} ms, dual {} ms, LIDs changed {}, LFT unasked {}, writes lost {}",
            c.action.map_or(String::new(), |a| format!(" {a}")),
            c.old_master,
            c.new_master.as_deref().unwrap_or("none"),
            c.failover_ms,
            c.degraded_ms,
            c.heal_ms,
            c.masterless_ms,
            c.dual_master_ms,
            c.lid_changes,
            c.lft_unasked,
            c.writes_lost
        );
        marks.push((c.action_at, format!("#{i}")));
        cycles.push(c);
    }
    d.remove_marker().await;
    let end = d.poll().await?;
    let names: Vec<String> = d.members.iter().map(|m| m.name.clone()).collect();
    let (mut report, mut broken) = report(args, &cycles);
    if is_soak {
        report["seed"] = json!(seed);
        report["cycles_planned"] = json!(args.cycles);
        report["stopped_early"] = json!(stopped);
        report["deadline_s"] = json!(args.deadline.map(|d| d.as_secs()));
    }
    if let Some(why) = aborted {
        report["aborted"] = json!(why);
        report["invariants_ok"] = json!(false);
        broken = Some(broken.map_or(why.clone(), |b| format!("{b}; {why}")));
    }
    let text = report_text(args, &cycles, &report);
    let write = |name: &str, body: &str| {
        let p = args.report_dir.join(name);
        std::fs::write(&p, body).map_err(|e| DrillError::Setup(format!("{}: {e}", p.display())))
    };
    write("report.json", &format!("{report:#}\n"))?;
    write("report.txt", &text)?;
    write(
        "timeline.svg",
        &svg(
            &names,
            &d.changes,
            d.started.min(
                cycles
                    .first()
                    .map_or(end, |c| c.action_at.saturating_sub(500)),
            ),
            end,
            &marks,
        ),
    )?;
    if target.json {
        println!("{report}");
    } else {
        print!("{text}");
    }
    match broken {
        Some(why) => Err(DrillError::Invariant(why)),
        None => Ok(()),
    }
}

/// The JSON report and, if an invariant broke, why.
pub fn report(args: &DrillArgs, cycles: &[Cycle]) -> (Value, Option<String>) {
    let collect = |f: fn(&Cycle) -> Option<u64>| cycles.iter().filter_map(f).collect::<Vec<u64>>();
    let lid_changes: u64 = cycles.iter().map(|c| c.lid_changes).sum();
    let dual: u64 = cycles.iter().map(|c| c.dual_master_ms).sum();
    let dual_max = cycles.iter().map(|c| c.dual_master_ms).max().unwrap_or(0);
    let masterless_max = cycles
        .iter()
        .map(|c| c.masterless_max_ms)
        .max()
        .unwrap_or(0);
    let missing: Vec<u32> = cycles
        .iter()
        .filter(|c| c.new_master.is_none())
        .map(|c| c.index)
        .collect();
    let writes_lost: u64 = cycles.iter().map(|c| c.writes_lost).sum();
    let unacked: Vec<u32> = cycles
        .iter()
        .filter(|c| c.marker.is_some() && !c.marker_acked)
        .map(|c| c.index)
        .collect();
    let mut broken = Vec::new();
    if lid_changes > 0 {
        broken.push(format!("{lid_changes} LID changes"));
    }
    if !missing.is_empty() && args.scenario != Scenario::Soak {
        broken.push(format!("no new master in cycles {missing:?}"));
    }
    let soak_part =
        (args.scenario == Scenario::Soak).then(|| soak::report_part(cycles, &mut broken));
    if writes_lost > 0 {
        broken.push(format!("{writes_lost} acknowledged writes lost"));
    }
    if args.scenario == Scenario::RaftPartition {
        let pick = |f: fn(&Cycle) -> bool| -> Vec<u32> {
            cycles.iter().filter(|c| f(c)).map(|c| c.index).collect()
        };
        let moved = pick(|c| c.new_master.as_ref().is_some_and(|n| n != &c.old_master));
        if !moved.is_empty() {
            broken.push(format!(
                "mastership moved although only Raft was cut, in cycles {moved:?}"
            ));
        }
        let no_degraded = pick(|c| c.degraded_ms.is_none());
        if !no_degraded.is_empty() {
            broken.push(format!(
                "the isolated master never reported degraded within {DEGRADED_BOUND:?} in cycles {no_degraded:?}"
            ));
        }
        let stuck = pick(|c| c.heal_ms.is_none());
        if !stuck.is_empty() {
            broken.push(format!(
                "degraded did not clear after the heal in cycles {stuck:?}"
            ));
        }
        let diverged = pick(|c| c.converged != Some(true));
        if !diverged.is_empty() {
            broken.push(format!(
                "the replicas did not converge after the heal in cycles {diverged:?}"
            ));
        }
    }
    if dual_max > args.dual_master_bound_ms {
        broken.push(format!(
            "two masters for {dual_max} ms in one cycle (bound {} ms)",
            args.dual_master_bound_ms
        ));
    }
    let mut v = json!({
        "scenario": args.scenario.name(),
        "cycles": cycles.iter().map(Cycle::json).collect::<Vec<_>>(),
        "cycles_run": cycles.len(),
        "all_new_master_found": missing.is_empty(),
        "lid_changes": lid_changes,
        "masterless_ms_max": masterless_max,
        "dual_master_ms": dual,
        "dual_master_bound_ms": args.dual_master_bound_ms,
        "failover_ms": stats(&collect(|c| c.failover_ms)),
        "detection_ms": stats(&collect(|c| c.detection_ms)),
        "verified_ms": stats(&collect(|c| c.verified_ms)),
        "writes_lost": writes_lost,
        "markers_unacknowledged": unacked,
        "degraded_ms": stats(&collect(|c| c.degraded_ms)),
        "heal_ms": stats(&collect(|c| c.heal_ms)),
        "invariants_ok": broken.is_empty(),
        "broken": broken,
        "poller": if args.on_ibsim() {
            "ibsm.v1.Demo/PollSmInfo: the `ibsmd sminfo-poll` process under umad2sim on a spare HCA of ibsim, SMInfo by directed route every 10 ms"
        } else {
            "ibsm.v1.Demo/PollSmInfo: SMInfo by directed route from a spare CA port every 10 ms"
        },
        "fabric": args.fabric.as_deref().unwrap_or("demo default (embedded)"),
    });
    if let (Some(Value::Object(part)), Value::Object(map)) = (soak_part, &mut v) {
        map.extend(part);
    }
    let why = (!broken.is_empty()).then(|| broken.join("; "));
    (v, why)
}

fn fmt_opt(v: Option<u64>) -> String {
    v.map_or("-".into(), |v| v.to_string())
}

fn report_text(args: &DrillArgs, cycles: &[Cycle], r: &Value) -> String {
    if args.scenario == Scenario::Soak {
        return soak::report_text(cycles, r);
    }
    let mut out = format!("drill {} x{}\n", args.scenario.name(), cycles.len());
    out.push_str("CYCLE  OLD -> NEW   DETECT_MS  FAILOVER_MS  VERIFIED_MS  MASTERLESS_MS  DUAL_MS  LIDS_CHANGED  EPOCH\n");
    for c in cycles {
        out.push_str(&format!(
            "{:<5}  {:<11} {:>9}  {:>11}  {:>11}  {:>13}  {:>7}  {:>12}  {}->{}\n",
            c.index,
            format!(
                "{}->{}",
                c.old_master,
                c.new_master.as_deref().unwrap_or("none")
            ),
            fmt_opt(c.detection_ms),
            fmt_opt(c.failover_ms),
            fmt_opt(c.verified_ms),
            c.masterless_ms,
            c.dual_master_ms,
            c.lid_changes,
            c.epoch_before,
            c.epoch_after
        ));
        for d in c.lid_change_detail.iter().chain(&c.writes_lost_detail) {
            out.push_str(&format!("       {d}\n"));
        }
        if args.scenario == Scenario::RaftPartition {
            out.push_str(&format!(
                "       degraded after {} ms, cleared {} ms after the heal, replicas converged: {}\n",
                fmt_opt(c.degraded_ms),
                fmt_opt(c.heal_ms),
                c.converged.map_or("-".into(), |v| v.to_string())
            ));
        }
    }
    let s = |k: &str| {
        let v = &r[k];
        format!(
            "min {} / median {} / max {}",
            v["min"], v["median"], v["max"]
        )
    };
    out.push_str(&format!("failover ms:   {}\n", s("failover_ms")));
    out.push_str(&format!("detection ms:  {}\n", s("detection_ms")));
    out.push_str(&format!("verified ms:   {}\n", s("verified_ms")));
    out.push_str(&format!(
        "masterless max {} ms, dual master {} ms (bound {} ms), LID changes {}, writes lost {} (unacknowledged markers: {})\n",
        r["masterless_ms_max"],
        r["dual_master_ms"],
        args.dual_master_bound_ms,
        r["lid_changes"],
        r["writes_lost"],
        r["markers_unacknowledged"]
    ));
    if args.scenario == Scenario::RaftPartition {
        out.push_str(&format!("degraded ms:   {}\n", s("degraded_ms")));
        out.push_str(&format!("heal ms:       {}\n", s("heal_ms")));
    }
    out.push_str(&format!(
        "invariants: {}\n",
        if r["invariants_ok"] == true {
            "ok".to_string()
        } else {
            format!("BROKEN: {}", r["broken"])
        }
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unplugged_port_without_a_lid_is_no_lid_change_but_a_moved_lid_is() {
        let before: BTreeMap<u64, (u32, u32)> = [(1, (1, 0)), (2, (5, 0)), (3, (9, 0))].into();
        // The pulled master's port (1) is off the fabric; 3 lost its LID for real.
        let after: BTreeMap<u64, (u32, u32)> = [(2, (5, 0))].into();
        let mut c = Cycle::default();
        diff_lids(&before, &after, "after failover", Some(1), &mut c);
        assert_eq!(c.lid_changes, 1, "{:?}", c.lid_change_detail);
        assert!(c.lid_change_detail[0].contains("0x0000000000000003"));
        // Back on the fabric with another LID: a change, whatever the exemption.
        let moved: BTreeMap<u64, (u32, u32)> = [(1, (4, 0)), (2, (5, 0)), (3, (9, 0))].into();
        let mut c = Cycle::default();
        diff_lids(&before, &moved, "after restore", Some(1), &mut c);
        assert_eq!(c.lid_changes, 1);
        // Without the exemption a missing port counts.
        let mut c = Cycle::default();
        diff_lids(&before, &after, "after failover", None, &mut c);
        assert_eq!(c.lid_changes, 2);
    }

    fn ch(at: u64, seq: u64, name: &str, state: Option<&'static str>) -> Change {
        Change {
            at,
            seq,
            name: name.into(),
            state,
        }
    }

    #[test]
    fn gaps_and_dual_masters() {
        let t = vec![
            ch(0, 1, "a", Some("MASTER")),
            ch(0, 2, "b", Some("STANDBY")),
            ch(100, 3, "a", None),
            ch(150, 4, "b", Some("DISCOVERING")),
            ch(400, 5, "b", Some("MASTER")),
            ch(500, 6, "a", Some("MASTER")),
            ch(520, 7, "b", Some("STANDBY")),
        ];
        let g = master_gaps_windows(&t, 0, 1000);
        assert_eq!(
            (g.none_total, g.none_max, g.dual, g.dual_windows),
            (300, 300, 20, 1)
        );
        // Clipped to a window.
        let g = master_gaps_windows(&t, 200, 450);
        assert_eq!((g.none_total, g.none_max, g.dual), (200, 200, 0));
        // Nothing seen yet is not "no master": the timeline starts at the first round.
        assert_eq!(master_gaps_windows(&[], 0, 10), Gaps::default());
        // Two separate stretches with two masters are two windows.
        let mut two = t.clone();
        two.push(ch(600, 8, "b", Some("MASTER")));
        two.push(ch(610, 9, "b", Some("STANDBY")));
        assert_eq!(master_gaps_windows(&two, 0, 1000).dual_windows, 2);
    }

    #[test]
    fn stats_and_invariants() {
        assert_eq!(stats(&[30, 10, 20])["median"], 20);
        assert_eq!(stats(&[])["min"], Value::Null);
        let args = DrillArgs {
            scenario: Scenario::KillMaster,
            cycles: 2,
            start_demo: false,
            ibsmd: None,
            report_dir: PathBuf::from("x"),
            dual_master_bound_ms: 0,
            fabric: None,
            seed: None,
            deadline: None,
        };
        let ok = Cycle {
            index: 1,
            new_master: Some("sm2".into()),
            failover_ms: Some(400),
            ..Cycle::default()
        };
        let (r, why) = report(&args, std::slice::from_ref(&ok));
        assert!(why.is_none(), "{why:?}");
        assert_eq!(r["failover_ms"]["max"], 400);
        let bad = Cycle {
            index: 2,
            lid_changes: 1,
            dual_master_ms: 10,
            ..Cycle::default()
        };
        let (r, why) = report(&args, &[ok, bad]);
        let why = why.unwrap_or_default();
        assert!(
            why.contains("LID") && why.contains("no new master") && why.contains("two masters"),
            "{why}"
        );
        assert_eq!(r["invariants_ok"], false);
    }

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

    #[test]
    fn the_marker_p_key_is_a_valid_partition_key() {
        // 15-bit base key, neither 0 (invalid) nor 0x7fff (the default partition).
        assert!((1..0x7fff).contains(&MARKER_P_KEY));
    }

    #[test]
    fn a_lost_write_and_a_raft_partition_without_degraded_break_the_drill() {
        let mut args = DrillArgs {
            scenario: Scenario::KillMaster,
            cycles: 1,
            start_demo: false,
            ibsmd: None,
            report_dir: PathBuf::from("x"),
            dual_master_bound_ms: 0,
            fabric: None,
            seed: None,
            deadline: None,
        };
        let lost = Cycle {
            index: 1,
            old_master: "sm1".into(),
            new_master: Some("sm2".into()),
            marker: Some("m".into()),
            marker_acked: true,
            writes_lost: 1,
            ..Cycle::default()
        };
        let (r, why) = report(&args, std::slice::from_ref(&lost));
        assert_eq!(r["writes_lost"], 1);
        assert!(why.unwrap_or_default().contains("writes lost"));
        args.scenario = Scenario::RaftPartition;
        let kept = Cycle {
            index: 1,
            old_master: "sm1".into(),
            new_master: Some("sm1".into()),
            degraded_ms: Some(700),
            heal_ms: Some(300),
            converged: Some(true),
            ..Cycle::default()
        };
        let (r, why) = report(&args, std::slice::from_ref(&kept));
        assert!(why.is_none(), "{why:?}");
        assert_eq!(r["degraded_ms"]["max"], 700);
        let bad = Cycle {
            index: 2,
            new_master: Some("sm2".into()),
            degraded_ms: None,
            converged: Some(false),
            ..kept.clone()
        };
        let why = report(&args, &[kept, bad]).1.unwrap_or_default();
        assert!(
            why.contains("mastership moved")
                && why.contains("never reported degraded")
                && why.contains("did not converge"),
            "{why}"
        );
    }

    #[test]
    fn svg_has_a_lane_per_sm() {
        let t = vec![
            ch(0, 1, "sm1", Some("MASTER")),
            ch(50, 2, "sm2", Some("STANDBY")),
            ch(60, 3, "sm1", None),
        ];
        let names = vec!["sm1".to_string(), "sm2".to_string(), "sm3".to_string()];
        let s = svg(&names, &t, 0, 100, &[(60, "#1 <kill>".into())]);
        assert_eq!(s.matches("class=\"lane\"").count(), 3);
        assert!(s.contains("#2e7d32") && s.contains("&lt;kill&gt;"));
        assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
    }
}
