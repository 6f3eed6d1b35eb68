//! An `ibsmd` process on an ibsim node: [`IbsmdOptions`], starting the binary (the
//! caller gives its path: this crate does not depend on ibsmd, it runs it) under
//! umad2sim with `--fabric umad`, its stderr in a log file, waiting for lines in that
//! log (`subnet up in`), reading its gRPC address from it, and killing it on drop.
//! Killing does not reap its ibsim client: call [`Ibsim::reap_dead_clients`] when the
//! node must take a new SM.
//!
//! The log lines relied on are the daemon's documented ones: `subnet up in X s: ...`
//! after a MASTER's first heavy sweep, `sm state: A -> B (reason)` on every transition,
//! and `gRPC control API listening addr=HOST:PORT` at start.

use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::child::{ChildGuard, POLL_STEP};
use crate::error::{io_err, LabError, Result};
use crate::files::{read_lossy, tail};
use crate::ibsim::Ibsim;

/// What a MASTER logs once its first heavy sweep configured the subnet.
pub const IBSMD_SUBNET_UP: &str = "subnet up in";

/// Options for [`Ibsmd::start`].
#[derive(Debug, Clone)]
pub struct IbsmdOptions {
    /// `--priority` (0..=15).
    pub priority: u8,
    /// `--grpc` address; `127.0.0.1:0` (the default) lets ibsmd pick a port, which
    /// [`Ibsmd::grpc_addr`] reads from its log.
    pub grpc: String,
    /// `RUST_LOG` (default `info`: the transitions and `subnet up` are INFO lines).
    pub rust_log: String,
    /// More arguments, after `--fabric umad --priority P --grpc ADDR`. Give
    /// `--insecure-plaintext` (or credentials) here: ibsmd refuses to start without one.
    pub args: Vec<String>,
}

impl Default for IbsmdOptions {
    fn default() -> Self {
        IbsmdOptions {
            priority: 5,
            grpc: "127.0.0.1:0".into(),
            rust_log: "info".into(),
            args: vec!["--insecure-plaintext".into()],
        }
    }
}

/// An `ibsmd --fabric umad` attached to an [`Ibsim`] node. Drop kills it (SIGKILL).
#[derive(Debug)]
pub struct Ibsmd {
    guard: ChildGuard,
    log_path: PathBuf,
    host: String,
}

static SEQ: AtomicU32 = AtomicU32::new(0);

impl Ibsmd {
    /// Start `binary` (the `ibsmd` executable) on node `host` (`SIM_HOST`, e.g. `Hca1`)
    /// of `ibsim`. Its stderr (the tracing log) goes to
    /// `<ibsim dir>/ibsmd-<host>-<n>.log`, its stdout nowhere.
    pub fn start(ibsim: &Ibsim, host: &str, binary: &Path, opts: IbsmdOptions) -> Result<Ibsmd> {
        if !binary.is_file() {
            return Err(LabError::ToolMissing {
                name: binary.display().to_string(),
                hint: "cargo build -p ibsmd-bin",
                required: "",
            });
        }
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let log_path = ibsim.dir().join(format!("ibsmd-{host}-{n}.log"));
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(io_err(format!("creating {}", log_path.display())))?;
        let mut cmd = ibsim.command_on(host, binary);
        cmd.args(["--fabric", "umad", "--priority"])
            .arg(opts.priority.min(15).to_string())
            .arg("--grpc")
            .arg(&opts.grpc)
            .args(&opts.args)
            .env("RUST_LOG", &opts.rust_log)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log));
        tracing::debug!(?cmd, "starting ibsmd");
        let mut guard = ibsim.spawn(&mut cmd)?;
        guard.what = format!("ibsmd on {host}");
        Ok(Ibsmd {
            guard,
            log_path,
            host: host.to_string(),
        })
    }

    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.guard.pid()
    }

    /// The node it runs on.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Its log file.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// The whole log so far.
    pub fn log(&self) -> String {
        read_lossy(&self.log_path)
    }

    /// The log's current length in bytes, for [`Ibsmd::wait_log_since`].
    pub fn log_len(&self) -> usize {
        fs::metadata(&self.log_path).map_or(0, |m| usize::try_from(m.len()).unwrap_or(usize::MAX))
    }

    /// Wait until it logs [`IBSMD_SUBNET_UP`]: it is MASTER and its first heavy sweep
    /// gave LIDs, LFTs and Active ports (and the SA has the fabric to answer from).
    pub fn wait_subnet_up(&mut self, timeout: Duration) -> Result<()> {
        self.wait_log(IBSMD_SUBNET_UP, timeout)
    }

    /// Wait until the log contains `pattern` (a plain substring).
    pub fn wait_log(&mut self, pattern: &str, timeout: Duration) -> Result<()> {
        self.wait_log_since(0, pattern, timeout)
    }

    /// Wait until the log, from byte `offset` on, contains `pattern`. Fails early if
    /// ibsmd exits.
    pub fn wait_log_since(
        &mut self,
        offset: usize,
        pattern: &str,
        timeout: Duration,
    ) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let log = self.log();
            if log.get(offset..).is_some_and(|s| s.contains(pattern)) {
                return Ok(());
            }
            if let Some(st) = self.guard.try_wait()? {
                return Err(LabError::ProcessDied {
                    what: format!("ibsmd on {} (waiting for {pattern:?})", self.host),
                    status: st.to_string(),
                    output: tail(&log, 6000).to_string(),
                });
            }
            if Instant::now() >= deadline {
                return Err(LabError::Timeout {
                    what: format!("{pattern:?} in the log of ibsmd on {}", self.host),
                    timeout,
                    context: format!("log tail:\n{}", tail(&log, 6000)),
                });
            }
            std::thread::sleep(POLL_STEP);
        }
    }

    /// The gRPC address it logged (`gRPC control API listening addr=HOST:PORT`), once
    /// it has.
    pub fn grpc_addr(&self) -> Option<String> {
        grpc_addr_in_log(&self.log())
    }

    /// Is it still running?
    pub fn is_running(&mut self) -> bool {
        matches!(self.guard.try_wait(), Ok(None))
    }

    /// SIGKILL it (like a crash: ibsim keeps its registration until
    /// [`Ibsim::reap_dead_clients`]).
    pub fn kill(&mut self) -> Result<()> {
        self.guard.kill()
    }
}

