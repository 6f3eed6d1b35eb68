//! ibsmd: the ibsm subnet manager daemon.
//!
//! An instance ([`instance::Instance`]) is one SM on one port: a dedicated OS thread
//! that owns the port's [`ibsm_transport::MadDevice`] (a umad port, or a client of the
//! embedded simulator) and drives the sans-IO `ibsm_core::node::Node`, where all SM
//! policy lives (the election, its own sweeps, the configurator, start-up, the watch of
//! its link). It sweeps the fabric, takes part in the
//! SMInfo election (with other ibsmd instances and with OpenSM) and, as MASTER only,
//! keeps the ports it manages addressed and Active. Every state transition is logged at
//! INFO as exactly one line `sm state: STANDBY -> DISCOVERING (reason)`.
//!
//! The thread is not a tokio task on purpose: umad2sim's fake descriptors cannot be
//! watched by epoll, and the simulator blocks on a condvar, so both are driven with
//! `recv(timeout)`. The async world (the gRPC server in [`server`]) talks to it through
//! a command channel, a shared status snapshot and a broadcast of events (`Watch`).
//! The web console ([`web`], `--web ADDR`) is a client of the same gRPC handlers,
//! called in-process under the same credentials, so it shows what the API answers.
//!
//! # Polling defaults and their trade-off
//!
//! A standby polls the master with SubnGet(SMInfo) every `--poll-interval-ms` (default
//! 25); after a poll unanswered for that long it re-polls every `--repoll-interval-ms`
//! (default 20) and declares the master dead after `--poll-retries` (default 3)
//! unanswered polls in a row, an answer to any of them, however late, counting. A dead
//! master is so declared lost 65-90 ms after a SIGKILL, and the DISCOVERING round adds
//! no query of its own to it (only the fresh sweep, which the prepared takeover is
//! already running), so another SM is MASTER about 0.2 s after the crash on a k=16 fat
//! tree on ibsim (OpenSM's defaults, 10 s x 4, take about a minute). Why that does not
//! fail over falsely under load: SMInfo is never queued behind the master's sweep SMPs
//! or its routing worker, and not behind its SM thread's steps either: the SM thread
//! answers a SubnGet(SMInfo) the moment it reads it, from the node's state after its
//! last step, and while it is in one step for 5 ms or more a stand-in thread reads the
//! port and answers the polls (`instance/driver/poll_answer.rs`, `sminfo_answer_thread`;
//! `ibsm_sminfo_fast_answers_total`). The answer's ActCount moves only with the SM
//! thread's work, so a hung SM thread still looks hung. Steps over 30 ms are still
//! logged at debug (`instance thread busy`, with the step): they delay the SM's own
//! work, no longer its answers. Before, those steps (the sweep's end, the fabric view
//! for the API, some timer steps: 50-126 ms on a 2-core host with every core busy) made
//! a standby declare a live master lost now and then (`bench/detection.sh`; see the
//! `ibsm_core::election` module doc). The price is 40 SMPs/s per standby on the master. The rule
//! is in the `ibsm_core::election` module doc ("Detection"); `bench/detection.sh`
//! measures its cost, its detection time and its false failovers under load beside
//! OpenSM's. If SMP latency on a fabric can exceed ~60 ms (congested VL15, a host that
//! can stall the SM's MAD thread), raise both intervals. A master whose MAD responder
//! lives but whose sweeper is hung is caught by the election's ActCount rule: three
//! light-sweep intervals (6 s at the default 2 s) without a new SMP it initiated; a
//! healthy master's light sweeps, and its SMInfo queries of the other SMs every second
//! while its routing worker is busy, keep its ActCount moving.
//!
//! # Sweeps and what a MASTER configures
//!
//! Not MASTER: heavy sweep (directed-route discovery + PortInfo probe) at start, every
//! 10 s, on a trap and on request; light sweep (the probe alone: LIDs, states, which
//! ports advertise IsSM, SMInfo of the SM ports) every 2 s. They only feed the election;
//! standby and discovering SMs configure nothing.
//!
//! MASTER: the instance runs `ibsm_core::subnet::SubnetManager` (LIDs, min-hop or
//! up/down LFTs, PortInfo, P_Keys, SLtoVL/VLArb, Init -> Armed -> Active,
//! ClientReregister), logs `subnet up in X s: ...` after its first heavy sweep (at
//! start-up it configures from the discovery it made while DISCOVERING, so the fabric
//! is walked once), light sweeps every `--sweep-interval-s` (and on `ibsmctl sweep`),
//! a heavy sweep every `--heavy-sweep-interval-s` (default 60, 0: only on change),
//! reacts to traps, and stops when the election leaves MASTER. Options: `--lmc`, `--routing`, `--root-guid`, `--partition`,
//! `--smp-window` ([`subnet_opts`]). How the configurator, the election and the
//! runtime's own agent share the device (disjoint TID ranges) is in [`instance`].
//!
//! # Embedded fabric, and what is not here
//!
//! [`embedded`] attaches an instance to a port of the embedded simulator; it is what
//! `--fabric sim:NETFILE|gen:...` ([`open_fabric`]) and the tests use.
//!
//! This crate serves a real fabric and nothing else: the demo (`ibsmd demo`, three
//! instances on the embedded fabric or on ibsim), its drills (`ibsm.demo.v1.Demo`)
//! and its SMInfo judge live in crate `ibsm-demo`, which uses only this crate's public
//! API (it adds its service through [`server::ServeOptions::extra_services`]); the
//! `ibsmd` binary is package `ibsmd-bin`. What the MASTER configured (topology, LIDs, routes, partitions) is served by
//! `ibsm.v1.Fabric` ([`fabric_service`]) from the view it publishes after each heavy
//! sweep ([`fabric_view`]); the Subnet Administrator's groups, services and
//! subscriptions from the SA's tables ([`fabric_sa`]), and its part of `GetStatus`
//! (size, the replica's freshness) from [`sa_status`].
//!
//! # Replication
//!
//! With `--node-id N --data-dir DIR [--peer ID=ADDR ...]` the daemon keeps the fabric
//! state in a Raft cluster ([`replication`], crate `ibsm-replica`) served on its gRPC
//! port: a new MASTER takes its LIDs from the replica, reads every switch's LFT back
//! and keeps it when it matches the replicated digest (no LID or route moves on a
//! failover), claims a new epoch, and publishes what it programs after each heavy
//! sweep. Without quorum it keeps running the fabric from its local copy and reports
//! `degraded`; it reconciles when quorum returns. Members are added and removed at run
//! time through `ibsm.v1.Cluster` ([`cluster_service`]); a planned handover waits
//! until the target's replica has caught up. `ibsmd demo` runs its three instances as
//! one such cluster. `--fault-injection` (a test facility) adds
//! `ibsm.v1.FaultInjection` ([`fault_injection`]) to cut this member's Raft traffic.
//!
//! # Security, configuration, metrics
//!
//! [`auth`]: bearer token and/or mutual TLS for the gRPC API; the daemon refuses to
//! start without either unless `--insecure-plaintext` (the demo defaults to plaintext
//! on loopback, with a warning). [`config`]: `--config FILE` (TOML, every option; the
//! command line wins; a bad file exits 2 before anything starts; `log_format` selects
//! text or JSON log lines). [`metrics`]: `--metrics ADDR` serves `/metrics` in the
//! OpenMetrics text format (`prometheus-client`, an axum route on hyper): SM state, sweeps and
//! their phases (the subnet configurator adds them through
//! [`metrics::Metrics::set_sweep_phase`], the instance's `InstanceConfig::metrics`),
//! SMPs sent and received, traps by port, SA requests by method and attribute, and the
//! replication figures (epoch, degraded, Raft role, term, indexes, each follower's
//! lag on the leader). `deploy/` has the systemd unit, container, Kubernetes
//! manifests and a Grafana dashboard.

