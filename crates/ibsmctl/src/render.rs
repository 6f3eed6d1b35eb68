//! Output of the control commands: human tables by default, JSON for scripts.
//!
//! JSON conventions (a contract for scripts and the integration tests): GUIDs are
//! strings `"0x%016x"` (a u64 does not survive a JSON number in most tools), SM
//! states are `NOTACTIVE|DISCOVERING|STANDBY|MASTER` (the IBA names, as `sminfo`
//! and OpenSM print them), counters are numbers.

use ibsm_proto::v1::{Event, SmEntry, SmSettings, SmState, Status};
use serde_json::{json, Value};

use crate::args::fmt_guid;

/// The IBA name of a wire `SmState` value; unknown values print as `UNKNOWN(n)`.
pub fn state_name(raw: i32) -> String {
    match SmState::try_from(raw) {
        Ok(SmState::Notactive) => "NOTACTIVE".into(),
        Ok(SmState::Discovering) => "DISCOVERING".into(),
        Ok(SmState::Standby) => "STANDBY".into(),
        Ok(SmState::Master) => "MASTER".into(),
        Err(_) => format!("UNKNOWN({raw})"),
    }
}

pub fn status_json(s: &Status) -> Value {
    json!({
        "guid": fmt_guid(s.guid),
        "lid": s.lid,
        "priority": s.priority,
        "state": state_name(s.state),
        "act_count": s.act_count,
        "master_guid": fmt_guid(s.master_guid),
        "master_lid": s.master_lid,
        "epoch": s.epoch,
        "raft_role": s.raft_role,
        "raft_term": s.raft_term,
        "raft_leader": s.raft_leader,
        "applied_index": s.applied_index,
        "degraded": s.degraded,
        "degraded_reason": s.degraded_reason,
        "last_sweep": s.last_sweep,
        "last_change_sweep": s.last_change_sweep,
        "last_change_sweep_unix_ms": s.last_change_sweep_unix_ms,
        "state_for_ms": s.state_for_ms,
        "state_since_unix_ms": s.state_since_unix_ms,
        "node_name": s.node_name,
        "sm_key_rejections": s.sm_key_rejections,
        "alarms": s.alarms,
        "sa": s.sa.as_ref().map(crate::sa_status::sa_summary_json),
        "settings": s.settings.as_ref().map(settings_json),
    })
}

/// The election and subnet settings as JSON (durations in ms, 0 where a rule is off).
pub fn settings_json(t: &SmSettings) -> Value {
    json!({
        "configured_priority": t.configured_priority,
        "sticky_priority": t.sticky.then_some(t.sticky_priority),
        "poll_interval_ms": t.poll_interval_ms,
        "repoll_interval_ms": t.repoll_interval_ms,
        "poll_retries": t.poll_retries,
        "hung_master_window_ms": t.hung_master_window_ms,
        "leader_heartbeat_grace_ms": t.leader_heartbeat_grace_ms,
        "masterless_takeover_ms": t.masterless_takeover_ms,
        "sm_key_policy": t.sm_key_policy,
        "partition_enforcement": t.partition_enforcement,
        "smp_window": t.smp_window,
        "lmc": t.lmc,
        "routing": t.routing,
        "light_sweep_interval_ms": t.light_sweep_interval_ms,
        "heavy_sweep_interval_ms": t.heavy_sweep_interval_ms,
        "trusted_sms": t.trusted_sms,
    })
}

fn ms_or_off(ms: u64) -> String {
    if ms == 0 {
        "off".into()
    } else {
        format!("{ms} ms")
    }
}

