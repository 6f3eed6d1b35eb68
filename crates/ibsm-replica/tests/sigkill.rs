//! SIGKILL a replica process in the middle of writes, restart it from its data dir:
//! every write it acknowledged is there.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_ibsm-replica-node");

/// Kills the child on drop (also when the test panics).
struct Reaper(Child);
impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    l.local_addr().expect("local addr").to_string()
}

fn node(addr: &str, dir: &std::path::Path, mode: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args([
        "--node-id",
        "1",
        "--grpc",
        addr,
        "--peer",
        &format!("1={addr}"),
        "--data-dir",
    ])
    .arg(dir)
    .args(mode)
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    c
}

#[test]
fn sigkill_mid_writes_then_restart_keeps_every_acknowledged_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    for round in 0..2 {
        let addr = free_addr();
        let mut child = Reaper(
            node(&addr, dir.path(), &["write", "100000"])
                .spawn()
                .expect("spawn writer"),
        );
        let stdout = child.0.stdout.take().expect("stdout");
        let mut acked = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        for line in BufReader::new(stdout).lines() {
            let line = line.expect("read stdout");
            if let Some(g) = line.strip_prefix("ACK ") {
                acked.push(g.parse::<u64>().expect("guid"));
            }
            if acked.len() >= 300 || Instant::now() > deadline {
                break;
            }
        }
        assert!(
            acked.len() >= 300,
            "round {round}: writer acknowledged only {} writes",
            acked.len()
        );
        // SIGKILL while it is still writing (no clean shutdown, no flush).
        child.0.kill().expect("SIGKILL");
        let _ = child.0.wait();

        let addr = free_addr();
        let out = node(&addr, dir.path(), &["dump"])
            .output()
            .expect("run dump");
        assert!(out.status.success(), "dump failed: {:?}", out.status);
        let text = String::from_utf8_lossy(&out.stdout);
        let guids: std::collections::BTreeSet<u64> = text
            .lines()
            .filter_map(|l| l.strip_prefix("GUID "))
            .filter_map(|l| l.split_whitespace().next()?.parse().ok())
            .collect();
        let epoch: u64 = text
            .lines()
            .find_map(|l| l.strip_prefix("EPOCH "))
            .and_then(|e| e.trim().parse().ok())
            .expect("EPOCH line");
        // Each round's writer claimed a new epoch.
        assert_eq!(epoch, round + 1, "{text}");
        for g in &acked {
            assert!(
                guids.contains(g),
                "round {round}: acknowledged write {g} lost after SIGKILL"
            );
        }
    }
}
