//! Feeds arbitrary text to ibsmd's `--partition` parser
//! (`NAME=PKEY:GUID[:full|limited],...`) and to the subnet options that validate it.
//! Invariants: a parsed partition has a trimmed non-empty name without '=', a 15-bit
//! P_Key and at least one member; written back in the documented syntax it parses to
//! the same partition; the configurator accepts only P_Keys 0x0001..=0x7FFE.
#![no_main]

use ibsm_core::subnet::Membership;
use ibsmd::subnet_opts::{parse_partition, SubnetOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(p) = parse_partition(text) else {
        return;
    };
    assert!(!p.name.is_empty() && p.name.trim() == p.name && !p.name.contains('='));
    assert!(p.p_key <= 0x7FFF);
    assert!(!p.members.is_empty());
    let members: Vec<String> = p
        .members
        .iter()
        .map(|m| {
            let kind = match m.membership {
                Membership::Full => "full",
                Membership::Limited => "limited",
            };
            format!("0x{:x}:{kind}", m.port_guid)
        })
        .collect();
    let written = format!("{}=0x{:04x}:{}", p.name, p.p_key, members.join(","));
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
    }
});
