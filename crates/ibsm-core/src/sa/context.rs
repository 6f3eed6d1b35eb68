//! [`SaContext`]: what one request is answered against: the fabric snapshot, the SMs
//! the master knows, whether this SM is the master, and who asks ([`Requester`]).

use ibsm_fabric::multicast::MftSet;
use ibsm_mad::attr::PKey;
use ibsm_mad::sa::SmInfoRecord;
use ibsm_mad::MadAddress;

use super::fabric::{EndPort, SaFabric};

/// What the SA answers against (built by the node for each request; cheap: borrows).
#[derive(Debug, Clone, Copy)]
pub struct SaContext<'a> {
    /// The fabric as the last heavy sweep left it; `None` before the first one (the SA
    /// then answers fabric queries with no records, and joins with ERR_NO_RESOURCES
    /// until it knows the ports).
    pub fabric: Option<&'a SaFabric>,
    /// SMInfo of every SM port the master knows (itself included), with its LID.
    pub sms: &'a [SmInfoRecord],
    /// This SM is MASTER: only the master's SA answers (IBA 15.1).
    pub is_master: bool,
    /// The master's LID as this SM knows it (where a standby redirects requesters).
    pub master_lid: u16,
    /// The MulticastForwardingTables the master wants the switches to hold
    /// (`SubnetManager::desired_mfts`), what MulticastForwardingTableRecords are
    /// answered from; `None`: no records.
    ///
    /// Why borrowed here and not part of the [`SaFabric`] snapshot: the MFTs change
    /// with every join and leave, between heavy sweeps. A snapshot is immutable behind
    /// an `Arc` (a GetTable reads one consistent view, the path table is built once),
    /// so refreshing it per join would mean copying the whole topology each time; a
    /// borrow of the configurator's current set costs nothing and is never stale. It
    /// is the set the master is writing (the writes go out within the same pump), as
    /// OpenSM answers from its in-memory tables before they reach the switches.
    pub mfts: Option<&'a MftSet>,
}

/// Who sent a request: its address, and its end port when the SA knows it.
#[derive(Debug, Clone, Copy)]
pub struct Requester {
    /// The request's source.
    pub from: MadAddress,
    /// The end port answering to `from.lid`.
    pub port: Option<EndPort>,
    /// The request carried the SA_Key.
    pub trusted: bool,
}

/// True if ports with P_Key tables `a` and `b` can talk: some partition (the low 15
/// bits) is in both, with at least one of them a full member (IBA 10.9.3).
pub fn share_pkey(a: &[PKey], b: &[PKey]) -> bool {
    shared_pkey(a, b).is_some()
}

/// The first P_Key two tables share, as [`share_pkey`] defines it; the full member's
/// form is returned (membership bit set) when either side is full.
pub fn shared_pkey(a: &[PKey], b: &[PKey]) -> Option<u16> {
    for ka in a {
        let base = ka.0 & 0x7FFF;
        if base == 0 {
            continue;
        }
        for kb in b {
            if kb.0 & 0x7FFF == base && (ka.0 | kb.0) & 0x8000 != 0 {
                return Some(base | 0x8000);
            }
        }
    }
    None
}

impl SaContext<'_> {
    /// The requester of a request from `from`.
    pub fn requester(&self, from: MadAddress, trusted: bool) -> Requester {
        Requester {
            from,
            port: self.fabric.and_then(|f| f.end_port_by_lid(from.lid)),
            trusted,
        }
    }

    /// True if `port_guid` may be shown to `req`: a trusted requester sees every port;
    /// another one only the ports it shares a partition with (what OpenSM does for
    /// every record query).
    pub fn visible(&self, req: &Requester, port_guid: u64) -> bool {
        if req.trusted {
            return true;
        }
        let (Some(f), Some(rp)) = (self.fabric, req.port) else {
            // A requester the snapshot does not know yet (it just came up): answer
            // as for the default partition, which every port is in.
            return true;
        };
        share_pkey(f.pkeys_of(rp.port_guid), f.pkeys_of(port_guid))
    }
}
