//! What a path walk reads: the programmed LinearForwardingTables ([`Lfts`], over
//! the routing result or over tables kept by switch NodeGUID as ibsm-core's subnet
//! manager keeps them) and who owns each unicast LID ([`LidIndex`]). Leaf types of
//! the path module.

use crate::routing::ForwardingTables;
use crate::topology::{Node, NodeIdx, Topology};

/// The highest unicast LID.
pub const MAX_UNICAST_LID: u16 = 0xBFFF;

/// Programmed LinearForwardingTables, by switch.
pub trait Lfts {
    /// The LFT of `switch`: entry `lid` is the egress port for that LID (0 =
    /// the switch's own port 0, 0xFF = no route); entries past the end
    /// (LinearFDBTop) are no route. `None` when the switch has no table.
    fn lft(&self, switch: NodeIdx) -> Option<&[u8]>;
}

impl Lfts for ForwardingTables {
    fn lft(&self, switch: NodeIdx) -> Option<&[u8]> {
        ForwardingTables::lft(self, switch)
    }
}

impl<T: Lfts + ?Sized> Lfts for &T {
    fn lft(&self, switch: NodeIdx) -> Option<&[u8]> {
        (**self).lft(switch)
    }
}

/// [`Lfts`] over tables looked up by switch NodeGUID, e.g.
/// `LftsByGuid::new(topo, |g| subnet.programmed_lft(g))` for what ibsm-core's
/// subnet manager has programmed.
pub struct LftsByGuid<'a, F> {
    topo: &'a Topology,
    lookup: F,
}

impl<'a, F> LftsByGuid<'a, F>
where
    F: Fn(u64) -> Option<&'a [u8]>,
{
    /// Tables of the switches of `topo`, found by NodeGUID through `lookup`.
    pub fn new(topo: &'a Topology, lookup: F) -> LftsByGuid<'a, F> {
        LftsByGuid { topo, lookup }
    }
}

impl<'a, F> Lfts for LftsByGuid<'a, F>
where
    F: Fn(u64) -> Option<&'a [u8]>,
{
    fn lft(&self, switch: NodeIdx) -> Option<&[u8]> {
        let node = self.topo.node(switch)?;
        if !node.is_switch() {
            return None;
        }
        (self.lookup)(node.node_guid)
    }
}

/// True when `port` of `node` carries `lid` (its base LID .. + 2^LMC; on a
/// switch only port 0 carries a LID).
pub fn owns(node: &Node, port: u8, lid: u16) -> bool {
    if node.is_switch() && port != 0 {
        return false;
    }
    node.port(port).is_some_and(|p| {
        p.lid != 0 && lid >= p.lid && u32::from(lid) < u32::from(p.lid) + (1u32 << p.lmc.min(7))
    })
}

/// Who owns each unicast LID: the end port (CA/router port, switch port 0)
/// whose LID block holds it. Where blocks overlap (the LID manager never
/// leaves them so) the lowest NodeIdx keeps the LID.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LidIndex {
    owner: Vec<Option<(NodeIdx, u8)>>,
}

impl LidIndex {
    /// Index the LIDs of `topo`.
    pub fn new(topo: &Topology) -> LidIndex {
        let mut owner: Vec<Option<(NodeIdx, u8)>> = Vec::new();
        for (idx, node) in topo.iter() {
            for (pn, p) in node.ports.iter().enumerate() {
                let Ok(pn) = u8::try_from(pn) else { break };
                if p.lid == 0 || (node.is_switch() != (pn == 0)) {
                    continue;
                }
                let end =
                    (u32::from(p.lid) + (1u32 << p.lmc.min(7)) - 1).min(u32::from(MAX_UNICAST_LID));
                for lid in u32::from(p.lid)..=end {
                    let l = lid as usize;
                    if owner.len() <= l {
                        owner.resize(l + 1, None);
                    }
                    if let Some(slot) = owner.get_mut(l) {
                        if slot.is_none() {
                            *slot = Some((idx, pn));
                        }
                    }
                }
            }
        }
        LidIndex { owner }
    }

    /// The end port that owns `lid`.
    pub fn owner(&self, lid: u16) -> Option<(NodeIdx, u8)> {
        self.owner.get(usize::from(lid)).copied().flatten()
    }

    /// Every owned LID, in increasing order.
    pub fn lids(&self) -> impl Iterator<Item = u16> + '_ {
        self.owner
            .iter()
            .enumerate()
            .filter(|(_, o)| o.is_some())
            .filter_map(|(l, _)| u16::try_from(l).ok())
    }
}
