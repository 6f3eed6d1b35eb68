//! Multicast trees and MFT blocks, checked against brute force: a flood of each
//! sender's packet through the masks with IBA's forwarding rule (every port of the
//! entry but the ingress), BFS hop counts for the root, and a model switch that
//! applies the MFT writes.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use proptest::prelude::*;

use super::*;
use crate::gen;
use crate::topology::{Node, NodeIdx, NodeType, Topology};

const FULL: JoinState = JoinState::FULL_MEMBER;
const NON: JoinState = JoinState::NON_MEMBER;
const SEND: JoinState = JoinState::SEND_ONLY_NON_MEMBER;

fn hcas(t: &Topology) -> Vec<NodeIdx> {
    t.iter()
        .filter(|(_, n)| n.node_type == NodeType::Ca)
        .map(|(i, _)| i)
        .collect()
}

fn switches(t: &Topology) -> Vec<NodeIdx> {
    t.iter()
        .filter(|(_, n)| n.is_switch())
        .map(|(i, _)| i)
        .collect()
}

fn is_switch(t: &Topology, n: NodeIdx) -> bool {
    t.node(n).is_some_and(Node::is_switch)
}

/// Where a member's packets enter the switch graph: (switch, ingress port).
fn attach_of(t: &Topology, (n, p): (NodeIdx, u8)) -> Option<(NodeIdx, u8)> {
    if is_switch(t, n) {
        return (p == 0).then_some((n, 0));
    }
    let (r, rp) = t.neighbor(n, p)?;
    is_switch(t, r).then_some((r, rp))
}

/// Flood one packet from `from` through the tree: every end port it is delivered
/// to (with repeats), and whether some switch saw it twice (a loop or a
/// duplicate).
fn flood(t: &Topology, tree: &McastTree, from: (NodeIdx, u8)) -> (Vec<(NodeIdx, u8)>, bool) {
    let mut got = Vec::new();
    let Some(start) = attach_of(t, from) else {
        return (got, false);
    };
    let mut seen = BTreeSet::new();
    let mut twice = false;
    let mut q = VecDeque::from([start]);
    while let Some((sw, ingress)) = q.pop_front() {
        if !seen.insert(sw) {
            twice = true;
            continue;
        }
        if seen.len() > t.len() {
            break;
        }
        for p in tree.mask(sw).ports().filter(|&p| p != ingress) {
            if p == 0 {
                got.push((sw, 0));
                continue;
            }
            match t.neighbor(sw, p) {
                Some((r, rp)) if is_switch(t, r) => q.push_back((r, rp)),
                Some((r, rp)) => got.push((r, rp)),
                None => {}
            }
        }
    }
    (got, twice)
}

/// Switch hop counts from `s` by plain BFS.
fn bfs(t: &Topology, s: NodeIdx) -> HashMap<NodeIdx, u32> {
    let mut d = HashMap::from([(s, 0)]);
    let mut q = VecDeque::from([s]);
    while let Some(v) = q.pop_front() {
        let dv = d[&v];
        for (_, p) in t.node(v).unwrap().physical_ports() {
            if let Some((r, _)) = p.remote {
                if is_switch(t, r) && !d.contains_key(&r) {
                    d.insert(r, dv + 1);
                    q.push_back(r);
                }
            }
        }
    }
    d
}

