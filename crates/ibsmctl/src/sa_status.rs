//! The Subnet Administrator's lines of `ibsmctl status` (text and `--json`): the
//! SA's size and the freshness of the replica's copy of its state
//! (`Status.sa`, [`pb::SaSummary`]).

use ibsm_proto::v1 as pb;
use serde_json::{json, Value};

/// Wall clock, ms since the Unix epoch (ages in `status`).
pub fn unix_ms_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The SA lines of `ibsmctl status`: size, and the replica's freshness (`now_ms`: the
/// wall clock the age of the last SA write is counted to).
pub fn sa_summary_rows(sa: &pb::SaSummary, now_ms: u64) -> Vec<(&'static str, String)> {
    let replica = if !sa.replica_holds_state && sa.applied_index == 0 {
        "none (no replication): a takeover asks every client to re-register".to_string()
    } else if !sa.replica_holds_state {
        "holds no SA state: a takeover from it asks every client to re-register".to_string()
    } else if sa.replica_current {
        "current: a takeover from it keeps every registration (no ClientReregister)".into()
    } else {
        "behind this SM's SA: a change is in flight".into()
    };
    let lag = if sa.leader_applied_index == 0 {
        format!("applied {}", sa.applied_index)
    } else {
        format!(
            "applied {} of the leader's {} ({} behind)",
            sa.applied_index,
            sa.leader_applied_index,
            sa.leader_applied_index.saturating_sub(sa.applied_index)
        )
    };
    let last = if sa.last_sa_write_unix_ms == 0 {
        "none since start".to_string()
    } else {
        let age = now_ms.saturating_sub(sa.last_sa_write_unix_ms);
        format!(
            "{}.{:01} s ago (index {})",
            age / 1000,
            (age % 1000) / 100,
            sa.last_sa_write_index
        )
    };
    vec![
        (
            "sa",
            format!(
                "{} groups, {} members, {} services, {} subscriptions",
                sa.groups, sa.members, sa.services, sa.subscriptions
            ),
        ),
        ("sa_replica", replica),
        ("sa_replica_index", lag),
        ("sa_last_write", last),
    ]
}

/// The `sa` object of `ibsmctl status --json`.
pub fn sa_summary_json(sa: &pb::SaSummary) -> Value {
    json!({
        "groups": sa.groups,
        "members": sa.members,
        "services": sa.services,
        "subscriptions": sa.subscriptions,
        "replica_holds_state": sa.replica_holds_state,
        "replica_current": sa.replica_current,
        "applied_index": sa.applied_index,
        // null: this member leads, or the leader did not answer.
        "leader_applied_index": (sa.leader_applied_index != 0).then_some(sa.leader_applied_index),
        "last_sa_write_unix_ms": (sa.last_sa_write_unix_ms != 0).then_some(sa.last_sa_write_unix_ms),
        "last_sa_write_index": sa.last_sa_write_index,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_shows_the_sas_size_and_the_replicas_freshness() {
        let sa = pb::SaSummary {
            groups: 2,
            members: 3,
            services: 1,
            subscriptions: 4,
            replica_holds_state: true,
            replica_current: false,
            applied_index: 40,
            leader_applied_index: 42,
            last_sa_write_unix_ms: 10_000,
            last_sa_write_index: 39,
        };
        let rows = sa_summary_rows(&sa, 12_500);
        let text: Vec<String> = rows.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        let text = text.join("\n");
        assert!(
            text.contains("2 groups, 3 members, 1 services, 4 subscriptions"),
            "{text}"
        );
        assert!(text.contains("behind this SM's SA"), "{text}");
        assert!(
            text.contains("applied 40 of the leader's 42 (2 behind)"),
            "{text}"
        );
        assert!(text.contains("2.5 s ago (index 39)"), "{text}");
        let j = sa_summary_json(&pb::SaSummary {
            leader_applied_index: 0,
            ..sa
        });
        assert!(j["leader_applied_index"].is_null());
        assert_eq!(j["services"], 1);
    }
}
