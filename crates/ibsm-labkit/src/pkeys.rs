//! The P_Keys a port holds, as `smpquery pkeys` prints them ([`parse_smpquery_pkeys`]):
//! lines `<index>: 0x.... 0x.... ...` (eight entries each); the header and the
//! capacity footer carry no index and are skipped.

/// The entries of the table `text` lists that are not empty (membership bit aside,
/// key 0 is the empty entry), in order.
pub fn parse_smpquery_pkeys(text: &str) -> Vec<u16> {
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(at, _)| at.trim().parse::<u32>().is_ok())
        .flat_map(|(_, v)| v.split_whitespace())
        .filter_map(|w| w.strip_prefix("0x"))
        .filter_map(|h| u16::from_str_radix(h, 16).ok())
        .filter(|k| k & 0x7FFF != 0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexed_lines_only_and_no_empty_entries() {
        let text = "# P_Key table: Lid 3 port 1\n   0: 0xffff 0x8010 0x0000 0x8000 0x0000 0x0000 0x0000 0x0000\n   8: 0x0020 0x0000 0x0000 0x0000 0x0000 0x0000 0x0000 0x0000\n16 pkeys capacity for this port\n";
        assert_eq!(parse_smpquery_pkeys(text), [0xffff, 0x8010, 0x0020]);
        assert!(parse_smpquery_pkeys("garbage: 0xzz\n").is_empty());
    }
}
