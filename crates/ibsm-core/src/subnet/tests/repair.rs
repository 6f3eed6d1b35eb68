//! Repair after a pulled cable, started by the trap alone (periodic sweeps far off):
//! the blocks written are exactly those holding a route that is no longer a shortest
//! one, computed here from the read-back tables and the generated topology, and the
//! cable's return writes the same number of blocks and restores the tables read
//! before the pull.

use super::*;

/// Switch hops from every node to `dest` over the topology without `dead` cables
/// (CAs other than `dest` carry no transit).
fn dist_to(topo: &Topology, dest: NodeIdx, dead: &HashSet<(NodeIdx, u8)>) -> HashMap<NodeIdx, u32> {
    let mut d = HashMap::from([(dest, 0u32)]);
    let mut q = VecDeque::from([dest]);
    while let Some(n) = q.pop_front() {
        let node = topo.node(n).unwrap();
        if n != dest && !node.is_switch() {
            continue;
        }
        for (p, port) in node.physical_ports() {
            let Some((r, rp)) = port.remote else { continue };
            if dead.contains(&(n, p)) || dead.contains(&(r, rp)) || d.contains_key(&r) {
                continue;
            }
            d.insert(r, d[&n] + 1);
            q.push_back(r);
        }
    }
    d
}

/// LFT blocks (switch, block) holding an entry of `before` that is not a shortest
/// route once `dead` cables are gone.
fn affected_blocks(
    topo: &Topology,
    before: &ReadBack,
    dead: &HashSet<(NodeIdx, u8)>,
) -> HashSet<(NodeIdx, usize)> {
    let mut out = HashSet::new();
    for (&(owner, _), &(base, lmc)) in &before.lids {
        let dist = dist_to(topo, owner, dead);
        for lid in base..base + (1 << lmc) {
            for (&s, table) in &before.lfts {
                let port = table[usize::from(lid)];
                if port == 0 {
                    continue; // the switch's own LID
                }
                let still = !dead.contains(&(s, port))
                    && topo
                        .neighbor(s, port)
                        .and_then(|(t, _)| Some(dist.get(&t)? + 1 == *dist.get(&s)?))
                        .unwrap_or(false);
                if !still {
                    out.insert((s, usize::from(lid) / 64));
                }
            }
        }
    }
    out
}

/// The repair sweep a trap 128 from `issuer` starts, with no periodic sweep between.
fn trap_repair(lab: &mut Lab, issuer: u16, tid: u64) -> SweepReport {
    lab.link_trap(issuer, tid);
    let evs = lab.run_until(is_heavy_done);
    assert!(
        !evs.iter().any(is_light_done),
        "a light sweep ran: the repair was not the trap's"
    );
    match evs.last() {
        Some(SubnetEvent::SweepDone { report, .. }) => report.clone(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_pulled_cable_rewrites_only_the_blocks_whose_routes_moved_and_its_return_restores_them() {
    // Routing inline (simulations) and handed out as a job (the daemon).
    for offload_routing in [false, true] {
        pulled_cable(offload_routing);
    }
}

fn pulled_cable(offload_routing: bool) {
    let topo = gen::fat_tree_3level(8).unwrap();
    let mut lab = Lab::new(
        topo.clone(),
        SubnetConfig {
            // Only the trap can start the repair.
            sweep_interval: Duration::from_secs(3600),
            offload_routing,
            ..cfg()
        },
    );
    lab.bring_up();
    let before = read_back(&mut lab, 0, &HashSet::new(), &HashSet::new());
    let total_blocks: usize = before.lfts.values().map(|t| t.len().div_ceil(64)).sum();

    // An edge switch loses one uplink (k=8: CAs on ports 1-4, uplinks 5-8).
    let edge = topo.find_by_name("edge-3-0").unwrap();
    let (agg, agg_port) = topo.neighbor(edge, 5).unwrap();
    let dead = HashSet::from([(edge, 5), (agg, agg_port)]);
    let want = affected_blocks(&topo, &before, &dead);
    assert!(
        !want.is_empty() && want.len() < total_blocks / 2,
        "{} of {total_blocks}",
        want.len()
    );
    let edge_lid = before.lids[&(edge, 0)].0;
    lab.sim.link_down(edge, 5).unwrap();
    let sent = lab.wire.lft_sets;
    let report = trap_repair(&mut lab, edge_lid, 0x128);
    // Every LFT Set is a block with new content or a block-0 Set that only moves
    // the switch's LFT stamp (the open and close of its round, see `lft_write`).
    let down_sets = lab.wire.lft_sets - sent;
    assert_eq!(report.lft_blocks_sent + report.lft_stamp_sets, down_sets);
    let down_blocks = report.lft_blocks_sent;
    let after = read_back(&mut lab, 0, &HashSet::new(), &dead);
    check_walks(&topo, &after, &dead);
    let changed: HashSet<(NodeIdx, usize)> = after
        .lfts
        .iter()
        .flat_map(|(&s, t)| {
            let b = &before.lfts[&s];
            (0..t.len().div_ceil(64))
                .filter(move |&k| {
                    t.get(k * 64..(k * 64 + 64).min(t.len()))
                        != b.get(k * 64..(k * 64 + 64).min(b.len()))
                })
                .map(move |k| (s, k))
        })
        .collect();
    assert_eq!(
        changed, want,
        "blocks changed vs blocks holding a route that had to move"
    );
    assert_eq!(
        down_blocks,
        want.len() as u64,
        "LFT blocks written for one pulled cable (of {total_blocks})"
    );

    // The cable is back: balanced routing again, i.e. the tables before the pull,
    // written in the blocks the repair had changed.
    lab.sim.link_up(edge, 5).unwrap();
    let sent = lab.wire.lft_sets;
    let back = trap_repair(&mut lab, edge_lid, 0x129);
    assert_eq!(
        back.lft_blocks_sent, down_blocks,
        "LFT blocks written when the cable came back"
    );
    assert_eq!(
        lab.wire.lft_sets - sent,
        down_sets,
        "LFT Sets when the cable came back"
    );
    let restored = read_back(&mut lab, 0, &HashSet::new(), &HashSet::new());
    check_walks(&topo, &restored, &HashSet::new());
    assert_eq!(restored.lfts, before.lfts, "the balanced tables are back");
}
