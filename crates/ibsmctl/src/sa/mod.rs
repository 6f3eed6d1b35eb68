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
mod debug_json;
mod query;
mod repair;

use std::net::Ipv6Addr;
use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};
use ibsm_mad::sa::{Gid, JoinState};
use ibsm_sa_client::{ClientConfig, SaClient, SaClientError};
use ibsm_transport::{FabricSpec, UmadDevice};

use crate::args::UsageError;
use crate::fabric::parse_lid;

pub(crate) use debug_json::{to_json, to_text};

/// The client every subcommand uses.
pub(crate) type Client = SaClient<UmadDevice>;

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
    /// NodeRecords (filters: LID, node or port GUID).
    Nodes(query::NodeFilter),
    /// PortInfoRecords (filters: LID, port).
    #[command(name = "portinfo")]
    PortInfo(query::LidPortFilter),
    /// LinkRecords (filters: from/to LID and port).
    Links(query::LinkFilter),
    /// SMInfoRecords.
    #[command(name = "sminfo")]
    SmInfo(query::LidFilter),
    /// SwitchInfoRecords.
    #[command(name = "switchinfo")]
    SwitchInfo(query::LidFilter),
    /// GUIDInfoRecords.
    #[command(name = "guidinfo")]
    GuidInfo(query::LidBlockFilter),
    /// P_KeyTableRecords.
    Pkeys(query::PkeyFilter),
    /// SLtoVLMappingTableRecords.
    Sl2vl(query::Sl2VlFilter),
    /// VLArbitrationTableRecords.
    Vlarb(query::VlArbFilter),
    /// LinearForwardingTableRecords.
    Lft(query::LidBlockFilter),
    /// MulticastForwardingTableRecords.
    Mft(query::MftFilter),
    /// The SA's ClassPortInfo.
    ClassPortInfo,
    /// PathRecords: from this port (or --slid) to every port (or --dlid); --all: every
    /// end port to every end port (one GetTable per source, pipelined).
    Paths(query::PathFilter),
    /// MCMemberRecords (groups; with --sm-key every member).
    Members(query::MemberFilter),
    /// ServiceRecords.
    Services(query::ServiceFilter),
    /// InformInfoRecords (subscriptions; with --sm-key everyone's).
    Informs,
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

/// A membership type on the command line.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Membership {
    /// FullMember.
    Full,
    /// NonMember.
    Non,
    /// SendOnlyNonMember.
    SendOnly,
    /// SendOnlyFullMember.
    SendOnlyFull,
}

impl Membership {
    fn bits(list: &[Membership]) -> JoinState {
        list.iter().fold(JoinState(0), |s, m| {
            s.union(match m {
                Membership::Full => JoinState::FULL_MEMBER,
                Membership::Non => JoinState::NON_MEMBER,
                Membership::SendOnly => JoinState::SEND_ONLY_NON_MEMBER,
                Membership::SendOnlyFull => JoinState::SEND_ONLY_FULL_MEMBER,
            })
        })
    }
}

/// A GID in IPv6 notation (`ff12:601b:ffff::1`, `fe80::2:c903:0:1`).
pub fn parse_gid(text: &str) -> Result<Gid, String> {
    text.trim()
        .parse::<Ipv6Addr>()
        .map(|a| a.octets())
        .map_err(|_| {
            format!("{text:?} is not a GID (IPv6 notation, e.g. ff12:401b:ffff::ffff:ffff)")
        })
}

/// A number, 0x-hex or decimal, that fits `T`.
pub fn parse_num<T: TryFrom<u64>>(text: &str) -> Result<T, String> {
    let t = text.trim();
    let v = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => t.parse::<u64>(),
    }
    .map_err(|_| format!("{text:?} is not a number (decimal or 0x-hex)"))?;
    T::try_from(v).map_err(|_| format!("{v} is out of range here"))
}

/// An error of `ibsmctl sa` with its exit code.
#[derive(Debug)]
pub struct SaFailure {
    pub message: String,
    pub code: u8,
}

impl From<SaClientError> for SaFailure {
    fn from(e: SaClientError) -> Self {
        let code = match e {
            SaClientError::Timeout { .. }
            | SaClientError::NoMaster
            | SaClientError::LocalPort(_)
            | SaClientError::Transport(_) => 3,
            _ => 1,
        };
        SaFailure {
            message: e.to_string(),
            code,
        }
    }
}

impl From<UsageError> for SaFailure {
    fn from(e: UsageError) -> Self {
        SaFailure {
            message: e.0,
            code: 2,
        }
    }
}

impl From<std::io::Error> for SaFailure {
    fn from(e: std::io::Error) -> Self {
        SaFailure {
            message: e.to_string(),
            code: 1,
        }
    }
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
        cmd => query::run(&mut client, &out, &cmd, a.get),
    }
}

/// How results are printed.
pub(crate) struct Out {
    pub json: bool,
}

impl Out {
    /// Records of one type: a line each, or one JSON object. `damaged`: indices of
    /// records that arrived with bytes missing and could not be asked for again.
    pub fn records<R: std::fmt::Debug>(&self, kind: &str, recs: &[R], damaged: &[usize]) {
        if !damaged.is_empty() {
            eprintln!(
                "ibsmctl: warning: {} {kind}s arrived with bytes missing (umad2sim) and could not be asked for again: indices {damaged:?}",
                damaged.len()
            );
        }
        if self.json {
            let v = serde_json::json!({
                "type": kind,
                "count": recs.len(),
                "damaged": damaged,
                "records": recs.iter().map(to_json).collect::<Vec<_>>(),
            });
            println!("{v}");
        } else {
            for r in recs {
                println!("{kind} {}", to_text(&to_json(r)));
            }
            println!(
                "{} {kind}{}",
                recs.len(),
                if recs.len() == 1 { "" } else { "s" }
            );
        }
    }

    /// One record that an action returned (a join, a registration).
    pub fn record<R: std::fmt::Debug>(&self, what: &str, rec: &R) {
        let v = to_json(rec);
        if self.json {
            println!("{}", serde_json::json!({ "type": what, "record": v }));
        } else {
            println!("{what} {}", to_text(&v));
        }
    }
}
