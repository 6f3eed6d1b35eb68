//! ibsm-labkit: test-only helpers for the fabric lab (ibsim + umad2sim + OpenSM +
//! infiniband-diags). Read `/work/shared/notes/fabric-lab.md` for the facts this crate
//! is built on; the short version of *why* it looks the way it does:
//!
//! - **One simulator per test.** [`Ibsim::start`] gives every instance its own temp dir
//!   and its own `IBSIM_SOCKNAME` (`ibsm<pid>-<counter>-<random>`), so tests run in
//!   parallel (`cargo test` threads and several test binaries at once). ibsim binds
//!   abstract unix sockets `@<sockname>:ctl` etc.; readiness is "stdout printed the
//!   `Network simulator ready.` banner and the first `sim> ` prompt, and
//!   `/proc/net/unix` lists `@<sockname>:ctl`".
//! - **Console on a FIFO, without `-n`.** ibsim's `-n` flag means *no console*: it then
//!   never reads stdin, so console commands would be lost. Without `-n` and with stdin at
//!   EOF the console spins a core. So ibsim runs *without* `-n`, with stdin a FIFO
//!   (`<dir>/console`) whose write end [`Ibsim`] keeps open for its whole life. You can
//!   also `echo Dump > <dir>/console` by hand while debugging (set `IBSM_LAB_KEEP=1` to
//!   keep the temp dir after the test).
//! - **Console output is a file.** ibsim's stdout goes to `<dir>/ibsim.out`. A console
//!   command's answer is whatever ibsim prints between our write and its next `sim> `
//!   prompt; commands are serialized by a mutex so parallel threads sharing one
//!   `Ibsim` never interleave. Never truncate that file: ibsim writes at its own offset.
//! - **Dead clients.** ibsim never notices that a client died (a SIGKILLed SM keeps its
//!   port registration, IsSM and a client slot). [`Ibsim::reap_dead_clients`] does what a
//!   real kernel does on process exit: it lists `Attached` clients and sends `X <n>` for
//!   each whose pid is gone (or a zombie).
//! - **Clients.** [`Ibsim::command`] / [`Ibsim::command_on`] return a
//!   `std::process::Command` with `LD_PRELOAD=umad2sim`, `IBSIM_SOCKNAME` and `SIM_HOST`
//!   set, for infiniband-diags, OpenSM and our own binaries. [`run_with_timeout`] runs one
//!   with a deadline so a wedged client fails the test instead of hanging it.
//! - **Never skip.** A missing tool is an error ([`require_tool`], [`LabError::ToolMissing`]),
//!   never a silent pass. `IBSM_REQUIRE_LAB=1` (CI) changes nothing here because we
//!   already fail; it is reported in the error text so the reader knows why.
//! - **Cleanup.** Dropping [`Ibsim`] SIGKILLs ibsim and every process started through
//!   [`Ibsim::spawn`] or [`OpenSm::start`] that is still running; [`OpenSm`] and
//!   [`ChildGuard`] also kill their process on their own drop (also on panic unwinding).
//!   A long-running owner that may itself be SIGKILLed (`ibsmd demo --fabric ibsim:`,
//!   the one non-test user) sets [`IbsimOptions::die_with_parent`] and calls
//!   [`die_with_parent`] on its clients' commands: `PR_SET_PDEATHSIG` then kills them
//!   with it. [`ChildGuard::take_stdout`] lets it read a client's piped stdout.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Where Debian's ibsim-utils installs the umad2sim preload library.
pub const UMAD2SIM_LIB: &str = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so";

/// Environment variable: when set to `1`, the lab is mandatory (CI). Lab helpers fail
/// either way; the variable only makes the error text say so.
pub const REQUIRE_LAB_ENV: &str = "IBSM_REQUIRE_LAB";

/// Environment variable: when set (to anything non-empty), temp dirs of ibsim and
/// OpenSM instances are kept after drop, for post-mortem reading.
pub const KEEP_ENV: &str = "IBSM_LAB_KEEP";

const INSTALL_HINT: &str = "apt-get install -y ibsim-utils opensm infiniband-diags";
const PROMPT: &str = "sim> ";
const READY_BANNER: &str = "Network simulator ready";
const POLL_STEP: Duration = Duration::from_millis(10);
/// ibsim's built-in limits (`ibsim` prints them at start).
const DEFAULT_MAX_NODES: u32 = 2048;
const DEFAULT_MAX_SWITCHES: u32 = 256;
const DEFAULT_MAX_PORTS: u32 = 13312;

