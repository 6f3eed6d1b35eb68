//! Brings up generated 3-level fat trees (k=16, 32, 58 = 48k LIDs by default)
//! in the embedded simulator with a real clock and prints the phase times of
//! the first heavy sweep and the peak RSS (VmHWM). Target from the issue: the
//! 48k-LID fabric up in <= 10 s, routing <= 2 s, RSS <= 1 GiB.
//!
//! `cargo bench -p ibsm-core --bench subnet_up` (release). `SUBNET_UP_K=16,32`
//! picks the sizes; `SUBNET_UP_SWITCH_SL2VL=1` also programs switch SLtoVL per port pair.

use std::time::{Duration, Instant};

use ibsm_core::subnet::{SubnetConfig, SubnetEvent, SubnetManager};
use ibsm_core::transactions::TransactionsConfig;
use ibsm_fabric::gen;
use ibsm_sim::{Sim, SimConfig};

fn vm_hwm_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    let ks: Vec<u32> = std::env::var("SUBNET_UP_K")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![16, 32, 58]);
    let switch_sl2vl = std::env::var("SUBNET_UP_SWITCH_SL2VL").is_ok_and(|v| v == "1");
    println!(
        "{:>4} {:>7} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9}",
        "k",
        "nodes",
        "LIDs",
        "setup_s",
        "disc_s",
        "lids_s",
        "route_s",
        "distr_s",
        "activ_s",
        "total_s",
        "SMPs",
        "HWM_MiB"
    );
    for k in ks {
        let t0 = Instant::now();
        let topo = match gen::fat_tree_3level(k) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("k={k}: {e}");
                continue;
            }
        };
        let mut sim = Sim::new(
            &topo,
            SimConfig {
                latency: Duration::ZERO,
                ..SimConfig::default()
            },
        );
        let Some(ca) = topo.iter().find(|(_, n)| !n.is_switch()).map(|(i, _)| i) else {
            continue;
        };
        let client = sim.attach(ca, 1).expect("attach");
        let _ = sim.set_is_sm(client, true);
        let setup = t0.elapsed();
        let cfg = SubnetConfig {
            transactions: TransactionsConfig {
                window: 64,
                timeout: Duration::from_millis(500),
                retries: 3,
                tid_high: 1,
                tid_low: ibsm_core::transactions::TidRange::ALL,
            },
            switch_sl2vl,
            ..SubnetConfig::default()
        };
        let mut sm = SubnetManager::new(cfg).expect("config");
        let start = Instant::now();
        sm.become_master(start.elapsed());
        let mut up = None;
        while up.is_none() {
            let mut busy = false;
            while let Some(o) = sm.poll_transmit() {
                busy = true;
                let now = start.elapsed();
                let r = match o.dlid {
                    None => sim.send(now, client, &o.mad),
                    Some(l) => sim.send_to(now, client, l, &o.mad),
                };
                if let Err(e) = r {
                    eprintln!("send: {e}");
                }
            }
            let now = start.elapsed();
            while let Some((_, mad)) = sim.poll_delivery(now) {
                busy = true;
                sm.handle_incoming(now, &mad);
            }
            while let Some(ev) = sm.poll_event() {
                if let SubnetEvent::SubnetUp { phases, report } = ev {
                    up = Some((phases, report));
                }
            }
            if !busy && sm.poll_timeout().is_some_and(|t| t <= start.elapsed()) {
                sm.handle_timeout(start.elapsed());
            }
            if start.elapsed() > Duration::from_secs(600) {
                eprintln!("k={k}: no SubnetUp after 600 s");
                break;
            }
        }
        let Some((p, r)) = up else { continue };
        let s = |d: Duration| d.as_secs_f64();
        println!(
            "{:>4} {:>7} {:>7} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>10} {:>9}",
            k,
            r.nodes,
            r.lids,
            s(setup),
            s(p.discovery),
            s(p.lids),
            s(p.routing),
            s(p.distribution),
            s(p.activation),
            s(p.total()),
            r.smps,
            vm_hwm_kib() / 1024
        );
    }
}
