//! The replicated M_Key: a master's epoch-fenced write, kept for its successor.

use ibsm_replica::{Command, FabricState, Op, Outcome, Refusal};

#[test]
fn set_m_key_is_an_epoch_fenced_master_write() {
    let mut s = FabricState::default();
    assert_eq!(s.m_key, 0, "no key until a master programs one");
    assert_eq!(
        s.apply(&Command::ClaimMastership {
            epoch: 1,
            sm_guid: 0xA
        }),
        Outcome::Applied { epoch: 1 }
    );
    let write = |epoch, m_key| Command::Update {
        epoch,
        ops: vec![Op::SetMKey { m_key }],
    };
    assert_eq!(s.apply(&write(1, 0x77)), Outcome::Applied { epoch: 1 });
    assert_eq!(s.m_key, 0x77);

    // A successor claims the next epoch: the old master's late write is refused.
    s.apply(&Command::ClaimMastership {
        epoch: 2,
        sm_guid: 0xB,
    });
    assert_eq!(
        s.apply(&write(1, 0x99)),
        Outcome::Refused(Refusal::StaleEpoch {
            carried: 1,
            current: 2
        })
    );
    assert_eq!(s.m_key, 0x77, "the successor still sees the programmed key");
    assert_eq!(s.apply(&write(2, 0x88)), Outcome::Applied { epoch: 2 });
    assert_eq!(s.m_key, 0x88);
}

#[test]
fn the_key_survives_a_snapshot_round_trip() {
    let mut s = FabricState::default();
    s.apply(&Command::ClaimMastership {
        epoch: 1,
        sm_guid: 0xA,
    });
    s.apply(&Command::Update {
        epoch: 1,
        ops: vec![Op::SetMKey { m_key: 0x1234 }],
    });
    let bytes = bincode::serialize(&s).unwrap();
    let back: FabricState = bincode::deserialize(&bytes).unwrap();
    assert_eq!(back.m_key, 0x1234);
    assert_eq!(back, s);
}
