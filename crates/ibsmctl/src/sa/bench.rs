//! `sa bench`: load for a benchmark. `path` sends `--count` PathRecord Gets (from this
//! port to the end ports, or to `--dlids`, in turn) with `--window` in flight; `join` creates `--count`
//! groups (SA-allocated MGIDs, this port a full member) and deletes each by leaving
//! it, `--window` operations in flight. Prints one result (with `--json`, one JSON
//! object: a bench script's input): operations, errors by kind, seconds, operations
//! per second (timed from the first query, after the setup), latency percentiles, the
//! client's resends.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use clap::Subcommand;
use ibsm_mad::sa::{JoinState, McMemberRecord, PathRecord, SaMad};
use ibsm_mad::Method;
use ibsm_sa_client::{GroupParams, JoinRequest, SaClientError};

use super::common::{Client, Out, SaFailure};

/// `sa bench ...`.
#[derive(Subcommand, Debug)]
pub enum BenchCmd {
    /// PathRecord SubnAdmGets.
    Path {
        /// Queries.
        #[arg(long, default_value_t = 1000)]
        count: u64,
        /// Queries in flight.
        #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=256))]
        window: u64,
        /// Destination LIDs, comma-separated [default: every end port the SA lists in
        /// its PortInfoRecord table]. Lets the bench ask an SA whose multi-MAD tables
        /// do not reach this client (OpenSM under umad2sim).
        #[arg(long, value_delimiter = ',', value_parser = crate::fabric::parse_lid)]
        dlids: Vec<u16>,
    },
    /// Group create-by-join then delete-by-leave cycles.
    Join {
        /// Groups created (and deleted).
        #[arg(long, default_value_t = 100)]
        count: u64,
        /// Operations in flight.
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=256))]
        window: u64,
    },
}

/// What a bench run measured.
#[derive(Debug, Default)]
struct Tally {
    ok: u64,
    errors: BTreeMap<String, u64>,
    latencies: Vec<Duration>,
}

impl Tally {
    fn error(&mut self, e: &SaClientError) {
        let key = match e.status() {
            Some(s) => s.name().unwrap_or("status").to_string(),
            None => match e {
                SaClientError::Timeout { .. } => "timeout".into(),
                _ => "other".into(),
            },
        };
        *self.errors.entry(key).or_default() += 1;
    }

    fn percentile(&self, p: f64) -> f64 {
        if self.latencies.is_empty() {
            return 0.0;
        }
        let mut v = self.latencies.clone();
        v.sort_unstable();
        let i = ((v.len() as f64 - 1.0) * p).round() as usize;
        v[i.min(v.len() - 1)].as_secs_f64() * 1e6
    }
}

pub fn run(c: &mut Client, out: &Out, cmd: &BenchCmd) -> Result<(), SaFailure> {
    let (kind, count, window) = match cmd {
        BenchCmd::Path { count, window, .. } => ("path", *count, *window),
        BenchCmd::Join { count, window } => ("join", *count, *window),
    };
    // The clock starts after the setup (the destination list), at the first query.
    let (tally, secs) = match cmd {
        BenchCmd::Path { dlids, .. } => {
            let dlids = if dlids.is_empty() {
                super::end_ports::end_port_lids(c)?
            } else {
                dlids.clone()
            };
            let start = Instant::now();
            let t = bench_path(c, &dlids, count, window)?;
            (t, start.elapsed().as_secs_f64())
        }
        BenchCmd::Join { .. } => {
            let start = Instant::now();
            let t = bench_join(c, count, window)?;
            (t, start.elapsed().as_secs_f64())
        }
    };
    let ops = tally.ok + tally.errors.values().sum::<u64>();
    let stats = c.stats();
    let v = serde_json::json!({
        "bench": kind,
        "count": count,
        "window": window,
        "operations": ops,
        "ok": tally.ok,
        "errors": tally.errors,
        "seconds": secs,
        "ops_per_s": if secs > 0.0 { ops as f64 / secs } else { 0.0 },
        "latency_us": {
            "p50": tally.percentile(0.5),
            "p90": tally.percentile(0.9),
            "p99": tally.percentile(0.99),
            "max": tally.percentile(1.0),
        },
        "requests": stats.requests,
        "resends": stats.resends,
        "sa_lid": c.sa_address().lid,
    });
    if out.json {
        println!("{v}");
    } else {
        println!(
            "{kind}: {ops} operations ({} ok, {} failed) in {secs:.3} s = {:.0}/s, window {window}; latency p50 {:.0} us p99 {:.0} us; {} resends",
            tally.ok,
            ops - tally.ok,
            v["ops_per_s"].as_f64().unwrap_or(0.0),
            tally.percentile(0.5),
            tally.percentile(0.99),
            stats.resends
        );
        for (k, n) in &tally.errors {
            println!("  {k}: {n}");
        }
    }
    if tally.ok == 0 && ops > 0 {
        return Err(SaFailure {
            message: format!("every {kind} operation failed: {:?}", tally.errors),
            code: 1,
        });
    }
    Ok(())
}

