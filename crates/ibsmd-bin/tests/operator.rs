//! What an operator meets running the `ibsmd` binary: JSON log lines with
//! `--log-format json`, a second ibsmd on the same gRPC port refused before it opens
//! the fabric, and `GetStatus` keeping the last sweep that changed the fabric after
//! sweeps that changed nothing.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ibsm_proto::v1::control_client::ControlClient;
use ibsm_proto::v1::{SmState, SweepRequest};

mod common;
use common::{free_port, status, Reaped, IBSMD};

/// A master on the embedded fabric with plaintext gRPC (the address is added per test).
const EMBEDDED_MASTER: [&str; 5] = [
    "--fabric",
    "gen:fat-tree:4",
    "--priority",
    "5",
    "--insecure-plaintext",
];

/// ibsmd on the embedded fabric with gRPC on `grpc`, plus `extra` flags; its stderr
/// lines arrive on the returned channel.
fn start(grpc: u16, extra: &[&str]) -> (Reaped, mpsc::Receiver<String>) {
    let mut child = Command::new(IBSMD)
        .args(EMBEDDED_MASTER)
        .args(["--grpc", &format!("127.0.0.1:{grpc}")])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ibsmd");
    let err = child.stderr.take().expect("stderr");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    (Reaped(child), rx)
}

/// Lines from `rx` until one satisfies `done`; panics past the deadline.
fn lines_until(rx: &mpsc::Receiver<String>, done: impl Fn(&str) -> bool) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut lines = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) => {
                let stop = done(&l);
                lines.push(l);
                if stop {
                    return lines;
                }
            }
            Err(e) => panic!("{e}: waited for a line; got:\n{}", lines.join("\n")),
        }
    }
}

#[test]
fn json_log_lines_parse_with_level_and_fields() {
    let grpc = free_port();
    let (_child, rx) = start(grpc, &["--log-format", "json"]);
    let lines = lines_until(&rx, |l| l.contains("MASTER"));
    assert!(lines.len() >= 3, "{lines:#?}");
    for line in &lines {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        let level = v["level"]
            .as_str()
            .unwrap_or_else(|| panic!("no level: {line}"));
        assert!(
            ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"].contains(&level),
            "{line}"
        );
        assert!(v["fields"].is_object(), "no fields object: {line}");
        assert!(v["fields"]["message"].is_string(), "no message: {line}");
        assert!(v["timestamp"].is_string(), "no timestamp: {line}");
    }
    // The listening line keeps its structured field.
    assert!(
        lines.iter().any(|l| {
            serde_json::from_str::<serde_json::Value>(l)
                .is_ok_and(|v| v["fields"]["addr"] == format!("127.0.0.1:{grpc}"))
        }),
        "{lines:#?}"
    );
}

#[test]
fn the_config_key_log_format_selects_json_too() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("json.toml");
    std::fs::write(&cfg, "log_format = \"json\"\n").expect("write config");
    let grpc = free_port();
    let (_child, rx) = start(grpc, &["--config", &cfg.display().to_string()]);
    let lines = lines_until(&rx, |l| l.contains("MASTER"));
    for line in &lines {
        serde_json::from_str::<serde_json::Value>(line)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
    }
    // A wrong value is refused with the key's line, before anything starts.
    std::fs::write(&cfg, "log_format = \"xml\"\n").expect("write config");
    let out = Command::new(IBSMD)
        .args(["--config", &cfg.display().to_string()])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("log_format") || err.contains("xml"), "{err}");
}

/// The second ibsmd names the busy address and the likely cause, and exits before it
/// opens its fabric: `umad` with no device here would fail with a device error.
#[test]
fn a_second_ibsmd_on_the_same_grpc_port_exits_before_opening_the_fabric() {
    let grpc = free_port();
    let (_first, rx) = start(grpc, &[]);
    lines_until(&rx, |l| l.contains("gRPC control API listening"));
    let out = Command::new(IBSMD)
        .args([
            "--fabric",
            "umad",
            "--priority",
            "5",
            "--insecure-plaintext",
            "--grpc",
            &format!("127.0.0.1:{grpc}"),
        ])
        .stdin(Stdio::null())
        .output()
        .expect("run the second ibsmd");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains(&format!("cannot listen for gRPC on 127.0.0.1:{grpc}")),
        "{err}"
    );
    assert!(err.contains("another ibsmd"), "{err}");
    assert!(
        !err.to_lowercase().contains("umad") && !err.contains("infiniband"),
        "the fabric was opened first: {err}"
    );
}

/// With JSON logs, why the daemon stopped is a JSON line too (a log pipeline sees it).
#[test]
fn with_json_logs_the_exit_reason_is_a_json_line() {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = busy.local_addr().expect("addr").to_string();
    let out = Command::new(IBSMD)
        .args(EMBEDDED_MASTER)
        .args(["--log-format", "json", "--grpc", &addr])
        .stdin(Stdio::null())
        .output()
        .expect("run");
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    let last = err.lines().last().unwrap_or_default();
    let v: serde_json::Value =
        serde_json::from_str(last).unwrap_or_else(|e| panic!("not JSON ({e}): {err}"));
    assert_eq!(v["level"], "ERROR", "{last}");
    let why = v["fields"]["error"].as_str().unwrap_or_default();
    assert!(
        why.contains(&format!("cannot listen for gRPC on {addr}")),
        "{last}"
    );
}

/// After the sweep that configured the fabric, sweeps that change nothing take
/// `last_sweep`; `last_change_sweep` keeps the configuring one, with its time.
#[test]
fn status_keeps_the_last_sweep_that_changed_the_fabric() {
    let grpc = free_port();
    let (_child, _rx) = start(grpc, &[]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    rt.block_on(async {
        let deadline = Instant::now() + Duration::from_secs(30);
        let first = loop {
            if let Some(s) = status(grpc).await {
                if s.state == SmState::Master as i32 && !s.last_change_sweep.is_empty() {
                    break s;
                }
            }
            assert!(Instant::now() < deadline, "no configured master");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        // The configuring sweep programmed LFTs and brought ports up.
        assert!(
            first.last_change_sweep.starts_with("master heavy sweep")
                && !first.last_change_sweep.contains(" 0 LFT blocks"),
            "{}",
            first.last_change_sweep
        );
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_millis() as u64;
        assert!(
            first.last_change_sweep_unix_ms > 0 && first.last_change_sweep_unix_ms <= now_ms,
            "{first:?}"
        );
        // A heavy sweep of the configured fabric changes nothing.
        let mut c = ControlClient::connect(format!("http://127.0.0.1:{grpc}"))
            .await
            .expect("connect");
        let summary = c
            .sweep(SweepRequest { heavy: true })
            .await
            .expect("sweep")
            .into_inner()
            .summary;
        assert!(
            summary.contains(" 0 LFT blocks, 0 PortInfo sets"),
            "{summary}"
        );
        let after = status(grpc).await.expect("status");
        assert_eq!(after.last_sweep, summary);
        assert_eq!(after.last_change_sweep, first.last_change_sweep);
        assert_eq!(
            after.last_change_sweep_unix_ms,
            first.last_change_sweep_unix_ms
        );
    });
}
