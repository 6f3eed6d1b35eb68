//! LID routing only through programmed LFTs, the port state machine, SMInfo hand-off
//! between two SM clients, and faults.

mod common;

use common::Rig;
use ibsm_mad::{AttributeId, NodeInfo, PortInfo, PortState, Smp, SwitchInfo};
use ibsm_sim::{ClientId, Sim, SimConfig};

const HCA1: u16 = 1;
const SW1: u16 = 2;
const SW2: u16 = 3;
const HCA2: u16 = 4;

/// Assign LIDs by directed route the way an SM does: read PortInfo, change LID, write.
fn set_lid(rig: &mut Rig, sm: ClientId, path: &[u8], lid: u16) {
    let pi: PortInfo = rig
        .dr_get(sm, path, AttributeId::PORT_INFO, 0)
        .attribute()
        .unwrap();
    let r = rig.dr_set(
        sm,
        path,
        0,
        &PortInfo {
            lid,
            master_sm_lid: HCA1,
            ..pi
        },
    );
    assert_eq!(r.status, 0);
    let back: PortInfo = r.attribute().unwrap();
    assert_eq!(back.lid, lid);
}

fn program_lft(rig: &mut Rig, sm: ClientId, path: &[u8], entries: &[(u16, u8)], top: u16) {
    let mut block = [0xFFu8; 64];
    for &(lid, port) in entries {
        block[usize::from(lid)] = port;
    }
    let r = rig.dr_set_raw(sm, path, AttributeId::LINEAR_FORWARDING_TABLE, 0, block);
    assert_eq!((r.status, r.data), (0, block));
    let si: SwitchInfo = rig
        .dr_get(sm, path, AttributeId::SWITCH_INFO, 0)
        .attribute()
        .unwrap();
    let r = rig.dr_set(
        sm,
        path,
        0,
        &SwitchInfo {
            linear_fdb_top: top,
            ..si
        },
    );
    assert_eq!(r.status, 0);
}

fn lid_get(rig: &mut Rig, sm: ClientId, dlid: u16, attr: AttributeId) -> Vec<ibsm_sim::Delivery> {
    let tid = rig.next_tid();
    rig.exchange_to(sm, dlid, &Smp::get_lid(attr, 0, tid).encode())
}

