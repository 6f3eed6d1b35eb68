//! The families `/metrics` serves: name, type, help, and how each instance's samples
//! are read from its [`Metrics`] ([`FAMILIES`]), encoded through one
//! `prometheus_client` [`Collector`] over every instance.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeLabelValue, EncodeMetric, LabelValueEncoder,
};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;

use super::state::{Metrics, ReplicationFigures, ROLES};

/// One series' value.
#[derive(Debug, Clone, Copy)]
enum Value {
    Int(u64),
    Float(f64),
}

/// Labels besides `sm`, and the value.
type Samples = Vec<(Vec<(&'static str, String)>, Value)>;

/// One metric family: its exposed name (counters with their `_total`), type, help and
/// how to read an instance's samples.
struct Family {
    name: &'static str,
    kind: MetricType,
    help: &'static str,
    read: fn(&Metrics) -> Samples,
}

fn one(a: &AtomicU64) -> Samples {
    vec![(Vec::new(), Value::Int(a.load(Ordering::Relaxed)))]
}

fn repl(m: &Metrics, f: impl Fn(&ReplicationFigures) -> Samples) -> Samples {
    m.replication
        .lock()
        .ok()
        .and_then(|r| r.as_ref().map(f))
        .unwrap_or_default()
}

const GAUGE: MetricType = MetricType::Gauge;
const COUNTER: MetricType = MetricType::Counter;

const FAMILIES: &[Family] = &[
    Family {
        name: "ibsm_up",
        kind: GAUGE,
        help: "1 while the SM instance thread runs, 0 after it stopped.",
        read: |m| one(&m.up),
    },
    Family {
        name: "ibsm_sm_state",
        kind: GAUGE,
        help: "SMInfo.SMState: 0 NOTACTIVE, 1 DISCOVERING, 2 STANDBY, 3 MASTER.",
        read: |m| one(&m.sm_state),
    },
    Family {
        name: "ibsm_act_count",
        kind: GAUGE,
        help: "SMInfo.ActCount: SMPs this SM initiated (wraps at 2^32).",
        read: |m| one(&m.act_count),
    },
    Family {
        name: "ibsm_failovers_total",
        kind: COUNTER,
        help: "Transitions of this SM into MASTER.",
        read: |m| one(&m.failovers),
    },
    Family {
        name: "ibsm_sweeps_total",
        kind: COUNTER,
        help: "Sweeps started, by kind (heavy: discovery; light: probe of known ports).",
        read: |m| {
            [("heavy", &m.sweeps_heavy), ("light", &m.sweeps_light)]
                .into_iter()
                .map(|(k, v)| {
                    (
                        vec![("kind", k.to_string())],
                        Value::Int(v.load(Ordering::Relaxed)),
                    )
                })
                .collect()
        },
    },
    Family {
        name: "ibsm_sweep_phase_seconds",
        kind: GAUGE,
        help: "Duration of each sweep phase the last time it ran.",
        read: |m| {
            let phases = m.phases.lock().map(|p| p.clone()).unwrap_or_default();
            phases
                .into_iter()
                .map(|(p, s)| (vec![("phase", p)], Value::Float(s)))
                .collect()
        },
    },
    Family {
        name: "ibsm_mads_sent_total",
        kind: COUNTER,
        help: "SMPs sent by the transactions agent (retries included).",
        read: |m| one(&m.mads_sent),
    },
    Family {
        name: "ibsm_mads_received_total",
        kind: COUNTER,
        help: "MADs received from the device (answers, requests, traps, SA queries).",
        read: |m| one(&m.mads_received),
    },
    Family {
        name: "ibsm_mads_timeouts_total",
        kind: COUNTER,
        help: "SMP transactions that timed out (each try counts).",
        read: |m| one(&m.mads_timeouts),
    },
    Family {
        name: "ibsm_mads_retries_total",
        kind: COUNTER,
        help: "SMPs re-sent after a timeout.",
        read: |m| one(&m.mads_retries),
    },
    Family {
        name: "ibsm_sminfo_requests_total",
        kind: COUNTER,
        help: "SubnGet(SMInfo) requests received from other SMs (the standbys' polls).",
        read: |m| one(&m.sminfo_requests),
    },
    Family {
        name: "ibsm_sminfo_fast_answers_total",
        kind: COUNTER,
        help: "SubnGet(SMInfo) answered as they were read, ahead of the SM thread's queued work, or by its stand-in reader while the SM thread was busy (also in ibsm_sminfo_requests_total).",
        read: |m| one(&m.sminfo_fast_answers),
    },
    Family {
        name: "ibsm_master_losses_held_off_total",
        kind: COUNTER,
        help: "Standby: SMInfo miss streaks that reached poll_retries while the master was the Raft leader and its heartbeat was fresh, so the master was not declared lost (yet).",
        read: |m| one(&m.losses_held_off),
    },
    Family {
        name: "ibsm_sm_key_rejections_total",
        kind: COUNTER,
        help: "SMInfo requests whose SM_Key did not match ours.",
        read: |m| one(&m.sm_key_rejections),
    },
    Family {
        name: "ibsm_replication_degraded",
        kind: GAUGE,
        help: "1 while this MASTER's replication is degraded (no quorum, or a claim or write refused: see GetStatus degraded_reason), else 0.",
        read: |m| one(&m.degraded),
    },
    Family {
        name: "ibsm_replication_epoch",
        kind: GAUGE,
        help: "Mastership epoch of the local replica (GetStatus epoch).",
        read: |m| repl(m, |r| vec![(Vec::new(), Value::Int(r.epoch))]),
    },
    Family {
        name: "ibsm_raft_role",
        kind: GAUGE,
        help: "This member's Raft role: 1 on the series of the current role, 0 on the others.",
        read: |m| {
            repl(m, |r| {
                ROLES
                    .iter()
                    .map(|role| {
                        (
                            vec![("role", role.to_string())],
                            Value::Int(u64::from(r.role == *role)),
                        )
                    })
                    .collect()
            })
        },
    },
    Family {
        name: "ibsm_raft_term",
        kind: GAUGE,
        help: "This member's Raft term.",
        read: |m| repl(m, |r| vec![(Vec::new(), Value::Int(r.term))]),
    },
    Family {
        name: "ibsm_raft_leadership_requests_total",
        kind: COUNTER,
        help: "Raft leadership requests this member made as SM master (its epoch applied, its member a voter but not the leader): the leader pauses its heartbeats and this member is elected, so the standbys' leader-heartbeat second opinion speaks for the master.",
        read: |m| repl(m, |r| vec![(Vec::new(), Value::Int(r.leadership_requests))]),
    },
    Family {
        name: "ibsm_raft_node_id",
        kind: GAUGE,
        help: "This member's Raft node id (ListMembers node_id).",
        read: |m| repl(m, |r| vec![(Vec::new(), Value::Int(r.node_id))]),
    },
    Family {
        name: "ibsm_raft_leader",
        kind: GAUGE,
        help: "The Raft leader's node id as this member sees it (0: none known).",
        read: |m| repl(m, |r| vec![(Vec::new(), Value::Int(r.leader))]),
    },
    Family {
        name: "ibsm_raft_last_log_index",
        kind: GAUGE,
        help: "This member's last Raft log index.",
        read: |m| repl(m, |r| vec![(Vec::new(), Value::Int(r.last_log_index))]),
    },
    Family {
        name: "ibsm_raft_matched_index",
        kind: GAUGE,
        help: "On the Raft leader: the highest log index each member is known to hold (label member: its node id).",
        read: |m| {
            repl(m, |r| {
                r.matched
                    .iter()
                    .map(|(id, i)| (vec![("member", id.to_string())], Value::Int(i.unwrap_or(0))))
                    .collect()
            })
        },
    },
    Family {
        name: "ibsm_raft_follower_lag",
        kind: GAUGE,
        help: "On the Raft leader: log entries each other member lacks (the leader's last log index minus its matched index).",
        read: |m| {
            repl(m, |r| {
                r.matched
                    .iter()
                    .filter(|(id, _)| **id != r.node_id)
                    .map(|(id, i)| {
                        let lag = r.last_log_index.saturating_sub(i.unwrap_or(0));
                        (vec![("member", id.to_string())], Value::Int(lag))
                    })
                    .collect()
            })
        },
    },
    Family {
        name: "ibsm_mad_send_errors_total",
        kind: COUNTER,
        help: "MADs the device refused to send (each a failed MAD; the SM carries on).",
        read: |m| one(&m.mad_send_errors),
    },
    Family {
        name: "ibsm_traps_total",
        kind: COUNTER,
        help: "Traps the MASTER's configurator received.",
        read: |m| one(&m.traps),
    },
    Family {
        name: "ibsm_port_traps_total",
        kind: COUNTER,
        help: "Traps received, by the LID they came from and the port they name (port 0: the trap names none); at most 256 series per SM.",
        read: |m| {
            let t = m.port_traps.lock().map(|t| t.clone()).unwrap_or_default();
            t.into_iter()
                .map(|((lid, port), n)| {
                    (
                        vec![("lid", lid.to_string()), ("port", port.to_string())],
                        Value::Int(n),
                    )
                })
                .collect()
        },
    },
    Family {
        name: "ibsm_traps_rate_limited_total",
        kind: COUNTER,
        help: "Traps over their source LID's rate limit (repressed, not acted on).",
        read: |m| one(&m.traps_rate_limited),
    },
    Family {
        name: "ibsm_trap_sweeps_deferred_total",
        kind: COUNTER,
        help: "Trap-triggered heavy sweeps deferred by the hold-down.",
        read: |m| one(&m.trap_sweeps_deferred),
    },
    Family {
        name: "ibsm_duplicate_guids",
        kind: GAUGE,
        help: "Duplicate node/port GUIDs found by the last heavy sweep as MASTER (an alarm).",
        read: |m| one(&m.duplicate_guids),
    },
    Family {
        name: "ibsm_topology_capped",
        kind: GAUGE,
        help: "1 when the last heavy sweep's discovery stopped at the topology cap (an alarm).",
        read: |m| one(&m.topology_capped),
    },
    Family {
        name: "ibsm_untrusted_sms",
        kind: GAUGE,
        help: "Known SM ports outside trusted_sm_guids (never followed nor handed over to).",
        read: |m| one(&m.untrusted_sms),
    },
    Family {
        name: "ibsm_rogue_masters",
        kind: GAUGE,
        help: "Untrusted SMs answering MASTER (rogue masters, ignored).",
        read: |m| one(&m.rogue_masters),
    },
    Family {
        name: "ibsm_untrusted_sm_reports_total",
        kind: COUNTER,
        help: "Reports of an untrusted SM or rogue master (first seen, or its state changed).",
        read: |m| one(&m.untrusted_reports),
    },
    Family {
        name: "ibsm_sa_groups",
        kind: GAUGE,
        help: "Multicast groups the SA holds (a standby: its replica's).",
        read: |m| one(&m.sa_groups),
    },
    Family {
        name: "ibsm_sa_members",
        kind: GAUGE,
        help: "Members of those groups.",
        read: |m| one(&m.sa_members),
    },
    Family {
        name: "ibsm_sa_requests_total",
        kind: COUNTER,
        help: "SA requests received (every method).",
        read: |m| one(&m.sa_requests),
    },
    Family {
        name: "ibsm_sa_requests_by_total",
        kind: COUNTER,
        help: "SA requests received, by method and attribute (e.g. SubnAdmGetTable, PathRecord).",
        read: |m| {
            let t = m.sa_requests_by.lock().map(|t| t.clone()).unwrap_or_default();
            t.into_iter()
                .map(|((method, attribute), n)| {
                    (
                        vec![("method", method), ("attribute", attribute)],
                        Value::Int(n),
                    )
                })
                .collect()
        },
    },
    Family {
        name: "ibsm_sa_reader_answers_total",
        kind: COUNTER,
        help: "SubnAdmGet of fabric records (PathRecord, NodeRecord, ...) answered from the SA snapshot as they were read, ahead of the SM's queued work (also in ibsm_sa_requests_total).",
        read: |m| one(&m.sa_reader_answers),
    },
    Family {
        name: "ibsm_sa_errors_total",
        kind: COUNTER,
        help: "SA answers with a non-zero status.",
        read: |m| one(&m.sa_errors),
    },
    Family {
        name: "ibsm_sa_services",
        kind: GAUGE,
        help: "ServiceRecords the SA holds (a standby: its replica's).",
        read: |m| one(&m.sa_services),
    },
    Family {
        name: "ibsm_sa_subscriptions",
        kind: GAUGE,
        help: "InformInfo subscriptions the SA holds (a standby: its replica's).",
        read: |m| one(&m.sa_subscriptions),
    },
    Family {
        name: "ibsm_sa_replica_current",
        kind: GAUGE,
        help: "1 when the local replica holds exactly the SA state this SM serves (a takeover from it now sets no ClientReregister), else 0 (a change in flight, no replication).",
        read: |m| one(&m.sa_replica_current),
    },
    Family {
        name: "ibsm_sa_replica_last_write_timestamp_seconds",
        kind: GAUGE,
        help: "Unix time when the local replica last applied a change of the SA's tables (0: none since start).",
        read: |m| {
            let ms = m.sa_replica_write_unix_ms.load(Ordering::Relaxed);
            vec![(Vec::new(), Value::Float(ms as f64 / 1000.0))]
        },
    },
    Family {
        name: "ibsm_replica_applied_index",
        kind: GAUGE,
        help: "The local replica's applied Raft log index (a member's lag: the highest member's minus its own).",
        read: |m| one(&m.replica_applied_index),
    },
    Family {
        name: "ibsm_client_reregisters_total",
        kind: COUNTER,
        help: "End ports asked to re-register with the SA (PortInfo.ClientReregister).",
        read: |m| one(&m.client_reregisters),
    },
];

/// Names of every metric family `/metrics` serves, as their samples are named
/// (counters with `_total`; dashboards are checked against it).
pub fn metric_names() -> Vec<&'static str> {
    FAMILIES.iter().map(|f| f.name).collect()
}

/// A label value escaped as the exposition format requires (`\\`, `\"`, `\n`):
/// prometheus-client writes label values as they are, and an instance name is the
/// caller's.
struct Escaped<'a>(&'a str);

