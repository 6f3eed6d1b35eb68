//! Tests of PathRecord queries: `fabric` against fabrics built by hand (every pair
//! compared with walks of the LFTs; selectors, partitions, LMC), `sim` against a
//! master's sweep of the embedded simulator, `multipath` MultiPathRecord queries
//! (GetMulti) against the PathRecords of the same pairs.

mod fabric;
mod multipath;
mod sim;
