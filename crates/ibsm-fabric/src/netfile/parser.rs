//! [`parse`]: the line-by-line reader of ibnetdiscover output and ibsim topologies.
//! It keeps ibsim's per-type GUID counters, the per-node assignments and each port's
//! enabled rates while it reads node records, then cables the listed ports once every
//! node is known, checking that both ends agree.

use super::error::{err, NetFileError, NetFileErrorKind, MAX_DESCRIPTION, MAX_LINE};
use super::rates::{Enabled, S_QDR, S_SDR, W_4X};
use super::scan::{
    assignment, atoi, check_node_id, keyed_number, node_desc, quoted, strtoul, truncate,
};
use crate::topology::{Node, NodeIdx, NodeType, Topology, TopologyError};

#[derive(Debug)]
struct PendingPort {
    line: usize,
    remote: String,
    remote_port: u64,
}

#[derive(Debug)]
struct Record {
    idx: NodeIdx,
    node_type: NodeType,
    num_ports: u8,
    listed: u8,
}

struct Parser {
    topo: Topology,
    /// Current and absolute GUID counters, by NodeType::to_iba() - 1.
    guids: [u64; 3],
    abs_guids: [u64; 3],
    devid: u16,
    vendid: u32,
    sysimgguid: u64,
    defaults: Enabled,
    /// Per node, per port number: enabled rates and the listed cable.
    enabled: Vec<Vec<Enabled>>,
    pending: Vec<Vec<Option<PendingPort>>>,
    record: Option<Record>,
}

fn type_slot(t: NodeType) -> usize {
    match t {
        NodeType::Ca => 0,
        NodeType::Switch => 1,
        NodeType::Router => 2,
    }
}

impl Parser {
    fn new() -> Parser {
        Parser {
            topo: Topology::new(),
            guids: [0x10_0000, 0x20_0000, 0],
            abs_guids: [0x10_0000, 0x20_0000, 0],
            devid: 0,
            vendid: 0,
            sysimgguid: 0,
            defaults: Enabled {
                width: W_4X,
                speed: S_SDR,
                ext: 0,
                fdr10: false,
            },
            enabled: Vec::new(),
            pending: Vec::new(),
            record: None,
        }
    }

    fn line(&mut self, no: usize, line: &str) -> Result<(), NetFileError> {
        if line.len() > MAX_LINE {
            return Err(err(no, NetFileErrorKind::LineTooLong(line.len())));
        }
        if self.record.is_some() {
            if line.starts_with('#') {
                return Ok(());
            }
            if line.starts_with('@') {
                return Err(err(no, NetFileErrorKind::Unsupported("an @alias port")));
            }
            if line.starts_with('[') {
                return self.port_line(no, line);
            }
            self.record = None;
            if line.trim().is_empty() {
                return Ok(());
            }
            return Err(err(no, NetFileErrorKind::SwallowedLine(line.to_string())));
        }
        let starts = |p: &str| line.starts_with(p);
        if starts("Switch") {
            self.header(no, line, NodeType::Switch, "Switch".len(), 6)
        } else if starts("Hca") {
            self.header(no, line, NodeType::Ca, "Hca".len(), 3)
        } else if starts("Ca") {
            self.header(no, line, NodeType::Ca, "Ca".len(), 3)
        } else if starts("Rt") {
            self.header(no, line, NodeType::Router, "Rt".len(), 3)
        } else if starts("switchguid") {
            self.guid_base(no, line, NodeType::Switch)
        } else if starts("hcaguids") || starts("caguid") {
            self.guid_base(no, line, NodeType::Ca)
        } else if starts("rtguid") {
            self.guid_base(no, line, NodeType::Router)
        } else if starts("vendid") {
            let (v, _) = assignment(no, line, "vendor id")?;
            self.vendid = u32::try_from(v)
                .ok()
                .filter(|v| *v <= 0xff_ffff)
                .ok_or_else(|| err(no, range("vendor id", v, "0..=0xffffff")))?;
            Ok(())
        } else if starts("devid") {
            let (v, _) = assignment(no, line, "device id")?;
            self.devid =
                u16::try_from(v).map_err(|_| err(no, range("device id", v, "0..=0xffff")))?;
            Ok(())
        } else if starts("sysimgguid") {
            self.sysimgguid = assignment(no, line, "system image GUID")?.0;
            Ok(())
        } else if starts("width") {
            let (v, _) = assignment(no, line, "width")?;
            self.defaults.width = u8::try_from(v)
                .ok()
                .filter(|v| (1..=31).contains(v))
                .ok_or_else(|| err(no, range("enabled width", v, "1..=31")))?;
            Ok(())
        } else if starts("speed") {
            let (v, _) = assignment(no, line, "speed")?;
            self.defaults.speed = u8::try_from(v)
                .ok()
                .filter(|v| (1..=7).contains(v))
                .ok_or_else(|| err(no, range("enabled speed", v, "1..=7")))?;
            Ok(())
        } else if starts("extspeed") {
            let (v, _) = assignment(no, line, "extended speed")?;
            self.defaults.ext = u8::try_from(v)
                .ok()
                .filter(|v| *v <= 15)
                .ok_or_else(|| err(no, range("enabled extended speed", v, "0..=15")))?;
            Ok(())
        } else if starts("module") {
            Err(err(
                no,
                NetFileErrorKind::Unsupported("module= (node id prefix)"),
            ))
        } else if starts("include") {
            Err(err(no, NetFileErrorKind::Unsupported("include")))
        } else if starts("pdebug") {
            Ok(())
        } else if starts("do") {
            Err(err(
                no,
                NetFileErrorKind::Unsupported("do <console command>"),
            ))
        } else if line.starts_with('[') || line.starts_with('@') {
            Err(err(no, NetFileErrorKind::PortOutsideRecord))
        } else if line.trim().is_empty() || line.starts_with('#') {
            Ok(())
        } else {
            Err(err(
                no,
                NetFileErrorKind::UnrecognizedLine(line.to_string()),
            ))
        }
    }

