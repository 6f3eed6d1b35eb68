//! PathRecord queries against fabrics built by hand (LIDs and min-hop LFTs from
//! ibsm-fabric, PortInfo chosen per port), and against a master's sweep of the
//! embedded simulator. Expected paths come from walks that do not use the path table:
//! [`walk`] over the LFTs with MTU and rate folded from PortInfo as OpenSM does, or,
//! on the simulator, a walk of the switches' own LFTs with the generated topology's
//! link rates.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use ibsm_fabric::lid::{LidConfig, LidManager};
use ibsm_fabric::path::{walk, Lfts};
use ibsm_fabric::routing::{self, RoutingOptions};
use ibsm_fabric::{gen, LinkSpeed, LinkWidth, NodeIdx, Rate, Topology};
use ibsm_mad::attr::{CapabilityMask, NodeInfo, PKey, PortInfo};
use ibsm_mad::sa::{ComponentMask, PathRecord, SaMad, SaStatus, Selector};
use ibsm_mad::{MadAddress, Method};

use super::super::path_records;
use crate::sa::{make_gid, EndPort, SaAgent, SaConfig, SaContext, SaFabric, DEFAULT_SUBNET_PREFIX};

pub(super) const PLT: u8 = 0x12;

/// LFTs by NodeIdx, for the test's own walks.
struct Tables<'a>(&'a [Option<Vec<u8>>]);

impl Lfts for Tables<'_> {
    fn lft(&self, switch: NodeIdx) -> Option<&[u8]> {
        self.0.get(switch.as_usize())?.as_deref()
    }
}

/// A fabric under construction: change what a test needs, then [`Net::fabric`].
pub(super) struct Net {
    topo: Topology,
    port_info: Vec<Vec<Option<PortInfo>>>,
    lfts: Vec<Option<Vec<u8>>>,
    pkeys: HashMap<u64, Vec<PKey>>,
}

/// `topo` with LIDs (LMC `lmc`), min-hop LFTs, every port's PortInfo (MTUCap and
/// NeighborMTU 4096, the topology's link rates; a switch's port 0 reports no link,
/// as the simulator's does), every end port in the default partition.
pub(super) fn net(mut topo: Topology, lmc: u8) -> Net {
    LidManager::new(LidConfig { lmc })
        .assign(&mut topo)
        .expect("LIDs");
    let ft = routing::min_hop(&topo, &RoutingOptions::default()).expect("routing");
    let mut port_info = Vec::new();
    let mut lfts = Vec::new();
    let mut pkeys = HashMap::new();
    for (idx, node) in topo.iter() {
        let mut v = Vec::new();
        for p in 0..=node.num_ports() {
            let Some(port) = node.port(p) else {
                v.push(None);
                continue;
            };
            let link = !(node.is_switch() && p == 0);
            let ext = port.link_speed.speed_ext_active();
            let on = |x: u8| if link { x } else { 0 };
            v.push(Some(PortInfo {
                gid_prefix: DEFAULT_SUBNET_PREFIX,
                lid: port.lid,
                lmc: port.lmc,
                capability_mask: CapabilityMask(if ext != 0 {
                    CapabilityMask::IS_EXTENDED_SPEEDS_SUPPORTED
                } else {
                    0
                }),
                link_width_active: on(port.link_width.to_iba()),
                link_speed_active: on(port.link_speed.speed_active()),
                link_speed_ext_active: on(ext),
                mtu_cap: on(5),
                neighbor_mtu: on(5),
                ..PortInfo::default()
            }));
            if port.port_guid != 0 && (p == 0) == node.is_switch() {
                pkeys.insert(port.port_guid, vec![PKey::DEFAULT_FULL]);
            }
        }
        port_info.push(v);
        lfts.push(ft.lft(idx).map(<[u8]>::to_vec));
    }
    Net {
        topo,
        port_info,
        lfts,
        pkeys,
    }
}

impl Net {
    pub(super) fn fabric(&self) -> SaFabric {
        SaFabric::new(
            1,
            DEFAULT_SUBNET_PREFIX,
            1,
            0,
            self.topo.clone(),
            vec![NodeInfo::default(); self.topo.len()],
            self.port_info.clone(),
            vec![None; self.topo.len()],
            self.lfts
                .iter()
                .map(|l| l.as_deref().map(Arc::from))
                .collect(),
            self.pkeys.clone(),
        )
    }

