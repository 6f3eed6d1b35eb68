//! Record queries: a template and a ComponentMask from the filters given, then a
//! whole GetTable (or a Get with `--get`).

use clap::{Args, Subcommand};
use ibsm_mad::sa::{
    ClassPortInfo, ComponentMask, GuidInfoRecord, InformInfoRecord, LinearForwardingTableRecord,
    LinkRecord, McMemberRecord, MulticastForwardingTableRecord, NodeRecord, PKeyTableRecord,
    PathRecord, PortInfoRecord, ServiceName, ServiceRecord, SlToVlMappingTableRecord, SmInfoRecord,
    SwitchInfoRecord, VlArbitrationTableRecord,
};

use super::common::{parse_gid, parse_num, Client, Out, SaFailure};
use super::repair::{repair, Keyed};
use crate::fabric::parse_lid;

/// `--lid`.
#[derive(Args, Debug, Clone, Default)]
pub struct LidFilter {
    /// LID (decimal or 0x-hex).
    #[arg(long, value_parser = parse_lid)]
    pub lid: Option<u16>,
}

/// NodeRecord filters.
#[derive(Args, Debug, Clone, Default)]
pub struct NodeFilter {
    /// LID.
    #[arg(long, value_parser = parse_lid)]
    pub lid: Option<u16>,
    /// NodeGUID.
    #[arg(long, value_parser = crate::args::parse_guid)]
    pub node_guid: Option<u64>,
    /// PortGUID.
    #[arg(long, value_parser = crate::args::parse_guid)]
    pub port_guid: Option<u64>,
}

/// `--lid`, `--port`.
#[derive(Args, Debug, Clone, Default)]
pub struct LidPortFilter {
    /// End port LID (a switch's LID for each of its ports).
    #[arg(long, value_parser = parse_lid)]
    pub lid: Option<u16>,
    /// Port number.
    #[arg(long, value_parser = parse_num::<u8>)]
    pub port: Option<u8>,
}

/// LinkRecord filters.
#[derive(Args, Debug, Clone, Default)]
pub struct LinkFilter {
    /// FromLID.
    #[arg(long, value_parser = parse_lid)]
    pub from_lid: Option<u16>,
    /// FromPort.
    #[arg(long, value_parser = parse_num::<u8>)]
    pub from_port: Option<u8>,
    /// ToLID.
    #[arg(long, value_parser = parse_lid)]
    pub to_lid: Option<u16>,
    /// ToPort.
    #[arg(long, value_parser = parse_num::<u8>)]
    pub to_port: Option<u8>,
}

/// `--lid`, `--block`.
#[derive(Args, Debug, Clone, Default)]
pub struct LidBlockFilter {
    /// LID.
    #[arg(long, value_parser = parse_lid)]
    pub lid: Option<u16>,
    /// Block number.
    #[arg(long, value_parser = parse_num::<u16>)]
    pub block: Option<u16>,
}

/// P_KeyTableRecord filters.
#[derive(Args, Debug, Clone, Default)]
pub struct PkeyFilter {
    /// LID.
    #[arg(long, value_parser = parse_lid)]
    pub lid: Option<u16>,
    /// Port number.
    #[arg(long, value_parser = parse_num::<u8>)]
    pub port: Option<u8>,
    /// Block number.
    #[arg(long, value_parser = parse_num::<u16>)]
    pub block: Option<u16>,
}

/// SLtoVLMappingTableRecord filters.
#[derive(Args, Debug, Clone, Default)]
pub struct Sl2VlFilter {
    /// LID.
    #[arg(long, value_parser = parse_lid)]
    pub lid: Option<u16>,
    /// Input port.
    #[arg(long, value_parser = parse_num::<u8>)]
    pub in_port: Option<u8>,
    /// Output port.
    #[arg(long, value_parser = parse_num::<u8>)]
    pub out_port: Option<u8>,
}

/// VLArbitrationTableRecord filters.
#[derive(Args, Debug, Clone, Default)]
pub struct VlArbFilter {
    /// LID.
    #[arg(long, value_parser = parse_lid)]
    pub lid: Option<u16>,
    /// Output port.
    #[arg(long, value_parser = parse_num::<u8>)]
    pub port: Option<u8>,
    /// Block (1 low, 2 high, 3 preempt...).
    #[arg(long, value_parser = parse_num::<u8>)]
    pub block: Option<u8>,
}

