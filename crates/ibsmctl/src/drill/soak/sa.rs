//! The soak's SA state (issue 11, item 7): put in place before cycle 1 from the
//! judge's HCA, read back after every cycle, and compared (rules in the `soak`
//! module doc; the comparison itself is `sa_diff`).
//!
//! The judge's SA client is this binary's own `ibsmctl --json sa --sm-key 1 ...`, run
//! under umad2sim on the HCA the demo's SMInfo poller uses (`Demo/DescribeJudge`: its
//! node id, ibsim's socket name, the preload), so the drill must run on the demo's
//! machine. It is trusted (SA_Key 1, ibsmd's default): it sees every member and
//! subscription, and it joins the other HCAs' ports by ProxyJoin, so one client puts
//! full, non- and send-only members on ports all over the fabric. Under umad2sim a
//! client now and then dies of SIGSEGV in the preload's receiver thread: a run whose
//! JSON line was printed did its work; a question is asked again (three tries).

use std::collections::BTreeMap;
use std::io::Read;
use std::net::Ipv6Addr;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ibsm_proto::demo::v1 as dpb;
use ibsm_proto::v1 as pb;
use serde_json::Value;

use super::sa_diff::{diff_mft, diff_records, guid_of_gid, join_bits, unreached, SaSnap};
use crate::control::unary;
use crate::drill::options::DrillError;
use crate::drill::session::Drill;
use crate::drill::summary::{Cycle, SaCounts};
use crate::drill::timeline::now_ms;

/// The IPoIB broadcast group of the default partition (the SM creates it).
const BROADCAST: &str = "ff12:401b:ffff::ffff:ffff";

/// The soak's ServiceRecord: its ServiceID and lease (a day: longer than any soak).
const SERVICE_ID: &str = "0x100000000000500a";
const SERVICE_LEASE_S: &str = "86400";

/// The trap the soak subscribes to (66: multicast group created; nothing creates one
/// during the soak, so no Report is owed to the judge, which does not answer them).
const TRAP: &str = "66";

/// How long the SA state may take to read back whole after a cycle (a new master
/// still programming the MFTs, a client crash).
const SETTLE_TIMEOUT: Duration = Duration::from_secs(20);

/// Between two reads while they settle.
const SETTLE_STEP: Duration = Duration::from_millis(500);

/// How long one `ibsmctl sa` run may take.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);

/// SIGSEGV's number on Linux.
const SIGSEGV: i32 = 11;

/// The judge's SA client: this binary under umad2sim on the judge's HCA.
struct Judge {
    exe: PathBuf,
    at: dpb::DescribeJudgeResponse,
}

impl Judge {
    /// `ibsmctl --json sa --sm-key 1 ARGS` on the judge's HCA: its last JSON line.
    /// `again`: the question is safe to ask again after a crash.
    fn run(&self, args: &[&str], again: bool) -> Result<Value, String> {
        let tries = if again { 3 } else { 1 };
        let mut last = String::new();
        for _ in 0..tries {
            let (status, stdout, stderr) = self.spawn(args)?;
            let json = stdout
                .lines()
                .rev()
                .find(|l| l.starts_with('{'))
                .and_then(|l| serde_json::from_str::<Value>(l).ok());
            let segv = status.signal() == Some(SIGSEGV);
            match json {
                Some(v) if status.success() || segv => return Ok(v),
                _ => last = format!("{status}: {}", stderr.trim()),
            }
            if !segv {
                break;
            }
        }
        Err(format!(
            "ibsmctl sa {} on {}: {last}",
            args.join(" "),
            self.at.host
        ))
    }

