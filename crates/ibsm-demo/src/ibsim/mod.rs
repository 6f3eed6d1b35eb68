//! `ibsmd demo --fabric ibsim:NETFILE`: the drill demo on ibsim, through the real
//! umad path, behind the same `ibsm.demo.v1.Demo` service as the embedded demo
//! ([`crate::demo`]), so `ibsmctl drill` measures both with one code path.
//!
//! What runs: ibsim on NETFILE (`ibsm_labkit::Ibsim`: its own `IBSIM_SOCKNAME`, its
//! console on a FIFO), three `ibsmd --fabric umad --node-id N --peer ...` processes
//! under umad2sim on three HCAs (priorities [`crate::demo::DEMO_PRIORITIES`], one
//! Raft cluster, data dirs `sm1/ sm2/ sm3/`), and the hidden `ibsmd sminfo-poll`
//! process on a fourth HCA, which reads every SM port's SMInfo by directed route
//! every 10 ms ([`crate::poller`] over a `UmadDevice`) and prints one JSON line
//! per change; this process reads them back and serves them as `PollSmInfo`. The judge
//! of a drill on ibsim is therefore a process on the fabric, as another node of the
//! subnet would see it, not a simulator's internal state.
//!
//! The drills map to what a fabric operator would do: `KillInstance` SIGKILLs the
//! member's process and then drops its ibsim client (ibsim never notices a dead
//! client; a kernel closes a dead process's umad/issm files, see
//! `ibsm_labkit::Ibsim::reap_dead_clients`), `RestartInstance` runs the same command
//! line again (it rejoins its Raft cluster from its data dir), `SetLinkState` is the
//! console's `Unlink`/`Link` of the member's HCA port. `SetRaftIsolation` is passed
//! on to the member process: the members run with `--fault-injection` (a test
//! facility, off by default), so their own `ibsm.v1.FaultInjection/SetRaftIsolation`
//! flips their replica's fault switch (`ibsmd::fault_injection`). A TCP proxy
//! in front of each member was the alternative without a flag, but Raft dials the
//! addresses in the replicated membership, one per member, so a proxy cannot tell
//! which peer a connection comes from and could only cut one direction.
//!
//! For the soak (`ibsmctl drill soak`), three more calls, on this demo only:
//! `ListCables` (every cable of the net file, with the member whose CA port it is and
//! whether the poller's directed routes cross it: a fault there would blind the
//! judge), `SetCableFault` (`Unlink`/`Link` any cable, and its SMP loss with ibsim's
//! `Error "node"[port] <rate%>`, rate 0 clearing it), and `ReadFabric`: `ibnetdiscover
//! -p` and `ibroute LID` per switch run under umad2sim on the poller's HCA (ibsim
//! serves several clients on one node), parsed into LIDs and unicast LFT entries, so
//! the soak compares what the switches hold, not what an SM says (with `multicast`,
//! `ibroute -M LID` too). `DescribeJudge` names the poller's HCA, ibsim's socket
//! name and umad2sim, so the soak can run its own SA client there (`ibsmctl sa`).
//!
//! The Demo service has its own endpoint (the members are other processes, which
//! serve no Demo service); it is printed first, so `ibsmctl drill
//! --start-demo` (which takes the first endpoint) and `--endpoint` both aim at it.
//!
//! Cleanup: every process is started from one dedicated supervisor thread with
//! `PR_SET_PDEATHSIG` ([`ibsm_labkit::die_with_parent`]), so even a SIGKILLed demo
//! leaves no ibsim or ibsmd behind; a normal stop (Ctrl-C, SIGTERM, drop) kills them
//! itself. Console commands run on that thread too, one at a time.

mod launch;
mod members;
mod options;
mod plan;
mod read_fabric;
mod sminfo_poll;
mod supervisor;
#[cfg(test)]
mod tests;

pub use launch::{IbsimDemo, IbsimMemberInfo};
pub use members::IbsimShared;
pub use options::{IbsimDemoOptions, IBSIM_PREFIX};
pub(crate) use read_fabric::read_fabric_by;
pub use read_fabric::{parse_ibnetdiscover_links, parse_ibnetdiscover_ports, parse_ibroute};
pub use sminfo_poll::{format_target, parse_target, run_sminfo_poll};
