//! Properties of the replicated state machine: epochs only grow, a stale or unclaimed
//! epoch changes nothing, apply is deterministic, and the wire/snapshot encoding
//! round-trips.

use ibsm_replica::{Command, ConfigChange, FabricState, LidRange, Op, Outcome, Refusal};
use proptest::prelude::*;

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (any::<u64>(), 0u16..0xC100, 0u16..0xC100).prop_map(|(g, a, b)| Op::SetGuid2Lid {
            port_guid: g % 64,
            range: LidRange {
                min_lid: a,
                max_lid: b
            }
        }),
        any::<u64>().prop_map(|g| Op::RemoveGuid2Lid { port_guid: g % 64 }),
    ]
}

fn command() -> impl Strategy<Value = Command> {
    prop_oneof![
        (0u64..6, any::<u64>())
            .prop_map(|(epoch, sm_guid)| Command::ClaimMastership { epoch, sm_guid }),
        (0u64..6, proptest::collection::vec(op(), 0..4))
            .prop_map(|(epoch, ops)| Command::Update { epoch, ops }),
        ("[a-z]{1,3}", "[0-9]{1,3}")
            .prop_map(|(key, value)| Command::Config(ConfigChange::Set { key, value })),
    ]
}

proptest! {
    #[test]
    fn epochs_only_grow_and_refusals_change_nothing(cmds in proptest::collection::vec(command(), 0..40)) {
        let mut s = FabricState::default();
        let mut replay = FabricState::default();
        for c in &cmds {
            let before = s.clone();
            let o = s.apply(c);
            prop_assert_eq!(&o, &replay.apply(c), "apply is not deterministic");
            prop_assert!(s.epoch >= before.epoch);
            match (&o, c) {
                (Outcome::Refused(_), _) => prop_assert_eq!(&s, &before),
                (Outcome::Applied { .. }, Command::ClaimMastership { epoch, .. }) => {
                    prop_assert_eq!(*epoch, before.epoch + 1, "a claim advances the epoch by exactly one");
                    prop_assert_eq!(s.epoch, *epoch);
                }
                (Outcome::Applied { .. }, Command::Update { epoch, .. }) => prop_assert_eq!(*epoch, before.epoch),
                _ => {}
            }
            if let (Outcome::Refused(Refusal::StaleEpoch { carried, current }), Command::Update { .. }) = (&o, c) {
                prop_assert!(carried < current);
            }
            for r in s.guid2lid.values() {
                prop_assert!(r.min_lid >= 1 && r.min_lid <= r.max_lid && r.max_lid <= 0xBFFF);
            }
        }
        prop_assert_eq!(&s, &replay);
        let bytes = bincode::serialize(&s).expect("encode");
        let back: FabricState = bincode::deserialize(&bytes).expect("decode");
        prop_assert_eq!(back, s);
    }

    #[test]
    fn decoding_garbage_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = bincode::deserialize::<Command>(&bytes);
        let _ = bincode::deserialize::<FabricState>(&bytes);
    }
}

#[test]
fn a_claim_that_skips_epochs_is_refused_so_no_writer_can_wedge_them() {
    let mut s = FabricState::default();
    let o = s.apply(&Command::ClaimMastership {
        epoch: u64::MAX,
        sm_guid: 0xbad,
    });
    assert_eq!(
        o,
        Outcome::Refused(Refusal::EpochNotNext {
            carried: u64::MAX,
            current: 0
        })
    );
    assert_eq!(s, FabricState::default());
    // The next honest claim still goes through.
    assert_eq!(
        s.apply(&Command::ClaimMastership {
            epoch: 1,
            sm_guid: 9
        }),
        Outcome::Applied { epoch: 1 }
    );
}

#[test]
fn config_over_the_limits_is_refused_deterministically() {
    use ibsm_replica::config_keys::{MAX_CONFIG_VALUE_BYTES, MAX_PARTITIONS};
    let mut s = FabricState::default();
    let big = Command::Config(ConfigChange::Set {
        key: "k".into(),
        value: "v".repeat(MAX_CONFIG_VALUE_BYTES + 1),
    });
    assert!(matches!(
        s.apply(&big),
        Outcome::Refused(Refusal::InvalidConfig(_))
    ));
    for i in 1..=MAX_PARTITIONS as u16 {
        let o = s.apply(&Command::Config(ConfigChange::Set {
            key: ibsm_replica::config_keys::partition_key(i),
            value: format!("p{i}|0x{i:x}:full"),
        }));
        assert_eq!(o, Outcome::Applied { epoch: 0 });
    }
    let before = s.clone();
    let o = s.apply(&Command::Config(ConfigChange::Set {
        key: ibsm_replica::config_keys::partition_key(0x7000),
        value: "one-too-many|".into(),
    }));
    assert!(
        matches!(o, Outcome::Refused(Refusal::InvalidConfig(ref m)) if m.contains("partitions")),
        "{o:?}"
    );
    assert_eq!(s, before);
}

#[test]
fn update_is_all_or_nothing() {
    let mut s = FabricState::default();
    assert_eq!(
        s.apply(&Command::ClaimMastership {
            epoch: 1,
            sm_guid: 9
        }),
        Outcome::Applied { epoch: 1 }
    );
    let o = s.apply(&Command::Update {
        epoch: 1,
        ops: vec![
            Op::SetGuid2Lid {
                port_guid: 1,
                range: LidRange {
                    min_lid: 1,
                    max_lid: 1,
                },
            },
            Op::SetGuid2Lid {
                port_guid: 2,
                range: LidRange {
                    min_lid: 0,
                    max_lid: 0,
                },
            },
        ],
    });
    assert!(
        matches!(o, Outcome::Refused(Refusal::Invalid { index: 1, .. })),
        "{o:?}"
    );
    assert!(s.guid2lid.is_empty());
    assert_eq!(s.guid2lid_file(), "");
    s.apply(&Command::Update {
        epoch: 1,
        ops: vec![Op::SetGuid2Lid {
            port_guid: 0x10,
            range: LidRange {
                min_lid: 4,
                max_lid: 7,
            },
        }],
    });
    assert_eq!(s.guid2lid_file(), "0x0000000000000010 4 7\n");
}
