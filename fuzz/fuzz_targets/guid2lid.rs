//! Feeds arbitrary text to `LidManager::import_guid2lid` (OpenSM's guid2lid file).
//! Invariants: errors name a line inside the text and leave the memory unchanged; an
//! import returns the number of entries it remembers, every range is a 2^LMC-aligned
//! unicast block, and export -> import -> export is the same text.
#![no_main]

use ibsm_fabric::lid::{is_valid_block, LidConfig, LidManager};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut m = LidManager::new(LidConfig { lmc: 0 });
    // Something already remembered, to check that a refused file changes nothing.
    m.import_guid2lid("0x1 0x10 0x10\n")
        .expect("valid seed file");
    let before = m.export_guid2lid();
    match m.import_guid2lid(text) {
        Err(e) => {
            assert!(e.line >= 1 && e.line <= text.lines().count(), "{e}");
            assert_eq!(
                m.export_guid2lid(),
                before,
                "a refused file changed the memory"
            );
        }
        Ok(n) => {
            assert_eq!(m.remembered_len(), n);
            let out = m.export_guid2lid();
            assert_eq!(out.lines().count(), n);
            for line in out.lines() {
                let f: Vec<&str> = line.split_whitespace().collect();
                let g = u64::from_str_radix(&f[0][2..], 16).expect("exported GUID");
                let (lo, hi) = m.lid_range(g).expect("exported GUID is remembered");
                let size = u32::from(hi) - u32::from(lo) + 1;
                assert!(size.is_power_of_two(), "{line}");
                assert!(is_valid_block(lo, size.trailing_zeros() as u8), "{line}");
            }
            let mut again = LidManager::new(LidConfig { lmc: 0 });
            assert_eq!(again.import_guid2lid(&out).ok(), Some(n), "{out}");
            assert_eq!(again.export_guid2lid(), out);
        }
    }
});