    fn pi(&mut self, node: NodeIdx, port: u8) -> &mut PortInfo {
        self.port_info[node.as_usize()][usize::from(port)]
            .as_mut()
            .expect("port")
    }

    /// The CA ports: (node, port 1, base LID, PortGUID).
    pub(super) fn cas(&self) -> Vec<(NodeIdx, u16, u64)> {
        self.topo
            .iter()
            .filter(|(_, n)| !n.is_switch())
            .filter_map(|(i, n)| n.port(1).map(|p| (i, p.lid, p.port_guid)))
            .collect()
    }

    /// What OpenSM would compute for the path from `src` to `dlid`, by walking the
    /// LFTs and folding in the PortInfo of every port it leaves or enters (and of the
    /// end ports): (cables, MTU, rate), or `None` without a path.
    fn expect(&self, src: (NodeIdx, u8), dlid: u16) -> Option<(u16, u8, Rate)> {
        let p = walk(&self.topo, &Tables(&self.lfts), src, dlid).ok()?;
        let mut ports = vec![src];
        for h in &p.hops {
            ports.push((h.switch, h.in_port));
            ports.push((h.switch, h.out_port));
        }
        ports.push(p.destination);
        let mut mtu: Option<u8> = None;
        let mut rate: Option<Rate> = None;
        for (n, port) in ports {
            let Some(pi) = self.port_info[n.as_usize()][usize::from(port)] else {
                continue;
            };
            for m in [pi.mtu_cap, pi.neighbor_mtu] {
                if (1..=5).contains(&m) {
                    mtu = Some(mtu.map_or(m, |x| x.min(m)));
                }
            }
            let speed = match (pi.link_speed_ext_active, pi.link_speed_active) {
                (1, _) => Some(LinkSpeed::Fdr),
                (2, _) => Some(LinkSpeed::Edr),
                (_, 1) => Some(LinkSpeed::Sdr),
                (_, 2) => Some(LinkSpeed::Ddr),
                (_, 4) => Some(LinkSpeed::Qdr),
                _ => None,
            };
            if let (Some(w), Some(s)) = (LinkWidth::from_iba(pi.link_width_active), speed) {
                let r = Rate::of_link(w, s);
                rate = Some(rate.map_or(r, |x| x.min(r)));
            }
        }
        // Only a switch's port 0 to itself may have no valid PortInfo (as the
        // simulator's): then the topology's defaults.
        Some((
            p.summary.links,
            mtu.unwrap_or(p.summary.mtu),
            rate.unwrap_or(p.summary.rate),
        ))
    }
}

pub(super) fn ctx(f: &SaFabric) -> SaContext<'_> {
    SaContext {
        fabric: Some(f),
        sms: &[],
        is_master: true,
        master_lid: f.sm_lid,
        mfts: None,
    }
}

/// PathRecords for `t` under `mask` asked by the port with LID `from`.
pub(super) fn ask(
    f: &SaFabric,
    from: u16,
    method: Method,
    t: &PathRecord,
    mask: ComponentMask,
) -> Vec<PathRecord> {
    let c = ctx(f);
    let req = c.requester(MadAddress::gsi(from), false);
    path_records(&c, &req, t, mask, method, PLT).expect("answered")
}

fn lids(slid: u16, dlid: u16) -> (PathRecord, ComponentMask) {
    (
        PathRecord {
            slid,
            dlid,
            ..PathRecord::default()
        },
        PathRecord::SLID | PathRecord::DLID,
    )
}

/// The one record of a Get from `slid` to `dlid`, if any.
fn get(f: &SaFabric, slid: u16, dlid: u16) -> Option<PathRecord> {
    let (t, m) = lids(slid, dlid);
    let v = ask(f, slid, Method::GET, &t, m);
    assert!(v.len() <= 1, "a Get yields one record at most: {v:?}");
    v.first().copied()
}

