//! `/metrics` of the three-member replicated demo, scraped over HTTP and parsed
//! strictly as OpenMetrics text: the replication series agree with what each member's
//! `ListMembers` and `GetStatus` say, and a sweep moves the SMP counters.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use ibsm_demo::demo::Demo;
use ibsm_proto::v1::cluster_client::ClusterClient;
use ibsm_proto::v1::control_client::ControlClient;
use ibsm_proto::v1::{
    GetStatusRequest, ListMembersRequest, ListMembersResponse, SmState, Status, SweepRequest,
};
use ibsm_transport::FabricSpec;

/// One sample: metric name, labels, value.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

fn valid_name(n: &str) -> bool {
    let mut chars = n.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// `{k="v",...}` with OpenMetrics escapes; returns the labels and the rest of the line.
fn parse_labels(s: &str) -> Result<(BTreeMap<String, String>, &str), String> {
    let mut labels = BTreeMap::new();
    let mut rest = s.strip_prefix('{').ok_or("no {")?;
    loop {
        if let Some(r) = rest.strip_prefix('}') {
            return Ok((labels, r));
        }
        let (key, r) = rest.split_once("=\"").ok_or(format!("no =\" in {rest}"))?;
        if !valid_name(key) {
            return Err(format!("bad label name {key:?}"));
        }
        let mut value = String::new();
        let mut chars = r.char_indices();
        let end = loop {
            match chars.next() {
                Some((_, '\\')) => match chars.next() {
                    Some((_, '\\')) => value.push('\\'),
                    Some((_, '"')) => value.push('"'),
                    Some((_, 'n')) => value.push('\n'),
                    other => return Err(format!("bad escape {other:?}")),
                },
                Some((i, '"')) => break i,
                Some((_, c)) => value.push(c),
                None => return Err("unterminated label value".into()),
            }
        };
        if labels.insert(key.to_string(), value).is_some() {
            return Err(format!("label {key} twice"));
        }
        rest = &r[end + 1..];
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
}

/// Parse an OpenMetrics text exposition strictly: HELP then TYPE once per family, every
/// sample under its family's TYPE (a counter's samples end in `_total`), every series
/// once, `# EOF` last.
fn parse(text: &str) -> Result<Vec<Sample>, String> {
    let body = text.strip_suffix("# EOF\n").ok_or("no # EOF at the end")?;
    let mut families = BTreeSet::new();
    let mut current: Option<(String, String)> = None;
    let mut help: Option<String> = None;
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for line in body.lines() {
        if let Some(r) = line.strip_prefix("# HELP ") {
            let (name, _) = r
                .split_once(' ')
                .ok_or(format!("HELP without text: {line}"))?;
            help = Some(name.to_string());
        } else if let Some(r) = line.strip_prefix("# TYPE ") {
            let (name, kind) = r.split_once(' ').ok_or(format!("bad TYPE: {line}"))?;
            if help.as_deref() != Some(name) {
                return Err(format!("TYPE {name} without its HELP"));
            }
            if !["counter", "gauge"].contains(&kind) {
                return Err(format!("unexpected type {kind}"));
            }
            if !valid_name(name) || !families.insert(name.to_string()) {
                return Err(format!("family {name} invalid or described twice"));
            }
            current = Some((name.to_string(), kind.to_string()));
        } else if line.starts_with('#') {
            return Err(format!("unexpected comment {line}"));
        } else {
            let (family, kind) = current
                .as_ref()
                .ok_or(format!("sample before TYPE: {line}"))?;
            let name_end = line
                .find(['{', ' '])
                .ok_or(format!("sample without value: {line}"))?;
            let name = &line[..name_end];
            let expected = if kind == "counter" {
                format!("{family}_total")
            } else {
                family.clone()
            };
            if name != expected {
                return Err(format!("sample {name} under family {family} ({kind})"));
            }
            let (labels, rest) = if line[name_end..].starts_with('{') {
                parse_labels(&line[name_end..])?
            } else {
                (BTreeMap::new(), &line[name_end..])
            };
            let value: f64 = rest
                .strip_prefix(' ')
                .ok_or(format!("no space before the value: {line}"))?
                .parse()
                .map_err(|e| format!("value of {line}: {e}"))?;
            if !seen.insert(format!("{name}{labels:?}")) {
                return Err(format!("series twice: {line}"));
            }
            out.push(Sample {
                name: name.to_string(),
                labels,
                value,
            });
        }
    }
    Ok(out)
}

fn find(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|s| {
            s.name == name
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|s| s.value)
}

/// GET /metrics with reqwest-free plain HTTP/1.1; checks status and content type.
async fn scrape(addr: SocketAddr) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut c = tokio::net::TcpStream::connect(addr).await.expect("connect");
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .expect("write");
    let mut resp = String::new();
    c.read_to_string(&mut resp).await.expect("read");
    let (head, body) = resp.split_once("\r\n\r\n").expect("http response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/openmetrics-text"),
        "{head}"
    );
    // No chunked encoding expected from a full body; be strict about it.
    assert!(
        !head.to_ascii_lowercase().contains("chunked"),
        "chunked: {head}"
    );
    body.to_string()
}

