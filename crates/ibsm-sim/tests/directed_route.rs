//! Directed-route SMPs through ibsim's 2-switch example fabric, checked against
//! request/response bytes written out by hand from IBA 14.2.2 (not produced by the
//! code under test).

mod common;

use common::Rig;
use ibsm_mad::{AttributeId, Smp};
use ibsm_sim::SimError;

/// A SubnGet(attr) directed-route request, byte by byte (IBA 14.2.1.2).
fn golden_request(path: &[u8], attr: u16, amod: u32, tid: u64) -> [u8; 256] {
    let mut m = [0u8; 256];
    m[0] = 1; // BaseVersion
    m[1] = 0x81; // SubnDirectedRoute
    m[2] = 1; // ClassVersion
    m[3] = 0x01; // Get
    m[6] = 0; // HopPointer
    m[7] = path.len() as u8; // HopCount
    m[8..16].copy_from_slice(&tid.to_be_bytes());
    m[16..18].copy_from_slice(&attr.to_be_bytes());
    m[20..24].copy_from_slice(&amod.to_be_bytes());
    m[32..34].copy_from_slice(&[0xFF, 0xFF]); // DrSLID
    m[34..36].copy_from_slice(&[0xFF, 0xFF]); // DrDLID
    for (i, p) in path.iter().enumerate() {
        m[128 + 1 + i] = *p; // InitialPath[1..]
    }
    m
}

/// The response the requester must see: GetResp, D=1 + status 0, HopPointer 0, the
/// ReturnPath filled with the arrival ports, and `data` in the data field.
fn golden_response(req: &[u8; 256], return_path: &[u8], data: &[u8; 64]) -> [u8; 256] {
    let mut m = *req;
    m[3] = 0x81;
    m[4] = 0x80;
    m[5] = 0;
    m[6] = 0;
    for (i, p) in return_path.iter().enumerate() {
        m[192 + 1 + i] = *p;
    }
    m[64..128].copy_from_slice(data);
    m
}

/// NodeInfo data (IBA 14.2.5.3) written field by field.
fn golden_node_info(rig: &Rig, name: &str, local_port: u8) -> [u8; 64] {
    let n = rig.topo.node(rig.node(name)).expect("node");
    let mut d = [0u8; 64];
    d[0] = 1;
    d[1] = 1;
    d[2] = n.node_type.to_iba();
    d[3] = n.num_ports();
    d[4..12].copy_from_slice(&n.system_image_guid.to_be_bytes());
    d[12..20].copy_from_slice(&n.node_guid.to_be_bytes());
    d[20..28].copy_from_slice(&n.ports[usize::from(local_port)].port_guid.to_be_bytes());
    d[28..30].copy_from_slice(&128u16.to_be_bytes()); // PartitionCap (SimConfig default)
    d[30..32].copy_from_slice(&n.device_id.to_be_bytes());
    // Revision 0 (32..36).
    d[36] = local_port;
    d[37..40].copy_from_slice(&n.vendor_id.to_be_bytes()[1..]);
    d
}

#[test]
fn golden_pairs_zero_to_four_hops() {
    let mut rig = Rig::new();
    let sm = rig.attach("Hca1");
    // (path, destination, arrival ports = expected ReturnPath)
    let cases: &[(&[u8], &str, &[u8])] = &[
        (&[], "Hca1", &[]),
        (&[1], "Switch1", &[1]),
        (&[1, 3], "Switch2", &[1, 3]),
        (&[1, 5], "Switch2", &[1, 5]),
        (&[1, 3, 1], "Hca2", &[1, 3, 1]),
        (&[1, 3, 5, 2], "Hca3", &[1, 3, 5, 1]),
    ];
    for (i, (path, dest, ret)) in cases.iter().enumerate() {
        let tid = 0xABCD_0000 + i as u64;
        let req = golden_request(path, 0x0011, 0, tid);
        // The codec builds the same request bytes.
        assert_eq!(
            req,
            Smp::get_dr(path, AttributeId::NODE_INFO, 0, tid).encode()
        );
        let out = rig.exchange(sm, &req);
        assert_eq!(out.len(), 1, "one answer for path {path:?}");
        let local_port = ret.last().copied().unwrap_or(1);
        let want = golden_response(&req, ret, &golden_node_info(&rig, dest, local_port));
        assert_eq!(out[0].client, sm);
        assert_eq!(out[0].slid, 0xFFFF);
        assert_eq!(
            &out[0].mad[..],
            &want[..],
            "response bytes for path {path:?}"
        );
    }
}