/// Everything that can go wrong in the lab. Each variant says what, where and why.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// A tool or library the lab needs is not installed.
    #[error("fabric lab tool `{name}` is missing (looked in PATH, /usr/sbin, /sbin); install it with `{hint}`{required}")]
    ToolMissing {
        name: String,
        hint: &'static str,
        /// Text noting that IBSM_REQUIRE_LAB=1 is set, or empty.
        required: &'static str,
    },
    /// An I/O operation on a lab file or process failed.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// ibsim exited (or was never ready) during start.
    #[error(
        "ibsim on {netfile} exited during start ({status}); stderr:\n{stderr}\nstdout:\n{stdout}"
    )]
    IbsimDied {
        netfile: PathBuf,
        status: String,
        stderr: String,
        stdout: String,
    },
    /// A process we started exited when it should be running.
    #[error("{what} exited ({status}); output:\n{output}")]
    ProcessDied {
        what: String,
        status: String,
        output: String,
    },
    /// A wait ran out of time.
    #[error("timed out after {timeout:?} waiting for {what}; {context}")]
    Timeout {
        what: String,
        timeout: Duration,
        context: String,
    },
    /// A command run through [`run_ok`] exited with a failure status.
    #[error("`{program}` failed ({status}); stderr:\n{stderr}\nstdout:\n{stdout}")]
    CommandFailed {
        program: String,
        status: String,
        stdout: String,
        stderr: String,
    },
    /// ibsim's console answered something we could not understand.
    #[error("ibsim console: {0}")]
    Console(String),
}

/// Result type of this crate.
pub type Result<T, E = LabError> = std::result::Result<T, E>;

fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> LabError {
    let what = what.into();
    move |source| LabError::Io { what, source }
}

fn lab_required() -> bool {
    std::env::var(REQUIRE_LAB_ENV).is_ok_and(|v| v == "1")
}

fn missing(name: &str) -> LabError {
    LabError::ToolMissing {
        name: name.to_string(),
        hint: INSTALL_HINT,
        required: if lab_required() {
            " (IBSM_REQUIRE_LAB=1: the fabric lab is mandatory here)"
        } else {
            ""
        },
    }
}

fn is_executable(p: &Path) -> bool {
    fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Find `name` (a program, e.g. `ibnetdiscover`) in `PATH`, then in `/usr/sbin` and
/// `/sbin` (infiniband-diags and OpenSM live there and `PATH` may lack them).
/// Returns an error, never a skip, when it is missing. A `name` with a `/` is checked
/// as a path.
pub fn require_tool(name: &str) -> Result<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return if is_executable(&p) {
            Ok(p)
        } else {
            Err(missing(name))
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let extra = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from);
    std::env::split_paths(&path)
        .chain(extra)
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
        .ok_or_else(|| missing(name))
}

/// Check that the umad2sim preload library exists.
pub fn require_umad2sim() -> Result<PathBuf> {
    let p = PathBuf::from(UMAD2SIM_LIB);
    if p.is_file() {
        Ok(p)
    } else {
        Err(missing(UMAD2SIM_LIB))
    }
}

/// Check the whole lab at once: ibsim, umad2sim, OpenSM and the diags the tests use.
pub fn require_lab() -> Result<()> {
    require_umad2sim()?;
    for t in [
        "ibsim",
        "opensm",
        "ibnetdiscover",
        "ibroute",
        "sminfo",
        "smpquery",
        "smpdump",
    ] {
        require_tool(t)?;
    }
    Ok(())
}

fn read_lossy(path: &Path) -> String {
    fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

fn tail(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    s.get(start..).unwrap_or(s)
}

/// Is `pid` a live (non-zombie) process?
pub fn pid_alive(pid: u32) -> bool {
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // "pid (comm) S ...": comm may contain spaces and parentheses; the state follows the last ')'.
    match stat.rfind(')') {
        Some(i) => !matches!(
            stat.get(i + 1..)
                .and_then(|r| r.trim_start().chars().next()),
            Some('Z' | 'X') | None
        ),
        None => false,
    }
}

type Registry = Arc<Mutex<Vec<u32>>>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic in another test thread must not make cleanup panic too.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn kill_pid(pid: u32) {
    if let Ok(raw) = i32::try_from(pid) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), nix::sys::signal::SIGKILL);
    }
}

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

