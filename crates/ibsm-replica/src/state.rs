//! The replicated fabric state and the commands that change it. Pure data and a pure
//! `apply`: no I/O, no clock, so it is property-tested on its own and every replica that
//! applies the same log ends with the same state.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use crate::partition::{IpoibFlags, Partition, PartitionMember};
pub use crate::sa::SaTable;
use crate::sa::{check_entry, MAX_SA_ENTRIES};

/// Highest unicast LID (IBA: 0x0001-0xBFFF are unicast).
pub const MAX_UNICAST_LID: u16 = 0xBFFF;

/// The LIDs of one port: `min_lid..=max_lid` (2^LMC LIDs for a CA port, one for a switch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LidRange {
    pub min_lid: u16,
    pub max_lid: u16,
}

/// SMInfo SMState as IBA encodes it (0-3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SmState {
    NotActive,
    Discovering,
    Standby,
    Master,
}

/// One SM of the roster: what the last SMInfo said about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SmRosterEntry {
    pub guid: u64,
    pub priority: u8,
    pub sm_state: SmState,
    pub act_count: u32,
}

/// A node of the last discovered topology.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopoNode {
    pub node_guid: u64,
    /// IBA NodeType: 1 CA, 2 switch, 3 router.
    pub node_type: u8,
    pub num_ports: u8,
    pub description: String,
}

/// A cable of the last discovered topology, counted once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopoLink {
    pub node_guid_a: u64,
    pub port_a: u8,
    pub node_guid_b: u64,
    pub port_b: u8,
}

/// The last topology the master discovered, reduced to what a successor needs to tell a
/// changed fabric from the one it inherits.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopologySummary {
    /// The master's sweep counter when it was taken.
    pub sweep: u64,
    pub nodes: Vec<TopoNode>,
    pub links: Vec<TopoLink>,
}

/// What the master last programmed into one switch's LFT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LftDigest {
    /// LinearFDBTop the table was computed for.
    pub lft_top: u16,
    /// [`lft_digest`] of the table's entries `0..=lft_top`.
    pub digest: u64,
}

/// FNV-1a 64 of an LFT (`lft[lid]` = egress port). Not cryptographic on purpose: it only
/// tells a successor "this switch holds what the last master computed", collisions are
/// not adversarial and the master hashes 4k tables per sweep.
pub fn lft_digest(lft: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in lft {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// What the master last programmed into one port's P_Key, SLtoVL and
/// VLArbitration tables (`ibsm_core`'s `port_digest` module computes them): a
/// successor that verified the fabric writes only the ports whose desired tables
/// digest differently. `None`: no such table written to the port.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortDigest {
    /// FNV-1a 64 of P_Key block 0 as written.
    pub p_key: Option<u64>,
    /// FNV-1a 64 of the SLtoVL table and the VLArbitration blocks written.
    pub qos: Option<u64>,
}

/// The whole replicated state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FabricState {
    /// Mastership epoch: raised by every new master ([`Command::ClaimMastership`]).
    pub epoch: u64,
    /// Port GUID of the SM that holds `epoch`.
    pub master_guid: Option<u64>,
    /// Port GUID -> LIDs (OpenSM's guid2lid).
    pub guid2lid: BTreeMap<u64, LidRange>,
    /// P_Key -> partition, as the master programmed them at its last heavy sweep
    /// (its start-up partitions plus the requests set through the API, which live in
    /// `config` under `partition/`).
    pub partitions: BTreeMap<u16, Partition>,
    /// SM port GUID -> the SMInfo the master last read of it (itself included), as of
    /// its last heavy sweep; ActCount is as of the last change of priority or state.
    pub sm_roster: BTreeMap<u64, SmRosterEntry>,
    pub topology: Option<TopologySummary>,
    /// Switch node GUID -> digest of its LFT.
    pub lft_digests: BTreeMap<u64, LftDigest>,
    /// Runtime configuration changed through the control API.
    pub config: BTreeMap<String, String>,
    /// The M_Key the master programmed into the fabric (0: none), so a successor
    /// can still reach ports protected with it ([`Op::SetMKey`]). Not exposed by
    /// any API: it is the fabric's management secret.
    #[serde(default)]
    pub m_key: u64,
    /// The Subnet Administrator's tables (multicast groups and members, services,
    /// subscriptions), each entry in its IBA encoding (see [`crate::sa`]).
    #[serde(default)]
    pub sa: BTreeMap<SaTable, BTreeMap<Vec<u8>, Vec<u8>>>,
    /// Node GUID -> port -> what the master programmed into that port's P_Key,
    /// SLtoVL and VLArbitration tables, as of its last heavy sweep. Empty in the
    /// state of a release without it: a successor then writes every table. Last,
    /// and read leniently ([`or_default_at_end`]): bincode has no field names, so
    /// such a state simply ends before it.
    #[serde(default, deserialize_with = "or_default_at_end")]
    pub port_digests: BTreeMap<u64, BTreeMap<u8, PortDigest>>,
    /// Switch node GUID -> the LFT stamp (`ibsm_core::subnet::lft_stamp`) the master
    /// closed its last programming of that switch with, the one `lft_digests`
    /// describes. Absent: the digest was written without a stamp (an older
    /// release), so no standby may trust an earlier read of that switch. Last, and
    /// read leniently, like `port_digests`.
    #[serde(default, deserialize_with = "or_default_at_end")]
    pub lft_stamps: BTreeMap<u64, u8>,
}

