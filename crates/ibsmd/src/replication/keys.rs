//! The replicated config entries the daemon reads and writes itself: partitions set
//! through the API (`partition/<pkey>`, converted to and from the configurator's
//! [`Partition`]) and the SM port GUID -> Raft node id registrations (`sm.<guid>.node`).
//! The format is `ibsm_replica::config_keys`'s (a partition's IPoIB flags are
//! `,ipoib,...` after its name); this is the daemon's side of it, with the rule that
//! joins the replicated partitions to the start-up ones
//! ([`effective_partitions`], from `ibsm_core::node`).

use ibsm_core::subnet::{Membership, Partition, PartitionIpoib, PartitionMember};
use ibsm_replica::FabricState;

/// Config key prefix of replicated partitions (`partition/<pkey, 4 hex digits>`).
pub use ibsm_replica::config_keys::{partition_key, PARTITION_KEY};

/// `name|guid:full,guid:limited`: the replicated form of a partition
/// (`ibsm_replica::config_keys`, which every replica validates on apply, owns the
/// format; this converts from the configurator's type).
pub fn encode_partition(p: &Partition) -> String {
    let ipoib = p.ipoib.map(|i| ibsm_replica::IpoibFlags {
        rate: i.rate,
        mtu: i.mtu,
        sl: i.sl,
        scope: i.scope,
        q_key: i.q_key,
    });
    let replica = ibsm_replica::Partition {
        p_key: p.p_key,
        name: p.name.clone(),
        members: p
            .members
            .iter()
            .map(|m| ibsm_replica::PartitionMember {
                port_guid: m.port_guid,
                full: m.membership == Membership::Full,
            })
            .collect(),
    };
    ibsm_replica::config_keys::encode_partition_ipoib(&replica, ipoib.as_ref())
}

/// The partition a replicated config entry holds; `None` for another key or an entry
/// that does not parse (the state machine refuses those, so only a store written
/// before its checks can hold one).
pub fn decode_partition(key: &str, value: &str) -> Option<Partition> {
    let (p, ipoib) = ibsm_replica::config_keys::decode_partition_ipoib(key, value).ok()?;
    Some(Partition {
        groups: Vec::new(),
        index0: false,
        ipoib: ipoib.map(|i| PartitionIpoib {
            rate: i.rate,
            mtu: i.mtu,
            sl: i.sl,
            scope: i.scope,
            q_key: i.q_key,
        }),
        name: p.name,
        p_key: p.p_key,
        members: p
            .members
            .into_iter()
            .map(|m| PartitionMember {
                port_guid: m.port_guid,
                membership: if m.full {
                    Membership::Full
                } else {
                    Membership::Limited
                },
            })
            .collect(),
    })
}

/// The partitions in a replicated state, by P_Key.
pub fn partitions_in(state: &FabricState) -> Vec<Partition> {
    state
        .config
        .range(PARTITION_KEY.to_string()..)
        .take_while(|(k, _)| k.starts_with(PARTITION_KEY))
        .filter_map(|(k, v)| decode_partition(k, v))
        .collect()
}

pub use ibsm_core::node::{effective_partitions, SkippedPartition};

/// The replicated-config key that maps an SM port GUID to its Raft node id.
pub fn sm_node_key(guid: u64) -> String {
    ibsm_replica::config_keys::sm_node_key(guid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ibsm_core::subnet::{ConfigError, SubnetConfig};

    fn part(name: &str, pkey: u16, members: &[u64]) -> Partition {
        Partition {
            groups: Vec::new(),
            index0: false,
            name: name.into(),
            p_key: pkey,
            members: members
                .iter()
                .map(|&port_guid| PartitionMember {
                    port_guid,
                    membership: Membership::Full,
                })
                .collect(),
            ipoib: None,
        }
    }

    #[test]
    fn replicated_partitions_join_the_configured_ones_and_win_on_pkey_or_name() {
        let configured = [part("storage", 0x10, &[1]), part("compute", 0x20, &[2])];
        let replicated = [
            part("storage-b", 0x10, &[3]),
            part("compute", 0x25, &[4]),
            part("gpu", 0x30, &[5]),
        ];
        let (got, skipped) = effective_partitions(&configured, &replicated);
        assert!(skipped.is_empty(), "{skipped:?}");
        assert_eq!(
            got,
            vec![
                part("storage-b", 0x10, &[3]),
                part("compute", 0x25, &[4]),
                part("gpu", 0x30, &[5]),
            ]
        );
        assert!(SubnetConfig {
            partitions: got,
            ..SubnetConfig::default()
        }
        .validate()
        .is_ok());
    }

    #[test]
    fn a_replicated_partition_that_breaks_the_set_is_skipped_alone() {
        // Port 9 already in 31 configured partitions: a 32nd does not fit.
        let configured: Vec<Partition> = (1..=31u16)
            .map(|k| part(&format!("p{k}"), k, &[9]))
            .collect();
        let replicated = [
            part("too-many", 0x100, &[9, 8]),
            part("fine", 0x200, &[8]),
            part("fine", 0x300, &[7]),
        ];
        let (got, skipped) = effective_partitions(&configured, &replicated);
        assert_eq!(got.len(), 32);
        assert!(got.iter().any(|p| p.p_key == 0x200));
        let why: Vec<(u16, &ConfigError)> = skipped
            .iter()
            .map(|s| (s.partition.p_key, &s.why))
            .collect();
        assert!(
            matches!(
                why.as_slice(),
                [
                    (0x100, ConfigError::TooManyPartitions { count: 32, .. }),
                    (0x300, ConfigError::Duplicate { what: "name", .. })
                ]
            ),
            "{why:?}"
        );
    }

    #[test]
    fn the_replicated_form_round_trips_and_lists_only_partition_keys() {
        let p = Partition {
            groups: Vec::new(),
            index0: false,
            name: "mixed".into(),
            p_key: 0x7ffe,
            members: vec![
                PartitionMember {
                    port_guid: 0x0002_c903_0000_0011,
                    membership: Membership::Full,
                },
                PartitionMember {
                    port_guid: 0x12,
                    membership: Membership::Limited,
                },
            ],
            ipoib: None,
        };
        let key = partition_key(p.p_key);
        assert_eq!(key, "partition/7ffe");
        assert_eq!(
            decode_partition(&key, &encode_partition(&p)).as_ref(),
            Some(&p)
        );
        let mut state = FabricState::default();
        state.config.insert("other".into(), "x".into());
        state.config.insert(key, encode_partition(&p));
        state.config.insert("partitionz".into(), "y|".into());
        state.config.insert("sm.1.node".into(), "1".into());
        assert_eq!(partitions_in(&state), vec![p]);
    }
}
