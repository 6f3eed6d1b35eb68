//! "A short drill runs in CI": five master kills on the embedded fabric through
//! `ibsmctl drill kill-master --start-demo`, judged by the demo's fabric-side SMInfo
//! poller. The report must show that no LID changed, that every cycle found a new
//! master and that two masters were never seen at once; the SVG timeline must have
//! one lane per SM, and that no acknowledged write was lost. `raft-partition` cuts the
//! master's Raft traffic instead: the master must stay MASTER (no LID change, never
//! two masters), report degraded, clear it after the heal and lose no write.
//! No wall-clock speed is asserted (this machine is shared).

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use anyhow::{Context, Result};
use ibsm_integration::{binary, run_drill};
use serde_json::Value;

/// Run `ibsmctl drill <scenario> --cycles N --start-demo`; its output and report.json.
fn drill(scenario: &str, cycles: u32, report_dir: &Path) -> Result<(Output, Value)> {
    let (ibsmd, ctl) = (binary("ibsmd")?, binary("ibsmctl")?);
    let mut cmd = Command::new(&ctl);
    cmd.args(["drill", scenario, "--cycles"])
        .arg(cycles.to_string())
        .args(["--start-demo", "--ibsmd"])
        .arg(&ibsmd)
        .arg("--report-dir")
        .arg(report_dir);
    run_drill(&mut cmd, Duration::from_secs(600), report_dir, &[])
}

#[test]
fn five_master_kills_change_no_lid_and_never_show_two_masters() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let report_dir = dir.path().join("report");
    let (out, json) = drill("kill-master", 5, &report_dir)?;
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{text}\n{err}");
    let cycles = json["cycles"].as_array().context("cycles")?;
    assert_eq!(cycles.len(), 5, "{json:#}");
    // The wire timeline the web console opens: each cycle's new master is seen
    // MASTER on the wire after the kill.
    let wire = json["wire_changes"].as_array().context("wire_changes")?;
    for c in cycles {
        let (who, at) = (&c["new_master"], c["action_unix_ms"].as_u64());
        assert!(
            wire.iter().any(|w| w["name"] == *who
                && w["state"] == "MASTER"
                && w["at_unix_ms"].as_u64() >= at),
            "{who} never MASTER on the wire after {at:?}: {wire:?}"
        );
    }
    for c in cycles {
        assert_eq!(c["new_master_found"], true, "{c}");
        assert_ne!(c["new_master"], c["old_master"], "{c}");
        assert!(
            c["epoch_after"].as_u64() > c["epoch_before"].as_u64(),
            "epoch must rise: {c}"
        );
        assert!(
            c["masterless_ms"].as_u64().is_some_and(|m| m > 0),
            "a kill leaves a gap: {c}"
        );
    }
    assert_eq!(json["lid_changes"], 0, "{json:#}");
    assert_eq!(json["dual_master_ms"], 0, "{json:#}");
    assert_eq!(json["writes_lost"], 0, "{json:#}");
    for c in cycles {
        assert_eq!(c["marker_acked"], true, "every marker is acknowledged: {c}");
    }
    for k in ["min", "median", "max"] {
        assert!(json["failover_ms"][k].as_u64().is_some(), "{json:#}");
    }
    assert!(json["masterless_ms_max"].as_u64().is_some());
    assert!(text.contains("invariants: ok"), "{text}");
    let svg = std::fs::read_to_string(report_dir.join("timeline.svg"))?;
    assert!(svg.starts_with("<svg"));
    for sm in ["sm1", "sm2", "sm3"] {
        assert_eq!(
            svg.matches(&format!("class=\"lane\" data-sm=\"{sm}\""))
                .count(),
            1,
            "{sm}"
        );
    }
    assert_eq!(svg.matches("class=\"lane\"").count(), 3);
    assert!(svg.contains("#2e7d32"), "a MASTER interval is drawn");
    Ok(())
}

#[test]
fn raft_partition_keeps_the_master_degrades_heals_and_loses_no_write() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let report_dir = dir.path().join("report");
    let (out, json) = drill("raft-partition", 2, &report_dir)?;
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{text}\n{err}");
    let cycles = json["cycles"].as_array().context("cycles")?;
    assert_eq!(cycles.len(), 2, "{json:#}");
    for c in cycles {
        assert_eq!(c["new_master"], c["old_master"], "mastership stays: {c}");
        assert_eq!(c["degraded_seen"], true, "{c}");
        assert_eq!(c["degraded_cleared"], true, "{c}");
        assert_eq!(c["converged"], true, "{c}");
        assert_eq!(c["marker_acked"], true, "{c}");
        assert_eq!(c["lid_changes"], 0, "{c}");
        assert_eq!(c["dual_master_ms"], 0, "{c}");
    }
    assert_eq!(json["lid_changes"], 0, "{json:#}");
    assert_eq!(json["dual_master_ms"], 0, "{json:#}");
    assert_eq!(json["writes_lost"], 0, "{json:#}");
    assert!(json["degraded_ms"]["max"].as_u64().is_some(), "{json:#}");
    assert!(text.contains("invariants: ok"), "{text}");
    Ok(())
}
