//! `ibsm.v1.Fabric`: topology, LIDs, routes and partitions as the MASTER configured
//! them (see [`crate::fabric_view`] for why answers come from a published snapshot).
//!
//! Where an answer comes from, in order: this SM's own view while it is MASTER
//! (`source = "master"`); otherwise its replica, which carries the replicated
//! guid2lid and cabling but no LFTs (`"replica"`); otherwise `FAILED_PRECONDITION`
//! naming the master to ask. Routes need the LFTs, so only a MASTER (or a former
//! master with its last view, `"last-view"`) answers `GetRoute`.
//!
//! Partitions: `SetPartition` validates everything it can (P_Key 15 bits, not 0 nor
//! the default 0x7fff, known full/limited members, no duplicate GUID, a name no other
//! replicated P_Key uses, at most 31 partitions per port) and commits the partition to
//! the replicated configuration (`partition/<pkey>`) on whichever member it lands. The
//! MASTER's instance reads the replicated partitions from its own replica (see
//! [`crate::replication`], "Partitions set through the API") and its next heavy sweep
//! programs the P_Key tables; the answer says that, with the log index. `ListPartitions`
//! says `source = "master"` only when the list is exactly what this MASTER's last heavy
//! sweep programmed; a list that includes replicated partitions not (yet) programmed
//! here says `"replica"`.

use std::sync::Arc;
use std::time::Duration;

use ibsm_core::election::SmState;
use ibsm_proto::v1 as pb;
use ibsm_proto::v1::fabric_server::Fabric;
use tonic::{Request, Response, Status};

use crate::fabric_view::{FabricView, RouteError};
use crate::instance::Snapshot;
use crate::replication::Replication;
use crate::slot::InstanceSlot;

pub use crate::replication::PARTITION_KEY;

/// The Fabric service of one endpoint.
#[derive(Debug, Clone)]
pub struct FabricService {
    slot: InstanceSlot,
    name: String,
    repl: Option<Arc<Replication>>,
    partitions_file: Option<std::path::PathBuf>,
}

/// What a request is answered from.
enum Source {
    Master(Arc<FabricView>),
    LastView(Arc<FabricView>),
    Replica(Box<ibsm_replica::FabricState>),
}

impl FabricService {
    /// Serve the instance in `slot` (`name` for errors), with its replica if any.
    pub fn new(slot: InstanceSlot, name: &str, repl: Option<Arc<Replication>>) -> FabricService {
        FabricService {
            slot,
            name: name.to_string(),
            repl,
            partitions_file: None,
        }
    }

    /// The `--partitions-file` that `ReloadPartitions` reads again.
    pub fn with_partitions_file(mut self, file: Option<std::path::PathBuf>) -> FabricService {
        self.partitions_file = file;
        self
    }

    fn snapshot(&self) -> Result<Snapshot, Status> {
        let inst = match self.slot.read() {
            Ok(s) => s.clone(),
            Err(p) => p.into_inner().clone(),
        };
        inst.map(|i| i.status()).ok_or_else(|| {
            Status::unavailable(format!(
                "SM instance {} is not running (stopped by a demo drill; RestartInstance starts it again)",
                self.name
            ))
        })
    }

    fn no_view(s: &Snapshot, what: &str) -> Status {
        Status::failed_precondition(format!(
            "this SM is {:?}, has no replica and never configured the fabric, so it cannot tell {what}: ask the master (GUID {:#018x}, LID {})",
            s.state, s.master_guid, s.master_lid
        ))
    }

    /// Master view, else replica, else the last view of a former master.
    fn source(&self, what: &str, need_lfts: bool) -> Result<Source, Status> {
        let s = self.snapshot()?;
        match (&s.fabric, s.state) {
            (Some(v), SmState::Master) => return Ok(Source::Master(Arc::clone(v))),
            (None, SmState::Master) => {
                return Err(Status::unavailable(
                    "this SM is MASTER but its first heavy sweep has not finished yet; retry in a moment",
                ))
            }
            _ => {}
        }
        if !need_lfts {
            if let Some(r) = &self.repl {
                return Ok(Source::Replica(Box::new(r.replica().state())));
            }
        }
        match &s.fabric {
            Some(v) => Ok(Source::LastView(Arc::clone(v))),
            None if need_lfts => Err(Status::failed_precondition(format!(
                "this SM is {:?}: {what} needs the LFTs the master programmed, which only the master holds: ask the master (GUID {:#018x}, LID {})",
                s.state, s.master_guid, s.master_lid
            ))),
            None => Err(Self::no_view(&s, what)),
        }
    }
}