#[test]
fn lid_routed_get_times_out_until_lfts_are_programmed() {
    let mut rig = Rig::new();
    let sm = rig.attach("Hca1");
    set_lid(&mut rig, sm, &[], HCA1);
    set_lid(&mut rig, sm, &[1], SW1);
    set_lid(&mut rig, sm, &[1, 3], SW2);
    set_lid(&mut rig, sm, &[1, 3, 1], HCA2);

    // LIDs alone route nothing: Switch1 has no LFT.
    assert!(lid_get(&mut rig, sm, HCA2, AttributeId::NODE_INFO).is_empty());
    assert_eq!(rig.sim.stats().dropped_unrouted, 1);
    // The switch's own LID is reachable without an LFT (it is consumed at port 0) but
    // the response back to LID 1 needs Switch1's LFT too.
    assert!(lid_get(&mut rig, sm, SW1, AttributeId::NODE_INFO).is_empty());

    // LFT blocks written but LinearFDBTop still 0: everything above LID 0 is discarded.
    let heap_before = rig.sim.heap_bytes();
    let mut block = [0xFFu8; 64];
    block[1] = 1;
    assert_eq!(
        rig.dr_set_raw(sm, &[1], AttributeId::LINEAR_FORWARDING_TABLE, 0, block)
            .status,
        0
    );
    assert!(
        rig.sim.heap_bytes() > heap_before,
        "the LFT is allocated on first write"
    );
    assert!(lid_get(&mut rig, sm, SW1, AttributeId::NODE_INFO).is_empty());

    program_lft(
        &mut rig,
        sm,
        &[1],
        &[(HCA1, 1), (SW1, 0), (SW2, 3), (HCA2, 3)],
        4,
    );
    // Switch1 answers by LID now.
    let out = lid_get(&mut rig, sm, SW1, AttributeId::NODE_INFO);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].slid, SW1);
    let r = Smp::decode(&out[0].mad).unwrap();
    let ni: NodeInfo = r.attribute().unwrap();
    assert_eq!(
        ni.node_guid,
        rig.topo.node(rig.node("Switch1")).unwrap().node_guid
    );
    assert_eq!(ni.local_port_num, 1);

    // Hca2 still not: Switch2 has no LFT for the way back (and none for the way in).
    assert!(lid_get(&mut rig, sm, HCA2, AttributeId::NODE_INFO).is_empty());
    program_lft(
        &mut rig,
        sm,
        &[1, 3],
        &[(HCA1, 3), (SW1, 3), (SW2, 0), (HCA2, 1)],
        4,
    );
    let out = lid_get(&mut rig, sm, HCA2, AttributeId::NODE_INFO);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].slid, HCA2);
    let ni: NodeInfo = Smp::decode(&out[0].mad).unwrap().attribute().unwrap();
    assert_eq!(
        ni.node_guid,
        rig.topo.node(rig.node("Hca2")).unwrap().node_guid
    );
    assert_eq!(rig.sim.lft_entry(rig.node("Switch2"), HCA2), Some(1));

    // A LID nobody owns, routed to Hca2's port: dropped there.
    program_lft(
        &mut rig,
        sm,
        &[1, 3],
        &[(HCA1, 3), (SW1, 3), (SW2, 0), (HCA2, 1), (9, 1)],
        9,
    );
    program_lft(
        &mut rig,
        sm,
        &[1],
        &[(HCA1, 1), (SW1, 0), (SW2, 3), (HCA2, 3), (9, 3)],
        9,
    );
    assert!(lid_get(&mut rig, sm, 9, AttributeId::NODE_INFO).is_empty());

    // A routing loop is cut, not spun forever.
    program_lft(
        &mut rig,
        sm,
        &[1],
        &[(HCA1, 1), (SW1, 0), (SW2, 3), (HCA2, 3), (10, 3)],
        10,
    );
    program_lft(
        &mut rig,
        sm,
        &[1, 3],
        &[(HCA1, 3), (SW1, 3), (SW2, 0), (HCA2, 1), (10, 5)],
        10,
    );
    assert!(lid_get(&mut rig, sm, 10, AttributeId::NODE_INFO).is_empty());

    // A LID-routed request to our own LID loops back in the HCA.
    assert_eq!(lid_get(&mut rig, sm, HCA1, AttributeId::NODE_INFO).len(), 1);
}

fn set_state(rig: &mut Rig, sm: ClientId, path: &[u8], amod: u32, state: PortState) -> Smp {
    let pi: PortInfo = rig
        .dr_get(sm, path, AttributeId::PORT_INFO, amod)
        .attribute()
        .unwrap();
    rig.dr_set(
        sm,
        path,
        amod,
        &PortInfo {
            port_state: state,
            ..pi
        },
    )
}

