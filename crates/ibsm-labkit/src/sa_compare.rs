//! Field-by-field comparison of two lists of [`SaRecord`]s (ours, from ibsm's SA, and
//! theirs, from OpenSM's, read the same way): [`compare`] pairs them by position,
//! [`compare_by_key`] by the values of key fields. Each [`Difference`] says which
//! record and which field, and displays as one line; [`render`] joins them for a test
//! failure message.

use std::collections::BTreeMap;
use std::fmt;

use crate::sa_record::SaRecord;
/// One way two record lists differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Difference {
    /// [`compare`]: the lists have different lengths (pairs up to the shorter are still
    /// compared).
    Count { ours: usize, theirs: usize },
    /// The records of a pair have different kinds (`NodeRecord dump` vs ...).
    Kind {
        record: String,
        ours: String,
        theirs: String,
    },
    /// A field differs, or is missing on one side (`None`).
    Field {
        record: String,
        field: String,
        ours: Option<String>,
        theirs: Option<String>,
    },
    /// [`compare_by_key`]: a record only ours has.
    OnlyOurs { record: String },
    /// [`compare_by_key`]: a record only theirs has.
    OnlyTheirs { record: String },
}

fn side(v: &Option<String>) -> String {
    v.as_ref()
        .map_or_else(|| "missing".to_string(), |s| format!("{s:?}"))
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Difference::Count { ours, theirs } => {
                write!(f, "record count: ours {ours}, theirs {theirs}")
            }
            Difference::Kind {
                record,
                ours,
                theirs,
            } => write!(f, "{record}: kind: ours {ours:?}, theirs {theirs:?}"),
            Difference::Field {
                record,
                field,
                ours,
                theirs,
            } => write!(
                f,
                "{record}: field `{field}`: ours {}, theirs {}",
                side(ours),
                side(theirs)
            ),
            Difference::OnlyOurs { record } => write!(f, "{record}: only in ours"),
            Difference::OnlyTheirs { record } => write!(f, "{record}: only in theirs"),
        }
    }
}

/// The differences, one per line (empty string when there are none).
pub fn render(diffs: &[Difference]) -> String {
    diffs
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// `record 2 (NodeRecord dump lid=16)`: position, kind and first field, to find the
/// record in saquery's output.
fn label(index: usize, r: &SaRecord) -> String {
    match r.fields.first() {
        Some((n, v)) => format!("record {index} ({} {n}={v})", r.kind),
        None => format!("record {index} ({})", r.kind),
    }
}

/// Each field with its occurrence number among fields of the same name, so repeated
/// names (an LFT's rows) pair up in order.
fn numbered(r: &SaRecord) -> Vec<((&str, usize), &str)> {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    r.fields
        .iter()
        .map(|(n, v)| {
            let k = seen.entry(n.as_str()).or_insert(0);
            *k += 1;
            ((n.as_str(), *k), v.as_str())
        })
        .collect()
}

fn field_name(name: &str, nth: usize) -> String {
    if nth == 1 {
        name.to_string()
    } else {
        format!("{name}#{nth}")
    }
}

/// Compare one pair of records field by field, skipping fields named in `ignore`.
/// Fields are visited in theirs' order, then the ones only ours has.
pub fn compare_records(
    record: &str,
    ours: &SaRecord,
    theirs: &SaRecord,
    ignore: &[&str],
) -> Vec<Difference> {
    let mut out = Vec::new();
    if ours.kind != theirs.kind {
        out.push(Difference::Kind {
            record: record.to_string(),
            ours: ours.kind.clone(),
            theirs: theirs.kind.clone(),
        });
    }
    let o = numbered(ours);
    let t = numbered(theirs);
    let o_map: BTreeMap<(&str, usize), &str> = o.iter().copied().collect();
    let t_map: BTreeMap<(&str, usize), &str> = t.iter().copied().collect();
    let keys = t
        .iter()
        .map(|(k, _)| *k)
        .chain(o.iter().map(|(k, _)| *k).filter(|k| !t_map.contains_key(k)));
    for key in keys {
        if ignore.contains(&key.0) {
            continue;
        }
        let (a, b) = (o_map.get(&key), t_map.get(&key));
        if a != b {
            out.push(Difference::Field {
                record: record.to_string(),
                field: field_name(key.0, key.1),
                ours: a.map(|s| (*s).to_string()),
                theirs: b.map(|s| (*s).to_string()),
            });
        }
    }
    out
}

/// Compare two record lists pair by pair in order (record i with record i), skipping
/// the fields named in `ignore`. Use it for answers whose order the IBA fixes or that
/// hold one record; [`compare_by_key`] for tables two SAs may order differently.
pub fn compare(ours: &[SaRecord], theirs: &[SaRecord], ignore: &[&str]) -> Vec<Difference> {
    let mut out = Vec::new();
    if ours.len() != theirs.len() {
        out.push(Difference::Count {
            ours: ours.len(),
            theirs: theirs.len(),
        });
    }
    for (i, (o, t)) in ours.iter().zip(theirs).enumerate() {
        out.extend(compare_records(&label(i, t), o, t, ignore));
    }
    out
}

fn key_of(r: &SaRecord, key: &[&str]) -> String {
    key.iter()
        .map(|k| format!("{k}={}", r.get(k).unwrap_or("?")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Compare two record lists, pairing records with equal values of the `key` fields
/// (e.g. `["lid"]` for NodeRecords, `["EndPortLid", "PortNum"]` for PortInfoRecords,
/// `["FromLID", "FromPort"]` for LinkRecords, `["MGID", "PortGid"]` for members);
/// records with the same key pair up in order. A record without a partner is an
/// [`Difference::OnlyOurs`] / [`Difference::OnlyTheirs`]. Output follows theirs' order.
pub fn compare_by_key(
    ours: &[SaRecord],
    theirs: &[SaRecord],
    key: &[&str],
    ignore: &[&str],
) -> Vec<Difference> {
    let mut pool: BTreeMap<String, Vec<&SaRecord>> = BTreeMap::new();
    for o in ours.iter().rev() {
        pool.entry(key_of(o, key)).or_default().push(o);
    }
    let mut out = Vec::new();
    for t in theirs {
        let k = key_of(t, key);
        let record = format!("record ({} {k})", t.kind);
        match pool.get_mut(&k).and_then(Vec::pop) {
            Some(o) => out.extend(compare_records(&record, o, t, ignore)),
            None => out.push(Difference::OnlyTheirs { record }),
        }
    }
    for o in ours {
        let k = key_of(o, key);
        if let Some(left) = pool.get_mut(&k) {
            if left.iter().any(|r| std::ptr::eq(*r, o)) {
                out.push(Difference::OnlyOurs {
                    record: format!("record ({} {k})", o.kind),
                });
            }
        }
    }
    out
}