fn source_name(s: &Source) -> &'static str {
    match s {
        Source::Master(_) => "master",
        Source::LastView(_) => "last-view",
        Source::Replica(_) => "replica",
    }
}

fn topology_of_view(v: &FabricView) -> Vec<pb::TopoNodeEntry> {
    let t = &v.topology;
    let mut nodes: Vec<pb::TopoNodeEntry> = t
        .iter()
        .map(|(idx, n)| {
            let lost = |num: usize| {
                v.lost
                    .iter()
                    .find(|l| l.node_guid == n.node_guid && usize::from(l.port) == num)
            };
            let ports = n
                .ports
                .iter()
                .enumerate()
                .filter(|(num, p)| {
                    if n.is_switch() {
                        *num == 0 || p.remote.is_some() || lost(*num).is_some()
                    } else {
                        *num != 0
                    }
                })
                .map(|(num, p)| {
                    let remote = p
                        .remote
                        .and_then(|(rn, rp)| Some((t.node(rn)?.node_guid, rp)))
                        .or_else(|| lost(num).map(|l| (l.remote_node_guid, l.remote_port)));
                    let (state, phys) = v.port_state(idx, num);
                    pb::TopoPort {
                        num: u32::try_from(num).unwrap_or(u32::MAX),
                        port_guid: p.port_guid,
                        lid: u32::from(p.lid),
                        lmc: u32::from(p.lmc),
                        remote_node_guid: remote.map_or(0, |r| r.0),
                        remote_port: remote.map_or(0, |r| u32::from(r.1)),
                        port_state: u32::from(state),
                        phys_state: u32::from(phys),
                        read_lid: u32::from(v.end_port_read_lid(idx, num, n.is_switch())),
                    }
                })
                .collect();
            pb::TopoNodeEntry {
                node_guid: n.node_guid,
                node_type: u32::from(n.node_type.to_iba()),
                description: n.description.clone(),
                num_ports: u32::from(n.num_ports()),
                ports,
            }
        })
        .collect();
    // The far ends of pulled cables, no longer reached: listed so the link can be
    // drawn (down), with the state of their port unknown (0).
    for l in &v.lost {
        if nodes.iter().any(|n| n.node_guid == l.remote_node_guid) {
            continue;
        }
        nodes.push(pb::TopoNodeEntry {
            node_guid: l.remote_node_guid,
            node_type: u32::from(l.remote_type),
            description: l.remote_description.clone(),
            num_ports: 0,
            ports: vec![pb::TopoPort {
                num: u32::from(l.remote_port),
                remote_node_guid: l.node_guid,
                remote_port: u32::from(l.port),
                ..Default::default()
            }],
        });
    }
    nodes
}

