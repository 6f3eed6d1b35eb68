//! Which HCAs of the net file run the members and the SMInfo poller, and the cables
//! the soak may fault (with what a fault on each would hit).

use std::path::Path;

use ibsm_proto::demo::v1 as pb;

use crate::demo::{pick_ca_ports, DEMO_PRIORITIES};
use crate::poller::dr_path;

/// The members' HCAs, the poller's HCA and the DR paths from it, out of a net file.
pub(super) struct Plan {
    /// (node id, port, remote node id, remote port)
    pub(super) hosts: Vec<(String, u8, String, u8)>,
    pub(super) poller_host: String,
    pub(super) paths: Vec<Vec<u8>>,
    /// Every cable once, with what a fault on it would hit.
    pub(super) cables: Vec<pb::Cable>,
}

/// Every cable of `t` once (from its lower (node, port) end), marked with the member
/// whose CA port it is and whether the poller's directed routes (from `spare`) cross it.
fn cables_of(
    t: &ibsm_fabric::Topology,
    hosts: &[(ibsm_fabric::NodeIdx, u8, String)],
    spare: (ibsm_fabric::NodeIdx, u8),
    paths: &[Vec<u8>],
) -> Vec<pb::Cable> {
    let mut judged = std::collections::HashSet::new();
    for path in paths {
        let mut at = spare.0;
        for p in path {
            let Some(next) = t.node(at).and_then(|n| n.port(*p)).and_then(|q| q.remote) else {
                break;
            };
            judged.insert(((at, *p).min(next), (at, *p).max(next)));
            at = next.0;
        }
    }
    let name_of = |i| t.node(i).map(|n| n.name.clone()).unwrap_or_default();
    let mut out = Vec::new();
    for (idx, node) in t.iter() {
        for (p, port) in node.physical_ports() {
            let Some(r) = port.remote else { continue };
            if (idx, p) > r {
                continue;
            }
            let sm = hosts
                .iter()
                .position(|(h, hp, _)| (*h, *hp) == (idx, p) || (*h, *hp) == r)
                .map_or(String::new(), |i| format!("sm{}", i + 1));
            out.push(pb::Cable {
                node: node.name.clone(),
                port: u32::from(p),
                remote: name_of(r.0),
                remote_port: u32::from(r.1),
                switch_to_switch: node.is_switch()
                    && t.node(r.0).is_some_and(ibsm_fabric::Node::is_switch),
                sm,
                judge_path: judged.contains(&((idx, p), r)),
                up: true,
                loss_percent: 0,
            });
        }
    }
    out
}

pub(super) fn plan(netfile: &Path) -> anyhow::Result<Plan> {
    let text = std::fs::read_to_string(netfile)
        .map_err(|e| anyhow::anyhow!("net file {}: {e}", netfile.display()))?;
    let t = ibsm_fabric::netfile::parse(&text)
        .map_err(|e| anyhow::anyhow!("net file {}: {e}", netfile.display()))?;
    let n = DEMO_PRIORITIES.len();
    let hosts = pick_ca_ports(&t, n);
    let spare = pick_ca_ports(&t, usize::MAX)
        .into_iter()
        .find(|(a, p, _)| !hosts.iter().any(|(b, q, _)| a == b && p == q));
    let (Some(spare), true) = (spare, hosts.len() == n) else {
        anyhow::bail!(
            "net file {}: the ibsim demo needs {} CA ports with a cable ({n} SMs and the SMInfo poller)",
            netfile.display(),
            n + 1
        );
    };
    let name_of = |idx| {
        t.node(idx)
            .map(|node| node.name.clone())
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    let mut paths = Vec::new();
    for (idx, port, _) in &hosts {
        let (ridx, rport) = t
            .node(*idx)
            .and_then(|node| node.port(*port))
            .and_then(|p| p.remote)
            .ok_or_else(|| anyhow::anyhow!("{} port {port} has no cable", name_of(*idx)))?;
        let path = dr_path(&t, (spare.0, spare.1), (*idx, *port)).ok_or_else(|| {
            anyhow::anyhow!(
                "no directed route from {} to {}",
                name_of(spare.0),
                name_of(*idx)
            )
        })?;
        out.push((name_of(*idx), *port, name_of(ridx), rport));
        paths.push(path);
    }
    if out.iter().any(|h| h.0.is_empty()) || name_of(spare.0).is_empty() {
        anyhow::bail!("net file {}: a CA without a node id", netfile.display());
    }
    let cables = cables_of(&t, &hosts, (spare.0, spare.1), &paths);
    Ok(Plan {
        hosts: out,
        poller_host: name_of(spare.0),
        paths,
        cables,
    })
}
