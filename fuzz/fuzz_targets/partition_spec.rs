//! Feeds arbitrary text to ibsmd's `--partition` parser
//! (`NAME=PKEY[,ipoib[,rate=N,mtu=N,sl=N,scope=N,Q_Key=N]]:GUID[:full|limited],...`) and
//! to the subnet options that validate it.
//! Invariants: a parsed partition has a trimmed non-empty name without '=', a 15-bit
//! P_Key and at least one member; written back in the documented syntax
//! (`format_partition`, IPoIB flags included) it parses to the same partition; an
//! error's column is inside the text (or just past its end); the configurator accepts
//! only P_Keys 0x0001..=0x7FFE and IPoIB values in their IBA ranges.
#![no_main]

use ibsmd::subnet_opts::{format_partition, parse_partition, SubnetOptError, SubnetOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let p = match parse_partition(text) {
        Ok(p) => p,
        Err(SubnetOptError::Partition { column, .. }) => {
            assert!(
                (1..=text.chars().count() + 1).contains(&column),
                "column {column} outside {text:?}"
            );
            return;
        }
        Err(e) => panic!("parse_partition returned a non-partition error: {e}"),
    };
    assert!(!p.name.is_empty() && p.name.trim() == p.name && !p.name.contains('='));
    assert!(p.p_key <= 0x7FFF);
    assert!(!p.members.is_empty());
    let written = format_partition(&p);
    assert_eq!(parse_partition(&written).as_ref(), Ok(&p), "{written}");
    let opts = SubnetOptions {
        partitions: vec![text.to_string()],
        ..SubnetOptions::default()
    };
    if let Ok(cfg) = opts.to_config() {
        assert_eq!(cfg.partitions, vec![p.clone()]);
        assert!(
            (1..=0x7FFE).contains(&p.p_key),
            "configurator took P_Key {:#x}",
            p.p_key
        );
        if let Some(i) = p.ipoib {
            assert!(i.check().is_ok(), "configurator took {i:?}");
        }
    }
});