/// Node/switch/port counts read from a net file's header lines
/// (`Switch 8 "name"`, `Hca 2 "name"`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NetFileSize {
    pub nodes: u32,
    pub switches: u32,
    /// Declared ports plus one management port per node.
    pub ports: u32,
}

/// Count nodes, switches and ports of an ibsim net file (only header lines are read;
/// anything unparsable is ignored, ibsim itself will complain about it).
pub fn net_file_size(text: &str) -> NetFileSize {
    let mut s = NetFileSize::default();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let kind = words.next().unwrap_or("");
        let is_switch = kind.eq_ignore_ascii_case("switch");
        if !(is_switch
            || ["hca", "ca", "router"]
                .iter()
                .any(|k| kind.eq_ignore_ascii_case(k)))
        {
            continue;
        }
        let ports = words
            .next()
            .and_then(|w| w.parse::<u32>().ok())
            .unwrap_or(0);
        s.nodes = s.nodes.saturating_add(1);
        s.switches = s.switches.saturating_add(u32::from(is_switch));
        s.ports = s.ports.saturating_add(ports.saturating_add(1));
    }
    s
}

fn with_margin(need: u32, default: u32) -> Option<u32> {
    (need > default).then(|| need.saturating_add(need / 4).saturating_add(16))
}

static INSTANCE: AtomicU32 = AtomicU32::new(0);

/// A client attached to ibsim, as listed by the `Attached` console command
/// (`Client 0: pid 4202 connected at "Hca2" port 0x100004, lid 1, qp 0 SM`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachedClient {
    /// ibsim's client number, the argument of `X <n>`.
    pub id: u32,
    pub pid: u32,
    /// Node id from the net file, e.g. `Hca2`.
    pub node: String,
    /// The whole line, for diagnostics (`... SM` at the end marks an issm client).
    pub line: String,
}

/// Parse the output of ibsim's `Attached` command. Lines that do not look like a client
/// are skipped.
pub fn parse_attached(text: &str) -> Vec<AttachedClient> {
    text.lines().filter_map(parse_attached_line).collect()
}

fn parse_attached_line(line: &str) -> Option<AttachedClient> {
    let rest = line
        .trim_start_matches([' ', '\0'])
        .trim_start_matches(PROMPT)
        .trim_start();
    let rest = rest.strip_prefix("Client ")?;
    let (id, rest) = rest.split_once(':')?;
    let id = id.trim().parse().ok()?;
    let rest = rest.trim_start().strip_prefix("pid ")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let pid = digits.parse().ok()?;
    let node = rest
        .split_once('"')
        .and_then(|(_, r)| r.split_once('"'))
        .map(|(n, _)| n.to_string())
        .unwrap_or_default();
    Some(AttachedClient {
        id,
        pid,
        node,
        line: line.trim_matches([' ', '\0']).to_string(),
    })
}

/// A running ibsim with its own socket name, temp dir and console. Drop kills it and
/// everything started through it.
pub struct Ibsim {
    dir: Option<tempfile::TempDir>,
    dir_path: PathBuf,
    sockname: String,
    netfile: PathBuf,
    console: Mutex<File>,
    stdout_path: PathBuf,
    stderr_path: PathBuf,
    child: Mutex<Child>,
    pid: u32,
    started: Registry,
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

fn make_tempdir(prefix: &str) -> Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .map_err(io_err(format!("creating a temp dir {prefix}*")))
}

