//! Addressing: the route for a new request to the sender of one that arrived (a LID
//! stays, a directed route is the return path reversed), and which known SM port a
//! request came from, told by its SLID or its directed route's return path, never by
//! the GUID in its payload.

use crate::election::types::{DrRoute, SmPort, SmRoute};

use super::state::Election;

impl Election {
    /// The known SM port a request that arrived by `from` came from, if we can tell
    /// (see the module doc, "Trusted SMs"): a LID-routed request by its SLID, which the
    /// sending HCA sets from its port's LID, among the LIDs of the SM ports our sweep
    /// found; a directed-route request by its return path, which the switches on the
    /// way record (the sender writes only the initial path), reversed and compared with
    /// the route our sweep recorded to each SM port. The SMInfo payload's GUID is never
    /// used: any sender can write any GUID there.
    pub fn requester_port(&self, from: &SmRoute) -> Option<u64> {
        requester_port_among(self.known.values(), from)
    }
}

/// [`Election::requester_port`] among the SM ports `known` (in GUID order, as the
/// election keeps them): shared with the SMInfo answers built off the election
/// (`crate::election::SmInfoResponder`), so both tell a requester the same way.
pub(crate) fn requester_port_among<'a>(
    known: impl Iterator<Item = &'a SmPort> + Clone,
    from: &SmRoute,
) -> Option<u64> {
    match from {
        SmRoute::Lid(0) => None,
        SmRoute::Lid(lid) => known.clone().find(|p| p.lid == Some(*lid)).map(|p| p.guid),
        SmRoute::Directed(dr) => {
            if dr.dr_slid != 0xffff || dr.dr_dlid != 0xffff || dr.return_path.is_empty() {
                // LID-routed parts, or no recorded return path: the only hops we
                // would have are the ones the sender wrote itself.
                return None;
            }
            let SmRoute::Directed(back) = route_for_new_request(from) else {
                return None;
            };
            let hops = dr_hops(&back);
            if hops.is_empty() {
                return None;
            }
            known
                .clone()
                .find(|p| matches!(&p.route, SmRoute::Directed(d) if dr_hops(d) == hops))
                .map(|p| p.guid)
        }
    }
}

/// The hops of a directed route (`initial_path[1..=hop_cnt]`).
fn dr_hops(dr: &DrRoute) -> &[u8] {
    dr.initial_path
        .get(1..=usize::from(dr.hop_cnt))
        .unwrap_or(&[])
}

/// The route for a new request to the sender of a request that arrived by `from`:
/// a LID stays; a directed route is the arrival's return path, reversed.
pub fn route_for_new_request(from: &SmRoute) -> SmRoute {
    match from {
        SmRoute::Lid(l) => SmRoute::Lid(*l),
        SmRoute::Directed(dr) => {
            if dr.return_path.is_empty() {
                return SmRoute::Directed(DrRoute::new(
                    dr.initial_path
                        .get(1..=usize::from(dr.hop_cnt))
                        .unwrap_or(&[]),
                ));
            }
            let hops: Vec<u8> = dr
                .return_path
                .get(1..=usize::from(dr.hop_cnt))
                .unwrap_or(&[])
                .iter()
                .rev()
                .copied()
                .collect();
            SmRoute::Directed(DrRoute::new(&hops))
        }
    }
}
