//! The soak's cycles whose fault must not move mastership (kill-standby, smp-loss,
//! link-flap, [`Drill::cycle_keep_master`]): the fault, held or until the master
//! re-swept, then undone, with the master judged on the wire from the action to the
//! restore; with the cable of a link flap down, the SA state too (`sa`). The other
//! actions (kill-master, planned-handover, raft-isolation) run the drill's own cycles.

use std::time::Duration;

use ibsm_proto::demo::v1 as dpb;
use ibsm_proto::v1 as pb;

use super::fabric::{diff_fabric, FabricSnap};
use super::plan::{Action, Rng};
use super::sa::SaCheck;
use crate::control::unary;
use crate::drill::cycle::diff_lids;
use crate::drill::options::DrillError;
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

/// A fault the cycle set and must undo.
enum Undo {
    Drill(Restore),
    Cable { node: String, port: u32 },
}

impl Drill {
    /// The cable a fault goes on: a switch-to-switch cable off the judge's routes,
    /// else the CA cable of a standby of `master`.
    async fn fault_cable(&mut self, master: &str, rng: &mut Rng) -> Result<dpb::Cable, DrillError> {
        let t = self.target.clone();
        let list = unary(
            &t,
            "ListCables",
            self.demo_client()?.list_cables(dpb::ListCablesRequest {}),
        )
        .await?
        .cables;
        let mut pick: Vec<&dpb::Cable> = list
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
            self.demo_client()?
                .set_cable_fault(dpb::SetCableFaultRequest {
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
    pub(super) async fn cycle_keep_master(
        &mut self,
        action: Action,
        index: u32,
        rng: &mut Rng,
        start: Option<&FabricSnap>,
        sa: Option<&SaCheck>,
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
                    self.demo_client()?.kill_instance(dpb::KillInstanceRequest {
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
                    if let Some(sa) = sa {
                        self.sa_cable_down(sa, &mut c).await?;
                    }
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
}
