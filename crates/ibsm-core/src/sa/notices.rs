//! The notices the SA reports, in their SA form ([`SaNotice`]: the SMP Notice plus
//! IssuerGID): traps the master received or produced, and traps 66/67 for multicast
//! groups the SA created or deleted (IBA 13.4.8.2; the SM is their issuer).

use ibsm_mad::attr::{Notice, NoticeType, ProducerType, TrapDetails};
use ibsm_mad::sa::{Gid, SaNotice};

use super::fabric::SaFabric;

/// `n` with its IssuerGID: the GID of the port answering to its IssuerLID, zero when
/// the snapshot does not know it (a subscriber by GID then does not match it).
pub fn sa_notice(fabric: Option<&SaFabric>, n: &Notice) -> SaNotice {
    let issuer_gid = fabric
        .and_then(|f| {
            f.end_port_by_lid(n.issuer_lid)
                .map(|p| f.gid_of(p.port_guid))
        })
        .unwrap_or([0; 16]);
    SaNotice {
        notice: *n,
        issuer_gid,
    }
}

/// Trap 66 (a group was created) or 67 (deleted) for `mgid`, issued by the SM.
pub fn group_notice(fabric: Option<&SaFabric>, created: bool, mgid: Gid) -> Notice {
    let details = if created {
        TrapDetails::McGroupCreated { gid: mgid }
    } else {
        TrapDetails::McGroupDeleted { gid: mgid }
    };
    Notice::generic(
        NoticeType::Informational,
        ProducerType::CLASS_MANAGER,
        fabric.map_or(0, |f| f.sm_lid),
        &details,
    )
}
