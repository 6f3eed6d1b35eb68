//! The `soak` scenario: one drill that mixes six actions on the demo on ibsim and,
//! after every cycle, reads the LIDs and LFTs back from the fabric and the replicated
//! state from every member.
//!
//! Actions (per block of six cycles, a permutation drawn from a seeded RNG, so `--cycles
//! 6` runs each once and a run is replayed with the seed the report prints):
//!
//! | action | what | expected |
//! |---|---|---|
//! | `kill-master` | SIGKILL of the MASTER, restart | a new master; failover measured |
//! | `kill-standby` | SIGKILL of a standby (RNG), restart | the master keeps mastership while it is down |
//! | `raft-isolation` | the MASTER's Raft traffic cut (`--fault-injection` on the member), healed | master kept, `degraded`, replicas converge |
//! | `smp-loss` | 5 % SMP loss on a cable (ibsim `Error`, then rate 0) for [`SMP_LOSS_HOLD`] | master kept |
//! | `link-flap` | a cable unlinked until the master re-swept, then linked again | master kept, rerouted and back |
//! | `planned-handover` | `Control/Handover` on the MASTER | a new master; failover measured |
//!
//! The faulted cable (RNG) is a switch-to-switch cable that the SMInfo judge's
//! directed routes do not cross (a fault there must not blind the judge); without one,
//! the CA cable of a standby. "Master kept" is judged on the wire (the poller) from the
//! action to the restore: no other SM seen MASTER, the master never seen leaving it.
//! After the restore a restarted standby of higher priority may take the subnet back
//! through a handover; that part is still under the dual-master check.
//!
//! After every cycle, once stable ([`Drill::wait_stable`]): `Demo/ReadFabric` runs
//! `ibnetdiscover -p` and `ibroute LID` per switch on the poller's HCA, and the drill
//! asks the master, with `Fabric/GetRoute(switch LID, LID)` for every switch and LID,
//! which out port its routing wants at each switch. Compared with the snapshot after
//! the previous cycle (the first one taken before cycle 1):
//!
//! - LID changes: a port GUID whose LID on the wire changed or vanished, or whose LID
//!   differs from the master's `GetLids`.
//! - LFT entries changed that routing did not ask for: an entry (switch, LID) of the
//!   fabric that changed although the master's routing for it did not change, or that
//!   changed to something else than the routing's new choice; and any entry where the
//!   fabric and the routing disagree now. A link flap may reroute during the cycle;
//!   after the cable is back the routing asks for its old choice (or a new one) and the
//!   switches must hold exactly that. Changes routing asked for are counted apart
//!   (`lft_asked`).
//! - Reads settle first: a heavy sweep may still be programming the switches when the
//!   master publishes its view (and a LID-routed `ibroute` fails while the path to a
//!   switch is being reprogrammed), so the read is repeated every 500 ms until the
//!   switches hold what routing wants, for at most 20 s; whatever still disagrees then
//!   counts, and the note says how many reads it took.
//! - Replicated state: every member at the same epoch and applied index (twice in a
//!   row), every member's `GetLids` (a standby answers from its replica: guid2lid)
//!   equal to the master's, and the cycle's marker partition listed by every member
//!   (the writes-lost check of every drill).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use ibsm_proto::v1 as pb;
use serde_json::{json, Value};

use crate::args::fmt_guid;
use crate::control::unary;
use crate::drill::cycle::diff_lids;
use crate::drill::options::{DrillError, Scenario};
use crate::drill::scenarios::Restore;
use crate::drill::session::Drill;
use crate::drill::summary::Cycle;
use crate::drill::timeline::{master_gaps_windows, now_ms, Change};

/// How long the 5 % SMP loss stays on a cable.
pub const SMP_LOSS_HOLD: Duration = Duration::from_secs(5);

/// The loss rate of the `smp-loss` action, in percent.
pub const SMP_LOSS_PERCENT: u32 = 5;

/// How long a killed standby stays down.
const STANDBY_DOWN: Duration = Duration::from_secs(2);

