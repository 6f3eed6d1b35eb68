//! OpenSM on an ibsim node: [`OpenSmOptions`], starting it with its own config, cache
//! dir and log as a client of an [`Ibsim`] (optionally with fixed LIDs from a guid2lid
//! file and a partitions.conf), waiting for a line in its log (`SUBNET UP`), and
//! killing it on drop. Killing does not reap its ibsim client: call
//! [`Ibsim::reap_dead_clients`] when the node must take a new SM.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::child::ChildGuard;
use crate::error::{io_err, LabError, Result};
use crate::files::{make_tempdir, maybe_keep, read_lossy, tail};
use crate::ibsim::Ibsim;
use crate::osm_files::{format_guid2lid, parse_guid2lid, Guid2LidEntry};
use crate::tools::require_tool;
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
    /// Fixed LIDs, `(port GUID, LID)` (LMC 0). When not empty, written as OpenSM's
    /// `guid2lid` into its cache dir (`OSM_CACHE_DIR`) in the format its parser needs
    /// (see `osm_files.rs`), and the config gets `honor_guid2lid_file TRUE`. OpenSM
    /// then gives exactly these LIDs; ports not listed get free ones.
    pub guid2lid: Vec<(u64, u16)>,
    /// A whole guid2lid file, written verbatim into the cache dir (e.g. what
    /// `ibsmd`'s `ibsmctl lids --format guid2lid` printed), with `honor_guid2lid_file
    /// TRUE`; used instead of [`OpenSmOptions::guid2lid`] when given.
    pub guid2lid_file: Option<String>,
    /// An OpenSM partitions.conf: written to `<dir>/partitions.conf` and named by
    /// `partition_config_file`.
    pub partitions: Option<String>,
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
        let guid2lid = match &opts.guid2lid_file {
            Some(text) => Some(text.clone()),
            None if !opts.guid2lid.is_empty() => Some(format_guid2lid(&opts.guid2lid)),
            None => None,
        };
        if let Some(text) = guid2lid {
            let path = dir_path.join("guid2lid");
            fs::write(&path, text).map_err(io_err(format!("writing {}", path.display())))?;
            conf.push_str("honor_guid2lid_file TRUE\n");
        }
        if let Some(text) = &opts.partitions {
            let path = dir_path.join("partitions.conf");
            fs::write(&path, text).map_err(io_err(format!("writing {}", path.display())))?;
            conf.push_str(&format!("partition_config_file {}\n", path.display()));
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

    /// Wait until OpenSM logs `SUBNET UP` (its first sweep as master is done: LIDs,
    /// LFTs and ports active).
    pub fn wait_subnet_up(&mut self, timeout: Duration) -> Result<()> {
        self.wait_log("SUBNET UP", timeout)
    }

    /// The guid2lid file OpenSM keeps in its cache dir (it rewrites it after each sweep
    /// as master): the LIDs it assigned.
    pub fn guid2lid(&self) -> Result<Vec<Guid2LidEntry>> {
        let path = self.dir_path.join("guid2lid");
        let text =
            fs::read_to_string(&path).map_err(io_err(format!("reading {}", path.display())))?;
        parse_guid2lid(&text)
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