    fn guid_base(&mut self, no: usize, line: &str, t: NodeType) -> Result<(), NetFileError> {
        let (v, relative) = assignment(no, line, "GUID")?;
        let slot = type_slot(t);
        let (Some(cur), Some(abs)) = (self.guids.get_mut(slot), self.abs_guids.get_mut(slot))
        else {
            return Ok(());
        };
        if relative {
            *cur = abs.wrapping_add(v);
        } else {
            *abs = v;
            *cur = v;
        }
        Ok(())
    }

    fn header(
        &mut self,
        no: usize,
        line: &str,
        t: NodeType,
        kw_len: usize,
        ibsim_offset: usize,
    ) -> Result<(), NetFileError> {
        // Port count: ibsim skips non-digits from a fixed offset.
        let count_at = |from: usize| -> Option<(u64, usize)> {
            let s = line.get(from..)?;
            let skip = s.find(|c: char| c.is_ascii_digit())?;
            if s.get(..skip)?.contains('"') {
                return None;
            }
            strtoul(s.get(skip..)?).map(|(v, _)| (v, skip))
        };
        let (ours, _) =
            count_at(kw_len).ok_or_else(|| err(no, NetFileErrorKind::MissingPortCount))?;
        let ibsim = count_at(ibsim_offset).map_or(0, |(v, _)| v);
        if ibsim != ours {
            return Err(err(
                no,
                NetFileErrorKind::AmbiguousPortCount { ours, ibsim },
            ));
        }
        let num_ports = u8::try_from(ours)
            .ok()
            .filter(|n| *n >= 1)
            .ok_or_else(|| err(no, range("port count", ours, "1..=255")))?;
        let (id, after_id) =
            quoted(line).ok_or_else(|| err(no, NetFileErrorKind::MissingNodeId))?;
        check_node_id(no, id)?;
        let (desc, rest) = node_desc(after_id);
        let desc = truncate(
            desc.filter(|d| !d.is_empty()).unwrap_or(id),
            MAX_DESCRIPTION,
        );

        let slot = type_slot(t);
        let guid = self.guids.get(slot).copied().unwrap_or(0);
        let mut node = Node::new(t, guid, num_ports, desc);
        node.name = id.to_string();
        node.vendor_id = self.vendid;
        node.device_id = self.devid;
        if self.sysimgguid != 0 {
            node.system_image_guid = self.sysimgguid;
        }
        if t == NodeType::Switch {
            if let (Some(rest), Some(p0)) = (rest, node.ports.first_mut()) {
                let lid = keyed_number(rest, "lid ").unwrap_or(0);
                let lmc = keyed_number(rest, "lmc ").unwrap_or(0);
                p0.lid =
                    u16::try_from(lid).map_err(|_| err(no, range("LID", lid, "0..=0xffff")))?;
                p0.lmc = u8::try_from(lmc)
                    .ok()
                    .filter(|l| *l <= 7)
                    .ok_or_else(|| err(no, range("LMC", lmc, "0..=7")))?;
            }
        }
        let idx = self.topo.add_node(node).map_err(|e| err(no, e.into()))?;
        if let Some(g) = self.guids.get_mut(slot) {
            *g = g.wrapping_add(if t == NodeType::Switch {
                1
            } else {
                u64::from(num_ports) + 1
            });
        }
        self.vendid = 0;
        self.sysimgguid = 0;
        let slots = usize::from(num_ports) + 1;
        self.enabled.push(vec![self.defaults; slots]);
        self.pending.push((0..slots).map(|_| None).collect());
        self.record = Some(Record {
            idx,
            node_type: t,
            num_ports,
            listed: 0,
        });
        Ok(())
    }

