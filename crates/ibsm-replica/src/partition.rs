//! A partition as the replicated state holds it ([`Partition`], [`PartitionMember`]).
//!
//! Why a file of its own: [`crate::state`] keeps partitions in `FabricState` and, when
//! it applies a config write, validates it with [`crate::config_keys`], whose
//! `partition/<pkey>` codec builds these same types. With them here, config_keys needs
//! nothing from state and the two files do not import each other. `state` re-exports
//! both, so their paths (`ibsm_replica::Partition`, `ibsm_replica::state::Partition`)
//! are unchanged.

use serde::{Deserialize, Serialize};

/// One member of a partition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionMember {
    pub port_guid: u64,
    /// Full (true) or limited (false) membership.
    pub full: bool,
}

/// A partition, keyed by its 15-bit P_Key (membership bit cleared).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Partition {
    pub p_key: u16,
    pub name: String,
    pub members: Vec<PartitionMember>,
}

/// The IPoIB broadcast group flags of a partition set through the API (OpenSM's
/// partitions.conf `ipoib` with `rate=`, `mtu=`, `sl=`, `scope=`, `Q_Key=`), IBA
/// encodings. Kept only in the `partition/<pkey>` config value, not in [`Partition`]:
/// that type is part of the bincode state and log, whose layout stays as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpoibFlags {
    pub rate: u8,
    pub mtu: u8,
    pub sl: u8,
    pub scope: u8,
    pub q_key: u32,
}
