//! ibnetdiscover / ibsim net files: [`parse`] and [`write()`].
//!
//! The format is what `ibnetdiscover` prints and what ibsim's `sim_net.c`
//! reads. We follow ibsim's reading of it (checked against ibsim 0.10 as
//! packaged by Debian, plus the NDR token of 0.12) so that a [`Topology`](crate::Topology)
//! parsed here has the GUIDs, LIDs, link widths and speeds that ibsim's SMAs
//! will report for the same file:
//!
//! * The quoted name of a node header is its id (what links and `SIM_HOST`
//!   refer to). GUIDs are *not* taken from the name: ibsim allocates them per
//!   node type from a running counter that starts at 0x100000 for CAs,
//!   0x200000 for switches and 0 for routers, set absolutely by
//!   `switchguid=`/`caguid=`/`hcaguids=`/`rtguid=` (`=X`) or relative to the
//!   last absolute value (`+N`). A switch takes one GUID (all its ports
//!   report it); a CA or router with N ports takes N+1: node GUID G, port p
//!   GUID G+p. `(guid)` annotations on port lines are ignored, as ibsim does.
//! * `sysimgguid=` and `vendid=` apply to the next node only; `devid=`,
//!   `width=`, `speed=`, `extspeed=` apply to all later nodes.
//! * Link rates: each port has *enabled* width/speed masks (defaults 4x, SDR)
//!   set by `w=`/`s=`/`e=` options and then by the ibnetdiscover annotation
//!   `lid N <w>x<SPEED>` at the end of a CA or switch port line; the active
//!   rate of a cable is the highest both ends enable.
//! * A description is the quoted text after `#` (or up to ` lid `,
//!   ` base port `...), the node id when missing, cut to 63 bytes.
//!
//! Stricter than ibsim, with a line number and reason instead of silently
//! doing something surprising: unknown lines, a port line outside a record, a
//! record ended by a non-blank line (ibsim would swallow it), a port listed
//! twice, lines ibsim would split (over 254 bytes), a `Ca` port count ibsim
//! would misread, an empty node id (nothing could name the node). `include`,
//! `do`, `module=` and `@alias` need ibsim's file and console context and are
//! rejected as unsupported.

mod error;
mod parser;
mod rates;
mod scan;
mod writer;

pub use error::{NetFileError, NetFileErrorKind, MAX_DESCRIPTION, MAX_LINE, MAX_NODE_ID};
pub use parser::parse;
pub use writer::write;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen;
    use crate::topology::{LinkSpeed, LinkWidth, Node, NodeIdx, NodeType, Topology, TopologyError};
    use proptest::prelude::*;

    const EXAMPLE: &str = "# like ibsim's net-examples/net
#
Switch\t8 \"Switch1\"
[1]\t\"Hca1\"[1]
[2]\t\"Hca2\"[2]
[3]\t\"Switch2\"[3]
[4]\t\"Switch2\"[4]

Switch 8 \"Switch2\"
[3]\t\"Switch1\"[3]
# a comment inside a record
[4]\t\"Switch1\"[4]

Hca\t2 \"Hca1\"
[1]\t\"Switch1\"[1]