/// `ibsmctl status` lines for the settings.
fn settings_rows(t: &SmSettings) -> Vec<(&'static str, String)> {
    vec![
        (
            "election",
            format!(
                "priority {} sticky {} sm_key_policy {} trusted {}",
                t.configured_priority,
                if t.sticky {
                    t.sticky_priority.to_string()
                } else {
                    "off".into()
                },
                t.sm_key_policy,
                if t.trusted_sms == 0 {
                    "all".into()
                } else {
                    format!("{} SMs", t.trusted_sms)
                }
            ),
        ),
        (
            "detection",
            format!(
                "poll {} ms, re-poll {} ms x {}, Raft heartbeat grace {}, hung master {}, masterless takeover {}",
                t.poll_interval_ms,
                t.repoll_interval_ms,
                t.poll_retries,
                ms_or_off(t.leader_heartbeat_grace_ms),
                ms_or_off(t.hung_master_window_ms),
                ms_or_off(t.masterless_takeover_ms)
            ),
        ),
        (
            "subnet",
            format!(
                "lmc {} routing {} smp_window {} partition_enforcement {} light sweep {} heavy sweep {}",
                t.lmc,
                t.routing,
                t.smp_window,
                if t.partition_enforcement { "on" } else { "off" },
                ms_or_off(t.light_sweep_interval_ms),
                ms_or_off(t.heavy_sweep_interval_ms)
            ),
        ),
    ]
}

pub fn status_text(s: &Status) -> String {
    let name = if s.node_name.is_empty() {
        "-"
    } else {
        s.node_name.as_str()
    };
    let rows: Vec<(&str, String)> = vec![
        ("node", name.to_string()),
        ("guid", fmt_guid(s.guid)),
        ("lid", s.lid.to_string()),
        (
            "state",
            if s.state_since_unix_ms == 0 {
                state_name(s.state)
            } else {
                format!(
                    "{} (for {}, since {})",
                    state_name(s.state),
                    fmt_age(s.state_for_ms),
                    utc_timestamp(s.state_since_unix_ms)
                )
            },
        ),
        ("priority", s.priority.to_string()),
        ("act_count", s.act_count.to_string()),
        (
            "master",
            format!("{} (lid {})", fmt_guid(s.master_guid), s.master_lid),
        ),
        ("epoch", s.epoch.to_string()),
        (
            "raft",
            format!(
                "{} term {} leader {} applied {}",
                if s.raft_role.is_empty() {
                    "-"
                } else {
                    &s.raft_role
                },
                s.raft_term,
                s.raft_leader,
                s.applied_index
            ),
        ),
        (
            "degraded",
            if s.degraded {
                format!("yes: {}", s.degraded_reason)
            } else {
                "no".into()
            },
        ),
        (
            "last_sweep",
            if s.last_sweep.is_empty() {
                "-".into()
            } else {
                s.last_sweep.clone()
            },
        ),
        (
            "last_change_sweep",
            if s.last_change_sweep.is_empty() {
                "-".into()
            } else {
                let ago = crate::sa_status::unix_ms_now()
                    .saturating_sub(s.last_change_sweep_unix_ms)
                    / 1000;
                format!(
                    "{} (at {}, {ago} s ago)",
                    s.last_change_sweep,
                    utc_timestamp(s.last_change_sweep_unix_ms)
                )
            },
        ),
        ("sm_key_rejections", s.sm_key_rejections.to_string()),
        (
            "alarms",
            if s.alarms.is_empty() {
                "none".into()
            } else {
                s.alarms.join("; ")
            },
        ),
    ];
    let mut rows = rows;
    if let Some(t) = &s.settings {
        rows.extend(settings_rows(t));
    }
    if let Some(sa) = &s.sa {
        rows.extend(crate::sa_status::sa_summary_rows(
            sa,
            crate::sa_status::unix_ms_now(),
        ));
    }
    let mut out = String::new();
    for (k, v) in rows {
        out.push_str(&format!("{:<18} {v}\n", format!("{k}:")));
    }
    out
}

pub fn sm_json(e: &SmEntry) -> Value {
    json!({
        "guid": fmt_guid(e.guid),
        "lid": e.lid,
        "priority": e.priority,
        "state": state_name(e.state),
        "act_count": e.act_count,
        "is_self": e.is_self,
        "trusted": e.trusted,
        "answered_ms_ago": e.answered_ms_ago,
        "missed_polls": e.missed_polls,
    })
}

