//! Where the gRPC services and the replication watcher find an SM instance: a slot
//! that a demo restart refills. Its own module, above `instance` and below `server`,
//! `fabric_service` and their callers, so none of them import each other for it.

use std::sync::{Arc, RwLock};

use crate::instance::Instance;

/// Where a server finds its instance; `None` while it is stopped (demo kill). Shared by the gRPC services and the replication watcher, so it
/// lives here, below both..
pub type InstanceSlot = Arc<RwLock<Option<Arc<Instance>>>>;

/// What [`crate::replication::Replication::follow`] asks of the instance in `slot`:
/// its port GUID and state while it runs, `None` otherwise.
pub fn followed_sm(
    slot: InstanceSlot,
) -> impl Fn() -> Option<(u64, ibsm_core::election::SmState)> + Send + 'static {
    move || {
        let inst = match slot.read() {
            Ok(s) => s.clone(),
            Err(p) => p.into_inner().clone(),
        }?;
        if !inst.is_running() {
            return None;
        }
        let st = inst.status();
        Some((st.guid, st.state))
    }
}
/// A slot holding `inst`.
pub fn slot(inst: Arc<Instance>) -> InstanceSlot {
    Arc::new(RwLock::new(Some(inst)))
}