    fn spawn(&self, args: &[&str]) -> Result<(std::process::ExitStatus, String, String), String> {
        let mut child = Command::new(&self.exe)
            .args(["--json", "sa", "--sm-key", "1"])
            .args(args)
            .env("LD_PRELOAD", &self.at.preload)
            .env("IBSIM_SOCKNAME", &self.at.sockname)
            .env("SIM_HOST", &self.at.host)
            .env_remove("RUST_LOG")
            .current_dir(&self.at.work_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.exe.display()))?;
        let read = |p: Option<Box<dyn Read + Send>>| {
            std::thread::spawn(move || {
                let mut s = String::new();
                if let Some(mut p) = p {
                    let _ = p.read_to_string(&mut s);
                }
                s
            })
        };
        let out = read(
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        );
        let err = read(
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        );
        let deadline = Instant::now() + CLIENT_TIMEOUT;
        let status = loop {
            match child.try_wait() {
                Ok(Some(s)) => break s,
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Ok(None) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!(
                        "ibsmctl sa {} on {}: no answer within {CLIENT_TIMEOUT:?}",
                        args.join(" "),
                        self.at.host
                    ));
                }
                Err(e) => return Err(format!("waiting for ibsmctl sa: {e}")),
            }
        };
        Ok((
            status,
            out.join().unwrap_or_default(),
            err.join().unwrap_or_default(),
        ))
    }

    /// A whole table, every record arrived whole.
    fn table(&self, args: &[&str]) -> Result<Vec<Value>, String> {
        let v = self.run(args, true)?;
        if !v["damaged"].as_array().is_some_and(Vec::is_empty) {
            return Err(format!(
                "ibsmctl sa {}: records damaged: {v}",
                args.join(" ")
            ));
        }
        v["records"]
            .as_array()
            .cloned()
            .ok_or_else(|| format!("ibsmctl sa {}: no records in {v}", args.join(" ")))
    }
}

/// The SA state the soak put in place and what it compares with.
pub struct SaCheck {
    judge: Judge,
    /// The groups it made or joined.
    mgids: Vec<String>,
    /// The snapshot before cycle 1.
    pub base: SaSnap,
    /// The MFTs after the previous cycle.
    prev: SaSnap,
}

/// Name what was lost or changed in the cycle's note: the first three, and how many
/// more (every one is in `sa_detail`).
fn note_lost(c: &mut Cycle, when: &str, bad: &[String]) {
    if bad.is_empty() {
        return;
    }
    let shown: Vec<&str> = bad.iter().take(3).map(String::as_str).collect();
    c.note.push_str(&format!(
        "; SA state lost/changed{when}: {}{}",
        shown.join("; "),
        if bad.len() > 3 {
            format!(" (and {} more)", bad.len() - 3)
        } else {
            String::new()
        }
    ));
}

fn mgid_of(v: &Value) -> Result<String, String> {
    v["record"]["mgid"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("no MGID in {v}"))
}

fn setup_err(e: String) -> DrillError {
    DrillError::Setup(format!("soak SA state: {e}"))
}

impl Drill {
    /// `Demo/ReadFabric` with the MFTs, into the fabric half of an [`SaSnap`].
    async fn read_mfts(&mut self, into: &mut SaSnap) -> Result<(), DrillError> {
        let mut t = self.target.clone();
        t.rpc_timeout = t.rpc_timeout.max(Duration::from_secs(120));
        let rf = unary(
            &t,
            "ReadFabric",
            self.demo_client()?.read_fabric(dpb::ReadFabricRequest {
                multicast: true,
                lids_only: false,
            }),
        )
        .await?;
        into.names = rf
            .lids
            .iter()
            .map(|l| (l.port_guid, l.description.clone()))
            .collect();
        into.links = rf
            .links
            .iter()
            .map(|k| ((k.port_guid, k.port), (k.remote_port_guid, k.remote_port)))
            .collect();
        into.mft = rf
            .switches
            .iter()
            .map(|s| {
                let t = s
                    .mft
                    .iter()
                    .map(|e| (e.mlid, e.ports.iter().copied().collect()))
                    .collect();
                (s.node_guid, t)
            })
            .collect();
        Ok(())
    }

    /// The judge's read of the SA (the groups `mgids`, every ServiceRecord and
    /// subscription) and of the MFTs.
    async fn read_sa(&mut self, judge: &Judge, mgids: &[String]) -> Result<SaSnap, DrillError> {
        let mut s = SaSnap::default();
        let recs = |args: &[&str]| judge.table(args).map_err(DrillError::Setup);
        for m in mgids {
            let members = recs(&["members", "--mgid", m])?;
            s.groups.insert(
                m.clone(),
                members
                    .into_iter()
                    .map(|r| (r["port_gid"].as_str().unwrap_or_default().to_string(), r))
                    .collect(),
            );
        }
        for r in recs(&["services"])? {
            s.services.insert(
                format!(
                    "{} {}",
                    r["service_id"],
                    r["service_gid"].as_str().unwrap_or("?")
                ),
                r,
            );
        }
        s.informs = recs(&["informs"])?.iter().map(Value::to_string).collect();
        self.read_mfts(&mut s).await?;
        Ok(s)
    }

