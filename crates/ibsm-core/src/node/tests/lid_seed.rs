//! `NodeConfig::guid2lid_seed` (`ibsmd --guid2lid`, OpenSM's `honor_guid2lid_file`):
//! a first master gives exactly the file's LIDs; a replica that holds LIDs wins.

use std::time::Duration;

use ibsm_fabric::gen;

use super::{Lab, ReplicatedFabric};

/// Port GUID of every CA's port 1, in topology order (the order of `Lab::lids`).
fn ca_port_guids(lab: &Lab) -> Vec<u64> {
    lab.topo
        .iter()
        .filter(|(_, n)| !n.is_switch())
        .filter_map(|(_, n)| n.ports.get(1).map(|p| p.port_guid))
        .collect()
}

/// A guid2lid (OpenSM's text) giving the CA ports scattered LIDs from `first` on,
/// `step` apart, and the switches LIDs from `switches` on: nothing a fresh
/// assignment (1, 2, 3, ...) would give.
fn scattered(lab: &Lab, first: u16, step: u16, switches: u16) -> (String, Vec<u16>) {
    let mut text = String::from("# OpenSM guid2lid\n");
    let mut ca_lids = Vec::new();
    for (k, g) in ca_port_guids(lab).into_iter().enumerate() {
        let lid = first + step * u16::try_from(k).expect("few CAs");
        text.push_str(&format!("0x{g:016x} 0x{lid:04x} 0x{lid:04x}\n"));
        ca_lids.push(lid);
    }
    for (k, (_, n)) in lab.topo.iter().filter(|(_, n)| n.is_switch()).enumerate() {
        let lid = switches + u16::try_from(k).expect("few switches");
        let g = n.ports[0].port_guid;
        text.push_str(&format!("0x{g:016x} {lid} {lid}\n"));
    }
    (text, ca_lids)
}

#[test]
fn a_first_master_gives_exactly_the_seeded_lids() {
    let topo = gen::fat_tree_2level(4).expect("topology");
    let mut lab = Lab::new(topo, &[10]);
    let (seed, want) = scattered(&lab, 0x101, 7, 0x300);
    lab.guid2lid_seed = Some(seed);
    lab.kill(0);
    lab.start(0);
    lab.run_to(Duration::from_secs(4));
    assert_eq!(lab.masters(), vec![0]);
    assert_eq!(lab.lids(), want, "every CA port has its seeded LID");
    // And the master remembers them as its own assignment.
    let subnet = lab.subnet(0);
    assert_eq!(subnet.remembered_lids(), lab.topo.len());
}

#[test]
fn without_a_seed_the_assignment_differs_so_the_test_above_means_something() {
    let topo = gen::fat_tree_2level(4).expect("topology");
    let mut lab = Lab::new(topo, &[10]);
    let (_, seeded) = scattered(&lab, 0x101, 7, 0x300);
    lab.run_to(Duration::from_secs(4));
    assert_eq!(lab.masters(), vec![0]);
    let lids = lab.lids();
    assert!(lids.iter().all(|l| *l != 0));
    assert!(lids.iter().zip(&seeded).all(|(a, b)| a != b), "{lids:?}");
}

#[test]
fn a_replica_that_holds_lids_wins_over_the_seed() {
    let topo = gen::fat_tree_2level(4).expect("topology");
    let mut lab = Lab::new(topo, &[10]);
    let (seed, _) = scattered(&lab, 0x101, 7, 0x300);
    let (replica, want) = scattered(&lab, 0x40, 2, 0x20);
    lab.replicated = true;
    lab.guid2lid_seed = Some(seed);
    lab.kill(0);
    lab.start(0);
    let rep = ReplicatedFabric {
        epoch: 3,
        guid2lid_ports: lab.topo.len(),
        guid2lid_file: replica,
        ..ReplicatedFabric::default()
    };
    lab.replicate(0, rep);
    lab.run_to(Duration::from_secs(4));
    assert_eq!(lab.masters(), vec![0]);
    assert_eq!(lab.lids(), want, "the replica's LIDs, not the file's");
}
