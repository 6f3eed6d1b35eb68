//! The clients of an [`Ibsim`]: building a `Command` with `LD_PRELOAD=umad2sim`,
//! `IBSIM_SOCKNAME` and `SIM_HOST` set, and spawning or running it so the simulator
//! kills it when dropped.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use crate::child::{lock, run_with_timeout, ChildGuard, Registry};
use crate::error::{io_err, Result};
use crate::ibsim::Ibsim;
use crate::tools::{require_tool, UMAD2SIM_LIB};
impl Ibsim {
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
        // ibsim has 10 client slots and keeps the slot of a client that died without
        // disconnecting (killed on a timeout, crashed); with none free, umad2sim in the
        // new client crashes (SIGSEGV in libc). Free the dead ones' slots first, as a
        // kernel closes a dead process's files.
        if let Err(e) = self.reap_dead_clients() {
            tracing::warn!(error = %e, "could not reap dead ibsim clients");
        }
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

    pub(crate) fn register(&self, pid: u32) -> Registry {
        lock(&self.started).push(pid);
        self.started.clone()
    }
}