//!
//! # Errors
//!
//! The library returns typed errors: [`DaemonError`] for opening a fabric, starting an
//! instance or serving an endpoint, [`CommandError`] for commands, and the module
//! errors of [`auth`], [`config`] and [`replication`]; only the binary (`ibsmd-bin`)
//! and the demo turn them into `anyhow`.

pub mod auth;
pub mod cluster_service;
pub mod config;
pub mod embedded;
pub mod error;
pub mod fabric_sa;
pub mod fabric_service;
pub mod fabric_view;
pub mod fault_injection;
mod http_serve;
pub mod instance;
mod listener_limits;
pub mod metrics;
pub mod partitions_file;
pub mod replication;
pub mod sa_status;
pub mod server;
pub mod slot;
mod status_pb;
pub mod step_down;
pub mod subnet_opts;
pub mod web;
pub mod wire;

/// Exit code of a process that a panic ended (see [`install_panic_exit`]).
pub const PANIC_EXIT_CODE: i32 = 101;

/// A panic on any thread ends the process (exit [`PANIC_EXIT_CODE`]) after logging
/// it, so systemd or Kubernetes restarts a whole SM instead of leaving a process whose
/// SM thread or routing worker died while the rest (health included) runs on.
pub fn install_panic_exit() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default(info);
        tracing::error!(panic = %info, "a thread panicked: exiting so the supervisor restarts ibsmd");
        std::process::exit(PANIC_EXIT_CODE);
    }));
}

pub use error::DaemonError;
pub use instance::{Command, CommandError, EventRecord, Instance, InstanceConfig, Snapshot};

use ibsm_transport::{FabricSpec, MadDevice, SharedSim, UmadDevice};

/// An SM's device, and what must live as long as the SM (the open `issmN` that sets
/// IsSM, or the simulator client guard): [`open_fabric`]'s answer.
pub type OpenedFabric = (Box<dyn MadDevice + Send>, Box<dyn Send>);

/// Open the device an `ibsmd --fabric` names, plus what must live as long as the SM.
pub fn open_fabric(spec: &FabricSpec) -> Result<OpenedFabric, DaemonError> {
    match spec {
        FabricSpec::Umad(port) => {
            // With the SA's GSI agent (class 0x03 on QP1): the master answers SA queries.
            let dev = UmadDevice::open_with_sa(port, std::time::Duration::from_millis(200))?;
            let issm = ibsm_umad::open_issm(dev.port().ca_index())
                .map_err(|e| DaemonError::Issm(e.to_string()))?;
            Ok((Box::new(dev), Box::new(issm)))
        }
        _ => {
            let fabric = DaemonError::Fabric;
            let topology = spec
                .topology()
                .map_err(|e| fabric(e.to_string()))?
                .ok_or_else(|| fabric("not an embedded fabric".into()))?;
            let (node, port, _) = embedded::pick_ca_ports(&topology, 1)
                .into_iter()
                .next()
                .ok_or_else(|| fabric("the fabric has no CA port with a cable".into()))?;
            let sim = SharedSim::new(&topology);
            let dev = sim.attach(node, port)?;
            dev.register_gsi_class(ibsm_mad::sa::SA_CLASS.0)?;
            let client = dev.client();
            sim.with_sim(|s| s.set_is_sm(client, true))?
                .map_err(|e| DaemonError::SetIsSm(e.to_string()))?;
            Ok((Box::new(dev), Box::new(sim)))
        }
    }
}
