//! One cycle's measurements ([`Cycle`]), as the failover scenarios and the soak fill
//! them in, their JSON form, and the min/median/max of a measurement over cycles.
//!
//! Shared by the drill's report (`report.rs`) and the soak's (`soak/report.rs`), and
//! by every file that runs a cycle; it uses no other drill file.

use serde_json::{json, Value};

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
    /// soak: SA records lost or changed against the snapshot before cycle 1, MFT
    /// entries wrong (and replica listings differing from the master's), named; and
    /// what the cycle's read held (`None`: not read).
    pub sa_lost: u64,
    pub sa_detail: Vec<String>,
    pub sa_checked: Option<SaCounts>,
    /// A deployed cluster with `--judge`: the judge's view of the same cycle (the
    /// members' view fills the fields above), and where the two disagree.
    pub judge: Option<JudgeView>,
    pub disagreements: Vec<String>,
    /// The members' view: time two SMs were MASTER during a HANDOVER's own exchange
    /// (not counted in `dual_master_ms`).
    pub handover_overlap_ms: u64,
}

/// One cycle as `ibsmd judge` saw it, beside the members' view.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JudgeView {
    pub new_master: Option<String>,
    pub failover_ms: Option<u64>,
    pub masterless_ms: u64,
    pub masterless_max_ms: u64,
    pub dual_master_ms: u64,
    pub lid_changes: u64,
    pub lid_change_detail: Vec<String>,
}

/// Two timelines of the same fabric differ by this much before they disagree: each
/// poller samples (the members' every 25 ms, the judge's every 10 ms) and dates what
/// it reads when it reads it.
pub const AGREE_WITHIN_MS: u64 = 100;

impl JudgeView {
    pub fn json(&self) -> Value {
        json!({
            "new_master": self.new_master,
            "failover_ms": self.failover_ms,
            "masterless_ms": self.masterless_ms,
            "masterless_max_ms": self.masterless_max_ms,
            "dual_master_ms": self.dual_master_ms,
            "lid_changes": self.lid_changes,
            "lid_change_detail": self.lid_change_detail,
        })
    }

    /// Where the members' view (`c`) and this one disagree, one line each.
    pub fn disagreements(&self, c: &Cycle) -> Vec<String> {
        let mut out = Vec::new();
        let name = |n: &Option<String>| n.clone().unwrap_or_else(|| "none".into());
        if self.new_master != c.new_master {
            out.push(format!(
                "new master: members {}, judge {}",
                name(&c.new_master),
                name(&self.new_master)
            ));
        }
        if (self.dual_master_ms > 0) != (c.dual_master_ms > 0) {
            out.push(format!(
                "two masters: members {} ms, judge {} ms",
                c.dual_master_ms, self.dual_master_ms
            ));
        }
        // Each view compares its own reads (the members' after the failover and after
        // the restore, the judge's after the restore): whether a LID moved is what
        // both answer.
        if (self.lid_changes > 0) != (c.lid_changes > 0) {
            out.push(format!(
                "LID changes: members' read {}, judge's read {}",
                c.lid_changes, self.lid_changes
            ));
        }
        if self.masterless_max_ms.abs_diff(c.masterless_max_ms) > AGREE_WITHIN_MS {
            out.push(format!(
                "longest time without a master: members {} ms, judge {} ms",
                c.masterless_max_ms, self.masterless_max_ms
            ));
        }
        match (c.failover_ms, self.failover_ms) {
            (Some(a), Some(b)) if a.abs_diff(b) <= AGREE_WITHIN_MS => {}
            (None, None) => {}
            (a, b) => out.push(format!(
                "failover: members {} ms, judge {} ms",
                a.map_or("-".into(), |v| v.to_string()),
                b.map_or("-".into(), |v| v.to_string())
            )),
        }
        out
    }
}

/// What one read of the SA state held.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SaCounts {
    pub groups: u64,
    pub members: u64,
    pub services: u64,
    pub subscriptions: u64,
    pub mft_entries: u64,
}

impl SaCounts {
    pub fn json(&self) -> Value {
        json!({
            "groups": self.groups,
            "members": self.members,
            "services": self.services,
            "subscriptions": self.subscriptions,
            "mft_entries": self.mft_entries,
        })
    }
}

impl Cycle {
    pub(super) fn json(&self) -> Value {
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
            "sa_state_lost": self.sa_lost,
            "sa_detail": self.sa_detail,
            "sa_checked": self.sa_checked.map(|s| s.json()),
            "judge": self.judge.as_ref().map(JudgeView::json),
            "handover_overlap_ms": self.handover_overlap_ms,
            "disagreements": self.disagreements,
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

#[cfg(test)]
mod judge_tests {
    use super::*;

    #[test]
    fn the_two_views_disagree_only_beyond_their_sampling() {
        let c = Cycle {
            new_master: Some("sm2".into()),
            failover_ms: Some(400),
            masterless_max_ms: 380,
            ..Cycle::default()
        };
        let same = JudgeView {
            new_master: Some("sm2".into()),
            failover_ms: Some(430),
            masterless_max_ms: 400,
            ..JudgeView::default()
        };
        assert!(same.disagreements(&c).is_empty());
        let other = JudgeView {
            new_master: Some("sm3".into()),
            failover_ms: Some(900),
            masterless_max_ms: 880,
            dual_master_ms: 10,
            lid_changes: 1,
            ..JudgeView::default()
        };
        let d = other.disagreements(&c);
        assert_eq!(d.len(), 5, "{d:?}");
        assert!(d[0].contains("members sm2, judge sm3"), "{d:?}");
    }
}
