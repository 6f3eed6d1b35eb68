//! The SA's switch and port table records end to end: a master on the embedded
//! simulator answers SwitchInfo, GUIDInfo, P_Key, SLtoVL, VLArbitration, LFT and MFT
//! record queries (Get and GetTable), checked against the simulator's own tables
//! (its LFT and MFT accessors, and SMP reads of the devices through the simulator
//! from a client of their own), never against the SM's memory.

use std::time::Duration;

use ibsm_fabric::{gen, NodeIdx};
use ibsm_mad::attr::{GuidInfo, PKeyTable, SlToVlMappingTable, SwitchInfo, VlArbitrationTable};
use ibsm_mad::sa::{
    ComponentMask, GuidInfoRecord, JoinState, LinearForwardingTableRecord, McMemberRecord,
    MulticastForwardingTableRecord, PKeyTableRecord, SaMad, SaRecord, SaStatus,
    SlToVlMappingTableRecord, SwitchInfoRecord, VlArbitrationTableRecord,
};
use ibsm_mad::{AttributeId, MadAddress, Method, Smp, SmpAttribute};
use ibsm_sim::ClientId;

use super::sa::{ask, end_lids, get_table, join_mask, port_gid_of};
use super::Lab;
use crate::node::*;

/// One LID-routed SubnGet through the simulator from `probe`, a client of its own
/// (answers to the SM nodes that arrive meanwhile are handed to them).
fn smp_get(lab: &mut Lab, probe: ClientId, dlid: u16, attr: AttributeId, amod: u32) -> Smp {
    let tid = 0x5000_0000 + u64::from(amod) + (u64::from(dlid) << 20);
    let smp = Smp::get_lid(attr, amod, tid);
    lab.sim
        .send_to(lab.now, probe, dlid, &smp.encode())
        .expect("send");
    for _ in 0..10_000 {
        let Some(t) = lab.sim.poll_timeout() else {
            break;
        };
        lab.now = lab.now.max(t);
        while let Some(d) = lab.sim.poll_delivery_from(lab.now) {
            if d.client == probe {
                let r = Smp::decode(&d.mad).expect("an SMP");
                assert_eq!(r.status & 0x7FFF, 0, "SubnGet status");
                return r;
            }
            let now = lab.now;
            if let Some(i) = lab
                .sms
                .iter()
                .position(|m| m.client == d.client && m.node.is_some())
            {
                if let Some(n) = lab.sms[i].node.as_mut() {
                    n.handle_input(
                        now,
                        Input::Mad {
                            mad: &d.mad,
                            slid: d.slid,
                        },
                    );
                }
                lab.drain(i);
            }
        }
    }
    panic!("no answer to SubnGet({attr:?}) of LID {dlid}");
}

fn read<A: SmpAttribute>(lab: &mut Lab, probe: ClientId, dlid: u16, amod: u32) -> A {
    smp_get(lab, probe, dlid, A::ID, amod)
        .attribute::<A>()
        .expect("decodes")
}

fn records<R: SaRecord>(raw: &[Vec<u8>]) -> Vec<R> {
    raw.iter().map(|b| R::decode(b).expect("record")).collect()
}

fn trusted(mut m: SaMad) -> SaMad {
    m.sm_key = 1; // SaConfig's default SA_Key
    m
}

struct Setup {
    lab: Lab,
    client: MadAddress,
    probe: ClientId,
    switches: Vec<(NodeIdx, u16)>,
    cas: Vec<(NodeIdx, u16)>,
}

fn setup() -> Setup {
    let topo = gen::fat_tree_2level(4).expect("topology");
    let mut lab = Lab::new(topo, &[10]);
    lab.run_to(Duration::from_secs(4));
    assert_eq!(lab.masters(), vec![0]);
    let lids = end_lids(&lab);
    let client = MadAddress {
        qpn: 7,
        ..MadAddress::gsi(lids[3])
    };
    let cas: Vec<(NodeIdx, u16)> = lab
        .topo
        .iter()
        .filter(|(_, n)| !n.is_switch())
        .map(|(i, _)| (i, lab.sim.port_lid(i, 1).unwrap()))
        .collect();
    let switches: Vec<(NodeIdx, u16)> = lab
        .topo
        .iter()
        .filter(|(_, n)| n.is_switch())
        .map(|(i, _)| (i, lab.sim.port_lid(i, 0).unwrap()))
        .collect();
    let probe = lab.sim.attach(cas[1].0, 1).expect("a probe client");
    Setup {
        lab,
        client,
        probe,
        switches,
        cas,
    }
}

