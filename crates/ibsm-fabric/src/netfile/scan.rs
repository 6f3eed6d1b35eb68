//! Reading a net file line the way ibsim's C code does, without panics: `strtoul` and
//! `atoi` numbers, `key=value` assignments, quoted node ids, descriptions and the
//! `lid `/`lmc ` numbers after them. The parser and the link-rate annotations read
//! with these; the writer cuts descriptions with `truncate`.

use super::error::{err, NetFileError, NetFileErrorKind, MAX_NODE_ID};

// ---------------------------------------------------------------------------
// C-like number reading (strtoul with base 0, atoi), without panics.

/// Skip ASCII whitespace.
pub(super) fn skip_ws(s: &str) -> &str {
    s.trim_start_matches(|c: char| c.is_ascii_whitespace())
}

/// strtoul(s, _, 0): optional whitespace and '+', then 0x.. hex, 0.. octal or
/// decimal. `None` when no digit follows; saturates on overflow.
pub(super) fn strtoul(s: &str) -> Option<(u64, &str)> {
    let s = skip_ws(s);
    let s = s.strip_prefix('+').unwrap_or(s);
    let (radix, body) = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        if h.starts_with(|c: char| c.is_ascii_hexdigit()) {
            (16, h)
        } else {
            // "0x" with no hex digit: C reads the "0".
            return Some((0, &s[1..]));
        }
    } else if s.starts_with('0') {
        (8, s)
    } else {
        (10, s)
    };
    let end = body
        .find(|c: char| !c.is_digit(radix))
        .unwrap_or(body.len());
    if end == 0 {
        return None;
    }
    let (digits, rest) = body.split_at(end);
    let v = digits.chars().fold(0u64, |acc, c| {
        acc.saturating_mul(u64::from(radix))
            .saturating_add(u64::from(c.to_digit(radix).unwrap_or(0)))
    });
    Some((v, rest))
}

/// atoi: optional whitespace and sign, decimal digits. `None` without digits.
pub(super) fn atoi(s: &str) -> Option<(i64, &str)> {
    let s = skip_ws(s);
    let (neg, s) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    if end == 0 {
        return None;
    }
    let (digits, rest) = s.split_at(end);
    let v = digits.bytes().fold(0i64, |acc, b| {
        acc.saturating_mul(10).saturating_add(i64::from(b - b'0'))
    });
    Some((if neg { -v } else { v }, rest))
}

fn number(line: usize, what: &'static str, s: &str) -> Result<u64, NetFileError> {
    strtoul(s).map(|(v, _)| v).ok_or_else(|| {
        err(
            line,
            NetFileErrorKind::BadNumber {
                what,
                text: s.trim().to_string(),
            },
        )
    })
}

/// The value after the first '=' (or '+', then relative) of an assignment.
pub(super) fn assignment(
    line_no: usize,
    line: &str,
    what: &'static str,
) -> Result<(u64, bool), NetFileError> {
    let (pos, relative) = match (line.find('='), line.find('+')) {
        (Some(p), _) => (p, false),
        (None, Some(p)) => (p, true),
        (None, None) => {
            return Err(err(
                line_no,
                NetFileErrorKind::BadNumber {
                    what,
                    text: line.to_string(),
                },
            ))
        }
    };
    let v = number(line_no, what, line.get(pos + 1..).unwrap_or(""))?;
    Ok((v, relative))
}

// ---------------------------------------------------------------------------
// Node ids, descriptions and keyed numbers, as ibsim finds them in a line.

/// The first `"..."` in `s`: (contents, text after the closing quote).
pub(super) fn quoted(s: &str) -> Option<(&str, &str)> {
    let start = s.find('"')?;
    let after = s.get(start + 1..)?;
    let end = after.find('"')?;
    Some((after.get(..end)?, after.get(end + 1..)?))
}

pub(super) fn check_node_id(line: usize, id: &str) -> Result<(), NetFileError> {
    let why = if id.is_empty() {
        Some("empty: no port line could name the node, and ibsim's console cannot either")
    } else if id.contains('#') || id.contains('@') {
        Some("'#' and '@' are reserved")
    } else if id.len() > MAX_NODE_ID {
        Some("longer than 64 bytes")
    } else {
        None
    };
    match why {
        Some(why) => Err(err(
            line,
            NetFileErrorKind::BadNodeId {
                id: id.to_string(),
                why,
            },
        )),
        None => Ok(()),
    }
}

/// Cut to at most `max` bytes on a char boundary.
pub(super) fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.get(..end).unwrap_or("")
}

/// ibsim's description rule: after '#', a quoted string, or text up to a
/// known keyword. Returns (description, rest of line to read lid/lmc from).
pub(super) fn node_desc(after_id: &str) -> (Option<&str>, Option<&str>) {
    let Some(hash) = after_id.find('#') else {
        return (None, Some(after_id));
    };
    let s = skip_ws(after_id.get(hash + 1..).unwrap_or(""));
    if let Some(q) = s.strip_prefix('"') {
        return match q.find('"') {
            Some(e) => (q.get(..e), q.get(e + 1..)),
            None => (Some(q), None),
        };
    }
    for kw in [" enhanced port ", " base port ", " lid ", " lmc "] {
        if let Some(e) = s.find(kw) {
            return (s.get(..e), s.get(e + 1..));
        }
    }
    (Some(s), None)
}

/// strstr(s, key) then strtoul, as ibsim reads "lid "/"lmc ".
pub(super) fn keyed_number(s: &str, key: &str) -> Option<u64> {
    let at = s.find(key)?;
    Some(strtoul(s.get(at + key.len()..)?).map_or(0, |(v, _)| v))
}
