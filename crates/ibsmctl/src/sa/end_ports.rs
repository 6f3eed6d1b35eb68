//! The LIDs of every end port (each CA port and each switch's port 0), for the
//! all-to-all PathRecord table (`paths --all`) and the PathRecord bench: one
//! PathRecord GetTable per source LID, so the list must hold every LID of every end
//! port, each once, and nothing else.
//!
//! They come from the PortInfoRecord table: its EndportLID, and the LMC of the end
//! port (a switch's port 0, or the CA port), so that a port with LMC > 0 is a source
//! with each of its 2^LMC LIDs, as a PathRecord table without SLID holds every
//! (SLID, DLID) of every port pair. Only bytes that arrived count: under umad2sim a
//! record over the bytes it loses keeps whatever arrived in those fields, which is not
//! a LID. When records lost their LID that way (never on a kernel, where the table
//! arrives whole), the LIDs below the highest one known that no record named are
//! asked for one by one (a PortInfoRecord GetTable by EndportLID), and so are the
//! LIDs above it until one names no port: SMs give LIDs from 1 up, so a lost LID lies
//! in a gap or just past the end.

use std::collections::BTreeMap;
use std::ops::Range;

use ibsm_mad::sa::{ComponentMask, PortInfoRecord};
use ibsm_sa_client::Checked;

use super::common::{Client, SaFailure};

/// Record bytes of EndportLID.
const LID_BYTES: Range<usize> = 0..2;
/// Record bytes of PortNum.
const PORT_NUM_BYTES: Range<usize> = 2..3;
/// Record byte of PortInfo.LMC (PortInfo byte 34, after the 4-byte record header).
const LMC_BYTES: Range<usize> = 38..39;
/// Highest unicast LID.
const MAX_UNICAST_LID: u16 = 0xBFFF;

/// What a PortInfoRecord table says of the end ports.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct EndPorts {
    /// Base LID -> LMC of the end port.
    pub lmc: BTreeMap<u16, u8>,
    /// Some record arrived without its EndportLID: LIDs may be missing.
    pub lost: bool,
}

impl EndPorts {
    /// The end ports of `records` (see the module doc).
    pub fn of(records: &[Checked<PortInfoRecord>]) -> EndPorts {
        let mut out = EndPorts::default();
        // Per LID: the LMC of its port 0 (a switch) if that record arrived, else the
        // largest LMC of its other records (a CA port has one record per LID).
        let mut port0: BTreeMap<u16, u8> = BTreeMap::new();
        for ch in records {
            let r = &ch.record;
            if !ch.has(LID_BYTES) {
                out.lost = true;
                continue;
            }
            if r.endport_lid == 0 || r.endport_lid > MAX_UNICAST_LID {
                continue;
            }
            let lmc = if ch.has(LMC_BYTES) {
                r.port_info.lmc.min(7)
            } else {
                0
            };
            let e = out.lmc.entry(r.endport_lid).or_insert(0);
            *e = (*e).max(lmc);
            if ch.has(PORT_NUM_BYTES) && r.port_num == 0 && ch.has(LMC_BYTES) {
                port0.insert(r.endport_lid, lmc);
            }
        }
        out.lmc.extend(port0);
        out
    }

    /// Every LID of every end port, ascending.
    pub fn lids(&self) -> Vec<u16> {
        let mut v = Vec::new();
        for (&base, &lmc) in &self.lmc {
            let n = 1u32 << lmc;
            for i in 0..n {
                let lid = u32::from(base) + i;
                if lid <= u32::from(MAX_UNICAST_LID) {
                    v.push(lid as u16);
                }
            }
        }
        v.sort_unstable();
        v.dedup();
        v
    }

    /// LIDs up to the highest known base LID that no end port's range covers.
    pub fn gaps(&self) -> Vec<u16> {
        let known = self.lids();
        let Some(&max) = known.last() else {
            return Vec::new();
        };
        (1..max)
            .filter(|l| known.binary_search(l).is_err())
            .collect()
    }
}

/// The end ports of one PortInfoRecord GetTable by EndportLID (`lid`): what a
/// probe learns.
fn probe(c: &mut Client, lid: u16) -> Result<EndPorts, SaFailure> {
    let t = PortInfoRecord {
        endport_lid: lid,
        ..PortInfoRecord::default()
    };
    let got = c.get_table_checked(&t, PortInfoRecord::ENDPORT_LID)?;
    Ok(EndPorts::of(&got))
}

/// Every LID of every end port (the module doc says how).
pub fn end_port_lids(c: &mut Client) -> Result<Vec<u16>, SaFailure> {
    let table = c.get_table_checked(&PortInfoRecord::default(), ComponentMask::NONE)?;
    let mut ports = EndPorts::of(&table);
    if ports.lost {
        let gaps = ports.gaps();
        tracing::debug!(
            gaps = gaps.len(),
            "PortInfoRecords arrived without their LID: asking for the LIDs no record named"
        );
        for lid in gaps {
            let found = probe(c, lid)?;
            ports.lmc.extend(found.lmc);
        }
        // Past the highest LID known, until a LID names no port.
        let mut next = ports.lids().last().map_or(1, |l| l.saturating_add(1));
        while next <= MAX_UNICAST_LID {
            let found = probe(c, next)?;
            if found.lmc.is_empty() {
                break;
            }
            ports.lmc.extend(found.lmc);
            next = ports.lids().last().map_or(next, |l| l.saturating_add(1));
        }
    }
    Ok(ports.lids())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(lid: u16, port: u8, lmc: u8, lost: Option<Range<usize>>) -> Checked<PortInfoRecord> {
        let mut r = PortInfoRecord {
            endport_lid: lid,
            port_num: port,
            ..PortInfoRecord::default()
        };
        r.port_info.lmc = lmc;
        Checked {
            record: r,
            lost: lost.into_iter().collect(),
        }
    }

    #[test]
    fn only_lids_that_arrived_count() {
        let t = vec![
            rec(1, 0, 0, None),
            rec(1, 1, 0, None),
            // Its LID bytes were lost: whatever is there is no LID.
            rec(9472, 0, 0, Some(0..24)),
            rec(3, 1, 0, None),
            rec(5, 1, 0, Some(40..64)),
        ];
        let e = EndPorts::of(&t);
        assert!(e.lost);
        assert_eq!(e.lids(), vec![1, 3, 5]);
        assert_eq!(e.gaps(), vec![2, 4]);
    }

    #[test]
    fn a_port_with_lmc_is_every_lid_of_its_range() {
        let t = vec![
            // A switch: port 0 has LMC 0, an external port says 2 (meaningless).
            rec(1, 0, 0, None),
            rec(1, 3, 2, None),
            // A CA port with LMC 2: LIDs 4..=7.
            rec(4, 1, 2, None),
            rec(8, 1, 0, None),
        ];
        let e = EndPorts::of(&t);
        assert!(!e.lost);
        assert_eq!(e.lids(), vec![1, 4, 5, 6, 7, 8]);
        assert_eq!(e.gaps(), vec![2, 3]);
    }

    #[test]
    fn nothing_known_is_nothing_to_ask() {
        let e = EndPorts::of(&[rec(7, 1, 0, Some(0..2))]);
        assert!(e.lost);
        assert!(e.lids().is_empty() && e.gaps().is_empty());
    }
}
