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
use std::time::Duration;

use ibsm_proto::v1 as pb;
use ibsm_proto::v1::control_client::ControlClient;
use ibsm_proto::v1::demo_client::DemoClient;
use ibsm_proto::v1::fabric_client::FabricClient;
use serde_json::{json, Value};

use crate::args::fmt_guid;
use crate::control::{channel, unary, AuthChannel, CtlError, Target};

mod options;
mod soak;
mod summary;
mod timeline;

pub use options::{DrillArgs, DrillError, Scenario};

use summary::{stats, Cycle};
use timeline::{master_gaps_windows, now_ms, state_of, svg, Change};

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
}
