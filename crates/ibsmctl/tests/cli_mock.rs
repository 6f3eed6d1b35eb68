//! The ibsmctl binary against an in-process mock of `ibsm.v1.Control`: what it sends
//! (the mock records every request), what it prints (tables and JSON) and its exit
//! codes, without needing ibsmd. The mock behaves like an SM where that matters
//! (handover only from MASTER -> FAILED_PRECONDITION), so the tests would fail if the
//! CLI sent the wrong request, parsed a GUID wrong or mapped a status badly.

use std::net::SocketAddr;
use std::process::{Command, Output};
use std::sync::{Arc, Mutex};

use ibsm_proto::v1::control_server::{Control, ControlServer};
use ibsm_proto::v1::{
    ControlPacket, Event, GetStatusRequest, HandoverRequest, HandoverResponse, ListSmsRequest,
    ListSmsResponse, SendControlRequest, SendControlResponse, SetPriorityRequest, SmEntry, SmState,
    Status, StepDownRequest, StepDownResponse, SweepRequest, SweepResponse, WatchRequest,
};
use tonic::{Request, Response};

const SELF_GUID: u64 = 0x0002_c903_0000_0001;
const PEER_GUID: u64 = 0x100004;

#[derive(Debug, Default)]
struct Recorded {
    calls: Vec<String>,
    priority: u32,
    state: i32,
    act_count: u32,
}

#[derive(Clone)]
struct MockSm(Arc<Mutex<Recorded>>);

impl MockSm {
    fn rec(&self) -> std::sync::MutexGuard<'_, Recorded> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn status(&self) -> Status {
        let r = self.rec();
        Status {
            guid: SELF_GUID,
            lid: 1,
            priority: r.priority,
            state: r.state,
            act_count: r.act_count,
            master_guid: SELF_GUID,
            master_lid: 1,
            epoch: 4,
            node_name: "mock".into(),
            sm_key_rejections: 3,
            ..Default::default()
        }
    }
}

#[tonic::async_trait]
impl Control for MockSm {
    async fn get_status(
        &self,
        _: Request<GetStatusRequest>,
    ) -> Result<Response<Status>, tonic::Status> {
        self.rec().calls.push("GetStatus".into());
        Ok(Response::new(self.status()))
    }

    async fn list_sms(
        &self,
        _: Request<ListSmsRequest>,
    ) -> Result<Response<ListSmsResponse>, tonic::Status> {
        self.rec().calls.push("ListSms".into());
        let me = self.status();
        Ok(Response::new(ListSmsResponse {
            sms: vec![
                SmEntry {
                    guid: me.guid,
                    lid: 1,
                    priority: me.priority,
                    state: me.state,
                    act_count: me.act_count,
                    is_self: true,
                    trusted: true,
                    ..SmEntry::default()
                },
                SmEntry {
                    guid: PEER_GUID,
                    lid: 5,
                    priority: 5,
                    state: SmState::Standby as i32,
                    act_count: 0,
                    is_self: false,
                    trusted: true,
                    answered_ms_ago: Some(40),
                    missed_polls: 0,
                },
            ],
        }))
    }

    async fn set_priority(
        &self,
        req: Request<SetPriorityRequest>,
    ) -> Result<Response<Status>, tonic::Status> {
        let p = req.into_inner().priority;
        {
            let mut r = self.rec();
            r.calls.push(format!("SetPriority {p}"));
            if p > 15 {
                return Err(tonic::Status::invalid_argument("priority > 15"));
            }
            r.priority = p;
        }
        Ok(Response::new(self.status()))
    }

    async fn handover(
        &self,
        req: Request<HandoverRequest>,
    ) -> Result<Response<HandoverResponse>, tonic::Status> {
        let to = req.into_inner().to_guid;
        let mut r = self.rec();
        r.calls.push(format!("Handover {to:#x}"));
        if r.state != SmState::Master as i32 {
            return Err(tonic::Status::failed_precondition("not MASTER"));
        }
        r.state = SmState::Standby as i32;
        Ok(Response::new(HandoverResponse {
            target_guid: if to == 0 { PEER_GUID } else { to },
            outcome: "acknowledged".into(),
        }))
    }

