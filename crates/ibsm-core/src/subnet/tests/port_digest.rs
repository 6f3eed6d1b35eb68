//! A verified takeover seeded from the previous master's port digests
//! (`subnet::port_digest`): it writes no P_Key, SLtoVL or VLArbitration table that
//! digests as replicated, and only the PortInfo Sets that carry the new
//! MasterSMLID; a port whose digest differs is written, and only its table; a
//! replica without digests gets everything written, as before them.

use std::collections::HashSet;
use std::time::Duration;

use ibsm_fabric::{NodeIdx, Topology};
use ibsm_mad::attr::{PKey, PKeyTable, SmpAttribute};
use ibsm_mad::modifier::PKeyBlock;
use ibsm_mad::{AttributeId, Method, Smp, SmpRoute};
use ibsm_sim::{ClientId, Sim};

use super::verify::{cas, takeover, Takeover};
use crate::subnet::inherit::tests::{self as inherit_tests, inherited, until_quiet};
use crate::subnet::program::port_path;
use crate::subnet::{Inherited, Membership, Partition, PartitionMember, SubnetManager};

/// Drive `sm` until its next heavy sweep completes; every SMP it sent.
fn sweep_recording(
    sim: &mut Sim,
    client: ClientId,
    sm: &mut SubnetManager,
    now: &mut Duration,
) -> Vec<Smp> {
    inherit_tests::sweep_recording(sim, client, sm, now).1
}

fn sets(sent: &[Smp], attr: AttributeId) -> Vec<&Smp> {
    sent.iter()
        .filter(|s| s.method == Method::SET && s.attr_id == attr)
        .collect()
}

/// (DR path, attribute modifier) of an SMP: where a Set lands.
fn target(s: &Smp) -> (Vec<u8>, u32) {
    let path = match s.route {
        SmpRoute::Directed(dr) => dr
            .initial_path
            .get(1..=usize::from(dr.hop_cnt))
            .map(<[u8]>::to_vec)
            .unwrap_or_default(),
        SmpRoute::Lid => Vec::new(),
    };
    (path, s.attr_mod)
}

/// One SMP from `client`, its answer (nothing else may be talking on `client`).
fn exchange(sim: &mut Sim, client: ClientId, now: &mut Duration, smp: Smp) -> Smp {
    sim.send(*now, client, &smp.encode())
        .expect("well-formed MAD");
    for _ in 0..10_000 {
        while let Some((c, mad)) = sim.poll_delivery(*now) {
            if c == client {
                if let Ok(r) = Smp::decode(&mad) {
                    if r.tid == smp.tid {
                        return r;
                    }
                }
            }
        }
        let Some(t) = sim.poll_timeout() else { break };
        *now = (*now).max(t);
    }
    panic!("no answer to {smp:?}");
}

/// The verified takeover of `t.second` with `inh`; its first sweep's SMPs.
fn take_over(t: &mut Takeover, inh: &Inherited) -> Vec<Smp> {
    t.second
        .prepare_takeover_from(t.now, inh.clone(), Some(t.known.clone()));
    let mut prep = Vec::new();
    until_quiet(&mut t.sim, t.c2, &mut t.second, &mut t.now, &mut prep);
    let v = t.second.last_verification().cloned().expect("verified");
    assert_eq!(v.difference, None, "{v:?}");
    t.second.inherit(inh.clone());
    t.second.become_master(t.now);
    let mut sent = sweep_recording(&mut t.sim, t.c2, &mut t.second, &mut t.now);
    prep.append(&mut sent);
    prep
}

#[test]
fn a_verified_takeover_with_current_digests_writes_no_table_and_only_master_sm_lid() {
    let mut t = takeover();
    assert!(!t.inh.port_digests.is_empty());
    let inh = t.inh.clone();
    let sent = take_over(&mut t, &inh);
    assert!(sets(&sent, AttributeId::P_KEY_TABLE).is_empty());
    assert!(sets(&sent, AttributeId::SL_TO_VL_MAPPING_TABLE).is_empty());
    assert!(sets(&sent, AttributeId::VL_ARBITRATION_TABLE).is_empty());
    assert!(sets(&sent, AttributeId::LINEAR_FORWARDING_TABLE).is_empty());
    // One PortInfo Set per end port (every CA port, each switch's port 0): the
    // new MasterSMLID; no switch external port is written.
    let pi = sets(&sent, AttributeId::PORT_INFO);
    assert_eq!(pi.len(), t.topo.len(), "one per end port");
    let targets: HashSet<_> = pi.iter().map(|s| target(s)).collect();
    assert_eq!(targets.len(), pi.len(), "each end port once");
    let seed = t.second.last_port_seed().expect("seeded");
    assert_eq!(seed.differ, 0, "{seed:?}");
    assert!(seed.seeded > t.topo.len(), "{seed:?}");
    // What it publishes is what it inherited: the replica write carries no digest.
    assert_eq!(inherited(&t.second).port_digests, t.inh.port_digests);
}

