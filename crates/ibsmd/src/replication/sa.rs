//! The SA's tables between the core's names ([`SaTableKind`]) and the replica's
//! ([`SaTable`]), and the ops that turn the replicated tables into the desired ones.

use std::collections::BTreeMap;

use ibsm_core::sa::{SaTableKind, SaTables};
use ibsm_replica::{FabricState, Op, SaTable};

/// The replicated SA tables, by replica table.
pub type ReplicaSaTables = BTreeMap<SaTable, BTreeMap<Vec<u8>, Vec<u8>>>;

fn to_replica(kind: SaTableKind) -> SaTable {
    match kind {
        SaTableKind::McGroups => SaTable::McGroups,
        SaTableKind::McMembers => SaTable::McMembers,
        SaTableKind::Services => SaTable::Services,
        SaTableKind::Informs => SaTable::Informs,
    }
}

fn to_core(t: SaTable) -> SaTableKind {
    match t {
        SaTable::McGroups => SaTableKind::McGroups,
        SaTable::McMembers => SaTableKind::McMembers,
        SaTable::Services => SaTableKind::Services,
        SaTable::Informs => SaTableKind::Informs,
    }
}

/// The core's tables as the replica names them.
pub fn replica_tables(t: SaTables) -> ReplicaSaTables {
    t.into_iter().map(|(k, v)| (to_replica(k), v)).collect()
}

/// The replicated tables as the core names them.
pub fn core_tables(state: &FabricState) -> SaTables {
    state
        .sa
        .iter()
        .map(|(k, v)| (to_core(*k), v.clone()))
        .collect()
}

/// The ops that make the replicated tables in `want` equal to it (tables absent from
/// `want` are left alone; the replica drops a table that becomes empty).
pub fn sa_ops(have: &FabricState, want: &ReplicaSaTables, ops: &mut Vec<Op>) {
    let empty = BTreeMap::new();
    for (table, entries) in want {
        let had = have.sa.get(table);
        let cur = had.unwrap_or(&empty);
        if entries.is_empty() {
            if !cur.is_empty() {
                ops.push(Op::ReplaceSaTable {
                    table: *table,
                    entries: BTreeMap::new(),
                });
            }
            continue;
        }
        if had.is_none() {
            // First write of the table: all of it at once.
            ops.push(Op::ReplaceSaTable {
                table: *table,
                entries: entries.clone(),
            });
            continue;
        }
        for (k, v) in entries {
            if cur.get(k) != Some(v) {
                ops.push(Op::SetSaEntry {
                    table: *table,
                    key: k.clone(),
                    value: v.clone(),
                });
            }
        }
        for k in cur.keys().filter(|k| !entries.contains_key(*k)) {
            ops.push(Op::RemoveSaEntry {
                table: *table,
                key: k.clone(),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(state: &mut FabricState, ops: Vec<Op>) {
        let epoch = state.epoch;
        let out = state.apply(&ibsm_replica::Command::Update { epoch, ops });
        assert!(
            matches!(out, ibsm_replica::Outcome::Applied { .. }),
            "{out:?}"
        );
    }

    #[test]
    fn the_replica_converges_on_the_desired_tables_and_then_nothing_is_written() {
        let mut state = FabricState::default();
        state.apply(&ibsm_replica::Command::ClaimMastership {
            epoch: 1,
            sm_guid: 1,
        });
        let mut want: ReplicaSaTables = BTreeMap::new();
        want.insert(
            SaTable::McGroups,
            [(vec![1; 16], vec![1, 2]), (vec![2; 16], vec![3])].into(),
        );
        want.insert(SaTable::McMembers, BTreeMap::new());
        for round in 0..3 {
            let mut ops = Vec::new();
            sa_ops(&state, &want, &mut ops);
            if round > 0 {
                assert!(ops.is_empty(), "converged, yet {ops:?}");
            }
            apply(&mut state, ops);
        }
        assert_eq!(
            state.sa.get(&SaTable::McGroups),
            want.get(&SaTable::McGroups)
        );
        // One group leaves, one member joins: only those entries are written.
        want.get_mut(&SaTable::McGroups)
            .unwrap()
            .remove(&vec![2; 16]);
        want.insert(SaTable::McMembers, [(vec![1; 32], vec![1, 0])].into());
        let mut ops = Vec::new();
        sa_ops(&state, &want, &mut ops);
        assert_eq!(ops.len(), 2, "{ops:?}");
        apply(&mut state, ops);
        assert_eq!(core_tables(&state).len(), 2);
        // Every member goes: the table is dropped.
        want.insert(SaTable::McMembers, BTreeMap::new());
        let mut ops = Vec::new();
        sa_ops(&state, &want, &mut ops);
        apply(&mut state, ops);
        assert!(!state.sa.contains_key(&SaTable::McMembers));
    }
}
