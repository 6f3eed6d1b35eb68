//! The first TID of a client.

/// A TID base that differs between processes and runs, so that an SA that still holds
/// a transfer of an earlier run does not take a new request for a retry of it.
pub(crate) fn seed_tid() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    (std::process::id().rotate_left(20) ^ nanos) | 1
}
