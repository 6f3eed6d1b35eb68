//! Parsers for what the user types: GUIDs, SM priorities, endpoints.
//!
//! They are clap `value_parser`s, so a bad value is a usage error (exit code 2)
//! reported by clap with the argument's name and our precise reason.

use thiserror::Error;

/// Why a command-line value was refused.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ArgError {
    #[error("empty GUID (expected 0x-prefixed hex such as 0x0002c90300a1b2c3, or decimal)")]
    EmptyGuid,
    #[error(
        "{text:?} is not a GUID: {why} (expected 0x-prefixed hex of up to 16 digits, or decimal)"
    )]
    BadGuid { text: String, why: String },
    #[error("{text:?} is not a priority: expected a whole number 0-15")]
    PriorityNotNumber { text: String },
    #[error("priority {value} is out of range: SMInfo.Priority is 4 bits, so 0-15")]
    PriorityOutOfRange { value: u64 },
    #[error("GUID 0 names no SM port")]
    ZeroGuid,
    #[error("invalid endpoint {text:?}: {why}")]
    BadEndpoint { text: String, why: String },
}

/// A GUID as `0x`-hex (`0x0002c90300a1b2c3`, `0X...`) or decimal (`1048580`).
pub fn parse_guid(text: &str) -> Result<u64, ArgError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(ArgError::EmptyGuid);
    }
    let bad = |why: String| ArgError::BadGuid {
        text: text.to_string(),
        why,
    };
    if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        if hex.is_empty() {
            return Err(bad("no hex digits after 0x".into()));
        }
        if hex.len() > 16 {
            return Err(bad(format!(
                "{} hex digits, a GUID has at most 16",
                hex.len()
            )));
        }
        if let Some(c) = hex.chars().find(|c| !c.is_ascii_hexdigit()) {
            return Err(bad(format!("{c:?} is not a hex digit")));
        }
        u64::from_str_radix(hex, 16).map_err(|e| bad(e.to_string()))
    } else {
        if let Some(c) = t.chars().find(|c| !c.is_ascii_digit()) {
            return Err(bad(format!(
                "{c:?} is not a decimal digit (hex needs the 0x prefix)"
            )));
        }
        t.parse::<u64>()
            .map_err(|_| bad("larger than 64 bits".into()))
    }
}

/// [`parse_guid`], refusing 0 (for commands that must name a real SM port).
pub fn parse_nonzero_guid(text: &str) -> Result<u64, ArgError> {
    match parse_guid(text)? {
        0 => Err(ArgError::ZeroGuid),
        g => Ok(g),
    }
}

/// An SM priority, 0-15 (SMInfo.Priority is a 4-bit field).
pub fn parse_priority(text: &str) -> Result<u8, ArgError> {
    let t = text.trim();
    let value: u64 = t.parse().map_err(|_| {
        // A number too large for u64 is still a number: say "out of range".
        if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit()) {
            ArgError::PriorityOutOfRange { value: u64::MAX }
        } else {
            ArgError::PriorityNotNumber {
                text: text.to_string(),
            }
        }
    })?;
    u8::try_from(value)
        .ok()
        .filter(|v| *v <= 15)
        .ok_or(ArgError::PriorityOutOfRange { value })
}

/// The gRPC endpoint: `http://host:port`, `https://...`, or a bare `host:port`
/// (taken as `http://`).
pub fn normalize_endpoint(text: &str) -> Result<String, ArgError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(ArgError::BadEndpoint {
            text: text.to_string(),
            why: "empty".into(),
        });
    }
    let url = if t.contains("://") {
        t.to_string()
    } else {
        format!("http://{t}")
    };
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(ArgError::BadEndpoint {
            text: text.to_string(),
            why: "only http:// and https:// are supported".into(),
        });
    }
    Ok(url)
}

/// A GUID as ibsmctl prints it: `0x` and 16 hex digits, like OpenSM's logs.
pub fn fmt_guid(guid: u64) -> String {
    format!("0x{guid:016x}")
}

/// A failure caused by the user's input (exit code 2).
#[derive(Debug, Error)]
#[error("{0}")]
pub struct UsageError(pub String);

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn guids() {
        assert_eq!(parse_guid("0x100004"), Ok(0x100004));
        assert_eq!(parse_guid("0X0002C90300A1B2C3"), Ok(0x0002_c903_00a1_b2c3));
        assert_eq!(parse_guid("1048580"), Ok(1_048_580));
        assert_eq!(parse_guid(" 0xffffffffffffffff "), Ok(u64::MAX));
        assert_eq!(parse_guid(""), Err(ArgError::EmptyGuid));
        assert!(matches!(parse_guid("0x"), Err(ArgError::BadGuid { .. })));
        assert!(matches!(
            parse_guid("0x1ffffffffffffffff"),
            Err(ArgError::BadGuid { .. })
        ));
        assert!(matches!(parse_guid("abc"), Err(ArgError::BadGuid { .. })));
        assert!(matches!(parse_guid("0xg1"), Err(ArgError::BadGuid { .. })));
        assert!(matches!(
            parse_guid("18446744073709551616"),
            Err(ArgError::BadGuid { .. })
        ));
        assert!(matches!(parse_guid("-1"), Err(ArgError::BadGuid { .. })));
        assert_eq!(parse_nonzero_guid("0x0"), Err(ArgError::ZeroGuid));
        let msg = parse_guid("12ab").unwrap_err().to_string();
        assert!(msg.contains("hex needs the 0x prefix"), "{msg}");
    }

    #[test]
    fn priorities() {
        assert_eq!(parse_priority("0"), Ok(0));
        assert_eq!(parse_priority("15"), Ok(15));
        assert_eq!(
            parse_priority("16"),
            Err(ArgError::PriorityOutOfRange { value: 16 })
        );
        assert_eq!(
            parse_priority("300"),
            Err(ArgError::PriorityOutOfRange { value: 300 })
        );
        assert!(matches!(
            parse_priority("99999999999999999999999"),
            Err(ArgError::PriorityOutOfRange { .. })
        ));
        assert!(matches!(
            parse_priority("-1"),
            Err(ArgError::PriorityNotNumber { .. })
        ));
        assert!(matches!(
            parse_priority("high"),
            Err(ArgError::PriorityNotNumber { .. })
        ));
        let msg = parse_priority("16").unwrap_err().to_string();
        assert!(msg.contains("0-15"), "{msg}");
    }

    #[test]
    fn endpoints() {
        assert_eq!(
            normalize_endpoint("127.0.0.1:50051").as_deref(),
            Ok("http://127.0.0.1:50051")
        );
        assert_eq!(
            normalize_endpoint("https://sm:1").as_deref(),
            Ok("https://sm:1")
        );
        assert!(normalize_endpoint("unix:///x").is_err());
        assert!(normalize_endpoint("").is_err());
    }

    proptest! {
        #[test]
        fn guid_round_trips_hex_and_decimal(g in any::<u64>()) {
            prop_assert_eq!(parse_guid(&fmt_guid(g)), Ok(g));
            prop_assert_eq!(parse_guid(&format!("{g:#x}")), Ok(g));
            prop_assert_eq!(parse_guid(&g.to_string()), Ok(g));
        }

        #[test]
        fn guid_parser_never_panics(s in ".{0,40}") {
            let _ = parse_guid(&s);
            let _ = parse_priority(&s);
            let _ = normalize_endpoint(&s);
        }

        #[test]
        fn priority_accepts_exactly_0_to_15(v in 0u64..1000) {
            prop_assert_eq!(parse_priority(&v.to_string()).is_ok(), v <= 15);
        }
    }
}
