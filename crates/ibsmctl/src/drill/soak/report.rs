//! The soak's report: its part of the JSON report (per-action counts and the soak
//! invariants) and its text table, one line per cycle and then the summary.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::plan::{Action, ACTIONS};
use crate::drill::summary::Cycle;

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
    let sa: u64 = cycles.iter().map(|c| c.sa_lost).sum();
    if sa > 0 {
        broken.push(format!(
            "{sa} SA records or MFT entries lost or changed (cycles {:?})",
            pick(&|c| c.sa_lost > 0)
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
        "sa_state_lost": sa,
    })
}

/// `3 groups, 8 members, 1 services, 1 subscriptions, 6 MFT entries`.
fn sa_snapshot(v: &Value) -> String {
    if v.is_null() {
        return "none".into();
    }
    format!(
        "{} groups, {} members, {} services, {} subscriptions, {} MFT entries",
        v["groups"], v["members"], v["services"], v["subscriptions"], v["mft_entries"]
    )
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
    out.push_str("CYCLE  ACTION            OLD -> NEW   FAILOVER_MS  MASTERLESS_MS  DUAL  LIDS  LFT_UNASKED  LFT_ASKED  LOST  SA_LOST  NOTE\n");
    for c in cycles {
        out.push_str(&format!(
            "{:<5}  {:<16}  {:<11}  {:>11}  {:>13}  {:>4}  {:>4}  {:>11}  {:>9}  {:>4}  {:>7}  {}\n",
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
            c.sa_lost,
            c.note
        ));
        for d in c
            .lid_change_detail
            .iter()
            .chain(&c.lft_detail)
            .chain(&c.writes_lost_detail)
            .chain(&c.guid2lid_detail)
            .chain(&c.sa_detail)
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
            "SA state lost/changed",
            format!(
                "{} (snapshot: {})",
                r["sa_state_lost"],
                sa_snapshot(&r["sa_snapshot"])
            ),
        ),
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
            sa_lost: 1,
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
                && all.contains("did not converge")
                && all.contains("1 SA records"),
            "{all}"
        );
    }
}
