//! `ibsmctl` against a real `ibsmd demo` (three SM instances on one embedded fabric,
//! gRPC on base..base+2): every control command end to end, with state changes
//! checked through `status` on the instances they should affect, and the exit codes
//! a script relies on (2 invalid argument, 3 unreachable, 4 failed precondition).
//!
//! Binaries are built through cargo by `ibsm_integration::binary` (see its crate doc).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use ibsm_integration::binary;
use ibsm_labkit::{run_with_timeout, ChildGuard};
use serde_json::Value;

const STEP: Duration = Duration::from_secs(60);

/// A base port whose next three ports are free right now.
fn free_base_port() -> Result<u16> {
    let seed = u16::try_from(std::process::id() % 9000).unwrap_or(0);
    for i in 0..200u16 {
        let base = 30_000 + (seed + i * 37) % 30_000;
        let all_free = (0..3).all(|k| std::net::TcpListener::bind(("127.0.0.1", base + k)).is_ok());
        if all_free {
            return Ok(base);
        }
    }
    bail!("no three consecutive free ports")
}

struct Demo {
    _guard: ChildGuard,
    ctl: PathBuf,
    endpoints: [String; 3],
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Demo {
    fn start() -> Result<Demo> {
        let (ibsmd, ctl) = (binary("ibsmd")?, binary("ibsmctl")?);
        let dir = tempfile::tempdir()?;
        let log = dir.path().join("demo.log");
        let base = free_base_port()?;
        let child = Command::new(&ibsmd)
            .args(["demo", "--base-port", &base.to_string()])
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .context("spawning ibsmd demo")?;
        let demo = Demo {
            _guard: ChildGuard::new(child, "ibsmd demo"),
            ctl,
            endpoints: [0, 1, 2].map(|k| format!("http://127.0.0.1:{}", base + k)),
            log,
            _dir: dir,
        };
        // Up when every instance answers and exactly one is MASTER.
        demo.wait("one MASTER among the three", |d| {
            let states = d.states()?;
            Ok(states.iter().filter(|s| s.as_str() == "MASTER").count() == 1)
        })?;
        Ok(demo)
    }

    fn ctl(&self, i: usize, args: &[&str]) -> Result<Output> {
        let mut cmd = Command::new(&self.ctl);
        cmd.arg("--endpoint")
            .arg(self.endpoints.get(i).context("instance index")?)
            .args(args);
        Ok(run_with_timeout(&mut cmd, Duration::from_secs(30))?)
    }

    fn json(&self, i: usize, args: &[&str]) -> Result<Value> {
        let out = self.ctl(i, args)?;
        ibsm_integration::ctl_json_of(&format!("{args:?} on sm{}", i + 1), &out)
    }

    fn status(&self, i: usize) -> Result<Value> {
        self.json(i, &["status", "--json"])
    }

    /// States of the three instances ("?" for one that does not answer).
    fn states(&self) -> Result<Vec<String>> {
        (0..3)
            .map(|i| {
                Ok(self
                    .status(i)
                    .ok()
                    .and_then(|v| v["state"].as_str().map(String::from))
                    .unwrap_or_else(|| "?".into()))
            })
            .collect()
    }

    fn master(&self) -> Result<usize> {
        self.states()?
            .iter()
            .position(|s| s == "MASTER")
            .context("no MASTER")
    }

    fn wait(&self, what: &str, mut done: impl FnMut(&Demo) -> Result<bool>) -> Result<()> {
        let deadline = Instant::now() + STEP;
        loop {
            if done(self)? {
                return Ok(());
            }
            if Instant::now() >= deadline {
                bail!(
                    "timed out waiting for {what}; states {:?}\ndemo log tail:\n{}",
                    self.states()?,
                    tail(&std::fs::read_to_string(&self.log).unwrap_or_default())
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

fn tail(s: &str) -> &str {
    let start = s.len().saturating_sub(4000);
    s.get(start..).unwrap_or(s)
}

fn code(out: &Output) -> Option<i32> {
    out.status.code()
}

#[test]
fn ibsmctl_drives_the_demo_cluster() -> Result<()> {
    let demo = Demo::start()?;
    let m = demo.master()?;
    let standbys: Vec<usize> = (0..3).filter(|i| *i != m).collect();
    let (s1, s2) = match standbys.as_slice() {
        [a, b] => (*a, *b),
        _ => bail!("expected two non-masters"),
    };

    // status and sms agree with each other.
    let st = demo.status(m)?;
    assert_eq!(st["master_guid"], st["guid"], "{st}");
    let sms = demo.json(m, &["sms", "--json"])?;
    let list = sms.as_array().context("sms is an array")?;
    assert!(list.len() >= 3, "{sms}");
    assert_eq!(
        list.iter().filter(|e| e["is_self"] == true).count(),
        1,
        "{sms}"
    );
    assert!(
        list.iter()
            .any(|e| e["is_self"] == true && e["state"] == "MASTER" && e["guid"] == st["guid"]),
        "{sms}"
    );
    let table = demo.ctl(m, &["sms"])?;
    assert_eq!(code(&table), Some(0));
    assert!(String::from_utf8_lossy(&table.stdout).starts_with("GUID"));

    // Exit codes.
    let out = demo.ctl(m, &["set-priority", "16"])?;
    assert_eq!(code(&out), Some(2), "priority 16 is refused locally");
    let out = demo.ctl(s1, &["handover"])?;
    assert_eq!(
        code(&out),
        Some(4),
        "handover asked of a non-master: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dead = Command::new(&demo.ctl)
        .args(["--endpoint", "http://127.0.0.1:1", "status"])
        .output()?;
    assert_eq!(code(&dead), Some(3));

    // sweep on the master.
    let sw = demo.json(m, &["sweep", "--heavy", "--json"])?;
    assert!(
        sw["summary"].as_str().is_some_and(|s| !s.is_empty()),
        "{sw}"
    );

    // Planned handover to a named standby, seen on a `watch` of that standby.
    let target_guid = demo.status(s1)?["guid"]
        .as_str()
        .context("guid")?
        .to_string();
    let mut watch = Command::new(&demo.ctl)
        .arg("--endpoint")
        .arg(&demo.endpoints[s1])
        .args(["watch", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let stdout = watch.stdout.take().context("watch stdout")?;
    let _watch_guard = ChildGuard::new(watch, "ibsmctl watch");
    let (tx, rx) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    std::thread::sleep(Duration::from_millis(500));
    let h = demo.json(m, &["handover", "--to", &target_guid, "--json"])?;
    assert_eq!(h["target_guid"], target_guid.as_str(), "{h}");
    demo.wait("the handover target to be MASTER", |d| {
        Ok(d.status(s1)?["state"] == "MASTER")
    })?;
    let deadline = Instant::now() + STEP;
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx
            .recv_timeout(left)
            .with_context(|| format!("watch never showed -> MASTER; saw {seen:?}"))?;
        let ev: Value = serde_json::from_str(&line).with_context(|| line.clone())?;
        if ev["to"] == "MASTER" && ev["from"] != "MASTER" {
            break;
        }
        seen.push(line);
    }

    // Control packets from the new master to the remaining standby.
    let new_master = s1;
    let victim_guid = demo.status(s2)?["guid"]
        .as_str()
        .context("guid")?
        .to_string();
    // DISABLE is legal only in STANDBY (OpenSM's table): after the handover the other
    // standby re-discovers before it follows the new master, so wait for that first.
    let new_master_guid = demo.status(new_master)?["guid"]
        .as_str()
        .context("guid")?
        .to_string();
    demo.wait("the other standby to follow the new master", |d| {
        let st = d.status(s2)?;
        Ok(st["state"] == "STANDBY" && st["master_guid"] == new_master_guid.as_str())
    })?;
    demo.json(new_master, &["control", "disable", &victim_guid, "--json"])?;
    demo.wait("DISABLE to leave the standby NOTACTIVE", |d| {
        Ok(d.status(s2)?["state"] == "NOTACTIVE")
    })?;
    demo.json(new_master, &["control", "standby", &victim_guid, "--json"])?;
    demo.wait("STANDBY to bring it back", |d| {
        Ok(d.status(s2)?["state"] == "STANDBY")
    })?;

    // Raising a standby's priority above the master's makes it master (trap 144 ->
    // HANDOVER), and its status shows the new priority at once.
    let v = demo.json(s2, &["set-priority", "15", "--json"])?;
    assert_eq!(v["priority"], 15, "{v}");
    demo.wait("the priority-15 instance to be MASTER", |d| {
        Ok(d.status(s2)?["state"] == "MASTER")
    })?;
    assert_eq!(
        demo.states()?
            .iter()
            .filter(|s| s.as_str() == "MASTER")
            .count(),
        1
    );
    Ok(())
}
