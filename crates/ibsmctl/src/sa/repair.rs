//! Whole tables under ibsim's umad2sim, which delivers only the first 232 bytes of
//! each MAD (`ibsm_sa_client::ClientConfig::mad_bytes`): a record of a GetTableResp
//! that lay over the lost bytes is asked for again with a SubnAdmGet by its key
//! (its own LID, port, block...), when the key's bytes arrived. A single record is at
//! most 176 bytes, so its GetResp arrives whole. A record whose key was lost is
//! looked for in the smaller tables of its neighbours' groups (a GetTable by their
//! LID, or SLID for paths: a new layout, so other bytes are lost): the records found
//! there whole and missing from the table fill the damaged places, in order. What is
//! still missing stays as it came and is reported as damaged.

use std::fmt::Debug;
use std::ops::Range;

use ibsm_mad::sa::{
    ComponentMask, GuidInfoRecord, InformInfoRecord, LinearForwardingTableRecord, LinkRecord,
    McMemberRecord, MulticastForwardingTableRecord, NodeRecord, PKeyTableRecord, PathRecord,
    PortInfoRecord, SaRecord, ServiceRecord, SlToVlMappingTableRecord, SmInfoRecord,
    SwitchInfoRecord, VlArbitrationTableRecord,
};
use ibsm_sa_client::Checked;

use super::common::{Client, SaFailure};

/// A record type with a key: the bytes that hold it and its components.
pub trait Keyed: SaRecord + Debug + Copy + PartialEq {
    /// Key bytes (record-relative) and the ComponentMask that selects one record.
    const KEY: (Range<usize>, ComponentMask);
    /// The group a record belongs to (its first LID, for paths its SLID).
    const GROUP: (Range<usize>, ComponentMask);
}

macro_rules! keyed {
    ($($ty:ty => $range:expr, $mask:expr;)*) => {
        $(impl Keyed for $ty {
            const KEY: (Range<usize>, ComponentMask) = ($range, $mask);
            const GROUP: (Range<usize>, ComponentMask) = group_of_first_component($range, $mask);
        })*
    };
}

/// Most records start with a LID, their first component; their group is that LID.
const fn group_of_first_component(
    key: Range<usize>,
    mask: ComponentMask,
) -> (Range<usize>, ComponentMask) {
    if mask.0 == ComponentMask(PathRecord::SLID.0 | PathRecord::DLID.0).0 {
        return (42..44, PathRecord::SLID);
    }
    let first = mask.0 & mask.0.wrapping_neg();
    let end = if key.end < key.start + 2 {
        key.end
    } else {
        key.start + 2
    };
    (key.start..end, ComponentMask(first))
}

keyed! {
    NodeRecord => 0..2, NodeRecord::LID;
    PortInfoRecord => 0..3, ComponentMask(PortInfoRecord::ENDPORT_LID.0 | PortInfoRecord::PORT_NUM.0);
    LinkRecord => 0..3, ComponentMask(LinkRecord::FROM_LID.0 | LinkRecord::FROM_PORT.0);
    SmInfoRecord => 0..2, SmInfoRecord::LID;
    SwitchInfoRecord => 0..2, SwitchInfoRecord::LID;
    GuidInfoRecord => 0..3, ComponentMask(GuidInfoRecord::LID.0 | GuidInfoRecord::BLOCK_NUM.0);
    PKeyTableRecord => 0..5, ComponentMask(PKeyTableRecord::LID.0 | PKeyTableRecord::BLOCK_NUM.0 | PKeyTableRecord::PORT_NUM.0);
    SlToVlMappingTableRecord => 0..4, ComponentMask(SlToVlMappingTableRecord::LID.0 | SlToVlMappingTableRecord::INPUT_PORT_NUM.0 | SlToVlMappingTableRecord::OUTPUT_PORT_NUM.0);
    VlArbitrationTableRecord => 0..4, ComponentMask(VlArbitrationTableRecord::LID.0 | VlArbitrationTableRecord::OUTPUT_PORT_NUM.0 | VlArbitrationTableRecord::BLOCK_NUM.0);
    LinearForwardingTableRecord => 0..4, ComponentMask(LinearForwardingTableRecord::LID.0 | LinearForwardingTableRecord::BLOCK_NUM.0);
    MulticastForwardingTableRecord => 0..4, ComponentMask(MulticastForwardingTableRecord::LID.0 | MulticastForwardingTableRecord::POSITION.0 | MulticastForwardingTableRecord::BLOCK_NUM.0);
    PathRecord => 40..44, ComponentMask(PathRecord::SLID.0 | PathRecord::DLID.0);
    McMemberRecord => 0..32, ComponentMask(McMemberRecord::MGID.0 | McMemberRecord::PORT_GID.0);
    ServiceRecord => 0..26, ComponentMask(ServiceRecord::SERVICE_ID.0 | ServiceRecord::SERVICE_GID.0 | ServiceRecord::SERVICE_P_KEY.0);
    InformInfoRecord => 0..18, ComponentMask(InformInfoRecord::SUBSCRIBER_GID.0 | InformInfoRecord::ENUM.0);
}