fn topology_of_replica(st: &ibsm_replica::FabricState) -> Result<pb::TopologyResponse, Status> {
    let t = st.topology.as_ref().ok_or_else(|| {
        Status::failed_precondition(
            "the replica holds no topology yet (no master has published a heavy sweep)",
        )
    })?;
    let mut nodes: Vec<pb::TopoNodeEntry> = t
        .nodes
        .iter()
        .map(|n| pb::TopoNodeEntry {
            node_guid: n.node_guid,
            node_type: u32::from(n.node_type),
            description: n.description.clone(),
            num_ports: u32::from(n.num_ports),
            ports: Vec::new(),
        })
        .collect();
    for l in &t.links {
        for (a, pa, b, pb_) in [
            (l.node_guid_a, l.port_a, l.node_guid_b, l.port_b),
            (l.node_guid_b, l.port_b, l.node_guid_a, l.port_a),
        ] {
            if let Some(n) = nodes.iter_mut().find(|n| n.node_guid == a) {
                n.ports.push(pb::TopoPort {
                    num: u32::from(pa),
                    port_guid: 0,
                    lid: 0,
                    lmc: 0,
                    remote_node_guid: b,
                    remote_port: u32::from(pb_),
                    ..Default::default()
                });
            }
        }
    }
    for n in &mut nodes {
        // A switch's port GUID is its node GUID; a CA's is not in the summary.
        if let Some(r) = st.guid2lid.get(&n.node_guid) {
            n.ports.insert(
                0,
                pb::TopoPort {
                    num: 0,
                    port_guid: n.node_guid,
                    lid: u32::from(r.min_lid),
                    ..Default::default()
                },
            );
        }
        n.ports.sort_by_key(|p| p.num);
    }
    let count = |ty: u32| {
        u32::try_from(nodes.iter().filter(|n| n.node_type == ty).count()).unwrap_or(u32::MAX)
    };
    Ok(pb::TopologyResponse {
        source: "replica".into(),
        taken_unix_ms: 0,
        switches: count(2),
        cas: count(1),
        routers: count(3),
        links: u32::try_from(t.links.len()).unwrap_or(u32::MAX),
        nodes,
    })
}

/// LMC of a replicated range (its size is 2^LMC).
fn lmc_of(r: &ibsm_replica::LidRange) -> u32 {
    let span = u32::from(r.max_lid.saturating_sub(r.min_lid)) + 1;
    span.trailing_zeros()
}

fn route_status(e: RouteError) -> Status {
    match e {
        RouteError::UnknownLid { .. } => Status::invalid_argument(e.to_string()),
        _ => Status::failed_precondition(e.to_string()),
    }
}

fn partition_entry(p: &ibsm_core::subnet::Partition) -> pb::PartitionEntry {
    pb::PartitionEntry {
        name: p.name.clone(),
        p_key: u32::from(p.p_key),
        members: p
            .members
            .iter()
            .map(|m| pb::PartitionMemberEntry {
                port_guid: m.port_guid,
                full: m.membership == ibsm_core::subnet::Membership::Full,
            })
            .collect(),
        ipoib: p.ipoib.map(|i| pb::PartitionIpoib {
            rate: u32::from(i.rate),
            mtu: u32::from(i.mtu),
            sl: u32::from(i.sl),
            scope: u32::from(i.scope),
            q_key: i.q_key,
        }),
        groups: p
            .groups
            .iter()
            .map(|g| {
                let m = match g.membership {
                    ibsm_core::subnet::Membership::Full => "full",
                    ibsm_core::subnet::Membership::Limited => "limited",
                };
                format!("{}={m}", g.group.keyword())
            })
            .collect(),
        index0: p.index0,
    }
}

/// The core's form of API IPoIB parameters (`None` if one does not fit its field).
fn core_ipoib(i: &pb::PartitionIpoib) -> Option<ibsm_core::subnet::PartitionIpoib> {
    Some(ibsm_core::subnet::PartitionIpoib {
        rate: u8::try_from(i.rate).ok()?,
        mtu: u8::try_from(i.mtu).ok()?,
        sl: u8::try_from(i.sl).ok()?,
        scope: u8::try_from(i.scope).ok()?,
        q_key: i.q_key,
    })
}

/// The core's form of a validated API partition (`None` if the P_Key does not fit).
fn core_partition(p: &pb::PartitionEntry) -> Option<ibsm_core::subnet::Partition> {
    Some(ibsm_core::subnet::Partition {
        groups: Vec::new(),
        index0: false,
        name: p.name.clone(),
        p_key: u16::try_from(p.p_key).ok()?,
        members: p
            .members
            .iter()
            .map(|m| ibsm_core::subnet::PartitionMember {
                port_guid: m.port_guid,
                membership: if m.full {
                    ibsm_core::subnet::Membership::Full
                } else {
                    ibsm_core::subnet::Membership::Limited
                },
            })
            .collect(),
        ipoib: match &p.ipoib {
            Some(i) => Some(core_ipoib(i)?),
            None => None,
        },
    })
}

