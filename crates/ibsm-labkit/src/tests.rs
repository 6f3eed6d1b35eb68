//! Unit tests of the parsers, the net-file sizing, the pid check and the tool lookup:
//! the parts of the crate that need no simulator.

use super::*;
use crate::ibsim::{with_margin, DEFAULT_MAX_NODES};

#[test]
fn parses_attached_lines() {
    let text = "  \0\0Client 0: pid 4202 connected at \"Hca2\" port 0x100004, lid 1, qp 0 SM\nsim> Client 12: pid 7 connected at \"Hca1\" port 0x100001, lid 0, qp 0\ngarbage\nClient x: pid 1";
    let c = parse_attached(text);
    assert_eq!(c.len(), 2);
    assert_eq!((c[0].id, c[0].pid, c[0].node.as_str()), (0, 4202, "Hca2"));
    assert!(c[0].line.ends_with("SM"));
    assert_eq!((c[1].id, c[1].pid, c[1].node.as_str()), (12, 7, "Hca1"));
}

#[test]
fn sizes_net_files() {
    let s = net_file_size(
        "# c\nSwitch\t8 \"S1\"\n[1] \"H\"[1]\nHca 2 \"H\"\n[1] \"S1\"[1]\nhca x \"bad\"\n",
    );
    assert_eq!(
        s,
        NetFileSize {
            nodes: 3,
            switches: 1,
            ports: 9 + 3 + 1
        }
    );
    assert_eq!(with_margin(100, DEFAULT_MAX_NODES), None);
    assert!(with_margin(5000, DEFAULT_MAX_NODES).is_some_and(|v| v > 5000));
}

#[test]
fn pid_liveness() {
    assert!(pid_alive(std::process::id()));
    assert!(!pid_alive(u32::MAX));
}

#[test]
fn missing_tool_is_an_error() {
    let e = require_tool("ibsm-no-such-tool-xyz");
    assert!(matches!(e, Err(LabError::ToolMissing { .. })));
}

mod prop {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn console_and_net_parsers_never_panic(s in "(?s).{0,400}") {
            let _ = parse_attached(&s);
            let _ = net_file_size(&s);
        }

        #[test]
        fn attached_lines_round_trip(id in 0u32..10, pid: u32, node in "[A-Za-z0-9_-]{1,16}", sm: bool) {
            let line = format!("Client {id}: pid {pid} connected at \"{node}\" port 0x100004, lid 1, qp 0{}",
                               if sm { " SM" } else { "" });
            let got = parse_attached(&format!("sim> {line}\nsim> "));
            prop_assert_eq!(got.len(), 1);
            prop_assert_eq!((got[0].id, got[0].pid, got[0].node.as_str()), (id, pid, node.as_str()));
        }
    }
}

#[test]
fn reads_port_lids_from_ibnetdiscover_p() {
    // Lines as ibnetdiscover -p printed them on net.2sw2path4hca under ibsmd.
    let text = "\
CA     6  1 0x000000000010000a 4x SDR - SW     4  2 0x0000000000200001 ( 'Hca4' - 'Switch2' )
SW     4  8 0x0000000000200001 4x SDR                                    'Switch2'
SW     4  2 0x0000000000200001 4x SDR - CA     6  1 0x000000000010000a ( 'Switch2' - 'Hca4' )
CA     1  1 0x0000000000100001 4x SDR - SW     2  1 0x0000000000200000 ( 'Hca1' - 'Switch1' )
SW     2  1 0x0000000000200000 4x SDR - CA     1  1 0x0000000000100001 ( 'Switch1' - 'Hca1' )
";
    let ports = parse_ibnetdiscover_ports(text).expect("parses");
    let got: Vec<(u64, u8, u16, bool)> = ports
        .iter()
        .map(|p| (p.guid, p.port, p.lid, p.is_switch))
        .collect();
    assert_eq!(
        got,
        vec![
            (0x100001, 1, 1, false),
            (0x200000, 0, 2, true),
            (0x200001, 0, 4, true),
            (0x10000a, 1, 6, false),
        ]
    );
    assert_eq!(
        guid2lid_of(&ports),
        vec![(0x100001, 1), (0x200000, 2), (0x200001, 4), (0x10000a, 6)]
    );
    // One switch with two LIDs is a contradiction, not a choice.
    let bad = "SW 2 1 0x0000000000200000 4x SDR\nSW 3 2 0x0000000000200000 4x SDR\n";
    assert!(parse_ibnetdiscover_ports(bad).is_err());
    assert!(parse_ibnetdiscover_ports("CA x 1 0x1 4x\n").is_err());
}

#[test]
fn reads_the_grpc_address_from_an_ibsmd_log() {
    let log = "2026-11-30T13:37:02.966515Z  INFO ibsmd: gRPC control API listening addr=127.0.0.1:40025\n";
    assert_eq!(grpc_addr_in_log(log).as_deref(), Some("127.0.0.1:40025"));
    assert_eq!(grpc_addr_in_log("INFO ibsmd: starting\n"), None);
}
