//! LID manager: uniqueness, alignment, idempotence, keeping valid LIDs,
//! duplicate repair, exhaustion and the guid2lid file.

use std::collections::HashMap;

use ibsm_fabric::gen;
use ibsm_fabric::lid::{is_valid_block, Guid2LidErrorKind, LidConfig, LidManager, MAX_UNICAST_LID};
use ibsm_fabric::{NodeIdx, Topology};
use proptest::prelude::*;

/// (node, port, base, lmc) of every port that should have LIDs.
fn lid_ports(t: &Topology) -> Vec<(NodeIdx, u8, u16, u8)> {
    let mut v = Vec::new();
    for (idx, n) in t.iter() {
        if n.is_switch() {
            v.push((idx, 0, n.ports[0].lid, n.ports[0].lmc));
        } else {
            for (pn, p) in n.physical_ports() {
                if p.remote.is_some() {
                    v.push((idx, pn, p.lid, p.lmc));
                }
            }
        }
    }
    v
}

/// Every port has a valid block of the right size and no LID is used twice.
fn check_unique_aligned(t: &Topology, lmc: u8) {
    let mut owner: HashMap<u16, (NodeIdx, u8)> = HashMap::new();
    for (idx, port, lid, l) in lid_ports(t) {
        let is_switch = t.node(idx).unwrap().is_switch();
        let want = if is_switch { 0 } else { lmc };
        assert_eq!(l, want, "node {idx} port {port} LMC");
        assert!(
            is_valid_block(lid, l),
            "node {idx} port {port}: {lid:#x}/{l}"
        );
        assert_eq!(u32::from(lid) % (1 << l), 0);
        for x in lid..lid + (1 << l) {
            assert!(x <= MAX_UNICAST_LID);
            if let Some(prev) = owner.insert(x, (idx, port)) {
                panic!("LID {x:#x} given to {prev:?} and {:?}", (idx, port));
            }
        }
    }
}

fn total(r: &ibsm_fabric::lid::LidReport) -> usize {
    r.assigned + r.kept + r.changed + r.unassigned
}

#[test]
fn fat_trees_get_unique_aligned_lids() {
    for lmc in 0..=3 {
        let mut t = gen::fat_tree_2level(8).unwrap();
        let mut lm = LidManager::new(LidConfig { lmc });
        let r = lm.assign(&mut t).unwrap();
        assert_eq!(r.assigned, 32 + 12);
        assert_eq!((r.kept, r.changed, r.unassigned), (0, 0, 0));
        check_unique_aligned(&t, lmc);
        let mut t = gen::fat_tree_3level(6).unwrap();
        LidManager::new(LidConfig { lmc }).assign(&mut t).unwrap();
        check_unique_aligned(&t, lmc);
    }
    assert!(LidManager::new(LidConfig { lmc: 8 })
        .assign(&mut Topology::new())
        .is_err());
}

#[test]
fn exhaustion_prefers_end_ports_and_never_duplicates() {
    // LMC 7: 383 blocks of 128 fit; 400 HCAs do not.
    let mut t = gen::random(3, 20, 400, 24).unwrap();
    let mut lm = LidManager::new(LidConfig { lmc: 7 });
    let r = lm.assign(&mut t).unwrap();
    assert_eq!(r.unassigned, 400 - 383);
    assert_eq!(r.assigned, 383 + 20, "all switches fit in LIDs 1..127");
    let assigned: Vec<_> = lid_ports(&t).into_iter().filter(|p| p.2 != 0).collect();
    assert_eq!(assigned.len(), 383 + 20);
    let mut seen = std::collections::HashSet::new();
    for (_, _, lid, l) in assigned {
        assert!(is_valid_block(lid, l));
        for x in lid..lid + (1 << l) {
            assert!(seen.insert(x));
        }
    }
}

#[test]
fn remembered_lids_survive_a_port_going_away_and_coming_back() {
    let mut t = gen::fat_tree_2level(4).unwrap();
    let mut lm = LidManager::new(LidConfig { lmc: 1 });
    lm.assign(&mut t).unwrap();
    let h = t.find_by_name("hca-0").unwrap();
    let guid = t.node(h).unwrap().ports[1].port_guid;
    let old = t.node(h).unwrap().ports[1].lid;
    let (sw, sp) = t.disconnect(h, 1).unwrap().unwrap();
    t.set_port_lid(h, 1, 0, 0).unwrap();
    // A newcomer must not get the absent port's LIDs.
    let mut newcomer = ibsm_fabric::Node::new(ibsm_fabric::NodeType::Ca, 0x9999_0000, 1, "new");
    newcomer.name = "new".into();
    let n = t.add_node(newcomer).unwrap();
    t.connect(n, 1, sw, sp).unwrap();
    lm.assign(&mut t).unwrap();
    assert_ne!(t.node(n).unwrap().ports[1].lid, old);
    assert_eq!(lm.lid_range(guid), Some((old, old + 1)));
    // The old port returns on another switch port: same LIDs.
    t.disconnect(n, 1).unwrap();
    t.connect(h, 1, sw, sp).unwrap();
    let r = lm.assign(&mut t).unwrap();
    assert_eq!(t.node(h).unwrap().ports[1].lid, old);
    assert_eq!(r.assigned, 1);
    check_unique_aligned(&t, 1);
}