/// Check every property a tree must have; `members` as (end port, join).
fn check_tree(t: &Topology, members: &[McastMember], tree: &McastTree) {
    // Resolve and merge join states as the tree does.
    let mut joined: BTreeMap<(NodeIdx, u8), JoinState> = BTreeMap::new();
    for m in members {
        if let Ok(ep) = m.port.resolve(t) {
            if !m.join.is_empty() && attach_of(t, ep).is_some() {
                let e = joined.entry(ep).or_default();
                *e = *e | m.join;
            }
        }
    }
    // Which placed members are on the root's component.
    let comp = tree.root.map(|r| bfs(t, r)).unwrap_or_default();
    let on_tree: BTreeMap<(NodeIdx, u8), JoinState> = joined
        .iter()
        .filter(|(&ep, _)| attach_of(t, ep).is_some_and(|(s, _)| comp.contains_key(&s)))
        .map(|(&k, &v)| (k, v))
        .collect();
    let receivers: BTreeSet<(NodeIdx, u8)> = on_tree
        .iter()
        .filter(|(_, j)| j.receives())
        .map(|(&k, _)| k)
        .collect();
    if !joined.values().any(|j| j.receives()) {
        assert_eq!(tree.root, None);
        assert!(tree.per_switch.is_empty());
    } else {
        assert!(tree.root.is_some());
    }
    // Management port bit only on receiving switch members; only switches have masks.
    for (&sw, m) in &tree.per_switch {
        assert!(is_switch(t, sw));
        assert!(!m.is_empty());
        assert!(m.highest().unwrap() <= t.node(sw).unwrap().num_ports());
        if m.contains(0) {
            assert!(receivers.contains(&(sw, 0)), "port 0 of {sw} set: {tree:?}");
        }
        for p in m.ports().filter(|&p| p != 0) {
            // Every set port is cabled: to a switch, or to a receiving end port.
            let (r, rp) = t.neighbor(sw, p).expect("set port is cabled");
            if !is_switch(t, r) {
                assert!(receivers.contains(&(r, rp)), "{r}:{rp} gets a delivery bit");
            }
        }
    }
    // Each member's packet reaches every other receiver exactly once, nobody
    // else, and no switch twice.
    for &ep in on_tree.keys() {
        let (got, twice) = flood(t, tree, ep);
        assert!(!twice, "a switch saw {ep:?}'s packet twice: {tree:?}");
        let got_set: BTreeSet<_> = got.iter().copied().collect();
        assert_eq!(got.len(), got_set.len(), "duplicate delivery");
        let want: BTreeSet<_> = receivers.iter().copied().filter(|&r| r != ep).collect();
        assert_eq!(got_set, want, "deliveries of {ep:?}");
    }
    // The cables with a bit on either end form a tree over the switches with masks.
    let nodes: BTreeSet<NodeIdx> = tree.per_switch.keys().copied().collect();
    let mut edges = BTreeSet::new();
    for (&sw, m) in &tree.per_switch {
        for p in m.ports().filter(|&p| p != 0) {
            if let Some((r, rp)) = t.neighbor(sw, p) {
                if is_switch(t, r) {
                    edges.insert(((sw, p).min((r, rp)), (sw, p).max((r, rp))));
                }
            }
        }
    }
    let mut uf: HashMap<NodeIdx, NodeIdx> = nodes.iter().map(|&n| (n, n)).collect();
    fn find(uf: &mut HashMap<NodeIdx, NodeIdx>, x: NodeIdx) -> NodeIdx {
        let p = uf[&x];
        if p == x {
            return x;
        }
        let r = find(uf, p);
        uf.insert(x, r);
        r
    }
    for &((a, _), (b, _)) in &edges {
        uf.entry(a).or_insert(a);
        uf.entry(b).or_insert(b);
        let (ra, rb) = (find(&mut uf, a), find(&mut uf, b));
        assert_ne!(ra, rb, "cycle through {a} {b}: {tree:?}");
        uf.insert(ra, rb);
    }
    let roots: BTreeSet<NodeIdx> = nodes.iter().map(|&n| find(&mut uf, n)).collect();
    assert!(roots.len() <= 1, "tree is not connected: {tree:?}");
    // Nothing is forwarded in vain: a bit towards another switch has a member
    // on its own side of that cable and a receiver on the far side.
    let tree_adj = |x: NodeIdx| -> Vec<NodeIdx> {
        edges
            .iter()
            .filter_map(|&((a, _), (b, _))| {
                if a == x {
                    Some(b)
                } else if b == x {
                    Some(a)
                } else {
                    None
                }
            })
            .collect()
    };
    // The switches reachable from `from` over tree cables without crossing `cut`.
    let side = |from: NodeIdx, cut: (NodeIdx, NodeIdx)| -> BTreeSet<NodeIdx> {
        let mut seen = BTreeSet::from([from]);
        let mut q = vec![from];
        while let Some(v) = q.pop() {
            for w in tree_adj(v) {
                if (v, w) != cut && (w, v) != cut && seen.insert(w) {
                    q.push(w);
                }
            }
        }
        seen
    };
    for (&sw, m) in &tree.per_switch {
        for p in m.ports().filter(|&p| p != 0) {
            let Some((r, _)) = t.neighbor(sw, p).filter(|&(r, _)| is_switch(t, r)) else {
                continue;
            };
            let near = side(sw, (sw, r));
            let far = side(r, (sw, r));
            let sender_near = on_tree
                .keys()
                .any(|&ep| attach_of(t, ep).is_some_and(|(s, _)| near.contains(&s)));
            let receiver_far = receivers
                .iter()
                .any(|&ep| attach_of(t, ep).is_some_and(|(s, _)| far.contains(&s)));
            assert!(
                sender_near && receiver_far,
                "{sw} port {p} forwards in vain: {tree:?}"
            );
        }
    }
}