impl EncodeLabelValue for Escaped<'_> {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        use std::fmt::Write as _;
        for c in self.0.chars() {
            match c {
                '\\' => encoder.write_str("\\\\")?,
                '"' => encoder.write_str("\\\"")?,
                '\n' => encoder.write_str("\\n")?,
                c => encoder.write_char(c)?,
            }
        }
        Ok(())
    }
}

/// Every instance's metrics, read at each scrape.
#[derive(Debug)]
pub(super) struct Instances(pub(super) Arc<Vec<(String, Arc<Metrics>)>>);

impl Collector for Instances {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for f in FAMILIES {
            // prometheus-client appends a counter's `_total` itself.
            let base = match f.kind {
                MetricType::Counter => f.name.strip_suffix("_total").unwrap_or(f.name),
                _ => f.name,
            };
            let mut family = encoder.encode_descriptor(base, f.help, None, f.kind)?;
            for (sm, m) in self.0.iter() {
                for (labels, value) in (f.read)(m) {
                    let mut set: Vec<(&str, Escaped)> = Vec::with_capacity(labels.len() + 1);
                    set.push(("sm", Escaped(sm)));
                    set.extend(labels.iter().map(|(k, v)| (*k, Escaped(v))));
                    let series = family.encode_family(&set)?;
                    match (f.kind, value) {
                        (MetricType::Counter, Value::Int(v)) => {
                            ConstCounter::new(v).encode(series)?
                        }
                        (MetricType::Counter, Value::Float(v)) => {
                            ConstCounter::new(v).encode(series)?
                        }
                        (_, Value::Int(v)) => ConstGauge::new(v).encode(series)?,
                        (_, Value::Float(v)) => ConstGauge::new(v).encode(series)?,
                    }
                }
            }
        }
        Ok(())
    }
}