/// Check a partition a client asks for; `known` are the port GUIDs of the fabric
/// (empty: not known, GUIDs are not checked).
pub fn validate_partition(p: &pb::PartitionEntry, known: &[u64]) -> Result<(), String> {
    if p.name.trim().is_empty() {
        return Err("the partition needs a name".into());
    }
    if p.name.contains(['|', ',', '\n']) {
        return Err(format!(
            "partition name {:?} may not contain '|', ',' or a newline",
            p.name
        ));
    }
    if p.p_key == 0 {
        return Err("P_Key 0x0000 is invalid (IBA reserves it: no partition)".into());
    }
    if p.p_key > 0x7fff {
        return Err(format!(
            "P_Key {:#06x} does not fit in 15 bits: give the base key 0x0001-0x7ffe (bit 15 is the full-membership bit, set per member with :full)",
            p.p_key
        ));
    }
    if p.p_key == 0x7fff {
        return Err(
            "P_Key 0x7fff is the default partition (every port a member); pick 0x0001-0x7ffe"
                .into(),
        );
    }
    if p.members.is_empty() {
        return Err("a partition needs at least one member GUID".into());
    }
    if !p.groups.is_empty() || p.index0 {
        return Err(
            "port groups (ALL, ALL_CAS, ...) and indx0 come from a --partitions-file only; name the members by GUID".into(),
        );
    }
    if let Some(i) = &p.ipoib {
        let Some(core) = core_ipoib(i) else {
            return Err(format!(
                "ipoib rate {}, mtu {}, sl {}, scope {}: each is one byte at most",
                i.rate, i.mtu, i.sl, i.scope
            ));
        };
        if let Err((field, value, range)) = core.check() {
            return Err(format!("ipoib {field}={value} is out of range ({range})"));
        }
    }
    let mut seen = std::collections::HashSet::new();
    for m in &p.members {
        if m.port_guid == 0 {
            return Err("port GUID 0 names no port".into());
        }
        if !seen.insert(m.port_guid) {
            return Err(format!("port {:#018x} is listed twice", m.port_guid));
        }
        if !known.is_empty() && !known.contains(&m.port_guid) {
            return Err(format!(
                "port GUID {:#018x} is not on the fabric (no port with that GUID in the last sweep)",
                m.port_guid
            ));
        }
    }
    Ok(())
}

#[tonic::async_trait]
impl Fabric for FabricService {
    async fn get_topology(
        &self,
        _req: Request<pb::GetTopologyRequest>,
    ) -> Result<Response<pb::TopologyResponse>, Status> {
        let src = self.source("the topology", false)?;
        // A large fabric's answer takes milliseconds to build: off the async workers, so
        // the other calls on this member (and its Raft heartbeats) are not held behind it.
        let resp = tokio::task::spawn_blocking(move || match &src {
            Source::Master(v) | Source::LastView(v) => {
                let (switches, cas, routers, links) = v.counts();
                Ok(pb::TopologyResponse {
                    source: source_name(&src).into(),
                    taken_unix_ms: v.taken_unix_ms,
                    switches,
                    cas,
                    routers,
                    links,
                    nodes: topology_of_view(v),
                })
            }
            Source::Replica(st) => topology_of_replica(st),
        })
        .await
        .map_err(|e| Status::internal(format!("building the topology answer failed: {e}")))??;
        Ok(Response::new(resp))
    }

    async fn get_lids(
        &self,
        _req: Request<pb::GetLidsRequest>,
    ) -> Result<Response<pb::GetLidsResponse>, Status> {
        let src = self.source("the LIDs", false)?;
        let lids = match &src {
            Source::Master(v) | Source::LastView(v) => v
                .lids()
                .into_iter()
                .map(|l| pb::LidEntry {
                    port_guid: l.port_guid,
                    base_lid: u32::from(l.base_lid),
                    lmc: u32::from(l.lmc),
                    description: v
                        .topology
                        .node(l.node)
                        .map_or(String::new(), |n| n.description.clone()),
                })
                .collect(),
            Source::Replica(st) => {
                let mut v: Vec<pb::LidEntry> = st
                    .guid2lid
                    .iter()
                    .map(|(g, r)| pb::LidEntry {
                        port_guid: *g,
                        base_lid: u32::from(r.min_lid),
                        lmc: lmc_of(r),
                        description: String::new(),
                    })
                    .collect();
                v.sort_by_key(|l| l.base_lid);
                v
            }
        };
        Ok(Response::new(pb::GetLidsResponse {
            source: source_name(&src).into(),
            lids,
        }))
    }