/// A trailing field of [`FabricState`] that a state encoded by an older release
/// lacks: bincode (no field names, no lengths) ends the input where the field
/// would start, and serde's `default` does not cover that (the read fails, it is
/// not "absent"). The field is then its default. A field that fails to decode for
/// another reason is its default too: the fields this is used for say "what the
/// successor may skip", so an empty value is the safe one (everything is written).
fn or_default_at_end<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(T::deserialize(d).unwrap_or_default())
}

/// One change inside a master's [`Command::Update`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    SetGuid2Lid {
        port_guid: u64,
        range: LidRange,
    },
    RemoveGuid2Lid {
        port_guid: u64,
    },
    /// Replace the whole guid2lid map (a master's first full LID assignment).
    ReplaceGuid2Lid(BTreeMap<u64, LidRange>),
    SetPartition(Partition),
    RemovePartition {
        p_key: u16,
    },
    SetSm(SmRosterEntry),
    RemoveSm {
        guid: u64,
    },
    SetTopology(TopologySummary),
    SetLftDigest {
        switch_guid: u64,
        digest: LftDigest,
    },
    RemoveLftDigest {
        switch_guid: u64,
    },
    ReplaceLftDigests(BTreeMap<u64, LftDigest>),
    /// The fabric's ports now hold this M_Key (after a sweep that programmed it).
    SetMKey {
        m_key: u64,
    },
    /// Insert or replace one SA entry.
    SetSaEntry {
        table: SaTable,
        key: Vec<u8>,
        value: Vec<u8>,
    },
    /// Remove one SA entry (absent: no change).
    RemoveSaEntry {
        table: SaTable,
        key: Vec<u8>,
    },
    /// Replace a whole SA table (a new master's first write of what it serves).
    ReplaceSaTable {
        table: SaTable,
        entries: BTreeMap<Vec<u8>, Vec<u8>>,
    },
    /// What the master programmed into port `port` of node `node_guid` (added
    /// last: the variants before it keep their encoding).
    SetPortDigest {
        node_guid: u64,
        port: u8,
        digest: PortDigest,
    },
    /// The LFT stamp switch `switch_guid` was closed with, for the digest
    /// [`Op::SetLftDigest`] last set (added last, after `SetPortDigest`; a
    /// `SetLftDigest` applied after it clears it).
    SetLftStamp {
        switch_guid: u64,
        stamp: u8,
    },
}

/// A change of runtime configuration from the control API (any instance may issue it;
/// it is not a master's write, so it carries no epoch).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConfigChange {
    Set { key: String, value: String },
    Remove { key: String },
}

/// A replicated command: one Raft log entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// A new master takes the epoch: accepted only if `epoch` is the current epoch
    /// plus one (each claim advances it by exactly one, so no writer can push it to a
    /// value that wedges every later claim).
    ClaimMastership {
        epoch: u64,
        sm_guid: u64,
    },
    /// A master's write: accepted only if `epoch` == the current epoch; the ops apply
    /// all or none.
    Update {
        epoch: u64,
        ops: Vec<Op>,
    },
    Config(ConfigChange),
}