fn maybe_keep(dir: &mut Option<tempfile::TempDir>) {
    if std::env::var_os(KEEP_ENV).is_some_and(|v| !v.is_empty()) {
        if let Some(d) = dir.take() {
            let kept = d.keep();
            tracing::info!(dir = %kept.display(), "kept lab temp dir");
        }
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
        };
        sim.wait_ready(opts.ready_timeout)?;
        tracing::info!(sockname = %sim.sockname, pid, netfile = %netfile.display(), "ibsim ready");
        Ok(sim)
    }

    fn died_error(&self, status: String) -> LabError {
        LabError::IbsimDied {
            netfile: self.netfile.clone(),
            status,
            stderr: tail(&read_lossy(&self.stderr_path), 8000).to_string(),
            stdout: tail(&read_lossy(&self.stdout_path), 4000).to_string(),
        }
    }

    fn exit_status(&self) -> Option<String> {
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

    /// Send one console command (a single line, e.g. `Dump "Switch1"`) and return what
    /// ibsim printed in answer, up to its next prompt. Waits at most 10 s.
    pub fn console(&self, command: &str) -> Result<String> {
        self.console_timeout(command, Duration::from_secs(10))
    }

    /// [`Ibsim::console`] with an explicit timeout.
    pub fn console_timeout(&self, command: &str, timeout: Duration) -> Result<String> {
        if command.contains('\n') {
            return Err(LabError::Console(format!(
                "console command must be one line, got {command:?}"
            )));
        }
        let mut writer = lock(&self.console);
        let mut out = File::open(&self.stdout_path)
            .map_err(io_err(format!("opening {}", self.stdout_path.display())))?;
        let start = out
            .seek(SeekFrom::End(0))
            .map_err(io_err(format!("seeking {}", self.stdout_path.display())))?;
        tracing::debug!(sockname = %self.sockname, command, "ibsim console");
        writer
            .write_all(format!("{command}\n").as_bytes())
            .and_then(|()| writer.flush())
            .map_err(io_err(format!("writing `{command}` to ibsim's console")))?;
        let deadline = Instant::now() + timeout;
        let mut buf = Vec::new();
        loop {
            out.read_to_end(&mut buf)
                .map_err(io_err(format!("reading {}", self.stdout_path.display())))?;
            let text = String::from_utf8_lossy(&buf);
            if let Some(i) = text.rfind(PROMPT) {
                let answer = text.get(..i).unwrap_or("").trim_end().to_string();
                tracing::debug!(start, answer, "ibsim console answer");
                return Ok(answer);
            }
            if let Some(st) = self.exit_status() {
                return Err(self.died_error(st));
            }
            if Instant::now() >= deadline {
                return Err(LabError::Timeout {
                    what: format!("ibsim's answer to `{command}`"),
                    timeout,
                    context: format!("output so far: {text:?}"),
                });
            }
            std::thread::sleep(POLL_STEP);
        }
    }

    /// `Unlink "node"[port]`, or `Unlink "node"` (all links) when `port` is `None`.
    pub fn unlink(&self, node: &str, port: Option<u8>) -> Result<String> {
        self.console(&format!("Unlink {}", node_ref(node, port)))
    }

    /// `ReLink "node"[port]`: restore a link removed by `Unlink` (all when `port` is `None`).
    pub fn relink(&self, node: &str, port: Option<u8>) -> Result<String> {
        self.console(&format!("ReLink {}", node_ref(node, port)))
    }

    /// `Link "node"[port] "remote"[remote_port]`: connect two ports.
    pub fn link(&self, node: &str, port: u8, remote: &str, remote_port: u8) -> Result<String> {
        self.console(&format!(
            "Link {} {}",
            node_ref(node, Some(port)),
            node_ref(remote, Some(remote_port))
        ))
    }

    /// `Clear "node"[port]`: unlink and reset.
    pub fn clear(&self, node: &str, port: Option<u8>) -> Result<String> {
        self.console(&format!("Clear {}", node_ref(node, port)))
    }

    /// `Error "node"[port] <rate%> [attr]`: drop `rate_percent` % of packets through the
    /// port, optionally only those of attribute `attr_id` (e.g. 0x11 NodeInfo).
    pub fn error_rate(
        &self,
        node: &str,
        port: u8,
        rate_percent: u8,
        attr_id: Option<u16>,
    ) -> Result<String> {
        let mut cmd = format!("Error {} {rate_percent}", node_ref(node, Some(port)));
        if let Some(a) = attr_id {
            cmd.push_str(&format!(" {a}"));
        }
        self.console(&cmd)
    }

    /// The clients currently attached (console `Attached`).
    pub fn attached(&self) -> Result<Vec<AttachedClient>> {
        Ok(parse_attached(&self.console("Attached")?))
    }

    /// Disconnect client `id` (console `X <id>`).
    pub fn disconnect_client(&self, id: u32) -> Result<String> {
        self.console(&format!("X {id}"))
    }

    /// Emulate the kernel closing a dead process's umad/issm files: disconnect every
    /// attached client whose pid is gone (or a zombie). Returns the clients dropped.
    pub fn reap_dead_clients(&self) -> Result<Vec<AttachedClient>> {
        let dead: Vec<AttachedClient> = self
            .attached()?
            .into_iter()
            .filter(|c| !pid_alive(c.pid))
            .collect();
        for c in &dead {
            tracing::info!(client = c.id, pid = c.pid, node = %c.node, "reaping dead ibsim client");
            self.disconnect_client(c.id)?;
        }
        Ok(dead)
    }

    /// A `Command` for `program` attached to this simulator at the first node of the net
    /// file (umad2sim's default). `program` without a `/` is looked up like
    /// [`require_tool`] (falling back to the bare name, so spawning reports it missing).
    /// Its working directory is [`Ibsim::dir`], because umad2sim writes a fake sysfs
    /// (`sys-<pid>/sys/class/infiniband...`) into the client's working directory; give
    /// relative paths accordingly or override with `current_dir`.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        self.build_command(None, program.as_ref())
    }

    /// A `Command` for `program` attached to this simulator at node `host` (`SIM_HOST`,
    /// an Hca's node id from the net file, e.g. `Hca2`).
    pub fn command_on(&self, host: &str, program: impl AsRef<std::ffi::OsStr>) -> Command {
        self.build_command(Some(host), program.as_ref())
    }

    fn build_command(&self, host: Option<&str>, program: &std::ffi::OsStr) -> Command {
        let resolved = program
            .to_str()
            .and_then(|p| require_tool(p).ok())
            .map(PathBuf::into_os_string)
            .unwrap_or_else(|| program.to_os_string());
        let mut cmd = Command::new(resolved);
        // umad2sim writes a fake sysfs tree `sys-<pid>/` into the client's working
        // directory: keep it out of the source tree.
        cmd.current_dir(&self.dir_path);
        cmd.env("LD_PRELOAD", UMAD2SIM_LIB)
            .env("IBSIM_SOCKNAME", &self.sockname);
        match host {
            Some(h) => cmd.env("SIM_HOST", h),
            None => cmd.env_remove("SIM_HOST"),
        };
        cmd
    }

    /// Spawn `cmd` (usually from [`Ibsim::command`]) as a process this `Ibsim` kills when
    /// dropped; the guard also kills it on its own drop.
    pub fn spawn(&self, cmd: &mut Command) -> Result<ChildGuard> {
        let what = format!("{:?}", cmd.get_program());
        let child = cmd.spawn().map_err(io_err(format!("spawning {what}")))?;
        lock(&self.started).push(child.id());
        Ok(ChildGuard {
            child: Some(child),
            what,
            registry: Some(self.started.clone()),
        })
    }

    /// Run `cmd` to completion with a deadline (see [`run_with_timeout`]).
    pub fn run(&self, cmd: &mut Command, timeout: Duration) -> Result<Output> {
        run_with_timeout(cmd, timeout)
    }

    fn register(&self, pid: u32) -> Registry {
        lock(&self.started).push(pid);
        self.started.clone()
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

fn node_ref(node: &str, port: Option<u8>) -> String {
    match port {
        Some(p) => format!("\"{node}\"[{p}]"),
        None => format!("\"{node}\""),
    }
}

fn deregister(registry: &Option<Registry>, pid: u32) {
    if let Some(r) = registry {
        lock(r).retain(|p| *p != pid);
    }
}

/// A child process killed (SIGKILL) and reaped on drop.
#[derive(Debug)]
pub struct ChildGuard {
    child: Option<Child>,
    what: String,
    registry: Option<Registry>,
}

impl ChildGuard {
    /// Wrap a child that no `Ibsim` tracks.
    pub fn new(child: Child, what: impl Into<String>) -> ChildGuard {
        ChildGuard {
            child: Some(child),
            what: what.into(),
            registry: None,
        }
    }

    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Has the child exited? (reaps it if so)
    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>> {
        let Some(child) = self.child.as_mut() else {
            return Ok(None);
        };
        let st = child
            .try_wait()
            .map_err(io_err(format!("waiting for {}", self.what)))?;
        if st.is_some() {
            deregister(&self.registry, child.id());
        }
        Ok(st)
    }

    /// Wait for the child to exit, at most `timeout`; kills it and errors on timeout.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Result<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(st) = self.try_wait()? {
                return Ok(st);
            }
            if Instant::now() >= deadline {
                self.kill()?;
                return Err(LabError::Timeout {
                    what: format!("{} to exit", self.what),
                    timeout,
                    context: "killed it".into(),
                });
            }
            std::thread::sleep(POLL_STEP);
        }
    }

    /// Take the child's stdout pipe (spawned with `Stdio::piped()`), once.
    pub fn take_stdout(&mut self) -> Option<std::process::ChildStdout> {
        self.child.as_mut().and_then(|c| c.stdout.take())
    }

    /// SIGKILL the child and reap it.
    pub fn kill(&mut self) -> Result<()> {
        if let Some(child) = self.child.as_mut() {
            let pid = child.id();
            let _ = child.kill();
            child
                .wait()
                .map_err(io_err(format!("reaping {}", self.what)))?;
            deregister(&self.registry, pid);
        }
        Ok(())
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.kill();
    }
}

