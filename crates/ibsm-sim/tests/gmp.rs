//! GMPs between clients (an SA request from one HCA to the SM's QP1 and its answer),
//! their keys and link rules, and the MulticastForwardingTable of the switches.

mod common;

use common::Rig;
use ibsm_mad::{AttributeId, MadAddress, PortState, SwitchInfo, GSI_QKEY};
use ibsm_sim::{BringUp, ClientId, Delivery, SimError};

const SA: u8 = 0x03;
const CLASS_PORT_INFO: u16 = 0x0001;

/// A SubnAdm MAD: class 0x03, version 2, `method`, `tid`, attribute `attr`.
fn sa_mad(method: u8, tid: u64, attr: u16) -> [u8; 256] {
    let mut m = [0u8; 256];
    m[0] = 1;
    m[1] = SA;
    m[2] = 2;
    m[3] = method;
    m[8..16].copy_from_slice(&tid.to_be_bytes());
    m[16..18].copy_from_slice(&attr.to_be_bytes());
    m
}

struct Fabric {
    rig: Rig,
    up: BringUp,
    /// The SM (SA) client on Hca1.
    sm: ClientId,
    /// A requester on Hca2, across both switches.
    host: ClientId,
}

impl Fabric {
    fn new() -> Fabric {
        let mut rig = Rig::new();
        let sm = rig.attach("Hca1");
        let host = rig.attach("Hca2");
        let hca1 = rig.node("Hca1");
        let up = rig.sim.bring_up((hca1, 1)).expect("bring up");
        rig.sim.register_gsi_class(sm, SA).expect("register SA");
        Fabric { rig, up, sm, host }
    }

    fn lid(&self, name: &str) -> u16 {
        let n = self.rig.node(name);
        let port = if name.starts_with("Switch") { 0 } else { 1 };
        self.up.lid(n, port).expect("a LID")
    }

    fn send(&mut self, from: ClientId, to: &MadAddress, mad: &[u8; 256]) -> Vec<Delivery> {
        let now = self.rig.now;
        self.rig
            .sim
            .send_gmp(now, from, to, mad)
            .expect("GMP accepted");
        self.rig.drain()
    }
}

#[test]
fn bring_up_programs_lids_routes_and_the_master_sm_lid() {
    let f = Fabric::new();
    assert_eq!(f.up.sm_lid, f.lid("Hca1"));
    for name in ["Hca1", "Hca2", "Hca3", "Hca4"] {
        let n = f.rig.node(name);
        let pi = f.rig.sim.port_info(n, 1).expect("PortInfo");
        assert_eq!(pi.lid, f.lid(name));
        assert_eq!(pi.master_sm_lid, f.up.sm_lid, "{name}");
        assert_eq!(pi.port_state, PortState::Active, "{name}");
    }
    // Switch1 reaches Hca2 over the inter-switch link on port 3 (the lower of 3 and 5).
    let sw1 = f.rig.node("Switch1");
    assert_eq!(f.rig.sim.lft_entry(sw1, f.lid("Hca2")), Some(3));
    assert_eq!(f.rig.sim.lft_entry(sw1, f.lid("Hca1")), Some(1));
    assert_eq!(f.rig.sim.lft_entry(sw1, f.lid("Switch1")), Some(0));
}