    async fn get_route(
        &self,
        req: Request<pb::GetRouteRequest>,
    ) -> Result<Response<pb::RouteResponse>, Status> {
        let r = req.into_inner();
        let lid = |v: u32, which: &str| {
            u16::try_from(v)
                .ok()
                .filter(|l| (1..=0xBFFF).contains(l))
                .ok_or_else(|| {
                    Status::invalid_argument(format!(
                        "{which} LID {v} is not a unicast LID (1-0xBFFF)"
                    ))
                })
        };
        let (src_lid, dst_lid) = (lid(r.src_lid, "source")?, lid(r.dst_lid, "destination")?);
        let src = self.source("a route", true)?;
        let (Source::Master(v) | Source::LastView(v)) = &src else {
            return Err(Status::internal("route source without LFTs"));
        };
        let route = v.route(src_lid, dst_lid).map_err(route_status)?;
        Ok(Response::new(pb::RouteResponse {
            source: source_name(&src).into(),
            src_lid: u32::from(src_lid),
            dst_lid: u32::from(dst_lid),
            src_port_guid: route.src_port_guid,
            dst_port_guid: route.dst_port_guid,
            hops: route
                .hops
                .into_iter()
                .map(|h| pb::RouteHop {
                    node_guid: h.node_guid,
                    description: h.description,
                    in_port: u32::from(h.in_port),
                    out_port: u32::from(h.out_port),
                })
                .collect(),
        }))
    }

    async fn list_multicast_groups(
        &self,
        _req: Request<pb::ListMulticastGroupsRequest>,
    ) -> Result<Response<pb::ListMulticastGroupsResponse>, Status> {
        let (tables, source) = self.sa_tables()?;
        Ok(Response::new(pb::ListMulticastGroupsResponse {
            source: source.into(),
            groups: crate::fabric_sa::group_entries(&tables),
        }))
    }

    async fn list_service_records(
        &self,
        _req: Request<pb::ListServiceRecordsRequest>,
    ) -> Result<Response<pb::ListServiceRecordsResponse>, Status> {
        let (tables, source) = self.sa_tables()?;
        Ok(Response::new(pb::ListServiceRecordsResponse {
            source: source.into(),
            services: crate::fabric_sa::service_entries(&tables),
        }))
    }

    async fn list_subscriptions(
        &self,
        _req: Request<pb::ListSubscriptionsRequest>,
    ) -> Result<Response<pb::ListSubscriptionsResponse>, Status> {
        let (tables, source) = self.sa_tables()?;
        Ok(Response::new(pb::ListSubscriptionsResponse {
            source: source.into(),
            subscriptions: crate::fabric_sa::subscription_entries(&tables),
        }))
    }

    async fn list_partitions(
        &self,
        _req: Request<pb::ListPartitionsRequest>,
    ) -> Result<Response<pb::ListPartitionsResponse>, Status> {
        Ok(Response::new(self.partitions(String::new())?))
    }

    async fn reload_partitions(
        &self,
        _req: Request<pb::ReloadPartitionsRequest>,
    ) -> Result<Response<pb::ReloadPartitionsResponse>, Status> {
        let file = self.partitions_file.clone().ok_or_else(|| {
            Status::failed_precondition(
                "this ibsmd was started without --partitions-file (partitions_file): nothing to reload",
            )
        })?;
        let inst = match self.slot.read() {
            Ok(s) => s.clone(),
            Err(p) => p.into_inner().clone(),
        }
        .ok_or_else(|| Status::unavailable(format!("SM instance {} is not running", self.name)))?;
        let loaded = crate::partitions_file::reload(&file, &inst)
            .await
            .map_err(Status::invalid_argument)?;
        Ok(Response::new(pb::ReloadPartitionsResponse {
            file: file.display().to_string(),
            partitions: u32::try_from(loaded.partitions.len()).unwrap_or(u32::MAX),
            p_keys: loaded
                .partitions
                .iter()
                .map(|p| u32::from(p.p_key))
                .collect(),
            not_applied: loaded.not_applied(),
        }))
    }

