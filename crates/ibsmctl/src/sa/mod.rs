//! `ibsmctl sa ...`: a Subnet Administration client of its own on a umad port (also
//! under ibsim's umad2sim), built on `ibsm-sa-client`: record queries with whole
//! tables reassembled from their RMPP segments (the client ACKs each window, which
//! `saquery` under umad2sim cannot), multicast joins and leaves, service
//! registration, InformInfo subscriptions that print the Reports, and a load mode
//! (`bench`). No daemon involved: it talks to whatever SM is master (OpenSM too).
//!
//! Output: one line per record (`field=value`, nested fields dotted), or with
//! `--json` one object `{"type", "count", "records": [...]}` whose records carry every
//! field of the `ibsm_mad::sa` record (see `debug_json`). Exit codes: 0 ok, 2 usage
//! (a bad filter, an unparsable GID), 3 the SA cannot be reached (no master, no
//! answer), 1 anything else, an SA refusal included (its IBA status is printed).

mod actions;
mod bench;
mod common;
mod debug_json;
mod end_ports;
mod query;
mod repair;

use std::time::Duration;

use clap::{Args, Subcommand};
use ibsm_sa_client::{ClientConfig, SaClient};
use ibsm_transport::FabricSpec;

use crate::args::UsageError;
use crate::fabric::parse_lid;

use common::{Out, SaFailure};

/// `ibsmctl sa` options.
#[derive(Args, Debug)]
pub struct SaArgs {
    /// The local port: umad[:CA[:PORT]] (umad alone is umad0).
    #[arg(long, default_value = "umad")]
    pub fabric: String,
    /// The SA's LID [default: the local port's MasterSMLID].
    #[arg(long, value_parser = parse_lid)]
    pub sa_lid: Option<u16>,
    /// SM_Key (SA_Key) to send, 0x-hex or decimal: a trusted requester sees every
    /// port's paths and every group member (OpenSM's and ibsmd's default key is 1).
    #[arg(long, value_parser = crate::args::parse_guid)]
    pub sm_key: Option<u64>,
    /// Wait for an answer (or the next segment) this long before trying again.
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    pub timeout_ms: u64,
    /// Tries after the first.
    #[arg(long, default_value_t = 3)]
    pub retries: u32,
    /// RMPP receive window: segments the SA may send per ACK.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..))]
    pub rmpp_window: u32,
    /// Bytes of each MAD the device delivers [default: 232 under ibsim's umad2sim,
    /// seen in LD_PRELOAD, else 256]; records over the lost bytes are asked for again.
    #[arg(long, value_parser = clap::value_parser!(u16).range(57..=256))]
    pub mad_bytes: Option<u16>,
    /// Use SubnAdmGet (exactly one record) instead of SubnAdmGetTable.
    #[arg(long)]
    pub get: bool,
    /// Hold issmN open while running: under ibsim, requests to QP1 (the SA's Reports)
    /// reach only a port's IsSM client, so `inform subscribe` needs it there.
    #[arg(long)]
    pub issm: bool,
    #[command(subcommand)]
    pub cmd: SaCmd,
}

/// What to ask the SA.
#[derive(Subcommand, Debug)]
pub enum SaCmd {
    #[command(flatten)]
    Query(query::QueryCmd),
    /// Join a multicast group (create one with an SA-allocated MGID with --create).
    Join(actions::JoinArgs),
    /// Leave a multicast group (the group goes with its last full member).
    Leave(actions::LeaveArgs),
    /// Register or delete a ServiceRecord.
    Service {
        #[command(subcommand)]
        action: actions::ServiceCmd,
    },
    /// Subscribe to traps and print the Reports.
    Inform {
        #[command(subcommand)]
        action: actions::InformCmd,
    },
    /// Load: many PathRecord queries or joins with a window in flight; prints rates.
    Bench {
        #[command(subcommand)]
        action: bench::BenchCmd,
    },
}

/// umad2sim (preloaded) delivers 232 bytes of each MAD; a kernel all 256.
fn default_mad_bytes() -> usize {
    match std::env::var("LD_PRELOAD") {
        Ok(p) if p.contains("umad2sim") => ibsm_sa_client::UMAD2SIM_MAD_BYTES,
        _ => ibsm_mad::MAD_SIZE,
    }
}

/// Run `ibsmctl sa`.
pub fn run(a: SaArgs, json: bool) -> Result<(), SaFailure> {
    let spec = match FabricSpec::parse(&a.fabric) {
        Ok(FabricSpec::Umad(spec)) => spec,
        Ok(_) => {
            return Err(UsageError(format!(
                "--fabric {}: `ibsmctl sa` needs a umad port (umad[:CA[:PORT]]): the embedded simulator has no SM to ask",
                a.fabric
            ))
            .into())
        }
        Err(e) => return Err(UsageError(e.to_string()).into()),
    };
    let timeout = Duration::from_millis(a.timeout_ms.max(1));
    let dev = ibsm_sa_client::open_umad(&spec, timeout).map_err(|e| SaFailure {
        message: format!("cannot open {}: {e}", a.fabric),
        code: 3,
    })?;
    let _issm = if a.issm {
        Some(
            ibsm_umad::open_issm(dev.port().ca_index()).map_err(|e| SaFailure {
                message: format!("cannot open issm{}: {e}", dev.port().ca_index()),
                code: 3,
            })?,
        )
    } else {
        None
    };
    let cfg = ClientConfig {
        timeout,
        retries: a.retries,
        rmpp_window: a.rmpp_window,
        sm_key: a.sm_key.unwrap_or(0),
        mad_bytes: a.mad_bytes.map_or_else(default_mad_bytes, usize::from),
        ..ClientConfig::default()
    };
    let mut client = SaClient::open_at(dev, a.sa_lid, cfg)?;
    let out = Out { json };
    match a.cmd {
        SaCmd::Join(j) => actions::join(&mut client, &out, &j),
        SaCmd::Leave(l) => actions::leave(&mut client, &out, &l),
        SaCmd::Service { action } => actions::service(&mut client, &out, &action),
        SaCmd::Inform { action } => actions::inform(&mut client, &out, &action),
        SaCmd::Bench { action } => bench::run(&mut client, &out, &action),
        SaCmd::Query(q) => query::run(&mut client, &out, &q, a.get),
    }
}
