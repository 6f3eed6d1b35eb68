//! A drill's connections to the demo: its Demo service and, per SM instance, a
//! Control and a Fabric client; the judge's timeline as read so far (the demo's
//! SMInfo poller, or for a deployed cluster the members' own view, `members`, with
//! `ibsmd judge`'s beside it when given); and the waits
//! every cycle is made of (a stable cluster, a new master, a verified fabric,
//! `degraded` set or cleared, converged replicas).
//!
//! [`Drill`] is the state every cycle works on; the files that act on the cluster
//! (scenarios, markers, cycles, the soak) add their methods to it in `impl Drill`
//! blocks of their own.

use std::collections::BTreeMap;
use std::time::Duration;

use ibsm_proto::demo::v1 as dpb;
use ibsm_proto::demo::v1::demo_client::DemoClient;
use ibsm_proto::v1 as pb;
use ibsm_proto::v1::control_client::ControlClient;
use ibsm_proto::v1::fabric_client::FabricClient;

use super::members::{Handover, MembersView, Polled};
use super::options::{ClusterArgs, DrillError};
use super::timeline::{now_ms, state_of, Change};
use crate::control::{channel, unary, AuthChannel, Target};

/// How long one step (stability, a new master, a verified fabric) may take.
const STEP_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a new master may take to show an epoch above the old one.
const EPOCH_WAIT: Duration = Duration::from_secs(10);

/// How long a Raft-isolated MASTER may take to report `degraded` (and, healed, to
/// clear it): the daemon needs about one write timeout (1 s) or 500 ms without a
/// quorum acknowledgement; the rest is slack for a loaded machine.
pub const DEGRADED_BOUND: Duration = Duration::from_secs(20);

pub(super) struct Member {
    pub(super) name: String,
    pub(super) priority: u32,
    pub(super) target: Target,
    pub(super) control: ControlClient<AuthChannel>,
    pub(super) fabric: FabricClient<AuthChannel>,
    /// Its port GUID as the judge last read it (0: not yet).
    pub(super) guid: u64,
}

pub(super) struct Drill {
    pub(super) target: Target,
    /// The demo's Demo service, or `ibsmd judge`'s; `None`: a deployed cluster
    /// without `--judge`.
    demo: Option<DemoClient<AuthChannel>>,
    pub(super) members: Vec<Member>,
    cursor: u64,
    /// The primary timeline: the members' own view for a deployed cluster, else the
    /// demo's SMInfo poller.
    pub(super) changes: Vec<Change>,
    /// A deployed cluster: every member's Status and ListSms, polled in the background,
    /// and the HANDOVERs its members reported completing.
    pub(super) members_view: Option<MembersView>,
    pub(super) handovers: Vec<Handover>,
    /// A deployed cluster with `--judge`: the judge's SMInfo timeline, beside the
    /// members' (`changes`).
    pub(super) judge_changes: Vec<Change>,
    pub(super) started: u64,
    /// When an action that had to be retried finally went through (unix ms).
    pub(super) acted_at: Option<u64>,
    /// A deployed cluster (`--members`): `demo` is then the `ibsmd judge`.
    pub(super) cluster: Option<ClusterArgs>,
}

impl Drill {
    pub(super) async fn connect(
        target: &Target,
        cluster: &ClusterArgs,
    ) -> Result<Drill, DrillError> {
        if cluster.deployed() {
            return Drill::connect_cluster(target, cluster).await;
        }
        let ch = channel(target).await?;
        let mut demo = DemoClient::new(ch);
        let list = unary(
            target,
            "ListInstances",
            demo.list_instances(dpb::ListInstancesRequest {}),
        )
        .await?;
        let mut members = Vec::new();
        for inst in list.instances {
            let mut t = target.clone();
            t.endpoint = if inst.endpoint.contains("://") {
                inst.endpoint.clone()
            } else {
                format!("http://{}", inst.endpoint)
            };
            let ch = channel(&t).await?;
            members.push(Member {
                name: inst.name.clone(),
                priority: inst.priority,
                target: t,
                control: ControlClient::new(ch.clone()),
                fabric: FabricClient::new(ch),
                guid: inst.guid,
            });
        }
        if members.len() < 2 {
            return Err(DrillError::Setup(format!(
                "a drill needs at least two SM instances; the demo has {}",
                members.len()
            )));
        }
        Ok(Drill {
            target: target.clone(),
            demo: Some(demo),
            members,
            cursor: 0,
            changes: Vec::new(),
            members_view: None,
            handovers: Vec::new(),
            judge_changes: Vec::new(),
            started: now_ms(),
            acted_at: None,
            cluster: None,
        })
    }

