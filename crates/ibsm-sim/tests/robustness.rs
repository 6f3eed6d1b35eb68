//! Nothing a client sends can panic the simulator, and big fabrics fit.

mod common;

use std::time::Duration;

use ibsm_mad::{AttributeId, NodeInfo, Smp};
use ibsm_sim::{Sim, SimConfig};
use proptest::prelude::*;

fn rig() -> (Sim, Vec<ibsm_sim::ClientId>) {
    let topo = common::two_switch_topology();
    let mut sim = Sim::new(&topo, SimConfig::default());
    let a = sim.attach(topo.find_by_name("Hca1").unwrap(), 1).unwrap();
    let b = sim.attach(topo.find_by_name("Hca2").unwrap(), 1).unwrap();
    sim.set_is_sm(b, true).unwrap();
    (sim, vec![a, b])
}

fn drain(sim: &mut Sim, now: Duration) -> usize {
    let mut n = 0;
    while sim
        .poll_delivery_from(now + Duration::from_secs(1))
        .is_some()
    {
        n += 1;
    }
    n
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, ..ProptestConfig::default() })]

    /// Arbitrary bytes of arbitrary length.
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300), who in 0usize..2) {
        let (mut sim, clients) = rig();
        let _ = sim.send(Duration::ZERO, clients[who], &bytes);
        let _ = sim.send_to(Duration::ZERO, clients[who], 0x0004, &bytes);
        drain(&mut sim, Duration::ZERO);
    }

    /// 256 random bytes behind a valid SMP header prefix, so they reach routing and the
    /// SMA (random paths, hop counts, methods, attributes, modifiers and Set data).
    #[test]
    fn random_smps_never_panic(
        mut body in proptest::collection::vec(any::<u8>(), 256),
        directed in any::<bool>(),
        method in prop_oneof![Just(0x01u8), Just(0x02), Just(0x05), Just(0x07), Just(0x81), any::<u8>()],
        attr in prop_oneof![(0x10u16..0x32), any::<u16>()],
        hop_cnt in 0u8..8,
        who in 0usize..2,
        rounds in 1usize..4,
    ) {
        let (mut sim, clients) = rig();
        body[0] = 1;
        body[1] = if directed { 0x81 } else { 0x01 };
        body[2] = 1;
        body[3] = method;
        body[16..18].copy_from_slice(&attr.to_be_bytes());
        if directed {
            body[4] = if method & 0x80 != 0 { 0x80 } else { 0 };
            body[6] = 0;
            body[7] = hop_cnt;
            body[32..36].copy_from_slice(&[0xFF; 4]);
            body[129] = 1;
        }
        for _ in 0..rounds {
            let _ = sim.send(Duration::ZERO, clients[who], &body);
            let _ = sim.send_to(Duration::ZERO, clients[who], u16::from_be_bytes([body[40], body[41]]), &body);
            // Whatever was handed to a client, let it answer with the same bytes as a response.
            while let Some(d) = sim.poll_delivery_from(Duration::from_secs(1)) {
                let mut resp = d.mad;
                resp[3] = 0x81;
                resp[4] |= 0x80;
                let _ = sim.send(Duration::from_secs(1), d.client, &resp);
            }
        }
        // The fabric still answers a plain Get afterwards.
        let probe = Smp::get_dr(&[1], AttributeId::NODE_INFO, 0, 99).encode();
        sim.send(Duration::from_secs(2), clients[0], &probe).unwrap();
        let mut seen = false;
        while let Some(d) = sim.poll_delivery_from(Duration::from_secs(3)) {
            seen |= ibsm_mad::peek_tid(&d.mad) == Some(99);
        }
        // Random Sets may have disabled Switch1's port 1; anything else must answer.
        let sw1 = common::two_switch_topology().find_by_name("Switch1").unwrap();
        let up = sim.port_state(sw1, 1).map(|s| s != ibsm_mad::PortState::Down).unwrap_or(false);
        prop_assert!(seen || !up);
    }

    /// Random GMPs to random addresses on a brought-up fabric, and every delivery answered
    /// back to its source, never panic; the fabric still carries a good GMP afterwards.
    #[test]
    fn random_gmps_never_panic(
        mut body in proptest::collection::vec(any::<u8>(), 256),
        class in prop_oneof![Just(0x03u8), Just(0x04), any::<u8>()],
        lid in prop_oneof![1u16..8, any::<u16>()],
        qpn in prop_oneof![Just(1u32), any::<u32>()],
        qkey in prop_oneof![Just(ibsm_mad::GSI_QKEY), any::<u32>()],
        sl in any::<u8>(),
        path_bits in any::<u8>(),
        pkey_index in prop_oneof![Just(0u16), any::<u16>()],
        grh in any::<bool>(),
        who in 0usize..2,
    ) {
        let (mut sim, clients) = rig();
        let topo = common::two_switch_topology();
        let up = sim.bring_up((topo.find_by_name("Hca1").unwrap(), 1)).unwrap();
        let _ = sim.register_gsi_class(clients[1], class);
        body[0] = 1;
        body[1] = class;
        let to = ibsm_mad::MadAddress {
            lid,
            qpn,
            qkey,
            sl,
            path_bits,
            pkey_index,
            grh: grh.then(ibsm_mad::GrhInfo::default),
        };
        let _ = sim.send_gmp(Duration::ZERO, clients[who], &to, &body);
        while let Some(d) = sim.poll_delivery_from(Duration::from_secs(1)) {
            let mut resp = d.mad;
            resp[3] |= 0x80;
            let _ = sim.send_gmp(Duration::from_secs(1), d.client, &d.from, &resp);
        }
        let _ = sim.register_gsi_class(clients[1], 0x03);
        let hca2 = topo.find_by_name("Hca2").unwrap();
        let mut probe = [0u8; 256];
        probe[..4].copy_from_slice(&[1, 0x03, 2, 0x01]);
        probe[15] = 0x99;
        let from = clients[0];
        sim.send_gmp(Duration::from_secs(2), from, &ibsm_mad::MadAddress::gsi(up.lid(hca2, 1).unwrap()), &probe).unwrap();
        let mut seen = false;
        while let Some(d) = sim.poll_delivery_from(Duration::from_secs(3)) {
            seen |= d.mad == probe;
        }
        prop_assert!(seen, "a good GMP still gets through");
    }
}

