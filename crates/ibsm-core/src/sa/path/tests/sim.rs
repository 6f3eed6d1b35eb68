//! PathRecords of a fabric a master swept: a [`SubnetManager`] brings the embedded
//! simulator up (LMC 1, partitions, NeighborMTU bounded to 2048, slowed cables), then
//! the SA agent answers queries over the snapshot the sweep left. Every record is
//! checked against a walk of the simulated switches' own LFTs (what they hold, read
//! back from the simulator) over the generated topology, not against anything the SM
//! computed.

use std::collections::BTreeSet;
use std::time::Duration;

use ibsm_fabric::{gen, LinkSpeed, LinkWidth, NodeIdx, Rate, Topology};
use ibsm_mad::sa::{ComponentMask, PathRecord, RmppProgress, RmppReassembler, SaMad, SaStatus};
use ibsm_mad::{MadAddress, Method};
use ibsm_sim::{Sim, SimConfig};

use crate::sa::{make_gid, SaAgent, SaConfig, SaContext, SaFabric, DEFAULT_SUBNET_PREFIX};
use crate::subnet::{
    Membership, Partition, PartitionMember, SubnetConfig, SubnetEvent, SubnetManager,
};

/// The generated topology, the simulator after the master's first heavy sweep, and
/// the SA snapshot that sweep left.
struct Swept {
    topo: Topology,
    sim: Sim,
    sa: std::sync::Arc<SaFabric>,
}

fn sweep(topo: Topology, cfg: SubnetConfig) -> Swept {
    let mut sim = Sim::new(&topo, SimConfig::default());
    let local = topo
        .iter()
        .find(|(_, n)| !n.is_switch())
        .map(|(i, _)| i)
        .expect("a CA");
    let client = sim.attach(local, 1).expect("attach");
    sim.set_is_sm(client, true).expect("IsSM");
    let mut sm = SubnetManager::new(cfg).expect("valid config");
    let mut now = Duration::ZERO;
    sm.become_master(now);
    let mut done = false;
    for _ in 0..10_000_000u64 {
        let mut busy = false;
        while let Some(o) = sm.poll_transmit() {
            busy = true;
            match o.dlid {
                None => sim.send(now, client, &o.mad),
                Some(l) => sim.send_to(now, client, l, &o.mad),
            }
            .expect("well-formed MAD");
        }
        while let Some(d) = sim.poll_delivery_from(now) {
            busy = true;
            if d.client == client {
                sm.handle_incoming_from(now, &d.mad, d.slid);
            }
        }
        while let Some(ev) = sm.poll_event() {
            done |= matches!(ev, SubnetEvent::SweepDone { .. });
        }
        while let Some(job) = sm.poll_routing_job() {
            busy = true;
            sm.handle_routing_done(now, job.run());
        }
        if done {
            let sa = sm.sa_fabric().expect("a snapshot after the sweep").clone();
            return Swept { topo, sim, sa };
        }
        if busy {
            continue;
        }
        let next = [sm.poll_timeout(), sim.poll_timeout()]
            .into_iter()
            .flatten()
            .min()
            .expect("something pending");
        now = now.max(next);
        if sm.poll_timeout().is_some_and(|t| t <= now) {
            sm.handle_timeout(now);
        }
    }
    panic!("the sweep never ended");
}

/// Where the simulated switches send a packet from `src` (a CA's port 1 or a
/// switch) to `dlid`: the end reached and the slowest cable, from the switches' own
/// LFTs and the generated topology's rates.
fn sim_walk(s: &Swept, src: NodeIdx, dlid: u16) -> Option<(NodeIdx, Rate)> {
    let cable = |n: NodeIdx, p: u8| -> Option<(NodeIdx, Rate)> {
        let a = s.topo.node(n)?.port(p)?;
        let (r, rp) = a.remote?;
        let b = s.topo.node(r)?.port(rp)?;
        let rate = Rate::of_link(a.link_width, a.link_speed)
            .min(Rate::of_link(b.link_width, b.link_speed));
        Some((r, rate))
    };
    let owns = |n: NodeIdx| {
        let port = if s.topo.node(n).is_some_and(|x| x.is_switch()) {
            0
        } else {
            1
        };
        let base = s.sim.port_lid(n, port).unwrap_or(0);
        let lmc = s.sim.port_info(n, port).map_or(0, |p| p.lmc);
        base != 0 && dlid >= base && u32::from(dlid) < u32::from(base) + (1 << lmc)
    };
    let mut rate = Rate::GBPS_1200;
    let mut cur = src;
    if !s.topo.node(src)?.is_switch() {
        let (r, ra) = cable(src, 1)?;
        rate = ra;
        cur = r;
    }
    for _ in 0..64 {
        let node = s.topo.node(cur)?;
        if !node.is_switch() {
            return owns(cur).then_some((cur, rate));
        }
        let out = s.sim.lft_entry(cur, dlid)?;
        if out == 0 {
            return owns(cur).then_some((cur, rate));
        }
        let (r, ra) = cable(cur, out)?;
        rate = rate.min(ra);
        cur = r;
    }
    None
}