    /// A deployed cluster: each member's API from `--members`, named after its
    /// node name (`GetStatus`) when the members' differ, else the host of its endpoint
    /// when those differ, else its endpoint as given; or with
    /// `--judge` after the judge's target whose port GUID it has (the judge must have
    /// read every member's SMInfo within [`STEP_TIMEOUT`]). Starts the members' poller.
    async fn connect_cluster(target: &Target, cluster: &ClusterArgs) -> Result<Drill, DrillError> {
        let mut members = Vec::new();
        let mut node_names = Vec::new();
        for ep in &cluster.members {
            let mut t = target.clone();
            t.endpoint = with_scheme(ep);
            let ch = channel(&t).await?;
            let mut control = ControlClient::new(ch.clone());
            let s = unary(&t, "GetStatus", control.get_status(pb::GetStatusRequest {})).await?;
            node_names.push(s.node_name.clone());
            members.push(Member {
                name: ep.clone(),
                priority: s.priority,
                target: t,
                control,
                fabric: FabricClient::new(ch),
                guid: s.guid,
            });
        }
        let hosts: Vec<String> = cluster.members.iter().map(|ep| host_of(ep)).collect();
        for (m, n) in members.iter_mut().zip(member_names(&node_names, &hosts)) {
            if let Some(n) = n {
                m.name = n;
            }
        }
        let mut jt = target.clone();
        let demo = match cluster.judge.as_deref() {
            Some(j) => {
                jt.endpoint = with_scheme(j);
                let mut demo = DemoClient::new(channel(&jt).await?);
                name_after_judge(&jt, &mut demo, &mut members).await?;
                Some(demo)
            }
            None => None,
        };
        let polled = members
            .iter()
            .map(|m| Polled {
                name: m.name.clone(),
                guid: m.guid,
                control: m.control.clone(),
            })
            .collect();
        Ok(Drill {
            target: jt,
            demo,
            members,
            cursor: 0,
            changes: Vec::new(),
            members_view: Some(MembersView::start(polled)),
            handovers: Vec::new(),
            judge_changes: Vec::new(),
            started: now_ms(),
            acted_at: None,
            cluster: Some(cluster.clone()),
        })
    }

    /// The Demo service (the demo's, or `ibsmd judge`'s).
    pub(super) fn demo_client(&self) -> Result<DemoClient<AuthChannel>, DrillError> {
        self.demo.clone().ok_or_else(|| {
            DrillError::Setup(
                "this step needs a Demo service (the demo, or `ibsmd judge` through --judge)"
                    .into(),
            )
        })
    }

    /// Whether a judge (the demo's poller, or `ibsmd judge`) is there.
    pub(super) fn has_judge(&self) -> bool {
        self.demo.is_some()
    }

    /// The instances running: the demo's word, or for a deployed cluster the members
    /// whose API answers (a process that is up, whatever its SM state).
    pub(super) async fn running(&mut self) -> Result<Vec<String>, DrillError> {
        if self.cluster.is_some() {
            let names: Vec<String> = self.members.iter().map(|m| m.name.clone()).collect();
            let mut up = Vec::new();
            for n in names {
                if self.status(&n).await.is_ok() {
                    up.push(n);
                }
            }
            return Ok(up);
        }
        let list = unary(
            &self.target,
            "ListInstances",
            self.demo_client()?
                .list_instances(dpb::ListInstancesRequest {}),
        )
        .await?;
        Ok(list
            .instances
            .into_iter()
            .filter(|i| i.running)
            .map(|i| i.name)
            .collect())
    }

