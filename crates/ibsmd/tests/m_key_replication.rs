//! The M_Key a master programmed goes into the replicated state, once, and comes
//! back to its successor.

use ibsm_replica::{FabricState, Op};
use ibsmd::replication::{diff_ops, FabricRecord};

fn record(m_key: Option<u64>) -> FabricRecord {
    FabricRecord {
        m_key,
        ..FabricRecord::default()
    }
}

#[test]
fn a_new_key_is_written_once_and_none_leaves_it_alone() {
    let mut have = FabricState::default();
    assert_eq!(
        diff_ops(&have, &record(Some(0x77))),
        vec![Op::SetMKey { m_key: 0x77 }]
    );
    have.m_key = 0x77;
    assert!(diff_ops(&have, &record(Some(0x77))).is_empty(), "unchanged");
    assert!(diff_ops(&have, &record(None)).is_empty(), "no claim");
    // The operator removed the key: the fabric is unprotected again, and says so.
    assert_eq!(
        diff_ops(&have, &record(Some(0))),
        vec![Op::SetMKey { m_key: 0 }]
    );
}