#[test]
fn port_info_of_switch_port_reports_receiving_port_and_modifier_port() {
    let mut rig = Rig::new();
    let sm = rig.attach("Hca1");
    // Switch2 reached through its port 5; read PortInfo of its port 1 (to Hca2).
    let r = rig.dr_get(sm, &[1, 5], AttributeId::PORT_INFO, 1);
    assert_eq!(r.status, 0);
    let pi: ibsm_mad::PortInfo = r.attribute().expect("PortInfo");
    assert_eq!(
        pi.local_port_num, 5,
        "LocalPortNum is the port that received the SMP"
    );
    assert_eq!(pi.port_state, ibsm_mad::PortState::Init);
    assert_eq!(pi.port_physical_state, ibsm_mad::PhysPortState::LinkUp);
    // Unconnected port 4 is Down/Polling.
    let r = rig.dr_get(sm, &[1, 5], AttributeId::PORT_INFO, 4);
    let pi: ibsm_mad::PortInfo = r.attribute().expect("PortInfo");
    assert_eq!(pi.port_state, ibsm_mad::PortState::Down);
    assert_eq!(pi.port_physical_state, ibsm_mad::PhysPortState::Polling);
    // Modifier beyond NumPorts: invalid attribute value.
    let r = rig.dr_get(sm, &[1, 5], AttributeId::PORT_INFO, 9);
    assert_eq!(r.status, 0x1C);
}

#[test]
fn ca_in_the_middle_of_a_path_drops_the_smp() {
    let mut rig = Rig::new();
    let sm = rig.attach("Hca1");
    // Hca2 is reached at hop 3 and would have to forward: CAs do not (C14-9:2).
    let req = Smp::get_dr(&[1, 3, 1, 1], AttributeId::NODE_INFO, 0, 7).encode();
    assert!(rig.exchange(sm, &req).is_empty());
    assert_eq!(rig.sim.stats().dropped_bad_path, 1);
    // A path through a non-existent port is dropped too.
    let req = Smp::get_dr(&[1, 9], AttributeId::NODE_INFO, 0, 8).encode();
    assert!(rig.exchange(sm, &req).is_empty());
    // An unconnected port: nothing comes back.
    let req = Smp::get_dr(&[1, 4, 1], AttributeId::NODE_INFO, 0, 9).encode();
    assert!(rig.exchange(sm, &req).is_empty());
    assert_eq!(rig.sim.stats().dropped_link, 1);
}

#[test]
fn strict_header_checks_on_what_a_client_sends() {
    let mut rig = Rig::new();
    let sm = rig.attach("Hca1");
    let good = golden_request(&[1, 3], 0x0011, 0, 1);

    let mut m = good;
    m[6] = 1; // HopPointer must be 0
    assert!(matches!(
        rig.sim.send(rig.now, sm, &m),
        Err(SimError::BadDirectedRoute {
            field: "HopPointer",
            ..
        })
    ));

    let mut m = good;
    m[32] = 0; // DrSLID not permissive
    assert!(matches!(
        rig.sim.send(rig.now, sm, &m),
        Err(SimError::Unsupported(_))
    ));

    let mut m = good;
    m[129] = 2; // InitialPath[1] is not the client's port (1)
    assert!(matches!(
        rig.sim.send(rig.now, sm, &m),
        Err(SimError::BadDirectedRoute {
            field: "InitialPath[1]",
            ..
        })
    ));

    let mut m = good;
    m[4] = 0x80; // D=1 on a request
    assert!(matches!(
        rig.sim.send(rig.now, sm, &m),
        Err(SimError::BadDirectedRoute { field: "D", .. })
    ));

    let mut m = good;
    m[7] = 64; // HopCount > 63
    assert!(rig.sim.send(rig.now, sm, &m).is_err());

    assert!(matches!(
        rig.sim.send(rig.now, sm, &good[..255]),
        Err(SimError::BadLength { got: 255 })
    ));
    let mut m = good;
    m[1] = 0x03; // SA class
    assert!(matches!(
        rig.sim.send(rig.now, sm, &m),
        Err(SimError::BadHeader {
            field: "MgmtClass",
            ..
        })
    ));
    assert_eq!(
        rig.sim.stats().sent,
        0,
        "refused MADs are not counted as sent"
    );
}

