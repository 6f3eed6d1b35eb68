//! Records as JSON and text, field by field, from their `Debug` form.
//!
//! Every `ibsm_mad::sa` record derives (or writes) `Debug` with its IBA field names in
//! snake case, nested attributes included (`NodeRecord { lid: 1, node_info: NodeInfo
//! { .. }, .. }`); converting that form gives every field of every record type with no
//! per-type code, so the CLI shows exactly what was decoded. Then, for people and
//! scripts: fields named `*guid*` become `"0x%016x"` strings (as the rest of ibsmctl
//! prints GUIDs), 16-byte `*gid*` arrays become IPv6 text (`fe80::2:c903:0:1`), and
//! values the converter cannot read as JSON (a custom `Debug` such as
//! `JoinState(FullMember|NonMember)`) stay as their text.

use std::net::Ipv6Addr;

use serde_json::{Map, Value};

/// `value` (a record) as a JSON object, via its `Debug` form.
pub fn to_json<T: std::fmt::Debug>(value: &T) -> Value {
    let text = format!("{value:?}");
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    let v = p.value().unwrap_or(Value::String(text.clone()));
    tidy(None, v)
}

/// A JSON object flattened to `a.b.c=value` pairs for one line of text.
pub fn to_text(v: &Value) -> String {
    let mut out = Vec::new();
    flatten("", v, &mut out);
    out.join(" ")
}

fn flatten(prefix: &str, v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, x, out);
            }
        }
        Value::String(s) => out.push(format!("{prefix}={s}")),
        Value::Array(a) => {
            let items: Vec<String> = a
                .iter()
                .map(|x| match x {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect();
            out.push(format!("{prefix}=[{}]", items.join(",")));
        }
        other => out.push(format!("{prefix}={other}")),
    }
}

/// GUIDs to hex strings, GIDs to IPv6 text, reserved fields dropped.
fn tidy(key: Option<&str>, v: Value) -> Value {
    let key_l = key.map(str::to_ascii_lowercase).unwrap_or_default();
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .filter(|(k, _)| !k.starts_with("reserved"))
                .map(|(k, x)| {
                    let t = tidy(Some(&k), x);
                    (k, t)
                })
                .collect::<Map<String, Value>>(),
        ),
        Value::Number(n) if key_l.contains("guid") => match n.as_u64() {
            Some(g) => Value::String(format!("{g:#018x}")),
            None => Value::Number(n),
        },
        Value::Array(a) if key_l.contains("gid") && a.len() == 16 => {
            let bytes: Option<Vec<u8>> = a
                .iter()
                .map(|x| x.as_u64().and_then(|b| u8::try_from(b).ok()))
                .collect();
            match bytes.and_then(|b| <[u8; 16]>::try_from(b).ok()) {
                Some(b) => Value::String(Ipv6Addr::from(b).to_string()),
                None => Value::Array(a),
            }
        }
        Value::Array(a) => Value::Array(a.into_iter().map(|x| tidy(key, x)).collect()),
        other => other,
    }
}