    fn port_line(&mut self, no: usize, line: &str) -> Result<(), NetFileError> {
        let Some(rec) = self.record.as_mut() else {
            return Err(err(no, NetFileErrorKind::PortOutsideRecord));
        };
        let (idx, t, num_ports) = (rec.idx, rec.node_type, rec.num_ports);
        rec.listed = rec.listed.saturating_add(1);
        if rec.listed >= num_ports {
            // ibsim reads at most NumPorts port lines per record.
            self.record = None;
        }
        let after_bracket = line.get(1..).unwrap_or("");
        let port = atoi(after_bracket).map_or(0, |(v, _)| v);
        let port = u8::try_from(port)
            .ok()
            .filter(|p| *p >= 1 && *p <= num_ports)
            .ok_or_else(|| err(no, NetFileErrorKind::BadPortNumber { port, num_ports }))?;
        let (remote, rest) =
            quoted(line).ok_or_else(|| err(no, NetFileErrorKind::MissingNodeId))?;
        if remote.contains('@') {
            return Err(err(no, NetFileErrorKind::Unsupported("an @alias remote")));
        }
        let remote_port = match rest.strip_prefix('[') {
            Some(rp) => match atoi(rp) {
                Some((v, _)) if v > 0 => v.unsigned_abs(),
                _ => {
                    return Err(err(
                        no,
                        NetFileErrorKind::BadRemotePort(rp.chars().take(8).collect()),
                    ))
                }
            },
            None => 1,
        };
        let slot = self
            .pending
            .get_mut(idx.as_usize())
            .and_then(|v| v.get_mut(usize::from(port)));
        match slot {
            Some(Some(_)) => return Err(err(no, NetFileErrorKind::DuplicatePort(port))),
            Some(s) => {
                *s = Some(PendingPort {
                    line: no,
                    remote: remote.to_string(),
                    remote_port,
                })
            }
            None => {}
        }
        let mut en = self
            .enabled
            .get(idx.as_usize())
            .and_then(|v| v.get(usize::from(port)))
            .copied()
            .unwrap_or(self.defaults);
        // Options: every '=' after the first character past the remote id,
        // named by the nearest letter before it (ibsim scans comments too).
        let rest_off = line.len() - rest.len();
        let bytes = line.as_bytes();
        for (i, _) in rest.match_indices('=').filter(|(i, _)| *i >= 1) {
            let eq = rest_off + i;
            let opt = bytes
                .get(..eq)
                .and_then(|b| b.iter().rev().find(|c| c.is_ascii_alphabetic()))
                .map(|c| char::from(*c));
            let Some(opt @ ('w' | 's' | 'e')) = opt else {
                continue;
            };
            let val_text = line.get(eq + 1..).unwrap_or("");
            let v = strtoul(val_text).map(|(v, _)| v).ok_or_else(|| {
                err(
                    no,
                    NetFileErrorKind::BadNumber {
                        what: "port option value",
                        text: val_text.chars().take(8).collect(),
                    },
                )
            })?;
            let bad = || err(no, NetFileErrorKind::BadOption { opt, value: v });
            match opt {
                'w' => {
                    en.width = u8::try_from(v)
                        .ok()
                        .filter(|v| (1..=31).contains(v))
                        .ok_or_else(bad)?
                }
                's' => {
                    en.speed = match v {
                        0 => S_QDR,
                        1..=7 => u8::try_from(v).map_err(|_| bad())?,
                        _ => return Err(bad()),
                    }
                }
                _ => en.ext = u8::try_from(v).ok().filter(|v| *v <= 15).ok_or_else(bad)?,
            }
        }
        // ibnetdiscover annotations: "lid" with no quote after it.
        if t != NodeType::Router {
            let tail_from = rest.rfind('"').map_or(0, |q| q + 1);
            if let Some(at) = rest.get(tail_from..).and_then(|t| t.find("lid")) {
                if t == NodeType::Ca {
                    let lid = keyed_number(rest, "lid ").unwrap_or(0);
                    let lmc = keyed_number(rest, "lmc ").unwrap_or(0);
                    let lid =
                        u16::try_from(lid).map_err(|_| err(no, range("LID", lid, "0..=0xffff")))?;
                    let lmc = u8::try_from(lmc)
                        .ok()
                        .filter(|l| *l <= 7)
                        .ok_or_else(|| err(no, range("LMC", lmc, "0..=7")))?;
                    self.topo
                        .set_port_lid(idx, port, lid, lmc)
                        .map_err(|e| err(no, e.into()))?;
                }
                if let Some(ann) = rest.get(tail_from + at..) {
                    en.apply_annotation(ann);
                }
            }
        }
        if let Some(e) = self
            .enabled
            .get_mut(idx.as_usize())
            .and_then(|v| v.get_mut(usize::from(port)))
        {
            *e = en;
        }
        Ok(())
    }

