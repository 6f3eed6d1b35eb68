//! The console's live state: one task samples every served instance through the same
//! `Control` handlers the gRPC API runs (`GetStatus`, `ListSms`), woken at once by their
//! `Watch` streams (what `ibsmctl watch` reads) and at least every [`SAMPLE_EVERY`]
//! otherwise; it publishes the cluster as JSON on a `watch` channel (so a slow browser
//! only ever gets the newest view: bounded traffic) and keeps the last hour of state
//! transitions and master changes for the timeline.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ibsm_proto::v1 as pb;
use ibsm_proto::v1::control_server::Control;
use serde_json::{json, Value};
use tokio::sync::{watch, Notify};
use tokio_stream::StreamExt;

use super::json::{guid_hex, state_name, status_json};
use super::source::WebSource;
use crate::server::ControlService;

/// Longest gap between two samples when no event wakes the sampler.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(1);
/// Shortest gap between two samples (events in a burst are taken together).
pub const SAMPLE_MIN_GAP: Duration = Duration::from_millis(150);
/// A master change this soon after a HANDOVER, with the old master still running,
/// is that handover; anything else is a failover.
const HANDOVER_WINDOW_MS: u64 = 10_000;
/// How far back the timeline reaches.
pub const TIMELINE_SPAN_MS: u64 = 3_600_000;
/// Most timeline entries kept (older ones are dropped first).
pub const TIMELINE_MAX: usize = 20_000;

/// One state transition or master change (serialized for the browser; GUIDs as hex
/// text since JavaScript numbers cannot hold 64 bits).
#[derive(Debug, Clone)]
pub struct Entry {
    /// Increasing number: a stream sends what a client has not seen.
    pub seq: u64,
    /// ms since the Unix epoch.
    pub at_ms: u64,
    /// `state` (an SM changed state), `master` (the first master seen), `failover`,
    /// `handover` or `masterless`.
    pub kind: &'static str,
    /// The SM (for `state`) or the new master (0: none).
    pub guid: u64,
    /// Our instance's name, empty for an SM seen only on the fabric.
    pub name: String,
    /// Old and new state (`state`), or the old and new master's GUIDs.
    pub from: String,
    /// See `from`.
    pub to: String,
}

impl Entry {
    pub(super) fn json(&self) -> Value {
        json!({"seq": self.seq, "at_ms": self.at_ms, "kind": self.kind,
               "guid": guid_hex(self.guid), "name": self.name,
               "from": self.from, "to": self.to})
    }
}

#[derive(Default)]
struct Timeline {
    next_seq: u64,
    entries: VecDeque<Entry>,
    states: BTreeMap<u64, String>,
    master: Option<u64>,
    /// When a HANDOVER last went out (ms since the Unix epoch).
    last_handover_ms: u64,
    /// The last master that was not "none".
    last_master: u64,
}

impl Timeline {
    fn push(
        &mut self,
        at_ms: u64,
        kind: &'static str,
        guid: u64,
        name: &str,
        from: String,
        to: String,
    ) {
        self.next_seq += 1;
        self.entries.push_back(Entry {
            seq: self.next_seq,
            at_ms,
            kind,
            guid,
            name: name.to_string(),
            from,
            to,
        });
        while self.entries.len() > TIMELINE_MAX
            || self
                .entries
                .front()
                .is_some_and(|e| e.at_ms + TIMELINE_SPAN_MS < at_ms)
        {
            self.entries.pop_front();
        }
    }
}

/// What the sampler shares with the HTTP handlers.
pub struct Recorder {
    pub(super) controls: Vec<(String, ControlService)>,
    view: watch::Sender<Arc<Value>>,
    timeline: Mutex<Timeline>,
    wake: Notify,
}

