//! [`IssmHandle`], an open `issmN`: holding it sets PortInfo.CapabilityMask.IsSM on
//! the port, dropping it clears the bit. Opened like a umad device (libc `open`,
//! closed without `OwnedFd`).

use std::path::{Path, PathBuf};

use crate::device::{open_device, DeviceFd, DEFAULT_DEVICE_DIR};
use crate::error::Result;

/// An open `issmN`: while it lives, the port advertises IsSM in
/// PortInfo.CapabilityMask. Dropping it closes the file and clears the bit.
#[derive(Debug)]
pub struct IssmHandle {
    _fd: DeviceFd,
    path: PathBuf,
}

impl IssmHandle {
    /// The device path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for IssmHandle {
    fn drop(&mut self) {
        tracing::debug!(path = %self.path.display(), "closing issm: IsSM cleared");
    }
}

/// Open `/dev/infiniband/issm<ca_index>` (set IsSM on that port).
pub fn open_issm(ca_index: u32) -> Result<IssmHandle> {
    open_issm_in(Path::new(DEFAULT_DEVICE_DIR), ca_index)
}

/// [`open_issm`] with another device directory.
pub fn open_issm_in(device_dir: &Path, ca_index: u32) -> Result<IssmHandle> {
    let path = device_dir.join(format!("issm{ca_index}"));
    let fd = open_device(&path)?;
    tracing::debug!(path = %path.display(), "issm open: IsSM set");
    Ok(IssmHandle { _fd: fd, path })
}
