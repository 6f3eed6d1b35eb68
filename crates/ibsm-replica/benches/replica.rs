//! Replica benchmarks (harness = false, prints a table):
//! - one update committed on a 3-node loopback cluster: latency percentiles;
//! - the whole state of the fabric at the IBA unicast limit (49,151 guid2lid entries,
//!   a 49,151-node / 142,502-cable topology summary, 4,205 LFT digests: the ibsm-core
//!   bench's k=58 fat tree with 44,946 HCAs) shipped to a new instance as a snapshot.
//!
//! Targets (issue "Replicated fabric state"): p99 <= 10 ms; snapshot <= 1 s.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use ibsm_replica::{
    lft_digest, Command, LftDigest, LidRange, Listen, Op, RaftTimers, Replica, ReplicaConfig, Role,
    TopoLink, TopoNode, TopologySummary,
};

struct Node {
    r: Replica,
    _dir: tempfile::TempDir,
    addr: String,
}

async fn start(
    id: u64,
    members: &BTreeMap<u64, String>,
    l: tokio::net::TcpListener,
    addr: String,
    t: &RaftTimers,
) -> Node {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = Replica::start(ReplicaConfig {
        node_id: id,
        grpc_addr: addr.clone(),
        listen: Listen::Listener(l),
        initial_members: members.clone(),
        data_dir: dir.path().to_path_buf(),
        timers: t.clone(),
        peer_tls: None,
        peer_auth: ibsm_replica::PeerAuth::default(),
        force_bootstrap: false,
    })
    .await
    .expect("start");
    Node { r, _dir: dir, addr }
}

async fn bind() -> (tokio::net::TcpListener, String) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let a = l.local_addr().expect("addr").to_string();
    (l, a)
}

async fn cluster3(t: &RaftTimers) -> Vec<Node> {
    let mut ls = Vec::new();
    let mut members = BTreeMap::new();
    for id in 1..=3u64 {
        let (l, a) = bind().await;
        members.insert(id, a.clone());
        ls.push((id, l, a));
    }
    let mut nodes = Vec::new();
    for (id, l, a) in ls {
        nodes.push(start(id, &members, l, a, t).await);
    }
    nodes
}

async fn leader(nodes: &[Node]) -> usize {
    let m = nodes[0]
        .r
        .wait_metrics(Duration::from_secs(10), |m| m.leader.is_some())
        .await
        .expect("leader");
    let i = nodes
        .iter()
        .position(|n| Some(n.r.node_id()) == m.leader)
        .expect("leader index");
    nodes[i]
        .r
        .wait_metrics(Duration::from_secs(10), |m| m.role == Role::Leader)
        .await
        .expect("leads");
    i
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).copied().unwrap_or_default()
}

/// The replicated state of the fabric at the IBA unicast limit, shaped as the
/// ibsm-core bench's k=58 fat tree with 44,946 HCAs: 4,205 switches (58 pods of
/// 29 edge and 29 aggregation switches, 841 cores, 58 ports each), one LID per
/// node (49,151 = every unicast LID 1..=0xBFFF), 44,946 HCA cables and 97,556
/// switch-to-switch cables, and one LFT digest per switch.
fn fabric_state() -> (
    BTreeMap<u64, LidRange>,
    TopologySummary,
    BTreeMap<u64, LftDigest>,
) {
    const K: u64 = 58;
    const HALF: u64 = K / 2;
    const HCAS: u64 = 44_946;
    let sw_guid = |i: u64| 0x0002_c902_0000_0000 + i;
    let ca_guid = |i: u64| 0x0002_c903_0000_0000 + 2 * i;
    let cores = HALF * HALF;
    let switches = cores + K * K;
    // Switch numbering: cores first, then per pod its aggregation then edge switches.
    let agg = |pod: u64, j: u64| cores + pod * K + j;
    let edge = |pod: u64, e: u64| cores + pod * K + HALF + e;
    let mut guid2lid = BTreeMap::new();
    let mut lid = 0u16;
    let mut next_lid = || {
        lid += 1;
        LidRange {
            min_lid: lid,
            max_lid: lid,
        }
    };
    let mut nodes = Vec::new();
    let mut links = Vec::new();
    for h in 0..HCAS {
        guid2lid.insert(ca_guid(h) + 1, next_lid());
        nodes.push(TopoNode {
            node_guid: ca_guid(h),
            node_type: 1,
            num_ports: 1,
            description: format!("hca-{h} HCA-1"),
        });
        let (pod, e, port) = (h / (HALF * HALF), h / HALF % HALF, h % HALF + 1);
        links.push(TopoLink {
            node_guid_a: ca_guid(h),
            port_a: 1,
            node_guid_b: sw_guid(edge(pod, e)),
            port_b: port as u8,
        });
    }
    for s in 0..switches {
        guid2lid.insert(sw_guid(s), next_lid());
        nodes.push(TopoNode {
            node_guid: sw_guid(s),
            node_type: 2,
            num_ports: K as u8,
            description: format!("sw-{s}"),
        });
    }
    for pod in 0..K {
        for j in 0..HALF {
            for e in 0..HALF {
                links.push(TopoLink {
                    node_guid_a: sw_guid(edge(pod, e)),
                    port_a: (HALF + 1 + j) as u8,
                    node_guid_b: sw_guid(agg(pod, j)),
                    port_b: (e + 1) as u8,
                });
            }
            for u in 0..HALF {
                links.push(TopoLink {
                    node_guid_a: sw_guid(agg(pod, j)),
                    port_a: (HALF + 1 + u) as u8,
                    node_guid_b: sw_guid(j * HALF + u),
                    port_b: (pod + 1) as u8,
                });
            }
        }
    }
    let mut digests = BTreeMap::new();
    let lft: Vec<u8> = (0..=0xBFFFu32).map(|i| (i % 58) as u8).collect();
    for s in 0..switches {
        digests.insert(
            sw_guid(s),
            LftDigest {
                lft_top: 0xBFFF,
                digest: lft_digest(&lft) ^ s,
            },
        );
    }
    (
        guid2lid,
        TopologySummary {
            sweep: 1,
            nodes,
            links,
        },
        digests,
    )
}