Hca\t2 \"Hca2\"
[2]\t\"Switch1\"[2]
";

    #[test]
    fn guids_follow_ibsims_allocation() {
        let t = parse(EXAMPLE).unwrap();
        let sw1 = t.find_by_name("Switch1").unwrap();
        let sw2 = t.find_by_name("Switch2").unwrap();
        let h1 = t.find_by_name("Hca1").unwrap();
        let h2 = t.find_by_name("Hca2").unwrap();
        let g = |i: NodeIdx| t.node(i).unwrap().node_guid;
        assert_eq!((g(sw1), g(sw2)), (0x200000, 0x200001));
        // A 2-port CA reserves 3 GUIDs: node, port 1, port 2.
        assert_eq!((g(h1), g(h2)), (0x100000, 0x100003));
        assert_eq!(t.find_by_port_guid(0x100005), Some((h2, 2)));
        assert_eq!(t.find_by_port_guid(0x200001), Some((sw2, 0)));
        assert_eq!(t.neighbor(sw1, 2), Some((h2, 2)));
        assert_eq!(t.neighbor(sw2, 4), Some((sw1, 4)));
        assert_eq!(t.node(h1).unwrap().description, "Hca1");
        assert_eq!(t.node(sw1).unwrap().system_image_guid, 0x200000);
        let c = t.counts();
        assert_eq!(
            (c.nodes, c.switches, c.hcas, c.links, c.ports),
            (4, 2, 2, 4, 8)
        );
        let p = t.node(sw1).unwrap().port(1).unwrap();
        assert_eq!(
            (p.link_width, p.link_speed),
            (LinkWidth::X4, LinkSpeed::Sdr)
        );
    }

    /// What ibnetdiscover prints, with rates and LIDs; the expected values
    /// were checked against ibsim 0.10 + ibnetdiscover on this machine.
    const ANNOTATED: &str = "vendid=0x2c9
devid=0xc738
sysimgguid=0x8f104004125af
switchguid=0x8f104004125af(8f104004125af)
Switch\t8 \"S-0008f104004125af\"\t\t# \"ISR9024 Voltaire\" base port 0 lid 7 lmc 1
[1]\t\"H-0002c90200000001\"[1](2c90200000002) \t\t# \"a HCA-1\" lid 3 4xQDR
[2]\t\"H-0002c90200000010\"[1](2c90200000011) \t\t# \"b\" lid 9 4xFDR
[3]\t\"c\"[1]\t\t# \"x\" lid 3 12xEDR
[4]\t\"d\"[1]\t\t# \"x\" lid 3 4xFDR10
[5]\t\"e\"[1] w=3 s=7 # no annotation
[6]\t\"r\"[2]

vendid=0x2c9
devid=0x6282
sysimgguid=0x77
caguid=0x2c90200000001
Ca\t1 \"H-0002c90200000001\"\t\t# \"a HCA-1\"
[1](2c90200000002) \t\"S-0008f104004125af\"[1]\t\t# lid 3 lmc 0 \"ISR9024 Voltaire\" lid 7 4xQDR

caguid=0x2c90200000010
Ca\t1 \"H-0002c90200000010\"\t\t# \"b\"
[1](2c90200000011) \t\"S-0008f104004125af\"[2]\t\t# lid 9 lmc 2 \"ISR9024 Voltaire\" lid 7 4xFDR

Hca 1 \"c\"
[1] \"S-0008f104004125af\"[3] # lid 10 lmc 0 \"sw\" lid 7 12xEDR

Hca 1 \"d\"
[1] \"S-0008f104004125af\"[4] # lid 11 lmc 0 \"sw\" lid 7 4xFDR10

Hca 1 \"e\"
[1] \"S-0008f104004125af\"[5] # lid 12 lmc 0 \"sw\" lid 7 1xQDR