/// The root by brute force: min (unreached, max hops, total hops), lowest GUID.
fn brute_root(t: &Topology, members: &[McastMember]) -> Option<NodeIdx> {
    let mut at: BTreeSet<(NodeIdx, u8)> = BTreeSet::new();
    for m in members {
        if m.join.is_empty() {
            continue;
        }
        if let Some(a) = m.port.resolve(t).ok().and_then(|ep| attach_of(t, ep)) {
            at.insert(a);
        }
    }
    let mut best: Option<((u32, u32, u64), u64, NodeIdx)> = None;
    for s in switches(t) {
        let d = bfs(t, s);
        let mut key = (0u32, 0u32, 0u64);
        for &(sw, p) in &at {
            match d.get(&sw) {
                None => key.0 += 1,
                Some(&h) => {
                    let ca = u32::from(p != 0);
                    let ca_here = at.iter().any(|&(x, q)| x == sw && q != 0);
                    key.1 = key.1.max(h + u32::from(ca_here));
                    key.2 += u64::from(h + ca);
                }
            }
        }
        let g = t.node(s).unwrap().node_guid;
        if best.is_none_or(|b| (key, g) < (b.0, b.1)) {
            best = Some((key, g, s));
        }
    }
    best.map(|b| b.2)
}

fn fabric(t: &Topology) -> McastFabric {
    McastFabric::new(t).unwrap()
}

#[test]
fn broadcast_group_on_a_fat_tree() {
    let t = gen::fat_tree_2level(8).unwrap();
    let f = fabric(&t);
    let members: Vec<_> = hcas(&t)
        .into_iter()
        .map(|h| McastMember::new((h, 1), FULL))
        .collect();
    let tree = f.tree(&t, &members, &TreeOptions::default()).unwrap();
    check_tree(&t, &members, &tree);
    assert!(tree.excluded.is_empty());
    // Rooted on a spine (max hops 2 to every HCA), the lowest-GUID one.
    let root = tree.root.unwrap();
    assert_eq!(Some(root), brute_root(&t, &members));
    assert!(t.node(root).unwrap().name.starts_with("spine"));
    // Every switch takes part: 8 leaves + the root spine.
    assert_eq!(tree.per_switch.len(), 9);
    // Spreading picks other spines.
    let roots: BTreeSet<_> = (0..8)
        .map(|s| {
            f.tree(&t, &members, &TreeOptions { spread: s })
                .unwrap()
                .root
        })
        .collect();
    assert_eq!(roots.len(), 4);
}