#[test]
fn port_state_machine_legality_and_port_state_change() {
    let mut rig = Rig::new();
    let sm = rig.attach("Hca1");
    let sw1 = rig.node("Switch1");
    // Fresh fabric: cabled ports in Init; PortStateChange clear.
    assert_eq!(rig.sim.port_state(sw1, 3).unwrap(), PortState::Init);
    assert_eq!(rig.sim.port_state_change(sw1), Some(false));

    // Init -> Active skips Armed: invalid attribute value, nothing changes.
    assert_eq!(
        set_state(&mut rig, sm, &[1], 3, PortState::Active).status,
        0x1C
    );
    assert_eq!(rig.sim.port_state(sw1, 3).unwrap(), PortState::Init);
    // Writing back the current state is no change.
    assert_eq!(set_state(&mut rig, sm, &[1], 3, PortState::Init).status, 0);
    // Init -> Armed -> Active.
    let r = set_state(&mut rig, sm, &[1], 3, PortState::Armed);
    assert_eq!(r.status, 0);
    assert_eq!(
        r.attribute::<PortInfo>().unwrap().port_state,
        PortState::Armed
    );
    // Init is entered by link training only, never by an SMP.
    assert_eq!(
        set_state(&mut rig, sm, &[1], 3, PortState::Init).status,
        0x1C
    );
    assert_eq!(rig.sim.port_state(sw1, 3).unwrap(), PortState::Armed);
    assert_eq!(
        set_state(&mut rig, sm, &[1], 3, PortState::Other(9)).status,
        0x1C
    );
    assert_eq!(
        set_state(&mut rig, sm, &[1], 3, PortState::Active).status,
        0
    );
    assert_eq!(rig.sim.port_state(sw1, 3).unwrap(), PortState::Active);
    // Active -> Armed is not a legal SMP transition.
    assert_eq!(
        set_state(&mut rig, sm, &[1], 3, PortState::Armed).status,
        0x1C
    );
    // SMP-driven transitions do not raise PortStateChange.
    assert_eq!(rig.sim.port_state_change(sw1), Some(false));
    // Active on a Down port is invalid.
    assert_eq!(
        set_state(&mut rig, sm, &[1], 4, PortState::Armed).status,
        0x1C
    );

    // Down bounces the link: both ends retrain to Init and the switch notes the change.
    assert_eq!(set_state(&mut rig, sm, &[1], 3, PortState::Down).status, 0);
    assert_eq!(rig.sim.port_state(sw1, 3).unwrap(), PortState::Init);
    assert_eq!(
        rig.sim.port_state(rig.node("Switch2"), 3).unwrap(),
        PortState::Init
    );
    assert_eq!(rig.sim.port_state_change(sw1), Some(true));
    let si: SwitchInfo = rig
        .dr_get(sm, &[1], AttributeId::SWITCH_INFO, 0)
        .attribute()
        .unwrap();
    assert!(si.port_state_change);
    // Writing 0 leaves it, writing 1 clears it.
    let r = rig.dr_set(
        sm,
        &[1],
        0,
        &SwitchInfo {
            port_state_change: false,
            ..si
        },
    );
    assert!(r.attribute::<SwitchInfo>().unwrap().port_state_change);
    let r = rig.dr_set(
        sm,
        &[1],
        0,
        &SwitchInfo {
            port_state_change: true,
            ..si
        },
    );
    assert!(!r.attribute::<SwitchInfo>().unwrap().port_state_change);

    // A CA port's PortInfo may be read through another port, not written.
    let pi: PortInfo = rig
        .dr_get(sm, &[], AttributeId::PORT_INFO, 2)
        .attribute()
        .unwrap();
    assert_eq!(pi.local_port_num, 1);
    assert_eq!(rig.dr_set(sm, &[], 2, &pi).status, 0x1C);
    // LIDs in the multicast range are not unicast base LIDs.
    let pi: PortInfo = rig
        .dr_get(sm, &[], AttributeId::PORT_INFO, 0)
        .attribute()
        .unwrap();
    assert_eq!(
        rig.dr_set(sm, &[], 0, &PortInfo { lid: 0xC001, ..pi })
            .status,
        0x1C
    );
    // LinearFDBTop beyond the cap.
    let si: SwitchInfo = rig
        .dr_get(sm, &[1], AttributeId::SWITCH_INFO, 0)
        .attribute()
        .unwrap();
    assert_eq!(si.linear_fdb_cap, 49152);
    assert_eq!(
        rig.dr_set(
            sm,
            &[1],
            0,
            &SwitchInfo {
                linear_fdb_top: 49152,
                ..si
            }
        )
        .status,
        0x1C
    );
}