#[test]
fn sa_get_from_a_host_reaches_the_sm_and_its_answer_comes_back() {
    let mut f = Fabric::new();
    let (sm_lid, host_lid) = (f.lid("Hca1"), f.lid("Hca2"));
    let req = sa_mad(0x01, 0x0000_0001_0000_0042, CLASS_PORT_INFO);
    let sa = MadAddress {
        sl: 3,
        ..MadAddress::gsi(sm_lid)
    };
    let host = f.host;
    let got = f.send(host, &sa, &req);
    assert_eq!(got.len(), 1, "{got:?}");
    let d = &got[0];
    assert_eq!(
        d.client, f.sm,
        "the client that registered class 0x03 takes it"
    );
    assert_eq!(d.mad, req);
    assert_eq!(d.slid, host_lid);
    assert_eq!(
        d.from,
        MadAddress {
            lid: host_lid,
            qpn: 1,
            qkey: GSI_QKEY,
            sl: 3,
            path_bits: 0,
            pkey_index: 0,
            grh: None,
        }
    );
    // The SM answers to where the request came from.
    let mut resp = req;
    resp[3] = 0x81;
    resp[64] = 0xAB;
    let back = d.from;
    let sm = f.sm;
    let got = f.send(sm, &back, &resp);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].client, f.host);
    assert_eq!(got[0].mad, resp);
    assert_eq!(got[0].from.lid, sm_lid);
    assert_eq!(got[0].from.qpn, 1);
    assert_eq!(got[0].from.qkey, GSI_QKEY);
    // Every segment of a multi-packet answer (same TID) finds the requester.
    let got = f.send(sm, &back, &resp);
    assert_eq!(got.len(), 1, "a second segment is delivered too");
    let s = f.rig.sim.stats();
    assert_eq!(s.gmps_to_clients, 3);
    // An answer nobody asked for (unknown TID) is dropped.
    let mut stray = resp;
    stray[8] = 0x77;
    assert!(f.send(sm, &back, &stray).is_empty());
}

#[test]
fn a_grh_carries_the_senders_gid() {
    let mut f = Fabric::new();
    let sa = MadAddress {
        grh: Some(ibsm_mad::GrhInfo {
            hop_limit: 1,
            traffic_class: 4,
            flow_label: 0x123,
            ..Default::default()
        }),
        ..MadAddress::gsi(f.lid("Hca1"))
    };
    let host = f.host;
    let got = f.send(host, &sa, &sa_mad(0x01, 9, CLASS_PORT_INFO));
    let grh = got[0].from.grh.expect("a GRH");
    let hca2 = f.rig.node("Hca2");
    let guid = f
        .rig
        .topo
        .node(hca2)
        .and_then(|n| n.port(1))
        .expect("Hca2 port 1")
        .port_guid;
    assert_eq!(&grh.gid[..8], &0xFE80_0000_0000_0000u64.to_be_bytes());
    assert_eq!(&grh.gid[8..], &guid.to_be_bytes());
    assert_eq!(
        (grh.hop_limit, grh.traffic_class, grh.flow_label),
        (1, 4, 0x123)
    );
}

#[test]
fn a_get_nobody_registered_for_is_answered_unsupported_like_the_kernel_does() {
    let mut f = Fabric::new();
    let host = f.host;
    // PerfMgt Get to the SM's port: no client took class 0x04.
    let mut pma = sa_mad(0x01, 5, 0x0012);
    pma[1] = 0x04;
    pma[2] = 1;
    let got = f.send(host, &MadAddress::gsi(f.lid("Hca1")), &pma);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].client, f.host);
    assert_eq!(got[0].mad[3], 0x81);
    assert_eq!(u16::from_be_bytes([got[0].mad[4], got[0].mad[5]]), 0x000C);
    assert_eq!(got[0].from.lid, f.lid("Hca1"));
    // A GMP to a switch's LID: no client can sit there, same answer.
    let got = f.send(
        host,
        &MadAddress::gsi(f.lid("Switch2")),
        &sa_mad(0x02, 6, 1),
    );
    assert_eq!(got[0].from.lid, f.lid("Switch2"));
    assert_eq!(u16::from_be_bytes([got[0].mad[4], got[0].mad[5]]), 0x000C);
    // Other methods vanish.
    assert!(f
        .send(host, &MadAddress::gsi(f.lid("Hca4")), &sa_mad(0x12, 7, 1))
        .is_empty());
    assert_eq!(f.rig.sim.stats().gmps_unclaimed, 2);
}

