//! An ibsim process: [`IbsimOptions`], starting ibsim with its own socket name, temp
//! dir and console FIFO (limits sized from the net file), waiting until it is ready,
//! its accessors, and killing it with everything started through it on drop. Its
//! console commands and the commands of its clients are `impl Ibsim` blocks in
//! `console.rs` and `clients.rs`.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::child::{die_with_parent, kill_pid, lock, Registry, POLL_STEP};
use crate::error::{io_err, LabError, Result};
use crate::files::{make_tempdir, maybe_keep, read_lossy, tail};
use crate::parse::{net_file_size, PROMPT};
use crate::tools::{require_tool, require_umad2sim};
const READY_BANNER: &str = "Network simulator ready";
/// ibsim's built-in limits (`ibsim` prints them at start).
pub(crate) const DEFAULT_MAX_NODES: u32 = 2048;
const DEFAULT_MAX_SWITCHES: u32 = 256;
const DEFAULT_MAX_PORTS: u32 = 13312;

/// Options for [`Ibsim::start`]. Limits left `None` are sized from the net file: ibsim's
/// defaults (2048 nodes, 256 switches, 13312 ports) are raised when the file needs more.
#[derive(Debug, Clone)]
pub struct IbsimOptions {
    /// `-N`: maximum number of nodes.
    pub max_nodes: Option<u32>,
    /// `-S`: maximum number of switches.
    pub max_switches: Option<u32>,
    /// `-P`: maximum number of ports.
    pub max_ports: Option<u32>,
    /// How long to wait for ibsim to be ready (parsing a big net file takes a while).
    pub ready_timeout: Duration,
    /// Extra command-line arguments, placed before the net file.
    pub extra_args: Vec<String>,
    /// SIGKILL ibsim when the thread that started it dies (see [`die_with_parent`]),
    /// for long-running owners such as `ibsmd demo --fabric ibsim:` that may be
    /// SIGKILLed themselves and must not leave a simulator behind.
    pub die_with_parent: bool,
}

impl Default for IbsimOptions {
    fn default() -> Self {
        IbsimOptions {
            max_nodes: None,
            max_switches: None,
            max_ports: None,
            ready_timeout: Duration::from_secs(30),
            extra_args: Vec::new(),
            die_with_parent: false,
        }
    }
}

pub(crate) fn with_margin(need: u32, default: u32) -> Option<u32> {
    (need > default).then(|| need.saturating_add(need / 4).saturating_add(16))
}

static INSTANCE: AtomicU32 = AtomicU32::new(0);

/// A running ibsim with its own socket name, temp dir and console. Drop kills it and
/// everything started through it.
pub struct Ibsim {
    dir: Option<tempfile::TempDir>,
    pub(crate) dir_path: PathBuf,
    pub(crate) sockname: String,
    netfile: PathBuf,
    pub(crate) console: Mutex<File>,
    pub(crate) stdout_path: PathBuf,
    stderr_path: PathBuf,
    child: Mutex<Child>,
    pid: u32,
    pub(crate) started: Registry,
    /// When the last spaced saquery of each node finished (see `Saquery::spacing`).
    pub(crate) sa_last: Mutex<std::collections::HashMap<String, Instant>>,
}

impl std::fmt::Debug for Ibsim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ibsim")
            .field("sockname", &self.sockname)
            .field("pid", &self.pid)
            .field("dir", &self.dir_path)
            .field("netfile", &self.netfile)
            .finish()
    }
}