#[test]
fn switch_records_match_the_switches() {
    let Setup {
        mut lab,
        client,
        probe,
        switches,
        ..
    } = setup();

    // SwitchInfoRecord: one per switch, with its LID, SwitchInfo as the switch reads.
    let req = SaMad::query(
        Method::GET_TABLE,
        1,
        &SwitchInfoRecord::default(),
        ComponentMask::NONE,
    )
    .unwrap();
    let recs: Vec<SwitchInfoRecord> = records(&get_table(&mut lab, 0, &req, client));
    assert_eq!(recs.len(), switches.len());
    for &(idx, lid) in &switches {
        let r = recs
            .iter()
            .find(|r| r.lid == lid)
            .expect("record of switch");
        let si: SwitchInfo = read(&mut lab, probe, lid, 0);
        assert_eq!(r.switch_info.linear_fdb_top, si.linear_fdb_top, "{idx:?}");
        assert_eq!(r.switch_info.linear_fdb_cap, si.linear_fdb_cap);
        assert_eq!(r.switch_info.multicast_fdb_cap, si.multicast_fdb_cap);
        assert_eq!(r.switch_info.life_time_value, si.life_time_value);
        assert!(!r.switch_info.port_state_change);
    }
    // Get by LID: that switch; LID 0 or a CA's LID: none.
    let (_, lid) = switches[1];
    let t = SwitchInfoRecord {
        lid,
        ..SwitchInfoRecord::default()
    };
    let got = ask(
        &mut lab,
        0,
        &SaMad::query(Method::GET, 2, &t, SwitchInfoRecord::LID).unwrap(),
        client,
    );
    assert_eq!(got[0].status(), SaStatus::SUCCESS);
    assert_eq!(got[0].record::<SwitchInfoRecord>().unwrap().lid, lid);
    for bad in [0, client.lid] {
        let t = SwitchInfoRecord {
            lid: bad,
            ..SwitchInfoRecord::default()
        };
        let got = ask(
            &mut lab,
            0,
            &SaMad::query(Method::GET, 3, &t, SwitchInfoRecord::LID).unwrap(),
            client,
        );
        assert_eq!(got[0].status(), SaStatus::ERR_NO_RECORDS, "LID {bad}");
    }
    // Without a LID, Get of every switch is too many.
    let got = ask(
        &mut lab,
        0,
        &SaMad::query(
            Method::GET,
            4,
            &SwitchInfoRecord::default(),
            ComponentMask::NONE,
        )
        .unwrap(),
        client,
    );
    assert_eq!(got[0].status(), SaStatus::ERR_TOO_MANY_RECORDS);

    // LinearForwardingTableRecord: blocks 0..=LinearFDBTop/64 of each switch, every
    // entry as the switch forwards.
    let req = SaMad::query(
        Method::GET_TABLE,
        5,
        &LinearForwardingTableRecord::default(),
        ComponentMask::NONE,
    )
    .unwrap();
    let all: Vec<LinearForwardingTableRecord> = records(&get_table(&mut lab, 0, &req, client));
    for &(idx, lid) in &switches {
        let si: SwitchInfo = read(&mut lab, probe, lid, 0);
        let mine: Vec<&LinearForwardingTableRecord> = all.iter().filter(|r| r.lid == lid).collect();
        assert_eq!(mine.len(), usize::from(si.linear_fdb_top / 64) + 1);
        for r in mine {
            for (i, &port) in r.linear_forwarding_table.ports.iter().enumerate() {
                let dlid = r.block_num * 64 + i as u16;
                if dlid == 0 {
                    // LID 0 forwards nothing: the switch keeps the master's LFT
                    // stamp there (`lft_stamp`), the SA serves it unreachable.
                    assert_eq!(port, 0xFF, "switch {lid} LID 0");
                    let stamp = lab.sim.lft_entry(idx, 0).unwrap_or(0xFF);
                    assert!(
                        stamp < 254 && stamp.is_multiple_of(2),
                        "switch {lid} stamp {stamp}"
                    );
                    continue;
                }
                let want = lab.sim.lft_entry(idx, dlid).unwrap_or(0xFF);
                assert_eq!(port, want, "switch {lid} LID {dlid}");
            }
        }
    }
    // Get of one block by LID and BlockNum; a block past the top: none.
    let (idx, lid) = switches[0];
    let t = LinearForwardingTableRecord {
        lid,
        block_num: 0,
        ..LinearForwardingTableRecord::default()
    };
    let mask = LinearForwardingTableRecord::LID | LinearForwardingTableRecord::BLOCK_NUM;
    let got = ask(
        &mut lab,
        0,
        &SaMad::query(Method::GET, 6, &t, mask).unwrap(),
        client,
    );
    assert_eq!(got[0].status(), SaStatus::SUCCESS);
    let r: LinearForwardingTableRecord = got[0].record().unwrap();
    let want = lab.sim.lft_entry(idx, client.lid).unwrap();
    assert_eq!(
        r.linear_forwarding_table.ports[usize::from(client.lid)],
        want
    );
    let t = LinearForwardingTableRecord {
        block_num: 700,
        ..t
    };
    let got = ask(
        &mut lab,
        0,
        &SaMad::query(Method::GET, 7, &t, mask).unwrap(),
        client,
    );
    assert_eq!(got[0].status(), SaStatus::ERR_NO_RECORDS);
}