/// Why the state machine refused a command (it is still in the log, applied as a no-op).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum Refusal {
    #[error("stale epoch {carried}: the current mastership epoch is {current}")]
    StaleEpoch { carried: u64, current: u64 },
    #[error("epoch {carried} was never claimed (current {current}): claim mastership first")]
    UnclaimedEpoch { carried: u64, current: u64 },
    #[error("epoch {carried} skips ahead of the current epoch {current}: a claim must carry exactly {current} + 1")]
    EpochNotNext { carried: u64, current: u64 },
    #[error("invalid op #{index}: {reason}")]
    Invalid { index: usize, reason: String },
    #[error("config refused: {0}")]
    InvalidConfig(String),
}

/// What applying one log entry did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// Applied; `epoch` is the epoch after the command.
    Applied {
        epoch: u64,
    },
    Refused(Refusal),
    /// A blank or membership entry (no command).
    Internal,
}

fn check_range(index: usize, port_guid: u64, r: &LidRange) -> Result<(), Refusal> {
    if r.min_lid == 0 || r.max_lid > MAX_UNICAST_LID || r.min_lid > r.max_lid {
        return Err(Refusal::Invalid {
            index,
            reason: format!(
                "port 0x{port_guid:016x}: LID range {}-{} is not a unicast range (0x0001-0xBFFF, min <= max)",
                r.min_lid, r.max_lid
            ),
        });
    }
    Ok(())
}

fn validate(state: &FabricState, ops: &[Op]) -> Result<(), Refusal> {
    let invalid = |index: usize, reason: String| Refusal::Invalid { index, reason };
    // Entries each SA table would hold after the ops (upper bound: a Set of a key
    // already present counts once more than it adds).
    let mut sizes: BTreeMap<SaTable, usize> = SaTable::ALL
        .iter()
        .map(|t| (*t, state.sa.get(t).map_or(0, BTreeMap::len)))
        .collect();
    for (index, op) in ops.iter().enumerate() {
        match op {
            Op::SetSaEntry { table, key, value } => {
                check_entry(*table, key, Some(value)).map_err(|r| invalid(index, r))?;
                let present = state.sa.get(table).is_some_and(|t| t.contains_key(key));
                let n = sizes.entry(*table).or_default();
                *n += usize::from(!present);
                if *n > MAX_SA_ENTRIES {
                    return Err(invalid(
                        index,
                        format!(
                            "SA {} would hold more than {MAX_SA_ENTRIES} entries",
                            table.name()
                        ),
                    ));
                }
            }
            Op::RemoveSaEntry { table, key } => {
                check_entry(*table, key, None).map_err(|r| invalid(index, r))?;
            }
            Op::ReplaceSaTable { table, entries } => {
                if entries.len() > MAX_SA_ENTRIES {
                    return Err(invalid(
                        index,
                        format!(
                            "SA {}: {} entries, at most {MAX_SA_ENTRIES}",
                            table.name(),
                            entries.len()
                        ),
                    ));
                }
                for (k, v) in entries {
                    check_entry(*table, k, Some(v)).map_err(|r| invalid(index, r))?;
                }
                sizes.insert(*table, entries.len());
            }
            Op::SetGuid2Lid { port_guid, range } => check_range(index, *port_guid, range)?,
            Op::ReplaceGuid2Lid(map) => {
                for (g, r) in map {
                    check_range(index, *g, r)?;
                }
            }
            Op::SetPartition(p) if p.p_key & 0x8000 != 0 => {
                return Err(Refusal::Invalid {
                    index,
                    reason: format!(
                        "P_Key 0x{:04x} has the membership bit set; store the 15-bit key",
                        p.p_key
                    ),
                })
            }
            Op::SetSm(e) if e.priority > 15 => {
                return Err(Refusal::Invalid {
                    index,
                    reason: format!("SM 0x{:016x}: priority {} > 15", e.guid, e.priority),
                })
            }
            _ => {}
        }
    }
    Ok(())
}