#[test]
fn a_replica_without_port_digests_gets_every_table_written_as_before() {
    let mut t = takeover();
    let old = Inherited {
        port_digests: Default::default(),
        ..t.inh.clone()
    };
    let sent = take_over(&mut t, &old);
    for attr in [
        AttributeId::P_KEY_TABLE,
        AttributeId::SL_TO_VL_MAPPING_TABLE,
        AttributeId::VL_ARBITRATION_TABLE,
    ] {
        let n = sets(&sent, attr).len();
        assert!(n > 0, "{attr:?}");
        assert_eq!(n, sets(&t.bring_up, attr).len(), "{attr:?}: as at bring-up");
    }
    let seed = t.second.last_port_seed().expect("seeding ran");
    assert_eq!(seed.seeded, 0, "{seed:?}");
    // Then it publishes them: the next takeover skips them.
    assert_eq!(inherited(&t.second).port_digests, t.inh.port_digests);
}

/// A port's P_Key table changed behind the master's back, with a replicated
/// digest that no longer matches it, and a partition added in the replica for
/// another port: exactly the P_Key tables of those ports (and of the switch port
/// enforcing for the new member) are written, nothing else, and the fabric holds
/// the desired tables afterwards.
#[test]
fn only_the_ports_whose_digest_differs_are_written() {
    let mut t = takeover();
    let cas = cas(&t.topo);
    let (tampered, member) = (cas[2], cas[5]);
    let guid_of =
        |topo: &Topology, n: NodeIdx| topo.node(n).and_then(|n| n.port(1)).map(|p| p.port_guid);
    let member_guid = guid_of(&t.topo, member).expect("CA port");
    let res = t.known.clone();
    // The discovery numbers nodes in its own order: by GUID from the generated fabric.
    let in_res = |n: NodeIdx| {
        let g = t.topo.node(n).map(|n| n.node_guid);
        res.topology
            .iter()
            .find(|(_, m)| Some(m.node_guid) == g)
            .map(|(i, _)| i)
            .expect("discovered")
    };
    let (tampered, member) = (in_res(tampered), in_res(member));
    let tampered_path = port_path(&res, tampered, 1, false).expect("route");
    let wrong = PKeyTable {
        keys: {
            let mut k = [PKey::INVALID; 32];
            k[0] = PKey(0xFFFF);
            k[1] = PKey(0x8123);
            k
        },
    };
    let amod = PKeyBlock { block: 0, port: 0 }.attr_mod();
    let set = Smp::try_set_dr(
        &tampered_path,
        AttributeId::P_KEY_TABLE,
        amod,
        0x51,
        wrong.encode(),
    )
    .expect("path");
    exchange(&mut t.sim, t.c2, &mut t.now, set);
    let mut inh = t.inh.clone();
    let key = (
        res.topology
            .node(tampered)
            .map(|n| n.node_guid)
            .expect("node"),
        1,
    );
    let d = inh
        .port_digests
        .get_mut(&key)
        .expect("digest of the tampered port");
    d.p_key = d.p_key.map(|k| k ^ 1);
    t.second
        .set_partitions(
            t.now,
            vec![Partition {
                groups: Vec::new(),
                index0: false,
                name: "storage".into(),
                p_key: 0x0010,
                members: vec![PartitionMember {
                    port_guid: member_guid,
                    membership: Membership::Full,
                }],
                ipoib: None,
            }],
        )
        .expect("partitions");

    let sent = take_over(&mut t, &inh);
    assert!(sets(&sent, AttributeId::SL_TO_VL_MAPPING_TABLE).is_empty());
    assert!(sets(&sent, AttributeId::VL_ARBITRATION_TABLE).is_empty());
    let written: HashSet<_> = sets(&sent, AttributeId::P_KEY_TABLE)
        .iter()
        .map(|s| target(s))
        .collect();
    let mut want: HashSet<(Vec<u8>, u32)> = HashSet::new();
    want.insert((tampered_path.clone(), amod));
    want.insert((port_path(&res, member, 1, false).expect("route"), amod));
    let (sw, sp) = res.topology.neighbor(member, 1).expect("cabled");
    let enforcing = res
        .switch_info
        .get(sw.as_usize())
        .copied()
        .flatten()
        .is_some_and(|si| si.partition_enforcement_cap > 0);
    if enforcing {
        let sw_path = port_path(&res, sw, sp, true).expect("route");
        want.insert((sw_path, PKeyBlock { block: 0, port: sp }.attr_mod()));
    }
    assert_eq!(written, want);
    let seed = t.second.last_port_seed().expect("seeded");
    assert_eq!(seed.differ, want.len(), "{seed:?}");

    // The fabric holds what the new master wants.
    let read = |t: &mut Takeover, path: &[u8]| -> Vec<u16> {
        let get = Smp::try_get_dr(path, AttributeId::P_KEY_TABLE, amod, 0x52).expect("path");
        exchange(&mut t.sim, t.c2, &mut t.now, get)
            .attribute::<PKeyTable>()
            .expect("P_KeyTable")
            .keys
            .iter()
            .map(|k| k.0)
            .filter(|&k| k != 0)
            .collect()
    };
    assert_eq!(read(&mut t, &tampered_path), vec![0xFFFF]);
    let member_path = port_path(&res, member, 1, false).expect("route");
    assert_eq!(read(&mut t, &member_path), vec![0xFFFF, 0x8010]);
}