    /// Before cycle 1: groups with full, non- and send-only members on the judge's
    /// port and (ProxyJoin) on the other HCAs' ports, a ServiceRecord with a day's
    /// lease, a subscription to trap 66; then the snapshot, once every group's tree
    /// reaches its members.
    pub(super) async fn sa_setup(&mut self) -> Result<SaCheck, DrillError> {
        let t = self.target.clone();
        let at = unary(
            &t,
            "DescribeJudge",
            self.demo_client()?
                .describe_judge(dpb::DescribeJudgeRequest {}),
        )
        .await?;
        let exe = std::env::current_exe()
            .map_err(|e| setup_err(format!("cannot find this binary: {e}")))?;
        let judge = Judge { exe, at };
        let mut fabric = SaSnap::default();
        self.read_mfts(&mut fabric).await?;
        let host = judge.at.host.clone();
        let run = |args: &[&str], again: bool| judge.run(args, again).map_err(setup_err);
        // A: created by the judge (an MGID the SA allocates); its record names the
        // judge's own port (the net file's node ids need not be NodeDescriptions).
        let created = run(&["join", "--create"], false)?;
        let a = mgid_of(&created).map_err(setup_err)?;
        let me_gid: Ipv6Addr = created["record"]["port_gid"]
            .as_str()
            .and_then(|g| g.parse().ok())
            .ok_or_else(|| setup_err(format!("no PortGID in {created}")))?;
        let me = me_gid.to_string();
        let prefix = u128::from(me_gid) & !u128::from(u64::MAX);
        let judge_guid = guid_of_gid(&me).unwrap_or(0);
        // The other CA ports on the wire (a switch has an MFT), by name.
        let mut others: Vec<(String, u64)> = fabric
            .names
            .iter()
            .filter(|(g, _)| **g != judge_guid && !fabric.mft.contains_key(*g))
            .map(|(g, n)| (n.clone(), *g))
            .collect();
        others.sort();
        let other = |i: usize| {
            others
                .get(i % others.len().max(1))
                .map(|(_, g)| Ipv6Addr::from(prefix | u128::from(*g)).to_string())
                .ok_or_else(|| setup_err(format!("no CA port on the wire besides {host}'s")))
        };
        let (o0, o1, o2) = (other(0)?, other(1)?, other(2)?);
        // C: created for another port (ProxyJoin).
        let c =
            mgid_of(&run(&["join", "--create", "--port-gid", &o0], false)?).map_err(setup_err)?;
        let joins: [(&str, &str, &str); 6] = [
            (&a, &o0, "non"),
            (&a, &o1, "send-only"),
            (BROADCAST, &o2, "full"),
            (BROADCAST, &me, "send-only"),
            (BROADCAST, &o1, "non"),
            (&c, &me, "non"),
        ];
        for (mgid, port, state) in &joins {
            run(
                &["join", "--mgid", mgid, "--state", state, "--port-gid", port],
                true,
            )?;
        }
        run(
            &[
                "service",
                "register",
                "--id",
                SERVICE_ID,
                "--name",
                "ibsm-soak",
                "--lease-s",
                SERVICE_LEASE_S,
            ],
            true,
        )?;
        run(
            &[
                "inform",
                "subscribe",
                "--trap",
                TRAP,
                "--wait-s",
                "0",
                "--keep",
            ],
            true,
        )?;
        // Members expected: the creators and every (group, port) joined.
        let mut expected: std::collections::BTreeSet<(String, String)> =
            [(a.clone(), me.clone()), (c.clone(), o0.clone())].into();
        expected.extend(joins.iter().map(|(m, p, _)| (m.to_string(), p.to_string())));
        eprintln!(
            "soak: SA state from {host} ({me}): groups {a} (created), {BROADCAST}, {c} (created for {}), ServiceID {SERVICE_ID}, trap {TRAP} subscribed",
            o0
        );
        let mgids = vec![a, BROADCAST.to_string(), c];
        let deadline = now_ms() + u64::try_from(SETTLE_TIMEOUT.as_millis()).unwrap_or(20_000);
        loop {
            let s = self.read_sa(&judge, &mgids).await;
            let why = match &s {
                Ok(s) if s.groups.values().map(BTreeMap::len).sum::<usize>() < expected.len() => {
                    format!(
                        "{} members expected, the SA lists {:?}",
                        expected.len(),
                        s.groups
                    )
                }
                Ok(s) => unreached(s).join("; "),
                Err(e) => e.to_string(),
            };
            match s {
                Ok(s) if why.is_empty() => {
                    return Ok(SaCheck {
                        judge,
                        mgids,
                        prev: s.clone(),
                        base: s,
                    })
                }
                _ if now_ms() > deadline => return Err(setup_err(why)),
                _ => {}
            }
            self.poll().await?;
            tokio::time::sleep(SETTLE_STEP).await;
        }
    }