/// Make the process `cmd` starts receive SIGKILL when the *thread* that spawns it
/// exits (Linux `PR_SET_PDEATHSIG`), so a parent that is itself SIGKILLed leaves no
/// orphan holding ibsim client slots. The signal follows the spawning thread, not the
/// process: spawn from a thread that lives as long as the owner (not a pool thread
/// that may retire while the child should keep running).
pub fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    let parent = i32::try_from(std::process::id()).unwrap_or(0);
    // SAFETY: the closure runs between fork and exec; it only calls prctl and
    // getppid (async-signal-safe) and allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died before prctl: then nobody would signal us.
            if libc::getppid() != parent {
                return Err(std::io::Error::other("parent exited before exec"));
            }
            Ok(())
        });
    }
}

/// Run `cmd` with stdin closed and stdout/stderr captured; kill it and fail if it does
/// not finish within `timeout`. A non-zero exit is *not* an error here (see [`run_ok`]).
pub fn run_with_timeout(cmd: &mut Command, timeout: Duration) -> Result<Output> {
    let what = format!("{:?}", cmd.get_program());
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(io_err(format!("spawning {what}")))?;
    let mut out_pipe = child.stdout.take();
    let mut err_pipe = child.stderr.take();
    let out_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        if let Some(p) = out_pipe.as_mut() {
            let _ = p.read_to_end(&mut v);
        }
        v
    });
    let err_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        if let Some(p) = err_pipe.as_mut() {
            let _ = p.read_to_end(&mut v);
        }
        v
    });
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Some(st),
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(POLL_STEP),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(io_err(format!("waiting for {what}"))(e));
            }
        }
    };
    let stdout = out_t.join().unwrap_or_default();
    let stderr = err_t.join().unwrap_or_default();
    match status {
        Some(status) => Ok(Output {
            status,
            stdout,
            stderr,
        }),
        None => Err(LabError::Timeout {
            what: format!("{what} to finish"),
            timeout,
            context: format!(
                "stdout:\n{}\nstderr:\n{}",
                tail(&String::from_utf8_lossy(&stdout), 4000),
                tail(&String::from_utf8_lossy(&stderr), 4000)
            ),
        }),
    }
}