#[test]
fn lmc_change_keeps_aligned_lids_and_moves_the_rest() {
    let mut t = gen::fat_tree_2level(4).unwrap();
    LidManager::new(LidConfig { lmc: 0 })
        .assign(&mut t)
        .unwrap();
    let before: Vec<_> = lid_ports(&t);
    let mut lm = LidManager::new(LidConfig { lmc: 2 });
    let r = lm.assign(&mut t).unwrap();
    check_unique_aligned(&t, 2);
    assert_eq!(total(&r), before.len());
    // HCAs (lower NodeIdx, claimed first) whose LID is 4-aligned keep it;
    // a switch keeps its LID unless such an HCA block now covers it.
    let mut covered = std::collections::HashSet::new();
    for (idx, port, lid, _) in &before {
        let node = t.node(*idx).unwrap();
        if !node.is_switch() && lid % 4 == 0 {
            assert_eq!(node.ports[usize::from(*port)].lid, *lid);
            covered.extend(*lid..*lid + 4);
        }
    }
    for (idx, _, lid, _) in &before {
        let node = t.node(*idx).unwrap();
        if node.is_switch() {
            assert_eq!(node.ports[0].lid == *lid, !covered.contains(lid));
        }
    }
    assert!(r.changed > 0);
}

#[test]
fn guid2lid_errors_name_the_line() {
    let mut lm = LidManager::new(LidConfig::default());
    let good = "# comment\n0x0002c90300000001 0x0001 0x0001\n\n";
    type KindCheck = fn(&Guid2LidErrorKind) -> bool;
    let cases: &[(&str, usize, KindCheck)] = &[
        ("0x1 0x2\n", 1, |k| {
            matches!(k, Guid2LidErrorKind::FieldCount(2))
        }),
        ("0x1 1 1 9\n", 1, |k| {
            matches!(k, Guid2LidErrorKind::FieldCount(4))
        }),
        ("zz 1 1\n", 1, |k| {
            matches!(k, Guid2LidErrorKind::BadGuid(_))
        }),
        ("0x0 1 1\n", 1, |k| {
            matches!(k, Guid2LidErrorKind::BadGuid(_))
        }),
        ("0x5 0x10000 0x10000\n", 1, |k| {
            matches!(k, Guid2LidErrorKind::BadLid(_))
        }),
        ("0x5 0 0\n", 1, |k| {
            matches!(k, Guid2LidErrorKind::BadRange { .. })
        }),
        ("0x5 0xc000 0xc000\n", 1, |k| {
            matches!(k, Guid2LidErrorKind::BadRange { .. })
        }),
        ("0x5 9 8\n", 1, |k| {
            matches!(k, Guid2LidErrorKind::BadRange { .. })
        }),
        ("0x5 5 6\n", 1, |k| {
            matches!(k, Guid2LidErrorKind::NotAligned { .. })
        }),
        ("0x5 4 6\n", 1, |k| {
            matches!(k, Guid2LidErrorKind::NotAligned { .. })
        }),
        ("0x5 4 7\n0x5 8 8\n", 2, |k| {
            matches!(k, Guid2LidErrorKind::DuplicateGuid(5))
        }),
        ("0x5 4 7\n0x6 6 6\n", 2, |k| {
            matches!(k, Guid2LidErrorKind::Overlap { guid: 6, other: 5 })
        }),
    ];
    for (body, line, kind) in cases {
        let text = format!("{good}{body}");
        let e = lm.import_guid2lid(&text).unwrap_err();
        assert_eq!(e.line, line + 3, "{text:?}: {e}");
        assert!(kind(&e.kind), "{text:?}: {e}");
        assert!(e.to_string().contains(&format!("line {}", line + 3)));
    }
    // A failed import changes nothing; a good one replaces the memory.
    assert_eq!(lm.remembered_len(), 0);
    assert_eq!(lm.import_guid2lid(good).unwrap(), 1);
    assert_eq!(lm.lid_range(0x0002_c903_0000_0001), Some((1, 1)));
    assert_eq!(lm.export_guid2lid(), "0x0002c90300000001 0x0001 0x0001\n");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn allocator_properties(
        seed in any::<u64>(),
        switches in 1u32..24,
        hcas_per_switch in 0u32..6,
        lmc in 0u8..=3,
        preset in proptest::collection::vec((any::<u16>(), any::<u16>()), 0..20),
        dup_pairs in proptest::collection::vec((any::<u16>(), any::<u16>()), 0..6),
    ) {
        let mut t = gen::random(seed, switches, switches * hcas_per_switch, 12).unwrap();
        let ports = lid_ports(&t);
        // Plant valid, distinct existing LIDs on some ports.
        let mut planted: HashMap<(NodeIdx, u8), u16> = HashMap::new();
        let mut used = std::collections::HashSet::new();
        for (which, raw) in preset {
            let (idx, port, _, _) = ports[usize::from(which) % ports.len()];
            let l = if t.node(idx).unwrap().is_switch() { 0 } else { lmc };
            let size = 1u16 << l;
            let base = (raw % (MAX_UNICAST_LID / size)).max(1) * size;
            if !is_valid_block(base, l) || planted.contains_key(&(idx, port))
                || (base..base + size).any(|x| used.contains(&x)) {
                continue;
            }
            used.extend(base..base + size);
            planted.insert((idx, port), base);
            t.set_port_lid(idx, port, base, l).unwrap();
        }
        let mut lm = LidManager::new(LidConfig { lmc });
        let r1 = lm.assign(&mut t).unwrap();
        check_unique_aligned(&t, lmc);
        prop_assert_eq!(total(&r1), ports.len());
        prop_assert_eq!(r1.kept, planted.len());
        for ((idx, port), base) in &planted {
            prop_assert_eq!(t.node(*idx).unwrap().ports[usize::from(*port)].lid, *base);
        }
        let first: Vec<_> = lid_ports(&t);

        // Idempotent: same manager, and a fresh one, keep everything.
        let r2 = lm.assign(&mut t).unwrap();
        prop_assert_eq!((r2.kept, r2.changed, r2.assigned), (ports.len(), 0, 0));
        prop_assert_eq!(&lid_ports(&t), &first);
        let r3 = LidManager::new(LidConfig { lmc }).assign(&mut t).unwrap();
        prop_assert_eq!(r3.kept, ports.len());

        // guid2lid round trip: a new manager fed the file reproduces the
        // LIDs on a topology whose ports lost theirs.
        let file = lm.export_guid2lid();
        let mut lm2 = LidManager::new(LidConfig { lmc });
        prop_assert_eq!(lm2.import_guid2lid(&file).unwrap(), ports.len());
        prop_assert_eq!(&lm2.export_guid2lid(), &file);
        let mut blank = t.clone();
        for &(idx, port, _, _) in &ports {
            blank.set_port_lid(idx, port, 0, 0).unwrap();
        }
        let r4 = lm2.assign(&mut blank).unwrap();
        prop_assert_eq!(r4.assigned, ports.len());
        prop_assert_eq!(&lid_ports(&blank), &first);

        // Planted duplicates: copy one port's block onto another of the
        // same kind; a fresh manager moves exactly the later one.
        let mut dup = t.clone();
        let mut expected = 0;
        let mut victims = std::collections::HashSet::new();
        for (a, b) in dup_pairs {
            let pa = first[usize::from(a) % first.len()];
            let pb = first[usize::from(b) % first.len()];
            let same_kind = pa.3 == pb.3;
            if !same_kind || pa.0 >= pb.0 || victims.contains(&pa.0) || victims.contains(&pb.0) {
                continue;
            }
            victims.insert(pa.0);
            victims.insert(pb.0);
            dup.set_port_lid(pb.0, pb.1, pa.2, pa.3).unwrap();
            expected += 1;
        }
        let rd = LidManager::new(LidConfig { lmc }).assign(&mut dup).unwrap();
        check_unique_aligned(&dup, lmc);
        prop_assert_eq!(rd.duplicates_repaired, expected);
        prop_assert_eq!(rd.changed, expected);
    }
}

