//! The Control service's answers built from an instance's [`Snapshot`]: `Status`
//! (with the settings it runs with and since when it is in its SM state) and each
//! `ListSms` entry (with how long ago the SM's last SMInfo arrived). The node's times
//! are on the instance thread's clock; they leave here as ages and wall-clock times.

use std::time::Duration;

use ibsm_core::election::SmState;
use ibsm_core::node::PeerView;
use ibsm_proto::v1 as pb;

use crate::instance::Snapshot;
use crate::replication::Replication;

pub(crate) fn pb_state(s: SmState) -> pb::SmState {
    match s {
        SmState::NotActive => pb::SmState::Notactive,
        SmState::Discovering => pb::SmState::Discovering,
        SmState::Standby => pb::SmState::Standby,
        SmState::Master => pb::SmState::Master,
    }
}

pub(crate) fn status_of(
    s: &Snapshot,
    repl: Option<&Replication>,
    leader_applied: u64,
) -> pb::Status {
    let r = repl.map(|r| r.status()).unwrap_or_default();
    let state_for = s.age_of(s.state_since);
    pb::Status {
        sa: Some(crate::sa_status::sa_summary(
            s,
            r.applied_index,
            leader_applied,
        )),
        epoch: r.epoch,
        raft_role: r.raft_role,
        raft_term: r.term,
        raft_leader: r.leader,
        applied_index: r.applied_index,
        degraded: r.degraded,
        degraded_reason: r.degraded_reason,
        guid: s.guid,
        lid: u32::from(s.lid),
        priority: u32::from(s.priority),
        state: pb_state(s.state) as i32,
        act_count: s.act_count,
        master_guid: s.master_guid,
        master_lid: u32::from(s.master_lid),
        last_sweep: s.last_sweep.clone(),
        last_change_sweep: s.last_change_sweep.clone(),
        last_change_sweep_unix_ms: s.last_change_sweep_unix_ms,
        node_name: s.name.clone(),
        sm_key_rejections: u32::try_from(s.sm_key_rejections).unwrap_or(u32::MAX),
        alarms: s.alarms.clone(),
        settings: Some(settings_of(&s.settings)),
        state_for_ms: state_for.map_or(0, ms),
        state_reason: s.state_reason.clone(),
        handed_over_to: s.handed_over_to,
        state_since_unix_ms: state_for
            .and_then(|d| std::time::SystemTime::now().checked_sub(d))
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, ms),
    }
}

pub(crate) fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn settings_of(v: &crate::instance::SettingsView) -> pb::SmSettings {
    pb::SmSettings {
        configured_priority: u32::from(v.priority),
        sticky: v.sticky_priority.is_some(),
        sticky_priority: u32::from(v.sticky_priority.unwrap_or(0)),
        poll_interval_ms: ms(v.poll_interval),
        repoll_interval_ms: ms(v.repoll_interval),
        poll_retries: v.poll_retries,
        hung_master_window_ms: v.hung_master_window.map_or(0, ms),
        leader_heartbeat_grace_ms: v.leader_heartbeat_grace.map_or(0, ms),
        masterless_takeover_ms: v.masterless_takeover.map_or(0, ms),
        sm_key_policy: crate::config::sm_key_policy_name(v.sm_key_policy).into(),
        partition_enforcement: v.partition_enforcement,
        smp_window: u32::try_from(v.smp_window).unwrap_or(u32::MAX),
        lmc: u32::from(v.lmc),
        routing: v.routing.clone(),
        light_sweep_interval_ms: ms(v.light_sweep_interval),
        heavy_sweep_interval_ms: ms(v.heavy_sweep_interval),
        trusted_sms: u32::try_from(v.trusted_sms).unwrap_or(u32::MAX),
    }
}

/// One SM of `s.sms` as `ListSms` lists it.
pub(crate) fn sm_entry_of(s: &Snapshot, p: &PeerView) -> pb::SmEntry {
    pb::SmEntry {
        guid: p.guid,
        lid: u32::from(p.lid),
        priority: u32::from(p.priority),
        state: p.state.map_or(pb::SmState::Notactive, pb_state) as i32,
        act_count: p.act_count,
        is_self: p.is_self,
        trusted: p.trusted,
        answered_ms_ago: p.answered_at.and_then(|at| s.age_of(at)).map(ms),
        missed_polls: p.missed_polls,
    }
}