/// MulticastForwardingTableRecord filters.
#[derive(Args, Debug, Clone, Default)]
pub struct MftFilter {
    /// LID.
    #[arg(long, value_parser = parse_lid)]
    pub lid: Option<u16>,
    /// Block number (32 MLIDs each).
    #[arg(long, value_parser = parse_num::<u16>)]
    pub block: Option<u16>,
    /// Position (16 ports each).
    #[arg(long, value_parser = parse_num::<u8>)]
    pub position: Option<u8>,
}

/// PathRecord filters.
#[derive(Args, Debug, Clone, Default)]
pub struct PathFilter {
    /// Source LID [default: this port].
    #[arg(long, value_parser = parse_lid)]
    pub slid: Option<u16>,
    /// Destination LID [default: every end port].
    #[arg(long, value_parser = parse_lid)]
    pub dlid: Option<u16>,
    /// Every end port to every end port: one GetTable per LID of every end port
    /// (each CA port and switch port 0, every LID of an LMC range), the LIDs from the
    /// PortInfoRecord table.
    #[arg(long, conflicts_with_all = ["slid", "dlid"])]
    pub all: bool,
    /// GetTables in flight for --all.
    #[arg(long, default_value_t = 8)]
    pub window: usize,
}

/// MCMemberRecord filters.
#[derive(Args, Debug, Clone, Default)]
pub struct MemberFilter {
    /// MGID (IPv6 notation).
    #[arg(long, value_parser = parse_gid)]
    pub mgid: Option<[u8; 16]>,
    /// PortGID of one member.
    #[arg(long, value_parser = parse_gid)]
    pub port_gid: Option<[u8; 16]>,
    /// MLID.
    #[arg(long, value_parser = parse_num::<u16>)]
    pub mlid: Option<u16>,
}

/// ServiceRecord filters.
#[derive(Args, Debug, Clone, Default)]
pub struct ServiceFilter {
    /// ServiceID.
    #[arg(long, value_parser = crate::args::parse_guid)]
    pub id: Option<u64>,
    /// ServiceName.
    #[arg(long)]
    pub name: Option<String>,
}

/// The record queries.
#[derive(Subcommand, Debug)]
pub enum QueryCmd {
    /// NodeRecords (filters: LID, node or port GUID).
    Nodes(NodeFilter),
    /// PortInfoRecords (filters: LID, port).
    #[command(name = "portinfo")]
    PortInfo(LidPortFilter),
    /// LinkRecords (filters: from/to LID and port).
    Links(LinkFilter),
    /// SMInfoRecords.
    #[command(name = "sminfo")]
    SmInfo(LidFilter),
    /// SwitchInfoRecords.
    #[command(name = "switchinfo")]
    SwitchInfo(LidFilter),
    /// GUIDInfoRecords.
    #[command(name = "guidinfo")]
    GuidInfo(LidBlockFilter),
    /// P_KeyTableRecords.
    Pkeys(PkeyFilter),
    /// SLtoVLMappingTableRecords.
    Sl2vl(Sl2VlFilter),
    /// VLArbitrationTableRecords.
    Vlarb(VlArbFilter),
    /// LinearForwardingTableRecords.
    Lft(LidBlockFilter),
    /// MulticastForwardingTableRecords.
    Mft(MftFilter),
    /// The SA's ClassPortInfo.
    ClassPortInfo,
    /// PathRecords: from this port (or --slid) to every port (or --dlid); --all: every
    /// end port to every end port (one GetTable per source, pipelined).
    Paths(PathFilter),
    /// MCMemberRecords (groups; with --sm-key every member).
    Members(MemberFilter),
    /// ServiceRecords.
    Services(ServiceFilter),
    /// InformInfoRecords (subscriptions; with --sm-key everyone's).
    Informs,
}