/// The status and record of a Get sent through the SA agent.
fn agent_get(
    f: &SaFabric,
    from: u16,
    t: &PathRecord,
    mask: ComponentMask,
) -> (SaStatus, PathRecord) {
    let mut sa = SaAgent::new(SaConfig::default());
    let req = SaMad::query(Method::GET, 1, t, mask).expect("query");
    sa.handle_mad(
        Duration::ZERO,
        &ctx(f),
        &req.encode(),
        MadAddress::gsi(from),
    );
    let out = sa.poll_transmit().expect("an answer");
    let m = SaMad::decode(&out.mad).expect("an SA MAD");
    assert_eq!(m.method(), Method::GET_RESP);
    (m.status(), m.record().unwrap_or_default())
}

#[test]
fn every_path_agrees_with_a_walk_of_the_lfts() {
    // Make the minima interesting: a slow HCA cable (1x SDR), a slow leaf-spine
    // cable (1x DDR), a port with a small MTUCap, a link programmed for 512.
    let mut topo = gen::fat_tree_3level(4).expect("topology");
    let ca = |i: usize| {
        topo.iter()
            .filter(|(_, n)| !n.is_switch())
            .nth(i)
            .unwrap()
            .0
    };
    let (h0, h5, h6) = (ca(0), ca(5), ca(6));
    let (leaf, _) = topo.node(h0).unwrap().port(1).unwrap().remote.unwrap();
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
    topo.set_link_rate(h0, 1, LinkWidth::X1, LinkSpeed::Sdr)
        .unwrap();
    topo.set_link_rate(leaf, up, LinkWidth::X1, LinkSpeed::Ddr)
        .unwrap();
    let mut n = net(topo, 0);
    n.pi(h5, 1).mtu_cap = 3;
    let (sw6, sp6) = n.topo.node(h6).unwrap().port(1).unwrap().remote.unwrap();
    n.pi(sw6, sp6).neighbor_mtu = 2;
    let f = n.fabric();
    let ends = f.end_ports();
    let mut mtus = BTreeSet::new();
    let mut rates = BTreeSet::new();
    for src in &ends {
        for dst in &ends {
            let got = get(&f, src.lid, dst.lid);
            let want = n.expect((src.node, src.port), dst.lid);
            let Some((links, mtu, rate)) = want else {
                assert_eq!(got, None, "{src:?} -> {dst:?}");
                continue;
            };
            let r = got.unwrap_or_else(|| panic!("no record {src:?} -> {dst:?}"));
            assert_eq!((r.slid, r.dlid), (src.lid, dst.lid));
            assert_eq!(r.sgid, make_gid(DEFAULT_SUBNET_PREFIX, src.port_guid));
            assert_eq!(r.dgid, make_gid(DEFAULT_SUBNET_PREFIX, dst.port_guid));
            assert_eq!(r.mtu, mtu, "MTU {src:?} -> {dst:?} over {links} cables");
            assert_eq!(
                Rate::from_iba(r.rate),
                Some(rate),
                "rate {src:?} -> {dst:?}"
            );
            assert_eq!(
                (r.mtu_selector, r.rate_selector, r.packet_life_time_selector),
                (Selector::Exactly, Selector::Exactly, Selector::Exactly)
            );
            let life = if src == dst { 0 } else { PLT };
            assert_eq!(r.packet_life_time, life);
            assert_eq!((r.hop_limit, r.numb_path, r.sl, r.p_key), (0, 0, 0, 0xFFFF));
            assert!(r.reversible, "min-hop routes both ways");
            assert_eq!(r.preference, 0);
            mtus.insert(r.mtu);
            rates.insert(r.rate);
        }
    }
    // (4: a switch to itself, whose port 0 reports no MTUCap here.)
    assert_eq!(
        mtus,
        BTreeSet::from([2, 3, 4, 5]),
        "the minima were exercised"
    );
    assert_eq!(rates, BTreeSet::from([2, 3, 5]), "2.5, 10 and 5 Gb/s");
}

