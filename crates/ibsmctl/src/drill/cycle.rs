//! One cycle of a failover scenario ([`Drill::cycle`]): from a stable cluster
//! through the action, the measurements and the restore back to a stable cluster;
//! the raft-partition cycle, which expects the master to keep mastership; and the
//! LID comparison ([`diff_lids`]) both use.

use std::collections::BTreeMap;
use std::time::Duration;

use super::members::handover_overlap;
use super::options::{DrillError, Scenario};
use super::session::Drill;
use super::summary::{Cycle, JudgeView};
use super::timeline::{master_gaps_windows, now_ms, Change};
use crate::args::fmt_guid;

/// How long to watch a Raft-isolated MASTER keep its mastership once it is degraded.
const ISOLATION_HOLD: Duration = Duration::from_secs(2);

impl Drill {
    /// raft-partition: cut the MASTER's Raft traffic, check it stays MASTER and
    /// reports degraded with the fabric unchanged, heal, check degraded clears and the
    /// replicas converge, and that the marker written before the cut survived.
    pub(super) async fn cycle_raft_partition(&mut self, index: u32) -> Result<Cycle, DrillError> {
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

    pub(super) async fn cycle(
        &mut self,
        scenario: Scenario,
        index: u32,
    ) -> Result<Cycle, DrillError> {
        if scenario == Scenario::RaftPartition {
            return self.cycle_raft_partition(index).await;
        }
        let master = self.wait_stable().await?;
        let before = self.lids(&master).await?;
        // A deployed cluster with --judge: the judge's read of the wire too.
        let two_views = self.members_view.is_some() && self.has_judge();
        let judge_before = match two_views {
            true => Some(self.judge_lids().await?),
            false => None,
        };
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
        let (ms, n) = handover_overlap(&self.changes, &self.handovers, t0, c.end_at);
        c.handover_overlap_ms = ms;
        c.dual_master_ms = c.dual_master_ms.saturating_sub(ms);
        c.dual_windows = c.dual_windows.saturating_sub(n);
        if let Some(jb) = judge_before {
            let judge_end = self.judge_lids().await?;
            let j = judge_view(&self.judge_changes, &master, t0, c.end_at, &jb, &judge_end);
            c.disagreements = j.disagreements(&c);
            c.judge = Some(j);
        }
        Ok(c)
    }
}

/// The cycle as the judge's timeline and LID reads show it (see [`JudgeView`]).
fn judge_view(
    changes: &[Change],
    old: &str,
    t0: u64,
    end: u64,
    before: &BTreeMap<u64, (u32, u32)>,
    after: &BTreeMap<u64, (u32, u32)>,
) -> JudgeView {
    let mut sorted: Vec<&Change> = changes.iter().filter(|x| x.at >= t0).collect();
    sorted.sort_by_key(|x| (x.at, x.seq));
    let first = sorted
        .iter()
        .find(|x| x.name != old && x.state == Some("MASTER"));
    let g = master_gaps_windows(changes, t0, end);
    let mut lids = Cycle::default();
    diff_lids(before, after, "judge, after restore", None, &mut lids);
    JudgeView {
        new_master: first.map(|x| x.name.clone()),
        failover_ms: first.map(|x| x.at.saturating_sub(t0)),
        masterless_ms: g.none_total,
        masterless_max_ms: g.none_max,
        dual_master_ms: g.dual,
        lid_changes: lids.lid_changes,
        lid_change_detail: lids.lid_change_detail,
    }
}

pub(super) fn diff_lids(
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
}
