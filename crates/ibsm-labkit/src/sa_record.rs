//! saquery's text output as data: [`SaRecord`] (one record, its fields as printed),
//! [`parse_saquery`] (stdout to records), and [`SaTable`] (the records of one query,
//! split into those umad2sim delivered and those it did not). Pure functions of a
//! string, unit-tested on the fixtures OpenSM produced (`tests/fixtures/saquery/`).
//!
//! # What a saquery under umad2sim can see (measured, ibsim-utils 0.10, OpenSM 3.3.23)
//!
//! Every saquery query except `-c` is a SubnAdmGetTable. The SA answers a table with one
//! RMPP transfer; on a real kernel the umad layer reassembles the segments, under
//! umad2sim nobody does: the reader gets the first MAD of the transfer only. And of
//! each MAD it receives only the first [`UMAD2SIM_MAD_BYTES`] (224) bytes are the
//! sender's: bytes 224-231 arrive as zeros and 232-255 are heap bytes of the reader
//! (umad2sim queues each MAD in a 288-byte buffer and copies more than that out;
//! `saquery -d -d` shows the same malloc chunk header `2500 0000 0000 0000` at MAD byte
//! 232 in a PathRecord table, a LinkRecord table and a ClassPortInfo answer; fixtures
//! `pr_all_debug.txt`, `star_lr_all_debug.txt`). The receive path is the same for every
//! umad2sim reader, so an SA under umad2sim should expect the same of its requests.
//! saquery counts records as `(length - 56) / (AttributeOffset * 8)` with `length`
//! at most 256, and prints them all. So, with `S` the record size:
//!
//! - the first `floor(168 / S)` records are real ([`SaTable::records`]);
//! - saquery prints up to `floor(200 / S)`; those past byte 224 are garbage
//!   ([`SaTable::undelivered`]; e.g. `LR` on a 24-HCA star prints 25 records, the last
//!   four are nonsense like `FromLID 9472`);
//! - when fewer than `floor(200 / S)` were printed the whole table fitted one MAD and
//!   the SA had exactly that many records ([`SaTable::total`] is `Some`); otherwise
//!   more may exist and nothing says how many (`None`).
//!
//! Record sizes ([`record_size`]): NodeRecord 112 (1 real record at most), PortInfoRecord
//! and the table records (LFT, MFT, P_Key, VLArb, GUIDInfo) 72 (2), MCMemberRecord 56
//! (3), PathRecord and InformInfoRecord 64 (2), SMInfoRecord 32 (5), SwitchInfoRecord 24
//! (7), SL2VLTableRecord 16 (10), LinkRecord 8 (21), ServiceRecord 176 (none: its last
//! field, `ServiceData64.2`, lies at MAD bytes 224-231, see [`SR_UNDELIVERED_FIELDS`]).
//! Queries that select one record (`NR 16`, `PIR 33/1`, `LR 33/1`, `SWIR 16`, `SMIR 34`,
//! `--src-to-dst 33:36 -p`) are therefore complete; whole tables are complete only on
//! small fabrics (`LR` of net.2sw2path4hca: 12 of 12, `-g` with the broadcast group
//! alone: 1 of 1) and `NR`, `PIR`, `-p` are never complete beyond one or two records.
//! saquery resolves node *names* (`--src-to-dst Hca1:Hca4`) from an `NR` table, so names
//! other than the first NodeRecord's fail ("Failed to find lid"); `-m` takes its
//! `NodeDescription` from the same table (`<unknown>` for the others).
//!
//! # How records are read
//!
//! A line that starts without whitespace opens a record (its text without the trailing
//! ':' is [`SaRecord::kind`]: `NodeRecord dump`, `SA ClassPortInfo`, `MCMemberRecord
//! group dump`, ...). An indented line `name....value` (a run of two or more dots, or
//! PortInfo's `Name:` followed by dots) is a field; the name loses its trailing ':' so
//! PortInfo's `Lid:` is `Lid`. Deeper-indented lines without dots (PortInfo's capability
//! flags under `CapMask`) are continuation lines, joined to the previous value with
//! '\n'. Sub-headers (`RID`, `PortInfo dump:`, `SMInfo dump:`, `LFT:`) are skipped.
//! Table rows of the block records become fields named by what precedes their first ':'
//! (`SL: 0| 1|` is `SL`) or tab (an LFT's `0\t255` is `0`), or named "" (a P_Key row
//! `0xffff 0x0000 ...`). Records without fields (`-s`'s `IsSM ports` title) are dropped.
//! Lines before the first header (`saquery -m 0xC000` prints bare `PortGid` lines)
//! form a record of kind "".

