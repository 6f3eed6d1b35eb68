use super::*;
use crate::subnet::{EndPort, EndPortKind};
use proptest::prelude::*;

fn port(guid: u64, kind: EndPortKind, is_sm: bool) -> EndPort {
    EndPort { guid, kind, is_sm }
}

fn by_key(f: &PartitionsFile, k: u16) -> &Partition {
    f.partitions
        .iter()
        .find(|p| p.p_key == k)
        .expect("partition")
}

#[test]
fn the_man_page_examples_read_as_opensm_reads_them() {
    let text = "\
# the man page's examples
Default=0x7fff : ALL, ALL_SWITCHES=full, SELF=full ;
NewPartition , ipoib : 0x123456=full, 0x3456789034=limi,  0x2134af2306 ;
YetAnotherOne = 0x300 : SELF=full ;
YetAnotherOne = 0x300 : ALL=limited ;
ShareIO = 0x80 , defmember=full : 0x123451, 0x123452;
# 0x123453, 0x123454 will be limited
ShareIO = 0x80 : 0x123453, 0x123454, 0x123455=full;
ShareIO = 0x80 , defmember=full : 0x12345b,
    0x12345c=limited,   # continued on the next line
    0x12345d;
";
    let f = parse(text).expect("parses");
    let ca = |g| port(g, EndPortKind::Ca, false);
    let d = by_key(&f, 0x7FFF);
    assert_eq!(d.name, "Default");
    assert_eq!(d.membership_of(&ca(7)), Some(Membership::Limited));
    assert_eq!(
        d.membership_of(&port(7, EndPortKind::Switch, false)),
        Some(Membership::Full)
    );
    assert_eq!(
        d.membership_of(&port(7, EndPortKind::Ca, true)),
        Some(Membership::Full)
    );
    let n = by_key(&f, 1);
    assert_eq!(n.name, "NewPartition");
    assert!(n.ipoib.is_some());
    assert_eq!(n.membership_of(&ca(0x123456)), Some(Membership::Full));
    assert_eq!(
        n.membership_of(&ca(0x3456789034)),
        Some(Membership::Limited)
    );
    assert_eq!(
        n.membership_of(&ca(0x2134af2306)),
        Some(Membership::Limited)
    );
    assert_eq!(n.membership_of(&ca(1)), None);
    // Merged by P_Key, and ALL=limited came after SELF=full: SELF ends limited.
    let y = by_key(&f, 0x300);
    assert_eq!(
        y.membership_of(&port(9, EndPortKind::Ca, true)),
        Some(Membership::Limited)
    );
    let s = by_key(&f, 0x80);
    for (g, m) in [
        (0x123451, Membership::Full),
        (0x123453, Membership::Limited),
        (0x123455, Membership::Full),
        (0x12345b, Membership::Full),
        (0x12345c, Membership::Limited),
        (0x12345d, Membership::Full),
    ] {
        assert_eq!(s.membership_of(&ca(g)), Some(m), "{g:#x}");
    }
}

#[test]
fn no_default_rule_means_all_limited_and_self_full() {
    let f = parse("p=0x10: ALL_CAS=full;").expect("parses");
    let d = by_key(&f, 0x7FFF);
    assert_eq!(
        d.membership_of(&port(5, EndPortKind::Ca, false)),
        Some(Membership::Limited)
    );
    assert_eq!(
        d.membership_of(&port(5, EndPortKind::Ca, true)),
        Some(Membership::Full)
    );
    let p = by_key(&f, 0x10);
    assert_eq!(p.membership_of(&port(5, EndPortKind::Switch, false)), None);
    assert_eq!(
        p.membership_of(&port(5, EndPortKind::Ca, false)),
        Some(Membership::Full)
    );
}

#[test]
fn a_later_entry_overrides_an_earlier_one_groups_and_guids_alike() {
    let f = parse("p=0x10: 0x5=full, ALL=limited, 0x6=full, 0x5=full;").expect("parses");
    let p = by_key(&f, 0x10);
    let ca = |g| port(g, EndPortKind::Ca, false);
    assert_eq!(p.membership_of(&ca(0x5)), Some(Membership::Full));
    assert_eq!(p.membership_of(&ca(0x6)), Some(Membership::Full));
    assert_eq!(p.membership_of(&ca(0x7)), Some(Membership::Limited));
    let f = parse("p=0x10: 0x5=full, ALL=limited;").expect("parses");
    assert_eq!(
        by_key(&f, 0x10).membership_of(&ca(0x5)),
        Some(Membership::Limited)
    );
}