/// `1234` ms as `1.234 s`, under a second as `56 ms`.
pub fn fmt_age(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        format!("{}.{:03} s", ms / 1000, ms % 1000)
    }
}

pub fn sms_json(sms: &[SmEntry]) -> Value {
    Value::Array(sms.iter().map(sm_json).collect())
}

/// A table of the SMs seen, one line each, columns aligned.
pub fn sms_text(sms: &[SmEntry]) -> String {
    let header = [
        "GUID",
        "LID",
        "PRIO",
        "STATE",
        "ACT_COUNT",
        "TRUSTED",
        "ANSWERED",
        "MISSED",
        "SELF",
    ]
    .map(String::from);
    let mut rows: Vec<[String; 9]> = vec![header];
    for e in sms {
        rows.push([
            fmt_guid(e.guid),
            e.lid.to_string(),
            e.priority.to_string(),
            state_name(e.state),
            e.act_count.to_string(),
            if e.trusted { "yes" } else { "NO" }.into(),
            match (e.is_self, e.answered_ms_ago) {
                (true, _) => "-".into(),
                (false, Some(ms)) => format!("{} ago", fmt_age(ms)),
                (false, None) => "never".into(),
            },
            e.missed_polls.to_string(),
            if e.is_self { "*".into() } else { String::new() },
        ]);
    }
    table(&rows)
}