/// [`run_with_timeout`], then require success; returns stdout as a string.
pub fn run_ok(cmd: &mut Command, timeout: Duration) -> Result<String> {
    let program = format!(
        "{:?} {:?}",
        cmd.get_program(),
        cmd.get_args().collect::<Vec<_>>()
    );
    let out = run_with_timeout(cmd, timeout)?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(LabError::CommandFailed {
            program,
            status: out.status.to_string(),
            stdout,
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
}

/// Options for [`OpenSm::start`].
#[derive(Debug, Clone, Default)]
pub struct OpenSmOptions {
    /// `sm_priority` (0..=15).
    pub priority: u8,
    /// `sminfo_polling_timeout` in ms (OpenSM default 10000).
    pub sminfo_polling_timeout_ms: Option<u32>,
    /// `polling_retry_number` (OpenSM default 4).
    pub polling_retry_number: Option<u32>,
    /// `sweep_interval` in s (OpenSM default 10; 0 disables periodic sweeps).
    pub sweep_interval_s: Option<u32>,
    /// `log_flags` (OpenSM default 0x03: errors and info).
    pub log_flags: Option<u8>,
    /// Extra config lines (`key value`), appended after ours, so they win.
    pub extra_config: Vec<String>,
    /// Extra command-line arguments.
    pub extra_args: Vec<String>,
}

/// An OpenSM attached to an [`Ibsim`] node, with its own config, cache dir and log.
/// Drop kills it (SIGKILL).
#[derive(Debug)]
pub struct OpenSm {
    guard: ChildGuard,
    dir: Option<tempfile::TempDir>,
    dir_path: PathBuf,
    log_path: PathBuf,
    host: String,
}

impl OpenSm {
    /// Start OpenSM on node `host` (e.g. `Hca2`) of `ibsim`. Its config
    /// (`<dir>/opensm.conf`) has `force_log_flush TRUE`, `sm_priority`, polling and sweep
    /// settings from `opts`, and keeps dump files in its temp dir; `OSM_CACHE_DIR` is the
    /// temp dir; the log is `<dir>/opensm.log`.
    pub fn start(ibsim: &Ibsim, host: &str, opts: OpenSmOptions) -> Result<OpenSm> {
        require_tool("opensm")?;
        let dir = make_tempdir("ibsm-osm-")?;
        let dir_path = dir.path().to_path_buf();
        let log_path = dir_path.join("opensm.log");
        let conf_path = dir_path.join("opensm.conf");
        let mut conf = String::new();
        conf.push_str("force_log_flush TRUE\n");
        conf.push_str(&format!("sm_priority {}\n", opts.priority.min(15)));
        conf.push_str(&format!("log_file {}\n", log_path.display()));
        conf.push_str(&format!("dump_files_dir {}/\n", dir_path.display()));
        if let Some(v) = opts.sminfo_polling_timeout_ms {
            conf.push_str(&format!("sminfo_polling_timeout {v}\n"));
        }
        if let Some(v) = opts.polling_retry_number {
            conf.push_str(&format!("polling_retry_number {v}\n"));
        }
        if let Some(v) = opts.sweep_interval_s {
            conf.push_str(&format!("sweep_interval {v}\n"));
        }
        if let Some(v) = opts.log_flags {
            conf.push_str(&format!("log_flags 0x{v:02x}\n"));
        }
        for line in &opts.extra_config {
            conf.push_str(line);
            conf.push('\n');
        }
        fs::write(&conf_path, conf).map_err(io_err(format!("writing {}", conf_path.display())))?;
        let stdio = dir_path.join("opensm.stdout");
        let stdio_file =
            File::create(&stdio).map_err(io_err(format!("creating {}", stdio.display())))?;
        let stdio_err = stdio_file
            .try_clone()
            .map_err(io_err(format!("duplicating {}", stdio.display())))?;
        let mut cmd = ibsim.command_on(host, "opensm");
        cmd.arg("-F")
            .arg(&conf_path)
            .arg("-f")
            .arg(&log_path)
            .args(&opts.extra_args)
            .env("OSM_CACHE_DIR", &dir_path)
            .current_dir(&dir_path)
            .stdin(Stdio::null())
            .stdout(Stdio::from(stdio_file))
            .stderr(Stdio::from(stdio_err));
        tracing::debug!(?cmd, "starting OpenSM");
        let child = cmd.spawn().map_err(io_err("spawning opensm"))?;
        let registry = ibsim.register(child.id());
        let guard = ChildGuard {
            child: Some(child),
            what: format!("opensm on {host}"),
            registry: Some(registry),
        };
        Ok(OpenSm {
            guard,
            dir: Some(dir),
            dir_path,
            log_path,
            host: host.to_string(),
        })
    }

    /// OpenSM's pid.
    pub fn pid(&self) -> u32 {
        self.guard.pid()
    }

    /// The node it runs on.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// Its temp dir (config, log, cache, dump files).
    pub fn dir(&self) -> &Path {
        &self.dir_path
    }

    /// The whole log so far.
    pub fn log(&self) -> String {
        read_lossy(&self.log_path)
    }

    /// The log's current length in bytes, for [`OpenSm::wait_log_since`].
    pub fn log_len(&self) -> usize {
        fs::metadata(&self.log_path).map_or(0, |m| usize::try_from(m.len()).unwrap_or(usize::MAX))
    }

    /// Wait until the log contains `pattern` (a plain substring).
    pub fn wait_log(&mut self, pattern: &str, timeout: Duration) -> Result<()> {
        self.wait_log_since(0, pattern, timeout)
    }

    /// Wait until the log, from byte `offset` on, contains `pattern`. Fails early if
    /// OpenSM exits.
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
                    what: format!("opensm on {} (waiting for {pattern:?})", self.host),
                    status: st.to_string(),
                    output: format!(
                        "{}\nlog:\n{}",
                        read_lossy(&self.dir_path.join("opensm.stdout")),
                        tail(&log, 6000)
                    ),
                });
            }
            if Instant::now() >= deadline {
                return Err(LabError::Timeout {
                    what: format!("{pattern:?} in the log of opensm on {}", self.host),
                    timeout,
                    context: format!("log tail:\n{}", tail(&log, 6000)),
                });
            }
            std::thread::sleep(Duration::from_millis(25));
        }
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