#[test]
fn gids_name_the_same_paths_as_lids_and_bad_ends_give_nothing() {
    let n = net(gen::fat_tree_2level(4).expect("topology"), 0);
    let f = n.fabric();
    let cas = n.cas();
    let (a, b) = (cas[0], cas[3]);
    let by_lid = get(&f, a.1, b.1).expect("a path");
    let t = PathRecord {
        sgid: make_gid(DEFAULT_SUBNET_PREFIX, a.2),
        dgid: make_gid(DEFAULT_SUBNET_PREFIX, b.2),
        ..PathRecord::default()
    };
    let by_gid = ask(
        &f,
        a.1,
        Method::GET,
        &t,
        PathRecord::SGID | PathRecord::DGID,
    );
    assert_eq!(by_gid, vec![by_lid]);
    // Without a source the requester is the source.
    let only_dgid = ask(&f, a.1, Method::GET, &t, PathRecord::DGID);
    assert_eq!(only_dgid, vec![by_lid]);
    // GID and LID of one end both given: they must agree.
    let mut both = t;
    both.slid = b.1;
    let (st, _) = agent_get(
        &f,
        a.1,
        &both,
        PathRecord::SGID | PathRecord::SLID | PathRecord::DGID,
    );
    assert_eq!(st, SaStatus::ERR_REQ_INVALID);
    both.slid = a.1;
    let (st, r) = agent_get(
        &f,
        a.1,
        &both,
        PathRecord::SGID | PathRecord::SLID | PathRecord::DGID,
    );
    assert_eq!((st, r), (SaStatus::SUCCESS, by_lid));
    // A LID nobody has, a GUID nobody has, another subnet's prefix: no records.
    for (t, m) in [
        lids(a.1, 0xBEEF),
        lids(0xBEEF, b.1),
        (
            PathRecord {
                dgid: make_gid(DEFAULT_SUBNET_PREFIX, 0xDEAD),
                ..PathRecord::default()
            },
            PathRecord::DGID,
        ),
        (
            PathRecord {
                dgid: make_gid(0x1234_0000_0000_0000, b.2),
                ..PathRecord::default()
            },
            PathRecord::DGID,
        ),
    ] {
        let (st, _) = agent_get(&f, a.1, &t, m);
        assert_eq!(st, SaStatus::ERR_NO_RECORDS, "{t:?} {m:?}");
    }
    // A Get must name a destination; half a ServiceID is not enough; a reserved
    // MTU under its selector is invalid.
    let (st, _) = agent_get(&f, a.1, &PathRecord::default(), ComponentMask::NONE);
    assert_eq!(st, SaStatus::ERR_REQ_INSUFFICIENT_COMPONENTS);
    let (t, m) = lids(a.1, b.1);
    let (st, _) = agent_get(&f, a.1, &t, m | PathRecord::SERVICE_ID_MSB);
    assert_eq!(st, SaStatus::ERR_REQ_INSUFFICIENT_COMPONENTS);
    let bad = PathRecord { mtu: 6, ..t };
    let (st, _) = agent_get(
        &f,
        a.1,
        &bad,
        m | PathRecord::MTU | PathRecord::MTU_SELECTOR,
    );
    assert_eq!(st, SaStatus::ERR_REQ_INVALID);
    // Echoed: ServiceID, FlowLabel, TClass when asked for; HopLimit stays 0.
    let echo = PathRecord {
        service_id: 0x1122_3344_5566_7788,
        flow_label: 0xABCDE,
        tclass: 7,
        hop_limit: 9,
        ..t
    };
    let (st, r) = agent_get(
        &f,
        a.1,
        &echo,
        m | PathRecord::SERVICE_ID
            | PathRecord::FLOW_LABEL
            | PathRecord::TCLASS
            | PathRecord::HOP_LIMIT,
    );
    assert_eq!(st, SaStatus::SUCCESS);
    assert_eq!(
        (r.service_id, r.flow_label, r.tclass, r.hop_limit),
        (echo.service_id, 0xABCDE, 7, 0)
    );
}