    async fn step_down(
        &self,
        req: Request<StepDownRequest>,
    ) -> Result<Response<StepDownResponse>, tonic::Status> {
        let hold = req.into_inner().hold_ms;
        let mut r = self.rec();
        r.calls.push(format!("StepDown {hold}"));
        if r.state != SmState::Master as i32 {
            return Err(tonic::Status::failed_precondition("not MASTER"));
        }
        r.state = SmState::Standby as i32;
        Ok(Response::new(StepDownResponse {
            target_guid: PEER_GUID,
            outcome: "acknowledged".into(),
            restored_priority: 12,
            until_unix_ms: 1,
        }))
    }

    async fn send_control(
        &self,
        req: Request<SendControlRequest>,
    ) -> Result<Response<SendControlResponse>, tonic::Status> {
        let req = req.into_inner();
        self.rec()
            .calls
            .push(format!("SendControl {} {:#x}", req.packet, req.guid));
        if req.guid != PEER_GUID {
            return Err(tonic::Status::not_found("no such SM"));
        }
        Ok(Response::new(SendControlResponse {
            outcome: "accepted (status 0)".into(),
        }))
    }

    async fn sweep(
        &self,
        req: Request<SweepRequest>,
    ) -> Result<Response<SweepResponse>, tonic::Status> {
        let heavy = req.into_inner().heavy;
        self.rec().calls.push(format!("Sweep heavy={heavy}"));
        Ok(Response::new(SweepResponse {
            summary: format!("{} sweep: 6 nodes", if heavy { "heavy" } else { "light" }),
        }))
    }

    type WatchStream = tokio_stream::Iter<std::vec::IntoIter<Result<Event, tonic::Status>>>;

    async fn watch(
        &self,
        _: Request<WatchRequest>,
    ) -> Result<Response<Self::WatchStream>, tonic::Status> {
        self.rec().calls.push("Watch".into());
        let events = (0..3u64)
            .map(|i| {
                Ok(Event {
                    at_unix_ms: 1_796_035_763_345 + i,
                    kind: "state".into(),
                    text: format!("step {i}"),
                    from: SmState::Discovering as i32,
                    to: SmState::Master as i32,
                })
            })
            .collect::<Vec<_>>();
        Ok(Response::new(tokio_stream::iter(events)))
    }
}

/// Start a mock on 127.0.0.1:<ephemeral> in a background thread; it lives until the
/// test process exits.
fn start_mock(state: SmState) -> (SocketAddr, MockSm) {
    start_mock_with(state, None)
}

/// Like ibsmd's token check: `authorization: Bearer <token>` or UNAUTHENTICATED.
fn start_mock_with(state: SmState, token: Option<&'static str>) -> (SocketAddr, MockSm) {
    let mock = MockSm(Arc::new(Mutex::new(Recorded {
        priority: 10,
        state: state as i32,
        act_count: 77,
        ..Default::default()
    })));
    let svc = mock.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("tokio runtime for the mock");
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind mock");
            tx.send(listener.local_addr().expect("local addr"))
                .expect("report addr");
            let incoming = tonic::transport::server::TcpIncoming::from(listener);
            let check = move |req: Request<()>| -> Result<Request<()>, tonic::Status> {
                let Some(t) = token else { return Ok(req) };
                let got = req
                    .metadata()
                    .get("authorization")
                    .and_then(|v| v.to_str().ok());
                if got == Some(format!("Bearer {t}").as_str()) {
                    Ok(req)
                } else {
                    Err(tonic::Status::unauthenticated(
                        "missing or wrong bearer token",
                    ))
                }
            };
            tonic::transport::Server::builder()
                .add_service(ControlServer::with_interceptor(svc, check))
                .serve_with_incoming(incoming)
                .await
                .expect("mock server");
        });
    });
    let addr = rx.recv().expect("mock address");
    (addr, mock)
}

fn ctl(addr: Option<SocketAddr>, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ibsmctl"));
    cmd.env_remove("IBSM_ENDPOINT");
    if let Some(a) = addr {
        cmd.arg("--endpoint").arg(format!("http://{a}"));
    }
    cmd.args(args).output().expect("running ibsmctl")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn ok(o: &Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout: {}\nstderr: {}",
        stdout(o),
        String::from_utf8_lossy(&o.stderr)
    );
    stdout(o)
}

