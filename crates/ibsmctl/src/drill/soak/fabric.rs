//! What the soak reads back after each cycle: the LIDs and LFTs on the fabric
//! (`Demo/ReadFabric`: ibnetdiscover and ibroute) next to what the master's routing
//! wants (`Fabric/GetRoute`), read again until they settle; the comparison of two
//! such snapshots; and every member's replicated guid2lid against the master's.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use ibsm_proto::demo::v1 as dpb;
use ibsm_proto::v1 as pb;

use crate::args::fmt_guid;
use crate::control::unary;
use crate::drill::options::DrillError;
use crate::drill::session::Drill;
use crate::drill::timeline::now_ms;

/// How long the switches may take to hold what routing wants after a cycle.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(20);

/// Between two fabric reads while they settle.
const SETTLE_STEP: Duration = Duration::from_millis(500);

/// How long `Demo/ReadFabric` may take (one ibnetdiscover, one ibroute per switch).
const READ_FABRIC_TIMEOUT: Duration = Duration::from_secs(120);

/// What the fabric holds and what the master's routing wants, after a cycle.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FabricSnap {
    /// Port GUID -> LID on the wire (`ibnetdiscover -p`).
    pub lids: BTreeMap<u64, u32>,
    pub names: BTreeMap<u64, String>,
    /// (switch GUID, LID) -> out port in the switch's LFT (`ibroute`).
    pub lft: BTreeMap<(u64, u32), u32>,
    /// (switch GUID, LID) -> out port the master's routing wants (`GetRoute`).
    pub intent: BTreeMap<(u64, u32), u32>,
    /// Port GUID -> LID in the master's `GetLids`.
    pub master_lids: BTreeMap<u64, u32>,
}

/// What one comparison of two snapshots found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FabricDiff {
    pub lid_changes: u64,
    pub lft_unasked: u64,
    pub lft_asked: u64,
    pub detail: Vec<String>,
}

/// Compare the snapshot after a cycle with the one before it (see the module doc).
pub fn diff_fabric(prev: &FabricSnap, now: &FabricSnap) -> FabricDiff {
    let mut d = FabricDiff::default();
    let name = |g: &u64| {
        now.names
            .get(g)
            .or_else(|| prev.names.get(g))
            .cloned()
            .unwrap_or_else(|| fmt_guid(*g))
    };
    for (g, lid) in &prev.lids {
        match now.lids.get(g) {
            Some(l) if l == lid => {}
            Some(l) => {
                d.lid_changes += 1;
                d.detail
                    .push(format!("fabric: {} LID {lid} -> {l}", name(g)));
            }
            None => {
                d.lid_changes += 1;
                d.detail.push(format!(
                    "fabric: {} (LID {lid}) gone from the wire",
                    name(g)
                ));
            }
        }
    }
    for (g, lid) in &now.lids {
        if let Some(m) = now.master_lids.get(g).filter(|m| *m != lid) {
            d.lid_changes += 1;
            d.detail.push(format!(
                "fabric: {} has LID {lid}, the master's GetLids says {m}",
                name(g)
            ));
        }
    }
    let keys: BTreeSet<&(u64, u32)> = prev
        .lft
        .keys()
        .chain(now.lft.keys())
        .chain(now.intent.keys())
        .collect();
    for k in keys {
        let (f0, f1) = (prev.lft.get(k), now.lft.get(k));
        let (i0, i1) = (prev.intent.get(k), now.intent.get(k));
        let changed = f0 != f1;
        let asked = changed && i0 != i1 && f1 == i1;
        let disagrees = f1 != i1;
        let show = |v: Option<&u32>| v.map_or("none".to_string(), u32::to_string);
        if asked {
            d.lft_asked += 1;
        } else if changed || disagrees {
            d.lft_unasked += 1;
            d.detail.push(format!(
                "LFT of {} for LID {}: port {} -> {} (routing wanted {} then {})",
                name(&k.0),
                k.1,
                show(f0),
                show(f1),
                show(i0),
                show(i1)
            ));
        }
    }
    d
}

impl Drill {
    /// The fabric as `Demo/ReadFabric` reads it and `master`'s routing for it.
    async fn fabric_snap(&mut self, master: &str) -> Result<FabricSnap, DrillError> {
        let mut t = self.target.clone();
        t.rpc_timeout = t.rpc_timeout.max(READ_FABRIC_TIMEOUT);
        let rf = unary(
            &t,
            "ReadFabric",
            self.demo_client()?.read_fabric(dpb::ReadFabricRequest {
                multicast: false,
                lids_only: false,
            }),
        )
        .await?;
        let mut s = FabricSnap::default();
        for l in &rf.lids {
            s.lids.insert(l.port_guid, l.lid);
            s.names.insert(l.port_guid, l.description.clone());
        }
        for sw in &rf.switches {
            for e in &sw.entries {
                s.lft.insert((sw.node_guid, e.lid), e.port);
            }
        }
        s.master_lids = self
            .lids(master)
            .await?
            .into_iter()
            .map(|(g, (lid, _))| (g, lid))
            .collect();
        let dsts: Vec<u32> = rf.lids.iter().map(|l| l.lid).collect();
        let m = self.member(master)?;
        let mt = m.target.clone();
        for sw in &rf.switches {
            for dst in &dsts {
                let r = unary(
                    &mt,
                    "GetRoute",
                    m.fabric.get_route(pb::GetRouteRequest {
                        src_lid: sw.lid,
                        dst_lid: *dst,
                    }),
                )
                .await;
                // No route (a dead end) is "no entry", like ibroute's unassigned ones.
                if let Some(h) = r
                    .ok()
                    .and_then(|r| r.hops.into_iter().next())
                    .filter(|h| h.node_guid == sw.node_guid)
                {
                    s.intent.insert((sw.node_guid, *dst), h.out_port);
                }
            }
        }
        Ok(s)
    }

