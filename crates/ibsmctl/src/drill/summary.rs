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
