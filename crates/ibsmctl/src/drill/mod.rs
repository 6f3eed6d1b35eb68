//! `ibsmctl drill`: repeat a failover scenario against `ibsmd demo` and measure it as
//! the fabric sees it.
//!
//! The judge is the demo's SMInfo poller (`ibsm.demo.v1.Demo/PollSmInfo`): a client on a
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
//! Against a deployed cluster (`--members EP,...`, no Demo service) the judge is the
//! cluster's own view (`members`): every member's GetStatus and ListSms every 25 ms;
//! a member whose API is gone keeps the state the other members last saw it answer
//! SMInfo on the fabric, dated by their `answered_ms_ago`, so a killed or hung master
//! is dated without a clock shared between hosts. Members are named by their node
//! name. LIDs are read on the wire: the master's own heavy sweep reads every port's
//! PortInfo (`Control/Sweep` heavy, then `Fabric/GetTopology`'s `read_lid`), not its
//! LID table. With `--judge ADDR` too, `ibsmd judge` on a host of the fabric (the demo's
//! poller, served as the read-only part of the Demo service) judges beside the
//! members: members are then named after the judge's targets by port GUID, and each
//! cycle carries the judge's view (its timeline, its `ibnetdiscover -p` LIDs) and where
//! the two disagree; the members' view stays primary. A kill and a restart are the
//! operator's `--kill-cmd`/`--restart-cmd`, and `master-step-down` uses
//! `Control/StepDown`; see [`ClusterArgs`] and `session`.
//!
//! `soak` (ibsim only, module `soak`) mixes six actions cycle by cycle from a seeded
//! RNG (master kill, standby kill, Raft isolation, 5 % SMP loss on a cable, a link
//! flap, a planned handover) and after every cycle reads LIDs and LFTs back from the
//! fabric with infiniband-diags (`Demo/ReadFabric`), the SA state it put in place
//! before cycle 1 (multicast groups, their MFTs, a ServiceRecord, a subscription) with
//! its own SA client on the judge's HCA, and the replicated state from every member;
//! an LFT entry that changed where the master's routing did not ask for it breaks the
//! run, as a LID change or an SA record lost or changed does. `--deadline-s` bounds any drill: no cycle
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
//!
//! Files: `options` (scenario, arguments, errors), `launch` (`--start-demo`),
//! `session` (connections, the poller's timeline, the waits), `members` (the
//! members' own view as the judge), `timeline` (changes on
//! the wire, gaps, the SVG), `summary` (one cycle's measurements), `scenarios` (the
//! actions and their undoing), `marker` (the writes-lost check), `cycle` (one
//! cycle), `report` (JSON and text), `soak`. This file only declares them and runs
//! the drill ([`run`]); none of them uses it.
//!
//! [`MARKER_P_KEY`]: marker::MARKER_P_KEY
//! [`MARKER_TIMEOUT`]: marker::MARKER_TIMEOUT
//! [`DEGRADED_BOUND`]: session::DEGRADED_BOUND

use serde_json::json;

use crate::control::Target;

mod cycle;
mod launch;
mod marker;
mod members;
mod options;
mod report;
mod scenarios;
mod session;
mod soak;
mod summary;
mod timeline;

pub use options::{ClusterArgs, DrillArgs, DrillError, Scenario};

use launch::{find_ibsmd, start_demo};
use report::{report, report_text};
use session::Drill;
use timeline::{now_ms, svg};

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
    let mut d = Drill::connect(&target, &args.cluster).await?;
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
    let mut snap = soak::SoakState::default();
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
            "cycle {i}{}: {} -> {}: failover {} ms, degraded {} ms, heal {} ms, masterless {} ms, dual {} ms, LIDs changed {}, LFT unasked {}, writes lost {}, SA state lost {}",
            c.action.map_or(String::new(), |a| format!(" {a}")),
            c.old_master,
            c.new_master.as_deref().unwrap_or("none"),
            ms_or_dash(c.failover_ms),
            ms_or_dash(c.degraded_ms),
            ms_or_dash(c.heal_ms),
            c.masterless_ms,
            c.dual_master_ms,
            c.lid_changes,
            c.lft_unasked,
            c.writes_lost,
            c.sa_lost
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
        report["sa_snapshot"] = snap.sa_snapshot();
    }
    if let Some(why) = aborted {
        report["aborted"] = json!(why);
        report["invariants_ok"] = json!(false);
        broken = Some(broken.map_or(why.clone(), |b| format!("{b}; {why}")));
    }
    let from = d.started.min(
        cycles
            .first()
            .map_or(end, |c| c.action_at.saturating_sub(500)),
    );
    // Every SM state change the poller saw on the wire (state null: no SMInfo
    // answer), so the web console's Timeline opens the report as its own view.
    report["wire_changes"] = d
        .changes
        .iter()
        .map(|c| json!({"at_unix_ms": c.at, "name": c.name, "state": c.state}))
        .collect();
    if let Some(v) = &d.members_view {
        let (calls, failed, slow) = v.calls();
        report["members_polls"] =
            json!({"calls": calls, "unanswered": failed, "left_out_as_slow": slow});
        if d.has_judge() {
            report["judge_wire_changes"] = d
                .judge_changes
                .iter()
                .map(|c| json!({"at_unix_ms": c.at, "name": c.name, "state": c.state}))
                .collect();
        }
    }
    report["wire_from_unix_ms"] = json!(from);
    report["wire_to_unix_ms"] = json!(end);
    let text = report_text(args, &cycles, &report);
    let write = |name: &str, body: &str| {
        let p = args.report_dir.join(name);
        std::fs::write(&p, body).map_err(|e| DrillError::Setup(format!("{}: {e}", p.display())))
    };
    write("report.json", &format!("{report:#}\n"))?;
    write("report.txt", &text)?;
    write("timeline.svg", &svg(&names, &d.changes, from, end, &marks))?;
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

/// A cycle's duration for the per-cycle line: the milliseconds, or `-` when the cycle
/// did not reach that point.
fn ms_or_dash(ms: Option<u64>) -> String {
    ms.map_or_else(|| "-".to_string(), |v| v.to_string())
}

#[cfg(test)]
mod line_tests {
    #[test]
    fn a_cycle_line_shows_plain_milliseconds() {
        assert_eq!(super::ms_or_dash(Some(410)), "410");
        assert_eq!(super::ms_or_dash(None), "-");
    }
}
