//! `offload_sa_snapshot`: the snapshot a job builds is the one the sweep builds
//! inline; until the job is back the SA keeps the previous snapshot and the sweep's
//! events wait; a job of an ended mastership, or older than the snapshot served, is
//! dropped.

use std::sync::Arc;

use super::*;
use crate::sa::SaFabric;

/// LMC 1, two partitions, switch SL2VL: every part of the snapshot has content.
fn snapshot_cfg(topo: &Topology, offload: bool) -> SubnetConfig {
    let mut c = cfg();
    c.lmc = 1;
    c.partitions = two_partitions(&ca_guids(topo));
    c.offload_sa_snapshot = offload;
    c
}

/// Run until the sweep in progress handed out its snapshot job, and take it.
fn until_job(lab: &mut Lab) -> (SaSnapshotJob, Vec<SubnetEvent>) {
    let seen = lab.run_until_or(|_| false, |_, sm| sm.sa_snapshots_pending() > 0);
    let job = lab
        .sm
        .poll_sa_snapshot_job()
        .expect("the job of the pending snapshot");
    (job, seen)
}

fn sweep_no(sa: Option<&Arc<SaFabric>>) -> Option<u64> {
    sa.map(|f| f.sweep)
}

/// Every answer the two snapshots give is the same.
fn assert_same(a: &SaFabric, b: &SaFabric) {
    assert_eq!(a.sweep, b.sweep);
    assert_eq!(a.subnet_prefix, b.subnet_prefix);
    assert_eq!((a.sm_lid, a.sm_port_guid), (b.sm_lid, b.sm_port_guid));
    // (Debug of what has no PartialEq; a Topology's own maps are left out, their
    // order being the hasher's.)
    let same = |x: String, y: String, what: &str| assert!(x == y, "{what} differ");
    same(
        format!("{:?}", a.topology.nodes()),
        format!("{:?}", b.topology.nodes()),
        "nodes",
    );
    same(
        format!("{:?}", a.node_info),
        format!("{:?}", b.node_info),
        "NodeInfos",
    );
    same(
        format!("{:?}", a.port_info),
        format!("{:?}", b.port_info),
        "PortInfos",
    );
    same(
        format!("{:?}", a.switch_info),
        format!("{:?}", b.switch_info),
        "SwitchInfos",
    );
    assert!(a.lfts == b.lfts, "LFTs differ");
    assert!(a.pkeys == b.pkeys, "P_Keys differ");
    assert!(a.port_tables == b.port_tables, "port tables differ");
    let ends = a.end_ports();
    assert_eq!(ends, b.end_ports());
    for src in &ends {
        for dst in &ends {
            assert_eq!(
                a.path_summary((src.node, src.port), dst.lid),
                b.path_summary((src.node, src.port), dst.lid),
                "path {} -> {}",
                src.lid,
                dst.lid
            );
        }
    }
}

#[test]
fn an_offloaded_snapshot_is_the_one_built_inline() {
    let topo = gen::fat_tree_3level(4).unwrap();
    let mut inline = Lab::new(topo.clone(), snapshot_cfg(&topo, false));
    inline.sm.become_master(inline.now);
    inline.run_until(is_heavy_done);
    assert_eq!(inline.sm.poll_sa_snapshot_job().map(|j| j.sweep()), None);
    let want = inline.sm.sa_fabric().expect("inline snapshot").clone();

    let mut off = Lab::new(topo.clone(), snapshot_cfg(&topo, true));
    off.sm.become_master(off.now);
    let (job, seen) = until_job(&mut off);
    assert!(
        !seen.iter().any(is_heavy_done),
        "the sweep's end waits for its snapshot"
    );
    assert!(
        off.sm.sa_fabric().is_none(),
        "nothing served before the job is back"
    );
    assert_eq!(job.sweep(), 1);
    let done = job.run();
    off.sm.handle_sa_snapshot_done(done);
    let evs = off.run_until(is_heavy_done);
    assert!(evs
        .iter()
        .any(|e| matches!(e, SubnetEvent::SubnetUp { .. })));
    let got = off.sm.sa_fabric().expect("the job's snapshot").clone();

    // Both sweeps assigned the same LIDs and LFTs to the same fabric: the snapshots
    // answer alike, and carry what was programmed (not an empty shell).
    assert_same(&got, &want);
    assert!(
        got.lfts.iter().flatten().count() >= 20,
        "every switch's LFT"
    );
    assert!(got
        .pkeys
        .values()
        .any(|k| k.iter().any(|p| p.0 & 0x7FFF == 0x10)));
    // k=4: 16 CAs and 20 switches, one end port each.
    assert_eq!(got.end_ports().len(), topo.len());
}