    /// Bring the timelines up to date; returns the time they reach (unix ms).
    pub(super) async fn poll(&mut self) -> Result<u64, DrillError> {
        let Some(view) = &self.members_view else {
            let (now, new) = self.poll_judge().await?;
            self.changes.extend(new);
            return Ok(now);
        };
        (self.changes, self.handovers) = view.changes();
        if self.demo.is_some() {
            let (_, new) = self.poll_judge().await?;
            self.judge_changes.extend(new);
        }
        Ok(now_ms())
    }

    /// The judge's new samples (Demo/PollSmInfo), and its clock.
    async fn poll_judge(&mut self) -> Result<(u64, Vec<Change>), DrillError> {
        let r = unary(
            &self.target,
            "PollSmInfo",
            self.demo_client()?.poll_sm_info(dpb::PollSmInfoRequest {
                after_seq: self.cursor,
            }),
        )
        .await?;
        let new = r
            .samples
            .iter()
            .map(|s| Change {
                at: s.at_unix_ms,
                seq: s.seq,
                name: s.name.clone(),
                state: state_of(s),
            })
            .collect();
        self.cursor = r.next_seq;
        Ok((r.now_unix_ms, new))
    }

    /// The latest state of each member on the wire.
    fn wire_states(&self) -> BTreeMap<String, Option<&'static str>> {
        let mut sorted: Vec<&Change> = self.changes.iter().collect();
        sorted.sort_by_key(|c| (c.at, c.seq));
        let mut out = BTreeMap::new();
        for c in sorted {
            out.insert(c.name.clone(), c.state);
        }
        out
    }

    pub(super) fn member(&mut self, name: &str) -> Result<&mut Member, DrillError> {
        self.members
            .iter_mut()
            .find(|m| m.name == name)
            .ok_or_else(|| DrillError::Setup(format!("no member {name}")))
    }

    /// One MASTER on the wire, every running instance answering STANDBY or MASTER,
    /// and the master's own view published; twice in a row 200 ms apart.
    pub(super) async fn wait_stable(&mut self) -> Result<String, DrillError> {
        let deadline = now_ms() + u64::try_from(STEP_TIMEOUT.as_millis()).unwrap_or(60_000);
        let mut good_once: Option<String> = None;
        loop {
            self.poll().await?;
            let running = self.running().await?;
            let states = self.wire_states();
            let masters: Vec<&String> = states
                .iter()
                .filter(|(_, s)| **s == Some("MASTER"))
                .map(|(n, _)| n)
                .collect();
            let running_ok = running
                .iter()
                .all(|n| matches!(states.get(n), Some(Some("MASTER" | "STANDBY"))));
            let mut ok = None;
            if let ([m], true) = (masters.as_slice(), running_ok) {
                let m = (*m).clone();
                let member = self.member(&m)?;
                let t = member.target.clone();
                let view = unary(
                    &t,
                    "GetTopology",
                    member.fabric.get_topology(pb::GetTopologyRequest {}),
                )
                .await;
                if view.is_ok_and(|v| v.source == "master") {
                    ok = Some(m);
                }
            }
            match (ok, &good_once) {
                (Some(m), Some(prev)) if &m == prev => return Ok(m),
                (Some(m), _) => good_once = Some(m),
                (None, _) => good_once = None,
            }
            if now_ms() > deadline {
                return Err(DrillError::Invariant(format!(
                    "the demo did not settle (one MASTER, every running SM answering) within {STEP_TIMEOUT:?}; wire states {states:?}"
                )));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The LIDs. A deployed cluster: as read on the wire, from PortInfo, by `name`'s
    /// heavy sweep (`Control/Sweep` heavy, then `Fabric/GetTopology`'s `read_lid` of
    /// every end port: what that sweep's discovery read before it wrote anything);
    /// LMC not read, 0. The demo: as `name` lists them (GetLids).
    pub(super) async fn lids(
        &mut self,
        name: &str,
    ) -> Result<BTreeMap<u64, (u32, u32)>, DrillError> {
        if self.cluster.is_some() {
            return self.wire_lids(name).await;
        }
        let m = self.member(name)?;
        let t = m.target.clone();
        let r = unary(&t, "GetLids", m.fabric.get_lids(pb::GetLidsRequest {})).await?;
        Ok(r.lids
            .iter()
            .map(|l| (l.port_guid, (l.base_lid, l.lmc)))
            .collect())
    }

    /// See [`Drill::lids`]: the PortInfo LIDs a fresh heavy sweep of the MASTER read:
    /// `name`'s, or, when mastership moved on meanwhile (a restored priority taking the
    /// subnet back), whichever member is MASTER now (within [`STEP_TIMEOUT`]).
    async fn wire_lids(&mut self, name: &str) -> Result<BTreeMap<u64, (u32, u32)>, DrillError> {
        let deadline = now_ms() + u64::try_from(STEP_TIMEOUT.as_millis()).unwrap_or(60_000);
        let mut why = Vec::new();
        loop {
            let mut order = vec![name.to_string()];
            order.extend(
                self.members
                    .iter()
                    .map(|m| m.name.clone())
                    .filter(|n| n != name),
            );
            for n in order {
                match self.swept_lids(&n).await {
                    Ok(Some(lids)) => return self.check_wire_lids(&n, lids),
                    Ok(None) => {}
                    Err(e) => why.push(format!("{n}: {e}")),
                }
            }
            if now_ms() > deadline {
                return Err(DrillError::Setup(format!(
                    "no member read PortInfo on the wire as MASTER within {STEP_TIMEOUT:?}: {}",
                    why.join("; ")
                )));
            }
            why.clear();
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// `name`'s heavy sweep's PortInfo LIDs if it is MASTER (`None`: it is not).
    async fn swept_lids(
        &mut self,
        name: &str,
    ) -> Result<Option<BTreeMap<u64, (u32, u32)>>, DrillError> {
        let m = self.member(name)?;
        let t = m.target.clone();
        let st = unary(
            &t,
            "GetStatus",
            m.control.get_status(pb::GetStatusRequest {}),
        )
        .await?;
        if pb::SmState::try_from(st.state) != Ok(pb::SmState::Master) {
            return Ok(None);
        }
        unary(
            &t,
            "Sweep",
            m.control.sweep(pb::SweepRequest { heavy: true }),
        )
        .await?;
        let m = self.member(name)?;
        let topo = unary(
            &t,
            "GetTopology",
            m.fabric.get_topology(pb::GetTopologyRequest {}),
        )
        .await?;
        // Only a MASTER's own sweep read PortInfo; a replica's view has no read_lid.
        if topo.source != "master" {
            return Ok(None);
        }
        Ok(Some(
            topo.nodes
                .iter()
                .flat_map(|n| &n.ports)
                .filter(|p| p.read_lid != 0 && p.port_guid != 0)
                .map(|p| (p.port_guid, (p.read_lid, 0)))
                .collect(),
        ))
    }

    /// A wire read must hold every member's port: an SM's port keeps its LID whether
    /// its SM runs or not (its SMA answers).
    fn check_wire_lids(
        &self,
        name: &str,
        lids: BTreeMap<u64, (u32, u32)>,
    ) -> Result<BTreeMap<u64, (u32, u32)>, DrillError> {
        if let Some(m) = self.members.iter().find(|m| !lids.contains_key(&m.guid)) {
            return Err(DrillError::Setup(format!(
                "{name}'s sweep read no LID in PortInfo for {} (port GUID {}): \
                 is its ibsmd older than the read_lid field?",
                m.name,
                crate::args::fmt_guid(m.guid)
            )));
        }
        Ok(lids)
    }

    /// With `--judge`: the LIDs as the judge reads them on the wire (PortInfo, through
    /// `ibnetdiscover -p` on its host; LMC not read, 0).
    pub(super) async fn judge_lids(&mut self) -> Result<BTreeMap<u64, (u32, u32)>, DrillError> {
        let r = unary(
            &self.target,
            "ReadFabric",
            self.demo_client()?.read_fabric(dpb::ReadFabricRequest {
                multicast: false,
                lids_only: true,
            }),
        )
        .await?;
        let lids: BTreeMap<u64, (u32, u32)> =
            r.lids.iter().map(|l| (l.port_guid, (l.lid, 0))).collect();
        if let Some(m) = self.members.iter().find(|m| !lids.contains_key(&m.guid)) {
            return Err(DrillError::Setup(format!(
                "the judge's {} lists no LID for {} (port GUID {}): is the judge on this fabric?",
                r.commands
                    .first()
                    .map_or("ibnetdiscover -p", String::as_str),
                m.name,
                crate::args::fmt_guid(m.guid)
            )));
        }
        Ok(lids)
    }

    /// The SM's port GUID (GetStatus), 0 if it does not answer.
    pub(super) async fn port_guid(&mut self, name: &str) -> u64 {
        self.status(name).await.map_or(0, |s| s.guid)
    }

    /// The SM's mastership epoch (GetStatus), 0 if it does not answer.
    pub(super) async fn epoch(&mut self, name: &str) -> u64 {
        self.status(name).await.map_or(0, |s| s.epoch)
    }

    /// `name`'s epoch once it is above `floor`, or the last one read after
    /// [`EPOCH_WAIT`]: a new master claims its epoch through the replica, which can
    /// land a little after its first heavy sweep (separate processes on ibsim).
    pub(super) async fn epoch_above(&mut self, name: &str, floor: u64) -> u64 {
        let deadline = now_ms() + u64::try_from(EPOCH_WAIT.as_millis()).unwrap_or(10_000);
        loop {
            let e = self.epoch(name).await;
            if e > floor || now_ms() > deadline {
                return e;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Wait for a MASTER other than `old` on the wire (or `expect` if given).
    pub(super) async fn wait_new_master(
        &mut self,
        old: &str,
        since: u64,
    ) -> Result<Option<(String, u64)>, DrillError> {
        let deadline = now_ms() + u64::try_from(STEP_TIMEOUT.as_millis()).unwrap_or(60_000);
        loop {
            self.poll().await?;
            let mut after: Vec<&Change> = self.changes.iter().filter(|c| c.at >= since).collect();
            after.sort_by_key(|c| (c.at, c.seq));
            if let Some(c) = after
                .iter()
                .find(|c| c.name != old && c.state == Some("MASTER"))
            {
                return Ok(Some((c.name.clone(), c.at)));
            }
            if now_ms() > deadline {
                return Ok(None);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Wait until `name` answers GetTopology from a master view taken after `since`.
    pub(super) async fn wait_verified(
        &mut self,
        name: &str,
        since: u64,
    ) -> Result<Option<u64>, DrillError> {
        let deadline = now_ms() + u64::try_from(STEP_TIMEOUT.as_millis()).unwrap_or(60_000);
        loop {
            let m = self.member(name)?;
            let t = m.target.clone();
            if let Ok(v) = unary(
                &t,
                "GetTopology",
                m.fabric.get_topology(pb::GetTopologyRequest {}),
            )
            .await
            {
                if v.source == "master" && v.taken_unix_ms >= since {
                    return Ok(Some(v.taken_unix_ms));
                }
            }
            if now_ms() > deadline {
                return Ok(None);
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    pub(super) async fn status(&mut self, name: &str) -> Result<pb::Status, DrillError> {
        let m = self.member(name)?;
        let t = m.target.clone();
        Ok(unary(
            &t,
            "GetStatus",
            m.control.get_status(pb::GetStatusRequest {}),
        )
        .await?)
    }

    /// Poll `name`'s GetStatus until `degraded == want` (ms since `since`), within
    /// [`DEGRADED_BOUND`]; keeps the wire timeline current meanwhile.
    pub(super) async fn wait_degraded(
        &mut self,
        name: &str,
        want: bool,
        since: u64,
    ) -> Result<Option<u64>, DrillError> {
        let deadline = now_ms() + u64::try_from(DEGRADED_BOUND.as_millis()).unwrap_or(20_000);
        loop {
            self.poll().await?;
            if self.status(name).await.is_ok_and(|s| s.degraded == want) {
                return Ok(Some(now_ms().saturating_sub(since)));
            }
            if now_ms() > deadline {
                return Ok(None);
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Every running instance at the same epoch and applied index (twice in a row,
    /// 200 ms apart), within [`STEP_TIMEOUT`].
    pub(super) async fn wait_converged(&mut self) -> Result<bool, DrillError> {
        let deadline = now_ms() + u64::try_from(STEP_TIMEOUT.as_millis()).unwrap_or(60_000);
        let names: Vec<String> = self.members.iter().map(|m| m.name.clone()).collect();
        let mut once: Option<(u64, u64)> = None;
        loop {
            let mut seen = Vec::new();
            for n in &names {
                match self.status(n).await {
                    Ok(s) => seen.push((s.epoch, s.applied_index)),
                    Err(_) => seen.push((u64::MAX, u64::MAX)),
                }
            }
            let same = seen.windows(2).all(|w| w.first() == w.get(1));
            let now = seen.first().copied().filter(|_| same);
            match (now, once) {
                (Some(a), Some(b)) if a == b => return Ok(true),
                (a, _) => once = a,
            }
            if now_ms() > deadline {
                return Ok(false);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// The host of `[scheme://]host:port` (IPv6 brackets dropped).
fn host_of(ep: &str) -> String {
    let ep = ep.split_once("://").map_or(ep, |(_, r)| r);
    ep.rsplit_once(':')
        .map_or(ep, |(h, _)| h)
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string()
}

/// Members' names without a judge: their node names when those tell them apart, else
/// the hosts of their endpoints when those do; `None`: keep the endpoint.
fn member_names(node_names: &[String], hosts: &[String]) -> Vec<Option<String>> {
    let distinct = |v: &[String]| {
        v.iter()
            .all(|n| !n.is_empty() && v.iter().filter(|m| *m == n).count() == 1)
    };
    if distinct(node_names) {
        node_names.iter().cloned().map(Some).collect()
    } else if distinct(hosts) {
        hosts.iter().cloned().map(Some).collect()
    } else {
        vec![None; node_names.len()]
    }
}

/// Name each member after the judge's target whose port GUID it has, once the judge
/// reads every member's SMInfo (within [`STEP_TIMEOUT`]).
async fn name_after_judge(
    jt: &Target,
    demo: &mut DemoClient<AuthChannel>,
    members: &mut [Member],
) -> Result<(), DrillError> {
    let deadline = now_ms() + u64::try_from(STEP_TIMEOUT.as_millis()).unwrap_or(60_000);
    loop {
        let list = unary(
            jt,
            "ListInstances",
            demo.list_instances(dpb::ListInstancesRequest {}),
        )
        .await?;
        let named: BTreeMap<u64, String> = list
            .instances
            .iter()
            .filter(|i| i.guid != 0)
            .map(|i| (i.guid, i.name.clone()))
            .collect();
        let missing: Vec<String> = members
            .iter()
            .filter(|m| !named.contains_key(&m.guid))
            .map(|m| format!("{} (port GUID {})", m.name, crate::args::fmt_guid(m.guid)))
            .collect();
        if missing.is_empty() {
            for m in members.iter_mut() {
                m.name = named.get(&m.guid).cloned().unwrap_or_default();
            }
            return Ok(());
        }
        if now_ms() > deadline {
            let seen: Vec<String> = list
                .instances
                .iter()
                .map(|i| format!("{}={}", i.name, crate::args::fmt_guid(i.guid)))
                .collect();
            return Err(DrillError::Setup(format!(
                "the judge does not see these members' ports answer SMInfo: {}; it sees [{}]: \
                 give `ibsmd judge` a --target NAME=DR-PATH for each SM port",
                missing.join(", "),
                seen.join(", ")
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `host:port` as an http URL (an endpoint given with its scheme is kept).
fn with_scheme(ep: &str) -> String {
    if ep.contains("://") {
        ep.to_string()
    } else {
        format!("http://{ep}")
    }
}

#[cfg(test)]
mod tests {
    use super::member_names;

    #[test]
    fn members_are_named_by_what_tells_them_apart() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            member_names(&s(&["a", "b"]), &s(&["h", "h"])),
            vec![Some("a".to_string()), Some("b".to_string())]
        );
        // Every production ibsmd is "ibsmd": the hosts then.
        assert_eq!(
            member_names(&s(&["ibsmd", "ibsmd"]), &s(&["h1", "h2"])),
            vec![Some("h1".to_string()), Some("h2".to_string())]
        );
        // One host: the endpoints as given.
        assert_eq!(
            member_names(&s(&["ibsmd", "ibsmd"]), &s(&["h", "h"])),
            vec![None, None]
        );
    }
}