    async fn set_partition(
        &self,
        req: Request<pb::SetPartitionRequest>,
    ) -> Result<Response<pb::ListPartitionsResponse>, Status> {
        let p = req
            .into_inner()
            .partition
            .ok_or_else(|| Status::invalid_argument("partition is required"))?;
        let snap = self.snapshot()?;
        let repl = Arc::clone(self.repl.as_ref().ok_or_else(|| {
            Status::failed_precondition(
                "this ibsmd runs without replication, and partitions cannot be changed at run time without it: use --partition at start",
            )
        })?);
        // Checking a large partition against the fabric and the other partitions is
        // real work: off the async workers, so it delays no other call.
        let (name, p_key, members) = (p.name.clone(), p.p_key, p.members.len());
        let check_repl = Arc::clone(&repl);
        let (_, key, value) =
            tokio::task::spawn_blocking(move || check_set_partition(&p, &snap, &check_repl))
                .await
                .map_err(|e| Status::internal(format!("checking the partition failed: {e}")))??;
        let receipt = repl
            .replica()
            .write(ibsm_replica::Command::Config(
                ibsm_replica::ConfigChange::Set {
                    key: key.clone(),
                    value,
                },
            ))
            .await
            .map_err(|e| match e {
                ibsm_replica::ReplicaError::Refused(r) => Status::invalid_argument(format!(
                    "the replicated state machine refused {key}: {r}"
                )),
                e => Status::unavailable(format!("the replica did not commit {key}: {e}")),
            })?;
        applied_here(&repl, receipt.log_index).await;
        let outcome = format!(
            "partition {:?} P_Key {:#06x} ({} members) committed to the replica at log index {}; the MASTER programs it into the members' P_Key tables (and the enforcing switch ports) on its next heavy sweep, which the change itself starts once its replica has applied the entry",
            name,
            p_key,
            members,
            receipt.log_index
        );
        Ok(Response::new(self.partitions(outcome)?))
    }

    async fn delete_partition(
        &self,
        req: Request<pb::DeletePartitionRequest>,
    ) -> Result<Response<pb::ListPartitionsResponse>, Status> {
        let p_key = req.into_inner().p_key;
        let pkey = u16::try_from(p_key)
            .ok()
            .filter(|k| (1..0x7fff).contains(k))
            .ok_or_else(|| {
                Status::invalid_argument(format!(
                    "P_Key {p_key:#x} is not a partition's base key (0x0001-0x7ffe)"
                ))
            })?;
        let repl = self.repl.as_ref().ok_or_else(|| {
            Status::failed_precondition(
                "this ibsmd runs without replication: its partitions come from --partition at start",
            )
        })?;
        let replicated = repl.replica().with_state(crate::replication::partitions_in);
        let Some(old) = replicated.iter().find(|q| q.p_key == pkey) else {
            return Err(Status::not_found(format!(
                "no partition with P_Key {pkey:#06x} was set through the API (start-up partitions come from --partition or the config file)"
            )));
        };
        let key = crate::replication::partition_key(pkey);
        let receipt = repl
            .replica()
            .write(ibsm_replica::Command::Config(
                ibsm_replica::ConfigChange::Remove { key: key.clone() },
            ))
            .await
            .map_err(|e| {
                Status::unavailable(format!("the replica did not commit removing {key}: {e}"))
            })?;
        applied_here(repl, receipt.log_index).await;
        let outcome = format!(
            "partition {:?} P_Key {pkey:#06x} removed from the replica at log index {}; the MASTER takes it out of the members' P_Key tables on its next heavy sweep (a start-up partition with that P_Key, if any, applies again)",
            old.name, receipt.log_index
        );
        Ok(Response::new(self.partitions(outcome)?))
    }
}