    /// Cable every listed port, checking both ends agree (ibsim's connect_ports).
    fn link(mut self) -> Result<Topology, NetFileError> {
        for a in 0..self.pending.len() {
            let a_idx = NodeIdx(u32::try_from(a).map_err(|_| err(0, TopologyError::Full.into()))?);
            let nports = self.pending.get(a).map_or(0, Vec::len);
            for pa in 1..nports {
                let Some(Some(p)) = self.pending.get(a).and_then(|v| v.get(pa)) else {
                    continue;
                };
                let pa = u8::try_from(pa).unwrap_or(u8::MAX);
                if self.topo.neighbor(a_idx, pa).is_some() {
                    continue;
                }
                let no = p.line;
                let b = self.topo.find_by_name(&p.remote).ok_or_else(|| {
                    err(
                        no,
                        NetFileErrorKind::UnknownRemote {
                            port: pa,
                            remote: p.remote.clone(),
                        },
                    )
                })?;
                let b_ports = self.topo.node(b).map_or(0, |n| n.num_ports());
                let pb = u8::try_from(p.remote_port)
                    .ok()
                    .filter(|rp| *rp <= b_ports)
                    .ok_or_else(|| {
                        err(
                            no,
                            NetFileErrorKind::RemotePortOutOfRange {
                                port: pa,
                                remote: p.remote.clone(),
                                remote_port: p.remote_port,
                                num_ports: b_ports,
                            },
                        )
                    })?;
                let a_name = self.topo.node(a_idx).map_or("", |n| n.name.as_str());
                let back = self
                    .pending
                    .get(b.as_usize())
                    .and_then(|v| v.get(usize::from(pb)))
                    .and_then(Option::as_ref);
                let agrees =
                    back.is_some_and(|q| q.remote == a_name && q.remote_port == u64::from(pa));
                if !agrees {
                    let back = back.map_or_else(
                        || "nothing".to_string(),
                        |q| format!("{:?}[{}]", q.remote, q.remote_port),
                    );
                    return Err(err(
                        no,
                        NetFileErrorKind::Asymmetric {
                            port: pa,
                            remote: p.remote.clone(),
                            remote_port: pb,
                            back,
                        },
                    ));
                }
                let en = |n: NodeIdx, port: u8| {
                    self.enabled
                        .get(n.as_usize())
                        .and_then(|v| v.get(usize::from(port)))
                        .copied()
                };
                let (Some(ea), Some(eb)) = (en(a_idx, pa), en(b, pb)) else {
                    continue;
                };
                let mismatch = |what| {
                    err(
                        no,
                        NetFileErrorKind::RateMismatch {
                            port: pa,
                            remote: p.remote.clone(),
                            remote_port: pb,
                            what,
                        },
                    )
                };
                let width = ea.active_width(eb).ok_or_else(|| mismatch("width"))?;
                let speed = ea.active_speed(eb).ok_or_else(|| mismatch("speed"))?;
                self.topo
                    .connect(a_idx, pa, b, pb)
                    .map_err(|e| err(no, e.into()))?;
                self.topo
                    .set_link_rate(a_idx, pa, width, speed)
                    .map_err(|e| err(no, e.into()))?;
            }
        }
        Ok(self.topo)
    }
}

fn range(what: &'static str, value: u64, range: &'static str) -> NetFileErrorKind {
    NetFileErrorKind::OutOfRange { what, value, range }
}

/// Parse a net file (ibnetdiscover output or an ibsim topology).
pub fn parse(text: &str) -> Result<Topology, NetFileError> {
    let mut p = Parser::new();
    for (i, line) in text.lines().enumerate() {
        p.line(i + 1, line)?;
    }
    let topo = p.link()?;
    tracing::debug!(nodes = topo.len(), "parsed net file");
    Ok(topo)
}
