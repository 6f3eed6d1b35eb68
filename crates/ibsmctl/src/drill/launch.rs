//! `--start-demo`: start `ibsmd demo --base-port 0` for the drill, read the
//! endpoints it prints, and stop it again when the drill ends (SIGTERM, then
//! SIGKILL).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::options::DrillError;

/// Stops the demo it started (also on panic or error): SIGTERM first, so a demo on
/// ibsim stops its ibsim and member processes and removes its temp dir, then SIGKILL
/// after [`DEMO_STOP_GRACE`] (its children die with it anyway: PR_SET_PDEATHSIG).
pub(super) struct DemoProcess(Child);

/// How long a started demo may take to stop after SIGTERM.
const DEMO_STOP_GRACE: Duration = Duration::from_secs(10);

impl Drop for DemoProcess {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            // No signal crate here: kill(1) sends the SIGTERM.
            let termed = Command::new("kill")
                .args(["-TERM", &self.0.id().to_string()])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if termed {
                let deadline = std::time::Instant::now() + DEMO_STOP_GRACE;
                while std::time::Instant::now() < deadline {
                    if !matches!(self.0.try_wait(), Ok(None)) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub(super) fn find_ibsmd(given: Option<&Path>) -> PathBuf {
    if let Some(p) = given {
        return p.to_path_buf();
    }
    if let Some(sib) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join("ibsmd")))
        .filter(|p| p.exists())
    {
        return sib;
    }
    PathBuf::from("ibsmd")
}

/// Start `ibsmd demo --base-port 0 [--fabric F]` and read its endpoints from stdout
/// (the first is where the Demo service answers).
pub(super) fn start_demo(
    ibsmd: &Path,
    dir: &Path,
    fabric: Option<&str>,
) -> Result<(DemoProcess, Vec<String>), DrillError> {
    let log = std::fs::File::create(dir.join("ibsmd-demo.log"))
        .map_err(|e| DrillError::Setup(format!("{}: {e}", dir.join("ibsmd-demo.log").display())))?;
    let mut cmd = Command::new(ibsmd);
    cmd.args(["demo", "--base-port", "0"]);
    if let Some(f) = fabric {
        cmd.arg("--fabric").arg(f);
    }
    let mut child = cmd
        .arg("--data-dir")
        .arg(dir.join("demo-data"))
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .map_err(|e| {
            DrillError::Setup(format!(
                "cannot start {} demo: {e} (give --ibsmd PATH)",
                ibsmd.display()
            ))
        })?;
    let stdout = child.stdout.take();
    let proc_ = DemoProcess(child);
    let stdout = stdout.ok_or_else(|| DrillError::Setup("ibsmd demo: no stdout".into()))?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut eps = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(at) = line.find("gRPC http://") {
                if let Some(ep) = line.get(at + 5..) {
                    eps.push(ep.trim().to_string());
                }
            }
            if line.starts_with("Ctrl-C") {
                let _ = tx.send(std::mem::take(&mut eps));
            }
        }
        // Keep draining nothing more: the pipe closes when the demo exits.
    });
    let eps = rx.recv_timeout(Duration::from_secs(120)).map_err(|_| {
        let log = std::fs::read_to_string(dir.join("ibsmd-demo.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(8).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        DrillError::Setup(format!(
            "ibsmd demo did not print its endpoints (it exited or took over 120 s); {}:\n{}",
            dir.join("ibsmd-demo.log").display(),
            tail.join("\n")
        ))
    })?;
    if eps.is_empty() {
        return Err(DrillError::Setup(
            "ibsmd demo printed no gRPC endpoint".into(),
        ));
    }
    Ok((proc_, eps))
}