#[test]
fn send_only_branch_forwards_up_and_receives_nothing() {
    // sw0 - sw1 - sw2 in a line; h0 on sw0 receives, h2 on sw2 only sends.
    let mut t = Topology::new();
    let s: Vec<_> = (0..3)
        .map(|i| {
            t.add_node(Node::new(NodeType::Switch, 0x100 + i, 4, "s"))
                .unwrap()
        })
        .collect();
    let h: Vec<_> = (0..3)
        .map(|i| {
            t.add_node(Node::new(NodeType::Ca, 0x1000 + 0x10 * i, 1, "h"))
                .unwrap()
        })
        .collect();
    t.connect(s[0], 1, s[1], 1).unwrap();
    t.connect(s[1], 2, s[2], 1).unwrap();
    for i in 0..3 {
        t.connect(s[i], 4, h[i], 1).unwrap();
    }
    let f = fabric(&t);
    let members = [
        McastMember::new((h[0], 1), FULL),
        McastMember::new((h[2], 1), SEND),
    ];
    let tree = f.tree(&t, &members, &TreeOptions::default()).unwrap();
    check_tree(&t, &members, &tree);
    assert_eq!(tree.root, Some(s[1]));
    assert_eq!(tree.mask(s[0]), PortMask::of([4]));
    assert_eq!(tree.mask(s[1]), PortMask::of([1]));
    assert_eq!(tree.mask(s[2]), PortMask::of([1]));
    // As a NonMember h2 receives too.
    let members = [
        McastMember::new((h[0], 1), FULL),
        McastMember::new((h[2], 1), SEND | NON),
    ];
    let tree = f.tree(&t, &members, &TreeOptions::default()).unwrap();
    check_tree(&t, &members, &tree);
    assert_eq!(tree.mask(s[0]), PortMask::of([1, 4]));
    assert_eq!(tree.mask(s[1]), PortMask::of([1, 2]));
    assert_eq!(tree.mask(s[2]), PortMask::of([1, 4]));
    // Only senders: nothing to deliver.
    let members = [McastMember::new((h[2], 1), SEND)];
    let tree = f.tree(&t, &members, &TreeOptions::default()).unwrap();
    assert_eq!(tree, McastTree::default());
    // A switch as a member: port 0 only when it receives.
    let members = [
        McastMember::new(EndPort::Guid(0x101), FULL),
        McastMember::new((h[0], 1), SEND),
    ];
    let tree = f.tree(&t, &members, &TreeOptions::default()).unwrap();
    check_tree(&t, &members, &tree);
    assert_eq!(tree.mask(s[1]), PortMask::of([0]));
    assert_eq!(tree.mask(s[0]), PortMask::of([1]));
    let members = [
        McastMember::new((s[1], 0), SEND),
        McastMember::new((h[0], 1), FULL),
    ];
    let tree = f.tree(&t, &members, &TreeOptions::default()).unwrap();
    assert!(!tree.mask(s[1]).contains(0));
    assert_eq!(tree.mask(s[0]), PortMask::of([4]));
}

#[test]
fn members_that_cannot_be_placed_are_reported() {
    let mut t = gen::fat_tree_2level(4).unwrap();
    let h = hcas(&t);
    let leaf = t.neighbor(h[0], 1).unwrap().0;
    t.disconnect(h[1], 1).unwrap();
    let f = fabric(&t);
    let members = [
        McastMember::new((h[0], 1), FULL),
        McastMember::new((h[1], 1), FULL),
        McastMember::new(EndPort::Guid(0xdead), FULL),
        McastMember::new((leaf, 1), FULL),
        McastMember::new((h[0], 0), FULL),
        McastMember::new((NodeIdx(9999), 1), FULL),
        McastMember::new((h[2], 1), JoinState::default()),
        McastMember::new((h[3], 1), NON),
    ];
    let tree = f.tree(&t, &members, &TreeOptions::default()).unwrap();
    check_tree(&t, &members, &tree);
    let issues: Vec<_> = tree.excluded.iter().map(|e| e.issue.clone()).collect();
    assert_eq!(
        issues,
        vec![
            MemberIssue::NotCabled {
                node: h[1],
                port: 1
            },
            MemberIssue::UnknownGuid(0xdead),
            MemberIssue::NotEndPort {
                node: leaf,
                port: 1
            },
            MemberIssue::NotEndPort {
                node: h[0],
                port: 0
            },
            MemberIssue::NoSuchNode(NodeIdx(9999)),
            MemberIssue::EmptyJoinState,
        ]
    );
    let mut other = t.clone();
    other
        .add_node(Node::new(NodeType::Ca, 0xabc000, 1, "x"))
        .unwrap();
    assert!(matches!(
        f.tree(&other, &members, &TreeOptions::default()),
        Err(McastError::TopologyChanged { .. })
    ));
}