impl FabricState {
    /// Apply one command. Deterministic: the same state and command give the same result
    /// on every replica. A refused command changes nothing.
    pub fn apply(&mut self, cmd: &Command) -> Outcome {
        match cmd {
            Command::ClaimMastership { epoch, sm_guid } => {
                if *epoch <= self.epoch {
                    return Outcome::Refused(Refusal::StaleEpoch {
                        carried: *epoch,
                        current: self.epoch,
                    });
                }
                if Some(*epoch) != self.epoch.checked_add(1) {
                    return Outcome::Refused(Refusal::EpochNotNext {
                        carried: *epoch,
                        current: self.epoch,
                    });
                }
                self.epoch = *epoch;
                self.master_guid = Some(*sm_guid);
                Outcome::Applied { epoch: self.epoch }
            }
            Command::Update { epoch, ops } => {
                if *epoch < self.epoch {
                    return Outcome::Refused(Refusal::StaleEpoch {
                        carried: *epoch,
                        current: self.epoch,
                    });
                }
                if *epoch > self.epoch {
                    return Outcome::Refused(Refusal::UnclaimedEpoch {
                        carried: *epoch,
                        current: self.epoch,
                    });
                }
                if let Err(r) = validate(self, ops) {
                    return Outcome::Refused(r);
                }
                for op in ops {
                    self.apply_op(op);
                }
                Outcome::Applied { epoch: self.epoch }
            }
            Command::Config(ConfigChange::Set { key, value }) => {
                if let Err(e) = crate::config_keys::validate_set(&self.config, key, value) {
                    return Outcome::Refused(Refusal::InvalidConfig(e.to_string()));
                }
                self.config.insert(key.clone(), value.clone());
                Outcome::Applied { epoch: self.epoch }
            }
            Command::Config(ConfigChange::Remove { key }) => {
                self.config.remove(key);
                Outcome::Applied { epoch: self.epoch }
            }
        }
    }

    /// One op of an accepted [`Command::Update`] (no epoch check: [`Self::apply`]
    /// does that for the whole command).
    pub fn apply_op(&mut self, op: &Op) {
        match op {
            Op::SetGuid2Lid { port_guid, range } => {
                self.guid2lid.insert(*port_guid, *range);
            }
            Op::RemoveGuid2Lid { port_guid } => {
                self.guid2lid.remove(port_guid);
            }
            Op::ReplaceGuid2Lid(map) => self.guid2lid = map.clone(),
            Op::SetPartition(p) => {
                self.partitions.insert(p.p_key, p.clone());
            }
            Op::RemovePartition { p_key } => {
                self.partitions.remove(p_key);
            }
            Op::SetSm(e) => {
                self.sm_roster.insert(e.guid, *e);
            }
            Op::RemoveSm { guid } => {
                self.sm_roster.remove(guid);
            }
            Op::SetTopology(t) => self.topology = Some(t.clone()),
            Op::SetLftDigest {
                switch_guid,
                digest,
            } => {
                self.lft_digests.insert(*switch_guid, *digest);
                // A stamping master follows with SetLftStamp; one that does not
                // leaves the switch untrusted.
                self.lft_stamps.remove(switch_guid);
            }
            Op::RemoveLftDigest { switch_guid } => {
                self.lft_digests.remove(switch_guid);
                self.lft_stamps.remove(switch_guid);
            }
            Op::ReplaceLftDigests(map) => {
                self.lft_digests = map.clone();
                self.lft_stamps.clear();
            }
            Op::SetLftStamp { switch_guid, stamp } => {
                self.lft_stamps.insert(*switch_guid, *stamp);
            }
            Op::SetMKey { m_key } => self.m_key = *m_key,
            Op::SetSaEntry { table, key, value } => {
                self.sa
                    .entry(*table)
                    .or_default()
                    .insert(key.clone(), value.clone());
            }
            Op::RemoveSaEntry { table, key } => {
                if let Some(t) = self.sa.get_mut(table) {
                    t.remove(key);
                    if t.is_empty() {
                        self.sa.remove(table);
                    }
                }
            }
            Op::SetPortDigest {
                node_guid,
                port,
                digest,
            } => {
                self.port_digests
                    .entry(*node_guid)
                    .or_default()
                    .insert(*port, *digest);
            }
            Op::ReplaceSaTable { table, entries } => {
                if entries.is_empty() {
                    self.sa.remove(table);
                } else {
                    self.sa.insert(*table, entries.clone());
                }
            }
        }
    }

    /// OpenSM's guid2lid file text (`0x<guid> <min_lid> <max_lid>` per line), the format
    /// `ibsm_fabric::lid::LidManager::import_guid2lid` reads.
    pub fn guid2lid_file(&self) -> String {
        let mut s = String::with_capacity(self.guid2lid.len() * 32);
        for (g, r) in &self.guid2lid {
            s.push_str(&format!("0x{g:016x} {} {}\n", r.min_lid, r.max_lid));
        }
        s
    }
}
