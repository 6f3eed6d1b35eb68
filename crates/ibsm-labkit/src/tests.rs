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
