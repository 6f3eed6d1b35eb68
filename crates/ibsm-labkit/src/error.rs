//! The crate's error type [`LabError`] (what failed, where and why) and its
//! [`Result`] alias, with the `io_err` adapter every file uses to wrap an I/O error
//! with what it was doing.

use std::path::PathBuf;
use std::time::Duration;

use crate::sa_error::SaqueryError;
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
    /// A command run through [`run_ok`](crate::run_ok) exited with a failure status.
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
    /// saquery ran and did not give the answer asked for (with its stderr).
    #[error(transparent)]
    Saquery(#[from] SaqueryError),
    /// A tool's output or a file did not parse.
    #[error("{what}, line {line}: {message}")]
    Parse {
        what: String,
        line: usize,
        message: String,
    },
}

/// Result type of this crate.
pub type Result<T, E = LabError> = std::result::Result<T, E>;

pub(crate) fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> LabError {
    let what = what.into();
    move |source| LabError::Io { what, source }
}
