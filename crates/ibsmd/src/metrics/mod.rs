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

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use crate::error::DaemonError;

use prometheus_client::registry::Registry;

mod families;
mod state;

pub use families::metric_names;
use families::Instances;
pub use state::{
    state_number, Metrics, ReplicationFigures, SaSize, SweepKind, CONNECTION_LIFETIME,
    CONTENT_TYPE, HEADER_READ_TIMEOUT, MAX_CONNECTIONS, PORT_TRAP_SERIES, SA_REQUEST_SERIES,
};

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
    let limits = crate::http_serve::HttpLimits {
        what: "metrics",
        max_connections: MAX_CONNECTIONS,
        header_read_timeout: HEADER_READ_TIMEOUT,
        lifetime: CONNECTION_LIFETIME,
    };
    crate::http_serve::serve_bounded(app, listener, limits, None, shutdown)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ibsm_core::election::SmState;
    use std::collections::BTreeMap;
    use std::time::Duration;

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
            leadership_requests: 2,
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
            "ibsm_raft_leadership_requests_total{sm=\"a\"} 2",
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