#[test]
fn the_sa_serves_the_old_snapshot_until_the_new_one_lands() {
    let topo = gen::fat_tree_3level(4).unwrap();
    let cas = ca_guids(&topo);
    let mut lab = Lab::new(topo.clone(), snapshot_cfg(&topo, true));
    lab.sm.become_master(lab.now);
    let (job, _) = until_job(&mut lab);
    lab.sm.handle_sa_snapshot_done(job.run());
    lab.run_until(is_heavy_done);
    let first = lab.sm.sa_fabric().expect("first snapshot").clone();
    assert_eq!(first.sweep, 1);
    let has = |sa: &SaFabric, guid: u64, pkey: u16| {
        sa.pkeys_of(guid).iter().any(|k| k.0 & 0x7FFF == pkey)
    };
    assert!(has(&first, cas[1], 0x10) && !has(&first, cas[3], 0x30));

    // A new partition, programmed by a second heavy sweep.
    let mut parts = two_partitions(&cas);
    parts.push(Partition {
        name: "extra".into(),
        p_key: 0x0030,
        members: vec![PartitionMember {
            port_guid: cas[3],
            membership: Membership::Full,
        }],
        groups: Vec::new(),
        index0: false,
        ipoib: None,
    });
    // (A change of partitions asks for the heavy sweep itself.)
    lab.sm
        .set_partitions(lab.now, parts)
        .expect("valid partitions");
    let (job, seen) = until_job(&mut lab);
    assert!(
        !seen.iter().any(is_heavy_done),
        "SweepDone waits for the snapshot"
    );
    // The sweep is over on the wire; the SA still answers from the first snapshot,
    // and keeps doing so while the master goes on (light sweeps, timers).
    let later = lab.now + Duration::from_millis(1500);
    let meanwhile = lab.run_to(later);
    assert!(!meanwhile.iter().any(|(_, e)| is_heavy_done(e)));
    let served = lab.sm.sa_fabric().expect("still the first").clone();
    assert!(Arc::ptr_eq(&served, &first));
    assert!(!has(&served, cas[3], 0x30));

    lab.sm.handle_sa_snapshot_done(job.run());
    let second = lab.sm.sa_fabric().expect("second snapshot").clone();
    assert_eq!(second.sweep, 2);
    assert!(has(&second, cas[3], 0x30), "the new partition is served");
    let evs = lab.run_until(is_heavy_done);
    assert!(
        evs.iter().any(is_heavy_done),
        "the held SweepDone comes out"
    );
}

#[test]
fn a_stale_snapshot_is_dropped() {
    let topo = gen::fat_tree_3level(4).unwrap();
    let mut lab = Lab::new(topo.clone(), snapshot_cfg(&topo, true));
    lab.sm.become_master(lab.now);
    let (job, _) = until_job(&mut lab);
    lab.sm.handle_sa_snapshot_done(job.run());
    lab.run_until(is_heavy_done);

    // Two more sweeps whose jobs are held; the later one comes back first.
    lab.sm.start_heavy_sweep(lab.now);
    let (job2, _) = until_job(&mut lab);
    lab.sm.start_heavy_sweep(lab.now);
    lab.run_until_or(|_| false, |_, sm| sm.sa_snapshots_pending() > 1);
    let job3 = lab.sm.poll_sa_snapshot_job().expect("job 3");
    assert_eq!((job2.sweep(), job3.sweep()), (2, 3));
    lab.sm.handle_sa_snapshot_done(job3.run());
    assert_eq!(sweep_no(lab.sm.sa_fabric()), Some(3));
    lab.sm.handle_sa_snapshot_done(job2.run());
    assert_eq!(
        sweep_no(lab.sm.sa_fabric()),
        Some(3),
        "an older snapshot is dropped"
    );

    // A job still out when the mastership ends is dropped when it comes back; the
    // sweep's events are not lost.
    lab.sm.start_heavy_sweep(lab.now);
    let (job4, _) = until_job(&mut lab);
    lab.sm.stop();
    let mut done_seen = false;
    while let Some(e) = lab.sm.poll_event() {
        done_seen |= is_heavy_done(&e);
    }
    assert!(done_seen, "stop releases the held SweepDone");
    lab.sm.handle_sa_snapshot_done(job4.run());
    assert_eq!(sweep_no(lab.sm.sa_fabric()), Some(3));
    assert_eq!(lab.sm.sa_snapshots_pending(), 0);
}
