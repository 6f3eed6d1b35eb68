//! The lab's temp dirs and output files: creating a temp dir, keeping it after drop
//! when `IBSM_LAB_KEEP` is set, reading a file a process is still writing, and the
//! tail of a long output for an error message.

use std::fs;
use std::path::Path;

use crate::error::{io_err, Result};
/// Environment variable: when set (to anything non-empty), temp dirs of ibsim and
/// OpenSM instances are kept after drop, for post-mortem reading.
pub const KEEP_ENV: &str = "IBSM_LAB_KEEP";

pub(crate) fn read_lossy(path: &Path) -> String {
    fs::read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

pub(crate) fn tail(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut start = s.len() - max;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    s.get(start..).unwrap_or(s)
}

pub(crate) fn make_tempdir(prefix: &str) -> Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .map_err(io_err(format!("creating a temp dir {prefix}*")))
}

pub(crate) fn maybe_keep(dir: &mut Option<tempfile::TempDir>) {
    if std::env::var_os(KEEP_ENV).is_some_and(|v| !v.is_empty()) {
        if let Some(d) = dir.take() {
            let kept = d.keep();
            tracing::info!(dir = %kept.display(), "kept lab temp dir");
        }
    }
}