/// How many bytes of each MAD umad2sim delivers to a saquery (or OpenSM): the rest of
/// the 256 are not the sender's.
pub const UMAD2SIM_MAD_BYTES: usize = 224;
/// MAD header (24) + RMPP header (12) + SA header (20): where SA records start.
pub const SA_DATA_OFFSET: usize = 56;
/// SA record bytes in one 256-byte MAD.
pub const SA_DATA_PER_MAD: usize = 256 - SA_DATA_OFFSET;
/// SA record bytes of one MAD that a saquery under umad2sim really receives.
pub const SA_DATA_DELIVERED: usize = UMAD2SIM_MAD_BYTES - SA_DATA_OFFSET;
/// The ServiceRecord fields that lie past [`UMAD2SIM_MAD_BYTES`]: a ServiceRecord
/// printed through umad2sim is real except for these.
pub const SR_UNDELIVERED_FIELDS: &[&str] = &["ServiceData64.2"];

/// One record as saquery printed it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SaRecord {
    /// The header line without its trailing ':' (`NodeRecord dump`); "" for field lines
    /// printed before any header.
    pub kind: String,
    /// `(name, value)` in print order, both trimmed; see the module doc.
    pub fields: Vec<(String, String)>,
    /// 1-based line of the record's first line in saquery's output.
    pub line: usize,
}