/// How long the master may take to re-sweep after a cable went down or came back.
const RESWEEP_TIMEOUT: Duration = Duration::from_secs(20);

/// How long the switches may take to hold what routing wants after a cycle.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(20);

/// Between two fabric reads while they settle.
const SETTLE_STEP: Duration = Duration::from_millis(500);

/// How long `Demo/ReadFabric` may take (one ibnetdiscover, one ibroute per switch).
const READ_FABRIC_TIMEOUT: Duration = Duration::from_secs(120);

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

/// What the fabric holds and what the master's routing wants, after a cycle.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FabricSnap {
    /// Port GUID -> LID on the wire (`ibnetdiscover -p`).
    pub lids: BTreeMap<u64, u32>,
    pub names: BTreeMap<u64, String>,
    /// (switch GUID, LID) -> out port in the switch's LFT (`ibroute`).
    pub lft: BTreeMap<(u64, u32), u32>,
    /// (switch GUID, LID) -> out port the master's routing wants (`GetRoute`).
    pub intent: BTreeMap<(u64, u32), u32>,
    /// Port GUID -> LID in the master's `GetLids`.
    pub master_lids: BTreeMap<u64, u32>,
}

/// What one comparison of two snapshots found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FabricDiff {
    pub lid_changes: u64,
    pub lft_unasked: u64,
    pub lft_asked: u64,
    pub detail: Vec<String>,
}

/// Compare the snapshot after a cycle with the one before it (see the module doc).
pub fn diff_fabric(prev: &FabricSnap, now: &FabricSnap) -> FabricDiff {
    let mut d = FabricDiff::default();
    let name = |g: &u64| {
        now.names
            .get(g)
            .or_else(|| prev.names.get(g))
            .cloned()
            .unwrap_or_else(|| fmt_guid(*g))
    };
    for (g, lid) in &prev.lids {
        match now.lids.get(g) {
            Some(l) if l == lid => {}
            Some(l) => {
                d.lid_changes += 1;
                d.detail
                    .push(format!("fabric: {} LID {lid} -> {l}", name(g)));
            }
            None => {
                d.lid_changes += 1;
                d.detail.push(format!(
                    "fabric: {} (LID {lid}) gone from the wire",
                    name(g)
                ));
            }
        }
    }
    for (g, lid) in &now.lids {
        if let Some(m) = now.master_lids.get(g).filter(|m| *m != lid) {
            d.lid_changes += 1;
            d.detail.push(format!(
                "fabric: {} has LID {lid}, the master's GetLids says {m}",
                name(g)
            ));
        }
    }
    let keys: BTreeSet<&(u64, u32)> = prev
        .lft
        .keys()
        .chain(now.lft.keys())
        .chain(now.intent.keys())
        .collect();
    for k in keys {
        let (f0, f1) = (prev.lft.get(k), now.lft.get(k));
        let (i0, i1) = (prev.intent.get(k), now.intent.get(k));
        let changed = f0 != f1;
        let asked = changed && i0 != i1 && f1 == i1;
        let disagrees = f1 != i1;
        let show = |v: Option<&u32>| v.map_or("none".to_string(), u32::to_string);
        if asked {
            d.lft_asked += 1;
        } else if changed || disagrees {
            d.lft_unasked += 1;
            d.detail.push(format!(
                "LFT of {} for LID {}: port {} -> {} (routing wanted {} then {})",
                name(&k.0),
                k.1,
                show(f0),
                show(f1),
                show(i0),
                show(i1)
            ));
        }
    }
    d
}

/// A fault the cycle set and must undo.
enum Undo {
    Drill(Restore),
    Cable { node: String, port: u32 },
}