pub(super) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Recorder {
    /// A recorder over `sources`; [`Recorder::spawn`] starts its tasks.
    pub fn new(sources: &[WebSource]) -> Arc<Recorder> {
        let controls = sources
            .iter()
            .map(|s| {
                let c = ControlService::with_slot(Arc::clone(&s.slot), s.name.clone())
                    .with_replication(s.repl.clone());
                (s.name.clone(), c)
            })
            .collect();
        Arc::new(Recorder {
            controls,
            view: watch::channel(Arc::new(json!({"instances": [], "sms": []}))).0,
            timeline: Mutex::new(Timeline::default()),
            wake: Notify::new(),
        })
    }

    /// Start the sampler and one `Watch` follower per instance (each re-attaches
    /// after its instance was restarted).
    pub fn spawn(self: &Arc<Self>) {
        for i in 0..self.controls.len() {
            let me = Arc::clone(self);
            tokio::spawn(async move { me.follow(i).await });
        }
        let me = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                me.sample().await;
                tokio::time::sleep(SAMPLE_MIN_GAP).await;
                let _ = tokio::time::timeout(SAMPLE_EVERY, me.wake.notified()).await;
            }
        });
    }

    async fn follow(&self, i: usize) {
        let Some((_, control)) = self.controls.get(i) else {
            return;
        };
        loop {
            if let Ok(resp) = control
                .watch(tonic::Request::new(pb::WatchRequest {}))
                .await
            {
                let mut events = resp.into_inner();
                while let Some(Ok(ev)) = events.next().await {
                    let failed = ["rejected", "failed", "timed out"]
                        .iter()
                        .any(|w| ev.text.contains(w));
                    if ev.kind == "handover" && !failed {
                        self.lock().last_handover_ms = now_ms();
                    }
                    self.wake.notify_one();
                }
            }
            tokio::time::sleep(SAMPLE_EVERY).await;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Timeline> {
        self.timeline.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The newest cluster view (subscribe for changes).
    pub fn view(&self) -> watch::Receiver<Arc<Value>> {
        self.view.subscribe()
    }

    /// Timeline entries after `seq` (all with 0), at most `max`.
    pub fn entries_after(&self, seq: u64, max: usize) -> (Vec<Value>, u64) {
        let t = self.lock();
        let out: Vec<Value> = t
            .entries
            .iter()
            .filter(|e| e.seq > seq)
            .take(max)
            .map(Entry::json)
            .collect();
        let last = t
            .entries
            .iter()
            .filter(|e| e.seq > seq)
            .take(max)
            .last()
            .map_or(seq, |e| e.seq);
        (out, last)
    }

    async fn sample(&self) {
        let now = now_ms();
        let mut instances = Vec::new();
        let mut states: BTreeMap<u64, (String, String)> = BTreeMap::new();
        let mut sms: BTreeMap<u64, Value> = BTreeMap::new();
        let mut ours: BTreeMap<u64, String> = BTreeMap::new();
        let mut master_votes: Vec<u64> = Vec::new();
        for (name, control) in &self.controls {
            let status = control
                .get_status(tonic::Request::new(pb::GetStatusRequest {}))
                .await;
            let list = control
                .list_sms(tonic::Request::new(pb::ListSmsRequest {}))
                .await;
            let (st, list) = match (status, list) {
                (Ok(s), Ok(l)) => (s.into_inner(), l.into_inner()),
                (Err(e), _) | (_, Err(e)) => {
                    let guid = self.last_guid_of(name);
                    instances.push(json!({"name": name, "running": false,
                        "guid": guid_hex(guid), "error": e.message()}));
                    if guid != 0 {
                        ours.insert(guid, name.clone());
                        states.insert(guid, (name.clone(), "STOPPED".into()));
                    }
                    continue;
                }
            };
            let state = state_name(st.state);
            if state == "MASTER" {
                master_votes.push(st.guid);
            } else if st.master_guid != 0 {
                master_votes.push(st.master_guid);
            }
            if st.guid != 0 {
                ours.insert(st.guid, name.clone());
                states.insert(st.guid, (name.clone(), state.to_string()));
            }
            instances.push(status_json(name, &st));
            for e in list.sms {
                let seen = sms.entry(e.guid).or_insert_with(|| {
                    json!({"guid": guid_hex(e.guid), "lid": e.lid, "priority": e.priority,
                           "state": state_name(e.state), "act_count": e.act_count,
                           "trusted": e.trusted, "seen_by": []})
                });
                if let Some(v) = seen.get_mut("seen_by").and_then(Value::as_array_mut) {
                    v.push(Value::from(name.as_str()));
                }
                states
                    .entry(e.guid)
                    .or_insert_with(|| (String::new(), state_name(e.state).into()));
            }
        }
        // Lag: how far each replica's applied index is behind the most advanced one.
        let newest = instances
            .iter()
            .filter_map(|i| i["applied_index"].as_u64())
            .max()
            .unwrap_or(0);
        for i in &mut instances {
            if let Some(a) = i["applied_index"].as_u64() {
                i["replica_lag"] = Value::from(newest.saturating_sub(a));
            }
        }
        // The master: one a running instance of ours is (or follows), and never an
        // instance of ours that is stopped; else the fabric's SMInfo view.
        let stopped = |g: &u64| states.get(g).is_some_and(|(_, s)| s == "STOPPED");
        let master = master_votes
            .iter()
            .copied()
            .find(|g| !stopped(g))
            .or_else(|| {
                sms.iter()
                    .find(|(g, v)| v["state"] == "MASTER" && !stopped(g))
                    .map(|(g, _)| *g)
            })
            .unwrap_or(0);
        // A standby's own status may not know its LID yet; the SMInfo list does.
        for i in &mut instances {
            if i["lid"] == 0 {
                let lid = i["guid"]
                    .as_str()
                    .and_then(|g| sms.values().find(|v| v["guid"] == g))
                    .map(|v| v["lid"].clone());
                if let Some(l) = lid {
                    i["lid"] = l;
                }
            }
        }
        for (g, v) in &mut sms {
            if let Some(n) = ours.get(g) {
                v["ours"] = Value::from(n.as_str());
            }
            if stopped(g) {
                v["state"] = Value::from("STOPPED");
            }
        }
        self.record(now, &states, master);
        let view = json!({
            "now_ms": now,
            "master": {"guid": guid_hex(master), "name": ours.get(&master).cloned().unwrap_or_default()},
            "instances": instances,
            "sms": sms.into_values().collect::<Vec<_>>(),
        });
        self.view.send_if_modified(|old| {
            let changed = strip_now(old) != strip_now(&view);
            if changed {
                *old = Arc::new(view);
            }
            changed
        });
    }

    fn last_guid_of(&self, name: &str) -> u64 {
        let v = self.view.borrow();
        v["instances"]
            .as_array()
            .and_then(|a| a.iter().find(|i| i["name"] == name))
            .and_then(|i| i["guid"].as_str())
            .and_then(|g| u64::from_str_radix(g.trim_start_matches("0x"), 16).ok())
            .unwrap_or(0)
    }

    fn record(&self, now: u64, states: &BTreeMap<u64, (String, String)>, master: u64) {
        let mut t = self.lock();
        for (g, (name, s)) in states {
            let old = t.states.insert(*g, s.clone());
            if old.as_deref() != Some(s.as_str()) {
                let from = old.unwrap_or_default();
                t.push(now, "state", *g, name, from, s.clone());
            }
        }
        if t.master != Some(master) {
            let old = t.master.unwrap_or(0);
            let kind = if master == 0 {
                "masterless"
            } else if t.master.is_none() || old == 0 && t.entries.iter().all(|e| e.kind == "state")
            {
                "master"
            } else if now.saturating_sub(t.last_handover_ms) < HANDOVER_WINDOW_MS
                && states
                    .get(&t.last_master)
                    .is_none_or(|(_, s)| s != "STOPPED")
            {
                // A HANDOVER went out lately and the old master still runs.
                "handover"
            } else {
                "failover"
            };
            if master != 0 {
                t.last_master = master;
            }
            let name = states
                .get(&master)
                .map(|(n, _)| n.clone())
                .unwrap_or_default();
            t.push(now, kind, master, &name, guid_hex(old), guid_hex(master));
            t.master = Some(master);
        }
    }
}

fn strip_now(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("now_ms");
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn states(v: &[(u64, &str)]) -> BTreeMap<u64, (String, String)> {
        v.iter()
            .map(|(g, s)| (*g, (format!("sm{g}"), s.to_string())))
            .collect()
    }

    fn kinds(r: &Recorder) -> Vec<&'static str> {
        r.lock()
            .entries
            .iter()
            .filter(|e| e.kind != "state")
            .map(|e| e.kind)
            .collect()
    }

    #[test]
    fn a_killed_master_is_a_failover_and_a_handover_is_not() {
        let r = Recorder::new(&[]);
        r.record(1_000, &states(&[(1, "MASTER"), (2, "STANDBY")]), 1);
        // The master dies: masterless, then 2 takes over.
        r.record(2_000, &states(&[(1, "STOPPED"), (2, "STANDBY")]), 0);
        r.record(2_200, &states(&[(1, "STOPPED"), (2, "MASTER")]), 2);
        // 1 comes back and 2 hands over to it while running.
        r.record(3_000, &states(&[(1, "STANDBY"), (2, "MASTER")]), 2);
        r.lock().last_handover_ms = 3_100;
        r.record(3_200, &states(&[(1, "MASTER"), (2, "STANDBY")]), 1);
        // A HANDOVER long ago does not make a later death a handover.
        r.record(
            3_200 + HANDOVER_WINDOW_MS + 1,
            &states(&[(1, "STOPPED"), (2, "MASTER")]),
            2,
        );
        assert_eq!(
            kinds(&r),
            ["master", "masterless", "failover", "handover", "failover"]
        );
        let t = r.lock();
        let sm1: Vec<&str> = t
            .entries
            .iter()
            .filter(|e| e.kind == "state" && e.guid == 1)
            .map(|e| e.to.as_str())
            .collect();
        assert_eq!(sm1, ["MASTER", "STOPPED", "STANDBY", "MASTER", "STOPPED"]);
    }

    #[test]
    fn a_dead_master_right_after_a_handover_is_still_a_failover() {
        let r = Recorder::new(&[]);
        r.record(1_000, &states(&[(1, "MASTER"), (2, "STANDBY")]), 1);
        r.lock().last_handover_ms = 1_500;
        r.record(2_000, &states(&[(1, "STOPPED"), (2, "MASTER")]), 2);
        assert_eq!(kinds(&r), ["master", "failover"]);
    }

    #[test]
    fn the_timeline_keeps_an_hour_and_a_bounded_number_of_entries() {
        let r = Recorder::new(&[]);
        for i in 0..(TIMELINE_MAX as u64 + 100) {
            let s = if i % 2 == 0 { "MASTER" } else { "STANDBY" };
            r.record(i, &states(&[(1, s)]), 0);
        }
        assert_eq!(r.lock().entries.len(), TIMELINE_MAX);
        r.record(TIMELINE_SPAN_MS * 2, &states(&[(1, "STOPPED")]), 0);
        assert_eq!(
            r.lock().entries.len(),
            1,
            "entries older than an hour are dropped"
        );
        let (after, last) = r.entries_after(0, 10);
        assert_eq!((after.len(), last), (1, r.lock().next_seq));
        assert!(r.entries_after(last, 10).0.is_empty());
    }
}
