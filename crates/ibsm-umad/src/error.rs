//! [`UmadError`], the errors of the umad interface (each says what, on which device,
//! and why), and the crate's [`Result`]. Every file that touches a device uses them.

use std::path::PathBuf;

use nix::errno::Errno;

use ibsm_mad::MadError;

use crate::header::UMAD_HDR_SIZE;

/// Errors of the umad interface; each says what, on which device, and why.
#[derive(Debug, thiserror::Error)]
pub enum UmadError {
    /// `open` of a device file failed.
    #[error("opening {path}: {errno}")]
    Open { path: PathBuf, errno: Errno },
    /// `IB_USER_MAD_REGISTER_AGENT` failed.
    #[error("registering an agent for class {class:#04x} on {path}: {errno}")]
    Register {
        path: PathBuf,
        class: u8,
        errno: Errno,
    },
    /// `write` failed or was short.
    #[error("sending a MAD on {path}: {reason}")]
    Send { path: PathBuf, reason: String },
    /// A MAD to send was shorter than the headers or longer than 256 bytes.
    #[error(
        "sending a MAD on {path}: {len} bytes, need {}..=256",
        crate::header::MIN_WRITE_MAD
    )]
    MadLength { path: PathBuf, len: usize },
    /// `poll` or `read` failed.
    #[error("receiving on {path}: {errno}")]
    Recv { path: PathBuf, errno: Errno },
    /// `read` returned fewer bytes than a header.
    #[error("short read on {path}: {len} bytes, need at least {UMAD_HDR_SIZE}")]
    ShortRead { path: PathBuf, len: usize },
    /// The MAD's management class has no agent here.
    #[error("no agent for management class {class:#04x} (0x01 and 0x81 are always registered; a GSI class needs UmadPort::register_gsi)")]
    UnsupportedClass { class: u8 },
    /// [`UmadPort::register_gsi`](crate::UmadPort::register_gsi) was asked for a class it
    /// cannot register.
    #[error("cannot register a GSI agent for class {class:#04x}: {why}")]
    BadGsiClass { class: u8, why: &'static str },
    /// A port spec could not be parsed or resolved.
    #[error("port spec {spec:?}: {reason}")]
    PortSpec { spec: String, reason: String },
    /// A synchronous query got no usable answer.
    #[error("{what}: {reason}")]
    Query { what: String, reason: String },
    /// An answer did not decode as an SMP / the expected attribute.
    #[error("{what}: {source}")]
    Decode {
        what: String,
        #[source]
        source: MadError,
    },
}

/// Result type of this crate.
pub type Result<T, E = UmadError> = std::result::Result<T, E>;
