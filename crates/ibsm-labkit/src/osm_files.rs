//! OpenSM's `guid2lid` cache file: [`format_guid2lid`] writes one for fixed LIDs,
//! [`parse_guid2lid`] reads the one OpenSM rewrites after its sweep. Pure.
//!
//! The format is OpenSM's persistent-db format (`osm_db_files.c`), not one entry per
//! line: a line starting in column 0 opens an entry (key, then the start of its value),
//! the following lines are *continuations of the value* until an empty line closes
//! the entry. So every `0x<port guid> 0x<min lid> 0x<max lid>` line must be followed
//! by an empty line, as OpenSM writes it. Without the empty lines OpenSM reads the
//! whole file as a single entry for the first GUID (its debug log says `Key:0x...
//! previously exists ... with value:0x0010 0x00100x0000000000200001 0x0011 0x0011`)
//! and assigns fresh LIDs to every other port (checked: only Switch1 kept its LID).
//!
//! OpenSM reads the file at start whenever `reassign_lids` is FALSE (the default);
//! `honor_guid2lid_file TRUE` makes it also re-read the file when it comes out of
//! STANDBY to become master.

use crate::error::{LabError, Result};
/// One entry of a guid2lid file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Guid2LidEntry {
    pub port_guid: u64,
    pub min_lid: u16,
    pub max_lid: u16,
}

/// A guid2lid file assigning `lid` to each port GUID (LMC 0: min = max), every entry
/// followed by the empty line OpenSM's parser needs, in the order given.
pub fn format_guid2lid(entries: &[(u64, u16)]) -> String {
    entries
        .iter()
        .map(|(g, l)| format!("0x{g:016x} 0x{l:04x} 0x{l:04x}\n\n"))
        .collect()
}

fn number(text: &str) -> Option<u64> {
    match text.strip_prefix("0x").or_else(|| text.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => text.parse().ok(),
    }
}

/// Read a guid2lid file as OpenSM writes it (entries separated by empty lines; an
/// entry of more than one line is an error, since OpenSM would misread it).
pub fn parse_guid2lid(text: &str) -> Result<Vec<Guid2LidEntry>> {
    let err = |line: usize, message: String| LabError::Parse {
        what: "guid2lid".into(),
        line,
        message,
    };
    let mut out = Vec::new();
    let mut in_entry = false;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if line.trim().is_empty() {
            in_entry = false;
            continue;
        }
        if in_entry {
            return Err(err(
                n,
                "a second line in one entry (entries must be separated by an empty line)".into(),
            ));
        }
        in_entry = true;
        let words: Vec<&str> = line.split_whitespace().collect();
        let [g, lo, hi] = words.as_slice() else {
            return Err(err(n, format!("expected `GUID MIN MAX`, got {line:?}")));
        };
        let bad = |w: &str| err(n, format!("bad number {w:?}"));
        let port_guid = number(g).ok_or_else(|| bad(g))?;
        let min_lid = number(lo)
            .and_then(|v| u16::try_from(v).ok())
            .ok_or_else(|| bad(lo))?;
        let max_lid = number(hi)
            .and_then(|v| u16::try_from(v).ok())
            .ok_or_else(|| bad(hi))?;
        out.push(Guid2LidEntry {
            port_guid,
            min_lid,
            max_lid,
        });
    }
    Ok(out)
}