fn bench_path(c: &mut Client, dlids: &[u16], count: u64, window: u64) -> Result<Tally, SaFailure> {
    if dlids.is_empty() {
        return Err(SaFailure {
            message: "the SA lists no end port".into(),
            code: 1,
        });
    }
    let me = c.local().lid;
    let mut tally = Tally::default();
    let mut sent_at: HashMap<u32, Instant> = HashMap::new();
    let mut sent = 0u64;
    let mut done = 0u64;
    while done < count {
        while sent < count && (sent_at.len() as u64) < window {
            let t = PathRecord {
                slid: me,
                dlid: dlids[(sent % dlids.len() as u64) as usize],
                ..PathRecord::default()
            };
            let q = SaMad::query(Method::GET, 0, &t, PathRecord::SLID | PathRecord::DLID)
                .map_err(SaClientError::from)?;
            sent_at.insert(c.submit(q)?, Instant::now());
            sent += 1;
        }
        let Some((tid, r)) = c.poll(Duration::from_secs(60))? else {
            return Err(SaFailure {
                message: format!("{} queries never finished", sent_at.len()),
                code: 3,
            });
        };
        if let Some(t0) = sent_at.remove(&tid) {
            tally.latencies.push(t0.elapsed());
        }
        done += 1;
        match r {
            Ok(_) => tally.ok += 1,
            Err(e) => tally.error(&e),
        }
    }
    Ok(tally)
}

/// One join-bench operation in flight.
enum Op {
    Create(Instant),
    Leave(Instant),
}

fn bench_join(c: &mut Client, count: u64, window: u64) -> Result<Tally, SaFailure> {
    let own = c.local().gid();
    let mut tally = Tally::default();
    let mut inflight: HashMap<u32, Op> = HashMap::new();
    let mut created = 0u64;
    let mut finished = 0u64;
    // Each group is one create and one leave; `finished` counts groups done.
    while finished < count {
        while created < count && (inflight.len() as u64) < window {
            let (rec, mask) = JoinRequest::create(GroupParams::default()).to_record(own);
            let q = SaMad::query(Method::SET, 0, &rec, mask).map_err(SaClientError::from)?;
            inflight.insert(c.submit(q)?, Op::Create(Instant::now()));
            created += 1;
        }
        let Some((tid, r)) = c.poll(Duration::from_secs(60))? else {
            return Err(SaFailure {
                message: format!("{} operations never finished", inflight.len()),
                code: 3,
            });
        };
        let Some(op) = inflight.remove(&tid) else {
            continue;
        };
        match (op, r) {
            (Op::Create(t0), Ok(answer)) => {
                tally.latencies.push(t0.elapsed());
                tally.ok += 1;
                let rec = answer
                    .records::<McMemberRecord>()
                    .map_err(SaClientError::from)?
                    .into_iter()
                    .next();
                let Some(rec) = rec else {
                    tally.error(&SaClientError::NotOneRecord {
                        method: "Set",
                        attribute: ibsm_mad::sa::SaAttributeId::MC_MEMBER_RECORD,
                        got: 0,
                    });
                    finished += 1;
                    continue;
                };
                let leave = McMemberRecord {
                    mgid: rec.mgid,
                    port_gid: own,
                    join_state: JoinState::FULL_MEMBER,
                    ..McMemberRecord::default()
                };
                let mask =
                    McMemberRecord::MGID | McMemberRecord::PORT_GID | McMemberRecord::JOIN_STATE;
                let q =
                    SaMad::query(Method::DELETE, 0, &leave, mask).map_err(SaClientError::from)?;
                inflight.insert(c.submit(q)?, Op::Leave(Instant::now()));
            }
            (Op::Create(_), Err(e)) => {
                tally.error(&e);
                finished += 1;
            }
            (Op::Leave(t0), r) => {
                tally.latencies.push(t0.elapsed());
                match r {
                    Ok(_) => tally.ok += 1,
                    Err(e) => tally.error(&e),
                }
                finished += 1;
            }
        }
    }
    Ok(tally)
}
