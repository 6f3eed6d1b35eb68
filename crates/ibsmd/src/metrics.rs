//! Prometheus metrics: per-instance counters and gauges ([`Metrics`]) and a tiny
//! HTTP/1.1 server for `GET /metrics` in the text exposition format 0.0.4.
//!
//! Why hand-written and not a crate: the set is small and fixed, the daemon already
//! has tokio, and the exposition format is a few lines of text; an HTTP stack or a
//! registry crate would be more code to audit than this file. Every value is an atomic
//! written by the instance thread (no lock on its hot path); sweep-phase durations sit
//! behind a mutex because their names are open-ended (the subnet configurator adds its
//! own phases through [`Metrics::set_sweep_phase`]).
//!
//! Raft metrics are absent on purpose until the replica is wired in: a gauge that is
//! always 0 would look like a healthy-but-idle cluster on a dashboard.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::DaemonError;

use ibsm_core::election::SmState;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Longest request head accepted.
const MAX_REQUEST_HEAD: usize = 8 * 1024;
/// How long a client may take to send its request head.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Which sweep, for `ibsm_sweeps_total{kind}`: the configurator's own kinds (one type
/// for one thing), which a standby's sweeps use as well.
pub use ibsm_core::subnet::SweepKind;

/// Counters and gauges of one SM instance. Cheap to share (`Arc`), all methods take
/// `&self`.
#[derive(Debug, Default)]
pub struct Metrics {
    sm_state: AtomicU64,
    act_count: AtomicU64,
    failovers: AtomicU64,
    sweeps_heavy: AtomicU64,
    sweeps_light: AtomicU64,
    mads_sent: AtomicU64,
    mads_timeouts: AtomicU64,
    mads_retries: AtomicU64,
    sm_key_rejections: AtomicU64,
    sminfo_requests: AtomicU64,
    degraded: AtomicU64,
    mad_send_errors: AtomicU64,
    traps: AtomicU64,
    traps_rate_limited: AtomicU64,
    trap_sweeps_deferred: AtomicU64,
    duplicate_guids: AtomicU64,
    topology_capped: AtomicU64,
    untrusted_sms: AtomicU64,
    rogue_masters: AtomicU64,
    untrusted_reports: AtomicU64,
    up: AtomicU64,
    sa_groups: AtomicU64,
    sa_members: AtomicU64,
    sa_requests: AtomicU64,
    sa_errors: AtomicU64,
    sa_services: AtomicU64,
    sa_subscriptions: AtomicU64,
    sa_replica_current: AtomicU64,
    sa_replica_write_unix_ms: AtomicU64,
    replica_applied_index: AtomicU64,
    client_reregisters: AtomicU64,
    phases: Mutex<BTreeMap<String, f64>>,
}

/// What the SA holds, for [`Metrics::set_sa`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SaSize {
    /// Multicast groups.
    pub groups: u64,
    /// Members over all groups.
    pub members: u64,
    /// ServiceRecords.
    pub services: u64,
    /// InformInfo subscriptions.
    pub subscriptions: u64,
}

/// SMInfo.SMState as a number (IBA: 0 NOTACTIVE, 1 DISCOVERING, 2 STANDBY, 3 MASTER).
pub fn state_number(s: SmState) -> u64 {
    match s {
        SmState::NotActive => 0,
        SmState::Discovering => 1,
        SmState::Standby => 2,
        SmState::Master => 3,
    }
}

impl Metrics {
    /// All zero.
    pub fn new() -> Metrics {
        Metrics::default()
    }