impl Ibsim {
    /// Start `ibsim -s [-N -S -P] NETFILE` with a unique `IBSIM_SOCKNAME`, its console on
    /// a FIFO and its output in the temp dir, and wait until it is ready.
    pub fn start(netfile: &Path, opts: IbsimOptions) -> Result<Ibsim> {
        let ibsim = require_tool("ibsim")?;
        require_umad2sim()?;
        let text = fs::read_to_string(netfile)
            .map_err(io_err(format!("reading net file {}", netfile.display())))?;
        let size = net_file_size(&text);

        let dir = make_tempdir("ibsm-lab-")?;
        let dir_path = dir.path().to_path_buf();
        let suffix: String = dir_path
            .file_name()
            .map(|n| {
                n.to_string_lossy()
                    .trim_start_matches("ibsm-lab-")
                    .to_string()
            })
            .unwrap_or_default();
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let sockname = format!(
            "ibsm{}-{}-{}{:x}",
            std::process::id(),
            INSTANCE.fetch_add(1, Ordering::Relaxed),
            suffix,
            nanos & 0xffff
        );

        // Console FIFO: open the read end non-blocking (succeeds without a writer), then the
        // write end (succeeds because a reader exists), then make the read end blocking and
        // hand it to ibsim as stdin. We keep the write end, so ibsim never sees EOF.
        let fifo = dir_path.join("console");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).map_err(
            |e| LabError::Io {
                what: format!("mkfifo {}", fifo.display()),
                source: std::io::Error::from(e),
            },
        )?;
        let reader = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .map_err(io_err(format!(
                "opening console FIFO {} for reading",
                fifo.display()
            )))?;
        let writer = OpenOptions::new()
            .write(true)
            .open(&fifo)
            .map_err(io_err(format!(
                "opening console FIFO {} for writing",
                fifo.display()
            )))?;
        nix::fcntl::fcntl(
            std::os::fd::AsRawFd::as_raw_fd(&reader),
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::empty()),
        )
        .map_err(|e| LabError::Io {
            what: "clearing O_NONBLOCK on the console FIFO".into(),
            source: std::io::Error::from(e),
        })?;

        let stdout_path = dir_path.join("ibsim.out");
        let stderr_path = dir_path.join("ibsim.err");
        let out = File::create(&stdout_path)
            .map_err(io_err(format!("creating {}", stdout_path.display())))?;
        let err = File::create(&stderr_path)
            .map_err(io_err(format!("creating {}", stderr_path.display())))?;

        let mut cmd = Command::new(&ibsim);
        cmd.arg("-s");
        let limits = [
            (
                "-N",
                opts.max_nodes
                    .or_else(|| with_margin(size.nodes, DEFAULT_MAX_NODES)),
            ),
            (
                "-S",
                opts.max_switches
                    .or_else(|| with_margin(size.switches, DEFAULT_MAX_SWITCHES)),
            ),
            (
                "-P",
                opts.max_ports
                    .or_else(|| with_margin(size.ports, DEFAULT_MAX_PORTS)),
            ),
        ];
        for (flag, v) in limits {
            if let Some(v) = v {
                cmd.arg(flag).arg(v.to_string());
            }
        }
        cmd.args(&opts.extra_args)
            .arg(netfile)
            .env("IBSIM_SOCKNAME", &sockname)
            .env_remove("LD_PRELOAD")
            .current_dir(&dir_path)
            .stdin(Stdio::from(reader))
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err));
        if opts.die_with_parent {
            die_with_parent(&mut cmd);
        }
        tracing::debug!(?cmd, "starting ibsim");
        let child = cmd
            .spawn()
            .map_err(io_err(format!("spawning {}", ibsim.display())))?;
        let pid = child.id();
        let sim = Ibsim {
            dir: Some(dir),
            dir_path,
            sockname,
            netfile: netfile.to_path_buf(),
            console: Mutex::new(writer),
            stdout_path,
            stderr_path,
            child: Mutex::new(child),
            pid,
            started: Arc::new(Mutex::new(Vec::new())),
            sa_last: Mutex::new(std::collections::HashMap::new()),
        };
        sim.wait_ready(opts.ready_timeout)?;
        tracing::info!(sockname = %sim.sockname, pid, netfile = %netfile.display(), "ibsim ready");
        Ok(sim)
    }

    pub(crate) fn died_error(&self, status: String) -> LabError {
        LabError::IbsimDied {
            netfile: self.netfile.clone(),
            status,
            stderr: tail(&read_lossy(&self.stderr_path), 8000).to_string(),
            stdout: tail(&read_lossy(&self.stdout_path), 4000).to_string(),
        }
    }

    pub(crate) fn exit_status(&self) -> Option<String> {
        match lock(&self.child).try_wait() {
            Ok(Some(st)) => Some(st.to_string()),
            Ok(None) => None,
            Err(e) => Some(format!("wait failed: {e}")),
        }
    }

    fn socket_bound(&self) -> bool {
        let needle = format!("@{}:ctl", self.sockname);
        read_lossy(Path::new("/proc/net/unix")).contains(&needle)
    }

    fn wait_ready(&self, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(st) = self.exit_status() {
                return Err(self.died_error(st));
            }
            let out = read_lossy(&self.stdout_path);
            let ready = out
                .find(READY_BANNER)
                .and_then(|i| out.get(i..))
                .is_some_and(|after| after.contains(PROMPT));
            if ready && self.socket_bound() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(LabError::Timeout {
                    what: format!("ibsim on {} to become ready", self.netfile.display()),
                    timeout,
                    context: format!(
                        "stdout:\n{}\nstderr:\n{}",
                        tail(&out, 4000),
                        tail(&read_lossy(&self.stderr_path), 4000)
                    ),
                });
            }
            std::thread::sleep(POLL_STEP);
        }
    }

    /// The `IBSIM_SOCKNAME` of this instance.
    pub fn sockname(&self) -> &str {
        &self.sockname
    }

    /// The instance's temp dir (console FIFO, ibsim.out, ibsim.err).
    pub fn dir(&self) -> &Path {
        &self.dir_path
    }

    /// The net file ibsim was started on.
    pub fn netfile(&self) -> &Path {
        &self.netfile
    }

    /// ibsim's pid.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Is ibsim still running?
    pub fn is_running(&self) -> bool {
        self.exit_status().is_none()
    }

    /// Everything ibsim printed on stdout (console output) so far.
    pub fn stdout(&self) -> String {
        read_lossy(&self.stdout_path)
    }

    /// Everything ibsim printed on stderr so far.
    pub fn stderr(&self) -> String {
        read_lossy(&self.stderr_path)
    }
}

impl Drop for Ibsim {
    fn drop(&mut self) {
        for pid in lock(&self.started).drain(..) {
            kill_pid(pid);
        }
        let mut child = lock(&self.child);
        let _ = child.kill();
        let _ = child.wait();
        drop(child);
        maybe_keep(&mut self.dir);
    }
}
