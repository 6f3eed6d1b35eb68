//! The web console in a real browser (Debian's chromium, headless, over the DevTools
//! protocol): `ibsmd demo` with an admin and a read-only token; the page shows the
//! master's GUID and the standbys, follows a master killed through the Demo service
//! to the new master without a reload, offers actions to the admin only, and every
//! data path refuses a request without credentials. Screenshots go to
//! target/web-console-screenshots/ (printed).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use ibsm_proto::demo::v1::demo_client::DemoClient;
use ibsm_proto::demo::v1::{KillInstanceRequest, SetLinkStateRequest};
use ibsm_proto::v1::control_client::ControlClient;
use ibsm_proto::v1::GetStatusRequest;

mod cdp;
mod common;
use cdp::{Browser, Tab};
use common::{free_port, Reaped, IBSMD};

const ADMIN: &str = "admin-token-for-the-web-test-0123";
const READER: &str = "reader-token-for-the-web-test-4567";
/// Bound on every wait (a hung page fails instead of hanging the suite).
const LIMIT: Duration = Duration::from_secs(60);

fn shots() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let dir = target.join("web-console-screenshots");
    std::fs::create_dir_all(&dir).expect("screenshot dir");
    dir
}

/// One raw HTTP/1.1 request; the status line's code.
fn http_status(addr: &str, method: &str, path: &str, token: Option<&str>) -> u16 {
    let mut c = std::net::TcpStream::connect(addr).expect("connect to the console");
    c.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let body = if method == "POST" {
        r#"{"action":"sweep","sm":"sm1"}"#
    } else {
        ""
    };
    write!(c, "{method} {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()).expect("write");
    let mut head = [0u8; 12];
    c.read_exact(&mut head).expect("status line");
    String::from_utf8_lossy(&head[9..12])
        .parse()
        .expect("status code")
}

async fn master_guid(grpc: u16) -> u64 {
    let mut c = ControlClient::connect(format!("http://127.0.0.1:{grpc}"))
        .await
        .expect("connect");
    let mut req = tonic::Request::new(GetStatusRequest {});
    req.metadata_mut().insert(
        "authorization",
        format!("Bearer {READER}").parse().expect("header"),
    );
    c.get_status(req)
        .await
        .expect("GetStatus")
        .into_inner()
        .master_guid
}

fn login(b: &mut Browser, url: &str, token: &str) -> Tab {
    let tab = b.open(url);
    b.wait_for(
        &tab,
        "the login form",
        "!document.getElementById('login').hidden",
        LIMIT,
    );
    b.eval(&tab, &format!("document.getElementById('token').value = '{token}'; document.getElementById('login-button').click(); true"));
    b.wait_for(&tab, "a master and two standbys",
        "document.querySelectorAll('#instances tr[data-state=MASTER]').length === 1 && document.querySelectorAll('#instances tr[data-state=STANDBY]').length === 2",
        LIMIT);
    tab
}

#[tokio::test(flavor = "multi_thread")]
async fn the_console_shows_the_cluster_follows_a_failover_and_hides_actions_from_readers() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, t) in [("admin", ADMIN), ("reader", READER)] {
        let p = dir.path().join(name);
        std::fs::write(&p, t).expect("token file");
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .expect("chmod");
    }
    let base = loop {
        let p = free_port();
        if (1..3).all(|k| std::net::TcpListener::bind(("127.0.0.1", p + k)).is_ok()) {
            break p;
        }
    };
    let mut child = Command::new(IBSMD)
        .args([
            "demo",
            "--base-port",
            &base.to_string(),
            "--web",
            "127.0.0.1:0",
        ])
        .arg("--auth-token-file")
        .arg(dir.path().join("admin"))
        .arg("--read-only-token-file")
        .arg(dir.path().join("reader"))
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn ibsmd demo");
    let out = BufReader::new(child.stdout.take().expect("stdout"));
    let _demo = Reaped(child);
    let mut web = None;
    for line in out.lines() {
        let line = line.expect("demo stdout");
        if let Some(url) = line
            .split_whitespace()
            .find(|w| w.starts_with("http://") && line.contains("web console"))
        {
            web = Some(url.trim_end_matches('/').to_string());
        }
        if line.starts_with("Ctrl-C") {
            break;
        }
    }
    let url = web.expect("the demo printed its web console's address");
    let addr = url.trim_start_matches("http://").to_string();

    // Without credentials (or with a wrong token) every data path is refused; the page
    // itself loads; a reader may not act.
    for path in [
        "/api/whoami",
        "/api/cluster",
        "/api/stream",
        "/api/fabric/topology",
        "/api/fabric/route?src=1&dst=2",
    ] {
        assert_eq!(
            http_status(&addr, "GET", path, None),
            401,
            "GET {path} without a token"
        );
        assert_eq!(
            http_status(&addr, "GET", path, Some("not-the-token-at-all-000")),
            401,
            "GET {path}, wrong token"
        );
    }
    assert_eq!(http_status(&addr, "POST", "/api/action", None), 401);
    assert_eq!(
        http_status(&addr, "POST", "/api/action", Some(READER)),
        403,
        "a reader's action"
    );
    assert_eq!(http_status(&addr, "GET", "/", None), 200);

    let shots = shots();
    let mut b = Browser::launch();
    let tab = login(&mut b, &format!("{url}/"), ADMIN);
    let master = format!("{:#018x}", master_guid(base).await);
    b.wait_for(
        &tab,
        "the master's GUID in the header",
        &format!("document.getElementById('master-guid').textContent === '{master}'"),
        LIMIT,
    );
    assert_eq!(b.eval(&tab, "document.body.dataset.role"), "admin");
    let buttons = b
        .eval(
            &tab,
            "document.querySelectorAll('#instances button.action').length",
        )
        .as_u64()
        .unwrap_or(0);
    assert!(
        buttons >= 3,
        "the admin sees the actions ({buttons} buttons)"
    );
    b.screenshot(&tab, &shots.join("1-cluster-admin.png"));
    let page = b.eval(&tab, "window.ibsm.pageId");

    // The fabric tab: the topology drawn with the master's port marked, a route traced.
    b.eval(&tab, "window.ibsm.showTab('fabric'); true");
    b.wait_for(
        &tab,
        "the topology",
        "!!document.querySelector('#topo-svg .master-port')",
        LIMIT,
    );
    assert_eq!(
        b.eval(&tab, "document.getElementById('topo-svg').dataset.layout"),
        "tiers",
        "a fat tree is drawn in tiers"
    );
    // Between the first and the last host of the topology the page holds.
    let lids = b.eval(&tab, "(() => { const l = window.ibsmFabric.topo().nodes.filter(n => n.type === 1).map(n => n.ports.find(p => p.lid).lid); return [l[0], l[l.length - 1]]; })()");
    let (src, dst) = (
        lids[0].as_u64().expect("a host LID"),
        lids[1].as_u64().expect("a host LID"),
    );
    b.eval(&tab, &format!("document.getElementById('route-src').value = '{src}'; document.getElementById('route-dst').value = '{dst}'; document.getElementById('route-go').click(); true"));
    b.wait_for(&tab, "the traced route", "!!document.querySelector('#topo-svg polyline.route') && document.getElementById('route-result').textContent.includes('→')", LIMIT);
    b.screenshot(&tab, &shots.join("2-fabric-route.png"));

    b.eval(&tab, "window.ibsm.showTab('cluster'); true");

    // Kill the master through the Demo service: the open page follows, no reload.
    let mut demo = DemoClient::connect(format!("http://127.0.0.1:{base}"))
        .await
        .expect("demo endpoint");
    let mut req = tonic::Request::new(KillInstanceRequest {
        master: true,
        ..Default::default()
    });
    req.metadata_mut().insert(
        "authorization",
        format!("Bearer {ADMIN}").parse().expect("header"),
    );
    demo.kill_instance(req).await.expect("KillInstance");
    let took = b.wait_for(&tab, "a new master",
        &format!("(() => {{ const m = document.body.dataset.master; return !!m && m !== '{master}' && document.querySelectorAll('#instances tr[data-state=STOPPED]').length === 1 && document.getElementById('master-guid').textContent === m; }})()"),
        LIMIT);
    eprintln!("the page showed the new master {took:?} after KillInstance returned");
    assert_eq!(
        b.eval(&tab, "window.ibsm.pageId"),
        page,
        "the page was reloaded"
    );
    let new_master = b.eval(&tab, "document.body.dataset.master");
    // An admin action goes through its confirmation dialog. The header can name the new
    // master (from the SMs' view) an update before its own row says MASTER: wait for the
    // row's button.
    b.wait_for(
        &tab,
        "the new master's row with its actions",
        "!!document.querySelector('#instances tr[data-state=MASTER] button[data-action=sweep]')",
        LIMIT,
    );
    b.eval(&tab, "document.querySelector('#instances tr[data-state=MASTER] button[data-action=sweep]').click(); true");
    b.wait_for(
        &tab,
        "the confirmation dialog",
        "document.getElementById('confirm').open",
        LIMIT,
    );
    b.eval(&tab, "document.getElementById('confirm-ok').click(); true");
    b.wait_for(
        &tab,
        "the sweep's outcome",
        "document.getElementById('action-result').textContent.includes('heavy sweep')",
        LIMIT,
    );
    b.screenshot(&tab, &shots.join("3-after-failover.png"));
    b.eval(&tab, "window.ibsm.showTab('timeline'); true");
    b.wait_for(&tab, "the failover on the timeline", "!!document.querySelector('#changes tr[data-kind=failover]') && !!document.querySelector('#timeline line.failover')", LIMIT);
    // The new master's lane ends MASTER, drawn up to now (the right edge), not the
    // STANDBY it was before.
    let new_guid = new_master
        .as_str()
        .expect("the new master's GUID")
        .to_string();
    b.wait_for(&tab, "the new master's last span MASTER to the right edge",
        &format!("(() => {{ const r = document.querySelector('#timeline rect.span[data-guid=\"{new_guid}\"][data-last]'); if (!r || r.dataset.state !== 'MASTER') return false; const svg = r.ownerSVGElement; return Number(r.getAttribute('x')) + Number(r.getAttribute('width')) > Number(svg.getAttribute('width')) - 20; }})()"),
        LIMIT);
    b.screenshot(&tab, &shots.join("4-timeline.png"));
    // A drill's report.json (its shape: the cycles and the poller's wire changes) opens
    // as the same view: lanes per SM, the failover marked, the masterless gap shaded.
    let report = serde_json::json!({
        "scenario": "kill-master", "cycles_run": 1, "masterless_ms_max": 400,
        "invariants_ok": true, "broken": [], "failover_ms": {"p50": 410, "max": 410},
        "cycles": [{"action": "kill-master", "action_unix_ms": 1_000_500}],
        "wire_from_unix_ms": 1_000_000, "wire_to_unix_ms": 1_003_000,
        "wire_changes": [
            {"at_unix_ms": 1_000_000, "name": "sm1", "state": "MASTER"},
            {"at_unix_ms": 1_000_000, "name": "sm2", "state": "STANDBY"},
            {"at_unix_ms": 1_000_600, "name": "sm1", "state": null},
            {"at_unix_ms": 1_001_000, "name": "sm2", "state": "MASTER"}
        ]
    });
    b.eval(&tab, &format!("window.ibsmTimeline.openReport({report})"));
    b.wait_for(&tab, "the report's wire timeline",
        "document.querySelectorAll('#report-timeline rect.span').length === 4 && !!document.querySelector('#report-timeline line.failover') && !!document.querySelector('#report-timeline rect.masterless') && document.querySelector('#report-timeline rect.span[data-guid=sm2][data-last]').dataset.state === 'MASTER' && !!document.querySelector('#report-changes tr[data-kind=failover]')",
        LIMIT);
    b.screenshot(&tab, &shots.join("4b-drill-report.png"));

    // A reader sees the same cluster and no action at all.
    let ro = b.open(&format!("{url}/"));
    b.wait_for(
        &ro,
        "the login form",
        "!document.getElementById('login').hidden",
        LIMIT,
    );
    b.eval(&ro, "document.getElementById('token').value = 'a-wrong-token-0000000000'; document.getElementById('login-button').click(); true");
    b.wait_for(
        &ro,
        "the refusal of a wrong token",
        "document.getElementById('login-error').textContent.includes('refused')",
        LIMIT,
    );
    b.eval(&ro, &format!("document.getElementById('token').value = '{READER}'; document.getElementById('login-button').click(); true"));
    b.wait_for(
        &ro,
        "the new master for the reader",
        &format!("document.body.dataset.master === {new_master}"),
        LIMIT,
    );
    assert_eq!(b.eval(&ro, "document.body.dataset.role"), "read-only");
    assert_eq!(
        b.eval(&ro, "document.querySelectorAll('button.action').length"),
        0,
        "a reader sees action buttons"
    );
    b.screenshot(&ro, &shots.join("5-cluster-read-only.png"));

    // A standby's cable pulled (Demo SetLinkState): the master's next sweep reads its
    // switch port Down; the topology answer keeps the cable with that state, and the
    // page draws it as a down link.
    let cluster: serde_json::Value =
        serde_json::from_str(&http_body(&addr, "/api/cluster", READER).expect("cluster"))
            .expect("JSON");
    let standby = cluster["cluster"]["instances"]
        .as_array()
        .and_then(|a| a.iter().find(|i| i["state"] == "STANDBY"))
        .and_then(|i| i["name"].as_str())
        .expect("a standby left")
        .to_string();
    let mut req = tonic::Request::new(SetLinkStateRequest {
        name: standby.clone(),
        up: false,
    });
    req.metadata_mut().insert(
        "authorization",
        format!("Bearer {ADMIN}").parse().expect("header"),
    );
    demo.set_link_state(req).await.expect("SetLinkState down");
    let start = std::time::Instant::now();
    let down = loop {
        let topo: serde_json::Value = serde_json::from_str(
            &http_body(&addr, "/api/fabric/topology", READER).unwrap_or_default(),
        )
        .unwrap_or_default();
        let down: Vec<serde_json::Value> = topo["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|n| n["ports"].as_array().cloned().unwrap_or_default())
            .filter(|p| p["state"] == "DOWN" && p["peer"].is_string())
            .collect();
        if !down.is_empty() {
            break down;
        }
        assert!(
            start.elapsed() < LIMIT,
            "the topology never showed {standby}'s cable down: {topo}"
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    assert_eq!(down.len(), 1, "one cable down: {down:?}");
    b.eval(
        &tab,
        "window.ibsm.showTab('fabric'); window.ibsmFabric.load(); true",
    );
    b.wait_for(
        &tab,
        "the down link drawn",
        "!!document.querySelector('#topo-svg line.link.down[data-state=DOWN]')",
        LIMIT,
    );
    // The far end of the pulled cable is drawn and counted (not "15 CAs" beside 16
    // circles), and said apart.
    let (circles, summary) = (
        b.eval(
            &tab,
            "document.querySelectorAll('#topo-svg circle.ca').length",
        ),
        b.eval(&tab, "document.getElementById('topo-summary').textContent"),
    );
    let summary = summary.as_str().unwrap_or("").to_string();
    assert!(
        summary.contains(&format!(" {circles} CAs")) && summary.contains("1 beyond a down cable"),
        "{circles} CAs drawn, the summary says: {summary}"
    );
    b.screenshot(&tab, &shots.join("6-fabric-link-down.png"));
}

/// `ibsmd --web` on a daemon (not the demo): the console answers for its one instance
/// under the daemon's token, and nothing without it.
#[test]
fn the_daemon_serves_its_console_under_its_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let token = dir.path().join("admin");
    std::fs::write(&token, ADMIN).expect("token file");
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("chmod");
    let (grpc, web) = (free_port(), free_port());
    let child = Command::new(IBSMD)
        .args(["--fabric", "gen:fat-tree:4", "--priority", "5"])
        .args([
            "--grpc",
            &format!("127.0.0.1:{grpc}"),
            "--web",
            &format!("127.0.0.1:{web}"),
        ])
        .arg("--auth-token-file")
        .arg(&token)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn ibsmd");
    let _daemon = Reaped(child);
    let addr = format!("127.0.0.1:{web}");
    let start = std::time::Instant::now();
    let cluster = loop {
        if let Ok(body) = http_body(&addr, "/api/cluster", ADMIN) {
            if body.contains("\"state\":\"MASTER\"") {
                break body;
            }
        }
        assert!(
            start.elapsed() < LIMIT,
            "the console never showed the daemon as MASTER"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let v: serde_json::Value = serde_json::from_str(&cluster).expect("JSON");
    assert_eq!(v["cluster"]["instances"][0]["name"], "ibsmd", "{v}");
    assert_eq!(
        v["cluster"]["master"]["guid"], v["cluster"]["instances"][0]["guid"],
        "{v}"
    );
    assert_eq!(http_status(&addr, "GET", "/api/cluster", None), 401);
    assert_eq!(http_status(&addr, "GET", "/", None), 200);
}

/// The body of a GET with `token` (Connection: close, so read to the end).
fn http_body(addr: &str, path: &str, token: &str) -> std::io::Result<String> {
    let mut c = std::net::TcpStream::connect(addr)?;
    c.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(c, "GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n")?;
    let mut out = String::new();
    c.read_to_string(&mut out)?;
    Ok(out
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_string()))
}

/// A fabric past the full view's bound (`gen:fat-tree:16`, 1 344 nodes): the topology
/// answer is the overview (groups per tier, bounded), a group's members and the search
/// are asked for apart, `?full=1` still lists every node, and the page draws the groups
/// with the master's group ringed and finds a host by name.
#[tokio::test(flavor = "multi_thread")]
async fn a_large_fabric_is_served_as_groups_and_searched_on_the_server() {
    let dir = tempfile::tempdir().expect("tempdir");
    let token = dir.path().join("admin");
    std::fs::write(&token, ADMIN).expect("token file");
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("chmod");
    let (grpc, web) = (free_port(), free_port());
    let child = Command::new(IBSMD)
        .args(["--fabric", "gen:fat-tree:16", "--priority", "5"])
        .args([
            "--grpc",
            &format!("127.0.0.1:{grpc}"),
            "--web",
            &format!("127.0.0.1:{web}"),
        ])
        .arg("--auth-token-file")
        .arg(&token)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn ibsmd");
    let _daemon = Reaped(child);
    let addr = format!("127.0.0.1:{web}");
    let start = std::time::Instant::now();
    let (overview, size) = loop {
        if let Ok(body) = http_body(&addr, "/api/fabric/topology", ADMIN) {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&body) {
                if v["aggregate"] == true {
                    break (v, body.len());
                }
            }
        }
        assert!(
            start.elapsed() < LIMIT * 2,
            "the console never served the topology overview"
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    let nodes = overview["node_count"].as_u64().expect("node_count");
    assert_eq!(nodes, 1024 + 320, "k=16: 1024 hosts, 320 switches");
    let groups = overview["groups"].as_array().expect("groups");
    let tiers = overview["tiers"].as_u64().expect("tiers");
    assert_eq!(tiers, 4, "hosts, edge, aggregation, core");
    assert!(groups.len() as u64 <= tiers * 40, "{} groups", groups.len());
    assert_eq!(
        groups
            .iter()
            .filter_map(|g| g["count"].as_u64())
            .sum::<u64>(),
        nodes,
        "every node in one group"
    );
    // A bound that holds at any size: groups and summed links, never the nodes.
    assert!(size < 64 * 1024, "the overview is {size} bytes");
    let full: serde_json::Value = serde_json::from_str(
        &http_body(&addr, "/api/fabric/topology?full=1", ADMIN).expect("full"),
    )
    .expect("JSON");
    let all = full["nodes"].as_array().expect("nodes");
    assert_eq!(all.len() as u64, nodes);
    let host = all.iter().find(|n| n["type"] == 1).expect("a host").clone();
    let lid = host["ports"][0]["lid"].as_u64().expect("its LID");
    let found: serde_json::Value = serde_json::from_str(
        &http_body(&addr, &format!("/api/fabric/search?q={lid}"), ADMIN).expect("search"),
    )
    .expect("JSON");
    assert_eq!(found["hits"][0]["guid"], host["guid"], "{found}");
    let group = found["hits"][0]["group"].as_u64().expect("its group");
    let members: serde_json::Value = serde_json::from_str(
        &http_body(&addr, &format!("/api/fabric/group?id={group}"), ADMIN).expect("group"),
    )
    .expect("JSON");
    assert!(
        members["nodes"]
            .as_array()
            .expect("members")
            .iter()
            .any(|n| n["guid"] == host["guid"]),
        "the group lists the host"
    );
    assert_eq!(
        http_status(&addr, "GET", "/api/fabric/search?q=1", None),
        401
    );

    let mut b = Browser::launch();
    let tab = b.open(&format!("http://{addr}/#fabric"));
    b.wait_for(
        &tab,
        "the login form",
        "!document.getElementById('login').hidden",
        LIMIT,
    );
    b.eval(&tab, &format!("document.getElementById('token').value = '{ADMIN}'; document.getElementById('login-button').click(); true"));
    b.wait_for(
        &tab,
        "the overview with the master's group ringed",
        "!!document.querySelector('#topo-svg[data-mode=groups]') && !!document.querySelector('#topo-svg rect.group.master-port')",
        LIMIT,
    );
    let drawn = b
        .eval(
            &tab,
            "document.querySelectorAll('#topo-svg rect.group').length",
        )
        .as_u64()
        .unwrap_or(0);
    assert_eq!(drawn, groups.len() as u64);
    let desc = host["desc"].as_str().expect("desc").to_string();
    let guid = host["guid"].as_str().expect("guid").to_string();
    b.eval(&tab, &format!("document.getElementById('search').value = {guid:?}; document.getElementById('search').dispatchEvent(new Event('input')); true"));
    b.wait_for(&tab, "the search hit", "document.querySelectorAll('#search-results tr').length === 1 && !!document.querySelector('#topo-svg rect.group.hit')", LIMIT);
    b.eval(&tab, &format!("document.querySelector('#topo-svg rect.group[data-group=\"{group}\"]').dispatchEvent(new Event('click')); true"));
    b.wait_for(
        &tab,
        "the group's members",
        &format!("document.getElementById('group-members').textContent.includes({desc:?})"),
        LIMIT,
    );
    // A route between the first and the last host, drawn through the groups.
    let last_lid = all
        .iter()
        .rev()
        .find(|n| n["type"] == 1)
        .and_then(|n| n["ports"][0]["lid"].as_u64())
        .expect("the last host's LID");
    b.eval(&tab, &format!("document.getElementById('route-src').value = '{lid}'; document.getElementById('route-dst').value = '{last_lid}'; document.getElementById('route-go').click(); true"));
    b.wait_for(&tab, "the route over the groups", "(() => { const p = document.querySelector('#topo-svg polyline.route'); return !!p && p.getAttribute('points').split(' ').length >= 3; })()", LIMIT);
    let first_paint = b.eval(&tab, "window.ibsmFabric.firstPaintMs");
    eprintln!("k=16 overview: {size} bytes, first paint {first_paint} ms (debug build)");
    b.screenshot(&tab, &shots().join("7-fabric-groups-k16.png"));
}

/// A fabric that is not a fat tree (`gen:random:7`: 16 switches cabled at random, 64
/// CAs): hop-distance tiers would put cables inside a tier, so the page draws a force
/// layout, with every node at its own place spread over the drawing.
#[test]
fn a_fabric_that_is_not_a_fat_tree_gets_a_force_layout() {
    let dir = tempfile::tempdir().expect("tempdir");
    let token = dir.path().join("admin");
    std::fs::write(&token, ADMIN).expect("token file");
    std::fs::set_permissions(&token, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("chmod");
    let (grpc, web) = (free_port(), free_port());
    let child = Command::new(IBSMD)
        .args(["--fabric", "gen:random:7", "--priority", "5"])
        .args(["--grpc", &format!("127.0.0.1:{grpc}")])
        .args(["--web", &format!("127.0.0.1:{web}")])
        .arg("--auth-token-file")
        .arg(&token)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn ibsmd");
    let _daemon = Reaped(child);
    let addr = format!("127.0.0.1:{web}");
    let start = std::time::Instant::now();
    let nodes = loop {
        let topo: serde_json::Value = serde_json::from_str(
            &http_body(&addr, "/api/fabric/topology", ADMIN).unwrap_or_default(),
        )
        .unwrap_or_default();
        if let Some(n) = topo["nodes"].as_array().filter(|n| n.len() == 16 + 64) {
            break n.len();
        }
        assert!(
            start.elapsed() < LIMIT,
            "the topology never showed 80 nodes: {topo}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let mut b = Browser::launch();
    let tab = b.open(&format!("http://{addr}/#fabric"));
    b.wait_for(
        &tab,
        "the login form",
        "!document.getElementById('login').hidden",
        LIMIT,
    );
    b.eval(&tab, &format!("document.getElementById('token').value = '{ADMIN}'; document.getElementById('login-button').click(); true"));
    b.wait_for(
        &tab,
        "the force layout with the master's port",
        "document.getElementById('topo-svg').dataset.layout === 'force' && !!document.querySelector('#topo-svg .master-port')",
        LIMIT,
    );
    // Every node at its own place, spread over the drawing (not all piled up).
    let placed = b.eval(&tab, "(() => { const pts = [...document.querySelectorAll('#topo-svg circle.ca, #topo-svg rect.sw')].map(e => e.tagName === 'circle' ? [+e.getAttribute('cx'), +e.getAttribute('cy')] : [+e.getAttribute('x') + 8, +e.getAttribute('y') + 6]); const xs = pts.map(p => p[0]), ys = pts.map(p => p[1]); return { n: pts.length, distinct: new Set(pts.map(p => p.join(','))).size, w: Math.max(...xs) - Math.min(...xs), h: Math.max(...ys) - Math.min(...ys), links: document.querySelectorAll('#topo-svg line.link').length }; })()");
    assert_eq!(placed["n"].as_u64(), Some(nodes as u64), "{placed}");
    assert_eq!(
        placed["distinct"], placed["n"],
        "nodes share a place: {placed}"
    );
    assert!(
        placed["w"].as_f64() > Some(400.0) && placed["h"].as_f64() > Some(200.0),
        "the nodes are not spread: {placed}"
    );
    assert!(
        b.eval(&tab, "document.getElementById('topo-summary').textContent")
            .as_str()
            .is_some_and(|t| t.contains("force layout")),
        "the summary names the layout"
    );
    b.screenshot(&tab, &shots().join("11-fabric-force-random.png"));
}
