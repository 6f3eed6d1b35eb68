//! Feeds arbitrary text to ibsm-fabric's net file parser (ibnetdiscover output / ibsim
//! topologies). Invariants: errors name a line inside the text; a parsed topology is
//! written back as a net file that parses again to the same topology (the writer's
//! promise: same GUIDs, cables, LIDs and link rates, names and descriptions made
//! ibsim-safe), and that second text is a fixed point of parse -> write.
#![no_main]

use ibsm_fabric::netfile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match netfile::parse(text) {
        Err(e) => {
            let lines = text.lines().count();
            assert!(
                e.line >= 1 && e.line <= lines + 1,
                "error line {} outside 1..={}: {e}",
                e.line,
                lines + 1
            );
            assert!(!e.to_string().is_empty());
        }
        Ok(topo) => {
            let written = netfile::write(&topo);
            let again = netfile::parse(&written)
                .unwrap_or_else(|e| panic!("written net file does not parse: {e}\n{written}"));
            assert_eq!(again.len(), topo.len(), "node count changed\n{written}");
            for (a, b) in topo.nodes().iter().zip(again.nodes()) {
                assert_eq!(a.node_type, b.node_type, "{written}");
                assert_eq!(a.node_guid, b.node_guid, "{written}");
                assert_eq!(a.num_ports(), b.num_ports(), "{written}");
            }
            assert_eq!(
                netfile::write(&again),
                written,
                "write is not a fixed point"
            );
        }
    }
});