#[test]
fn sma_status_codes() {
    let mut rig = Rig::new();
    let sm = rig.attach("Hca1");
    // Unknown attribute: 0x0C.
    assert_eq!(rig.dr_get(sm, &[1], AttributeId(0x0077), 0).status, 0x0C);
    // RandomForwardingTable is not implemented (RandomFDBCap 0).
    assert_eq!(
        rig.dr_get(sm, &[1], AttributeId::RANDOM_FORWARDING_TABLE, 0)
            .status,
        0x0C
    );
    // SwitchInfo on a CA: not implemented there.
    assert_eq!(
        rig.dr_get(sm, &[], AttributeId::SWITCH_INFO, 0).status,
        0x0C
    );
    // NodeInfo with a modifier: invalid.
    assert_eq!(rig.dr_get(sm, &[1], AttributeId::NODE_INFO, 1).status, 0x1C);
    // Set of read-only NodeInfo: 0x0C.
    assert_eq!(
        rig.dr_set_raw(sm, &[1], AttributeId::NODE_INFO, 0, [0; 64])
            .status,
        0x0C
    );
    // LFT block beyond LinearFDBCap (49152 / 64 = 768 blocks).
    assert_eq!(
        rig.dr_get(sm, &[1], AttributeId::LINEAR_FORWARDING_TABLE, 768)
            .status,
        0x1C
    );
    // Unprogrammed LFT block reads as all 0xFF.
    let r = rig.dr_get(sm, &[1], AttributeId::LINEAR_FORWARDING_TABLE, 767);
    assert_eq!((r.status, r.data), (0, [0xFF; 64]));
    // P_Key table default: 0xFFFF at index 0.
    let r = rig.dr_get(sm, &[], AttributeId::P_KEY_TABLE, 0);
    assert_eq!(&r.data[..4], &[0xFF, 0xFF, 0, 0]);
    assert_eq!(
        rig.dr_get(sm, &[], AttributeId::P_KEY_TABLE, 4).status,
        0x1C,
        "128 entries = 4 blocks"
    );
    // GUIDInfo entry 0 is the port GUID.
    let r = rig.dr_get(sm, &[], AttributeId::GUID_INFO, 0);
    let guid = rig.topo.node(rig.node("Hca1")).unwrap().ports[1].port_guid;
    assert_eq!(&r.data[..8], &guid.to_be_bytes());
    // VLArbitration block selector 0 is reserved.
    assert_eq!(
        rig.dr_get(sm, &[], AttributeId::VL_ARBITRATION_TABLE, 0)
            .status,
        0x1C
    );
    // Unsupported method: 0x08, with the response bit set.
    let mut m = golden_request(&[1], 0x0011, 0, 5);
    m[3] = 0x03;
    let out = rig.exchange(sm, &m);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].mad[3], 0x83);
    assert_eq!(u16::from_be_bytes([out[0].mad[4], out[0].mad[5]]), 0x8008);
}

#[test]
fn sets_are_stored_and_read_back() {
    let mut rig = Rig::new();
    let sm = rig.attach("Hca1");
    let mut keys = [0u8; 64];
    keys[0..2].copy_from_slice(&0xFFFFu16.to_be_bytes());
    keys[2..4].copy_from_slice(&0x8001u16.to_be_bytes());
    let r = rig.dr_set_raw(sm, &[1, 3, 1], AttributeId::P_KEY_TABLE, 0, keys);
    assert_eq!((r.status, r.data), (0, keys));
    assert_eq!(
        rig.dr_get(sm, &[1, 3, 1], AttributeId::P_KEY_TABLE, 0).data,
        keys
    );
    // Switch external port P_Key table (port in bits 31:16).
    let r = rig.dr_set_raw(sm, &[1], AttributeId::P_KEY_TABLE, 3 << 16, keys);
    assert_eq!(r.status, 0);
    assert_eq!(
        rig.dr_get(sm, &[1], AttributeId::P_KEY_TABLE, 2 << 16).data[..4],
        [0xFF, 0xFF, 0, 0]
    );

    let mut sl2vl = [0u8; 64];
    sl2vl[..8].copy_from_slice(&[0x01, 0x23, 0x45, 0x67, 0x01, 0x23, 0x45, 0x67]);
    let amod = (3 << 8) | 1; // in port 3, out port 1
    assert_eq!(
        rig.dr_set_raw(sm, &[1], AttributeId::SL_TO_VL_MAPPING_TABLE, amod, sl2vl)
            .status,
        0
    );
    assert_eq!(
        rig.dr_get(sm, &[1], AttributeId::SL_TO_VL_MAPPING_TABLE, amod)
            .data,
        sl2vl
    );
    assert_eq!(
        rig.dr_get(sm, &[1], AttributeId::SL_TO_VL_MAPPING_TABLE, (1 << 8) | 3)
            .data,
        [0; 64]
    );
    assert_eq!(
        rig.dr_get(sm, &[1], AttributeId::SL_TO_VL_MAPPING_TABLE, 1 << 16)
            .status,
        0x1C
    );

    let mut led = [0u8; 64];
    led[0] = 0x80;
    assert_eq!(
        rig.dr_set_raw(sm, &[1], AttributeId::LED_INFO, 0, led).data[0],
        0x80
    );
    assert_eq!(rig.dr_get(sm, &[1], AttributeId::LED_INFO, 0).data[0], 0x80);

    let mut mft = [0u8; 64];
    mft[0..2].copy_from_slice(&0x0006u16.to_be_bytes());
    assert_eq!(
        rig.dr_set_raw(sm, &[1], AttributeId::MULTICAST_FORWARDING_TABLE, 2, mft)
            .status,
        0
    );
    assert_eq!(
        rig.dr_get(sm, &[1], AttributeId::MULTICAST_FORWARDING_TABLE, 2)
            .data,
        mft
    );
    assert_eq!(
        rig.dr_get(sm, &[1], AttributeId::MULTICAST_FORWARDING_TABLE, 1 << 28)
            .status,
        0x1C,
        "8 ports: position 0 only"
    );
}