/// A small reader of Rust's `Debug` output: structs, tuples, arrays, numbers,
/// strings, booleans, unit variants; anything else becomes a string of its text.
struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        self.ws();
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn value(&mut self) -> Option<Value> {
        self.ws();
        match self.peek()? {
            b'[' => {
                self.i += 1;
                let items = self.list(b']')?;
                Some(Value::Array(items))
            }
            b'"' => self.string().map(Value::String),
            b'-' | b'0'..=b'9' => Some(self.number()),
            c if c.is_ascii_alphabetic() || c == b'_' => self.named(),
            _ => None,
        }
    }

    /// Comma-separated values up to `close` (consumed).
    fn list(&mut self, close: u8) -> Option<Vec<Value>> {
        let mut items = Vec::new();
        loop {
            if self.eat(close) {
                return Some(items);
            }
            items.push(self.value()?);
            if !self.eat(b',') {
                return self.eat(close).then_some(items);
            }
        }
    }

    fn string(&mut self) -> Option<String> {
        self.i += 1;
        let mut out = Vec::new();
        while let Some(c) = self.peek() {
            self.i += 1;
            match c {
                b'\\' => {
                    let n = self.peek()?;
                    self.i += 1;
                    out.push(match n {
                        b'n' => b'\n',
                        b't' => b'\t',
                        other => other,
                    });
                }
                b'"' => return Some(String::from_utf8_lossy(&out).into_owned()),
                other => out.push(other),
            }
        }
        None
    }

    fn number(&mut self) -> Value {
        let start = self.i;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'.' || c == b'_')
        {
            self.i += 1;
        }
        let t = String::from_utf8_lossy(&self.s[start..self.i]).into_owned();
        if let Ok(u) = t.parse::<u64>() {
            Value::from(u)
        } else if let Ok(i) = t.parse::<i64>() {
            Value::from(i)
        } else if let Ok(f) = t.parse::<f64>() {
            Value::from(f)
        } else {
            Value::String(t)
        }
    }

    fn ident(&mut self) -> String {
        let start = self.i;
        loop {
            match self.peek() {
                Some(c) if c.is_ascii_alphanumeric() || c == b'_' => self.i += 1,
                // A path (`PortState::Active`), never the `:` after a field name.
                Some(b':') if self.s.get(self.i + 1) == Some(&b':') => self.i += 2,
                _ => break,
            }
        }
        String::from_utf8_lossy(&self.s[start..self.i]).into_owned()
    }

    /// `Name { a: v, .. }`, `Name(v, ..)`, `Name`, `true`, `None`, `Some(v)`.
    fn named(&mut self) -> Option<Value> {
        let name = self.ident();
        let save = self.i;
        self.ws();
        match self.peek() {
            Some(b'{') => {
                self.i += 1;
                let mut m = Map::new();
                loop {
                    if self.eat(b'}') {
                        return Some(Value::Object(m));
                    }
                    if self.eat(b'.') {
                        // `..` of finish_non_exhaustive
                        self.eat(b'.');
                        continue;
                    }
                    self.ws();
                    let k = self.ident();
                    if k.is_empty() || !self.eat(b':') {
                        return None;
                    }
                    let v = self.value()?;
                    m.insert(k, v);
                    if !self.eat(b',') {
                        return self.eat(b'}').then_some(Value::Object(m));
                    }
                }
            }
            Some(b'(') => {
                self.i += 1;
                let inner_start = self.i;
                let parsed = self.list(b')');
                match parsed {
                    Some(mut items) if items.len() == 1 => items.pop(),
                    // `JoinState()`: a set with nothing in it.
                    Some(items) if items.is_empty() => Some(Value::String(String::new())),
                    Some(items) => Some(Value::Array(items)),
                    None => {
                        // A custom Debug: keep the text inside the balanced parentheses.
                        self.i = inner_start;
                        let mut depth = 1;
                        while let Some(c) = self.peek() {
                            self.i += 1;
                            match c {
                                b'(' => depth += 1,
                                b')' => {
                                    depth -= 1;
                                    if depth == 0 {
                                        break;
                                    }
                                }
                                _ => {}
                            }
                        }
                        let inner = &self.s[inner_start..self.i.saturating_sub(1)];
                        let inner = String::from_utf8_lossy(inner);
                        Some(Value::String(if inner.is_empty() {
                            name
                        } else {
                            inner.into_owned()
                        }))
                    }
                }
            }
            _ => {
                self.i = save;
                Some(match name.as_str() {
                    "true" => Value::Bool(true),
                    "false" => Value::Bool(false),
                    "None" => Value::Null,
                    _ => Value::String(name),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    #[allow(dead_code)]
    struct Inner {
        node_guid: u64,
        port_gid: [u8; 16],
        state: Option<u8>,
    }

    #[derive(Debug)]
    #[allow(dead_code)]
    struct Rec {
        lid: u16,
        reserved: u8,
        name: &'static str,
        inner: Inner,
        list: [u16; 3],
        flag: bool,
    }

    #[test]
    fn records_become_objects_with_hex_guids_and_ipv6_gids() {
        let mut gid = [0u8; 16];
        gid[0] = 0xfe;
        gid[1] = 0x80;
        gid[15] = 1;
        let v = to_json(&Rec {
            lid: 7,
            reserved: 3,
            name: "a \"b\"",
            inner: Inner {
                node_guid: 0x0002_c903_0000_0001,
                port_gid: gid,
                state: Some(4),
            },
            list: [1, 2, 3],
            flag: true,
        });
        assert_eq!(v["lid"], 7);
        assert!(v.get("reserved").is_none());
        assert_eq!(v["name"], "a \"b\"");
        assert_eq!(v["inner"]["node_guid"], "0x0002c90300000001");
        assert_eq!(v["inner"]["port_gid"], "fe80::1");
        assert_eq!(v["inner"]["state"], 4);
        assert_eq!(v["list"], serde_json::json!([1, 2, 3]));
        assert_eq!(v["flag"], true);
        let t = to_text(&v);
        assert!(t.contains("inner.node_guid=0x0002c90300000001"), "{t}");
    }

    #[test]
    fn custom_debug_forms_stay_text() {
        let j = ibsm_mad::sa::McMemberRecord {
            join_state: ibsm_mad::sa::JoinState(3),
            ..Default::default()
        };
        let v = to_json(&j);
        assert_eq!(v["join_state"], "FullMember|NonMember");
        assert_eq!(v["mtu_selector"], "GreaterThan");
    }
}