    /// The judge's read, again every [`SETTLE_STEP`] until it finds nothing wrong or
    /// [`SETTLE_TIMEOUT`] passes: the records against the snapshot before cycle 1,
    /// every group's reach through the MFTs and, with `same_mft`, the MFTs against the
    /// previous cycle's. The last read, what it found wrong, the number of reads and
    /// the first thing the first read found wrong (for the note).
    async fn settled_sa(
        &mut self,
        check: &SaCheck,
        same_mft: bool,
    ) -> Result<(Option<SaSnap>, Vec<String>, u32, Option<String>), DrillError> {
        let deadline = now_ms() + u64::try_from(SETTLE_TIMEOUT.as_millis()).unwrap_or(20_000);
        let mut reads = 0;
        let mut first = None;
        loop {
            reads += 1;
            let (now, bad) = match self.read_sa(&check.judge, &check.mgids).await {
                Ok(now) => {
                    let mut bad = diff_records(&check.base, &now);
                    bad.extend(unreached(&now));
                    if same_mft {
                        bad.extend(diff_mft(&check.prev, &now));
                    }
                    (Some(now), bad)
                }
                Err(e) => (None, vec![format!("SA state not read: {e}")]),
            };
            if bad.is_empty() || now_ms() > deadline {
                return Ok((now, bad, reads, first));
            }
            if first.is_none() {
                first = bad.first().cloned();
            }
            self.poll().await?;
            tokio::time::sleep(SETTLE_STEP).await;
        }
    }

    /// After a cycle, once stable: [`Drill::settled_sa`] (the MFTs byte for byte
    /// against the previous cycle's unless the cycle `rerouted`), then the replicas'
    /// listings against the master's; into `c`.
    pub(super) async fn sa_check(
        &mut self,
        master: &str,
        check: &mut SaCheck,
        rerouted: bool,
        c: &mut Cycle,
    ) -> Result<(), DrillError> {
        let (now, mut bad, reads, first) = self.settled_sa(check, !rerouted).await?;
        if reads > 1 {
            c.note.push_str(&format!(
                "; SA state read {reads} times before it settled (first: {})",
                first.unwrap_or_default()
            ));
        }
        if let Some(now) = now {
            if rerouted {
                let moved = diff_mft(&check.prev, &now).len();
                c.note.push_str(&if moved == 0 {
                    "; MFTs after the restore as before the flap".to_string()
                } else {
                    format!("; {moved} MFT entries differ from before the flap (judged by reach)")
                });
            }
            bad.extend(self.replica_diffs(master, &now).await);
            let (members, services, subscriptions, mft_entries) = now.counts();
            c.sa_checked = Some(SaCounts {
                groups: u64::try_from(now.groups.len()).unwrap_or(0),
                members,
                services,
                subscriptions,
                mft_entries,
            });
            check.prev = now;
        }
        note_lost(c, "", &bad);
        c.sa_lost += u64::try_from(bad.len()).unwrap_or(u64::MAX);
        c.sa_detail.extend(bad);
        Ok(())
    }

    /// link-flap, with the cable down and the fabric rerouted: the records unchanged
    /// and every group's members reaching each other through the MFTs as the master
    /// rewrote them; into `c`.
    pub(super) async fn sa_cable_down(
        &mut self,
        check: &SaCheck,
        c: &mut Cycle,
    ) -> Result<(), DrillError> {
        let (now, bad, _, _) = self.settled_sa(check, false).await?;
        if let Some(now) = now {
            c.note.push_str(&format!(
                "; {} MFT entries moved with it down",
                diff_mft(&check.prev, &now).len()
            ));
        }
        note_lost(c, " with the cable down", &bad);
        c.sa_lost += u64::try_from(bad.len()).unwrap_or(u64::MAX);
        c.sa_detail
            .extend(bad.into_iter().map(|x| format!("with the cable down: {x}")));
        Ok(())
    }