/// A fat tree whose `hca-0` has a twin: a second CA with the same NodeGUID
/// and port GUIDs, cabled to a free switch port. Returns (original, twin).
fn with_twin(t: &mut Topology) -> (NodeIdx, NodeIdx) {
    let h = t.find_by_name("hca-0").unwrap();
    let orig = t.node(h).unwrap().clone();
    let sw = t.neighbor(h, 1).unwrap().0;
    let free = t
        .node(sw)
        .unwrap()
        .physical_ports()
        .find(|(_, p)| p.remote.is_none())
        .map(|(n, _)| n);
    let (sw2, free) = match free {
        Some(p) => (sw, p),
        None => {
            // No free port: take the cable of another CA.
            let other = t.find_by_name("hca-1").unwrap();
            let (s, p) = t.disconnect(other, 1).unwrap().unwrap();
            (s, p)
        }
    };
    let mut twin = orig.clone();
    twin.name = "twin".into();
    for p in &mut twin.ports {
        p.lid = 0;
    }
    let d = t.add_duplicate_node(twin).unwrap();
    t.connect(d, 1, sw2, free).unwrap();
    // The GUID indexes keep naming the original.
    assert_eq!(t.find_by_guid(orig.node_guid), Some(h));
    assert_eq!(t.find_by_port_guid(orig.ports[1].port_guid), Some((h, 1)));
    (h, d)
}

