//! Feeds arbitrary text to OpenSM's partitions.conf parser
//! (`ibsm_core::subnet::partitions_conf::parse`, what `ibsmd --partitions-file` reads).
//! Invariants: an error's line is a line of the text (or one past its last newline)
//! and its column is inside that line (or just past its end); a parsed file has the
//! default partition 0x7FFF first, every P_Key 15 bits and non-zero and unique, every
//! explicit member a non-zero GUID named once, every group ordered among the
//! explicit members (`after` at most their count), and `mgid=` groups multicast.
#![no_main]

use ibsm_core::subnet::partitions_conf::parse;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match parse(&text) {
        Err(e) => {
            let lines: Vec<&str> = text.split('\n').collect();
            assert!(
                (1..=lines.len()).contains(&e.at.line),
                "line {} outside {text:?}",
                e.at.line
            );
            let len = lines[e.at.line - 1].chars().count();
            assert!(
                (1..=len + 1).contains(&e.at.column),
                "column {} outside line {}",
                e.at.column,
                e.at.line
            );
        }
        Ok(f) => {
            assert_eq!(f.partitions.first().map(|p| p.p_key), Some(0x7FFF));
            let mut keys = std::collections::HashSet::new();
            for p in &f.partitions {
                assert!((1..=0x7FFF).contains(&p.p_key), "{p:?}");
                assert!(keys.insert(p.p_key), "P_Key {:#x} twice", p.p_key);
                let mut guids = std::collections::HashSet::new();
                for m in &p.members {
                    assert!(m.port_guid != 0 && guids.insert(m.port_guid), "{p:?}");
                }
                for g in &p.groups {
                    assert!(g.after <= p.members.len(), "{p:?}");
                }
                if let Some(i) = p.ipoib {
                    assert!(i.check().is_ok(), "{i:?}");
                }
            }
            for g in &f.multicast_groups {
                assert_eq!(g.mgid[0], 0xFF);
            }
        }
    }
});