/// Read your write: the answer lists partitions from this member's replica, which
/// applies a committed entry a moment after the commit (a follower even later). Wait
/// for it, bounded; past the bound the list may lag, the write stands.
async fn applied_here(repl: &crate::replication::Replication, index: u64) {
    let _ = repl
        .replica()
        .wait_metrics(Duration::from_secs(2), |m| {
            m.last_applied.is_some_and(|a| a >= index)
        })
        .await;
}

impl FabricService {
    /// The SA's tables the list calls answer from, and their source: a non-master
    /// with a replica answers from it ("replica"), the MASTER (or a member without
    /// replication that still holds the SA state it last had) from its own SA
    /// ("master"); a non-master with neither names the master to ask.
    fn sa_tables(&self) -> Result<(ibsm_core::sa::SaTables, &'static str), Status> {
        let snap = self.snapshot()?;
        let (tables, source) = match (&self.repl, snap.state) {
            (Some(r), s) if s != SmState::Master => (
                r.replica().with_state(crate::replication::core_tables),
                "replica",
            ),
            _ => (snap.sa.as_deref().cloned().unwrap_or_default(), "master"),
        };
        if source == "master" && snap.state != SmState::Master && snap.sa.is_none() {
            return Err(Status::failed_precondition(format!(
                "this SM is not MASTER and has no replica: ask the master (GUID {:#018x})",
                snap.master_guid
            )));
        }
        Ok((tables, source))
    }

    fn partitions(&self, outcome: String) -> Result<pb::ListPartitionsResponse, Status> {
        let snap = self.snapshot()?;
        // What this SM programmed at its last heavy sweep as MASTER (start-up plus the
        // replicated ones it had then).
        let programmed: Vec<ibsm_core::subnet::Partition> = snap
            .fabric
            .as_ref()
            .map(|v| v.partitions.clone())
            .unwrap_or_default();
        let (mut partitions, mut source) = match (&snap.fabric, snap.state) {
            (Some(_), SmState::Master) => (programmed.clone(), "master"),
            (Some(_), _) => (programmed.clone(), "last-view"),
            (None, _) => (snap.startup_partitions.clone(), "config"),
        };
        if let Some(r) = &self.repl {
            // What the MASTER programs from now on: start-up plus replicated (a
            // deleted replicated partition is gone here before the next sweep).
            let replicated = r.replica().with_state(crate::replication::partitions_in);
            let (wanted, _) =
                crate::replication::effective_partitions(&snap.startup_partitions, &replicated);
            partitions = wanted;
            let mut sorted = programmed;
            sorted.sort_by_key(|p| p.p_key);
            if partitions != sorted || source != "master" {
                source = "replica";
            }
        }
        partitions.sort_by_key(|p| p.p_key);
        Ok(pb::ListPartitionsResponse {
            source: source.into(),
            partitions: partitions.iter().map(partition_entry).collect(),
            outcome,
        })
    }
}

