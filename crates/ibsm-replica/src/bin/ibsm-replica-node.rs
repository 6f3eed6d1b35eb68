//! A standalone replica instance, for the crash tests and for poking at a cluster by
//! hand. Same flags as ibsmd's replication flags:
//!
//! `ibsm-replica-node --node-id N --grpc ADDR [--peer ID=ADDR ...] --data-dir DIR MODE`
//!
//! MODE is one of
//! - `write K`: claim mastership, then commit `SetGuid2Lid` for port GUIDs 1..=K one by
//!   one, printing `ACK <guid>` after each write is acknowledged (committed + applied);
//! - `dump`: wait until this node leads and has applied its whole log, then print
//!   `EPOCH <e>` and one `GUID <guid> <min> <max>` line per guid2lid entry;
//! - `serve`: run until killed.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use ibsm_replica::{
    Command, LidRange, Listen, Op, PeerArg, RaftTimers, Replica, ReplicaConfig, Role,
};

#[derive(Debug)]
enum Mode {
    Write(u64),
    Dump,
    Serve,
}

fn usage(msg: &str) -> Box<dyn std::error::Error> {
    format!("{msg}\nusage: ibsm-replica-node --node-id N --grpc ADDR [--peer ID=ADDR ...] --data-dir DIR (write K | dump | serve)").into()
}

fn parse() -> Result<(ReplicaConfig, Mode), Box<dyn std::error::Error>> {
    let mut node_id = None;
    let mut grpc = None;
    let mut peers = BTreeMap::new();
    let mut data_dir = None;
    let mut mode = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = |name: &str| {
            args.next()
                .ok_or_else(|| usage(&format!("{name} needs a value")))
        };
        match a.as_str() {
            "--node-id" => node_id = Some(val("--node-id")?.parse::<u64>()?),
            "--grpc" => grpc = Some(val("--grpc")?),
            "--peer" => {
                let p: PeerArg = val("--peer")?.parse()?;
                peers.insert(p.node_id, p.addr);
            }
            "--data-dir" => data_dir = Some(std::path::PathBuf::from(val("--data-dir")?)),
            "write" => mode = Some(Mode::Write(val("write")?.parse()?)),
            "dump" => mode = Some(Mode::Dump),
            "serve" => mode = Some(Mode::Serve),
            other => return Err(usage(&format!("unknown argument {other:?}"))),
        }
    }
    let node_id = node_id.ok_or_else(|| usage("--node-id is required"))?;
    let grpc: String = grpc.ok_or_else(|| usage("--grpc is required"))?;
    let listen = Listen::Bind(grpc.parse()?);
    Ok((
        ReplicaConfig {
            node_id,
            grpc_addr: grpc,
            listen,
            initial_members: peers,
            data_dir: data_dir.ok_or_else(|| usage("--data-dir is required"))?,
            timers: RaftTimers::default(),
            peer_tls: None,
            peer_auth: ibsm_replica::PeerAuth::default(),
            force_bootstrap: false,
        },
        mode.ok_or_else(|| usage("a mode is required"))?,
    ))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (cfg, mode) = parse()?;
    let replica = Replica::start(cfg).await?;
    let out = std::io::stdout();
    match mode {
        Mode::Write(k) => {
            replica
                .wait_metrics(Duration::from_secs(10), |m| m.role == Role::Leader)
                .await?;
            let epoch = replica.claim_mastership(0xABCD).await?;
            for guid in 1..=k {
                let lid = u16::try_from(guid % 0xBFFF + 1)?;
                replica
                    .write(Command::Update {
                        epoch,
                        ops: vec![Op::SetGuid2Lid {
                            port_guid: guid,
                            range: LidRange {
                                min_lid: lid,
                                max_lid: lid,
                            },
                        }],
                    })
                    .await?;
                let mut o = out.lock();
                writeln!(o, "ACK {guid}")?;
                o.flush()?;
            }
            writeln!(out.lock(), "DONE")?;
        }
        Mode::Dump => {
            let m = replica
                .wait_metrics(Duration::from_secs(10), |m| {
                    m.role == Role::Leader
                        && m.last_applied.is_some()
                        && m.last_applied == m.last_log_index
                })
                .await?;
            let s = replica.state();
            let mut o = out.lock();
            writeln!(o, "APPLIED {:?}", m.last_applied)?;
            writeln!(o, "EPOCH {}", s.epoch)?;
            for (g, r) in &s.guid2lid {
                writeln!(o, "GUID {g} {} {}", r.min_lid, r.max_lid)?;
            }
            o.flush()?;
        }
        Mode::Serve => loop {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        },
    }
    replica.shutdown().await?;
    Ok(())
}