#[tokio::main(flavor = "multi_thread", worker_threads = 4)]
async fn main() {
    let t = RaftTimers {
        logs_kept_after_snapshot: 0,
        ..RaftTimers::default()
    };
    let nodes = cluster3(&t).await;
    let li = leader(&nodes).await;
    let epoch = nodes[li].r.claim_mastership(1).await.expect("claim");

    // 1. Latency of one committed update.
    let n = 2_000u64;
    let mut lat = Vec::with_capacity(n as usize);
    for i in 0..n {
        let cmd = Command::Update {
            epoch,
            ops: vec![Op::SetGuid2Lid {
                port_guid: i,
                range: LidRange {
                    min_lid: (i % 0xBFFF + 1) as u16,
                    max_lid: (i % 0xBFFF + 1) as u16,
                },
            }],
        };
        let t0 = Instant::now();
        nodes[li].r.write(cmd).await.expect("write");
        lat.push(t0.elapsed());
    }
    lat.sort();
    let p50 = pct(&lat, 0.5);
    let p99 = pct(&lat, 0.99);
    let max = lat.last().copied().unwrap_or_default();

    // 2. Snapshot of a 48k-LID fabric shipped to a new instance.
    let (g2l, topo, digests) = fabric_state();
    let (ng, nn, nl, nd) = (g2l.len(), topo.nodes.len(), topo.links.len(), digests.len());
    let last = nodes[li]
        .r
        .write(Command::Update {
            epoch,
            ops: vec![
                Op::ReplaceGuid2Lid(g2l),
                Op::SetTopology(topo),
                Op::ReplaceLftDigests(digests),
            ],
        })
        .await
        .expect("big write")
        .log_index;
    let t0 = Instant::now();
    for nd in &nodes {
        nd.r.wait_metrics(Duration::from_secs(30), |m| {
            m.last_applied.is_some_and(|a| a >= last)
        })
        .await
        .expect("applied");
        nd.r.trigger_snapshot().await.expect("snapshot");
        nd.r.wait_metrics(Duration::from_secs(30), |m| {
            m.snapshot_index.is_some_and(|s| s >= last)
        })
        .await
        .expect("snap");
        nd.r.purge_log(last).await.expect("purge");
        nd.r.wait_metrics(Duration::from_secs(30), |m| {
            m.purged_index.is_some_and(|p| p >= last)
        })
        .await
        .expect("purged");
    }
    let build = t0.elapsed();
    let snap_bytes = nodes[li]
        .r
        .raft()
        .get_snapshot()
        .await
        .ok()
        .flatten()
        .map(|s| s.snapshot.get_ref().len())
        .unwrap_or(0);
    let (l, a) = bind().await;
    let joiner = start(4, &BTreeMap::new(), l, a, &t).await;
    let t0 = Instant::now();
    nodes[li]
        .r
        .add_member(4, joiner.addr.clone())
        .await
        .expect("add member");
    joiner
        .r
        .wait_metrics(Duration::from_secs(30), |m| {
            m.last_applied.is_some_and(|a| a >= last)
        })
        .await
        .expect("caught up");
    let ship = t0.elapsed();
    let m = joiner.r.metrics();
    assert!(
        m.snapshot_index.is_some_and(|s| s >= last),
        "joiner did not install a snapshot"
    );
    assert_eq!(joiner.r.state().guid2lid.len(), 0xBFFF);

    println!("ibsm-replica benchmark (3 nodes, 127.0.0.1, redb fsync on every append)");
    println!("| measurement | value | target |");
    println!("|---|---|---|");
    println!("| update committed, n={n} sequential | p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms | p99 <= 10 ms |", ms(p50), ms(p99), ms(max));
    println!("| state: {ng} guid2lid + {nn} nodes / {nl} links + {nd} LFT digests | snapshot {:.1} MB | |", snap_bytes as f64 / 1e6);
    println!(
        "| snapshot build + purge on 3 nodes | {:.0} ms | |",
        ms(build)
    );
    println!("| new instance added, caught up from snapshot (stream + install + voter change) | {:.0} ms | <= 1000 ms |", ms(ship));
    for nd in &nodes {
        let _ = nd.r.shutdown().await;
    }
    let _ = joiner.r.shutdown().await;
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