#[test]
fn is_sm_bit_follows_the_client() {
    let mut rig = Rig::new();
    let sm = rig.attach("Hca1");
    let cap = |rig: &mut Rig| {
        rig.dr_get(sm, &[], AttributeId::PORT_INFO, 0)
            .attribute::<PortInfo>()
            .unwrap()
            .capability_mask
    };
    assert!(!cap(&mut rig).is_sm());
    rig.sim.set_is_sm(sm, true).unwrap();
    assert!(cap(&mut rig).is_sm());
    rig.sim.set_is_sm(sm, false).unwrap();
    assert!(!cap(&mut rig).is_sm());
}

#[test]
fn sminfo_goes_to_the_attached_sm_and_its_answer_comes_back() {
    let mut rig = Rig::new();
    let a = rig.attach("Hca1");
    let b = rig.attach("Hca2");
    rig.sim.set_is_sm(b, true).unwrap();

    // A asks Hca2 (3 hops) for SMInfo: the SMA does not answer, B gets the request.
    let req = Smp::get_dr(&[1, 3, 1], AttributeId::SM_INFO, 0, 0x5A5A);
    let out = rig.exchange(a, &req.encode());
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].client, b);
    let got = Smp::decode(&out[0].mad).unwrap();
    assert_eq!(got.method, ibsm_mad::Method::GET);
    assert_eq!(got.tid, 0x5A5A);
    let dr = got.directed().unwrap();
    assert!(!dr.direction);
    assert_eq!(
        dr.hop_ptr, 4,
        "the destination sees HopPointer = HopCount + 1"
    );
    assert_eq!(&dr.return_path[1..4], &[1, 3, 1]);
    assert_eq!(rig.sim.stats().forwarded_to_clients, 1);

    // B answers as an SM does: GetResp with its SMInfo, D=1, paths as received.
    let mut data = [0u8; 64];
    data[0..8].copy_from_slice(&0x0002_c903_0000_0002u64.to_be_bytes());
    data[20] = (5 << 4) | 2; // priority 5, STANDBY
    let resp = got.response().with_data(data);
    let out = rig.exchange(b, &resp.encode());
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].client, a);
    let r = Smp::decode(&out[0].mad).unwrap();
    assert_eq!(
        (r.method, r.tid, r.data),
        (ibsm_mad::Method::GET_RESP, 0x5A5A, data)
    );
    let dr = r.directed().unwrap();
    assert!(dr.direction);
    assert_eq!(dr.hop_ptr, 0);

    // ibsim's clients answer with HopPointer 0: accepted too.
    let req = Smp::get_dr(&[1, 3, 1], AttributeId::SM_INFO, 0, 0x5A5B);
    let got = Smp::decode(&rig.exchange(a, &req.encode())[0].mad).unwrap();
    let mut resp = got.response().with_data(data);
    resp.directed_mut().unwrap().hop_ptr = 0;
    let out = rig.exchange(b, &resp.encode());
    assert_eq!((out.len(), out[0].client), (1, a));

    // SMInfo to a port without a client: no answer at all.
    let req = Smp::get_dr(&[1, 2], AttributeId::SM_INFO, 0, 0x5A5C);
    assert!(rig.exchange(a, &req.encode()).is_empty());
    assert_eq!(rig.sim.stats().dropped_no_client, 1);
    let req = Smp::get_dr(&[1], AttributeId::SM_INFO, 0, 0x5A5D);
    assert!(
        rig.exchange(a, &req.encode()).is_empty(),
        "switches run no SM here"
    );
}

#[test]
fn lid_routed_sminfo_answer_follows_the_slid() {
    let mut rig = Rig::new();
    let a = rig.attach("Hca1");
    let b = rig.attach("Hca2");
    set_lid(&mut rig, a, &[], HCA1);
    set_lid(&mut rig, a, &[1, 3, 1], HCA2);
    program_lft(&mut rig, a, &[1], &[(HCA1, 1), (HCA2, 3)], 4);
    program_lft(&mut rig, a, &[1, 3], &[(HCA1, 3), (HCA2, 1)], 4);
    let out = rig.exchange_to(a, HCA2, &Smp::get_lid(AttributeId::SM_INFO, 0, 77).encode());
    assert_eq!((out.len(), out[0].client, out[0].slid), (1, b, HCA1));
    let got = Smp::decode(&out[0].mad).unwrap();
    // `send` (no DLID) finds the requester's LID from the request B was handed.
    let out = rig.exchange(b, &got.response().with_data([7; 64]).encode());
    assert_eq!((out.len(), out[0].client, out[0].slid), (1, a, HCA2));
    assert_eq!(Smp::decode(&out[0].mad).unwrap().data, [7; 64]);
    // A LID-routed request without a DLID is refused.
    assert!(rig
        .sim
        .send(
            rig.now,
            a,
            &Smp::get_lid(AttributeId::NODE_INFO, 0, 1).encode()
        )
        .is_err());
}

