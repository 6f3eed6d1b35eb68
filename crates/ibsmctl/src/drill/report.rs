//! The drill's report: the JSON summary over all cycles with the invariants it
//! checks (broken ones make the drill exit 5), and the text table. A soak adds its
//! own part and prints its own table (`soak`).

use serde_json::{json, Value};

use super::options::{DrillArgs, Scenario};
use super::session::DEGRADED_BOUND;
use super::soak;
use super::summary::{stats, Cycle};

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
    // The judge's view, when there is one beside the members': what it saw on the
    // wire breaks the drill too (a LID change or two masters is a fact, whoever read it).
    let judged: Vec<&super::summary::JudgeView> =
        cycles.iter().filter_map(|c| c.judge.as_ref()).collect();
    let judge_lids: u64 = judged.iter().map(|j| j.lid_changes).sum();
    let judge_dual_max = judged.iter().map(|j| j.dual_master_ms).max().unwrap_or(0);
    if judge_lids > 0 {
        broken.push(format!("{judge_lids} LID changes in the judge's read"));
    }
    if judge_dual_max > args.dual_master_bound_ms {
        broken.push(format!(
            "two masters for {judge_dual_max} ms in one cycle in the judge's view (bound {} ms)",
            args.dual_master_bound_ms
        ));
    }
    let disagreements: Vec<String> = cycles
        .iter()
        .flat_map(|c| {
            c.disagreements
                .iter()
                .map(move |d| format!("cycle {}: {d}", c.index))
        })
        .collect();
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
        "handover_overlap_ms": cycles.iter().map(|c| c.handover_overlap_ms).sum::<u64>(),
        "failover_ms": stats(&collect(|c| c.failover_ms)),
        "detection_ms": stats(&collect(|c| c.detection_ms)),
        "verified_ms": stats(&collect(|c| c.verified_ms)),
        "writes_lost": writes_lost,
        "markers_unacknowledged": unacked,
        "degraded_ms": stats(&collect(|c| c.degraded_ms)),
        "heal_ms": stats(&collect(|c| c.heal_ms)),
        "invariants_ok": broken.is_empty(),
        "broken": broken,
        "poller": poller_of(args),
        "fabric": if args.cluster.deployed() {
            format!("deployed cluster: {}", args.cluster.members.join(", "))
        } else {
            args.fabric.clone().unwrap_or_else(|| "demo default (embedded)".into())
        },
        "lids_read_from": lids_read_from(args),
        "judge": (!judged.is_empty()).then(|| json!({
            "poller": args.cluster.judge.as_ref().map(|j| format!(
                "ibsm.demo.v1.Demo/PollSmInfo of `ibsmd judge` at {j}: SMInfo by directed route from its host every 10 ms")),
            "lids_read_from": "the judge's ibnetdiscover -p (PortInfo on the wire), after the restore",
            "lid_changes": judge_lids,
            "dual_master_ms_max": judge_dual_max,
            "failover_ms": stats(&judged.iter().filter_map(|j| j.failover_ms).collect::<Vec<_>>()),
            "masterless_ms_max": judged.iter().map(|j| j.masterless_max_ms).max().unwrap_or(0),
        })),
        "disagreements": disagreements,
    });
    if let (Some(Value::Object(part)), Value::Object(map)) = (soak_part, &mut v) {
        map.extend(part);
    }
    let why = (!broken.is_empty()).then(|| broken.join("; "));
    (v, why)
}

/// Where the LIDs the drill compares come from.
fn lids_read_from(args: &DrillArgs) -> &'static str {
    if args.cluster.deployed() {
        "PortInfo on the wire, read by the master's own heavy sweep (Control/Sweep heavy, then \
         Fabric/GetTopology read_lid of every end port), before the action, after the failover \
         and after the restore"
    } else {
        "the SMs' GetLids"
    }
}

/// Who judged the drill, for the report.
fn poller_of(args: &DrillArgs) -> String {
    if args.cluster.deployed() {
        format!(
            "the members' own view: GetStatus and ListSms of {} every {} ms (a silent member: \
             what the others last saw it answer on the fabric, dated by their answered_ms_ago)",
            args.cluster.members.join(", "),
            super::members::POLL_EVERY.as_millis()
        )
    } else if args.on_ibsim() {
        "ibsm.demo.v1.Demo/PollSmInfo: the `ibsmd sminfo-poll` process under umad2sim on a spare HCA of ibsim, SMInfo by directed route every 10 ms".into()
    } else {
        "ibsm.demo.v1.Demo/PollSmInfo: SMInfo by directed route from a spare CA port every 10 ms"
            .into()
    }
}

fn fmt_opt(v: Option<u64>) -> String {
    v.map_or("-".into(), |v| v.to_string())
}

pub(super) fn report_text(args: &DrillArgs, cycles: &[Cycle], r: &Value) -> String {
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
        if let Some(j) = &c.judge {
            out.push_str(&format!(
                "       judge: {} failover {} ms, masterless max {} ms, dual {} ms, LIDs changed {}\n",
                j.new_master.as_deref().unwrap_or("none"),
                fmt_opt(j.failover_ms),
                j.masterless_max_ms,
                j.dual_master_ms,
                j.lid_changes
            ));
            for d in j.lid_change_detail.iter() {
                out.push_str(&format!("       {d}\n"));
            }
            for d in &c.disagreements {
                out.push_str(&format!("       members and judge disagree: {d}\n"));
            }
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
    if r["handover_overlap_ms"].as_u64().unwrap_or(0) > 0 {
        out.push_str(&format!(
            "handover overlap {} ms (two SMs MASTER during a HANDOVER's own exchange, the old master's word; not counted as two masters)\n",
            r["handover_overlap_ms"]
        ));
    }
    out.push_str(&format!(
        "judged by: {}\n",
        r["poller"].as_str().unwrap_or("")
    ));
    out.push_str(&format!(
        "LIDs read from: {}\n",
        r["lids_read_from"].as_str().unwrap_or("")
    ));
    if r["judge"].is_object() {
        out.push_str(&format!(
            "judge's view: LID changes {}, dual master max {} ms, disagreements {}\n",
            r["judge"]["lid_changes"],
            r["judge"]["dual_master_ms_max"],
            r["disagreements"].as_array().map_or(0, Vec::len)
        ));
    }
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
    use std::path::PathBuf;

    use super::*;

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
            cluster: super::super::options::ClusterArgs::default(),
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
            cluster: super::super::options::ClusterArgs::default(),
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