    /// `ListMulticastGroups`, `ListServiceRecords`, `ListSubscriptions` of `name`, one
    /// line per group, service and subscription, sorted.
    async fn sa_lists(
        &mut self,
        name: &str,
    ) -> Result<(Vec<String>, pb::ListMulticastGroupsResponse), DrillError> {
        let m = self.member(name)?;
        let t = m.target.clone();
        let g = unary(
            &t,
            "ListMulticastGroups",
            m.fabric
                .list_multicast_groups(pb::ListMulticastGroupsRequest {}),
        )
        .await?;
        let s = unary(
            &t,
            "ListServiceRecords",
            m.fabric
                .list_service_records(pb::ListServiceRecordsRequest {}),
        )
        .await?;
        let i = unary(
            &t,
            "ListSubscriptions",
            m.fabric.list_subscriptions(pb::ListSubscriptionsRequest {}),
        )
        .await?;
        let mut out: Vec<String> = g
            .groups
            .iter()
            .map(|g| {
                let mut members: Vec<String> = g
                    .members
                    .iter()
                    .map(|m| format!("{}:{}{}", m.port_gid, m.join_state, if m.proxy_join { "p" } else { "" }))
                    .collect();
                members.sort();
                format!(
                    "group {} MLID {:#06x} P_Key {:#06x} Q_Key {:#x} MTU {} rate {} SL {} scope {}{} members [{}]",
                    g.mgid, g.mlid, g.p_key, g.q_key, g.mtu, g.rate, g.sl, g.scope,
                    if g.well_known { " well-known" } else { "" },
                    members.join(" ")
                )
            })
            .collect();
        out.extend(s.services.iter().map(|s| {
            format!(
                "service {:#x} {} P_Key {:#06x} lease {} name {:?} key {:02x?}",
                s.service_id,
                s.service_gid,
                s.service_p_key,
                s.service_lease,
                s.service_name,
                s.service_key
            )
        }));
        out.extend(
            i.subscriptions
                .iter()
                .map(|x| format!("subscription {x:?}")),
        );
        out.sort();
        Ok((out, g))
    }

    /// Every standby's listings (from its replica) against the master's, and the
    /// master's members of the soak's groups against what its SA answered the judge.
    async fn replica_diffs(&mut self, master: &str, now: &SaSnap) -> Vec<String> {
        let mut out = Vec::new();
        let (want, groups) = match self.sa_lists(master).await {
            Ok(w) => w,
            Err(e) => return vec![format!("{master}: SA listings: {e}")],
        };
        // The master's members of the soak's groups: (MGID, MLID, port GUID) -> JoinState.
        let mut listed: BTreeMap<(Ipv6Addr, u64, u64), u8> = BTreeMap::new();
        for grp in &groups.groups {
            let Ok(mgid) = grp.mgid.parse::<Ipv6Addr>() else {
                continue;
            };
            for m in &grp.members {
                listed.insert(
                    (mgid, u64::from(grp.mlid), m.port_guid),
                    u8::try_from(m.join_state).unwrap_or(0),
                );
            }
        }
        for (mgid, members) in &now.groups {
            let Ok(mg) = mgid.parse::<Ipv6Addr>() else {
                continue;
            };
            for (gid, rec) in members {
                let key = (
                    mg,
                    rec["mlid"].as_u64().unwrap_or(0),
                    guid_of_gid(gid).unwrap_or(0),
                );
                if listed.get(&key) != Some(&join_bits(rec)) {
                    out.push(format!(
                        "{master}'s ListMulticastGroups does not list {gid} in {mgid} as its SA answered (JoinState {})",
                        join_bits(rec)
                    ));
                }
            }
        }
        let names: Vec<String> = self
            .members
            .iter()
            .map(|m| m.name.clone())
            .filter(|n| n != master)
            .collect();
        for n in names {
            match self.sa_lists(&n).await {
                Ok((got, _)) if got == want => {}
                Ok((got, _)) => {
                    for l in want.iter().filter(|l| !got.contains(l)) {
                        out.push(format!("replica {n} lacks: {l}"));
                    }
                    for l in got.iter().filter(|l| !want.contains(l)) {
                        out.push(format!("replica {n} has, the master not: {l}"));
                    }
                }
                Err(e) => out.push(format!("replica {n}: SA listings: {e}")),
            }
        }
        out
    }
}
