//! Prometheus metrics: per-instance counters and gauges ([`Metrics`]), exposed on
//! `GET /metrics` in the OpenMetrics text format by `prometheus-client` (the encoding
//! and type suffixes), routed by axum and served over hyper's HTTP/1.1 (both already
//! here through tonic) with a bounded number of connections and a header-read timeout.
//!
//! Every value is an atomic written by the instance thread (no lock on its hot path);
//! sweep-phase durations, the replication figures and the per-port trap counts sit
//! behind mutexes because their label sets are open-ended. A scrape reads them through
//! one `prometheus_client` [`Collector`] over every instance, so each family is
//! described once and each instance's series carry `sm="<name>"`.
//!
//! The replication families (`ibsm_replication_epoch`, `ibsm_raft_*`) have samples only
//! for an instance with replication: a gauge that is always 0 would look like a
//! healthy-but-idle cluster on a dashboard.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::error::DaemonError;

use ibsm_core::election::SmState;
use prometheus_client::registry::Registry;

/// Content type of the exposition (OpenMetrics text, which Prometheus scrapes).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// At most this many (LID, port) series of `ibsm_port_traps_total` per instance; the
/// least-trapping one goes first (a trap storm from many ports cannot grow a scrape
/// without bound).
pub const PORT_TRAP_SERIES: usize = 256;

/// Connections served at once on `/metrics`.
pub const MAX_CONNECTIONS: usize = 32;
/// How long a client may take to send its request head.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one connection may live (keep-alive included).
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(60);

/// At most this many (method, attribute) series of `ibsm_sa_requests_by_total`.
pub const SA_REQUEST_SERIES: usize = 128;

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
    mads_received: AtomicU64,
    phases: Mutex<BTreeMap<String, f64>>,
    replication: Mutex<Option<ReplicationFigures>>,
    port_traps: Mutex<BTreeMap<(u16, u8), u64>>,
    sa_requests_by: Mutex<BTreeMap<(String, String), u64>>,
}

/// What replication reports, for [`Metrics::set_replication`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplicationFigures {
    /// Mastership epoch of the local copy.
    pub epoch: u64,
    /// `leader`, `follower`, `candidate`, `learner` or `shutdown`.
    pub role: String,
    /// Raft term.
    pub term: u64,
    /// This member's Raft node id.
    pub node_id: u64,
    /// The Raft leader's node id (0: none known).
    pub leader: u64,
    /// This member's last log index.
    pub last_log_index: u64,
    /// On the leader: the highest log index each member is known to hold (`None`:
    /// nothing replicated to it yet). Empty elsewhere.
    pub matched: BTreeMap<u64, Option<u64>>,
}

/// Raft roles, every one a series of `ibsm_raft_role` (1 for the current one).
pub(crate) const ROLES: [&str; 5] = ["leader", "follower", "candidate", "learner", "shutdown"];

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

    /// One MAD received from the device (`ibsm_mads_received_total`).
    pub fn mad_received(&self) {
        self.mads_received.fetch_add(1, Ordering::Relaxed);
    }

    /// Replication figures of this member (`ibsm_replication_epoch`, `ibsm_raft_*`);
    /// `None` removes them (no replication).
    pub fn set_replication(&self, figures: Option<ReplicationFigures>) {
        if let Ok(mut r) = self.replication.lock() {
            *r = figures;
        }
    }

    /// A trap from the port `port` of LID `lid` (`ibsm_port_traps_total{lid,port}`,
    /// at most [`PORT_TRAP_SERIES`] series: the least-counted one makes room).
    pub fn count_port_trap(&self, lid: u16, port: u8) {
        let Ok(mut t) = self.port_traps.lock() else {
            return;
        };
        if !t.contains_key(&(lid, port)) && t.len() >= PORT_TRAP_SERIES {
            if let Some(k) = t.iter().min_by_key(|(_, n)| **n).map(|(k, _)| *k) {
                t.remove(&k);
            }
        }
        *t.entry((lid, port)).or_insert(0) += 1;
    }

    /// One SA request (`ibsm_sa_requests_by_total{method,attribute}`, at most
    /// [`SA_REQUEST_SERIES`] series; requests of further pairs are not counted there).
    pub fn count_sa_request(&self, method: &str, attribute: &str) {
        let Ok(mut t) = self.sa_requests_by.lock() else {
            return;
        };
        let key = (method.to_string(), attribute.to_string());
        if t.len() >= SA_REQUEST_SERIES && !t.contains_key(&key) {
            return;
        }
        *t.entry(key).or_insert(0) += 1;
    }

    /// Current value of `ibsm_failovers_total` (for tests and status).
    pub fn failovers(&self) -> u64 {
        self.failovers.load(Ordering::Relaxed)
    }
}