/// A replicated cluster of ibsmd, one on each of `hosts` (node ids 1, 2, ... in that
/// order), with a cluster secret, a data directory each in the simulator's directory
/// and every member as a peer, gRPC on a free loopback port. The first is started and
/// brought to subnet up before the others start, so it is the master (at equal
/// priority give it the lowest port GUID); it returns once every member serves its
/// control API ([`Ibsmd::grpc_addr`] is known). `Some` each, so a test can `take` the
/// one it kills.
pub fn start_replicated_cluster(
    ibsim: &Ibsim,
    hosts: &[&str],
    binary: &Path,
    subnet_up_timeout: Duration,
) -> Result<Vec<Option<Ibsmd>>> {
    let ports: Vec<u16> = hosts
        .iter()
        .map(|_| {
            std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .map_err(io_err("picking a free gRPC port"))
        })
        .collect::<Result<_>>()?;
    let secret = ibsim.dir().join("cluster-secret");
    fs::write(&secret, "labkit-cluster-secret-0123456789abcdef\n")
        .map_err(io_err(format!("writing {}", secret.display())))?;
    let mut sms = Vec::new();
    for (i, host) in hosts.iter().enumerate() {
        let mut args = vec![
            "--insecure-plaintext".to_string(),
            "--cluster-secret-file".to_string(),
            secret.display().to_string(),
            "--node-id".to_string(),
            (i + 1).to_string(),
            "--data-dir".to_string(),
            ibsim.dir().join(format!("data-{i}")).display().to_string(),
        ];
        for (j, p) in ports.iter().enumerate() {
            args.push("--peer".to_string());
            args.push(format!("{}=127.0.0.1:{p}", j + 1));
        }
        let opts = IbsmdOptions {
            grpc: format!("127.0.0.1:{}", ports[i]),
            rust_log: "info,openraft=warn".to_string(),
            args,
            ..IbsmdOptions::default()
        };
        let mut sm = Ibsmd::start(ibsim, host, binary, opts)?;
        if i == 0 {
            sm.wait_subnet_up(subnet_up_timeout)?;
        }
        sms.push(Some(sm));
    }
    // Every member serves its control API (and so has logged its address).
    for sm in sms.iter_mut().flatten() {
        sm.wait_log("gRPC control API listening", subnet_up_timeout)?;
    }
    Ok(sms)
}

/// The address in ibsmd's `gRPC control API listening addr=HOST:PORT` log line.
pub fn grpc_addr_in_log(log: &str) -> Option<String> {
    log.lines().find_map(|l| {
        let rest = l.split("gRPC control API listening").nth(1)?;
        let addr = rest.split("addr=").nth(1)?;
        Some(addr.split_whitespace().next()?.to_string())
    })
}