    /// Current SMInfo.SMState; counts a failover when it moves into MASTER.
    pub fn set_state(&self, s: SmState) {
        let n = state_number(s);
        let old = self.sm_state.swap(n, Ordering::Relaxed);
        if n == 3 && old != 3 {
            self.failovers.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Whether the instance thread runs (`ibsm_up`).
    pub fn set_up(&self, up: bool) {
        self.up.store(u64::from(up), Ordering::Relaxed);
    }

    /// SMInfo.ActCount.
    pub fn set_act_count(&self, n: u32) {
        self.act_count.store(u64::from(n), Ordering::Relaxed);
    }

    /// A sweep started.
    pub fn sweep_started(&self, kind: SweepKind) {
        match kind {
            SweepKind::Heavy => &self.sweeps_heavy,
            SweepKind::Light => &self.sweeps_light,
        }
        .fetch_add(1, Ordering::Relaxed);
    }

    /// Totals of MADs sent, timed out and retried since the instance started (the
    /// thread publishes the agent's running totals; these are monotonic).
    pub fn set_mad_totals(&self, sent: u64, timeouts: u64, retries: u64) {
        self.mads_sent.fetch_max(sent, Ordering::Relaxed);
        self.mads_timeouts.fetch_max(timeouts, Ordering::Relaxed);
        self.mads_retries.fetch_max(retries, Ordering::Relaxed);
    }

    /// Requests refused because their SM_Key was wrong (running total).
    pub fn set_sm_key_rejections(&self, n: u64) {
        self.sm_key_rejections.fetch_max(n, Ordering::Relaxed);
    }

    /// SubnGet(SMInfo) requests received from other SMs (running total).
    pub fn set_sminfo_requests(&self, n: u64) {
        self.sminfo_requests.fetch_max(n, Ordering::Relaxed);
    }

    /// One MAD the device refused to send.
    pub fn mad_send_error(&self) {
        self.mad_send_errors.fetch_add(1, Ordering::Relaxed);
    }

    /// The configurator's trap totals (running, monotonic within an instance).
    pub fn set_trap_totals(&self, traps: u64, rate_limited: u64, sweeps_deferred: u64) {
        self.traps.fetch_max(traps, Ordering::Relaxed);
        self.traps_rate_limited
            .fetch_max(rate_limited, Ordering::Relaxed);
        self.trap_sweeps_deferred
            .fetch_max(sweeps_deferred, Ordering::Relaxed);
    }

    /// Alarms of the last heavy sweep as MASTER: duplicate GUIDs found, and
    /// whether discovery hit the topology cap.
    pub fn set_alarms(&self, duplicate_guids: u64, capped: bool) {
        self.duplicate_guids
            .store(duplicate_guids, Ordering::Relaxed);
        self.topology_capped
            .store(u64::from(capped), Ordering::Relaxed);
    }

    /// With `trusted_sm_guids`: the known SM ports outside it now, and how many of them
    /// answer MASTER (rogue masters).
    pub fn set_untrusted_sms(&self, untrusted: u64, rogue_masters: u64) {
        self.untrusted_sms.store(untrusted, Ordering::Relaxed);
        self.rogue_masters.store(rogue_masters, Ordering::Relaxed);
    }

    /// The election reported an untrusted SM or a rogue master (new, or changed).
    pub fn count_untrusted_seen(&self) {
        self.untrusted_reports.fetch_add(1, Ordering::Relaxed);
    }

    /// Hook for sweep phases: how long `phase` (e.g. `discover`, `lid`, `lft`) took in
    /// the last sweep that ran it. Exposed as `ibsm_sweep_phase_seconds{phase}`.
    /// Phase names should be short snake_case words; other characters are replaced.
    pub fn set_sweep_phase(&self, phase: &str, took: Duration) {
        let name: String = phase
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        if let Ok(mut p) = self.phases.lock() {
            p.insert(name, took.as_secs_f64());
        }
    }

    /// The SA's size and counters, and the ports asked to re-register.
    pub fn set_sa(&self, size: SaSize, requests: u64, errors: u64, rereg: u64) {
        self.sa_groups.store(size.groups, Ordering::Relaxed);
        self.sa_members.store(size.members, Ordering::Relaxed);
        self.sa_services.store(size.services, Ordering::Relaxed);
        self.sa_subscriptions
            .store(size.subscriptions, Ordering::Relaxed);
        self.sa_requests.store(requests, Ordering::Relaxed);
        self.sa_errors.store(errors, Ordering::Relaxed);
        self.client_reregisters.store(rereg, Ordering::Relaxed);
    }

    /// The replica's freshness for the SA: whether it holds exactly the SA state this
    /// SM serves, and when it last applied an SA write (ms since the Unix epoch, 0:
    /// none since start).
    pub fn set_sa_replica(&self, current: bool, last_write_unix_ms: u64) {
        self.sa_replica_current
            .store(u64::from(current), Ordering::Relaxed);
        self.sa_replica_write_unix_ms
            .store(last_write_unix_ms, Ordering::Relaxed);
    }

    /// The local replica's applied log index (`ibsm_replica_applied_index`).
    pub fn set_applied_index(&self, index: u64) {
        self.replica_applied_index.store(index, Ordering::Relaxed);
    }

    /// Whether the replication of this instance is degraded (`ibsm_replication_degraded`).
    pub fn set_degraded(&self, degraded: bool) {
        self.degraded.store(u64::from(degraded), Ordering::Relaxed);
    }

    /// Current value of `ibsm_failovers_total` (for tests and status).
    pub fn failovers(&self) -> u64 {
        self.failovers.load(Ordering::Relaxed)
    }
}

struct Family {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
}

const FAMILIES: &[Family] = &[
    Family {
        name: "ibsm_up",
        kind: "gauge",
        help: "1 while the SM instance thread runs, 0 after it stopped.",
    },
    Family {
        name: "ibsm_sm_state",
        kind: "gauge",
        help: "SMInfo.SMState: 0 NOTACTIVE, 1 DISCOVERING, 2 STANDBY, 3 MASTER.",
    },
    Family {
        name: "ibsm_act_count",
        kind: "gauge",
        help: "SMInfo.ActCount: SMPs this SM initiated (wraps at 2^32).",
    },
    Family {
        name: "ibsm_failovers_total",
        kind: "counter",
        help: "Transitions of this SM into MASTER.",
    },
    Family {
        name: "ibsm_sweeps_total",
        kind: "counter",
        help: "Sweeps started, by kind (heavy: discovery; light: probe of known ports).",
    },
    Family {
        name: "ibsm_sweep_phase_seconds",
        kind: "gauge",
        help: "Duration of each sweep phase the last time it ran.",
    },
    Family {
        name: "ibsm_mads_sent_total",
        kind: "counter",
        help: "SMPs sent by the transactions agent (retries included).",
    },
    Family {
        name: "ibsm_mads_timeouts_total",
        kind: "counter",
        help: "SMP transactions that timed out (each try counts).",
    },
    Family {
        name: "ibsm_mads_retries_total",
        kind: "counter",
        help: "SMPs re-sent after a timeout.",
    },
    Family {
        name: "ibsm_sminfo_requests_total",
        kind: "counter",
        help: "SubnGet(SMInfo) requests received from other SMs (the standbys' polls).",
    },
    Family {
        name: "ibsm_sm_key_rejections_total",
        kind: "counter",
        help: "SMInfo requests whose SM_Key did not match ours.",
    },
    Family {
        name: "ibsm_replication_degraded",
        kind: "gauge",
        help: "1 while this MASTER's replication is degraded (no quorum, or a claim or write refused: see GetStatus degraded_reason), else 0.",
    },
    Family {
        name: "ibsm_mad_send_errors_total",
        kind: "counter",
        help: "MADs the device refused to send (each a failed MAD; the SM carries on).",
    },
    Family {
        name: "ibsm_traps_total",
        kind: "counter",
        help: "Traps the MASTER's configurator received.",
    },
    Family {
        name: "ibsm_traps_rate_limited_total",
        kind: "counter",
        help: "Traps over their source LID's rate limit (repressed, not acted on).",
    },
    Family {
        name: "ibsm_trap_sweeps_deferred_total",
        kind: "counter",
        help: "Trap-triggered heavy sweeps deferred by the hold-down.",
    },
    Family {
        name: "ibsm_duplicate_guids",
        kind: "gauge",
        help: "Duplicate node/port GUIDs found by the last heavy sweep as MASTER (an alarm).",
    },
    Family {
        name: "ibsm_topology_capped",
        kind: "gauge",
        help: "1 when the last heavy sweep's discovery stopped at the topology cap (an alarm).",
    },
    Family {
        name: "ibsm_untrusted_sms",
        kind: "gauge",
        help: "Known SM ports outside trusted_sm_guids (never followed nor handed over to).",
    },
    Family {
        name: "ibsm_rogue_masters",
        kind: "gauge",
        help: "Untrusted SMs answering MASTER (rogue masters, ignored).",
    },
    Family {
        name: "ibsm_untrusted_sm_reports_total",
        kind: "counter",
        help: "Reports of an untrusted SM or rogue master (first seen, or its state changed).",
    },
    Family {
        name: "ibsm_sa_groups",
        kind: "gauge",
        help: "Multicast groups the SA holds (a standby: its replica's).",
    },
    Family {
        name: "ibsm_sa_members",
        kind: "gauge",
        help: "Members of those groups.",
    },
    Family {
        name: "ibsm_sa_requests_total",
        kind: "counter",
        help: "SA requests received (every method).",
    },
    Family {
        name: "ibsm_sa_errors_total",
        kind: "counter",
        help: "SA answers with a non-zero status.",
    },
    Family {
        name: "ibsm_sa_services",
        kind: "gauge",
        help: "ServiceRecords the SA holds (a standby: its replica's).",
    },
    Family {
        name: "ibsm_sa_subscriptions",
        kind: "gauge",
        help: "InformInfo subscriptions the SA holds (a standby: its replica's).",
    },
    Family {
        name: "ibsm_sa_replica_current",
        kind: "gauge",
        help: "1 when the local replica holds exactly the SA state this SM serves (a takeover from it now sets no ClientReregister), else 0 (a change in flight, no replication).",
    },
    Family {
        name: "ibsm_sa_replica_last_write_timestamp_seconds",
        kind: "gauge",
        help: "Unix time when the local replica last applied a change of the SA's tables (0: none since start).",
    },
    Family {
        name: "ibsm_replica_applied_index",
        kind: "gauge",
        help: "The local replica's applied Raft log index (a member's lag: the highest member's minus its own).",
    },
    Family {
        name: "ibsm_client_reregisters_total",
        kind: "counter",
        help: "End ports asked to re-register with the SA (PortInfo.ClientReregister).",
    },
];

/// Names of every metric family `/metrics` serves (dashboards are checked against it).
pub fn metric_names() -> Vec<&'static str> {
    FAMILIES.iter().map(|f| f.name).collect()
}

fn escape_label(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// Render every instance in the text exposition format, labelled `sm="<name>"`.
pub fn render(instances: &[(String, Arc<Metrics>)]) -> String {
    let mut out = String::new();
    for f in FAMILIES {
        let _ = writeln!(out, "# HELP {} {}", f.name, f.help);
        let _ = writeln!(out, "# TYPE {} {}", f.name, f.kind);
        for (name, m) in instances {
            let sm = escape_label(name);
            let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
            match f.name {
                "ibsm_up" => {
                    let _ = writeln!(out, "ibsm_up{{sm=\"{sm}\"}} {}", load(&m.up));
                }
                "ibsm_sm_state" => {
                    let _ = writeln!(out, "ibsm_sm_state{{sm=\"{sm}\"}} {}", load(&m.sm_state));
                }
                "ibsm_act_count" => {
                    let _ = writeln!(out, "ibsm_act_count{{sm=\"{sm}\"}} {}", load(&m.act_count));
                }
                "ibsm_failovers_total" => {
                    let _ = writeln!(
                        out,
                        "ibsm_failovers_total{{sm=\"{sm}\"}} {}",
                        load(&m.failovers)
                    );
                }
                "ibsm_sweeps_total" => {
                    for (kind, v) in [("heavy", &m.sweeps_heavy), ("light", &m.sweeps_light)] {
                        let _ = writeln!(
                            out,
                            "ibsm_sweeps_total{{sm=\"{sm}\",kind=\"{kind}\"}} {}",
                            load(v)
                        );
                    }
                }
                "ibsm_sweep_phase_seconds" => {
                    let phases = m.phases.lock().map(|p| p.clone()).unwrap_or_default();
                    for (phase, secs) in phases {
                        let _ = writeln!(
                            out,
                            "ibsm_sweep_phase_seconds{{sm=\"{sm}\",phase=\"{phase}\"}} {secs}"
                        );
                    }
                }
                "ibsm_mads_sent_total" => {
                    let _ = writeln!(
                        out,
                        "ibsm_mads_sent_total{{sm=\"{sm}\"}} {}",
                        load(&m.mads_sent)
                    );
                }
                "ibsm_mads_timeouts_total" => {
                    let _ = writeln!(
                        out,
                        "ibsm_mads_timeouts_total{{sm=\"{sm}\"}} {}",
                        load(&m.mads_timeouts)
                    );
                }
                "ibsm_mads_retries_total" => {
                    let _ = writeln!(
                        out,
                        "ibsm_mads_retries_total{{sm=\"{sm}\"}} {}",
                        load(&m.mads_retries)
                    );
                }
                "ibsm_sminfo_requests_total" => {
                    let _ = writeln!(
                        out,
                        "ibsm_sminfo_requests_total{{sm=\"{sm}\"}} {}",
                        load(&m.sminfo_requests)
                    );
                }
                "ibsm_sm_key_rejections_total" => {
                    let _ = writeln!(
                        out,
                        "ibsm_sm_key_rejections_total{{sm=\"{sm}\"}} {}",
                        load(&m.sm_key_rejections)
                    );
                }
                "ibsm_replication_degraded" => {
                    let _ = writeln!(
                        out,
                        "ibsm_replication_degraded{{sm=\"{sm}\"}} {}",
                        load(&m.degraded)
                    );
                }
                name @ ("ibsm_mad_send_errors_total"
                | "ibsm_traps_total"
                | "ibsm_traps_rate_limited_total"
                | "ibsm_trap_sweeps_deferred_total"
                | "ibsm_duplicate_guids"
                | "ibsm_topology_capped") => {
                    let v = match name {
                        "ibsm_mad_send_errors_total" => &m.mad_send_errors,
                        "ibsm_traps_total" => &m.traps,
                        "ibsm_traps_rate_limited_total" => &m.traps_rate_limited,
                        "ibsm_trap_sweeps_deferred_total" => &m.trap_sweeps_deferred,
                        "ibsm_duplicate_guids" => &m.duplicate_guids,
                        _ => &m.topology_capped,
                    };
                    let _ = writeln!(out, "{name}{{sm=\"{sm}\"}} {}", load(v));
                }
                "ibsm_sa_groups"
                | "ibsm_sa_members"
                | "ibsm_sa_requests_total"
                | "ibsm_sa_errors_total"
                | "ibsm_sa_services"
                | "ibsm_sa_subscriptions"
                | "ibsm_sa_replica_current"
                | "ibsm_replica_applied_index"
                | "ibsm_client_reregisters_total" => {
                    let v = match f.name {
                        "ibsm_sa_groups" => &m.sa_groups,
                        "ibsm_sa_members" => &m.sa_members,
                        "ibsm_sa_requests_total" => &m.sa_requests,
                        "ibsm_sa_errors_total" => &m.sa_errors,
                        "ibsm_sa_services" => &m.sa_services,
                        "ibsm_sa_subscriptions" => &m.sa_subscriptions,
                        "ibsm_sa_replica_current" => &m.sa_replica_current,
                        "ibsm_replica_applied_index" => &m.replica_applied_index,
                        _ => &m.client_reregisters,
                    };
                    let _ = writeln!(out, "{}{{sm=\"{sm}\"}} {}", f.name, load(v));
                }
                "ibsm_sa_replica_last_write_timestamp_seconds" => {
                    let ms = load(&m.sa_replica_write_unix_ms);
                    let _ = writeln!(
                        out,
                        "{}{{sm=\"{sm}\"}} {}.{:03}",
                        f.name,
                        ms / 1000,
                        ms % 1000
                    );
                }
                "ibsm_untrusted_sms" | "ibsm_rogue_masters" | "ibsm_untrusted_sm_reports_total" => {
                    let v = match f.name {
                        "ibsm_untrusted_sms" => &m.untrusted_sms,
                        "ibsm_rogue_masters" => &m.rogue_masters,
                        _ => &m.untrusted_reports,
                    };
                    let _ = writeln!(out, "{}{{sm=\"{sm}\"}} {}", f.name, load(v));
                }
                _ => {}
            }
        }
    }
    out
}

/// Bind `addr` now (a busy port is an error at start) and return the bound address
/// and the future serving `GET /metrics` until `shutdown` resolves.
pub async fn bind(
    instances: Vec<(String, Arc<Metrics>)>,
    addr: SocketAddr,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(SocketAddr, impl Future<Output = ()> + Send + 'static), DaemonError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| DaemonError::Listen {
            what: "metrics",
            addr,
            source,
        })?;
    let local = listener
        .local_addr()
        .map_err(|source| DaemonError::LocalAddr {
            what: "metrics",
            source,
        })?;
    Ok((local, serve_on(instances, listener, shutdown)))
}

/// Serve `GET /metrics` on an already bound `listener` until `shutdown` resolves.
pub fn serve_on(
    instances: Vec<(String, Arc<Metrics>)>,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> impl Future<Output = ()> + Send + 'static {
    let instances = Arc::new(instances);
    async move {
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                _ = &mut shutdown => return,
                accepted = listener.accept() => match accepted {
                    Ok((conn, peer)) => {
                        let instances = Arc::clone(&instances);
                        tokio::spawn(async move {
                            if let Err(err) = serve_one(conn, &instances).await {
                                tracing::debug!(%peer, %err, "metrics request failed");
                            }
                        });
                    }
                    Err(err) => {
                        tracing::warn!(%err, "metrics: accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                },
            }
        }
    }
}

/// What the first line of a request asks for.
#[derive(Debug, PartialEq, Eq)]
enum Route {
    Metrics,
    NotFound,
    BadMethod,
    BadRequest,
}

fn route(head: &[u8]) -> Route {
    let line = head.split(|b| *b == b'\n').next().unwrap_or(&[]);
    let line = String::from_utf8_lossy(line);
    let mut parts = line.trim_end().split(' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Route::BadRequest;
    };
    if !version.starts_with("HTTP/1.") {
        return Route::BadRequest;
    }
    if method != "GET" && method != "HEAD" {
        return Route::BadMethod;
    }
    let path = target.split('?').next().unwrap_or("");
    if path == "/metrics" {
        Route::Metrics
    } else {
        Route::NotFound
    }
}

async fn serve_one(
    mut conn: tokio::net::TcpStream,
    instances: &[(String, Arc<Metrics>)],
) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    let read = async {
        loop {
            let n = conn.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            head.extend_from_slice(buf.get(..n).unwrap_or(&[]));
            if head.windows(4).any(|w| w == b"\r\n\r\n") || head.len() > MAX_REQUEST_HEAD {
                break;
            }
        }
        Ok::<(), std::io::Error>(())
    };
    match tokio::time::timeout(READ_TIMEOUT, read).await {
        Ok(r) => r?,
        Err(_) => return Ok(()),
    }
    let (status, ctype, body) = match route(&head) {
        Route::Metrics => (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            render(instances),
        ),
        Route::NotFound => ("404 Not Found", "text/plain", "try /metrics\n".to_string()),
        Route::BadMethod => (
            "405 Method Not Allowed",
            "text/plain",
            "GET only\n".to_string(),
        ),
        Route::BadRequest => ("400 Bad Request", "text/plain", String::new()),
    };
    let is_head = head.starts_with(b"HEAD ");
    let mut resp = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    if !is_head {
        resp.push_str(&body);
    }
    conn.write_all(resp.as_bytes()).await?;
    conn.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        assert_eq!(route(b"GET /metrics HTTP/1.1\r\n\r\n"), Route::Metrics);
        assert_eq!(route(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n"), Route::Metrics);
        assert_eq!(route(b"GET / HTTP/1.1\r\n\r\n"), Route::NotFound);
        assert_eq!(route(b"POST /metrics HTTP/1.1\r\n\r\n"), Route::BadMethod);
        assert_eq!(route(b"garbage"), Route::BadRequest);
        assert_eq!(route(b""), Route::BadRequest);
    }

    #[test]
    fn failover_counted_on_entry_into_master_only() {
        let m = Metrics::new();
        m.set_state(SmState::Discovering);
        m.set_state(SmState::Master);
        m.set_state(SmState::Master);
        assert_eq!(m.failovers(), 1);
        m.set_state(SmState::Standby);
        m.set_state(SmState::Master);
        assert_eq!(m.failovers(), 2);
    }

    #[test]
    fn exposition_has_help_type_and_labels() {
        let m = Arc::new(Metrics::new());
        m.set_state(SmState::Master);
        m.set_act_count(42);
        m.sweep_started(SweepKind::Heavy);
        m.set_sweep_phase("lft distribution", Duration::from_millis(1500));
        m.set_mad_totals(10, 2, 1);
        m.set_untrusted_sms(2, 1);
        m.count_untrusted_seen();
        let text = render(&[("sm\"1".to_string(), m)]);
        assert!(text.contains("# TYPE ibsm_rogue_masters gauge"));
        assert!(text.contains("ibsm_untrusted_sms{sm=\"sm\\\"1\"} 2"));
        assert!(text.contains("ibsm_rogue_masters{sm=\"sm\\\"1\"} 1"));
        assert!(text.contains("ibsm_untrusted_sm_reports_total{sm=\"sm\\\"1\"} 1"));
        assert!(text.contains("# TYPE ibsm_failovers_total counter"));
        assert!(text.contains("ibsm_sm_state{sm=\"sm\\\"1\"} 3"));
        assert!(text.contains("ibsm_act_count{sm=\"sm\\\"1\"} 42"));
        assert!(text.contains("ibsm_sweeps_total{sm=\"sm\\\"1\",kind=\"heavy\"} 1"));
        assert!(text.contains("phase=\"lft_distribution\"} 1.5"));
        assert!(text.contains("ibsm_mads_timeouts_total{sm=\"sm\\\"1\"} 2"));
        // Every sample line is `name{labels} value`.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (_, v) = line.rsplit_once(' ').expect("sample has a value");
            v.parse::<f64>().expect("value is a number");
        }
    }
}
