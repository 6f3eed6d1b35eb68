//! What the console's files share: the instances it shows ([`WebSource`]) and the
//! bounds of its live streams. A leaf, so `api` and `record` use it without using the
//! module that wires them together.

use std::sync::Arc;
use std::time::Duration;

use crate::replication::Replication;
use crate::slot::InstanceSlot;

/// Most live streams at once.
pub const MAX_STREAMS: usize = 32;
/// Shortest gap between two messages of one stream.
pub const STREAM_MIN_GAP: Duration = Duration::from_millis(250);
/// A stream ends after this; the page opens a new one.
pub const STREAM_LIFETIME: Duration = Duration::from_secs(300);

/// One SM instance the console shows: where its gRPC services find it.
#[derive(Clone)]
pub struct WebSource {
    /// Its name (`ibsmd`, or the demo's `sm1`...).
    pub name: String,
    /// The slot its gRPC services read (a demo restart refills it).
    pub slot: InstanceSlot,
    /// Its replica, for the epoch and Raft fields.
    pub repl: Option<Arc<Replication>>,
}

impl std::fmt::Debug for WebSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebSource")
            .field("name", &self.name)
            .finish()
    }
}