#[test]
fn link_down_and_removed_nodes_stop_answers() {
    let mut rig = Rig::new();
    let sm = rig.attach("Hca1");
    let sw1 = rig.node("Switch1");
    let get = |rig: &mut Rig, path: &[u8]| {
        let tid = rig.next_tid();
        rig.exchange(
            sm,
            &Smp::get_dr(path, AttributeId::NODE_INFO, 0, tid).encode(),
        )
        .len()
    };
    assert_eq!(get(&mut rig, &[1, 3, 1]), 1);
    rig.sim.link_down(sw1, 3).unwrap();
    assert_eq!(
        rig.sim.port_state(rig.node("Switch2"), 3).unwrap(),
        PortState::Down
    );
    assert_eq!(rig.sim.port_state_change(sw1), Some(true));
    assert_eq!(get(&mut rig, &[1, 3, 1]), 0, "nothing beyond the dead link");
    assert_eq!(
        get(&mut rig, &[1, 5, 1]),
        1,
        "the parallel link still works"
    );
    assert_eq!(get(&mut rig, &[1]), 1);
    // An SM setting PortState=Down cannot retrain a pulled cable.
    let pi: PortInfo = rig
        .dr_get(sm, &[1], AttributeId::PORT_INFO, 3)
        .attribute()
        .unwrap();
    assert_eq!(pi.port_state, PortState::Down);
    assert_eq!(
        rig.dr_set(
            sm,
            &[1],
            3,
            &PortInfo {
                port_state: PortState::Down,
                ..pi
            }
        )
        .status,
        0
    );
    assert_eq!(rig.sim.port_state(sw1, 3).unwrap(), PortState::Down);
    rig.sim.link_up(sw1, 3).unwrap();
    assert_eq!(rig.sim.port_state(sw1, 3).unwrap(), PortState::Init);
    assert_eq!(get(&mut rig, &[1, 3, 1]), 1);

    rig.sim.remove_node(rig.node("Switch2")).unwrap();
    assert_eq!(get(&mut rig, &[1, 3]), 0);
    assert_eq!(get(&mut rig, &[1, 5, 1]), 0);
    assert_eq!(rig.sim.port_state(sw1, 5).unwrap(), PortState::Down);
    assert_eq!(get(&mut rig, &[1, 2]), 1, "the rest of the fabric is fine");
    assert!(rig.sim.link_down(sw1, 0).is_err(), "port 0 has no cable");
    assert!(rig.sim.link_down(sw1, 9).is_err());
}

fn answered_tids(seed: u64) -> Vec<u64> {
    let topo = common::two_switch_topology();
    let mut sim = Sim::new(&topo, SimConfig::default());
    let sm = sim.attach(topo.find_by_name("Hca1").unwrap(), 1).unwrap();
    sim.set_loss(0.3, seed).unwrap();
    let now = std::time::Duration::from_millis(1);
    for tid in 0..400u64 {
        sim.send(
            now,
            sm,
            &Smp::get_dr(&[1, 3], AttributeId::NODE_INFO, 0, tid).encode(),
        )
        .unwrap();
    }
    let later = now + std::time::Duration::from_secs(1);
    let mut tids = Vec::new();
    while let Some((c, m)) = sim.poll_delivery(later) {
        assert_eq!(c, sm);
        tids.push(ibsm_mad::peek_tid(&m).unwrap());
    }
    assert_eq!(sim.stats().dropped_loss as usize + tids.len(), 400);
    tids
}