#[test]
fn a_table_without_destination_holds_one_path_per_reachable_end_port() {
    let mut n = net(gen::fat_tree_3level(4).expect("topology"), 0);
    let f = n.fabric();
    let cas = n.cas();
    let me = cas[2];
    let got = ask(
        &f,
        me.1,
        Method::GET_TABLE,
        &PathRecord::default(),
        ComponentMask::NONE,
    );
    let dlids: BTreeSet<u16> = got.iter().map(|r| r.dlid).collect();
    let all: BTreeSet<u16> = f.end_ports().iter().map(|e| e.lid).collect();
    assert_eq!(got.len(), all.len(), "one record per end port");
    assert_eq!(dlids, all);
    assert!(got.iter().all(|r| r.slid == me.1), "all from the requester");
    // An end port the LFTs do not reach is left out.
    let lost = cas[9];
    for l in n.lfts.iter_mut().flatten() {
        l[usize::from(lost.1)] = 0xFF;
    }
    let f = n.fabric();
    let got = ask(
        &f,
        me.1,
        Method::GET_TABLE,
        &PathRecord::default(),
        ComponentMask::NONE,
    );
    assert_eq!(got.len(), all.len() - 1);
    assert!(got.iter().all(|r| r.dlid != lost.1));
    // That path's lost way back makes the forward path not Reversible.
    let r = get(&f, lost.1, me.1).expect("the way there still works");
    assert!(!r.reversible);
    let (mut t, m) = lids(lost.1, me.1);
    t.reversible = true;
    assert!(ask(&f, lost.1, Method::GET, &t, m | PathRecord::REVERSIBLE).is_empty());
    t.reversible = false;
    assert_eq!(
        ask(&f, lost.1, Method::GET, &t, m | PathRecord::REVERSIBLE).len(),
        1
    );
}

#[test]
fn selectors_pick_or_refuse() {
    let mut n = net(gen::fat_tree_2level(4).expect("topology"), 0);
    let cas = n.cas();
    let (a, b) = (cas[0], cas[3]);
    n.pi(b.0, 1).mtu_cap = 4;
    let f = n.fabric();
    let base = get(&f, a.1, b.1).expect("a path");
    assert_eq!(
        (base.mtu, Rate::from_iba(base.rate)),
        (4, Some(Rate::GBPS_10))
    );
    let (t, m) = lids(a.1, b.1);
    let mtu = |s: Selector, v: u8| {
        let t = PathRecord {
            mtu_selector: s,
            mtu: v,
            ..t
        };
        ask(
            &f,
            a.1,
            Method::GET,
            &t,
            m | PathRecord::MTU | PathRecord::MTU_SELECTOR,
        )
        .first()
        .map(|r| r.mtu)
    };
    assert_eq!(mtu(Selector::GreaterThan, 3), Some(4));
    assert_eq!(mtu(Selector::GreaterThan, 4), None);
    assert_eq!(mtu(Selector::LessThan, 5), Some(4));
    assert_eq!(mtu(Selector::LessThan, 4), Some(3));
    assert_eq!(mtu(Selector::LessThan, 1), None);
    assert_eq!(mtu(Selector::Exactly, 2), Some(2));
    assert_eq!(mtu(Selector::Exactly, 5), None);
    assert_eq!(mtu(Selector::Largest, 1), Some(4));
    // A selector without its value (or the reverse) is ignored, as OpenSM does.
    let half = PathRecord {
        mtu_selector: Selector::GreaterThan,
        mtu: 5,
        ..t
    };
    assert_eq!(
        ask(&f, a.1, Method::GET, &half, m | PathRecord::MTU_SELECTOR).len(),
        1
    );
    assert_eq!(
        ask(&f, a.1, Method::GET, &half, m | PathRecord::MTU).len(),
        1
    );
    let rate = |s: Selector, v: u8| {
        let t = PathRecord {
            rate_selector: s,
            rate: v,
            ..t
        };
        ask(
            &f,
            a.1,
            Method::GET,
            &t,
            m | PathRecord::RATE | PathRecord::RATE_SELECTOR,
        )
        .first()
        .map(|r| r.rate)
    };
    // 10 Gb/s is code 3; 5 Gb/s (code 5) is slower, 20 Gb/s (6) and 30 Gb/s (4) faster.
    assert_eq!(rate(Selector::GreaterThan, 5), Some(3));
    assert_eq!(rate(Selector::GreaterThan, 3), None);
    assert_eq!(
        rate(Selector::GreaterThan, 4),
        None,
        "30 Gb/s is faster despite code 4"
    );
    assert_eq!(rate(Selector::LessThan, 4), Some(3));
    assert_eq!(
        rate(Selector::LessThan, 3),
        Some(5),
        "the next rate below 10 Gb/s"
    );
    assert_eq!(rate(Selector::LessThan, 2), None);
    assert_eq!(rate(Selector::Exactly, 3), Some(3));
    assert_eq!(rate(Selector::Exactly, 5), None);
    assert_eq!(rate(Selector::Largest, 2), Some(3));
    let life = |s: Selector, v: u8, dlid: u16| {
        let t = PathRecord {
            packet_life_time_selector: s,
            packet_life_time: v,
            dlid,
            ..t
        };
        let mask = m | PathRecord::PACKET_LIFE_TIME | PathRecord::PACKET_LIFE_TIME_SELECTOR;
        ask(&f, a.1, Method::GET, &t, mask)
            .first()
            .map(|r| r.packet_life_time)
    };
    assert_eq!(life(Selector::Exactly, PLT, b.1), Some(PLT));
    assert_eq!(life(Selector::GreaterThan, PLT, b.1), None);
    assert_eq!(life(Selector::GreaterThan, PLT - 1, b.1), Some(PLT));
    assert_eq!(life(Selector::LessThan, PLT, b.1), Some(PLT - 1));
    assert_eq!(life(Selector::LessThan, 1, b.1), None);
    assert_eq!(life(Selector::Largest, 0, b.1), Some(PLT));
    // A path to itself has lifetime 0: "exactly 18" cannot be met.
    assert_eq!(life(Selector::Largest, 0, a.1), Some(0));
    assert_eq!(life(Selector::Exactly, PLT, a.1), None);
    // A reserved rate code under its selector is an invalid request.
    let c = ctx(&f);
    let req = c.requester(MadAddress::gsi(a.1), false);
    let bad = PathRecord { rate: 25, ..t };
    assert_eq!(
        path_records(
            &c,
            &req,
            &bad,
            m | PathRecord::RATE | PathRecord::RATE_SELECTOR,
            Method::GET,
            PLT
        ),
        Err(SaStatus::ERR_REQ_INVALID)
    );
}