#[test]
fn two_components_root_in_the_larger() {
    // Two leaves, no cable between them.
    let mut t = Topology::new();
    let a = t
        .add_node(Node::new(NodeType::Switch, 0x10, 4, "a"))
        .unwrap();
    let b = t
        .add_node(Node::new(NodeType::Switch, 0x20, 4, "b"))
        .unwrap();
    let h: Vec<_> = (0..3)
        .map(|i| {
            t.add_node(Node::new(NodeType::Ca, 0x100 + 0x10 * i, 1, "h"))
                .unwrap()
        })
        .collect();
    t.connect(a, 1, h[0], 1).unwrap();
    t.connect(b, 1, h[1], 1).unwrap();
    t.connect(b, 2, h[2], 1).unwrap();
    let f = fabric(&t);
    assert_eq!(f.hops(a, b), None);
    assert_eq!(f.hops(b, b), Some(0));
    let members: Vec<_> = h.iter().map(|&x| McastMember::new((x, 1), FULL)).collect();
    let tree = f.tree(&t, &members, &TreeOptions::default()).unwrap();
    check_tree(&t, &members, &tree);
    assert_eq!(tree.root, Some(b));
    assert_eq!(
        tree.excluded.iter().map(|e| &e.issue).collect::<Vec<_>>(),
        vec![&MemberIssue::Unreachable { switch: a }]
    );
}

#[test]
fn join_states() {
    assert!(FULL.receives() && NON.receives() && !SEND.receives());
    assert!(!JoinState::SEND_ONLY_FULL_MEMBER.receives());
    assert!((SEND | NON).receives());
    assert_eq!(JoinState::from_bits(0xF5).bits(), 5);
    assert_eq!(format!("{:?}", FULL | SEND), "FullMember|SendOnlyNonMember");
    assert_eq!(format!("{:?}", JoinState::default()), "None");
}