impl Drop for OpenSm {
    fn drop(&mut self) {
        let _ = self.guard.kill();
        maybe_keep(&mut self.dir);
    }
}

/// Directory of the example net files shipped with ibsim-utils.
pub const NET_EXAMPLES: &str = "/usr/share/doc/ibsim-utils/net-examples";

/// Path of an example net file (`net.2sw2path4hca`, ...) from ibsim-utils; errors if
/// it is not installed.
pub fn example_net(name: &str) -> Result<PathBuf> {
    let p = Path::new(NET_EXAMPLES).join(name);
    if p.is_file() {
        Ok(p)
    } else {
        Err(missing(&p.display().to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_attached_lines() {
        let text = "  \0\0Client 0: pid 4202 connected at \"Hca2\" port 0x100004, lid 1, qp 0 SM\nsim> Client 12: pid 7 connected at \"Hca1\" port 0x100001, lid 0, qp 0\ngarbage\nClient x: pid 1";
        let c = parse_attached(text);
        assert_eq!(c.len(), 2);
        assert_eq!((c[0].id, c[0].pid, c[0].node.as_str()), (0, 4202, "Hca2"));
        assert!(c[0].line.ends_with("SM"));
        assert_eq!((c[1].id, c[1].pid, c[1].node.as_str()), (12, 7, "Hca1"));
    }

    #[test]
    fn sizes_net_files() {
        let s = net_file_size(
            "# c\nSwitch\t8 \"S1\"\n[1] \"H\"[1]\nHca 2 \"H\"\n[1] \"S1\"[1]\nhca x \"bad\"\n",
        );
        assert_eq!(
            s,
            NetFileSize {
                nodes: 3,
                switches: 1,
                ports: 9 + 3 + 1
            }
        );
        assert_eq!(with_margin(100, DEFAULT_MAX_NODES), None);
        assert!(with_margin(5000, DEFAULT_MAX_NODES).is_some_and(|v| v > 5000));
    }

    #[test]
    fn pid_liveness() {
        assert!(pid_alive(std::process::id()));
        assert!(!pid_alive(u32::MAX));
    }

    #[test]
    fn missing_tool_is_an_error() {
        let e = require_tool("ibsm-no-such-tool-xyz");
        assert!(matches!(e, Err(LabError::ToolMissing { .. })));
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn console_and_net_parsers_never_panic(s in "(?s).{0,400}") {
                let _ = parse_attached(&s);
                let _ = net_file_size(&s);
            }

            #[test]
            fn attached_lines_round_trip(id in 0u32..10, pid: u32, node in "[A-Za-z0-9_-]{1,16}", sm: bool) {
                let line = format!("Client {id}: pid {pid} connected at \"{node}\" port 0x100004, lid 1, qp 0{}",
                                   if sm { " SM" } else { "" });
                let got = parse_attached(&format!("sim> {line}\nsim> "));
                prop_assert_eq!(got.len(), 1);
                prop_assert_eq!((got[0].id, got[0].pid, got[0].node.as_str()), (id, pid, node.as_str()));
            }
        }
    }
}