#[test]
fn a_join_shows_up_in_the_multicast_forwarding_table_records() {
    let Setup {
        mut lab,
        client,
        switches,
        cas,
        ..
    } = setup();
    let mftr_all = |lab: &mut Lab, tid: u64| -> Vec<MulticastForwardingTableRecord> {
        let req = SaMad::query(
            Method::GET_TABLE,
            tid,
            &MulticastForwardingTableRecord::default(),
            ComponentMask::NONE,
        )
        .unwrap();
        records(&get_table(lab, 0, &req, client))
    };
    let before = mftr_all(&mut lab, 1);
    let holds_c000 = |recs: &[MulticastForwardingTableRecord]| {
        recs.iter()
            .filter(|r| r.block_num == 0 && r.multicast_forwarding_table.port_mask[0] != 0)
            .count()
    };
    assert_eq!(holds_c000(&before), 0, "nobody joined yet: {before:?}");

    let bcast = crate::sa::ipoib_broadcast_mgid(0xFFFF, 2);
    let (a, b) = (cas[0].1, cas[cas.len() - 1].1);
    for (i, lid) in [a, b].into_iter().enumerate() {
        let rec = McMemberRecord {
            mgid: bcast,
            port_gid: port_gid_of(&mut lab, lid),
            join_state: JoinState::FULL_MEMBER,
            ..McMemberRecord::default()
        };
        let req = SaMad::query(Method::SET, 10 + i as u64, &rec, join_mask()).unwrap();
        let got = ask(&mut lab, 0, &req, MadAddress::gsi(lid));
        assert_eq!(got[0].status(), SaStatus::SUCCESS, "join of LID {lid}");
    }
    lab.run_to(lab.now + Duration::from_millis(200));

    let after = mftr_all(&mut lab, 20);
    assert!(holds_c000(&after) >= 2, "the tree spans both leaves");
    // Every record is what the switch holds (the writes went out).
    for r in &after {
        let (idx, _) = *switches
            .iter()
            .find(|(_, l)| *l == r.lid)
            .expect("a switch's LID");
        let held = lab
            .sim
            .mft_block(idx, r.block_num, r.position)
            .expect("a block the switch has");
        assert_eq!(
            r.multicast_forwarding_table.port_mask, held,
            "switch {} block {} position {}",
            r.lid, r.block_num, r.position
        );
    }
    // Positions: a 4-port... every switch of the fat tree has fewer than 16 ports.
    assert!(after.iter().all(|r| r.position == 0));

    // By LID, BlockNum and Position: one record; a position the switch lacks: none.
    let holder = after
        .iter()
        .find(|r| r.multicast_forwarding_table.port_mask[0] != 0)
        .copied()
        .unwrap();
    let mask = MulticastForwardingTableRecord::LID
        | MulticastForwardingTableRecord::BLOCK_NUM
        | MulticastForwardingTableRecord::POSITION;
    let got = ask(
        &mut lab,
        0,
        &SaMad::query(Method::GET, 21, &holder, mask).unwrap(),
        client,
    );
    assert_eq!(got[0].status(), SaStatus::SUCCESS);
    assert_eq!(
        got[0].record::<MulticastForwardingTableRecord>().unwrap(),
        holder
    );
    let t = MulticastForwardingTableRecord {
        position: 3,
        ..holder
    };
    let got = ask(
        &mut lab,
        0,
        &SaMad::query(Method::GET, 22, &t, mask).unwrap(),
        client,
    );
    assert_eq!(got[0].status(), SaStatus::ERR_NO_RECORDS);
}