impl SaRecord {
    /// The value of the first field called `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of fields called `name`, in order.
    pub fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.fields
            .iter()
            .filter(move |(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The first field called `name` as a number: decimal, or hex with `0x`. Only the
    /// first word counts (`0x50c048\nIsSM...` is 0x50c048).
    pub fn number(&self, name: &str) -> Option<u64> {
        parse_number(self.get(name)?)
    }
}

/// `16`, `0x10`, `0X10`, `0x0000000000100004` (first word only) as a number.
pub fn parse_number(text: &str) -> Option<u64> {
    let word = text.split_whitespace().next()?;
    match word.strip_prefix("0x").or_else(|| word.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => word.parse().ok(),
    }
}

/// Split `name....value` / `Name:...value` into `(name, value)`; `None` for lines
/// without a dot leader.
fn split_field(text: &str) -> Option<(&str, &str)> {
    let bytes = text.as_bytes();
    let dots_at = |i: usize| {
        bytes
            .get(i..)
            .map_or(0, |r| r.iter().take_while(|&&c| c == b'.').count())
    };
    for (i, &b) in bytes.iter().enumerate().skip(1) {
        let (skip, dots) = match b {
            b'.' => (0, dots_at(i)),
            b':' if dots_at(i + 1) >= 1 => (1, dots_at(i + 1)),
            _ => continue,
        };
        if b == b'.' && dots < 2 {
            continue;
        }
        let name = text.get(..i)?.trim();
        let value = text.get(i + skip + dots..)?.trim();
        return Some((name, value));
    }
    None
}

fn is_sub_header(text: &str) -> bool {
    text == "RID" || text.ends_with(':')
}

/// Parse saquery's stdout into records (see the module doc for the rules). Never fails:
/// an indented line it cannot place becomes a field (named "" if nothing names it).
pub fn parse_saquery(text: &str) -> Vec<SaRecord> {
    let mut out: Vec<SaRecord> = Vec::new();
    let mut current: Option<SaRecord> = None;
    for (i, raw) in text.lines().enumerate() {
        let line_no = i + 1;
        let line = raw.trim_end();
        if line.trim().is_empty() {
            continue;
        }
        if !line.starts_with([' ', '\t']) {
            if let Some(r) = current.take() {
                out.push(r);
            }
            current = Some(SaRecord {
                kind: line.trim_end_matches(':').trim().to_string(),
                fields: Vec::new(),
                line: line_no,
            });
            continue;
        }
        let tabs = line.chars().take_while(|c| *c == '\t').count();
        let text = line.trim();
        let rec = current.get_or_insert_with(|| SaRecord {
            kind: String::new(),
            fields: Vec::new(),
            line: line_no,
        });
        if let Some((name, value)) = split_field(text) {
            rec.fields
                .push((name.trim_end_matches(':').to_string(), value.to_string()));
        } else if tabs >= 3 && !rec.fields.is_empty() {
            if let Some((_, v)) = rec.fields.last_mut() {
                v.push('\n');
                v.push_str(text);
            }
        } else if is_sub_header(text) {
            continue;
        } else {
            let (name, value) = text
                .split_once(':')
                .or_else(|| text.split_once('\t'))
                .unwrap_or(("", text));
            rec.fields
                .push((name.trim().to_string(), value.trim().to_string()));
        }
    }
    if let Some(r) = current {
        out.push(r);
    }
    out.retain(|r| !r.fields.is_empty());
    out
}

/// Bytes one record of this kind takes in an SA answer (AttributeOffset * 8), measured
/// with `saquery -d -d` against OpenSM; `None` for kinds this crate does not know.
pub fn record_size(kind: &str) -> Option<usize> {
    Some(match kind {
        "NodeRecord dump" => 112,
        "PortInfoRecord dump"
        | "LFT Record dump"
        | "MFT Record dump"
        | "GUIDInfo Record dump"
        | "PKeyTableRecord dump"
        | "VLArbTableRecord dump"
        | "SA ClassPortInfo" => 72,
        "MCMemberRecord group dump" | "MCMemberRecord member dump" | "MCMember Record dump" => 56,
        "PathRecord dump" | "InformInfoRecord dump" => 64,
        "SMInfoRecord dump" => 32,
        "SwitchInfoRecord dump" => 24,
        "SL2VLTableRecord dump" => 16,
        "LinkRecord dump" => 8,
        "ServiceRecord dump" => 176,
        _ => return None,
    })
}

/// The records of one saquery run, split by what umad2sim delivered.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SaTable {
    /// Records that lie wholly in the bytes umad2sim delivered: the SA's own.
    pub records: Vec<SaRecord>,
    /// Records saquery printed from bytes umad2sim did not deliver (partly or wholly
    /// past MAD byte 224): not the SA's. A ServiceRecord lands here although only
    /// [`SR_UNDELIVERED_FIELDS`] are affected.
    pub undelivered: Vec<SaRecord>,
    /// `Some(n)`: the SA's answer fitted one MAD and had exactly `n` records.
    /// `None`: it filled the first MAD (more may exist), or the record kind is unknown.
    pub total: Option<usize>,
}

impl SaTable {
    /// Split parsed records by the rules in the module doc. Records of mixed or unknown
    /// kinds are all kept in `records`, with `total` unknown.
    pub fn from_records(printed: Vec<SaRecord>) -> SaTable {
        let n = printed.len();
        let size = printed
            .first()
            .and_then(|r| record_size(&r.kind))
            .filter(|_| printed.windows(2).all(|w| w[0].kind == w[1].kind));
        let Some(size) = size else {
            return SaTable {
                total: (n == 0).then_some(0),
                records: printed,
                undelivered: Vec::new(),
            };
        };
        let delivered = SA_DATA_DELIVERED / size;
        let cap = SA_DATA_PER_MAD / size;
        let mut records = printed;
        let undelivered = records.split_off(delivered.min(n));
        SaTable {
            records,
            undelivered,
            total: (n < cap).then_some(n),
        }
    }

    /// Parse saquery's stdout and split it ([`parse_saquery`], [`SaTable::from_records`]).
    pub fn parse(stdout: &str) -> SaTable {
        SaTable::from_records(parse_saquery(stdout))
    }

    /// Everything saquery printed, delivered or not.
    pub fn printed(&self) -> usize {
        self.records.len() + self.undelivered.len()
    }

    /// True when [`SaTable::records`] is the SA's whole answer.
    pub fn is_complete(&self) -> bool {
        self.undelivered.is_empty() && self.total == Some(self.records.len())
    }
}