/// 3-level k=58 fat tree: 48,778 HCAs + 4205 switches, ~346k ports, the 48k-LID fabric
/// the simulator is sized for. Generating and building it takes about a second even in
/// an unoptimized build, so it always runs.
#[test]
fn fat_tree_3level_builds_and_answers() {
    let k: u32 = 58;
    let t0 = std::time::Instant::now();
    let topo = ibsm_fabric::gen::fat_tree_3level(k).expect("fat tree");
    let gen_time = t0.elapsed();
    let t1 = std::time::Instant::now();
    let mut sim = Sim::new(&topo, SimConfig::default());
    let build_time = t1.elapsed();
    let counts = topo.counts();
    assert_eq!(sim.num_nodes(), counts.nodes);
    let hcas = (k * k * k / 4) as usize;
    assert_eq!(counts.hcas, hcas);
    // Memory: well under 200 bytes per port plus 100 per node before any LFT is written.
    let heap = sim.heap_bytes();
    let budget = counts.nodes * 100 + (counts.nodes * 2 + counts.switches * (k as usize + 1)) * 200;
    assert!(heap < budget, "fabric state {heap} bytes exceeds {budget}");
    eprintln!(
        "k={k}: {} nodes, {} switches, generate {gen_time:?}, Sim::new {build_time:?}, {} MiB",
        counts.nodes,
        counts.switches,
        heap >> 20
    );

    // A 4-hop directed route from an HCA: leaf, spine, core, spine.
    let (hca, _) = topo.iter().find(|(_, n)| !n.is_switch()).expect("an HCA");
    let port = topo
        .node(hca)
        .unwrap()
        .physical_ports()
        .find(|(_, p)| p.remote.is_some())
        .unwrap()
        .0;
    let sm = sim.attach(hca, port).unwrap();
    let up = (k / 2 + 1) as u8; // first uplink of a leaf or spine switch
    let path = [port, up, up, 1];
    sim.send(
        Duration::ZERO,
        sm,
        &Smp::get_dr(&path, AttributeId::NODE_INFO, 0, 1).encode(),
    )
    .unwrap();
    let (_, m) = sim
        .poll_delivery(Duration::from_secs(1))
        .expect("4-hop answer");
    let r = Smp::decode(&m).unwrap();
    assert_eq!(r.status, 0);
    let ni: NodeInfo = r.attribute().unwrap();
    assert_eq!(ni.node_type, ibsm_mad::NodeType::Switch);
}

/// Same calls, same outputs: a scripted run with loss, latency changes and faults
/// delivers byte-identical MADs at identical times when replayed on a fresh Sim.
#[test]
fn replay_is_deterministic() {
    fn run() -> Vec<(Duration, u32, u16, Vec<u8>)> {
        let topo = common::two_switch_topology();
        let mut sim = Sim::new(&topo, SimConfig::default());
        let a = sim.attach(topo.find_by_name("Hca1").unwrap(), 1).unwrap();
        let b = sim.attach(topo.find_by_name("Hca4").unwrap(), 1).unwrap();
        sim.set_is_sm(b, true).unwrap();
        sim.set_loss(0.2, 1234).unwrap();
        let sw2 = topo.find_by_name("Switch2").unwrap();
        let paths: [&[u8]; 5] = [&[], &[1], &[1, 3], &[1, 5, 2], &[1, 3, 2]];
        let mut out = Vec::new();
        let mut now = Duration::ZERO;
        for i in 0..300u64 {
            now += Duration::from_micros(3);
            if i == 100 {
                sim.link_down(sw2, 3).unwrap();
                sim.set_latency(Duration::from_micros(7));
            }
            if i == 200 {
                sim.link_up(sw2, 3).unwrap();
            }
            let path = paths[(i % 5) as usize];
            let attr = if i % 7 == 0 {
                AttributeId::SM_INFO
            } else {
                AttributeId::PORT_INFO
            };
            sim.send(now, a, &Smp::get_dr(path, attr, 0, i).encode())
                .unwrap();
            while let Some(d) = sim.poll_delivery_from(now) {
                if d.client == b {
                    let req = Smp::decode(&d.mad).unwrap();
                    let _ = sim.send(now, b, &req.response().with_data([9; 64]).encode());
                }
                out.push((now, d.client.0, d.slid, d.mad.to_vec()));
            }
        }
        out
    }
    let first = run();
    assert!(first.len() > 150, "most MADs answered: {}", first.len());
    assert_eq!(first, run());
}