#[test]
fn partitions_decide_the_p_key_and_who_sees_a_path() {
    let mut n = net(gen::fat_tree_2level(4).expect("topology"), 0);
    let cas = n.cas();
    let (a, b, c, d, e) = (cas[0], cas[1], cas[2], cas[3], cas[4]);
    let full = |k: u16| PKey(0x8000 | k);
    let limited = PKey;
    // a, b: full members of 0x0001 and 0x0005; c: limited member of 0x0001 only;
    // d: only in 0x0002; e: only in the default partition.
    n.pkeys
        .insert(a.2, vec![PKey::DEFAULT_FULL, full(5), full(1)]);
    n.pkeys
        .insert(b.2, vec![full(1), full(5), PKey::DEFAULT_FULL]);
    n.pkeys.insert(c.2, vec![limited(1)]);
    n.pkeys.insert(d.2, vec![full(2)]);
    let f = n.fabric();
    let key = |s: u16, d: u16| get(&f, s, d).map(|r| r.p_key);
    assert_eq!(key(a.1, b.1), Some(0x8001), "the lowest shared base");
    assert_eq!(key(c.1, a.1), Some(0x0001), "as the source holds it");
    assert_eq!(key(a.1, c.1), Some(0x8001));
    assert_eq!(key(a.1, e.1), Some(0xFFFF));
    assert_eq!(key(c.1, d.1), None, "nothing shared");
    assert_eq!(key(a.1, d.1), None);
    assert_eq!(key(c.1, e.1), None, "c is not in the default partition");
    assert_eq!(key(d.1, d.1), Some(0x8002), "a port and itself");
    // A P_Key in the template: it must be shared, and comes back as asked.
    let (t, m) = lids(a.1, b.1);
    let with = |k: u16, s: u16, d: u16| {
        let t = PathRecord {
            p_key: k,
            slid: s,
            dlid: d,
            ..t
        };
        ask(&f, s, Method::GET, &t, m | PathRecord::P_KEY)
            .first()
            .map(|r| r.p_key)
    };
    assert_eq!(with(0x8005, a.1, b.1), Some(0x8005));
    assert_eq!(with(0x0005, a.1, b.1), Some(0x0005));
    assert_eq!(with(0xFFFF, a.1, b.1), Some(0xFFFF));
    assert_eq!(with(0x8001, c.1, b.1), Some(0x8001));
    assert_eq!(with(0x8005, a.1, e.1), None);
    assert_eq!(with(0x8002, a.1, d.1), None);
    // Raw traffic: no P_Key.
    let raw = PathRecord {
        raw_traffic: true,
        ..t
    };
    let r = ask(&f, a.1, Method::GET, &raw, m | PathRecord::RAW_TRAFFIC);
    assert_eq!((r[0].p_key, r[0].raw_traffic), (0, true));
    // Visibility: d (a requester sharing nothing with a and b) sees no path between
    // them unless it carries the SA_Key; a table from d holds only d itself.
    let cx = ctx(&f);
    for (trusted, want) in [(false, 0), (true, 1)] {
        let req = cx.requester(MadAddress::gsi(d.1), trusted);
        let got = path_records(&cx, &req, &t, m, Method::GET, PLT).unwrap();
        assert_eq!(got.len(), want, "trusted {trusted}");
    }
    let table = ask(
        &f,
        d.1,
        Method::GET_TABLE,
        &PathRecord::default(),
        ComponentMask::NONE,
    );
    assert_eq!(table.iter().map(|r| r.dlid).collect::<Vec<_>>(), vec![d.1]);
}