#[test]
fn loss_is_reproducible_per_seed() {
    let a = answered_tids(42);
    assert_eq!(a, answered_tids(42));
    assert_ne!(a, answered_tids(43));
    assert!(
        (200..360).contains(&a.len()),
        "about 70% of 400 answered, got {}",
        a.len()
    );
    let topo = common::two_switch_topology();
    let mut sim = Sim::new(&topo, SimConfig::default());
    assert!(sim.set_loss(1.5, 1).is_err());
    assert!(sim.set_loss(f64::NAN, 1).is_err());
}

#[test]
fn latency_and_poll_timeout() {
    let mut rig = Rig::new();
    let sm = rig.attach("Hca1");
    rig.sim.set_latency(std::time::Duration::from_micros(50));
    let t0 = std::time::Duration::from_millis(3);
    assert_eq!(rig.sim.poll_timeout(), None);
    rig.sim
        .send(
            t0,
            sm,
            &Smp::get_dr(&[1], AttributeId::NODE_INFO, 0, 1).encode(),
        )
        .unwrap();
    rig.sim
        .send(
            t0,
            sm,
            &Smp::get_dr(&[1, 3], AttributeId::NODE_INFO, 0, 2).encode(),
        )
        .unwrap();
    let due = t0 + std::time::Duration::from_micros(50);
    assert_eq!(rig.sim.poll_timeout(), Some(due));
    assert!(rig
        .sim
        .poll_delivery(due - std::time::Duration::from_nanos(1))
        .is_none());
    let first = rig.sim.poll_delivery(due).unwrap();
    let second = rig.sim.poll_delivery(due).unwrap();
    assert_eq!(
        ibsm_mad::peek_tid(&first.1),
        Some(1),
        "ties come out in send order"
    );
    assert_eq!(ibsm_mad::peek_tid(&second.1), Some(2));
    assert_eq!(rig.sim.poll_timeout(), None);
    // Detached clients get nothing.
    rig.sim
        .send(
            t0,
            sm,
            &Smp::get_dr(&[1], AttributeId::NODE_INFO, 0, 3).encode(),
        )
        .unwrap();
    rig.sim.detach(sm).unwrap();
    assert!(rig.sim.poll_delivery(due).is_none());
    assert!(rig.sim.send(t0, sm, &[0u8; 256]).is_err());
}

#[test]
fn directed_route_trap_repress_travels_back_like_a_response() {
    let mut rig = Rig::new();
    let a = rig.attach("Hca1");
    let b = rig.attach("Hca2");
    rig.sim.set_is_sm(b, true).unwrap();

    // A sends a directed-route Trap to the SM at Hca2 (3 hops): B gets it.
    let mut trap = Smp::get_dr(&[1, 3, 1], AttributeId::NOTICE, 0, 0x7A7A);
    trap.method = ibsm_mad::Method::TRAP;
    let out = rig.exchange(a, &trap.encode());
    assert_eq!((out.len(), out[0].client), (1, b));
    let got = Smp::decode(&out[0].mad).unwrap();
    assert_eq!(got.method, ibsm_mad::Method::TRAP);

    // B represses it as Linux's ib_response_mad treats TrapRepress: a response with D = 1
    // and the paths as received. It must reach A, not be refused as a bad D bit.
    let mut repress = got.response();
    repress.method = ibsm_mad::Method::TRAP_REPRESS;
    let out = rig.exchange(b, &repress.encode());
    assert_eq!(
        out.len(),
        1,
        "the TrapRepress must come back to the trap sender"
    );
    assert_eq!(out[0].client, a);
    let r = Smp::decode(&out[0].mad).unwrap();
    assert_eq!((r.method, r.tid), (ibsm_mad::Method::TRAP_REPRESS, 0x7A7A));
    assert!(r.directed().unwrap().direction);
}
