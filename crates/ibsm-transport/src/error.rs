//! The crate's two error types, [`TransportError`] (a device or driver failed) and
//! [`SpecError`] (a `--fabric` string was refused), which it wraps. A leaf file: the
//! devices, the driver and the spec parser all return these without importing each
//! other.

use std::path::PathBuf;
use std::time::Duration;

/// Why a device or driver failed.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// The umad device failed.
    #[error("umad: {0}")]
    Umad(#[from] ibsm_umad::UmadError),
    /// The embedded simulator refused something.
    #[error("simulator: {0}")]
    Sim(String),
    /// The device has no agent for this GMP class (it carries SMPs only, or the class
    /// was never registered).
    #[error("this device sends no GMPs of class {class:#04x} (no GSI agent for it)")]
    GmpUnsupported {
        /// The MAD's management class.
        class: u8,
    },
    /// `send_gmp` was given an SMP (class 0x01/0x81): those go through `send`/`send_lid`.
    #[error(
        "class {class:#04x} is subnet management: send it with send or send_lid, not send_gmp"
    )]
    NotGmp {
        /// The MAD's management class.
        class: u8,
    },
    /// A GMP to send was shorter than the MAD and RMPP headers (36 bytes) or longer
    /// than a MAD (256).
    #[error("a GMP of {len} bytes: need 36..=256")]
    GmpLength {
        /// The length given.
        len: usize,
    },
    /// The simulator lock was poisoned by a panicking thread.
    #[error("simulator lock poisoned")]
    Poisoned,

    /// A change to the device (registering an agent) after it was shared with
    /// [`crate::MadDevice::try_share`]: agents are registered before the device is
    /// shared.
    #[error(
        "cannot {what}: the device is already shared between threads (do it before try_share)"
    )]
    Shared {
        /// What was refused.
        what: &'static str,
    },
    /// A driver ran past its overall deadline.
    #[error("{what} did not finish within {limit:?}")]
    Deadline {
        /// What was running.
        what: &'static str,
        /// The limit.
        limit: Duration,
    },
    /// The fabric spec could not be turned into a device.
    #[error(transparent)]
    Spec(#[from] SpecError),
}

/// Why a `--fabric` string or its net file was refused.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// The string has no known prefix.
    #[error("unknown fabric {0:?}: expected sim:NETFILE, gen:fat-tree:K, gen:fat-tree2:K, gen:random:SEED[:SWITCHES:HCAS:RADIX] or umad[:CA[:PORT]]")]
    Unknown(String),
    /// A number in the string did not parse.
    #[error("fabric {spec:?}: {field} {value:?} is not a valid number ({why})")]
    BadNumber {
        /// The whole spec.
        spec: String,
        /// Which field.
        field: &'static str,
        /// The text.
        value: String,
        /// The parser's reason.
        why: String,
    },
    /// A structurally wrong spec (missing or extra parts).
    #[error("fabric {spec:?}: {why}")]
    Malformed {
        /// The whole spec.
        spec: String,
        /// What is wrong.
        why: &'static str,
    },
    /// A umad port spec was refused.
    #[error("{0}")]
    Umad(String),
    /// The net file could not be read.
    #[error("cannot read net file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The net file did not parse.
    #[error("net file {path}: {source}")]
    NetFile {
        /// The file.
        path: PathBuf,
        /// The parser's error (with line number).
        source: ibsm_fabric::netfile::NetFileError,
    },
    /// The generator refused the parameters.
    #[error("cannot generate {spec:?}: {why}")]
    Generate {
        /// The whole spec.
        spec: String,
        /// The generator's reason.
        why: String,
    },
}
