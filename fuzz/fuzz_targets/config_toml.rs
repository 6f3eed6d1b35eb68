//! Feeds arbitrary text to ibsmd's config file parser (`FileConfig::parse`).
//! Invariants: a refusal names the file and, when it has one, a line inside the text;
//! an accepted file's values are within the ranges the parser promises and build
//! subnet options without panicking.
#![no_main]

use std::path::Path;

use ibsmd::config::{ConfigError, FileConfig};
use ibsmd::subnet_opts::{parse_partition, SubnetOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match FileConfig::parse(Path::new("fuzz.toml"), text) {
        Err(e) => {
            assert!(e.to_string().contains("fuzz.toml"), "{e}");
            if let ConfigError::Parse {
                line: Some(line), ..
            } = e
            {
                assert!(line >= 1 && line <= text.lines().count() + 1, "line {line}");
            }
        }
        Ok(c) => {
            assert!(c.priority.is_none_or(|p| p <= 15));
            assert!(c.poll_interval_ms.is_none_or(|v| (1..=60_000).contains(&v)));
            assert!(c.poll_retries.is_none_or(|v| (1..=100).contains(&v)));
            assert!(c.heavy_sweep_interval_s.is_none_or(|v| v <= 86_400));
            assert!(c.node_id.is_none_or(|v| v >= 1));
            for p in c.partition.iter().flatten() {
                assert!(
                    parse_partition(p).is_ok(),
                    "accepted partition {p:?} does not parse"
                );
            }
            let opts = SubnetOptions {
                lmc: c.lmc,
                routing: c.routing.clone(),
                root_guids: c.root_guid.clone().unwrap_or_default(),
                sweep_interval_s: c.sweep_interval_s,
                partitions: c.partition.clone().unwrap_or_default(),
                smp_window: c.smp_window.and_then(|w| usize::try_from(w).ok()),
                m_key: c.m_key,
                m_key_protection_level: c.m_key_protection_level,
                m_key_lease_period: c.m_key_lease_period,
                trap_sweep_hold_down_ms: c.trap_sweep_hold_down_ms,
                max_nodes: c.max_nodes.and_then(|n| usize::try_from(n).ok()),
            };
            let _ = opts.to_config();
        }
    }
});