/// Records, and the indices of those still damaged after the repair.
pub struct Repaired<R> {
    pub records: Vec<R>,
    pub damaged: Vec<usize>,
    pub repaired: usize,
}

/// Ask again for each damaged record whose key arrived; then look for the others in
/// their neighbours' groups.
pub fn repair<R: Keyed>(c: &mut Client, got: Vec<Checked<R>>) -> Result<Repaired<R>, SaFailure> {
    repair_with(c, got, true)
}

/// [`repair`], the group search only if `fill_groups`: a table built of one GetTable
/// per group (`paths --all`, by SLID) would ask the same questions again, get the
/// same layout and lose the same bytes.
pub fn repair_with<R: Keyed>(
    c: &mut Client,
    got: Vec<Checked<R>>,
    fill_groups: bool,
) -> Result<Repaired<R>, SaFailure> {
    let (range, mask) = R::KEY;
    let mut out = Repaired {
        records: Vec::with_capacity(got.len()),
        damaged: Vec::new(),
        repaired: 0,
    };
    for (i, ch) in got.into_iter().enumerate() {
        if ch.is_intact() {
            out.records.push(ch.record);
        } else if ch.has(range.clone()) {
            out.records.push(c.get(&ch.record, mask)?);
            out.repaired += 1;
        } else {
            out.damaged.push(i);
            out.records.push(ch.record);
        }
    }
    if fill_groups && !out.damaged.is_empty() {
        fill_from_groups(c, &mut out)?;
    }
    Ok(out)
}

/// Damaged records whose key was lost: the neighbours' groups, asked for alone.
fn fill_from_groups<R: Keyed>(c: &mut Client, out: &mut Repaired<R>) -> Result<(), SaFailure> {
    let (_, group_mask) = R::GROUP;
    let damaged: std::collections::BTreeSet<usize> = out.damaged.iter().copied().collect();
    let mut templates: Vec<R> = Vec::new();
    for &i in &out.damaged {
        let before = (0..i).rev().find(|j| !damaged.contains(j));
        let after = (i + 1..out.records.len()).find(|j| !damaged.contains(j));
        for j in before.into_iter().chain(after) {
            let t = out.records[j];
            if !templates.iter().any(|x| same_group(x, &t)) {
                templates.push(t);
            }
        }
    }
    let mut candidates: Vec<R> = Vec::new();
    for t in &templates {
        for ch in c.get_table_checked(t, group_mask)? {
            let known = out
                .records
                .iter()
                .enumerate()
                .any(|(j, r)| !damaged.contains(&j) && *r == ch.record);
            if ch.is_intact() && !known && !candidates.contains(&ch.record) {
                candidates.push(ch.record);
            }
        }
    }
    let mut still = Vec::new();
    let mut cand = candidates.into_iter();
    for &i in &out.damaged {
        match cand.next() {
            Some(r) => {
                out.records[i] = r;
                out.repaired += 1;
            }
            None => still.push(i),
        }
    }
    out.damaged = still;
    Ok(())
}

/// Same group bytes (the first LID, or a path's SLID).
fn same_group<R: Keyed>(a: &R, b: &R) -> bool {
    let (range, _) = R::GROUP;
    let mut x = [0u8; 256];
    let mut y = [0u8; 256];
    let ok = a.encode_into(&mut x).is_ok() && b.encode_into(&mut y).is_ok();
    ok && x.get(range.clone()) == y.get(range)
}