impl Drill {
    /// The fabric as `Demo/ReadFabric` reads it and `master`'s routing for it.
    async fn fabric_snap(&mut self, master: &str) -> Result<FabricSnap, DrillError> {
        let mut t = self.target.clone();
        t.rpc_timeout = t.rpc_timeout.max(READ_FABRIC_TIMEOUT);
        let rf = unary(
            &t,
            "ReadFabric",
            self.demo.read_fabric(pb::ReadFabricRequest {}),
        )
        .await?;
        let mut s = FabricSnap::default();
        for l in &rf.lids {
            s.lids.insert(l.port_guid, l.lid);
            s.names.insert(l.port_guid, l.description.clone());
        }
        for sw in &rf.switches {
            for e in &sw.entries {
                s.lft.insert((sw.node_guid, e.lid), e.port);
            }
        }
        s.master_lids = self
            .lids(master)
            .await?
            .into_iter()
            .map(|(g, (lid, _))| (g, lid))
            .collect();
        let dsts: Vec<u32> = rf.lids.iter().map(|l| l.lid).collect();
        let m = self.member(master)?;
        let mt = m.target.clone();
        for sw in &rf.switches {
            for dst in &dsts {
                let r = unary(
                    &mt,
                    "GetRoute",
                    m.fabric.get_route(pb::GetRouteRequest {
                        src_lid: sw.lid,
                        dst_lid: *dst,
                    }),
                )
                .await;
                // No route (a dead end) is "no entry", like ibroute's unassigned ones.
                if let Some(h) = r
                    .ok()
                    .and_then(|r| r.hops.into_iter().next())
                    .filter(|h| h.node_guid == sw.node_guid)
                {
                    s.intent.insert((sw.node_guid, *dst), h.out_port);
                }
            }
        }
        Ok(s)
    }

    /// [`Drill::fabric_snap`] once the switches hold what the master's routing wants
    /// (a heavy sweep may still be programming them, and a LID-routed `ibroute` fails
    /// while the path to a switch is being reprogrammed): read again every
    /// [`SETTLE_STEP`] until they agree or [`SETTLE_TIMEOUT`] passes, then the last
    /// read (whatever still disagrees counts). The number of extra reads is returned.
    async fn settled_snap(&mut self, master: &str) -> Result<(FabricSnap, u32), DrillError> {
        let deadline = now_ms() + u64::try_from(SETTLE_TIMEOUT.as_millis()).unwrap_or(20_000);
        let mut retries = 0;
        loop {
            let r = self.fabric_snap(master).await;
            let agrees = r.as_ref().is_ok_and(|s| s.lft == s.intent);
            if agrees || now_ms() > deadline {
                return r.map(|s| (s, retries));
            }
            retries += 1;
            self.poll().await?;
            tokio::time::sleep(SETTLE_STEP).await;
        }
    }

    /// Every member's `GetLids` equal to the master's; the mismatches.
    async fn guid2lid_mismatches(&mut self, master: &str) -> Result<Vec<String>, DrillError> {
        let want = self.lids(master).await?;
        let names: Vec<String> = self.members.iter().map(|m| m.name.clone()).collect();
        let mut out = Vec::new();
        for n in names.iter().filter(|n| *n != master) {
            match self.lids(n).await {
                Ok(got) if got == want => {}
                Ok(got) => {
                    let differ = want.iter().filter(|(g, l)| got.get(g) != Some(l)).count()
                        + got.keys().filter(|g| !want.contains_key(g)).count();
                    out.push(format!(
                        "{n}'s guid2lid differs from the master's in {differ} ports"
                    ));
                }
                Err(e) => out.push(format!("{n}: GetLids: {e}")),
            }
        }
        Ok(out)
    }

    /// The cable a fault goes on: a switch-to-switch cable off the judge's routes,
    /// else the CA cable of a standby of `master`.
    async fn fault_cable(&mut self, master: &str, rng: &mut Rng) -> Result<pb::Cable, DrillError> {
        let t = self.target.clone();
        let list = unary(
            &t,
            "ListCables",
            self.demo.list_cables(pb::ListCablesRequest {}),
        )
        .await?
        .cables;
        let mut pick: Vec<&pb::Cable> = list
            .iter()
            .filter(|c| c.switch_to_switch && !c.judge_path && c.up)
            .collect();
        if pick.is_empty() {
            pick = list
                .iter()
                .filter(|c| !c.sm.is_empty() && c.sm != master && !c.judge_path && c.up)
                .collect();
        }
        pick.get(rng.below(pick.len()))
            .map(|c| (*c).clone())
            .ok_or_else(|| {
                DrillError::Setup(
                    "no cable to fault: the net file has no switch-to-switch cable off the \
                     judge's routes and no standby CA cable"
                        .into(),
                )
            })
    }

