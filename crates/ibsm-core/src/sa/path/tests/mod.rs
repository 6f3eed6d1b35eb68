//! Tests of PathRecord queries: `fabric` against fabrics built by hand (every pair
//! compared with walks of the LFTs; selectors, partitions, LMC), `sim` against a
//! master's sweep of the embedded simulator.

mod fabric;
mod sim;