async fn members(ep: SocketAddr) -> Option<ListMembersResponse> {
    let mut c = ClusterClient::connect(format!("http://{ep}")).await.ok()?;
    Some(
        c.list_members(ListMembersRequest {})
            .await
            .ok()?
            .into_inner(),
    )
}

async fn status(ep: SocketAddr) -> Option<Status> {
    let mut c = ControlClient::connect(format!("http://{ep}")).await.ok()?;
    Some(c.get_status(GetStatusRequest {}).await.ok()?.into_inner())
}

/// Where the scrape disagrees with what member `sm` answers over gRPC (empty: none).
fn disagreements(
    samples: &[Sample],
    sm: &str,
    lm: &ListMembersResponse,
    st: &Status,
) -> Vec<String> {
    let mut bad = Vec::new();
    let mut check = |what: &str, got: Option<f64>, want: u64| {
        if got != Some(want as f64) {
            bad.push(format!("{sm} {what}: scraped {got:?}, gRPC {want}"));
        }
    };
    let l = [("sm", sm)];
    check(
        "node id",
        find(samples, "ibsm_raft_node_id", &l),
        lm.node_id,
    );
    check("leader", find(samples, "ibsm_raft_leader", &l), lm.leader);
    check("term", find(samples, "ibsm_raft_term", &l), lm.term);
    check(
        "applied index",
        find(samples, "ibsm_replica_applied_index", &l),
        lm.applied_index,
    );
    check(
        "epoch",
        find(samples, "ibsm_replication_epoch", &l),
        st.epoch,
    );
    check(
        "degraded",
        find(samples, "ibsm_replication_degraded", &l),
        u64::from(st.degraded),
    );
    let leads = lm.leader == lm.node_id && lm.leader != 0;
    check(
        "role leader",
        find(samples, "ibsm_raft_role", &[("sm", sm), ("role", "leader")]),
        u64::from(leads),
    );
    check(
        "role follower",
        find(
            samples,
            "ibsm_raft_role",
            &[("sm", sm), ("role", "follower")],
        ),
        u64::from(!leads),
    );
    for m in &lm.members {
        let id = m.node_id.to_string();
        let matched = find(
            samples,
            "ibsm_raft_matched_index",
            &[("sm", sm), ("member", &id)],
        );
        let lag = find(
            samples,
            "ibsm_raft_follower_lag",
            &[("sm", sm), ("member", &id)],
        );
        if leads {
            // The leader knows what every member holds, at most its own last index.
            let last = find(samples, "ibsm_raft_last_log_index", &l).unwrap_or(-1.0);
            match matched {
                Some(v) if v <= last => {}
                other => bad.push(format!("{sm} matched of {id}: {other:?} (last {last})")),
            }
            let want_lag = m.node_id != lm.node_id;
            if lag.is_some() != want_lag {
                bad.push(format!("{sm} lag of {id}: {lag:?}"));
            }
        } else if matched.is_some() || lag.is_some() {
            bad.push(format!("follower {sm} reports matched/lag of {id}"));
        }
    }
    bad
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_parse_and_agree_with_the_cluster() {
    let spec = FabricSpec::parse("gen:fat-tree:4").expect("spec");
    let mut demo = Demo::start(&spec, 0).await.expect("demo starts");
    let members_info = demo.members();
    let (addr, serve) = ibsmd::metrics::bind(
        demo.metrics_instances(),
        SocketAddr::from(([127, 0, 0, 1], 0)),
        std::future::pending(),
    )
    .await
    .expect("metrics bind");
    let server = tokio::spawn(serve);

    // Replication: every member's series agree with its ListMembers/GetStatus (polled
    // until a quiet moment: the figures move while the cluster settles).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = scrape(addr).await;
        let samples = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let mut bad = Vec::new();
        let mut leaders = 0;
        for m in &members_info {
            match (members(m.endpoint).await, status(m.endpoint).await) {
                (Some(lm), Some(st)) => {
                    if lm.members.len() != 3 {
                        bad.push(format!("{}: {} members", m.name, lm.members.len()));
                    }
                    leaders += usize::from(lm.leader == lm.node_id);
                    bad.extend(disagreements(&samples, &m.name, &lm, &st));
                }
                _ => bad.push(format!("{} did not answer", m.name)),
            }
        }
        if leaders != 1 {
            bad.push(format!("{leaders} members lead"));
        }
        if bad.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "scrape and cluster disagree: {bad:#?}\n{text}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // SMP counters: a heavy sweep on the master sends and receives SMPs.
    let deadline = Instant::now() + Duration::from_secs(30);
    let master = loop {
        let mut found = None;
        for m in &members_info {
            if status(m.endpoint)
                .await
                .is_some_and(|s| s.state == SmState::Master as i32)
            {
                found = Some(m.clone());
            }
        }
        if let Some(m) = found {
            break m;
        }
        assert!(Instant::now() < deadline, "no master");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let sm = [("sm", master.name.as_str())];
    let before = parse(&scrape(addr).await).expect("parse");
    let sent0 = find(&before, "ibsm_mads_sent_total", &sm).expect("sent");
    let recv0 = find(&before, "ibsm_mads_received_total", &sm).expect("received");
    let heavy0 = find(
        &before,
        "ibsm_sweeps_total",
        &[("sm", master.name.as_str()), ("kind", "heavy")],
    )
    .expect("sweeps");
    let mut c = ControlClient::connect(format!("http://{}", master.endpoint))
        .await
        .expect("connect");
    c.sweep(SweepRequest { heavy: true })
        .await
        .expect("heavy sweep");
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let text = scrape(addr).await;
        let after = parse(&text).expect("parse");
        let sent = find(&after, "ibsm_mads_sent_total", &sm).expect("sent");
        let recv = find(&after, "ibsm_mads_received_total", &sm).expect("received");
        let heavy = find(
            &after,
            "ibsm_sweeps_total",
            &[("sm", master.name.as_str()), ("kind", "heavy")],
        )
        .expect("sweeps");
        if sent > sent0 && recv > recv0 && heavy > heavy0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "counters did not move after a sweep ({sent0}->{sent}, {recv0}->{recv}, {heavy0}->{heavy})"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    server.abort();
    demo.stop().await;
}

#[test]
fn the_strict_parser_refuses_what_prometheus_would() {
    let ok = "# HELP a_b x\n# TYPE a_b counter\na_b_total{sm=\"q\\\"\"} 1\n# EOF\n";
    assert_eq!(parse(ok).expect("valid")[0].labels["sm"], "q\"");
    for bad in [
        "# HELP a x\n# TYPE a gauge\na 1\n",
        "# HELP a x\n# TYPE a counter\na 1\n# EOF\n",
        "# HELP a x\n# TYPE a gauge\na{sm=\"1\"} 1\na{sm=\"1\"} 2\n# EOF\n",
        "# HELP a x\n# TYPE a gauge\n# HELP a x\n# TYPE a gauge\n# EOF\n",
        "# HELP a x\n# TYPE a gauge\nb 1\n# EOF\n",
        "# HELP a x\n# TYPE a gauge\na{sm=\"1} 1\n# EOF\n",
    ] {
        assert!(parse(bad).is_err(), "accepted:\n{bad}");
    }
}