    async fn cable_fault(
        &mut self,
        node: &str,
        port: u32,
        up: bool,
        loss_percent: u32,
    ) -> Result<(), DrillError> {
        let t = self.target.clone();
        unary(
            &t,
            "SetCableFault",
            self.demo.set_cable_fault(pb::SetCableFaultRequest {
                node: node.to_string(),
                port,
                up,
                loss_percent,
            }),
        )
        .await?;
        Ok(())
    }

    /// Poll the wire for `d`.
    async fn hold(&mut self, d: Duration) -> Result<(), DrillError> {
        let until = now_ms() + u64::try_from(d.as_millis()).unwrap_or(0);
        while now_ms() < until {
            self.poll().await?;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// `name`'s cable count in its master view (GetTopology), if it answers as master.
    async fn links(&mut self, name: &str) -> Option<u32> {
        let m = self.member(name).ok()?;
        let t = m.target.clone();
        unary(
            &t,
            "GetTopology",
            m.fabric.get_topology(pb::GetTopologyRequest {}),
        )
        .await
        .ok()
        .filter(|v| v.source == "master")
        .map(|v| v.links)
    }

    /// `name` answers GetTopology from a master view taken after `since` whose cable
    /// count `links_ok` accepts (the cable seen down, or back), within `timeout` (the
    /// ms since `since`, or `None`).
    async fn resweep(
        &mut self,
        name: &str,
        since: u64,
        timeout: Duration,
        links_ok: impl Fn(u32) -> bool,
    ) -> Result<Option<u64>, DrillError> {
        let deadline = now_ms() + u64::try_from(timeout.as_millis()).unwrap_or(20_000);
        loop {
            self.poll().await?;
            let m = self.member(name)?;
            let t = m.target.clone();
            if let Ok(v) = unary(
                &t,
                "GetTopology",
                m.fabric.get_topology(pb::GetTopologyRequest {}),
            )
            .await
            {
                if v.source == "master" && v.taken_unix_ms >= since && links_ok(v.links) {
                    return Ok(Some(now_ms().saturating_sub(since)));
                }
            }
            if now_ms() > deadline {
                return Ok(None);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// kill-standby, smp-loss, link-flap: the master must keep mastership from the
    /// action to the restore.
    async fn cycle_keep_master(
        &mut self,
        action: Action,
        index: u32,
        rng: &mut Rng,
        start: Option<&FabricSnap>,
    ) -> Result<Cycle, DrillError> {
        let master = self.wait_stable().await?;
        let before = self.lids(&master).await?;
        let epoch_before = self.epoch(&master).await;
        let marker = self.write_marker(&master, index).await?;
        let t = self.target.clone();
        let mut off_fabric = None;
        let links_before = self.links(&master).await.unwrap_or(0);
        let t0 = self.poll().await?.max(now_ms());
        let (note, undo) = match action {
            Action::KillStandby => {
                let standbys: Vec<String> = self
                    .members
                    .iter()
                    .filter(|m| m.name != master)
                    .map(|m| m.name.clone())
                    .collect();
                let victim = standbys
                    .get(rng.below(standbys.len()))
                    .cloned()
                    .ok_or_else(|| DrillError::Setup("no standby to kill".into()))?;
                unary(
                    &t,
                    "KillInstance",
                    self.demo.kill_instance(pb::KillInstanceRequest {
                        name: victim.clone(),
                        ..Default::default()
                    }),
                )
                .await?;
                (
                    format!("standby {victim} killed"),
                    Undo::Drill(Restore::Restart(victim)),
                )
            }
            Action::SmpLoss | Action::LinkFlap => {
                let cable = self.fault_cable(&master, rng).await?;
                let what = format!(
                    "\"{}\"[{}]-\"{}\"[{}]",
                    cable.node, cable.port, cable.remote, cable.remote_port
                );
                if action == Action::SmpLoss {
                    self.cable_fault(&cable.node, cable.port, true, SMP_LOSS_PERCENT)
                        .await?;
                } else {
                    if !cable.sm.is_empty() {
                        off_fabric = Some(self.port_guid(&cable.sm).await).filter(|g| *g != 0);
                    }
                    self.cable_fault(&cable.node, cable.port, false, 0).await?;
                }
                (
                    if action == Action::SmpLoss {
                        format!("{SMP_LOSS_PERCENT}% SMP loss on {what}")
                    } else {
                        format!("cable {what} unlinked")
                    },
                    Undo::Cable {
                        node: cable.node,
                        port: cable.port,
                    },
                )
            }
            _ => {
                return Err(DrillError::Setup(format!(
                    "{} is not a keep-master action",
                    action.name()
                )))
            }
        };
        let mut c = Cycle {
            index,
            old_master: master.clone(),
            action_at: t0,
            epoch_before,
            note,
            ..Cycle::default()
        };
        c.set_marker(&marker);
        match action {
            Action::KillStandby => self.hold(STANDBY_DOWN).await?,
            Action::SmpLoss => self.hold(SMP_LOSS_HOLD).await?,
            _ => {
                // The master re-swept and saw the cable down (a trap, or its light sweep).
                let down = |l: u32| l < links_before;
                if self
                    .resweep(&master, t0, RESWEEP_TIMEOUT, down)
                    .await?
                    .is_none()
                {
                    c.note
                        .push_str("; no master re-sweep seen with the cable down");
                } else if let Some(start) = start {
                    // Rerouted around the cable: every change routing asked for, the
                    // switches holding exactly what it wants.
                    let (mid, _) = self.settled_snap(&master).await?;
                    let d = diff_fabric(start, &mid);
                    c.lft_rerouted = Some(d.lft_asked);
                    c.note.push_str(&format!(
                        "; {} LFT entries rerouted with it down",
                        d.lft_asked
                    ));
                    c.lft_unasked += d.lft_unasked;
                    c.lft_detail.extend(
                        d.detail
                            .into_iter()
                            .filter(|x| !x.starts_with("fabric:"))
                            .map(|x| format!("with the cable down: {x}")),
                    );
                }
            }
        }
        let during = self.lids(&master).await?;
        diff_lids(&before, &during, "during the fault", off_fabric, &mut c);
        let t_restore = self.poll().await?.max(now_ms());
        match undo {
            Undo::Drill(r) => self.restore(r).await?,
            Undo::Cable { node, port } => {
                self.cable_fault(&node, port, true, 0).await?;
                if action == Action::LinkFlap
                    && self
                        .resweep(&master, t_restore, RESWEEP_TIMEOUT, |l| l >= links_before)
                        .await?
                        .is_none()
                {
                    c.note
                        .push_str("; no master re-sweep seen after the cable came back");
                }
            }
        }
        self.check_marker(&marker, &mut c).await?;
        let settled = self.wait_stable().await?;
        let end = self.lids(&settled).await?;
        diff_lids(&before, &end, "after restore", None, &mut c);
        c.epoch_after = self.epoch(&settled).await;
        c.end_at = self.poll().await?;
        let mut after: Vec<&Change> = self
            .changes
            .iter()
            .filter(|x| x.at >= t0 && x.at < t_restore.max(t0 + 1))
            .collect();
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
            None if !left => Some(master.clone()),
            None => None,
        };
        c.detection_ms = after
            .iter()
            .find(|x| x.name != master && matches!(x.state, Some("DISCOVERING" | "MASTER")))
            .map(|x| x.at.saturating_sub(t0));
        if settled != master {
            c.note
                .push_str(&format!("; {settled} took the subnet after the restore"));
        }
        let g = master_gaps_windows(&self.changes, t0, c.end_at);
        c.masterless_ms = g.none_total;
        c.masterless_max_ms = g.none_max;
        c.dual_master_ms = g.dual;
        c.dual_windows = g.dual_windows;
        Ok(c)
    }

    /// One soak cycle: the action, then the fabric and replica checks.
    pub(super) async fn soak_cycle(
        &mut self,
        action: Action,
        index: u32,
        rng: &mut Rng,
        prev: &mut Option<FabricSnap>,
    ) -> Result<Cycle, DrillError> {
        if prev.is_none() {
            let m = self.wait_stable().await?;
            *prev = Some(self.settled_snap(&m).await?.0);
        }
        let mut c = match action {
            Action::KillMaster => self.cycle(Scenario::KillMaster, index).await?,
            Action::PlannedHandover => self.cycle(Scenario::PlannedHandover, index).await?,
            Action::RaftIsolation => self.cycle_raft_partition(index).await?,
            _ => {
                let start = prev.clone();
                self.cycle_keep_master(action, index, rng, start.as_ref())
                    .await?
            }
        };
        c.action = Some(action.name());
        if !action.moves_master() {
            // Only master-moving actions have a failover time.
            c.failover_ms = None;
            c.verified_ms = None;
        }
        if c.dual_windows == 0 && c.dual_master_ms > 0 {
            c.dual_windows = master_gaps_windows(&self.changes, c.action_at, c.end_at).dual_windows;
        }
        // The fabric and the replicas, once stable.
        let master = self.wait_stable().await?;
        let (now, rereads) = self.settled_snap(&master).await?;
        if rereads > 0 {
            c.note.push_str(&format!(
                "; fabric read {} times before it settled",
                rereads + 1
            ));
        }
        let d = diff_fabric(prev.as_ref().unwrap_or(&now), &now);
        c.lid_changes += d.lid_changes;
        c.lid_change_detail.extend(
            d.detail
                .iter()
                .filter(|x| x.starts_with("fabric:"))
                .cloned(),
        );
        c.lft_unasked += d.lft_unasked;
        c.lft_asked = d.lft_asked;
        c.lft_detail
            .extend(d.detail.into_iter().filter(|x| !x.starts_with("fabric:")));
        *prev = Some(now);
        let converged = self.wait_converged().await?;
        c.converged = Some(c.converged.unwrap_or(true) && converged);
        c.guid2lid_detail = self.guid2lid_mismatches(&master).await?;
        Ok(c)
    }
}

/// The soak's part of the JSON report: per-action counts and the soak invariants.
pub fn report_part(cycles: &[Cycle], broken: &mut Vec<String>) -> Value {
    let mut per: BTreeMap<&str, u64> = BTreeMap::new();
    for a in ACTIONS {
        per.insert(a.name(), 0);
    }
    for c in cycles {
        if let Some(a) = c.action {
            *per.entry(a).or_insert(0) += 1;
        }
    }
    let pick = |f: &dyn Fn(&Cycle) -> bool| -> Vec<u32> {
        cycles.iter().filter(|c| f(c)).map(|c| c.index).collect()
    };
    let moving = |c: &Cycle| {
        ACTIONS
            .iter()
            .any(|a| Some(a.name()) == c.action && a.moves_master())
    };
    let kept_expected = pick(&|c| !moving(c) && c.new_master.as_deref() != Some(&c.old_master));
    if !kept_expected.is_empty() {
        broken.push(format!(
            "mastership moved (or the master left MASTER) under a fault that must not move it, in cycles {kept_expected:?}"
        ));
    }
    let not_moved = pick(&|c| {
        moving(c)
            && c.new_master
                .as_deref()
                .is_none_or(|n| n == c.old_master.as_str())
    });
    if !not_moved.is_empty() {
        broken.push(format!("no new master in cycles {not_moved:?}"));
    }
    let raft = |c: &Cycle| c.action == Some(Action::RaftIsolation.name());
    let no_degraded = pick(&|c| raft(c) && c.degraded_ms.is_none());
    if !no_degraded.is_empty() {
        broken.push(format!(
            "the Raft-isolated master never reported degraded in cycles {no_degraded:?}"
        ));
    }
    let stuck = pick(&|c| raft(c) && c.heal_ms.is_none());
    if !stuck.is_empty() {
        broken.push(format!(
            "degraded did not clear after the heal in cycles {stuck:?}"
        ));
    }
    let diverged = pick(&|c| c.converged != Some(true));
    if !diverged.is_empty() {
        broken.push(format!(
            "the replicas did not converge (epoch, applied index) in cycles {diverged:?}"
        ));
    }
    let g2l = pick(&|c| !c.guid2lid_detail.is_empty());
    if !g2l.is_empty() {
        broken.push(format!(
            "a member's replicated guid2lid differs from the master's in cycles {g2l:?}"
        ));
    }
    let lft: u64 = cycles.iter().map(|c| c.lft_unasked).sum();
    if lft > 0 {
        broken.push(format!(
            "{lft} LFT entries changed that routing did not ask for"
        ));
    }
    let windows: u64 = cycles.iter().map(|c| c.dual_windows).sum();
    json!({
        "actions": per,
        "lft_unasked": lft,
        "lft_asked": cycles.iter().map(|c| c.lft_asked).sum::<u64>(),
        "lft_rerouted_during_flaps": cycles.iter().filter_map(|c| c.lft_rerouted).collect::<Vec<u64>>(),
        "dual_master_windows": windows,
        "replicas_converged_every_cycle": diverged.is_empty(),
        "guid2lid_mismatch_cycles": g2l,
    })
}

fn opt(v: Option<u64>) -> String {
    v.map_or("-".into(), |v| v.to_string())
}

/// The soak's text report: one line per cycle, then the summary table.
pub fn report_text(cycles: &[Cycle], r: &Value) -> String {
    let mut out = format!(
        "soak x{} (seed {}{})\n",
        cycles.len(),
        r["seed"],
        r["stopped_early"]
            .as_str()
            .map_or(String::new(), |s| format!("; {s}"))
    );
    out.push_str("CYCLE  ACTION            OLD -> NEW   FAILOVER_MS  MASTERLESS_MS  DUAL  LIDS  LFT_UNASKED  LFT_ASKED  LOST  NOTE\n");
    for c in cycles {
        out.push_str(&format!(
            "{:<5}  {:<16}  {:<11}  {:>11}  {:>13}  {:>4}  {:>4}  {:>11}  {:>9}  {:>4}  {}\n",
            c.index,
            c.action.unwrap_or("-"),
            format!(
                "{}->{}",
                c.old_master,
                c.new_master.as_deref().unwrap_or("none")
            ),
            opt(c.failover_ms),
            c.masterless_ms,
            c.dual_windows,
            c.lid_changes,
            c.lft_unasked,
            c.lft_asked,
            c.writes_lost,
            c.note
        ));
        for d in c
            .lid_change_detail
            .iter()
            .chain(&c.lft_detail)
            .chain(&c.writes_lost_detail)
            .chain(&c.guid2lid_detail)
        {
            out.push_str(&format!("       {d}\n"));
        }
    }
    let f = &r["failover_ms"];
    let per = r["actions"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    let rows = [
        ("cycles", format!("{}", r["cycles_run"])),
        ("LID changes", format!("{}", r["lid_changes"])),
        (
            "LFT entries changed unasked",
            format!(
                "{} (asked by routing: {})",
                r["lft_unasked"], r["lft_asked"]
            ),
        ),
        (
            "two-master windows (sminfo poller)",
            format!("{} ({} ms)", r["dual_master_windows"], r["dual_master_ms"]),
        ),
        ("acknowledged writes lost", format!("{}", r["writes_lost"])),
        (
            "failover ms min/median/max",
            format!(
                "{} / {} / {} (n={})",
                f["min"], f["median"], f["max"], f["n"]
            ),
        ),
        (
            "replicas converged every cycle",
            format!("{}", r["replicas_converged_every_cycle"]),
        ),
        ("actions", per),
    ];
    out.push_str("\n| metric | value |\n|---|---|\n");
    for (k, v) in rows {
        out.push_str(&format!("| {k} | {v} |\n"));
    }
    out.push_str(&format!(
        "\ninvariants: {}\n",
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

    fn snap(lft: &[((u64, u32), u32)], intent: &[((u64, u32), u32)]) -> FabricSnap {
        FabricSnap {
            lids: [(1, 1), (2, 2), (10, 10)].into(),
            master_lids: [(1, 1), (2, 2), (10, 10)].into(),
            lft: lft.iter().copied().collect(),
            intent: intent.iter().copied().collect(),
            ..FabricSnap::default()
        }
    }

    #[test]
    fn routing_that_asked_for_a_change_is_not_counted_but_drift_is() {
        let s = (10, 0);
        let base = snap(&[((10, 1), 3), ((10, 2), 5)], &[((10, 1), 3), ((10, 2), 5)]);
        // Nothing changed.
        assert_eq!(diff_fabric(&base, &base), FabricDiff::default());
        let _ = s;
        // Routing moved LID 2 to port 3 and the switch followed: asked.
        let rerouted = snap(&[((10, 1), 3), ((10, 2), 3)], &[((10, 1), 3), ((10, 2), 3)]);
        let d = diff_fabric(&base, &rerouted);
        assert_eq!((d.lft_asked, d.lft_unasked), (1, 0), "{d:?}");
        // The switch changed LID 1 although routing did not: unasked.
        let drift = snap(&[((10, 1), 5), ((10, 2), 5)], &[((10, 1), 3), ((10, 2), 5)]);
        let d = diff_fabric(&base, &drift);
        assert_eq!((d.lft_asked, d.lft_unasked), (0, 1), "{d:?}");
        assert!(d.detail[0].contains("LID 1"), "{d:?}");
        // Routing changed its mind but the switch holds something else: unasked.
        let wrong = snap(&[((10, 1), 3), ((10, 2), 7)], &[((10, 1), 3), ((10, 2), 3)]);
        assert_eq!(diff_fabric(&base, &wrong).lft_unasked, 1);
        // The switch lost an entry (unassigned) routing still wants: unasked.
        let lost = snap(&[((10, 1), 3)], &[((10, 1), 3), ((10, 2), 5)]);
        assert_eq!(diff_fabric(&base, &lost).lft_unasked, 1);
    }

    #[test]
    fn a_lid_change_on_the_wire_or_against_the_master_is_counted() {
        let base = snap(&[], &[]);
        let mut moved = base.clone();
        moved.lids.insert(2, 7);
        moved.master_lids.insert(2, 7);
        let d = diff_fabric(&base, &moved);
        assert_eq!(d.lid_changes, 1, "{d:?}");
        let mut gone = base.clone();
        gone.lids.remove(&1);
        assert_eq!(diff_fabric(&base, &gone).lid_changes, 1);
        let mut disagree = base.clone();
        disagree.master_lids.insert(10, 11);
        assert_eq!(diff_fabric(&base, &disagree).lid_changes, 1);
    }

    #[test]
    fn soak_invariants_break_on_a_moved_master_or_a_missing_failover() {
        let kept = Cycle {
            index: 1,
            action: Some("smp-loss"),
            old_master: "sm1".into(),
            new_master: Some("sm1".into()),
            converged: Some(true),
            ..Cycle::default()
        };
        let failover = Cycle {
            index: 2,
            action: Some("kill-master"),
            old_master: "sm1".into(),
            new_master: Some("sm2".into()),
            converged: Some(true),
            ..Cycle::default()
        };
        let mut broken = Vec::new();
        let v = report_part(&[kept.clone(), failover.clone()], &mut broken);
        assert!(broken.is_empty(), "{broken:?}");
        assert_eq!(v["actions"]["smp-loss"], 1);
        assert_eq!(v["actions"]["link-flap"], 0);
        let moved = Cycle {
            new_master: Some("sm3".into()),
            lft_unasked: 2,
            ..kept
        };
        let stayed = Cycle {
            new_master: Some("sm1".into()),
            converged: Some(false),
            ..failover
        };
        let mut broken = Vec::new();
        report_part(&[moved, stayed], &mut broken);
        let all = broken.join("; ");
        assert!(
            all.contains("mastership moved")
                && all.contains("no new master")
                && all.contains("LFT entries")
                && all.contains("did not converge"),
            "{all}"
        );
    }
}
