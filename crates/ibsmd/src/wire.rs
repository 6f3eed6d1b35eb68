//! The election's SMP conversion lives in [`ibsm_core::election::wire`], shared with the
//! fabric simulation in `ibsm-testkit` (one conversion, tested once). This module keeps
//! the daemon's call sites unchanged: it re-exports the decoders and gives the encoders
//! the `Option` shape the runtime uses (the reason is logged where it is dropped).

use ibsm_core::election::{SmInfoMsg, SmRoute};
use ibsm_mad::Smp;

pub use ibsm_core::election::wire::{arrival_route, decode, decode_for_election, WireError};

/// [`ibsm_core::election::wire::encode_request`]; `None` (logged) when it cannot be encoded.
pub fn encode_request(dest: &SmRoute, msg: &SmInfoMsg) -> Option<(Smp, Option<u16>)> {
    ibsm_core::election::wire::encode_request(dest, msg)
        .map_err(|err| tracing::warn!(%err, "cannot encode the election's request"))
        .ok()
}

/// [`ibsm_core::election::wire::encode_response`]; `None` (logged) when it cannot be encoded.
pub fn encode_response(request: &Smp, msg: &SmInfoMsg) -> Option<Smp> {
    ibsm_core::election::wire::encode_response(request, msg)
        .map_err(|err| tracing::warn!(%err, "cannot encode the election's response"))
        .ok()
}
