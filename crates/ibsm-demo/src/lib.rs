//! ibsm-demo: `ibsmd demo`, the dev mode of the `ibsmd` binary, and the lab code that
//! judges drills from the fabric.
//!
//! Why a crate of its own: the daemon that serves a real fabric (crate `ibsmd`)
//! carries no demo, no drill service and no code that starts ibsim or reads the
//! fabric with infiniband-diags; all of that is here, and it uses only ibsmd's public
//! library API, so the demo exercises the same surface an embedding tool would.
//!
//! - [`demo`]: three SM instances in one process on one embedded fabric, one Raft
//!   cluster, each with its own gRPC endpoint; kill, restart, cable pulls and Raft
//!   isolation as drills.
//! - [`ibsim`]: the same drills with three `ibsmd --fabric umad` processes on ibsim,
//!   through the real umad path, plus the soak's cable faults, `ReadFabric`
//!   (infiniband-diags under umad2sim, MFTs on request) and `DescribeJudge` (where the
//!   soak's own SA client attaches).
//! - [`poller`]: the independent SMInfo observer on a spare CA port, in-process on the
//!   embedded fabric or as the `ibsmd sminfo-poll` process on ibsim: the judge of
//!   "no master" and "two masters" as another node of the subnet sees them.
//! - [`judge`]: `ibsmd judge`, the same poller on a host of a deployed fabric, serving
//!   the read-only part of the Demo service (and LIDs with ibnetdiscover) to a drill
//!   against a deployed cluster.
//! - [`service`]: `ibsm.demo.v1.Demo`, the gRPC face of the drills that `ibsmctl
//!   drill` drives, added to each endpoint through
//!   `ibsmd::server::ServeOptions::extra_services`.

pub mod demo;
pub mod ibsim;
pub mod judge;
pub mod poller;
pub mod service;

pub use demo::{Demo, DemoOptions};