#[test]
fn keys_and_link_states_gate_gmps() {
    let mut f = Fabric::new();
    let host = f.host;
    let sa = MadAddress::gsi(f.lid("Hca1"));
    let req = sa_mad(0x01, 11, CLASS_PORT_INFO);
    // Wrong Q_Key on QP1.
    let bad_qkey = MadAddress { qkey: 0x1234, ..sa };
    assert!(f.send(host, &bad_qkey, &req).is_empty());
    // A P_Key index with no P_Key behind it.
    let bad_index = MadAddress {
        pkey_index: 1,
        ..sa
    };
    assert!(f.send(host, &bad_index, &req).is_empty());
    assert_eq!(f.rig.sim.stats().dropped_key, 2);
    // A QP nobody has.
    assert!(f.send(host, &MadAddress { qpn: 7, ..sa }, &req).is_empty());
    // Caller mistakes are errors.
    let now = f.rig.now;
    assert!(matches!(
        f.rig.sim.send_gmp(now, host, &MadAddress::gsi(0), &req),
        Err(SimError::BadAddress { field: "lid", .. })
    ));
    assert!(matches!(
        f.rig
            .sim
            .send_gmp(now, host, &MadAddress::gsi(0xC000), &req),
        Err(SimError::Unsupported(_))
    ));
    let mut smp = req;
    smp[1] = 0x81;
    assert_eq!(
        f.rig.sim.send_gmp(now, host, &sa, &smp),
        Err(SimError::NotGmpClass(0x81))
    );
    assert!(matches!(
        f.rig.sim.send_gmp(now, host, &sa, &req[..255]),
        Err(SimError::BadLength { got: 255 })
    ));
    // One SA agent per port: a second client at Hca1 cannot take class 0x03.
    let other = f.rig.attach("Hca1");
    assert_eq!(
        f.rig.sim.register_gsi_class(other, SA),
        Err(SimError::ClassInUse {
            class: SA,
            holder: f.sm
        })
    );
    // GMPs need Active links: on a fresh fabric every link has trained but is still
    // Init, so the GMP dies on the first one (Hca2's cable).
    let mut rig = Rig::new();
    let sm = rig.attach("Hca1");
    let host = rig.attach("Hca2");
    rig.sim.register_gsi_class(sm, SA).expect("register");
    let now = rig.now;
    rig.sim
        .send_gmp(now, host, &MadAddress::gsi(1), &req)
        .expect("accepted");
    assert!(rig.drain().is_empty(), "Init links carry no GMP");
    assert_eq!(rig.sim.stats().dropped_link, 1);
}

#[test]
fn a_gmp_follows_the_programmed_lfts() {
    let mut f = Fabric::new();
    let sw1 = f.rig.node("Switch1");
    // Break Switch1's route to Hca1 by directed route, as an SM would by mistake.
    let sm = f.sm;
    let mut block = [0xFFu8; 64];
    let lft = f
        .rig
        .dr_get(sm, &[1], AttributeId::LINEAR_FORWARDING_TABLE, 0);
    block.copy_from_slice(&lft.data);
    block[usize::from(f.lid("Hca1"))] = 0xFF;
    let r = f
        .rig
        .dr_set_raw(sm, &[1], AttributeId::LINEAR_FORWARDING_TABLE, 0, block);
    assert_eq!(r.status, 0);
    assert_eq!(f.rig.sim.lft_entry(sw1, f.lid("Hca1")), None);
    let host = f.host;
    let sa = MadAddress::gsi(f.lid("Hca1"));
    assert!(f.send(host, &sa, &sa_mad(0x01, 12, 1)).is_empty());
    assert_eq!(f.rig.sim.stats().dropped_unrouted, 1);
}

