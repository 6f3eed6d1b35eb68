//! What changes the SA's state: joins and leaves, service registrations, InformInfo
//! subscriptions (which also print the Reports they bring).

use std::time::{Duration, Instant};

use clap::{Args, Subcommand};
use ibsm_mad::sa::{Gid, Selector, ServiceName, ServiceRecord};
use ibsm_sa_client::{trap_subscription, GroupParams, JoinRequest};

use super::common::{parse_gid, parse_num, Client, Membership, Out, SaFailure};

/// `sa join`.
#[derive(Args, Debug)]
pub struct JoinArgs {
    /// The group's MGID (IPv6 notation).
    #[arg(long, value_parser = parse_gid, required_unless_present = "create")]
    pub mgid: Option<Gid>,
    /// Create the group: with --mgid that MGID, else one the SA allocates.
    #[arg(long)]
    pub create: bool,
    /// Membership(s): full, non, send-only, send-only-full (repeat or comma-separate).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "full")]
    pub state: Vec<Membership>,
    /// Q_Key of a new group.
    #[arg(long, value_parser = parse_num::<u32>, default_value = "0x0b1b")]
    pub qkey: u32,
    /// P_Key of a new group.
    #[arg(long, value_parser = parse_num::<u16>, default_value = "0xffff")]
    pub pkey: u16,
    /// SL of a new group.
    #[arg(long, value_parser = parse_num::<u8>, default_value = "0")]
    pub sl: u8,
    /// MTU of a new group (IBA code: 4 = 2048), exactly.
    #[arg(long, value_parser = parse_num::<u8>)]
    pub mtu: Option<u8>,
    /// Rate of a new group (IBA code: 3 = 10 Gb/s), exactly.
    #[arg(long, value_parser = parse_num::<u8>)]
    pub rate: Option<u8>,
    /// Stay a member this long (answering Reports), then leave.
    #[arg(long, value_name = "SECONDS")]
    pub hold_s: Option<u64>,
    /// Join this port instead of the local one (ProxyJoin: needs the SA_Key, --sm-key).
    #[arg(long, value_parser = parse_gid)]
    pub port_gid: Option<Gid>,
}

/// `sa leave`.
#[derive(Args, Debug)]
pub struct LeaveArgs {
    /// The group's MGID.
    #[arg(long, value_parser = parse_gid)]
    pub mgid: Gid,
    /// Membership(s) to drop.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "full")]
    pub state: Vec<Membership>,
    /// Leave for this port instead of the local one (needs the SA_Key, --sm-key).
    #[arg(long, value_parser = parse_gid)]
    pub port_gid: Option<Gid>,
}

/// `sa service ...`.
#[derive(Subcommand, Debug)]
pub enum ServiceCmd {
    /// Register (or renew) a service of this port.
    Register {
        /// ServiceID.
        #[arg(long, value_parser = crate::args::parse_guid)]
        id: u64,
        /// ServiceName (up to 64 bytes).
        #[arg(long, default_value = "")]
        name: String,
        /// Lease in seconds [default: infinite].
        #[arg(long)]
        lease_s: Option<u32>,
        /// ServiceP_Key.
        #[arg(long, value_parser = parse_num::<u16>, default_value = "0xffff")]
        pkey: u16,
    },
    /// Delete a service of this port.
    Delete {
        /// ServiceID.
        #[arg(long, value_parser = crate::args::parse_guid)]
        id: u64,
        /// ServiceP_Key.
        #[arg(long, value_parser = parse_num::<u16>, default_value = "0xffff")]
        pkey: u16,
    },
}