fn ctx(f: &SaFabric) -> SaContext<'_> {
    SaContext {
        fabric: Some(f),
        sms: &[],
        is_master: true,
        master_lid: f.sm_lid,
        mfts: None,
    }
}

/// A Get through the SA agent from the port with LID `from`.
fn get(
    f: &SaFabric,
    from: u16,
    t: &PathRecord,
    mask: ComponentMask,
) -> Result<PathRecord, SaStatus> {
    let mut sa = SaAgent::new(SaConfig::default());
    let req = SaMad::query(Method::GET, 7, t, mask).expect("query");
    sa.handle_mad(
        Duration::ZERO,
        &ctx(f),
        &req.encode(),
        MadAddress::gsi(from),
    );
    let m = SaMad::decode(&sa.poll_transmit().expect("an answer").mad).expect("SA MAD");
    assert_eq!(m.method(), Method::GET_RESP);
    if m.status().is_success() {
        Ok(m.record().expect("a PathRecord"))
    } else {
        Err(m.status())
    }
}

/// A whole GetTable through the SA agent, ACKing every window as a client does.
fn get_table(f: &SaFabric, from: u16, t: &PathRecord, mask: ComponentMask) -> Vec<PathRecord> {
    let mut sa = SaAgent::new(SaConfig::default());
    let c = ctx(f);
    let addr = MadAddress::gsi(from);
    let req = SaMad::query(Method::GET_TABLE, 8, t, mask).expect("query");
    sa.handle_mad(Duration::ZERO, &c, &req.encode(), addr);
    let mut r = RmppReassembler::new(1 << 22);
    for _ in 0..100_000 {
        let mut last = None;
        while let Some(out) = sa.poll_transmit() {
            let s = SaMad::decode(&out.mad).expect("SA MAD");
            assert_eq!(
                (s.method(), s.status()),
                (Method::GET_TABLE_RESP, SaStatus::SUCCESS)
            );
            match r.push(&s).expect("segments in order") {
                RmppProgress::Complete(m) => {
                    return m
                        .records()
                        .map(|b| PathRecord::decode(b).expect("a PathRecord"))
                        .collect();
                }
                RmppProgress::Incomplete { .. } => last = Some(s),
            }
        }
        let s = last.expect("the SA stopped before the last segment");
        let ack = s.rmpp_ack(s.rmpp.seg_num() + 4);
        sa.handle_mad(Duration::ZERO, &c, &ack.encode(), addr);
    }
    panic!("the transfer never ended");
}