#[test]
fn multicast_forwarding_table_set_get_and_read_back() {
    let mut rig = Rig::new();
    let sm = rig.attach("Hca1");
    let sw1 = rig.node("Switch1");
    // SwitchInfo advertises the table (1024 MLIDs, like ibsim's default).
    let si: SwitchInfo = rig
        .dr_get(sm, &[1], AttributeId::SWITCH_INFO, 0)
        .attribute()
        .expect("SwitchInfo");
    assert_eq!(si.multicast_fdb_cap, 1024);
    // Block 1 (MLIDs 0xC020..0xC03F), position 0 (ports 0..15): 0xC021 to ports 1 and 3.
    let mut data = [0u8; 64];
    data[2..4].copy_from_slice(&0b1010u16.to_be_bytes());
    data[62..64].copy_from_slice(&0x0001u16.to_be_bytes());
    let r = rig.dr_set_raw(sm, &[1], AttributeId::MULTICAST_FORWARDING_TABLE, 1, data);
    assert_eq!((r.status, r.data), (0, data));
    assert_eq!(
        rig.dr_get(sm, &[1], AttributeId::MULTICAST_FORWARDING_TABLE, 1)
            .data,
        data
    );
    let block = rig.sim.mft_block(sw1, 1, 0).expect("a switch block");
    assert_eq!(block[1], 0b1010);
    assert_eq!(block[31], 1);
    assert_eq!(rig.sim.mft_ports(sw1, 0xC021), Some(vec![1, 3]));
    assert_eq!(rig.sim.mft_ports(sw1, 0xC03F), Some(vec![0]));
    assert_eq!(rig.sim.mft_ports(sw1, 0xC000), Some(vec![]));
    assert_eq!(rig.sim.mft_block(sw1, 0, 0), Some([0; 32]), "never written");
    // Other switches and blocks are untouched.
    let sw2 = rig.node("Switch2");
    assert_eq!(rig.sim.mft_ports(sw2, 0xC021), Some(vec![]));
    // Out of range: block 32 (MLID 0xC400) is past the cap, position 1 past 8 ports,
    // and an MLID below 0xC000 or a CA has no table.
    let invalid = |rig: &mut Rig, amod| {
        rig.dr_get(sm, &[1], AttributeId::MULTICAST_FORWARDING_TABLE, amod)
            .status
    };
    assert_eq!(invalid(&mut rig, 32), 0x1C);
    assert_eq!(invalid(&mut rig, 1 << 28), 0x1C);
    assert_eq!(invalid(&mut rig, 1 << 12), 0x1C, "reserved modifier bits");
    assert_eq!(rig.sim.mft_block(sw1, 32, 0), None);
    assert_eq!(rig.sim.mft_block(sw1, 0, 1), None);
    assert_eq!(rig.sim.mft_ports(sw1, 0xBFFF), None);
    let hca1 = rig.node("Hca1");
    assert_eq!(rig.sim.mft_block(hca1, 0, 0), None);
    assert_eq!(
        rig.dr_get(sm, &[], AttributeId::MULTICAST_FORWARDING_TABLE, 0)
            .status,
        0x0C,
        "a CA has no MulticastForwardingTable"
    );
    // Writing zeros clears the block (nothing is stored for it).
    let r = rig.dr_set_raw(
        sm,
        &[1],
        AttributeId::MULTICAST_FORWARDING_TABLE,
        1,
        [0; 64],
    );
    assert_eq!(r.status, 0);
    assert_eq!(rig.sim.mft_ports(sw1, 0xC021), Some(vec![]));
}

#[test]
fn the_receiver_reports_the_p_key_index_that_matched() {
    let mut f = Fabric::new();
    let sm = f.sm;
    let set_pkeys = |f: &mut Fabric, keys: &[u16]| {
        let mut block = [0u8; 64];
        for (c, k) in block.chunks_exact_mut(2).zip(keys) {
            c.copy_from_slice(&k.to_be_bytes());
        }
        let r = f
            .rig
            .dr_set_raw(sm, &[], AttributeId::P_KEY_TABLE, 0, block);
        assert_eq!(r.status, 0);
    };
    // The SM's port holds partition 1 at index 0 and the default partition at index 1.
    set_pkeys(&mut f, &[0x8001, 0xFFFF]);
    let host = f.host;
    let sa = MadAddress::gsi(f.lid("Hca1"));
    let got = f.send(host, &sa, &sa_mad(0x01, 21, CLASS_PORT_INFO));
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].from.pkey_index, 1, "0xFFFF matched entry 1");
    // Without the default partition the host's 0xFFFF finds no entry: dropped.
    set_pkeys(&mut f, &[0x8001]);
    assert!(f.send(host, &sa, &sa_mad(0x01, 22, 1)).is_empty());
    assert_eq!(f.rig.sim.stats().dropped_key, 1);
}
