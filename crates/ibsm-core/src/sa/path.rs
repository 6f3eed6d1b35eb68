//! PathRecord queries (IBA 15.2.5.16), from the programmed forwarding tables.

use ibsm_mad::sa::{ComponentMask, PathRecord, SaStatus};

use super::context::{Requester, SaContext};

/// PathRecords for a query template under `mask`.
pub fn path_records(
    ctx: &SaContext<'_>,
    req: &Requester,
    template: &PathRecord,
    mask: ComponentMask,
    packet_life_time: u8,
) -> Result<Vec<PathRecord>, SaStatus> {
    let _ = (ctx, req, template, mask, packet_life_time);
    Err(SaStatus::METHOD_ATTR_NOT_SUPPORTED)
}