/// `sa inform ...`.
#[derive(Subcommand, Debug)]
pub enum InformCmd {
    /// Subscribe to a trap, print each Report, unsubscribe at the end.
    Subscribe {
        /// Generic trap number (64 GID in service, 65 out, 66/67 group created/deleted,
        /// 0xffff all).
        #[arg(long, value_parser = parse_num::<u16>)]
        trap: u16,
        /// Stop after this many Reports.
        #[arg(long)]
        count: Option<u64>,
        /// Stop after this many seconds [default: 30].
        #[arg(long, default_value_t = 30)]
        wait_s: u64,
        /// Keep the subscription when leaving.
        #[arg(long)]
        keep: bool,
    },
    /// Cancel a subscription to a trap.
    Unsubscribe {
        /// Generic trap number.
        #[arg(long, value_parser = parse_num::<u16>)]
        trap: u16,
    },
}

pub fn join(c: &mut Client, out: &Out, a: &JoinArgs) -> Result<(), SaFailure> {
    let join_state = Membership::bits(&a.state);
    let create = a.create.then_some(GroupParams {
        q_key: a.qkey,
        p_key: a.pkey,
        sl: a.sl,
        mtu: a.mtu.map(|m| (Selector::Exactly, m)),
        rate: a.rate.map(|r| (Selector::Exactly, r)),
        ..GroupParams::default()
    });
    let req = JoinRequest {
        mgid: a.mgid,
        join_state,
        create,
        port_gid: a.port_gid,
    };
    let rec = c.join(&req)?;
    out.record("joined", &rec);
    if let Some(s) = a.hold_s {
        let until = Instant::now() + Duration::from_secs(s);
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            if let Some(r) = c.next_report(left)? {
                out.record("report", &r.notice);
            }
        }
        let left = c.leave(rec.mgid, join_state, a.port_gid)?;
        out.record("left", &left);
    }
    Ok(())
}

pub fn leave(c: &mut Client, out: &Out, a: &LeaveArgs) -> Result<(), SaFailure> {
    let rec = c.leave(a.mgid, Membership::bits(&a.state), a.port_gid)?;
    out.record("left", &rec);
    Ok(())
}

pub fn service(c: &mut Client, out: &Out, a: &ServiceCmd) -> Result<(), SaFailure> {
    match a {
        ServiceCmd::Register {
            id,
            name,
            lease_s,
            pkey,
        } => {
            if name.len() > 64 {
                return Err(SaFailure {
                    message: format!("--name is {} bytes; a ServiceName holds 64", name.len()),
                    code: 2,
                });
            }
            let rec = ServiceRecord {
                service_id: *id,
                service_p_key: *pkey,
                service_name: ServiceName::new(name),
                ..ServiceRecord::default()
            };
            let got = c.register_service(&rec, *lease_s)?;
            out.record("registered", &got);
        }
        ServiceCmd::Delete { id, pkey } => {
            let rec = ServiceRecord {
                service_id: *id,
                service_p_key: *pkey,
                ..ServiceRecord::default()
            };
            let got = c.delete_service(&rec)?;
            out.record("deleted", &got);
        }
    }
    Ok(())
}

pub fn inform(c: &mut Client, out: &Out, a: &InformCmd) -> Result<(), SaFailure> {
    match a {
        InformCmd::Subscribe {
            trap,
            count,
            wait_s,
            keep,
        } => {
            let info = trap_subscription(*trap);
            let got = c.subscribe(&info)?;
            out.record("subscribed", &got);
            let until = Instant::now() + Duration::from_secs(*wait_s);
            let mut n = 0u64;
            while count.is_none_or(|c| n < c) {
                let Some(left) = until.checked_duration_since(Instant::now()) else {
                    break;
                };
                if let Some(r) = c.next_report(left)? {
                    n += 1;
                    out.record("report", &r.notice);
                }
            }
            if !keep {
                c.unsubscribe(&info)?;
            }
            if !out.json {
                println!("{n} reports");
            }
            Ok(())
        }
        InformCmd::Unsubscribe { trap } => {
            let got = c.unsubscribe(&trap_subscription(*trap))?;
            out.record("unsubscribed", &got);
            Ok(())
        }
    }
}