mod families;

pub use families::metric_names;
use families::Instances;

fn registry(instances: Arc<Vec<(String, Arc<Metrics>)>>) -> Registry {
    let mut r = Registry::default();
    r.register_collector(Box::new(Instances(instances)));
    r
}

fn encode(registry: &Registry) -> String {
    let mut out = String::new();
    // Writing into a String cannot fail; an encoder error would be a bug in a name.
    if let Err(err) = prometheus_client::encoding::text::encode(&mut out, registry) {
        tracing::error!(%err, "metrics: encoding failed");
    }
    out
}

/// Render every instance in the OpenMetrics text format, labelled `sm="<name>"`.
pub fn render(instances: &[(String, Arc<Metrics>)]) -> String {
    encode(&registry(Arc::new(instances.to_vec())))
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

/// Serve `GET /metrics` (and `HEAD`) on an already bound `listener` until `shutdown`
/// resolves; other paths answer 404, other methods 405. At most
/// [`MAX_CONNECTIONS`] at a time (more wait in the listen backlog), each closed when its
/// request head takes longer than [`HEADER_READ_TIMEOUT`] or the connection lives
/// longer than [`CONNECTION_LIFETIME`]: a scraper must not be able to pin the daemon.
pub fn serve_on(
    instances: Vec<(String, Arc<Metrics>)>,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> impl Future<Output = ()> + Send + 'static {
    let registry = Arc::new(registry(Arc::new(instances)));
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let registry = Arc::clone(&registry);
            async move {
                (
                    [(axum::http::header::CONTENT_TYPE, CONTENT_TYPE)],
                    encode(&registry),
                )
            }
        }),
    );
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    async move {
        tokio::pin!(shutdown);
        loop {
            let permit = tokio::select! {
                _ = &mut shutdown => return,
                p = Arc::clone(&slots).acquire_owned() => match p {
                    Ok(p) => p,
                    Err(_) => return,
                },
            };
            let (stream, peer) = tokio::select! {
                _ = &mut shutdown => return,
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(err) => {
                        tracing::warn!(%err, "metrics: accept failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
            };
            let service = hyper_util::service::TowerToHyperService::new(app.clone());
            tokio::spawn(async move {
                let conn = hyper::server::conn::http1::Builder::new()
                    .timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(HEADER_READ_TIMEOUT)
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
                match tokio::time::timeout(CONNECTION_LIFETIME, conn).await {
                    Ok(Ok(())) => {}
                    Ok(Err(err)) => tracing::debug!(%peer, %err, "metrics: connection failed"),
                    Err(_) => tracing::debug!(%peer, "metrics: connection held too long, closed"),
                }
                drop(permit);
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        // OpenMetrics: a counter's family is named without `_total`, its sample with.
        assert!(text.contains("# TYPE ibsm_failovers counter"));
        assert!(text.ends_with("# EOF\n"));
        assert!(text.contains("ibsm_sm_state{sm=\"sm\\\"1\"} 3"));
        assert!(text.contains("ibsm_act_count{sm=\"sm\\\"1\"} 42"));
        assert!(text.contains("ibsm_sweeps_total{sm=\"sm\\\"1\",kind=\"heavy\"} 1"));
        assert!(text.contains("phase=\"lft_distribution\"} 1.5"));
        assert!(text.contains("ibsm_mads_timeouts_total{sm=\"sm\\\"1\"} 2"));
        // No replication: the replication families have no samples.
        assert!(!text.contains("ibsm_raft_term{"));
        // Every sample line is `name{labels} value`.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (_, v) = line.rsplit_once(' ').expect("sample has a value");
            v.parse::<f64>().expect("value is a number");
        }
    }

    #[test]
    fn replication_traps_and_sa_series() {
        let m = Arc::new(Metrics::new());
        m.set_replication(Some(ReplicationFigures {
            epoch: 4,
            role: "leader".into(),
            term: 7,
            node_id: 1,
            leader: 1,
            last_log_index: 30,
            matched: BTreeMap::from([(1, Some(30)), (2, Some(25)), (3, None)]),
        }));
        m.count_port_trap(12, 3);
        m.count_port_trap(12, 3);
        m.count_sa_request("GetTable", "PathRecord");
        let text = render(&[("a".to_string(), m.clone())]);
        for want in [
            "ibsm_replication_epoch{sm=\"a\"} 4",
            "ibsm_raft_role{sm=\"a\",role=\"leader\"} 1",
            "ibsm_raft_role{sm=\"a\",role=\"follower\"} 0",
            "ibsm_raft_term{sm=\"a\"} 7",
            "ibsm_raft_matched_index{sm=\"a\",member=\"2\"} 25",
            "ibsm_raft_follower_lag{sm=\"a\",member=\"2\"} 5",
            "ibsm_raft_follower_lag{sm=\"a\",member=\"3\"} 30",
            "ibsm_port_traps_total{sm=\"a\",lid=\"12\",port=\"3\"} 2",
            "ibsm_sa_requests_by_total{sm=\"a\",method=\"GetTable\",attribute=\"PathRecord\"} 1",
        ] {
            assert!(text.contains(want), "no {want} in\n{text}");
        }
        // The leader's own entry is no lag.
        assert!(!text.contains("ibsm_raft_follower_lag{sm=\"a\",member=\"1\"}"));
        // Bounded: a storm from many ports keeps at most PORT_TRAP_SERIES series.
        for lid in 0..(PORT_TRAP_SERIES as u16 + 50) {
            m.count_port_trap(1000 + lid, 1);
        }
        let text = render(&[("a".to_string(), m)]);
        let series = text
            .lines()
            .filter(|l| l.starts_with("ibsm_port_traps_total{"))
            .count();
        assert_eq!(series, PORT_TRAP_SERIES);
        // The busiest port (2 traps) was not the one evicted.
        assert!(text.contains("lid=\"12\",port=\"3\"} 2"));
    }

    async fn get(addr: SocketAddr, request: &str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut c = tokio::net::TcpStream::connect(addr).await.expect("connect");
        c.write_all(request.as_bytes()).await.expect("write");
        let mut out = String::new();
        c.read_to_string(&mut out).await.expect("read");
        out
    }

    #[tokio::test]
    async fn serves_metrics_refuses_the_rest_and_closes_a_silent_client() {
        use tokio::io::AsyncReadExt;
        let (addr, serve) = bind(
            vec![("sm1".into(), Arc::new(Metrics::new()))],
            SocketAddr::from(([127, 0, 0, 1], 0)),
            std::future::pending(),
        )
        .await
        .expect("bind");
        let server = tokio::spawn(serve);
        let mut silent = tokio::net::TcpStream::connect(addr).await.expect("connect");
        // Others are served while it says nothing.
        let ok = get(
            addr,
            "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
        assert!(ok.contains(CONTENT_TYPE), "{ok}");
        assert!(ok.contains("ibsm_up{sm=\"sm1\"} 0"), "{ok}");
        let head = get(
            addr,
            "HEAD /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(
            head.starts_with("HTTP/1.1 200") && !head.contains("ibsm_up"),
            "{head}"
        );
        let missing = get(
            addr,
            "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(missing.starts_with("HTTP/1.1 404"), "{missing}");
        let post = get(
            addr,
            "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(post.starts_with("HTTP/1.1 405"), "{post}");
        // The silent client is closed by the server (its head never came); the bound
        // here only keeps a broken server from hanging the test.
        let mut buf = [0u8; 256];
        let closed = tokio::time::timeout(Duration::from_secs(120), async {
            loop {
                match silent.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
            }
        })
        .await;
        assert!(
            closed.is_ok(),
            "a client that sends nothing kept its connection"
        );
        server.abort();
    }
}