#[test]
fn port_table_records_match_the_ports() {
    let Setup {
        mut lab,
        client,
        probe,
        switches,
        cas,
    } = setup();
    let (ca, ca_lid) = cas[2];
    let ca_guid = lab.topo.node(ca).unwrap().port(1).unwrap().port_guid;

    // GUIDInfoRecord: a CA port's block 0 holds its PortGUID, as the port reads.
    let t = GuidInfoRecord {
        lid: ca_lid,
        ..GuidInfoRecord::default()
    };
    let mask = GuidInfoRecord::LID | GuidInfoRecord::BLOCK_NUM;
    let got = ask(
        &mut lab,
        0,
        &SaMad::query(Method::GET, 1, &t, mask).unwrap(),
        client,
    );
    assert_eq!(got[0].status(), SaStatus::SUCCESS);
    let r: GuidInfoRecord = got[0].record().unwrap();
    let held: GuidInfo = read(&mut lab, probe, ca_lid, 0);
    assert_eq!(r.guid_info, held);
    assert_eq!(r.guid_info.guids[0], ca_guid);
    // Every port with a GUIDCap (8: one block): every CA port and switch port 0.
    let req = SaMad::query(
        Method::GET_TABLE,
        2,
        &GuidInfoRecord::default(),
        ComponentMask::NONE,
    )
    .unwrap();
    let all: Vec<GuidInfoRecord> = records(&get_table(&mut lab, 0, &req, client));
    assert_eq!(all.len(), cas.len() + switches.len());
    // A GUID component matches entry by entry.
    let t = GuidInfoRecord {
        guid_info: GuidInfo {
            guids: [ca_guid, 0, 0, 0, 0, 0, 0, 0],
        },
        ..GuidInfoRecord::default()
    };
    let got = ask(
        &mut lab,
        0,
        &SaMad::query(Method::GET, 3, &t, GuidInfoRecord::GUID0).unwrap(),
        client,
    );
    assert_eq!(got[0].record::<GuidInfoRecord>().unwrap().lid, ca_lid);

    // P_KeyTableRecord: only with the SA_Key.
    let t = PKeyTableRecord {
        lid: ca_lid,
        ..PKeyTableRecord::default()
    };
    let req = SaMad::query(Method::GET_TABLE, 4, &t, PKeyTableRecord::LID).unwrap();
    let got = ask(&mut lab, 0, &req, client);
    assert_eq!(got[0].status(), SaStatus::ERR_REQ_INVALID);
    let recs: Vec<PKeyTableRecord> = records(&get_table(&mut lab, 0, &trusted(req), client));
    assert_eq!(recs.len(), 1, "block 0 of the CA's port");
    assert_eq!((recs[0].port_num, recs[0].block_num), (1, 0));
    let held: PKeyTable = read(&mut lab, probe, ca_lid, 0);
    assert_eq!(recs[0].p_key_table, held);
    // A switch: port 0 and every port facing a CA (partition enforcement).
    let (sw, sw_lid) = switches[0];
    let t = PKeyTableRecord {
        lid: sw_lid,
        ..PKeyTableRecord::default()
    };
    let req = trusted(SaMad::query(Method::GET_TABLE, 5, &t, PKeyTableRecord::LID).unwrap());
    let recs: Vec<PKeyTableRecord> = records(&get_table(&mut lab, 0, &req, client));
    let node = lab.topo.node(sw).unwrap().clone();
    let ca_ports = node
        .physical_ports()
        .filter(|(_, p)| {
            p.remote
                .and_then(|(n, _)| lab.topo.node(n))
                .is_some_and(|n| !n.is_switch())
        })
        .count();
    assert_eq!(recs.len(), 1 + ca_ports, "{recs:?}");
    for r in &recs {
        assert_eq!(r.lid, sw_lid);
        let held: PKeyTable = read(&mut lab, probe, sw_lid, u32::from(r.port_num) << 16);
        assert_eq!(r.p_key_table, held, "switch port {}", r.port_num);
    }

    // SLtoVLMappingTableRecord: a CA's one table (ports 0), as the port holds it;
    // switch SL2VL is not programmed by default, so none for a switch.
    let t = SlToVlMappingTableRecord {
        lid: ca_lid,
        input_port_num: 5,
        ..SlToVlMappingTableRecord::default()
    };
    let mask = SlToVlMappingTableRecord::LID | SlToVlMappingTableRecord::INPUT_PORT_NUM;
    let got = ask(
        &mut lab,
        0,
        &SaMad::query(Method::GET, 6, &t, mask).unwrap(),
        client,
    );
    assert_eq!(got[0].status(), SaStatus::SUCCESS, "a CA ignores the ports");
    let r: SlToVlMappingTableRecord = got[0].record().unwrap();
    assert_eq!((r.input_port_num, r.output_port_num), (0, 0));
    let held: SlToVlMappingTable = read(&mut lab, probe, ca_lid, 0);
    assert_eq!(r.sl_to_vl_mapping_table, held);
    let t = SlToVlMappingTableRecord {
        lid: sw_lid,
        ..SlToVlMappingTableRecord::default()
    };
    let req = SaMad::query(Method::GET_TABLE, 7, &t, SlToVlMappingTableRecord::LID).unwrap();
    assert!(get_table(&mut lab, 0, &req, client).is_empty());
    let req = SaMad::query(
        Method::GET_TABLE,
        8,
        &SlToVlMappingTableRecord::default(),
        ComponentMask::NONE,
    )
    .unwrap();
    assert_eq!(get_table(&mut lab, 0, &req, client).len(), cas.len());

    // VLArbitrationTableRecord: the blocks the caps have (8 and 8: blocks 1 and 3),
    // as the port holds them; on a switch by output port.
    let t = VlArbitrationTableRecord {
        lid: ca_lid,
        ..VlArbitrationTableRecord::default()
    };
    let req = SaMad::query(Method::GET_TABLE, 9, &t, VlArbitrationTableRecord::LID).unwrap();
    let recs: Vec<VlArbitrationTableRecord> = records(&get_table(&mut lab, 0, &req, client));
    assert_eq!(
        recs.iter().map(|r| r.block_num).collect::<Vec<_>>(),
        vec![1, 3]
    );
    for r in &recs {
        assert_eq!(r.output_port_num, 1);
        let held: VlArbitrationTable = read(&mut lab, probe, ca_lid, u32::from(r.block_num) << 16);
        assert_eq!(r.vl_arbitration_table, held, "block {}", r.block_num);
    }
    let (port, _) = node
        .physical_ports()
        .find(|(_, p)| p.remote.is_some())
        .unwrap();
    let t = VlArbitrationTableRecord {
        lid: sw_lid,
        output_port_num: port,
        block_num: 3,
        ..VlArbitrationTableRecord::default()
    };
    let mask = VlArbitrationTableRecord::LID
        | VlArbitrationTableRecord::OUTPUT_PORT_NUM
        | VlArbitrationTableRecord::BLOCK_NUM;
    let got = ask(
        &mut lab,
        0,
        &SaMad::query(Method::GET, 10, &t, mask).unwrap(),
        client,
    );
    assert_eq!(got[0].status(), SaStatus::SUCCESS);
    let r: VlArbitrationTableRecord = got[0].record().unwrap();
    let held: VlArbitrationTable = read(&mut lab, probe, sw_lid, (3 << 16) | u32::from(port));
    assert_eq!(r.vl_arbitration_table, held);
    // A LID nobody has: no records.
    let t = VlArbitrationTableRecord {
        lid: 0xBEEF,
        ..VlArbitrationTableRecord::default()
    };
    let req = SaMad::query(Method::GET_TABLE, 11, &t, VlArbitrationTableRecord::LID).unwrap();
    assert!(get_table(&mut lab, 0, &req, client).is_empty());
}
