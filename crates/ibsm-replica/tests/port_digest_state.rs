//! The replicated port digests and LFT stamps: a master's epoch-fenced write, kept
//! for its successor, and a state of a release without them still loads.

use std::collections::BTreeMap;

use ibsm_replica::{Command, FabricState, LftDigest, LidRange, Op, Outcome, PortDigest};
use serde::Serialize;

fn digest(p_key: u64) -> PortDigest {
    PortDigest {
        p_key: Some(p_key),
        qos: Some(7),
    }
}

#[test]
fn set_port_digest_is_a_master_write_kept_per_port() {
    let mut s = FabricState::default();
    s.apply(&Command::ClaimMastership {
        epoch: 1,
        sm_guid: 0xA,
    });
    let write = |epoch, node_guid, port, d| Command::Update {
        epoch,
        ops: vec![Op::SetPortDigest {
            node_guid,
            port,
            digest: d,
        }],
    };
    assert_eq!(
        s.apply(&write(1, 0x10, 1, digest(1))),
        Outcome::Applied { epoch: 1 }
    );
    assert_eq!(
        s.apply(&write(1, 0x10, 2, digest(2))),
        Outcome::Applied { epoch: 1 }
    );
    assert_eq!(
        s.apply(&write(1, 0x10, 1, digest(3))),
        Outcome::Applied { epoch: 1 }
    );
    assert_eq!(s.port_digests[&0x10][&1], digest(3), "replaced");
    assert_eq!(s.port_digests[&0x10][&2], digest(2));
    // A late write of a master whose epoch is over changes nothing.
    s.apply(&Command::ClaimMastership {
        epoch: 2,
        sm_guid: 0xB,
    });
    assert!(matches!(
        s.apply(&write(1, 0x10, 2, digest(9))),
        Outcome::Refused(_)
    ));
    assert_eq!(s.port_digests[&0x10][&2], digest(2));
    let back: FabricState = bincode::deserialize(&bincode::serialize(&s).unwrap()).unwrap();
    assert_eq!(back, s);
}

/// `FabricState` as a release without port digests encoded it (same fields, in
/// order, up to `sa`).
#[derive(Serialize)]
struct StateBefore {
    epoch: u64,
    master_guid: Option<u64>,
    guid2lid: BTreeMap<u64, LidRange>,
    partitions: BTreeMap<u16, ibsm_replica::Partition>,
    sm_roster: BTreeMap<u64, ibsm_replica::SmRosterEntry>,
    topology: Option<ibsm_replica::TopologySummary>,
    lft_digests: BTreeMap<u64, LftDigest>,
    config: BTreeMap<String, String>,
    m_key: u64,
    sa: BTreeMap<ibsm_replica::SaTable, BTreeMap<Vec<u8>, Vec<u8>>>,
}

#[test]
fn a_state_without_port_digests_still_loads() {
    let old = StateBefore {
        epoch: 4,
        master_guid: Some(0xA),
        guid2lid: [(
            0x1,
            LidRange {
                min_lid: 1,
                max_lid: 1,
            },
        )]
        .into(),
        partitions: BTreeMap::new(),
        sm_roster: BTreeMap::new(),
        topology: None,
        lft_digests: [(
            0x20,
            LftDigest {
                lft_top: 3,
                digest: 9,
            },
        )]
        .into(),
        config: BTreeMap::new(),
        m_key: 0x55,
        sa: BTreeMap::new(),
    };
    let bytes = bincode::serialize(&old).unwrap();
    let s: FabricState = bincode::deserialize(&bytes).expect("an older state loads");
    assert_eq!((s.epoch, s.m_key), (4, 0x55));
    assert_eq!(s.lft_digests.len(), 1);
    assert!(
        s.port_digests.is_empty(),
        "no digests: every table is written"
    );
}

/// The stamp a switch was closed with belongs to the digest set just before it: a
/// digest written without one (a master of an older release) clears it, so no
/// standby trusts an earlier read of that switch; and a state without stamps loads.
#[test]
fn an_lft_stamp_follows_its_digest_and_a_digest_alone_clears_it() {
    let mut s = FabricState::default();
    s.apply(&Command::ClaimMastership {
        epoch: 1,
        sm_guid: 0xA,
    });
    let d = |digest| LftDigest { lft_top: 3, digest };
    let update = |ops| Command::Update { epoch: 1, ops };
    s.apply(&update(vec![
        Op::SetLftDigest {
            switch_guid: 0x20,
            digest: d(1),
        },
        Op::SetLftStamp {
            switch_guid: 0x20,
            stamp: 4,
        },
    ]));
    assert_eq!(s.lft_stamps.get(&0x20), Some(&4));
    s.apply(&update(vec![Op::SetLftDigest {
        switch_guid: 0x20,
        digest: d(2),
    }]));
    assert_eq!(
        s.lft_stamps.get(&0x20),
        None,
        "a digest alone clears the stamp"
    );
    s.apply(&update(vec![Op::SetLftStamp {
        switch_guid: 0x20,
        stamp: 6,
    }]));
    s.apply(&update(vec![Op::ReplaceLftDigests(BTreeMap::new())]));
    assert!(s.lft_stamps.is_empty());

    // A state with port digests but no stamps.
    let mut with_digests = FabricState::default();
    with_digests
        .port_digests
        .entry(0x10)
        .or_default()
        .insert(1, digest(1));
    let mut bytes = bincode::serialize(&with_digests).unwrap();
    // Drop the trailing (empty) lft_stamps map: its length prefix, a u64.
    bytes.truncate(bytes.len() - 8);
    let back: FabricState = bincode::deserialize(&bytes).expect("a state without stamps loads");
    assert_eq!(back.port_digests, with_digests.port_digests);
    assert!(back.lft_stamps.is_empty());
}
