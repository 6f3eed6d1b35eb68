//! The Subnet Administrator's state as the replica holds it: [`SaTable`]s of opaque
//! entries, each a key and a value in bytes.
//!
//! Why opaque: what the SA keeps (multicast groups and their members, ServiceRecords,
//! InformInfo subscriptions) is defined by IBA wire formats that `ibsm-core` owns
//! (MCMemberRecord, ServiceRecord, InformInfo), and this crate names none of ours.
//! The master encodes each entry in its IBA form, so a replica stores and orders bytes
//! whose meaning is fixed by the spec, and a successor decodes exactly what the old
//! master held. Writes are [`crate::Op`]s inside an epoch-fenced `Command::Update`,
//! like LIDs: a deposed master cannot change the groups a new master serves.
//!
//! Bounds, checked on every replica when a write is applied: key at most
//! [`MAX_SA_KEY`] bytes, value at most [`MAX_SA_VALUE`] bytes, at most
//! [`MAX_SA_ENTRIES`] entries per table. A write that would pass them is refused
//! whole, so a flood of joins cannot grow the state without bound.

use serde::{Deserialize, Serialize};

/// Longest key of an SA entry (an MGID plus a port GID is 32 bytes).
pub const MAX_SA_KEY: usize = 64;
/// Longest value of an SA entry (an IBA record: ServiceRecord is 176 bytes).
pub const MAX_SA_VALUE: usize = 512;
/// Most entries in one table (IBA allows 16k multicast groups; members are per port).
pub const MAX_SA_ENTRIES: usize = 1 << 20;

/// Which SA table an entry belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum SaTable {
    /// Multicast groups: key MGID (16 bytes), value the group's MCMemberRecord
    /// parameters with its MLID.
    McGroups,
    /// Group members: key MGID + PortGID (32 bytes), value the member's join state.
    McMembers,
    /// ServiceRecords: key ServiceID + ServiceGID + ServiceP_Key, value the record.
    Services,
    /// InformInfo subscriptions: key the subscriber and its InformInfo, value what the
    /// SA needs to send it Reports.
    Informs,
}

impl SaTable {
    /// Every table.
    pub const ALL: [SaTable; 4] = [
        SaTable::McGroups,
        SaTable::McMembers,
        SaTable::Services,
        SaTable::Informs,
    ];

    /// A short name for logs and the API.
    pub fn name(self) -> &'static str {
        match self {
            SaTable::McGroups => "mc_groups",
            SaTable::McMembers => "mc_members",
            SaTable::Services => "services",
            SaTable::Informs => "informs",
        }
    }
}

/// Checks one entry against the bounds; `Err` says which and why.
pub(crate) fn check_entry(table: SaTable, key: &[u8], value: Option<&[u8]>) -> Result<(), String> {
    if key.is_empty() || key.len() > MAX_SA_KEY {
        return Err(format!(
            "SA {} key of {} bytes: keys are 1-{MAX_SA_KEY} bytes",
            table.name(),
            key.len()
        ));
    }
    if let Some(v) = value {
        if v.len() > MAX_SA_VALUE {
            return Err(format!(
                "SA {} value of {} bytes: values are at most {MAX_SA_VALUE} bytes",
                table.name(),
                v.len()
            ));
        }
    }
    Ok(())
}