/// Set `field` and add `component` when `value` is given.
fn opt<T: Copy>(
    value: Option<T>,
    mask: &mut ComponentMask,
    component: ComponentMask,
    mut set: impl FnMut(T),
) {
    if let Some(v) = value {
        set(v);
        *mask |= component;
    }
}

fn ask<R: Keyed>(
    c: &mut Client,
    out: &Out,
    kind: &str,
    template: R,
    mask: ComponentMask,
    get: bool,
) -> Result<(), SaFailure> {
    if get {
        out.records(kind, &[c.get(&template, mask)?], &[]);
        return Ok(());
    }
    let table = c.get_table_checked(&template, mask)?;
    let r = repair(c, table)?;
    out.records(kind, &r.records, &r.damaged);
    Ok(())
}

/// Every record query.
pub fn run(c: &mut Client, out: &Out, cmd: &QueryCmd, get: bool) -> Result<(), SaFailure> {
    let mut m = ComponentMask::NONE;
    match cmd {
        QueryCmd::Nodes(f) => {
            let mut t = NodeRecord::default();
            opt(f.lid, &mut m, NodeRecord::LID, |v| t.lid = v);
            opt(f.node_guid, &mut m, NodeRecord::NODE_GUID, |v| {
                t.node_info.node_guid = v
            });
            opt(f.port_guid, &mut m, NodeRecord::PORT_GUID, |v| {
                t.node_info.port_guid = v
            });
            ask(c, out, "NodeRecord", t, m, get)
        }
        QueryCmd::PortInfo(f) => {
            let mut t = PortInfoRecord::default();
            opt(f.lid, &mut m, PortInfoRecord::ENDPORT_LID, |v| {
                t.endport_lid = v
            });
            opt(f.port, &mut m, PortInfoRecord::PORT_NUM, |v| t.port_num = v);
            ask(c, out, "PortInfoRecord", t, m, get)
        }
        QueryCmd::Links(f) => {
            let mut t = LinkRecord::default();
            opt(f.from_lid, &mut m, LinkRecord::FROM_LID, |v| t.from_lid = v);
            opt(f.from_port, &mut m, LinkRecord::FROM_PORT, |v| {
                t.from_port = v
            });
            opt(f.to_lid, &mut m, LinkRecord::TO_LID, |v| t.to_lid = v);
            opt(f.to_port, &mut m, LinkRecord::TO_PORT, |v| t.to_port = v);
            ask(c, out, "LinkRecord", t, m, get)
        }
        QueryCmd::SmInfo(f) => {
            let mut t = SmInfoRecord::default();
            opt(f.lid, &mut m, SmInfoRecord::LID, |v| t.lid = v);
            ask(c, out, "SMInfoRecord", t, m, get)
        }
        QueryCmd::SwitchInfo(f) => {
            let mut t = SwitchInfoRecord::default();
            opt(f.lid, &mut m, SwitchInfoRecord::LID, |v| t.lid = v);
            ask(c, out, "SwitchInfoRecord", t, m, get)
        }
        QueryCmd::GuidInfo(f) => {
            let mut t = GuidInfoRecord::default();
            opt(f.lid, &mut m, GuidInfoRecord::LID, |v| t.lid = v);
            let block = f
                .block
                .map(u8::try_from)
                .transpose()
                .map_err(|_| SaFailure {
                    message: "GUIDInfo blocks are 0-255".into(),
                    code: 2,
                })?;
            opt(block, &mut m, GuidInfoRecord::BLOCK_NUM, |v| {
                t.block_num = v
            });
            ask(c, out, "GUIDInfoRecord", t, m, get)
        }
        QueryCmd::Pkeys(f) => {
            let mut t = PKeyTableRecord::default();
            opt(f.lid, &mut m, PKeyTableRecord::LID, |v| t.lid = v);
            opt(f.port, &mut m, PKeyTableRecord::PORT_NUM, |v| {
                t.port_num = v
            });
            opt(f.block, &mut m, PKeyTableRecord::BLOCK_NUM, |v| {
                t.block_num = v
            });
            ask(c, out, "P_KeyTableRecord", t, m, get)
        }
        QueryCmd::Sl2vl(f) => {
            let mut t = SlToVlMappingTableRecord::default();
            opt(f.lid, &mut m, SlToVlMappingTableRecord::LID, |v| t.lid = v);
            opt(
                f.in_port,
                &mut m,
                SlToVlMappingTableRecord::INPUT_PORT_NUM,
                |v| t.input_port_num = v,
            );
            opt(
                f.out_port,
                &mut m,
                SlToVlMappingTableRecord::OUTPUT_PORT_NUM,
                |v| t.output_port_num = v,
            );
            ask(c, out, "SLtoVLMappingTableRecord", t, m, get)
        }
        QueryCmd::Vlarb(f) => {
            let mut t = VlArbitrationTableRecord::default();
            opt(f.lid, &mut m, VlArbitrationTableRecord::LID, |v| t.lid = v);
            opt(
                f.port,
                &mut m,
                VlArbitrationTableRecord::OUTPUT_PORT_NUM,
                |v| t.output_port_num = v,
            );
            opt(f.block, &mut m, VlArbitrationTableRecord::BLOCK_NUM, |v| {
                t.block_num = v
            });
            ask(c, out, "VLArbitrationTableRecord", t, m, get)
        }
        QueryCmd::Lft(f) => {
            let mut t = LinearForwardingTableRecord::default();
            opt(f.lid, &mut m, LinearForwardingTableRecord::LID, |v| {
                t.lid = v
            });
            opt(
                f.block,
                &mut m,
                LinearForwardingTableRecord::BLOCK_NUM,
                |v| t.block_num = v,
            );
            ask(c, out, "LinearForwardingTableRecord", t, m, get)
        }
        QueryCmd::Mft(f) => {
            let mut t = MulticastForwardingTableRecord::default();
            opt(f.lid, &mut m, MulticastForwardingTableRecord::LID, |v| {
                t.lid = v
            });
            opt(
                f.block,
                &mut m,
                MulticastForwardingTableRecord::BLOCK_NUM,
                |v| t.block_num = v,
            );
            opt(
                f.position,
                &mut m,
                MulticastForwardingTableRecord::POSITION,
                |v| t.position = v,
            );
            ask(c, out, "MulticastForwardingTableRecord", t, m, get)
        }
        QueryCmd::ClassPortInfo => {
            let cpi: ClassPortInfo = c.class_port_info()?;
            out.records("ClassPortInfo", &[cpi], &[]);
            Ok(())
        }
        QueryCmd::Paths(f) => paths(c, out, f, get),
        QueryCmd::Members(f) => {
            let mut t = McMemberRecord::default();
            opt(f.mgid, &mut m, McMemberRecord::MGID, |v| t.mgid = v);
            opt(f.port_gid, &mut m, McMemberRecord::PORT_GID, |v| {
                t.port_gid = v
            });
            opt(f.mlid, &mut m, McMemberRecord::MLID, |v| t.mlid = v);
            ask(c, out, "MCMemberRecord", t, m, get)
        }
        QueryCmd::Services(f) => {
            let mut t = ServiceRecord::default();
            opt(f.id, &mut m, ServiceRecord::SERVICE_ID, |v| {
                t.service_id = v
            });
            if let Some(n) = &f.name {
                t.service_name = ServiceName::new(n);
                m |= ServiceRecord::SERVICE_NAME;
            }
            ask(c, out, "ServiceRecord", t, m, get)
        }
        QueryCmd::Informs => ask(
            c,
            out,
            "InformInfoRecord",
            InformInfoRecord::default(),
            m,
            get,
        ),
    }
}

fn paths(c: &mut Client, out: &Out, f: &PathFilter, get: bool) -> Result<(), SaFailure> {
    if f.all {
        let slids = super::end_ports::end_port_lids(c)?;
        let table = c.paths_from_checked(&slids, f.window)?;
        let r = super::repair::repair_with(c, table, false)?;
        out.records("PathRecord", &r.records, &r.damaged);
        return Ok(());
    }
    let mut m = ComponentMask::NONE;
    let mut t = PathRecord::default();
    opt(f.slid, &mut m, PathRecord::SLID, |v| t.slid = v);
    opt(f.dlid, &mut m, PathRecord::DLID, |v| t.dlid = v);
    ask(c, out, "PathRecord", t, m, get)
}