fn table<const N: usize>(rows: &[[String; N]]) -> String {
    let mut widths = [0usize; N];
    for r in rows {
        for (w, cell) in widths.iter_mut().zip(r.iter()) {
            *w = (*w).max(cell.len());
        }
    }
    let mut out = String::new();
    for r in rows {
        let line: Vec<String> = r
            .iter()
            .zip(widths.iter())
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

pub fn event_json(e: &Event) -> Value {
    json!({
        "at_unix_ms": e.at_unix_ms,
        "kind": e.kind,
        "text": e.text,
        "from": state_name(e.from),
        "to": state_name(e.to),
    })
}

/// `2026-11-30T10:49:23.345Z  state  STANDBY -> MASTER  text`; the transition is
/// shown only when the states differ (other kinds leave both at NOTACTIVE).
pub fn event_text(e: &Event) -> String {
    let mut line = format!("{}  {}", utc_timestamp(e.at_unix_ms), e.kind);
    if e.from != e.to {
        line.push_str(&format!("  {} -> {}", state_name(e.from), state_name(e.to)));
    }
    if !e.text.is_empty() {
        line.push_str("  ");
        line.push_str(&e.text);
    }
    line
}

/// RFC 3339 UTC with milliseconds from Unix milliseconds (civil-from-days, no
/// time-zone database needed).
pub fn utc_timestamp(unix_ms: u64) -> String {
    let ms = unix_ms % 1000;
    let secs = unix_ms / 1000;
    let days = secs / 86_400;
    let sod = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        sod / 3600,
        (sod / 60) % 60,
        sod % 60
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian.
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + u64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn state_names_follow_iba() {
        assert_eq!(state_name(0), "NOTACTIVE");
        assert_eq!(state_name(1), "DISCOVERING");
        assert_eq!(state_name(2), "STANDBY");
        assert_eq!(state_name(3), "MASTER");
        assert_eq!(state_name(9), "UNKNOWN(9)");
    }

    #[test]
    fn status_json_has_the_script_fields() {
        let s = Status {
            guid: 0x100004,
            priority: 10,
            state: SmState::Master as i32,
            act_count: 7,
            master_guid: 0x100004,
            epoch: 3,
            degraded: true,
            sm_key_rejections: 2,
            ..Default::default()
        };
        let v = status_json(&s);
        assert_eq!(v["guid"], "0x0000000000100004");
        assert_eq!(v["priority"], 10);
        assert_eq!(v["state"], "MASTER");
        assert_eq!(v["act_count"], 7);
        assert_eq!(v["master_guid"], "0x0000000000100004");
        assert_eq!(v["epoch"], 3);
        assert_eq!(v["degraded"], true);
        assert_eq!(v["sm_key_rejections"], 2);
        let t = status_text(&s);
        assert!(t.contains("state:             MASTER"), "{t}");
        assert!(t.contains("last_change_sweep: -"), "{t}");
    }

    #[test]
    fn status_shows_the_last_sweep_that_changed_something() {
        let s = Status {
            last_sweep: "master heavy sweep: 0 LFT blocks".into(),
            last_change_sweep: "master heavy sweep: 20 LFT blocks".into(),
            last_change_sweep_unix_ms: 951_782_400_123,
            ..Default::default()
        };
        let t = status_text(&s);
        assert!(
            t.contains("last_sweep:        master heavy sweep: 0 LFT blocks\n"),
            "{t}"
        );
        assert!(
            t.contains(
                "last_change_sweep: master heavy sweep: 20 LFT blocks (at 2000-02-29T00:00:00.123Z, "
            ),
            "{t}"
        );
        let v = status_json(&s);
        assert_eq!(v["last_change_sweep"], "master heavy sweep: 20 LFT blocks");
        assert_eq!(v["last_change_sweep_unix_ms"], 951_782_400_123u64);
    }

    #[test]
    fn sms_table_aligns() {
        let sms = vec![
            SmEntry {
                guid: 1,
                lid: 1,
                priority: 10,
                state: 3,
                act_count: 12345,
                is_self: true,
                trusted: true,
                ..SmEntry::default()
            },
            SmEntry {
                guid: 0x100004,
                lid: 12,
                priority: 5,
                state: 2,
                act_count: 9,
                is_self: false,
                trusted: false,
                answered_ms_ago: Some(1250),
                missed_polls: 2,
            },
        ];
        let t = sms_text(&sms);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("GUID"));
        let col = lines[0].find("STATE").unwrap_or(0);
        assert_eq!(lines[1].get(col..col + 6), Some("MASTER"));
        assert_eq!(lines[2].get(col..col + 7), Some("STANDBY"));
        assert!(lines[1].ends_with('*'));
        let col = lines[0].find("TRUSTED").unwrap_or(0);
        assert_eq!(lines[1].get(col..col + 3), Some("yes"));
        assert_eq!(lines[2].get(col..col + 2), Some("NO"));
        // The peer's last SMInfo answer is dated; our own entry is not.
        let col = lines[0].find("ANSWERED").unwrap_or(0);
        assert_eq!(lines[1].get(col..col + 1), Some("-"));
        assert_eq!(lines[2].get(col..col + 11), Some("1.250 s ago"));
        assert_eq!(sms_json(&sms)[1]["answered_ms_ago"], 1250);
        assert_eq!(sms_json(&sms)[1]["missed_polls"], 2);
        assert!(sms_json(&sms)[0]["answered_ms_ago"].is_null());
        assert_eq!(sms_json(&sms)[1]["state"], "STANDBY");
        assert_eq!(sms_json(&sms)[0]["trusted"], true);
        assert_eq!(sms_json(&sms)[1]["trusted"], false);
    }

    #[test]
    fn timestamps() {
        assert_eq!(utc_timestamp(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc_timestamp(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(utc_timestamp(1_796_035_763_345), "2026-11-30T10:49:23.345Z");
        let e = Event {
            at_unix_ms: 0,
            kind: "state".into(),
            text: "master lost".into(),
            from: 2,
            to: 1,
        };
        assert_eq!(
            event_text(&e),
            "1970-01-01T00:00:00.000Z  state  STANDBY -> DISCOVERING  master lost"
        );
    }

    proptest! {
        #[test]
        fn timestamps_never_panic(ms in any::<u64>()) {
            let _ = utc_timestamp(ms);
        }
    }
}
