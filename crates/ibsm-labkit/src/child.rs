//! Child processes: [`ChildGuard`] (SIGKILL and reap on drop, deregistered from the
//! [`Ibsim`](crate::Ibsim) that started it), [`run_with_timeout`] / [`run_ok`] (a
//! command with a deadline, so a wedged client fails a test instead of hanging it),
//! [`die_with_parent`] (`PR_SET_PDEATHSIG`), [`pid_alive`], and the small helpers the
//! process owners share (the pid registry, a poison-proof lock, the poll step).

use std::fs;
use std::io::Read;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::error::{io_err, LabError, Result};
use crate::files::tail;
pub(crate) const POLL_STEP: Duration = Duration::from_millis(10);

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

pub(crate) type Registry = Arc<Mutex<Vec<u32>>>;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic in another test thread must not make cleanup panic too.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub(crate) fn kill_pid(pid: u32) {
    if let Ok(raw) = i32::try_from(pid) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), nix::sys::signal::SIGKILL);
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
    pub(crate) child: Option<Child>,
    pub(crate) what: String,
    pub(crate) registry: Option<Registry>,
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
