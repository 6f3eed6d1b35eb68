//! `ibsmd demo`: three SM instances on one embedded fabric, each with its own gRPC
//! endpoint. They share one process because the embedded simulator is in-process
//! (each instance still has its own thread, device, agent and election, and talks to
//! the others only through SMPs on the simulated fabric).
//!
//! Drills: [`Demo::kill`] stops an instance abruptly (its thread stops answering
//! MADs, its simulator client is detached so the port stops advertising IsSM, like a
//! SIGKILLed OpenSM whose issm closes) while its gRPC endpoint stays up and answers
//! `UNAVAILABLE`; [`Demo::restart`] starts it again on the same port with the same
//! priority, endpoint and metrics. The `ibsm.demo.v1.Demo` gRPC service exposes both, on
//! every member's endpoint, so `ibsmctl drill kill-master` works against the demo.
//! [`DemoHandle::set_raft_isolation`] (`ibsm.demo.v1.Demo/SetRaftIsolation`) flips a member's
//! replica fault switch, so `ibsmctl drill raft-partition` can cut a running master's
//! Raft traffic from outside the process while its SM keeps running.
//!
//! The same drills on ibsim, with the members as separate `ibsmd --fabric umad`
//! processes, are in [`crate::ibsim`] (`ibsmd demo --fabric ibsim:NETFILE`);
//! [`DemoHandle`] fronts either, so the Demo service and `ibsmctl drill` are shared.
//!
//! Security: the demo binds loopback only and defaults to plaintext with a warning
//! (it is a playground, and `ibsmctl status` should work at once); give it a token
//! ([`DemoOptions::security`], `ibsmd demo --auth-token-file`) to rehearse with one.

mod handle;
mod launch;
mod shared;
mod types;

pub use handle::DemoHandle;
// The embedded-fabric helpers live in `ibsmd::embedded` (the daemon's `--fabric sim:`
// needs them); re-exported for the demo's callers.
pub use ibsmd::embedded::{pick_ca_ports, spawn_on_sim, spawn_on_sim_client};
pub use launch::{Demo, DemoOptions};
pub use shared::DemoShared;
pub use types::{DemoError, MemberInfo, Selector, DEMO_PRIORITIES};
