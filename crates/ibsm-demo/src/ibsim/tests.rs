use super::plan::plan;
use super::read_fabric::{parse_ibnetdiscover_links, parse_ibnetdiscover_ports, parse_ibroute};
use super::sminfo_poll::{format_target, parse_target};
use ibsm_proto::demo::v1 as pb;

#[test]
fn diag_output_is_parsed_into_lids_and_lft_entries() {
    let disc = "CA     3  1 0x000000000010000a 4x SDR - SW     2  2 0x0000000000200001 ( 'Hca4' - 'Switch2' )\n\
SW     2  8 0x0000000000200001 4x SDR                                    'Switch2'\n\
SW     2  5 0x0000000000200001 4x SDR - SW     4  5 0x0000000000200000 ( 'Switch2' - 'Switch1' )\n\
# garbage\nCA x 1 0xzz\n";
    let l = parse_ibnetdiscover_ports(disc);
    assert_eq!(l.len(), 2, "{l:?}");
    let hca = l.iter().find(|x| x.kind == "CA").expect("CA");
    assert_eq!(
        (hca.port_guid, hca.lid, hca.description.as_str()),
        (0x10000a, 3, "Hca4")
    );
    let sw = l.iter().find(|x| x.kind == "SW").expect("SW");
    assert_eq!(
        (sw.port_guid, sw.lid, sw.description.as_str()),
        (0x200001, 2, "Switch2")
    );
    let links = parse_ibnetdiscover_links(disc);
    assert_eq!(
        links
            .iter()
            .map(|k| (k.port_guid, k.port, k.remote_port_guid, k.remote_port))
            .collect::<Vec<_>>(),
        [(0x10000a, 1, 0x200001, 2), (0x200001, 5, 0x200000, 5)],
        "the unconnected port and the garbage are no cable"
    );
    let route = "Unicast lids [0x0-0x6] of switch Lid 2 guid 0x0000000000200001 (Switch2):\n  Lid  Out   Destination\n       Port     Info \n0x0000 002 : (path #1 out of 1)\n0x0001 001 : (Channel Adapter portguid 0x0000000000100004: 'Hca2')\n0x0002 000 : (Switch portguid 0x0000000000200001: 'Switch2')\n6 valid lids dumped \n";
    let e = parse_ibroute(route);
    assert_eq!(
        e.iter().map(|x| (x.lid, x.port)).collect::<Vec<_>>(),
        [(1, 1), (2, 0)],
        "LID 0 (ibsmd's LFT stamp, no destination) is no entry"
    );
    assert!(parse_ibroute("nonsense\n0x zz : x\n").is_empty());
}

#[test]
fn targets_round_trip_and_bad_ones_are_refused() {
    let t = format_target("sm2", &[1, 3, 1]);
    assert_eq!(t, "sm2=1,3,1");
    assert_eq!(parse_target(&t), Ok(("sm2".to_string(), vec![1, 3, 1])));
    for bad in ["sm1", "=1", "sm1=", "sm1=0,1", "sm1=1,x", "sm1=1,256"] {
        assert!(parse_target(bad).is_err(), "{bad}");
    }
}

/// The topology of ibsim-utils' net.2sw2path4hca (inline: this test needs no lab).
const NET: &str = "Switch\t8 \"Switch1\"\n[1]\t\"Hca1\"[1]\n[2]\t\"Hca3\"[1]\n[3]\t\"Switch2\"[3]\n[5]\t\"Switch2\"[5]\n\nSwitch 8 \"Switch2\"\n[1]\t\"Hca2\"[1]\n[2]\t\"Hca4\"[1]\n[3]\t\"Switch1\"[3]\n[5]\t\"Switch1\"[5]\n\nHca\t2 \"Hca1\"\n[1]\t\"Switch1\"[1]\n\nHca\t2 \"Hca2\"\n[1]\t\"Switch2\"[1]\n\nHca\t2 \"Hca3\"\n[1]\t\"Switch1\"[2]\n\nHca\t2 \"Hca4\"\n[1]\t\"Switch2\"[2]\n";

#[test]
fn the_example_net_gives_three_members_and_a_poller_with_routes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let net = dir.path().join("net");
    std::fs::write(&net, NET).expect("write");
    let p = plan(&net).expect("plan");
    let names: Vec<&str> = p.hosts.iter().map(|h| h.0.as_str()).collect();
    assert_eq!(names, ["Hca1", "Hca2", "Hca4"]);
    assert_eq!(p.poller_host, "Hca3");
    assert_eq!(
        p.hosts[0],
        ("Hca1".to_string(), 1, "Switch1".to_string(), 1)
    );
    // From Hca3 (on Switch1 port 2): Hca1 is one switch away, Hca2/Hca4 two.
    assert_eq!(p.paths[0], vec![1, 1]);
    assert_eq!(p.paths[1].len(), 3);
    assert_eq!(p.paths[1].last(), Some(&1));
    assert_eq!(p.paths[2].last(), Some(&2));
    // Cables: 4 CA cables and 2 between the switches, one of those on the judge's
    // routes (the poller reaches Switch2 over it), the other free to fault.
    assert_eq!(p.cables.len(), 6, "{:?}", p.cables);
    let isl: Vec<&pb::Cable> = p.cables.iter().filter(|c| c.switch_to_switch).collect();
    assert_eq!(isl.len(), 2);
    assert_eq!(isl.iter().filter(|c| c.judge_path).count(), 1, "{isl:?}");
    let sms: Vec<&str> = p
        .cables
        .iter()
        .map(|c| c.sm.as_str())
        .filter(|s| !s.is_empty())
        .collect();
    assert_eq!(sms.len(), 3, "{:?}", p.cables);
    // A net file with too few CAs is refused with a reason.
    let small = dir.path().join("small");
    std::fs::write(
        &small,
        "Switch\t8 \"S\"\n[1]\t\"H\"[1]\n\nHca\t2 \"H\"\n[1]\t\"S\"[1]\n",
    )
    .expect("write");
    let e = plan(&small)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("needs 4 CA ports"), "{e}");
}
