//! SMPs/s through the embedded fabric: directed-route SubnGet(NodeInfo) and
//! SubnGet(PortInfo) over 0, 2 and 4 hops of a 3-level k=16 fat tree, one core.
//! Each iteration is a full round trip: `send` (route out, SMA, route back, queue)
//! plus `poll_delivery`. Run with `cargo bench -p ibsm-sim`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use ibsm_mad::{AttributeId, Smp};
use ibsm_sim::{Sim, SimConfig};

const RUN_FOR: Duration = Duration::from_millis(400);

fn main() {
    let topo = ibsm_fabric::gen::fat_tree_3level(16).expect("k=16 fat tree");
    let mut sim = Sim::new(
        &topo,
        SimConfig {
            latency: Duration::ZERO,
            ..SimConfig::default()
        },
    );
    let (hca, _) = topo.iter().find(|(_, n)| !n.is_switch()).expect("an HCA");
    let sm = sim.attach(hca, 1).expect("attach");
    // HCA port 1 -> edge; edge port 9 -> aggregation; aggregation port 9 -> core; core port 1 -> aggregation of pod 0.
    let paths: [(&str, &[u8]); 3] = [("0-hop", &[]), ("2-hop", &[1, 9]), ("4-hop", &[1, 9, 9, 1])];
    let attrs = [
        ("NodeInfo", AttributeId::NODE_INFO, 0u32),
        ("PortInfo", AttributeId::PORT_INFO, 1),
    ];

    println!(
        "ibsm-sim SMP rate, 3-level k=16 fat tree ({} nodes), DR SubnGet round trips, one core",
        topo.len()
    );
    println!(
        "{:<10} {:<7} {:>14} {:>10}",
        "attribute", "path", "SMPs/s", "ns/SMP"
    );
    let now = Duration::from_secs(1);
    for (aname, attr, amod) in attrs {
        for (pname, path) in paths {
            let template = Smp::get_dr(path, attr, amod, 0).encode();
            let mut mad = template;
            // Warm up: queue slots, caches.
            for tid in 0..10_000u64 {
                mad[8..16].copy_from_slice(&tid.to_be_bytes());
                sim.send(now, sm, &mad).expect("send");
                black_box(sim.poll_delivery(now).expect("answer"));
            }
            let mut n = 0u64;
            let start = Instant::now();
            while start.elapsed() < RUN_FOR {
                for _ in 0..4096 {
                    mad[8..16].copy_from_slice(&n.to_be_bytes());
                    sim.send(now, sm, black_box(&mad)).expect("send");
                    let (_, resp) = sim.poll_delivery(now).expect("answer");
                    black_box(resp);
                    n += 1;
                }
            }
            let secs = start.elapsed().as_secs_f64();
            println!(
                "{:<10} {:<7} {:>14.0} {:>10.0}",
                aname,
                pname,
                n as f64 / secs,
                secs * 1e9 / n as f64
            );
        }
    }
    let st = sim.stats();
    assert_eq!(st.sent, st.delivered, "every SMP answered");
}