/// Everything `SetPartition` checks before it writes: the entry itself, against the
/// fabric's port GUIDs, and the set the master would program with it; then the limits
/// every replica enforces. Returns the partition with its config key and value.
fn check_set_partition(
    p: &pb::PartitionEntry,
    snap: &Snapshot,
    repl: &Replication,
) -> Result<(ibsm_core::subnet::Partition, String, String), Status> {
    let known: Vec<u64> = match &snap.fabric {
        Some(v) => v.lids().iter().map(|l| l.port_guid).collect(),
        None => repl
            .replica()
            .with_state(|s| s.guid2lid.keys().copied().collect()),
    };
    validate_partition(p, &known).map_err(Status::invalid_argument)?;
    let part = core_partition(p).ok_or_else(|| {
        Status::invalid_argument(format!("P_Key {:#x} does not fit in 15 bits", p.p_key))
    })?;
    // The set the master would program with it must stay valid (a name used by
    // another replicated P_Key, more than 31 partitions on one port...).
    let configured = snap.startup_partitions.clone();
    let mut replicated = repl.replica().with_state(crate::replication::partitions_in);
    if let Some(other) = replicated
        .iter()
        .find(|q| q.name == part.name && q.p_key != part.p_key)
    {
        return Err(Status::invalid_argument(format!(
            "partition name {:?} is already used by P_Key {:#06x}: pick another name",
            part.name, other.p_key
        )));
    }
    replicated.retain(|q| q.p_key != part.p_key);
    replicated.push(part.clone());
    let (_, skipped) = crate::replication::effective_partitions(&configured, &replicated);
    if let Some(s) = skipped.iter().find(|s| s.partition.p_key == part.p_key) {
        return Err(Status::invalid_argument(format!(
            "partition {:?} P_Key {:#06x} cannot be programmed with the others: {}",
            part.name, part.p_key, s.why
        )));
    }
    let key = crate::replication::partition_key(part.p_key);
    let value = crate::replication::encode_partition(&part);
    // The limits every replica enforces (partition count, members, name, size),
    // checked here first so the operator gets the reason before anything is written.
    repl.replica()
        .with_state(|s| ibsm_replica::config_keys::validate_set(&s.config, &key, &value))
        .map_err(|e| Status::invalid_argument(e.to_string()))?;
    Ok((part, key, value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(pkey: u32, members: &[(u64, bool)]) -> pb::PartitionEntry {
        pb::PartitionEntry {
            groups: Vec::new(),
            index0: false,
            ipoib: None,
            name: "storage".into(),
            p_key: pkey,
            members: members
                .iter()
                .map(|(g, f)| pb::PartitionMemberEntry {
                    port_guid: *g,
                    full: *f,
                })
                .collect(),
        }
    }

    #[test]
    fn partitions_are_validated_with_reasons() {
        let known = [0x11, 0x12];
        assert!(validate_partition(&part(0x10, &[(0x11, true), (0x12, false)]), &known).is_ok());
        let why = |p| validate_partition(&p, &known).err().unwrap_or_default();
        assert!(why(part(0, &[(0x11, true)])).contains("0x0000"));
        assert!(why(part(0x7fff, &[(0x11, true)])).contains("default partition"));
        assert!(why(part(0x8001, &[(0x11, true)])).contains("15 bits"));
        assert!(why(part(0x10, &[])).contains("at least one"));
        assert!(why(part(0x10, &[(0x99, true)])).contains("not on the fabric"));
        assert!(why(part(0x10, &[(0x11, true), (0x11, false)])).contains("twice"));
        let ipoib = |mtu, rate| pb::PartitionEntry {
            ipoib: Some(pb::PartitionIpoib {
                rate,
                mtu,
                sl: 0,
                scope: 2,
                q_key: 0x0B1B,
            }),
            ..part(0x10, &[(0x11, true)])
        };
        assert!(validate_partition(&ipoib(5, 7), &known).is_ok());
        assert!(why(ipoib(6, 7)).contains("ipoib mtu=6"));
        assert!(why(ipoib(5, 1)).contains("ipoib rate=1"));
        assert!(why(ipoib(300, 7)).contains("one byte"));
    }

    #[test]
    fn replicated_form_round_trips() {
        let p = part(0x12, &[(0x11, true), (0x12, false)]);
        let core = core_partition(&p).unwrap();
        let back = crate::replication::decode_partition(
            "partition/0012",
            &crate::replication::encode_partition(&core),
        );
        assert_eq!(back.as_ref(), Some(&core));
        assert_eq!(back.map(|b| partition_entry(&b)), Some(p.clone()));
        assert_eq!(crate::replication::decode_partition("other/1", "x|"), None);
        // With its IPoIB group: the flags survive the replicated form.
        let p = pb::PartitionEntry {
            ipoib: Some(pb::PartitionIpoib {
                rate: 7,
                mtu: 5,
                sl: 3,
                scope: 5,
                q_key: 0x1_2345,
            }),
            ..p
        };
        let core = core_partition(&p).unwrap();
        let value = crate::replication::encode_partition(&core);
        let back = crate::replication::decode_partition("partition/0012", &value);
        assert_eq!(back.map(|b| partition_entry(&b)), Some(p), "{value}");
    }

    #[test]
    fn lmc_from_a_range() {
        let r = |a, b| ibsm_replica::LidRange {
            min_lid: a,
            max_lid: b,
        };
        assert_eq!(lmc_of(&r(4, 4)), 0);
        assert_eq!(lmc_of(&r(4, 7)), 2);
    }
}