fn json(o: &Output) -> serde_json::Value {
    let text = ok(o);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

#[test]
fn status_json_and_table() {
    let (addr, mock) = start_mock(SmState::Master);
    let v = json(&ctl(Some(addr), &["status", "--json"]));
    assert_eq!(v["guid"], "0x0002c90300000001");
    assert_eq!(v["state"], "MASTER");
    assert_eq!(v["priority"], 10);
    assert_eq!(v["act_count"], 77);
    assert_eq!(v["master_guid"], "0x0002c90300000001");
    assert_eq!(v["epoch"], 4);
    assert_eq!(v["degraded"], false);
    assert_eq!(v["sm_key_rejections"], 3);
    let t = ok(&ctl(Some(addr), &["status"]));
    assert!(
        t.contains("MASTER") && t.contains("0x0002c90300000001"),
        "{t}"
    );
    assert_eq!(mock.rec().calls, vec!["GetStatus", "GetStatus"]);
}

#[test]
fn endpoint_from_environment_and_bare_host_port() {
    let (addr, mock) = start_mock(SmState::Standby);
    let out = Command::new(env!("CARGO_BIN_EXE_ibsmctl"))
        .env("IBSM_ENDPOINT", addr.to_string())
        .args(["--json", "status"])
        .output()
        .expect("running ibsmctl");
    assert_eq!(json(&out)["state"], "STANDBY");
    assert_eq!(mock.rec().calls, vec!["GetStatus"]);
}

#[test]
fn set_priority_validates_locally() {
    let (addr, mock) = start_mock(SmState::Master);
    let v = json(&ctl(Some(addr), &["set-priority", "12", "--json"]));
    assert_eq!(v["priority"], 12);
    for bad in ["16", "-1", "x", "255"] {
        let o = ctl(Some(addr), &["set-priority", bad]);
        assert_eq!(o.status.code(), Some(2), "set-priority {bad}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("0-15"),
            "message for {bad} names the range: {err}"
        );
    }
    assert_eq!(
        mock.rec().calls,
        vec!["SetPriority 12"],
        "invalid priorities must never reach the SM"
    );
}

#[test]
fn control_packets_and_guid_notations() {
    let (addr, mock) = start_mock(SmState::Master);
    ok(&ctl(Some(addr), &["control", "disable", "0x100004"]));
    ok(&ctl(Some(addr), &["control", "standby", "1048580"]));
    let v = json(&ctl(
        Some(addr),
        &["control", "discover", "0x0000000000100004", "--json"],
    ));
    assert_eq!(v["packet"], "DISCOVER");
    assert_eq!(v["guid"], "0x0000000000100004");
    // A GUID no SM has: the server's NOT_FOUND is "other" (1).
    assert_eq!(
        ctl(Some(addr), &["control", "disable", "0x42"])
            .status
            .code(),
        Some(1)
    );
    // Local refusals (2): bad GUID, GUID 0, a packet an operator may not send.
    for args in [
        ["control", "disable", "0xzz"],
        ["control", "disable", "0"],
        ["control", "handover", "0x1"],
    ] {
        assert_eq!(ctl(Some(addr), &args).status.code(), Some(2), "{args:?}");
    }
    let expect = vec![
        format!("SendControl {} 0x100004", ControlPacket::Disable as i32),
        format!("SendControl {} 0x100004", ControlPacket::Standby as i32),
        format!("SendControl {} 0x100004", ControlPacket::Discover as i32),
        format!("SendControl {} 0x42", ControlPacket::Disable as i32),
    ];
    assert_eq!(mock.rec().calls, expect);
}

#[test]
fn handover_needs_master_exit_4() {
    let (addr, mock) = start_mock(SmState::Master);
    let v = json(&ctl(Some(addr), &["handover", "--json"]));
    assert_eq!(v["target_guid"], "0x0000000000100004");
    // Now STANDBY: the server refuses with FAILED_PRECONDITION.
    let o = ctl(Some(addr), &["handover", "--to", "0x100004"]);
    assert_eq!(o.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not MASTER"));
    assert_eq!(mock.rec().calls, vec!["Handover 0x0", "Handover 0x100004"]);
}

#[test]
fn step_down_sends_the_hold_in_ms_and_says_when_the_priority_returns() {
    let (addr, mock) = start_mock(SmState::Master);
    let o = ctl(Some(addr), &["step-down", "--hold-s", "2.5"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("handover to 0x0000000000100004"), "{out}");
    assert!(out.contains("priority 12 comes back in 2.5 s"), "{out}");
    // Not MASTER any more: refused, exit 4.
    let o = ctl(Some(addr), &["step-down", "--json"]);
    assert_eq!(o.status.code(), Some(4));
    assert_eq!(mock.rec().calls, vec!["StepDown 2500", "StepDown 60000"]);
}

#[test]
fn sms_sweep_watch() {
    let (addr, mock) = start_mock(SmState::Master);
    let t = ok(&ctl(Some(addr), &["sms"]));
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines.len(), 3, "{t}");
    assert!(
        lines[1].contains("MASTER") && lines[1].ends_with('*'),
        "{t}"
    );
    assert!(lines[2].contains("0x0000000000100004") && lines[2].contains("STANDBY"));
    let v = json(&ctl(Some(addr), &["sms", "--json"]));
    assert_eq!(v[1]["state"], "STANDBY");
    assert_eq!(v[0]["is_self"], true);
    assert_eq!(
        ok(&ctl(Some(addr), &["sweep", "--heavy"])).trim(),
        "heavy sweep: 6 nodes"
    );
    let w = ok(&ctl(Some(addr), &["watch", "--json", "--count", "2"]));
    let events: Vec<serde_json::Value> = w
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    assert_eq!(events.len(), 2);
    assert_eq!(events[0]["from"], "DISCOVERING");
    assert_eq!(events[1]["text"], "step 1");
    let all = ok(&ctl(Some(addr), &["watch"]));
    assert_eq!(all.lines().count(), 3, "stream end ends watch: {all}");
    assert!(all.contains("2026-11-30T10:49:23.345Z  state  DISCOVERING -> MASTER  step 0"));
    assert_eq!(
        mock.rec().calls,
        vec!["ListSms", "ListSms", "Sweep heavy=true", "Watch", "Watch"]
    );
}

#[test]
fn unreachable_endpoint_exits_3() {
    // Bind and drop: a port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("ephemeral port");
    let o = ctl(Some(port), &["status"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot connect"));
    let o = ctl(None, &["--endpoint", "ftp://x", "status"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn completions() {
    for shell in ["bash", "zsh", "fish"] {
        let script = ok(&ctl(None, &["completions", shell]));
        assert!(
            script.contains("set-priority") && script.contains("ibsmctl"),
            "{shell}: {script}"
        );
    }
    assert_eq!(ctl(None, &["completions", "tcsh"]).status.code(), Some(2));
}

#[test]
fn bearer_token_from_file_or_environment() {
    const TOKEN: &str = "0123456789abcdef-secret";
    let (addr, mock) = start_mock_with(SmState::Master, Some(TOKEN));
    let dir = std::env::temp_dir().join(format!("ibsmctl-token-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("token");
    std::fs::write(&file, format!("{TOKEN}\n")).expect("token file");
    let path = file.to_string_lossy().into_owned();

    let o = ctl(Some(addr), &["status"]);
    assert_eq!(o.status.code(), Some(1), "no token: UNAUTHENTICATED");
    assert!(String::from_utf8_lossy(&o.stderr).contains("--token-file"));
    let v = json(&ctl(
        Some(addr),
        &["--token-file", &path, "status", "--json"],
    ));
    assert_eq!(v["state"], "MASTER");
    let out = Command::new(env!("CARGO_BIN_EXE_ibsmctl"))
        .env("IBSM_TOKEN_FILE", &file)
        .args(["--endpoint", &format!("http://{addr}"), "sms"])
        .output()
        .expect("running ibsmctl");
    ok(&out);
    // Too short a token is refused locally (2) before any connection.
    let short = dir.join("short");
    std::fs::write(&short, "abc").expect("short token file");
    let o = ctl(
        Some(addr),
        &["--token-file", &short.to_string_lossy(), "status"],
    );
    assert_eq!(o.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
    // The rejected call never reached the service.
    assert_eq!(mock.rec().calls, vec!["GetStatus", "ListSms"]);
}