    /// [`Drill::fabric_snap`] once the switches hold what the master's routing wants
    /// (a heavy sweep may still be programming them, and a LID-routed `ibroute` fails
    /// while the path to a switch is being reprogrammed): read again every
    /// [`SETTLE_STEP`] until they agree or [`SETTLE_TIMEOUT`] passes, then the last
    /// read (whatever still disagrees counts). The number of extra reads is returned.
    pub(super) async fn settled_snap(
        &mut self,
        master: &str,
    ) -> Result<(FabricSnap, u32), DrillError> {
        let deadline = now_ms() + u64::try_from(SETTLE_TIMEOUT.as_millis()).unwrap_or(20_000);
        let mut retries = 0;
        loop {
            let r = self.fabric_snap(master).await;
            let agrees = r.as_ref().is_ok_and(|s| s.lft == s.intent);
            if agrees || now_ms() > deadline {
                return r.map(|s| (s, retries));
            }
            retries += 1;
            self.poll().await?;
            tokio::time::sleep(SETTLE_STEP).await;
        }
    }

    /// Every member's `GetLids` equal to the master's; the mismatches.
    pub(super) async fn guid2lid_mismatches(
        &mut self,
        master: &str,
    ) -> Result<Vec<String>, DrillError> {
        let want = self.lids(master).await?;
        let names: Vec<String> = self.members.iter().map(|m| m.name.clone()).collect();
        let mut out = Vec::new();
        for n in names.iter().filter(|n| *n != master) {
            match self.lids(n).await {
                Ok(got) if got == want => {}
                Ok(got) => {
                    let differ = want.iter().filter(|(g, l)| got.get(g) != Some(l)).count()
                        + got.keys().filter(|g| !want.contains_key(g)).count();
                    out.push(format!(
                        "{n}'s guid2lid differs from the master's in {differ} ports"
                    ));
                }
                Err(e) => out.push(format!("{n}: GetLids: {e}")),
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(lft: &[((u64, u32), u32)], intent: &[((u64, u32), u32)]) -> FabricSnap {
        FabricSnap {
            lids: [(1, 1), (2, 2), (10, 10)].into(),
            master_lids: [(1, 1), (2, 2), (10, 10)].into(),
            lft: lft.iter().copied().collect(),
            intent: intent.iter().copied().collect(),
            ..FabricSnap::default()
        }
    }

    #[test]
    fn routing_that_asked_for_a_change_is_not_counted_but_drift_is() {
        let s = (10, 0);
        let base = snap(&[((10, 1), 3), ((10, 2), 5)], &[((10, 1), 3), ((10, 2), 5)]);
        // Nothing changed.
        assert_eq!(diff_fabric(&base, &base), FabricDiff::default());
        let _ = s;
        // Routing moved LID 2 to port 3 and the switch followed: asked.
        let rerouted = snap(&[((10, 1), 3), ((10, 2), 3)], &[((10, 1), 3), ((10, 2), 3)]);
        let d = diff_fabric(&base, &rerouted);
        assert_eq!((d.lft_asked, d.lft_unasked), (1, 0), "{d:?}");
        // The switch changed LID 1 although routing did not: unasked.
        let drift = snap(&[((10, 1), 5), ((10, 2), 5)], &[((10, 1), 3), ((10, 2), 5)]);
        let d = diff_fabric(&base, &drift);
        assert_eq!((d.lft_asked, d.lft_unasked), (0, 1), "{d:?}");
        assert!(d.detail[0].contains("LID 1"), "{d:?}");
        // Routing changed its mind but the switch holds something else: unasked.
        let wrong = snap(&[((10, 1), 3), ((10, 2), 7)], &[((10, 1), 3), ((10, 2), 3)]);
        assert_eq!(diff_fabric(&base, &wrong).lft_unasked, 1);
        // The switch lost an entry (unassigned) routing still wants: unasked.
        let lost = snap(&[((10, 1), 3)], &[((10, 1), 3), ((10, 2), 5)]);
        assert_eq!(diff_fabric(&base, &lost).lft_unasked, 1);
    }

    #[test]
    fn a_lid_change_on_the_wire_or_against_the_master_is_counted() {
        let base = snap(&[], &[]);
        let mut moved = base.clone();
        moved.lids.insert(2, 7);
        moved.master_lids.insert(2, 7);
        let d = diff_fabric(&base, &moved);
        assert_eq!(d.lid_changes, 1, "{d:?}");
        let mut gone = base.clone();
        gone.lids.remove(&1);
        assert_eq!(diff_fabric(&base, &gone).lid_changes, 1);
        let mut disagree = base.clone();
        disagree.master_lids.insert(10, 11);
        assert_eq!(diff_fabric(&base, &disagree).lid_changes, 1);
    }
}