#[test]
fn lmc_gives_distinct_lids_up_to_numb_path() {
    let n = net(gen::fat_tree_3level(4).expect("topology"), 2);
    let f = n.fabric();
    let cas = n.cas();
    let (a, b) = (cas[1], cas[14]);
    let t = PathRecord {
        dgid: make_gid(DEFAULT_SUBNET_PREFIX, b.2),
        ..PathRecord::default()
    };
    let paths = |numb: Option<u8>, method: Method| {
        let (t, m) = match numb {
            Some(k) => (
                PathRecord { numb_path: k, ..t },
                PathRecord::DGID | PathRecord::NUMB_PATH,
            ),
            None => (t, PathRecord::DGID),
        };
        ask(&f, a.1, method, &t, m)
    };
    let two = paths(Some(2), Method::GET_TABLE);
    assert_eq!(two.len(), 2);
    assert_ne!(two[0].slid, two[1].slid);
    assert_ne!(two[0].dlid, two[1].dlid);
    assert!(two.iter().all(|r| r.preference == 0));
    let four = paths(Some(4), Method::GET_TABLE);
    let pairs: BTreeSet<(u16, u16)> = four.iter().map(|r| (r.slid - a.1, r.dlid - b.1)).collect();
    assert_eq!(
        pairs,
        BTreeSet::from([(0, 0), (1, 1), (2, 2), (3, 3)]),
        "in step first"
    );
    let six = paths(Some(6), Method::GET_TABLE);
    assert_eq!(six.iter().filter(|r| r.preference == 2).count(), 2);
    let all = paths(None, Method::GET_TABLE);
    assert_eq!(all.len(), 16, "every (SLID, DLID) without NumbPath");
    let distinct: BTreeSet<(u16, u16)> = all.iter().map(|r| (r.slid, r.dlid)).collect();
    assert_eq!(distinct.len(), 16);
    assert!(paths(Some(0), Method::GET_TABLE).is_empty());
    assert_eq!(paths(None, Method::GET).len(), 1, "a Get answers one path");
    // Each path is the walk to its exact DLID (LMC LIDs may go other ways).
    let mut ways = BTreeSet::new();
    for r in &all {
        let (links, mtu, rate) = n.expect((a.0, 1), r.dlid).expect("a path");
        assert_eq!((r.mtu, Rate::from_iba(r.rate)), (mtu, Some(rate)));
        let w = walk(&n.topo, &Tables(&n.lfts), (a.0, 1), r.dlid).unwrap();
        assert_eq!(w.summary.links, links);
        ways.insert(w.hops.iter().map(|h| h.switch).collect::<Vec<_>>());
    }
    assert!(ways.len() > 1, "the LMC LIDs are routed apart");
    // A given SLID or DLID is used exactly, even if not the base.
    let t2 = PathRecord {
        slid: a.1 + 3,
        dlid: b.1 + 2,
        ..PathRecord::default()
    };
    let got = ask(
        &f,
        a.1,
        Method::GET_TABLE,
        &t2,
        PathRecord::SLID | PathRecord::DLID,
    );
    assert_eq!(
        got.iter().map(|r| (r.slid, r.dlid)).collect::<Vec<_>>(),
        vec![(a.1 + 3, b.1 + 2)]
    );
    let got = ask(&f, a.1, Method::GET_TABLE, &t2, PathRecord::DLID);
    assert_eq!(got.len(), 4, "every SLID of the requester to that DLID");
    assert!(got.iter().all(|r| r.dlid == b.1 + 2));
    // One SLID to everyone: every DLID of each CA (4), the switches' one each.
    let got = ask(&f, a.1, Method::GET_TABLE, &t2, PathRecord::SLID);
    let switches = f.end_ports().iter().filter(|e| e.lmc == 0).count();
    assert_eq!(got.len(), cas.len() * 4 + switches);
    assert!(got.iter().all(|r| r.slid == a.1 + 3));
}

