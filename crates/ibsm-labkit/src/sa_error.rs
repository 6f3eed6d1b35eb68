//! How a saquery run failed: [`SaqueryError`], each variant carrying the command line
//! and saquery's stderr, and [`classify_saquery`], which reads them off its exit status
//! and stderr. Pure, tested on the captured failures (`tests/fixtures/saquery/*.stderr`).
//!
//! What saquery 44.0 prints (checked against OpenSM on ibsim):
//!
//! | situation | exit | stderr |
//! |---|---|---|
//! | the caller's PortInfo.MasterSMLID is 0 (no SM yet) | 255 | `ibwarn: ... sa_get_handle: No SM/SA found on port` |
//! | nobody answers at that LID (SM killed) | 110 | `Query SA failed: Connection timed out` |
//! | the SA answers an error status | 5 | `ERROR: Query result returned 0x0200,  SA(SA_ERR_REQ_INVALID)` |
//! | a node name it cannot resolve | 64 | `Failed to find lid for "Hca4": Machine is not on the network` |
//! | a GetTable with no match (`NR 99`) | 0 | nothing, and nothing on stdout |
//!
//! So "no records" is not an error to saquery; the single-record helpers of
//! [`Saquery`](crate::Saquery) turn an empty answer into [`SaqueryError::NoRecords`].

/// A saquery run that did not give the answer asked for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SaqueryError {
    /// No SM LID known to the caller's port (umad2sim's fake sysfs `sm_lid` is 0).
    #[error("`{command}`: no SM/SA known to the port (PortInfo.MasterSMLID 0); stderr:\n{stderr}")]
    NoSm { command: String, stderr: String },
    /// The SA did not answer in time (saquery's own timeout, `-t`).
    #[error("`{command}`: the SA did not answer (timed out); stderr:\n{stderr}")]
    Timeout { command: String, stderr: String },
    /// The SA answered with a non-zero MAD status (`status` as saquery printed it:
    /// SA-specific code in bits 15:8, e.g. 0x0200 SA_ERR_REQ_INVALID, 0x0300 NO_RECORDS).
    #[error("`{command}`: the SA answered status {status:#06x}; stderr:\n{stderr}")]
    Status {
        command: String,
        status: u16,
        stderr: String,
    },
    /// saquery could not resolve a node name to a LID.
    #[error("`{command}`: saquery could not resolve a node name; stderr:\n{stderr}")]
    NameNotFound { command: String, stderr: String },
    /// One record was asked for and the SA's answer held none.
    #[error("`{command}`: no records; stderr:\n{stderr}")]
    NoRecords { command: String, stderr: String },
    /// One record was asked for and saquery printed `printed` (of which `undelivered`
    /// from bytes umad2sim did not deliver).
    #[error("`{command}`: expected one record, saquery printed {printed} ({undelivered} not delivered by umad2sim); stdout:\n{stdout}")]
    NotOne {
        command: String,
        printed: usize,
        undelivered: usize,
        stdout: String,
    },
    /// Any other failure.
    #[error("`{command}` failed ({exit}); stderr:\n{stderr}\nstdout:\n{stdout}")]
    Failed {
        command: String,
        exit: String,
        stdout: String,
        stderr: String,
    },
}

/// The status saquery reports in `ERROR: Query result returned 0x0200, ...`.
fn status_in(stderr: &str) -> Option<u16> {
    let rest = stderr.split("Query result returned 0x").nth(1)?;
    let hex: String = rest.chars().take_while(char::is_ascii_hexdigit).collect();
    u16::from_str_radix(&hex, 16).ok()
}

/// Classify a finished saquery run: `Ok(())` when it exited 0 (its stdout is then the
/// answer, possibly empty, whatever stderr says), the matching [`SaqueryError`] otherwise. `exit` is the
/// exit status as text, for the message.
pub fn classify_saquery(
    command: &str,
    success: bool,
    exit: &str,
    stdout: &str,
    stderr: &str,
) -> Result<(), SaqueryError> {
    if success {
        return Ok(());
    }
    let command = command.to_string();
    let err = stderr.to_string();
    if stderr.contains("No SM/SA found") {
        return Err(SaqueryError::NoSm {
            command,
            stderr: err,
        });
    }
    if stderr.contains("Connection timed out") || stderr.contains("Timer expired") {
        return Err(SaqueryError::Timeout {
            command,
            stderr: err,
        });
    }
    if let Some(status) = status_in(stderr) {
        return Err(SaqueryError::Status {
            command,
            status,
            stderr: err,
        });
    }
    if stderr.contains("Failed to find lid for") {
        return Err(SaqueryError::NameNotFound {
            command,
            stderr: err,
        });
    }
    Err(SaqueryError::Failed {
        command,
        exit: exit.to_string(),
        stdout: stdout.to_string(),
        stderr: err,
    })
}