#[test]
fn flags_numbers_and_generated_keys() {
    let f = parse(
        "a, ipoib, rate=7, mtu=5, sl=1, scope=5, Q_Key=0x1234, indx0 : 010=both;\n\
         b : 0x1;\n 0x20 : 0x2;\n a : 0x3;",
    )
    .expect("parses");
    let a = by_key(&f, 1);
    assert_eq!(a.name, "a");
    assert!(a.index0);
    assert_eq!(
        a.ipoib,
        Some(PartitionIpoib {
            rate: 7,
            mtu: 5,
            sl: 1,
            scope: 5,
            q_key: 0x1234
        })
    );
    // 010 is octal 8; both is full; `a` again merges by name.
    assert_eq!(
        a.membership_of(&port(8, EndPortKind::Ca, false)),
        Some(Membership::Full)
    );
    assert_eq!(
        a.membership_of(&port(3, EndPortKind::Ca, false)),
        Some(Membership::Limited)
    );
    assert_eq!(by_key(&f, 2).name, "b");
    assert_eq!(by_key(&f, 0x20).name, "");
}

#[test]
fn mgid_lines_are_read_and_checked() {
    let f = parse(
        "Default=0x7fff,ipoib:\n  mgid=ff12:401b::0707,sl=1 # IPv4\n  mgid=ff12::1,sl=1,Q_Key=0xDEADBEEF,rate=3,mtu=2\n  ALL=full;",
    )
    .expect("parses");
    assert_eq!(f.multicast_groups.len(), 2);
    let ip = &f.multicast_groups[0];
    assert_eq!(ip.at, Position { line: 2, column: 3 });
    assert_eq!(&ip.mgid[..6], &[0xff, 0x12, 0x40, 0x1b, 0xff, 0xff]);
    assert_eq!(ip.params.q_key, 0x0B1B);
    assert_eq!(f.multicast_groups[1].params.q_key, 0xDEADBEEF);
    assert_eq!(
        by_key(&f, 0x7FFF).membership_of(&port(1, EndPortKind::Switch, false)),
        Some(Membership::Full)
    );
    let e = parse("p=0x10:\n mgid=fe80::1\n ALL;").expect_err("not multicast");
    assert_eq!(e.at, Position { line: 2, column: 7 });
}

#[test]
fn flags_that_are_not_applied_are_reported() {
    let f =
        parse("Default=0x7fff, ipoib, mtu=5 : ALL=full;\np=0x10, TClass=3 : 0x1;").expect("parses");
    assert_eq!(f.not_applied.len(), 2, "{:?}", f.not_applied);
    assert_eq!(f.not_applied[0].at, Position { line: 1, column: 1 });
    assert!(f.not_applied[0].what.contains("mtu 5"));
    assert_eq!(f.not_applied[1].at, Position { line: 2, column: 9 });
    assert!(f.not_applied[1].what.contains("TClass=3"));
    assert!(parse("Default=0x7fff, ipoib : ALL=full;")
        .expect("parses")
        .not_applied
        .is_empty());
}

#[test]
fn errors_name_line_and_column() {
    let cases: &[(&str, usize, usize, &str)] = &[
        ("p=0x10 0x1;", 1, 1, "no partition definition"),
        ("# c\np=0x10 : 0x1, bogus=full;", 2, 15, "not a port GUID"),
        ("p=0x10 : 0x1=fulll;", 1, 14, "not full, limited or both"),
        ("p=0x10, mtu=9 : 0x1;", 1, 13, "out of range"),
        ("p=0x10, colour=red : 0x1;", 1, 9, "unknown flag"),
        ("p=zz : 0x1;", 1, 3, "not a number"),
        ("p=0x10,scope=2,scope=5: 0x1;", 1, 16, "second scope"),
        ("x=1:0x1;\n  p=0x10 : 0x0;", 2, 12, "not a port GUID"),
    ];
    for (text, line, column, why) in cases {
        let e = parse(text).expect_err(text);
        assert_eq!((e.at.line, e.at.column), (*line, *column), "{text:?}: {e}");
        assert!(e.why.contains(why), "{text:?}: {e}");
        assert!(e
            .to_string()
            .starts_with(&format!("line {line}, column {column}: ")));
    }
}

#[test]
fn strtoul_is_cs() {
    assert_eq!(strtoul("0x1F"), Some(31));
    assert_eq!(strtoul("017"), Some(15));
    assert_eq!(strtoul("0"), Some(0));
    assert_eq!(strtoul("12"), Some(12));
    assert_eq!(strtoul("08"), None);
    assert_eq!(strtoul(""), None);
    assert_eq!(strtoul("1a"), None);
}

proptest! {
    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
        let _ = parse(&text);
    }

    #[test]
    fn grammar_like_text_never_panics_and_errors_point_inside(
        parts in proptest::collection::vec(
            prop_oneof![
                Just("="), Just(","), Just(":"), Just(";"), Just("\n"), Just("#"), Just(" "),
                Just("ALL"), Just("SELF"), Just("full"), Just("ipoib"), Just("mgid"),
                Just("0x7fff"), Just("0x12"), Just("ff12::1"), Just("mtu"), Just("é"),
            ],
            0..40,
        )
    ) {
        let text: String = parts.concat();
        if let Err(e) = parse(&text) {
            prop_assert!(e.at.line >= 1 && e.at.line <= text.matches('\n').count() + 1);
            prop_assert!(e.at.column >= 1);
        }
    }
}