#[test]
fn an_all_to_all_on_a_k8_fat_tree_agrees_with_walks() {
    // 128 HCAs and 80 switches: 43k pairs, each a table lookup both ways.
    let n = net(gen::fat_tree_3level(8).expect("topology"), 0);
    let f = n.fabric();
    let ends: Vec<EndPort> = f.end_ports();
    let mut total = 0;
    for src in n.cas() {
        let got = ask(
            &f,
            src.1,
            Method::GET_TABLE,
            &PathRecord::default(),
            ComponentMask::NONE,
        );
        assert_eq!(got.len(), ends.len());
        for r in &got {
            let (_, mtu, rate) = n.expect((src.0, 1), r.dlid).expect("a path");
            assert_eq!((r.mtu, Rate::from_iba(r.rate)), (mtu, Some(rate)));
        }
        total += got.len();
    }
    assert_eq!(total, n.cas().len() * ends.len());
}

#[test]
fn rates_only_2x_or_hdr_links_give_are_lowered_for_ports_that_do_not_announce_them() {
    use super::super::params::rate_for_port;
    let code = |c: u8| Rate::from_iba(c).unwrap();
    let old = PortInfo::default();
    let ext = PortInfo {
        capability_mask: CapabilityMask(CapabilityMask::IS_EXTENDED_SPEEDS_SUPPORTED),
        ..old
    };
    let cap2 = |bits: u16| PortInfo {
        capability_mask: CapabilityMask(CapabilityMask::IS_CAPABILITY_MASK2_SUPPORTED),
        capability_mask2: bits,
        ..old
    };
    // 28 Gb/s (2x FDR): 20 Gb/s for an old port, 25 with extended speeds.
    assert_eq!(rate_for_port(&old, code(19)), code(6));
    assert_eq!(rate_for_port(&ext, code(19)), code(15));
    assert_eq!(rate_for_port(&cap2(0x0010), code(19)), code(19));
    // 50 Gb/s: 40 unless 2x or HDR is announced.
    assert_eq!(rate_for_port(&old, code(20)), code(7));
    assert_eq!(rate_for_port(&cap2(0x0020), code(20)), code(20));
    // 400 Gb/s: 300 without HDR/NDR; 1200 Gb/s: 600 with HDR only, 300 without.
    assert_eq!(rate_for_port(&old, code(21)), code(18));
    assert_eq!(rate_for_port(&cap2(0x0020), code(21)), code(21));
    assert_eq!(rate_for_port(&cap2(0x0020), code(24)), code(22));
    assert_eq!(rate_for_port(&cap2(0), code(24)), code(18));
    assert_eq!(rate_for_port(&cap2(0x0400), code(24)), code(24));
    // Other rates pass.
    assert_eq!(rate_for_port(&old, Rate::GBPS_10), Rate::GBPS_10);
}

/// saquery on ibsim against OpenSM: the path from a switch's port 0 to itself has
/// the port's MTUCap (1024 there), whatever its NeighborMTU reads (256 there: port 0
/// has no link to negotiate one).
#[test]
fn a_switch_to_itself_runs_at_its_port_0_mtu_cap() {
    let mut n = net(gen::fat_tree_2level(4).expect("topology"), 0);
    let (sw, lid) = n
        .topo
        .iter()
        .find(|(_, node)| node.is_switch())
        .and_then(|(i, node)| Some((i, node.port(0)?.lid)))
        .expect("a switch");
    let pi = n.pi(sw, 0);
    pi.mtu_cap = 3;
    pi.neighbor_mtu = 1;
    let pr = get(&n.fabric(), lid, lid).expect("a path to itself");
    assert_eq!(pr.mtu, 3, "{pr:?}");
}