#[test]
fn a_duplicate_port_guid_leaves_the_lid_with_its_holder() {
    let mut t = gen::fat_tree_2level(4).unwrap();
    let mut lm = LidManager::new(LidConfig { lmc: 0 });
    lm.assign(&mut t).unwrap();
    let (h, d) = with_twin(&mut t);
    let held = t.node(h).unwrap().ports[1].lid;
    assert_ne!(held, 0);
    let r = lm.assign(&mut t).unwrap();
    assert_eq!(r.withheld_duplicates, 1);
    assert_eq!(t.node(h).unwrap().ports[1].lid, held, "the holder keeps it");
    assert_eq!(t.node(d).unwrap().ports[1].lid, 0, "the newcomer gets none");

    // Same when the newcomer comes first in index order: the holder is the
    // port that carries the remembered LID, not the first one found.
    let mut t2 = Topology::new();
    let twin = t.node(d).unwrap().clone();
    let d2 = t2.add_node(twin).unwrap();
    let mut orig = t.node(h).unwrap().clone();
    orig.name = "orig".into();
    let h2 = t2.add_duplicate_node(orig).unwrap();
    let sw = t2
        .add_node(ibsm_fabric::Node::new(
            ibsm_fabric::NodeType::Switch,
            0x7777_0000,
            4,
            "sw",
        ))
        .unwrap();
    t2.connect(d2, 1, sw, 1).unwrap();
    t2.connect(h2, 1, sw, 2).unwrap();
    t2.set_port_lid(h2, 1, held, 0).unwrap();
    let r = lm.assign(&mut t2).unwrap();
    assert_eq!(r.withheld_duplicates, 1);
    assert_eq!(t2.node(h2).unwrap().ports[1].lid, held);
    assert_eq!(t2.node(d2).unwrap().ports[1].lid, 0);
    assert_eq!(
        lm.lid_range(t2.node(h2).unwrap().ports[1].port_guid),
        Some((held, held))
    );
}

#[test]
fn a_duplicate_port_guid_that_nobody_holds_gets_no_lid_and_stays_reserved() {
    let mut t = gen::fat_tree_2level(4).unwrap();
    let mut lm = LidManager::new(LidConfig { lmc: 0 });
    lm.assign(&mut t).unwrap();
    let (h, d) = with_twin(&mut t);
    let guid = t.node(h).unwrap().ports[1].port_guid;
    let remembered = t.node(h).unwrap().ports[1].lid;
    t.set_port_lid(h, 1, 0, 0).unwrap();
    let r = lm.assign(&mut t).unwrap();
    assert_eq!(r.withheld_duplicates, 2);
    assert_eq!(t.node(h).unwrap().ports[1].lid, 0);
    assert_eq!(t.node(d).unwrap().ports[1].lid, 0);
    // The GUID's range is kept for when the operator resolves it, and
    // nobody else got it.
    assert_eq!(lm.lid_range(guid), Some((remembered, remembered)));
    assert!(lid_ports(&t)
        .iter()
        .all(|&(_, _, lid, _)| lid != remembered));

    // Nothing remembered and neither carries a LID: neither gets one.
    let mut fresh = LidManager::new(LidConfig { lmc: 0 });
    let r = fresh.assign(&mut t).unwrap();
    assert_eq!(r.withheld_duplicates, 2);
    assert_eq!(t.node(h).unwrap().ports[1].lid, 0);
    assert_eq!(t.node(d).unwrap().ports[1].lid, 0);
    assert_eq!(fresh.lid_range(guid), None);
}
