//! The replicated SA tables: epoch-fenced master writes, bounded, canonical when empty,
//! and carried through a bincode round trip (what a snapshot and the log hold).

use std::collections::BTreeMap;

use ibsm_replica::sa::{MAX_SA_KEY, MAX_SA_VALUE};
use ibsm_replica::{Command, FabricState, Op, Outcome, Refusal, SaTable};

fn claimed(epoch: u64) -> FabricState {
    let mut s = FabricState::default();
    for e in 1..=epoch {
        s.apply(&Command::ClaimMastership {
            epoch: e,
            sm_guid: 0xA + e,
        });
    }
    s
}

fn set(table: SaTable, key: &[u8], value: &[u8]) -> Op {
    Op::SetSaEntry {
        table,
        key: key.to_vec(),
        value: value.to_vec(),
    }
}

#[test]
fn sa_entries_are_epoch_fenced_like_lids() {
    let mut s = claimed(1);
    let w = |epoch, ops| Command::Update { epoch, ops };
    assert_eq!(
        s.apply(&w(1, vec![set(SaTable::McGroups, b"mgid-a", b"group")])),
        Outcome::Applied { epoch: 1 }
    );
    s.apply(&Command::ClaimMastership {
        epoch: 2,
        sm_guid: 0xB,
    });
    // The deposed master's leave must not remove what the new master serves.
    assert_eq!(
        s.apply(&w(
            1,
            vec![Op::RemoveSaEntry {
                table: SaTable::McGroups,
                key: b"mgid-a".to_vec()
            }]
        )),
        Outcome::Refused(Refusal::StaleEpoch {
            carried: 1,
            current: 2
        })
    );
    assert_eq!(s.sa[&SaTable::McGroups][&b"mgid-a"[..]], b"group");
}

#[test]
fn removing_the_last_entry_leaves_the_state_as_if_it_never_existed() {
    let mut s = claimed(1);
    let empty = s.clone();
    s.apply(&Command::Update {
        epoch: 1,
        ops: vec![set(SaTable::Services, b"svc", b"record")],
    });
    assert_ne!(s, empty);
    s.apply(&Command::Update {
        epoch: 1,
        ops: vec![Op::RemoveSaEntry {
            table: SaTable::Services,
            key: b"svc".to_vec(),
        }],
    });
    assert_eq!(
        s, empty,
        "an emptied table is dropped, so states compare equal"
    );
}

#[test]
fn oversized_entries_are_refused_whole() {
    let mut s = claimed(1);
    let before = s.clone();
    let big_key = vec![1u8; MAX_SA_KEY + 1];
    let out = s.apply(&Command::Update {
        epoch: 1,
        ops: vec![
            set(SaTable::Informs, b"ok", b"fine"),
            set(SaTable::Informs, &big_key, b"v"),
        ],
    });
    assert!(
        matches!(out, Outcome::Refused(Refusal::Invalid { index: 1, .. })),
        "{out:?}"
    );
    assert_eq!(s, before, "all or none: the first op did not apply either");
    let big_value = vec![0u8; MAX_SA_VALUE + 1];
    let out = s.apply(&Command::Update {
        epoch: 1,
        ops: vec![set(SaTable::Informs, b"k", &big_value)],
    });
    assert!(
        matches!(out, Outcome::Refused(Refusal::Invalid { index: 0, .. })),
        "{out:?}"
    );
    let out = s.apply(&Command::Update {
        epoch: 1,
        ops: vec![set(SaTable::Informs, b"", b"v")],
    });
    assert!(
        matches!(out, Outcome::Refused(Refusal::Invalid { .. })),
        "{out:?}"
    );
}

#[test]
fn replace_table_swaps_everything_and_survives_bincode() {
    let mut s = claimed(3);
    s.apply(&Command::Update {
        epoch: 3,
        ops: vec![set(SaTable::McMembers, b"old", b"x")],
    });
    let entries: BTreeMap<Vec<u8>, Vec<u8>> =
        (0u8..10).map(|i| (vec![i; 32], vec![i; 8])).collect();
    assert_eq!(
        s.apply(&Command::Update {
            epoch: 3,
            ops: vec![Op::ReplaceSaTable {
                table: SaTable::McMembers,
                entries: entries.clone()
            }],
        }),
        Outcome::Applied { epoch: 3 }
    );
    assert_eq!(s.sa[&SaTable::McMembers], entries);
    let bytes = bincode::serialize(&s).expect("encode");
    let back: FabricState = bincode::deserialize(&bytes).expect("decode");
    assert_eq!(back, s);
}
