//! Golden vectors: SMP data fields captured from ibsim's SMAs and OpenSM (see the
//! `# command:` line of each file in tests/golden/). Each test decodes the bytes,
//! checks fields against what the net file / ibsim / OpenSM are known to hold, and
//! checks that re-encoding gives the captured bytes back bit for bit.

use ibsm_mad::modifier::{Sl2VlPorts, VlArbBlock, VlArbSection};
use ibsm_mad::*;

/// Reads a golden file: `#` lines are comments, the rest is smpdump's hex words.
fn golden(name: &str) -> [u8; 64] {
    let path = format!("{}/tests/golden/{name}.txt", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    assert!(
        text.lines().any(|l| l.starts_with("# command:")),
        "{path}: golden files must say which command produced them"
    );
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        for word in line.split_whitespace() {
            assert_eq!(word.len(), 4, "{path}: bad hex word {word:?}");
            let v = u16::from_str_radix(word, 16).unwrap_or_else(|e| panic!("{path}: {e}"));
            out.extend_from_slice(&v.to_be_bytes());
        }
    }
    out.try_into()
        .unwrap_or_else(|v: Vec<u8>| panic!("{path}: {} bytes, want 64", v.len()))
}

fn roundtrip<A: SmpAttribute + std::fmt::Debug + PartialEq>(name: &str) -> A {
    let bytes = golden(name);
    let a = A::decode(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(
        a.encode(),
        bytes,
        "{name}: re-encode differs from the peer's bytes"
    );
    assert_eq!(A::decode(&a.encode()).as_ref(), Ok(&a));
    a
}

// ibsim numbers GUIDs per node in file order: HCAs from 0x100000 (NodeGUID, then one
// PortGUID per port), switches from 0x200000 (one GUID for node and all ports).
const HCA1_NODE_GUID: u64 = 0x10_0000;
const HCA1_PORT1_GUID: u64 = 0x10_0001;
const HCA2_PORT1_GUID: u64 = 0x10_0004;
const SWITCH1_GUID: u64 = 0x20_0000;
const SWITCH2_GUID: u64 = 0x20_0001;

#[test]
fn node_info_of_a_ca() {
    let ni: NodeInfo = roundtrip("node_info_hca1");
    assert_eq!(ni.base_version, 1);
    assert_eq!(ni.class_version, 1);
    assert_eq!(ni.node_type, NodeType::Ca);
    assert_eq!(ni.num_ports, 2, "net file: Hca 2 \"Hca1\"");
    assert_eq!(ni.system_image_guid, HCA1_NODE_GUID);
    assert_eq!(ni.node_guid, HCA1_NODE_GUID);
    assert_eq!(ni.port_guid, HCA1_PORT1_GUID);
    assert_eq!(ni.local_port_num, 1, "only port 1 is cabled");
    assert_eq!(ni.partition_cap, 64);
    assert_eq!(ni.revision, 0xa1);
    assert_eq!(ni.vendor_id, 0);
}

#[test]
fn node_info_of_a_switch_from_port0_and_port1() {
    let p0: NodeInfo = roundtrip("node_info_switch1_port0");
    assert_eq!(p0.node_type, NodeType::Switch);
    assert_eq!(p0.num_ports, 8, "net file: Switch 8 \"Switch1\"");
    assert_eq!(p0.node_guid, SWITCH1_GUID);
    assert_eq!(
        p0.port_guid, SWITCH1_GUID,
        "all switch ports share one GUID"
    );
    assert_eq!(p0.system_image_guid, SWITCH1_GUID);
    assert_eq!(
        p0.local_port_num, 0,
        "0-hop SMP from the switch's own port 0"
    );
    let p1: NodeInfo = roundtrip("node_info_switch1_via_port1");
    assert_eq!(p1.local_port_num, 1, "Hca1[1] is cabled to Switch1[1]");
    assert_eq!(
        NodeInfo {
            local_port_num: 0,
            ..p1
        },
        p0
    );
    let sw2: NodeInfo = roundtrip("node_info_switch2_via_switch1");
    assert_eq!(sw2.node_guid, SWITCH2_GUID);
    assert_eq!(sw2.local_port_num, 3, "Switch1[3] is cabled to Switch2[3]");
}

#[test]
fn switch_info_after_opensm() {
    let si: SwitchInfo = roundtrip("switch_info_switch1");
    assert_eq!(si.linear_fdb_cap, 30720, "ibsim MaxLinearCap");
    assert_eq!(si.random_fdb_cap, 0);
    assert_eq!(si.multicast_fdb_cap, 1024, "ibsim MaxMcastCap");
    assert_eq!(
        si.linear_fdb_top, 6,
        "OpenSM assigned LIDs 1..=6 to 6 nodes"
    );
    assert_eq!(
        si.life_time_value, 18,
        "OpenSM's default packet_life_time 0x12"
    );
    assert!(!si.port_state_change, "OpenSM clears PortStateChange");
    assert_eq!(si.partition_enforcement_cap, 64);
    assert!(si.filter_raw_inbound_cap && si.filter_raw_outbound_cap);
    assert!(!si.inbound_enforcement_cap && !si.outbound_enforcement_cap);
}

#[test]
fn port_info_of_an_active_ca_port() {
    let pi: PortInfo = roundtrip("port_info_hca1_port1");
    assert_eq!(pi.gid_prefix, 0xfe80_0000_0000_0000);
    assert_eq!(pi.lid, 3);
    assert_eq!(pi.master_sm_lid, 1, "sminfo: sm lid 1");
    assert!(!pi.capability_mask.is_sm());
    assert!(pi.capability_mask.is_trap_supported());
    assert!(pi
        .capability_mask
        .contains(CapabilityMask::IS_SL_MAPPING_SUPPORTED));
    assert!(pi.diag_code.is_ok());
    assert_eq!(pi.local_port_num, 1);
    assert_eq!(pi.port_state, PortState::Active);
    assert_eq!(pi.port_physical_state, PhysPortState::LinkUp);
    assert_eq!(pi.link_width_active, 2, "4x");
    assert_eq!(pi.neighbor_mtu, 4, "2048");
    assert_eq!(pi.mtu_cap, 4);
    assert_eq!(pi.vl_cap, 4);
    assert_eq!(pi.operational_vls, 4);
    assert_eq!(pi.guid_cap, 32);
    assert_eq!(pi.lmc, 0);
    assert_eq!(pi.capability_mask2, 0x0030);
}

#[test]
fn port_info_of_switch_ports() {
    let p0: PortInfo = roundtrip("port_info_switch1_port0");
    assert_eq!(p0.lid, 2, "switch LID lives on port 0");
    assert_eq!(p0.master_sm_lid, 1);
    assert_eq!(p0.local_port_num, 1, "the SMP entered through port 1");
    assert_eq!(p0.resp_time_value, 8);
    let p3: PortInfo = roundtrip("port_info_switch1_port3");
    assert_eq!(
        p3.port_state,
        PortState::Active,
        "Switch1[3]-Switch2[3] is cabled"
    );
    assert_eq!(p3.lid, 0, "external switch ports carry no LID");
    let p4: PortInfo = roundtrip("port_info_switch1_port4_down");
    assert_eq!(p4.port_state, PortState::Down, "Switch1[4] is not cabled");
    assert_eq!(p4.port_physical_state, PhysPortState::Polling);
}

#[test]
fn sm_info_of_opensm_master() {
    let sm: SmInfo = roundtrip("sm_info_opensm_master");
    assert_eq!(sm.guid, HCA2_PORT1_GUID, "OpenSM runs on Hca2 port 1");
    assert_eq!(sm.sm_key, 1, "OpenSM's default sm_key");
    assert_eq!(sm.priority, 10, "opensm -p 10");
    assert_eq!(sm.sm_state, SmState::Master);
    assert!(sm.act_count > 0);
}

#[test]
fn node_description_lft_pkey_guid_info() {
    let nd: NodeDescription = roundtrip("node_description_hca1");
    assert_eq!(nd.as_str(), Ok("Hca1"));
    let lft: LinearForwardingTable = roundtrip("lft_switch1_block0");
    // LIDs: 1 = Hca2 (SM), 2 = Switch1, 3 = Hca1, 4 = Switch2 ...; port 0 = itself.
    assert_eq!(lft.ports[0], LinearForwardingTable::UNASSIGNED);
    assert_eq!(lft.ports[2], 0, "own LID goes to port 0");
    assert_eq!(lft.ports[3], 1, "Hca1 hangs off port 1");
    assert_eq!(lft.ports[7], LinearForwardingTable::UNASSIGNED);
    let pk: PKeyTable = roundtrip("pkey_table_hca1_block0");
    assert_eq!(pk.keys[0], PKey::DEFAULT_FULL);
    assert!(pk.keys[0].is_full_member());
    assert!(pk.keys[1].is_invalid());
    let gi: GuidInfo = roundtrip("guid_info_hca1_block0");
    assert_eq!(
        gi.guids[0], HCA1_PORT1_GUID,
        "GUIDInfo entry 0 is the PortGUID"
    );
}

#[test]
fn qos_tables() {
    let sl2vl: SlToVlMappingTable = roundtrip("sl2vl_hca1");
    assert_eq!(
        sl2vl.vl,
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 7],
        "OpenSM default qos_sl2vl"
    );
    let sw: SlToVlMappingTable = roundtrip("sl2vl_switch1_in1_out3");
    assert_eq!(sw, sl2vl);
    let low: VlArbitrationTable = roundtrip("vlarb_hca1_low_lower");
    // OpenSM default qos_vlarb_low "0:0,1:4,2:4,...,7:4".
    assert_eq!((low.entries[0].vl, low.entries[0].weight), (0, 0));
    for (i, e) in low.entries.iter().enumerate().take(8).skip(1) {
        assert_eq!(
            (usize::from(e.vl), e.weight),
            (i, 4),
            "OpenSM default vlarb_low"
        );
    }
    let high: VlArbitrationTable = roundtrip("vlarb_switch1_port3_high_lower");
    assert_eq!(high.entries[0].weight, 4);
    assert_eq!(high.entries[1].weight, 0);
    let _mft: MulticastForwardingTable = roundtrip("mft_switch1_block0");
    // The modifiers used to fetch them.
    assert_eq!(
        VlArbBlock::from_attr_mod(0x30003),
        Ok(VlArbBlock {
            section: VlArbSection::HighLower,
            port: 3
        })
    );
    assert_eq!(
        Sl2VlPorts::from_attr_mod(0x103),
        Sl2VlPorts {
            in_port: 1,
            out_port: 3,
            all_in_ports: false,
            all_out_ports: false
        }
    );
}