fn random_members(t: &Topology, seed: u64, n: usize) -> Vec<McastMember> {
    let mut rng = gen::SplitMix64::new(seed);
    let h = hcas(t);
    let s = switches(t);
    (0..n)
        .map(|_| {
            let join = JoinState::from_bits(1 + rng.below(15) as u8);
            if rng.below(8) == 0 && !s.is_empty() {
                let sw = s[rng.below(s.len() as u64) as usize];
                McastMember::new((sw, 0), join)
            } else {
                let x = h[rng.below(h.len() as u64) as usize];
                if rng.below(2) == 0 {
                    McastMember::new((x, 1), join)
                } else {
                    McastMember::new(EndPort::Guid(t.node(x).unwrap().ports[1].port_guid), join)
                }
            }
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn random_groups_on_random_fabrics(
        seed in any::<u64>(),
        sw in 1u32..14,
        extra_hcas in 2u32..20,
        members in 1usize..16,
        cuts in 0usize..4,
        spread in 0u64..4,
    ) {
        let Ok(mut t) = gen::random(seed, sw, extra_hcas, 8) else { return Ok(()) };
        // Pull a few cables: members go down, components split.
        let mut rng = gen::SplitMix64::new(seed ^ 0x5eed);
        let links: Vec<_> = t.links().collect();
        for _ in 0..cuts.min(links.len()) {
            let ((a, pa), _) = links[rng.below(links.len() as u64) as usize];
            t.disconnect(a, pa).unwrap();
        }
        let f = fabric(&t);
        let m = random_members(&t, seed.rotate_left(7), members);
        let opts = TreeOptions { spread };
        let tree = f.tree(&t, &m, &opts).unwrap();
        check_tree(&t, &m, &tree);
        if spread == 0 && tree.root.is_some() {
            prop_assert_eq!(tree.root, brute_root(&t, &m));
        }
        // Deterministic.
        prop_assert_eq!(&f.tree(&t, &m, &opts).unwrap(), &tree);
        // Member order does not matter.
        let mut rev = m.clone();
        rev.reverse();
        prop_assert_eq!(f.tree(&t, &rev, &opts).unwrap().per_switch, tree.per_switch);
    }
}

// ---------------------------------------------------------------------------
// MFT blocks.

/// A switch's MFT as the model of the wire: (block, position) -> 32 entries.
type Programmed = BTreeMap<(u64, u16, u8), [u16; 32]>;

fn apply(prog: &mut Programmed, writes: &[MftWrite]) {
    for w in writes {
        prog.insert((w.switch, w.block, w.position), w.port_masks);
    }
}

/// Every (switch, mlid) -> mask a programmed model holds (non-zero only).
fn decode(prog: &Programmed) -> BTreeMap<(u64, u16), PortMask> {
    let mut out: BTreeMap<(u64, u16), PortMask> = BTreeMap::new();
    for (&(sw, block, position), masks) in prog {
        for (i, &bits) in masks.iter().enumerate() {
            if bits != 0 {
                let mlid = MLID_BASE + block * 32 + i as u16;
                out.entry((sw, mlid))
                    .or_default()
                    .set_position(position, bits);
            }
        }
    }
    out
}

fn expected(set: &MftSet) -> BTreeMap<(u64, u16), PortMask> {
    let mut out = BTreeMap::new();
    for (g, sw) in set.switches() {
        for mlid in set.mlids() {
            let m = sw.entry(mlid);
            if !m.is_empty() {
                out.insert((g, mlid), m);
            }
        }
    }
    out
}

#[test]
fn mft_layout() {
    assert_eq!(mft_block(0xC000), Ok((0, 0)));
    assert_eq!(mft_block(0xC021), Ok((1, 1)));
    assert_eq!(mft_block(0xFFFE), Ok((511, 30)));
    assert_eq!(mft_block(0xFFFF), Err(McastError::BadMlid(0xFFFF)));
    assert_eq!(mft_block(0xBFFF), Err(McastError::BadMlid(0xBFFF)));
    assert_eq!(mft_positions(15), 1);
    assert_eq!(mft_positions(16), 2);
    assert_eq!(mft_positions(36), 3);
    assert_eq!(mft_positions(64), 5);
    let w = MftWrite {
        switch: 1,
        block: 0x1FF,
        position: 2,
        port_masks: [0; 32],
    };
    assert_eq!(w.attribute_modifier(), 0x2000_01FF);
}

#[test]
fn mft_diff_writes_changes_and_zeroes_deleted_groups() {
    let t = gen::fat_tree_2level(36).unwrap();
    let f = fabric(&t);
    let h = hcas(&t);
    let g1: Vec<_> = h.iter().map(|&x| McastMember::new((x, 1), FULL)).collect();
    let g2 = vec![
        McastMember::new((h[0], 1), FULL),
        McastMember::new((h[40], 1), FULL),
    ];
    let t1 = f.tree(&t, &g1, &TreeOptions::default()).unwrap();
    let t2 = f.tree(&t, &g2, &TreeOptions::default()).unwrap();
    let a = MftSet::build(&t, [(0xC000, &t1), (0xC001, &t2)]).unwrap();
    // The broadcast tree: 36 leaves and the root spine; a 36-port switch has 3
    // positions, and both groups are in block 0.
    assert_eq!(a.switches().count(), 37);
    let writes = a.writes();
    assert_eq!(writes.len(), 37 * 3);
    let mut prog = Programmed::new();
    apply(&mut prog, &writes);
    assert_eq!(decode(&prog), expected(&a));
    assert!(changed_blocks(&a, &a).is_empty());
    // Delete group 2: only the switches it used change, and they get zeros
    // for 0xC001 while keeping 0xC000.
    let mut b = a.clone();
    b.remove_group(0xC001).unwrap();
    let d = changed_blocks(&a, &b);
    assert!(!d.is_empty());
    let users: BTreeSet<u64> = t2
        .per_switch
        .keys()
        .map(|&n| t.node(n).unwrap().node_guid)
        .collect();
    assert!(d.iter().all(|w| users.contains(&w.switch) && w.block == 0));
    apply(&mut prog, &d);
    assert_eq!(decode(&prog), expected(&b));
    // Delete everything: every block goes to zero.
    let mut c = b.clone();
    c.remove_group(0xC000).unwrap();
    assert_eq!(c, MftSet::new());
    let d = changed_blocks(&b, &c);
    assert!(d.iter().all(|w| w.port_masks == [0; 32]));
    apply(&mut prog, &d);
    assert!(decode(&prog).is_empty());
    // Bad input leaves the set alone.
    let mut e = a.clone();
    assert_eq!(
        e.set_group(&t, 0xFFFF, &t1),
        Err(McastError::BadMlid(0xFFFF))
    );
    let mut bogus = McastTree::default();
    bogus.per_switch.insert(h[0], PortMask::of([1]));
    assert_eq!(
        e.set_group(&t, 0xC005, &bogus),
        Err(McastError::NotASwitch(h[0]))
    );
    let sw = switches(&t)[0];
    bogus.per_switch.clear();
    bogus.per_switch.insert(sw, PortMask::of([37]));
    assert_eq!(
        e.set_group(&t, 0xC000, &bogus),
        Err(McastError::NoSuchPort {
            switch: sw,
            port: 37
        })
    );
    assert_eq!(e, a);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Random sequences of group changes: the diff writes exactly the
    /// (switch, block, position)s whose content changed, and a model switch
    /// fed only the diffs always holds the desired set.
    #[test]
    fn mft_diffs_track_the_desired_set(
        seed in any::<u64>(),
        steps in proptest::collection::vec((0u16..80, 0usize..12, any::<bool>()), 1..12),
    ) {
        let t = gen::random(seed, 6, 30, 24).unwrap();
        let f = fabric(&t);
        let mut set = MftSet::new();
        let mut prog = Programmed::new();
        for (i, &(g, n, delete)) in steps.iter().enumerate() {
            // MLIDs spread over a few blocks.
            let mlid = MLID_BASE + g * 7;
            let old = set.clone();
            if delete {
                set.remove_group(mlid).unwrap();
            } else {
                let m = random_members(&t, seed ^ i as u64, n);
                let tree = f.tree(&t, &m, &TreeOptions { spread: u64::from(mlid) }).unwrap();
                set.set_group(&t, mlid, &tree).unwrap();
            }
            let d = changed_blocks(&old, &set);
            let keys: BTreeSet<_> = d.iter().map(|w| (w.switch, w.block, w.position)).collect();
            prop_assert_eq!(keys.len(), d.len(), "one write per (switch, block, position)");
            for w in &d {
                let was = prog.get(&(w.switch, w.block, w.position)).copied().unwrap_or([0; 32]);
                prop_assert_ne!(was, w.port_masks, "unchanged block written");
            }
            apply(&mut prog, &d);
            prop_assert_eq!(decode(&prog), expected(&set));
            // Rebuilding from scratch gives the same set (canonical form).
            prop_assert_eq!(set.mlids().count(), set.mlids().collect::<BTreeSet<_>>().len());
        }
    }
}