rtguid=0x500
Rt 2 \"r\"
[2] \"S-0008f104004125af\"[6]
";

    #[test]
    fn annotations_set_lids_rates_and_ids() {
        let t = parse(ANNOTATED).unwrap();
        let sw = t.find_by_guid(0x8f104004125af).unwrap();
        let swn = t.node(sw).unwrap();
        assert_eq!(swn.description, "ISR9024 Voltaire");
        assert_eq!((swn.vendor_id, swn.device_id), (0x2c9, 0xc738));
        assert_eq!((swn.ports[0].lid, swn.ports[0].lmc), (7, 1));
        let rate = |p: u8| {
            let port = swn.port(p).unwrap();
            (port.link_width, port.link_speed)
        };
        assert_eq!(rate(1), (LinkWidth::X4, LinkSpeed::Qdr));
        assert_eq!(rate(2), (LinkWidth::X4, LinkSpeed::Fdr));
        assert_eq!(rate(3), (LinkWidth::X12, LinkSpeed::Edr));
        assert_eq!(rate(4), (LinkWidth::X4, LinkSpeed::Fdr10));
        // w=3 (1x|4x) against an annotated 1x port: 1x; s=7 vs QDR: QDR.
        assert_eq!(rate(5), (LinkWidth::X1, LinkSpeed::Qdr));
        // Routers ignore annotations: ibsim defaults, 4x SDR.
        assert_eq!(rate(6), (LinkWidth::X4, LinkSpeed::Sdr));

        let a = t.find_by_guid(0x2c90200000001).unwrap();
        let an = t.node(a).unwrap();
        assert_eq!(
            (an.vendor_id, an.device_id, an.system_image_guid),
            (0x2c9, 0x6282, 0x77)
        );
        assert_eq!(an.ports[1].port_guid, 0x2c90200000002);
        assert_eq!(an.ports[1].lid, 3);
        let b = t.find_by_guid(0x2c90200000010).unwrap();
        let bn = t.node(b).unwrap();
        // vendid and sysimgguid hold for one node; devid sticks.
        assert_eq!((bn.vendor_id, bn.device_id), (0, 0x6282));
        assert_eq!(bn.system_image_guid, bn.node_guid);
        assert_eq!((bn.ports[1].lid, bn.ports[1].lmc), (9, 2));
        // "c" continues caguid's counter after "b" (1 port: 2 GUIDs).
        let c = t.find_by_name("c").unwrap();
        assert_eq!(t.node(c).unwrap().node_guid, 0x2c90200000012);
        assert_eq!(t.node(c).unwrap().ports[1].lid, 10);
        let r = t.find_by_name("r").unwrap();
        assert_eq!(t.node(r).unwrap().node_type, NodeType::Router);
        assert_eq!(t.node(r).unwrap().node_guid, 0x500);
        assert_eq!(t.find_by_port_guid(0x502), Some((r, 2)));
    }

    #[test]
    fn relative_guid_and_defaults() {
        let text = "switchguid=0x1000\ncaguid=0x5000\ncaguid+0x10\nwidth=8\nspeed=2\n\
                    Switch 2 \"s\"\n[1] \"h\"[1]\n\nHca 1 \"h\"\n[1] \"s\"\n";
        let t = parse(text).unwrap();
        assert_eq!(
            t.node(t.find_by_name("h").unwrap()).unwrap().node_guid,
            0x5010
        );
        let s = t.node(t.find_by_name("s").unwrap()).unwrap();
        assert_eq!(s.node_guid, 0x1000);
        assert_eq!(
            (s.ports[1].link_width, s.ports[1].link_speed),
            // width= is an enabled mask: 8 is the 12x bit.
            (LinkWidth::X12, LinkSpeed::Ddr)
        );
    }

    fn error_of(text: &str) -> (usize, NetFileErrorKind) {
        let e = parse(text).unwrap_err();
        (e.line, e.kind)
    }

    #[test]
    fn errors_name_the_line_and_reason() {
        use NetFileErrorKind as K;
        type Check = fn(&K) -> bool;
        let cases: Vec<(&str, usize, Check)> = vec![
            ("Switch 8 \"a\"\n[1] \"b\"[1]\n\n", 2, |k| {
                matches!(k, K::UnknownRemote { port: 1, .. })
            }),
            ("Switch \"a\"\n", 1, |k| matches!(k, K::MissingPortCount)),
            ("Switch 0 \"a\"\n", 1, |k| matches!(k, K::OutOfRange { .. })),
            ("Switch 300 \"a\"\n", 1, |k| {
                matches!(k, K::OutOfRange { .. })
            }),
            ("Switch 8\n", 1, |k| matches!(k, K::MissingNodeId)),
            ("Switch 8 \"a#b\"\n", 1, |k| {
                matches!(k, K::BadNodeId { .. })
            }),
            ("\n\nSwitch 8 \"a\"\n[9] \"b\"[1]\n", 4, |k| {
                matches!(k, K::BadPortNumber { port: 9, .. })
            }),
            ("Switch 8 \"a\"\n[0] \"b\"[1]\n", 2, |k| {
                matches!(k, K::BadPortNumber { port: 0, .. })
            }),
            ("Switch 8 \"a\"\n[1] \"a\"[2]\n[1] \"a\"[3]\n", 3, |k| {
                matches!(k, K::DuplicatePort(1))
            }),
            ("Switch 8 \"a\"\n[1] b[1]\n", 2, |k| {
                matches!(k, K::MissingNodeId)
            }),
            ("Switch 8 \"a\"\n[1] \"b\"[0]\n", 2, |k| {
                matches!(k, K::BadRemotePort(_))
            }),
            ("Switch 8 \"a\"\n[1] \"b\"[1]\nHca 1 \"b\"\n", 3, |k| {
                matches!(k, K::SwallowedLine(_))
            }),
            ("Hca 1 \"b\"\n[1] \"a\"[1]\n[1] \"a\"[1]\n", 3, |k| {
                matches!(k, K::PortOutsideRecord)
            }),
            ("[1] \"a\"[1]\n", 1, |k| matches!(k, K::PortOutsideRecord)),
            ("Swich 8 \"a\"\n", 1, |k| {
                matches!(k, K::UnrecognizedLine(_))
            }),
            ("include \"x\"\n", 1, |k| matches!(k, K::Unsupported(_))),
            ("do Dump\n", 1, |k| matches!(k, K::Unsupported(_))),
            ("Switch 8 \"a\"\n@1 \"x\"\n", 2, |k| {
                matches!(k, K::Unsupported(_))
            }),
            ("devid=zz\n", 1, |k| matches!(k, K::BadNumber { .. })),
            ("devid=0x10000\n", 1, |k| matches!(k, K::OutOfRange { .. })),
            ("switchguid\n", 1, |k| matches!(k, K::BadNumber { .. })),
            ("Ca12 \"a\"\n", 1, |k| {
                matches!(k, K::AmbiguousPortCount { ours: 12, ibsim: 2 })
            }),
            ("Switch 8 \"a\"\n[1] \"b\"[1] w=0\n", 2, |k| {
                matches!(k, K::BadOption { opt: 'w', value: 0 })
            }),
            ("Switch 8 \"a\"\n[1] \"b\"[1] s=9\n", 2, |k| {
                matches!(k, K::BadOption { opt: 's', value: 9 })
            }),
            ("Switch 8 \"a\"\n[1] \"a\"[1]\n", 2, |k| {
                matches!(k, K::Topology(TopologyError::SelfLink { .. }))
            }),
            ("Switch 8 \"a\"\n\nSwitch 8 \"a\"\n", 3, |k| {
                matches!(k, K::Topology(TopologyError::DuplicateName { .. }))
            }),
            (
                "switchguid=5\nSwitch 8 \"a\"\n\nswitchguid=5\nSwitch 8 \"b\"\n",
                5,
                |k| {
                    matches!(
                        k,
                        K::Topology(TopologyError::DuplicateNodeGuid { guid: 5, .. })
                    )
                },
            ),
            (
                "Switch 8 \"a\"\n[1] \"b\"[1]\n\nHca 2 \"b\"\n[1] \"a\"[2]\n",
                2,
                |k| {
                    matches!(
                        k,
                        K::Asymmetric {
                            port: 1,
                            remote_port: 1,
                            ..
                        }
                    )
                },
            ),
            (
                "Switch 8 \"a\"\n[1] \"b\"[2]\n\nHca 1 \"b\"\n[1] \"a\"[1]\n",
                2,
                |k| matches!(k, K::RemotePortOutOfRange { remote_port: 2, .. }),
            ),
            (
                "Switch 8 \"a\"\n[1] \"b\"[1] w=1\n\nHca 1 \"b\"\n[1] \"a\"[1]\n",
                2,
                |k| matches!(k, K::RateMismatch { what: "width", .. }),
            ),
        ];
        for (text, line, check) in cases {
            let (got_line, kind) = error_of(text);
            assert!(check(&kind), "{text:?}: unexpected {kind:?}");
            assert_eq!(got_line, line, "{text:?}: {kind}");
        }
        let long = format!("# {}\n", "x".repeat(300));
        assert_eq!(error_of(&long), (1, NetFileErrorKind::LineTooLong(302)));
        // The message carries line and reason.
        let msg = parse("\nSwitch 8 \"a\"\n[1] \"zz\"[1]\n")
            .unwrap_err()
            .to_string();
        assert!(msg.contains("line 3") && msg.contains("\"zz\""), "{msg}");
    }

    /// Found by the netfile fuzz target: a description with carriage returns
    /// (`Switch 5 "a" #Sw\r\r...`) was written with `'` on its header but spaces on
    /// the port lines naming it, so a second parse -> write changed the port lines.
    #[test]
    fn description_with_carriage_returns_is_written_the_same_everywhere() {
        let text = "Switch 5 \"a\" #Sw\r\rx\r\n[1] \"b\"[1]\n\nHca 1 \"b\"\n[1] \"a\"[1]\n";
        let t = parse(text).unwrap();
        let once = write(&t);
        assert!(once.contains("# \"Sw  x\""), "{once}");
        assert!(once.contains("lmc 0 \"Sw  x\""), "{once}");
        assert_eq!(write(&parse(&once).unwrap()), once);
    }

    /// Found by the netfile fuzz target: `Switch 8 ""` parsed, with an empty id and
    /// so an empty description, which `write` cannot give back (it names the node by
    /// GUID instead and an empty description reads back as the node id).
    #[test]
    fn switch_with_empty_node_id_is_refused() {
        let (line, kind) = error_of("Switch 8 \"\"\x01\0\08b\"[1]\0D \"a'[2Y]\n");
        assert_eq!(line, 1);
        assert!(
            matches!(&kind, NetFileErrorKind::BadNodeId { id, .. } if id.is_empty()),
            "{kind:?}"
        );
        let (line, kind) = error_of("Switch 8 \"a\"\n[1] \"\"[1]\n");
        assert_eq!(line, 2, "{kind}");
    }

    #[test]
    fn garbage_never_panics() {
        for text in [
            "\"",
            "[",
            "Switch",
            "Switch 1 \"",
            "Hca 1 \"a\"\n[",
            "Hca 1 \"a\"\n[1",
            "Hca 1 \"a\"\n[1]\"",
            "Ca\u{e9}\u{e9} \"\u{e9}\"",
            "Switch 1 \"a\" # \"unterminated",
        ] {
            let _ = parse(text);
        }
    }

    #[test]
    fn description_rules() {
        let t = parse("Switch 1 \"a\" # plain words lid 4\n\nSwitch 1 \"b\" #   \"quoted # x\" lid 5\n\nSwitch 1 \"c\" #\n").unwrap();
        let d = |n: &str| {
            let n = t.node(t.find_by_name(n).unwrap()).unwrap();
            (n.description.clone(), n.ports[0].lid)
        };
        assert_eq!(d("a"), ("plain words".to_string(), 4));
        assert_eq!(d("b"), ("quoted # x".to_string(), 5));
        assert_eq!(d("c"), ("c".to_string(), 0));
        let long = format!("Hca 1 \"h\" # \"{}\"\n", "y".repeat(80));
        let t = parse(&long).unwrap();
        assert_eq!(t.nodes()[0].description.len(), MAX_DESCRIPTION);
    }

    fn varied_topology() -> Topology {
        let mut t = gen::fat_tree_2level(4).unwrap();
        let rates = [
            (LinkWidth::X1, LinkSpeed::Sdr),
            (LinkWidth::X4, LinkSpeed::Ddr),
            (LinkWidth::X8, LinkSpeed::Qdr),
            (LinkWidth::X12, LinkSpeed::Fdr),
            (LinkWidth::X2, LinkSpeed::Edr),
            (LinkWidth::X4, LinkSpeed::Hdr),
            (LinkWidth::X4, LinkSpeed::Ndr),
            (LinkWidth::X4, LinkSpeed::Fdr10),
        ];
        let links: Vec<_> = t.links().collect();
        for (i, ((a, pa), _)) in links.into_iter().enumerate() {
            let (w, s) = rates[i % rates.len()];
            t.set_link_rate(a, pa, w, s).unwrap();
        }
        for i in 0..t.len() {
            let idx = NodeIdx(i as u32);
            let is_switch = t.node(idx).unwrap().is_switch();
            let port = if is_switch { 0 } else { 1 };
            t.set_port_lid(idx, port, i as u16 + 1, (i % 3) as u8)
                .unwrap();
        }
        t.set_node_info(NodeIdx(0), "host \"zero\" = w=1 s=2", 0x2c9, 7, 0x99)
            .unwrap();
        // A router between two leaves' spare... leaves are full; add fresh nodes.
        let mut r = Node::new(NodeType::Router, 0x7000, 2, "router");
        r.name = "rt-0".into();
        let r = t.add_node(r).unwrap();
        let mut s = Node::new(NodeType::Switch, 0x8000, 3, "edge sw");
        s.name = "extra".into();
        let s = t.add_node(s).unwrap();
        let mut h = Node::new(NodeType::Ca, 0x9000, 2, "dual");
        h.name = "dual".into();
        let h = t.add_node(h).unwrap();
        t.connect(r, 2, s, 1).unwrap();
        t.set_link_rate(r, 2, LinkWidth::X12, LinkSpeed::Edr)
            .unwrap();
        t.connect(h, 1, s, 2).unwrap();
        t.connect(h, 2, s, 3).unwrap();
        t
    }

    #[test]
    fn write_then_parse_round_trips() {
        let t = varied_topology();
        let text = write(&t);
        let back = parse(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(back.len(), t.len());
        for (idx, n) in t.iter() {
            let m = back.node(idx).unwrap();
            let mut expect = n.clone();
            // Quotes do not survive, '=' only on port lines (not here).
            expect.description = expect.description.replace('"', "'");
            assert_eq!(m, &expect, "node {idx}");
        }
        assert_eq!(back, {
            let mut t2 = t.clone();
            t2.set_node_info(NodeIdx(0), "host 'zero' = w=1 s=2", 0x2c9, 7, 0x99)
                .unwrap();
            t2
        });
    }

    #[test]
    fn unnamed_nodes_get_ibnetdiscover_names() {
        let mut t = Topology::new();
        let a = t
            .add_node(Node::new(NodeType::Switch, 0xabc, 4, "sw"))
            .unwrap();
        let b = t
            .add_node(Node::new(NodeType::Ca, 0xdef0, 1, "ca"))
            .unwrap();
        t.connect(a, 3, b, 1).unwrap();
        let text = write(&t);
        assert!(text.contains("\"S-0000000000000abc\""), "{text}");
        let back = parse(&text).unwrap();
        assert_eq!(back.find_by_name("H-000000000000def0"), Some(b));
        assert_eq!(back.neighbor(a, 3), Some((b, 1)));
    }

    proptest! {
        #[test]
        fn random_fabrics_round_trip(seed in any::<u64>(), switches in 1u32..12, per_switch in 0u32..5) {
            let t = gen::random(seed, switches, switches * per_switch, 8).unwrap();
            let back = parse(&write(&t)).unwrap();
            prop_assert_eq!(back, t);
        }

        #[test]
        fn arbitrary_text_never_panics(text in "[\\[\\]\"#@=0-9a-zSwitchHcaCaRt lidmcx\\n\\t]{0,200}") {
            let _ = parse(&text);
        }
    }
}
