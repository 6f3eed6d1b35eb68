//! Shared helpers for the end-to-end tests in `tests/`.
//!
//! Finding the `ibsmd` and `ibsmctl` binaries: `CARGO_BIN_EXE_*` only exists inside
//! the package that owns a binary, and these tests live in their own package. So
//! [`binary`] asks cargo itself to build them (`$CARGO build -p ibsmd-bin -p ibsmctl`,
//! with `--release` when the test runs from `target/release`) into the very target
//! dir and profile this test executable runs from (`target/<profile>/deps/..`, see
//! [`profile_dir`]), and takes them from there. Building through cargo instead of
//! guessing a path means a stale binary is never tested; when they are fresh the
//! build is a quick no-op.
//!
//! The build runs at most once per test process (a `OnceLock` holds its outcome,
//! the error included), so the tests of one file, which run in parallel threads,
//! neither rebuild nor race each other for cargo's lock; a failed build fails every
//! test that needs a binary with the same message.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// The gRPC address ibsmd logged ("gRPC control API listening addr=HOST:PORT"), if
/// its log has it yet (`--grpc 127.0.0.1:0` picks the port at start).
pub fn grpc_addr_in_log(log: &str) -> Option<String> {
    log.lines().find_map(|l| {
        let rest = l.split("gRPC control API listening").nth(1)?;
        let addr = rest.split("addr=").nth(1)?;
        Some(addr.split_whitespace().next()?.to_string())
    })
}

/// What an `ibsmctl ... --json` run printed, parsed; an error naming `what` (the
/// command and where it ran) with ibsmctl's exit code and stderr if it failed, or
/// its stdout if that is not JSON.
pub fn ctl_json_of(what: &str, out: &Output) -> Result<serde_json::Value> {
    if !out.status.success() {
        bail!(
            "ibsmctl {what} exited {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    serde_json::from_slice(&out.stdout).with_context(|| {
        format!(
            "ibsmctl {what} printed no JSON: {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// Run an `ibsmctl drill ... --report-dir DIR` command (killed after `timeout`); its
/// output and the `report.json` it wrote. When there is no report, the error carries the
/// drill's stdout and stderr, and the text of each file in `logs` (a demo's log, say),
/// since the report is what explains a failed drill and it is missing.
pub fn run_drill(
    cmd: &mut Command,
    timeout: Duration,
    report_dir: &Path,
    logs: &[&Path],
) -> Result<(Output, serde_json::Value)> {
    let out = ibsm_labkit::run_with_timeout(cmd, timeout)?;
    let report = report_dir.join("report.json");
    let text = std::fs::read_to_string(&report).with_context(|| {
        let mut why = format!(
            "no {}; stdout:\n{}\nstderr:\n{}",
            report.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        for log in logs {
            let body = std::fs::read_to_string(log).unwrap_or_default();
            why.push_str(&format!("\n{}:\n{body}", log.display()));
        }
        why
    })?;
    let json =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", report.display()))?;
    Ok((out, json))
}

/// Run `cmd` (killed after `timeout`); its stdout, or an error with its exit status,
/// stdout and stderr.
pub fn run_ok(cmd: &mut Command, timeout: Duration) -> Result<String> {
    let out = ibsm_labkit::run_with_timeout(cmd, timeout)?;
    if !out.status.success() {
        bail!(
            "{:?} failed ({}):\nstdout: {}\nstderr: {}",
            cmd.get_program(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Wait until the ibsmd log at `log` contains `needle`; the error quotes the log.
pub fn wait_log(log: &Path, needle: &str, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        if text.contains(needle) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("no {needle:?} in the ibsmd log after {timeout:?}:\n{text}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `ibsmctl --endpoint <the gRPC address the ibsmd logged at log> <args> --json`,
/// parsed.
pub fn ctl_json_via_log(log: &Path, args: &[&str], timeout: Duration) -> Result<serde_json::Value> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let addr = grpc_addr_in_log(&text)
        .with_context(|| format!("no gRPC address in ibsmd's log:\n{text}"))?;
    let mut cmd = Command::new(binary("ibsmctl")?);
    cmd.arg("--endpoint")
        .arg(format!("http://{addr}"))
        .args(args)
        .arg("--json");
    let out = ibsm_labkit::run_with_timeout(&mut cmd, timeout)?;
    ctl_json_of(&format!("{args:?}"), &out)
}

/// The binaries [`binary`] builds and can return.
pub const BINARIES: [&str; 2] = ["ibsmd", "ibsmctl"];

/// `target/<profile>` of this test run: the directory of the running test
/// executable, or its parent when that is cargo's `deps` dir.
pub fn profile_dir() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("current_exe")?;
    let deps = exe.parent().context("test executable has no parent dir")?;
    let profile = if deps.file_name().is_some_and(|n| n == "deps") {
        deps.parent().context("deps dir has no parent")?
    } else {
        deps
    };
    Ok(profile.to_path_buf())
}

/// Build `ibsmd` and `ibsmctl` (once per test process; a no-op when fresh) and
/// return `target/<profile>/<name>`. `name` must be one of [`BINARIES`].
pub fn binary(name: &str) -> Result<PathBuf> {
    if !BINARIES.contains(&name) {
        bail!("binary {name:?}: only {BINARIES:?} are built for the integration tests");
    }
    static PROFILE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let profile = PROFILE
        .get_or_init(|| build().map_err(|e| format!("{e:#}")))
        .clone()
        .map_err(anyhow::Error::msg)?;
    let bin = profile.join(name);
    if !bin.is_file() {
        bail!("{} missing after cargo build", bin.display());
    }
    Ok(bin)
}

/// `$CARGO build -p ibsmd-bin -p ibsmctl` into this test's target dir and profile;
/// returns the profile dir.
fn build() -> Result<PathBuf> {
    let profile = profile_dir()?;
    let target_dir = profile.parent().context("profile dir has no parent")?;
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("../Cargo.toml");
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--quiet", "-p", "ibsmd-bin", "-p", "ibsmctl"])
        .arg("--manifest-path")
        .arg(&manifest)
        .env("CARGO_TARGET_DIR", target_dir);
    if profile.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    let out = cmd
        .output()
        .context("running cargo build -p ibsmd-bin -p ibsmctl")?;
    if !out.status.success() {
        bail!(
            "cargo build -p ibsmd-bin -p ibsmctl failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(profile)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grpc_address_is_read_from_ibsmd_log_lines() {
        let log = "2026-11-30T13:37:02.965165Z  WARN ibsmd::server: plaintext addr=127.0.0.1:1\n\
                   2026-11-30T13:37:02.966515Z  INFO ibsmd: gRPC control API listening addr=127.0.0.1:40025\n";
        assert_eq!(grpc_addr_in_log(log).as_deref(), Some("127.0.0.1:40025"));
        assert_eq!(grpc_addr_in_log("INFO ibsmd: starting\n"), None);
    }

    #[test]
    fn profile_dir_is_the_parent_of_deps() -> Result<()> {
        let profile = profile_dir()?;
        let exe = std::env::current_exe()?;
        assert!(exe.starts_with(&profile), "{exe:?} not under {profile:?}");
        assert_ne!(profile.file_name().and_then(|n| n.to_str()), Some("deps"));
        Ok(())
    }

    #[test]
    fn unknown_binary_is_refused_without_building() {
        let err = binary("opensm").err().map(|e| e.to_string());
        assert!(
            err.as_deref().is_some_and(|e| e.contains("only")),
            "{err:?}"
        );
    }
}