#[test]
fn paths_of_a_swept_fabric_follow_the_switches_own_lfts() {
    let mut topo = gen::fat_tree_3level(4).expect("topology");
    let cas: Vec<NodeIdx> = topo
        .iter()
        .filter(|(_, n)| !n.is_switch())
        .map(|(i, _)| i)
        .collect();
    // Slow cables: one HCA at 1x SDR (2.5 Gb/s), one leaf's first uplink at 1x DDR.
    topo.set_link_rate(cas[3], 1, LinkWidth::X1, LinkSpeed::Sdr)
        .unwrap();
    let (leaf, _) = topo.node(cas[9]).unwrap().port(1).unwrap().remote.unwrap();
    let up = topo
        .node(leaf)
        .unwrap()
        .physical_ports()
        .find(|(_, p)| {
            p.remote
                .is_some_and(|(r, _)| topo.node(r).unwrap().is_switch())
        })
        .map(|(p, _)| p)
        .unwrap();
    topo.set_link_rate(leaf, up, LinkWidth::X1, LinkSpeed::Ddr)
        .unwrap();
    let guids: Vec<u64> = cas
        .iter()
        .map(|&c| topo.node(c).unwrap().port(1).unwrap().port_guid)
        .collect();
    let guid = |i: usize| guids[i];
    let member = |i: usize, membership| PartitionMember {
        port_guid: guid(i),
        membership,
    };
    let cfg = SubnetConfig {
        lmc: 1,
        max_mtu: 4,
        partitions: vec![
            Partition {
                groups: Vec::new(),
                index0: false,
                name: "p1".into(),
                p_key: 0x0001,
                members: vec![
                    member(0, Membership::Full),
                    member(1, Membership::Full),
                    member(2, Membership::Limited),
                ],
                ipoib: None,
            },
            Partition {
                groups: Vec::new(),
                index0: false,
                name: "p2".into(),
                p_key: 0x0002,
                members: vec![member(4, Membership::Full)],
                ipoib: None,
            },
        ],
        ..SubnetConfig::default()
    };
    let s = sweep(topo, cfg);
    let f = &*s.sa;
    let lid = |i: usize| s.sim.port_lid(cas[i], 1).unwrap();
    let gid = |i: usize| make_gid(DEFAULT_SUBNET_PREFIX, guid(i));
    let ends = f.end_ports();
    let mut rates = BTreeSet::new();

    // Every CA to every LID of every CA, by SLID/DLID: the switches' own routes.
    for (a, &an) in cas.iter().enumerate() {
        for (b, &bn) in cas.iter().enumerate() {
            for off in 0..2u16 {
                let t = PathRecord {
                    slid: lid(a),
                    dlid: lid(b) + off,
                    ..PathRecord::default()
                };
                let r = get(f, lid(a), &t, PathRecord::SLID | PathRecord::DLID).expect("a path");
                let (to, rate) = sim_walk(&s, an, lid(b) + off).expect("the switches route it");
                assert_eq!(to, bn);
                assert_eq!((r.slid, r.dlid), (lid(a), lid(b) + off));
                assert_eq!(Rate::from_iba(r.rate), Some(rate), "{a} -> {b}+{off}");
                assert_eq!(r.mtu, 4, "NeighborMTU as programmed, below MTUCap 4096");
                assert!(r.reversible);
                rates.insert(r.rate);
            }
        }
    }
    assert_eq!(
        rates,
        BTreeSet::from([2, 3, 5]),
        "the slow cables were crossed"
    );

    // By SGID/DGID: the base LIDs, the same path.
    let t = PathRecord {
        sgid: gid(5),
        dgid: gid(12),
        ..PathRecord::default()
    };
    let r = get(f, lid(7), &t, PathRecord::SGID | PathRecord::DGID).expect("a path");
    assert_eq!(
        (r.slid, r.dlid, r.sgid, r.dgid),
        (lid(5), lid(12), gid(5), gid(12))
    );
    assert_eq!(
        Some(r.rate),
        sim_walk(&s, cas[5], lid(12)).map(|(_, x)| x.to_iba())
    );

    // LMC 1: NumbPath 2 gives distinct SLIDs and DLIDs; all four without NumbPath.
    let t = PathRecord {
        dgid: gid(12),
        numb_path: 2,
        ..PathRecord::default()
    };
    let two = get_table(f, lid(5), &t, PathRecord::DGID | PathRecord::NUMB_PATH);
    let pairs: BTreeSet<(u16, u16)> = two.iter().map(|r| (r.slid, r.dlid)).collect();
    assert_eq!(
        pairs,
        BTreeSet::from([(lid(5), lid(12)), (lid(5) + 1, lid(12) + 1)])
    );
    let four = get_table(f, lid(5), &t, PathRecord::DGID);
    assert_eq!(four.len(), 4);

    // No destination: one path per end port the switches reach, from the requester.
    let t = PathRecord {
        numb_path: 1,
        ..PathRecord::default()
    };
    let all = get_table(f, lid(9), &t, PathRecord::NUMB_PATH);
    assert_eq!(all.len(), ends.len());
    for r in &all {
        assert_eq!(r.slid, lid(9));
        assert!(sim_walk(&s, cas[9], r.dlid).is_some(), "DLID {}", r.dlid);
    }
    let dlids: BTreeSet<u16> = all.iter().map(|r| r.dlid).collect();
    assert_eq!(dlids, ends.iter().map(|e| e.lid).collect());

    // A LID nobody has.
    let t = PathRecord {
        slid: lid(0),
        dlid: 0xBEEF,
        ..PathRecord::default()
    };
    assert_eq!(
        get(f, lid(0), &t, PathRecord::SLID | PathRecord::DLID),
        Err(SaStatus::ERR_NO_RECORDS)
    );

    // Partitions as the master programmed them.
    let key = |a: usize, b: usize| {
        let t = PathRecord {
            sgid: gid(a),
            dgid: gid(b),
            ..PathRecord::default()
        };
        get(f, lid(a), &t, PathRecord::SGID | PathRecord::DGID).map(|r| r.p_key)
    };
    assert_eq!(
        key(0, 1),
        Ok(0x8001),
        "the configured partition before the default"
    );
    assert_eq!(key(2, 0), Ok(0x0001), "as the limited source holds it");
    assert_eq!(key(0, 2), Ok(0x8001));
    assert_eq!(key(0, 6), Ok(0xFFFF));
    assert_eq!(key(4, 4), Ok(0x8002));
    let asked = |a: usize, b: usize, p_key: u16| {
        let t = PathRecord {
            sgid: gid(a),
            dgid: gid(b),
            p_key,
            ..PathRecord::default()
        };
        get(
            f,
            lid(a),
            &t,
            PathRecord::SGID | PathRecord::DGID | PathRecord::P_KEY,
        )
        .map(|r| r.p_key)
    };
    assert_eq!(asked(0, 1, 0x8001), Ok(0x8001));
    assert_eq!(
        asked(0, 6, 0x8001),
        Err(SaStatus::ERR_NO_RECORDS),
        "6 is not in p1"
    );
    assert_eq!(asked(4, 0, 0x8002), Err(SaStatus::ERR_NO_RECORDS));
}
