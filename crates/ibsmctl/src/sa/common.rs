//! What every `ibsmctl sa` subcommand shares: the client type, argument parsers,
//! errors with their exit codes, and printing.

use std::net::Ipv6Addr;

use clap::ValueEnum;
use ibsm_mad::sa::{Gid, JoinState};
use ibsm_sa_client::{SaClient, SaClientError};
use ibsm_transport::UmadDevice;

use super::debug_json::{to_json, to_text};
use crate::args::UsageError;

/// The client every subcommand uses.
pub(crate) type Client = SaClient<UmadDevice>;

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
    pub fn bits(list: &[Membership]) -> JoinState {
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
