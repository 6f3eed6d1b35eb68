//! Topology generators: two- and three-level fat trees and seeded random
//! irregular fabrics, for tests and benchmarks.
//!
//! Conventions shared by all generators, so their output is easy to read in
//! ibsim and in logs: CAs are added first (so node 0, which ibsim/umad2sim
//! attach to without `SIM_HOST`, is an HCA), then switches; every CA has one
//! port; names are unique and short (`hca-12`, `leaf-3`, `spine-0`,
//! `edge-2-1`, `agg-2-1`, `core-7`, `sw-5`) and double as descriptions (CAs
//! get the usual ` HCA-1` suffix); GUIDs come from disjoint ranges per node
//! type so node and port GUIDs never collide. Links are 4x SDR (ibsim's
//! default rate), so a written file needs no rate options to match.

use crate::topology::{Node, NodeIdx, NodeType, Topology, TopologyError};

/// First switch GUID; switch `i` gets `SWITCH_GUID_BASE + i`.
pub const SWITCH_GUID_BASE: u64 = 0x0002_c902_0000_0000;
/// First CA GUID; CA `i` gets `CA_GUID_BASE + 2 * i` (its port 1 the next).
pub const CA_GUID_BASE: u64 = 0x0002_c903_0000_0000;
/// Mellanox's OUI, as real fabrics mostly show.
const VENDOR_ID: u32 = 0x0002c9;

/// Why a generator refused its parameters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GenError {
    /// Fat trees need an even radix of at least 2 (4 for three levels).
    #[error("radix {0} must be even and at least {1}")]
    BadRadix(u32, u32),
    /// More than 255 ports per switch.
    #[error("radix {0} exceeds 255 ports")]
    RadixTooLarge(u32),
    /// Not enough switch ports for the requested cables.
    #[error("{switches} switches of radix {radix} have {have} ports, {need} are needed")]
    NotEnoughPorts {
        /// Switches asked for.
        switches: u32,
        /// Ports per switch.
        radix: u32,
        /// Ports available.
        have: u64,
        /// Ports needed (tree links and CAs).
        need: u64,
    },
    /// A random fabric needs at least one switch.
    #[error("a fabric needs at least one switch")]
    NoSwitches,
    /// Internal construction failed (a bug).
    #[error(transparent)]
    Topology(#[from] TopologyError),
}

fn radix_u8(radix: u32) -> Result<u8, GenError> {
    u8::try_from(radix).map_err(|_| GenError::RadixTooLarge(radix))
}

struct Builder {
    topo: Topology,
    switches: u64,
    cas: u64,
}

impl Builder {
    fn new(nodes: usize) -> Builder {
        Builder {
            topo: Topology::with_capacity(nodes),
            switches: 0,
            cas: 0,
        }
    }

    fn ca(&mut self) -> Result<NodeIdx, GenError> {
        let i = self.cas;
        self.cas += 1;
        let name = format!("hca-{i}");
        let mut node = Node::new(
            NodeType::Ca,
            CA_GUID_BASE + 2 * i,
            1,
            &format!("{name} HCA-1"),
        );
        node.name = name;
        node.vendor_id = VENDOR_ID;
        node.device_id = 0x1003;
        Ok(self.topo.add_node(node)?)
    }

    fn switch(&mut self, name: String, radix: u8) -> Result<NodeIdx, GenError> {
        let guid = SWITCH_GUID_BASE + self.switches;
        self.switches += 1;
        let mut node = Node::new(NodeType::Switch, guid, radix, &name);
        node.name = name;
        node.vendor_id = VENDOR_ID;
        node.device_id = 0xc738;
        Ok(self.topo.add_node(node)?)
    }

    fn link(&mut self, a: NodeIdx, pa: u32, b: NodeIdx, pb: u32) -> Result<(), GenError> {
        let port = |p: u32| u8::try_from(p).map_err(|_| GenError::RadixTooLarge(p));
        Ok(self.topo.connect(a, port(pa)?, b, port(pb)?)?)
    }
}

/// Two-level fat tree of `radix`-port switches: `radix` leaves with
/// `radix/2` HCAs and `radix/2` uplinks each (one to every spine), and
/// `radix/2` spines with one port per leaf. `radix^2/2` HCAs,
/// `3*radix/2` switches, `radix^2` links; radix 36 is the classic
/// 648-HCA, 54-switch fabric.
pub fn fat_tree_2level(radix: u32) -> Result<Topology, GenError> {
    if radix < 2 || radix & 1 == 1 {
        return Err(GenError::BadRadix(radix, 2));
    }
    let r8 = radix_u8(radix)?;
    let half = radix / 2;
    let mut b = Builder::new((radix * half + radix + half) as usize);
    let mut hcas = Vec::with_capacity((radix * half) as usize);
    for _ in 0..radix * half {
        hcas.push(b.ca()?);
    }
    let spines = (0..half)
        .map(|i| b.switch(format!("spine-{i}"), r8))
        .collect::<Result<Vec<_>, _>>()?;
    for l in 0..radix {
        let leaf = b.switch(format!("leaf-{l}"), r8)?;
        for h in 0..half {
            if let Some(&hca) = hcas.get((l * half + h) as usize) {
                b.link(leaf, h + 1, hca, 1)?;
            }
        }
        for (s, &spine) in spines.iter().enumerate() {
            b.link(leaf, half + 1 + s as u32, spine, l + 1)?;
        }
    }
    Ok(b.topo)
}

/// k-ary three-level fat tree (Al-Fares et al.): `k` pods of `k/2` edge and
/// `k/2` aggregation switches, `(k/2)^2` core switches, `k^3/4` HCAs and
/// `5k^2/4` switches. Edge switches take `k/2` HCAs and one uplink to every
/// aggregation switch of their pod; aggregation switch `j` of a pod links
/// to cores `j*k/2 .. (j+1)*k/2`, core port `p+1` going to pod `p`.
/// k=16: 1024 HCAs, 320 switches; k=32: 8192 and 1280; k=58: 48,778 and 4205.
pub fn fat_tree_3level(k: u32) -> Result<Topology, GenError> {
    fat_tree_3level_hcas(k, u32::MAX)
}

/// [`fat_tree_3level`] with at most `max_hcas` HCAs, on the first edge ports in
/// order (the rest stay empty). k=58 with 44,946 HCAs and its 4,205 switches
/// needs exactly the 49,151 unicast LIDs 1..=0xBFFF.
pub fn fat_tree_3level_hcas(k: u32, max_hcas: u32) -> Result<Topology, GenError> {
    if k < 4 || k & 1 == 1 {
        return Err(GenError::BadRadix(k, 4));
    }
    let k8 = radix_u8(k)?;
    let half = k / 2;
    let n_hcas = (k * half * half).min(max_hcas);
    let n_switches = k * k + half * half;
    let mut b = Builder::new((n_hcas + n_switches) as usize);
    let mut hcas = Vec::with_capacity(n_hcas as usize);
    for _ in 0..n_hcas {
        hcas.push(b.ca()?);
    }
    let cores = (0..half * half)
        .map(|i| b.switch(format!("core-{i}"), k8))
        .collect::<Result<Vec<_>, _>>()?;
    for pod in 0..k {
        let aggs = (0..half)
            .map(|j| b.switch(format!("agg-{pod}-{j}"), k8))
            .collect::<Result<Vec<_>, _>>()?;
        for e in 0..half {
            let edge = b.switch(format!("edge-{pod}-{e}"), k8)?;
            for h in 0..half {
                let i = (pod * half + e) * half + h;
                if let Some(&hca) = hcas.get(i as usize) {
                    b.link(edge, h + 1, hca, 1)?;
                }
            }
            for (j, &agg) in aggs.iter().enumerate() {
                b.link(edge, half + 1 + j as u32, agg, e + 1)?;
            }
        }
        for (j, &agg) in aggs.iter().enumerate() {
            for u in 0..half {
                if let Some(&core) = cores.get(j * half as usize + u as usize) {
                    b.link(agg, half + 1 + u, core, pod + 1)?;
                }
            }
        }
    }
    Ok(b.topo)
}

/// splitmix64: tiny, fast, and good enough to scatter cables.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator from a seed.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`; returns 0 for `n == 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        // Multiply-shift; the bias is negligible for fabric sizes.
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

/// A connected irregular fabric, the same for the same arguments: a random
/// spanning tree over `switches` switches of `radix` ports, `hcas`
/// single-port HCAs on random switches, then extra random switch-to-switch
/// cables (parallel cables allowed, as on real fabrics) using half of the
/// ports left over.
pub fn random(seed: u64, switches: u32, hcas: u32, radix: u32) -> Result<Topology, GenError> {
    if switches == 0 {
        return Err(GenError::NoSwitches);
    }
    let r8 = radix_u8(radix)?;
    let have = u64::from(switches) * u64::from(radix);
    let need = 2 * (u64::from(switches) - 1) + u64::from(hcas);
    if radix < 2 && switches > 1 || have < need {
        return Err(GenError::NotEnoughPorts {
            switches,
            radix,
            have,
            need,
        });
    }
    let mut rng = SplitMix64::new(seed);
    let mut b = Builder::new((switches + hcas) as usize);
    let mut cas = Vec::with_capacity(hcas as usize);
    for _ in 0..hcas {
        cas.push(b.ca()?);
    }
    let sws = (0..switches)
        .map(|i| b.switch(format!("sw-{i}"), r8))
        .collect::<Result<Vec<_>, _>>()?;
    // Free ports per switch, taken from a shuffled list so port numbers vary.
    let mut free: Vec<Vec<u32>> = (0..switches)
        .map(|_| {
            let mut ports: Vec<u32> = (1..=radix).collect();
            for i in (1..ports.len()).rev() {
                let j = rng.below(i as u64 + 1) as usize;
                ports.swap(i, j);
            }
            ports
        })
        .collect();
    let take = |free: &mut Vec<Vec<u32>>, s: usize| free.get_mut(s).and_then(Vec::pop);

    // Spanning tree: switch i hangs off a random earlier switch with a free
    // port, keeping at least as many free ports as the rest still needs.
    for i in 1..switches as usize {
        let candidates: Vec<usize> = (0..i)
            .filter(|&j| free.get(j).is_some_and(|f| !f.is_empty()))
            .collect();
        let j = *candidates
            .get(rng.below(candidates.len() as u64) as usize)
            .ok_or(GenError::NotEnoughPorts {
                switches,
                radix,
                have,
                need,
            })?;
        let (Some(pj), Some(pi)) = (take(&mut free, j), take(&mut free, i)) else {
            return Err(GenError::NotEnoughPorts {
                switches,
                radix,
                have,
                need,
            });
        };
        if let (Some(&a), Some(&c)) = (sws.get(j), sws.get(i)) {
            b.link(a, pj, c, pi)?;
        }
    }
    // HCAs on random switches with a free port.
    for &ca in &cas {
        let candidates: Vec<usize> = (0..switches as usize)
            .filter(|&j| free.get(j).is_some_and(|f| !f.is_empty()))
            .collect();
        let Some(&s) = candidates.get(rng.below(candidates.len() as u64) as usize) else {
            return Err(GenError::NotEnoughPorts {
                switches,
                radix,
                have,
                need,
            });
        };
        if let (Some(p), Some(&sw)) = (take(&mut free, s), sws.get(s)) {
            b.link(sw, p, ca, 1)?;
        }
    }
    // Extra cables between distinct switches, using half the spare ports.
    let spare: usize = free.iter().map(Vec::len).sum();
    for _ in 0..spare / 4 {
        let candidates: Vec<usize> = (0..switches as usize)
            .filter(|&j| free.get(j).is_some_and(|f| !f.is_empty()))
            .collect();
        if candidates.len() < 2 {
            break;
        }
        let x = rng.below(candidates.len() as u64) as usize;
        let mut y = rng.below(candidates.len() as u64 - 1) as usize;
        if y >= x {
            y += 1;
        }
        let (Some(&s1), Some(&s2)) = (candidates.get(x), candidates.get(y)) else {
            break;
        };
        if let (Some(p1), Some(p2)) = (take(&mut free, s1), take(&mut free, s2)) {
            if let (Some(&a), Some(&c)) = (sws.get(s1), sws.get(s2)) {
                b.link(a, p1, c, p2)?;
            }
        }
    }
    Ok(b.topo)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::Counts;
    use proptest::prelude::*;
    use std::collections::HashSet;

    fn check_unique(t: &Topology) {
        let mut guids = HashSet::new();
        let mut names = HashSet::new();
        for n in t.nodes() {
            assert!(
                guids.insert(n.node_guid),
                "duplicate GUID {:#x}",
                n.node_guid
            );
            assert!(names.insert(n.name.clone()), "duplicate name {}", n.name);
            if !n.is_switch() {
                for (_, p) in n.physical_ports() {
                    assert!(guids.insert(p.port_guid));
                }
            }
        }
    }

    #[test]
    fn two_level_counts_follow_formula() {
        for k in [2u32, 4, 8, 36] {
            let t = fat_tree_2level(k).unwrap();
            let (h, s) = ((k * k / 2) as usize, (3 * k / 2) as usize);
            assert_eq!(
                t.counts(),
                Counts {
                    nodes: h + s,
                    switches: s,
                    hcas: h,
                    ports: 2 * (k * k) as usize,
                    links: (k * k) as usize,
                },
                "k={k}"
            );
            assert!(t.is_connected());
            check_unique(&t);
            // Every switch port is used.
            for n in t.nodes().iter().filter(|n| n.is_switch()) {
                assert!(n.physical_ports().all(|(_, p)| p.remote.is_some()));
            }
        }
        let c = fat_tree_2level(36).unwrap().counts();
        assert_eq!((c.hcas, c.switches), (648, 54));
        assert_eq!(fat_tree_2level(7).unwrap_err(), GenError::BadRadix(7, 2));
        assert_eq!(fat_tree_2level(0).unwrap_err(), GenError::BadRadix(0, 2));
        assert_eq!(
            fat_tree_2level(300).unwrap_err(),
            GenError::RadixTooLarge(300)
        );
    }

    #[test]
    fn two_level_wiring() {
        let t = fat_tree_2level(4).unwrap();
        let leaf = t.find_by_name("leaf-1").unwrap();
        let spine = t.find_by_name("spine-1").unwrap();
        // leaf-1 port 4 (half + 1 + 1) goes to spine-1 port 2 (leaf index + 1).
        assert_eq!(t.neighbor(leaf, 4), Some((spine, 2)));
        let hca = t.find_by_name("hca-2").unwrap();
        assert_eq!(t.neighbor(leaf, 1), Some((hca, 1)));
    }

    #[test]
    fn three_level_counts_follow_formula() {
        for k in [4u32, 6, 16] {
            let t = fat_tree_3level(k).unwrap();
            let h = (k * k * k / 4) as usize;
            let s = (5 * k * k / 4) as usize;
            // Edge: k/2 HCA + k/2 up; agg: k/2 up per switch; per pod.
            let links = h + k as usize * (k as usize / 2) * (k as usize / 2) * 2;
            assert_eq!(
                t.counts(),
                Counts {
                    nodes: h + s,
                    switches: s,
                    hcas: h,
                    ports: 2 * links,
                    links,
                },
                "k={k}"
            );
            assert!(t.is_connected());
            check_unique(&t);
            for n in t.nodes().iter().filter(|n| n.is_switch()) {
                assert!(n.physical_ports().all(|(_, p)| p.remote.is_some()));
            }
        }
        let c = fat_tree_3level(16).unwrap().counts();
        assert_eq!((c.hcas, c.switches), (1024, 320));
        let c = fat_tree_3level(32).unwrap().counts();
        assert_eq!((c.hcas, c.switches), (8192, 1280));
        assert_eq!(fat_tree_3level(2).unwrap_err(), GenError::BadRadix(2, 4));
    }

    #[test]
    fn three_level_k58_builds() {
        let t = fat_tree_3level(58).unwrap();
        let c = t.counts();
        assert_eq!(c.hcas, 48_778);
        assert_eq!(c.switches, 4205);
        assert_eq!(c.nodes, 52_983);
        assert_eq!(c.links, 48_778 + 58 * 29 * 29 * 2);
        assert!(t.is_connected());
    }

    #[test]
    fn three_level_k58_at_the_unicast_limit() {
        let t = fat_tree_3level_hcas(58, 44_946).unwrap();
        let c = t.counts();
        assert_eq!((c.hcas, c.switches), (44_946, 4205));
        assert_eq!(c.nodes, 0xBFFF, "one LID per node fills 1..=0xBFFF");
        assert_eq!(c.links, 44_946 + 58 * 29 * 29 * 2);
        assert!(t.is_connected());
        assert_eq!(fat_tree_3level_hcas(4, 100).unwrap().counts().hcas, 16);
    }

    #[test]
    fn random_rejects_impossible_requests() {
        assert_eq!(random(1, 0, 5, 8).unwrap_err(), GenError::NoSwitches);
        assert!(matches!(
            random(1, 2, 20, 8).unwrap_err(),
            GenError::NotEnoughPorts { .. }
        ));
        assert!(matches!(
            random(1, 3, 0, 1).unwrap_err(),
            GenError::NotEnoughPorts { .. }
        ));
        assert_eq!(
            random(1, 1, 3, 300).unwrap_err(),
            GenError::RadixTooLarge(300)
        );
        // Exactly full.
        let t = random(9, 4, 4 * 8 - 6, 8).unwrap();
        assert!(t.is_connected());
    }

    #[test]
    fn splitmix_is_deterministic_and_bounded() {
        let mut a = SplitMix64::new(42);
        let mut b = SplitMix64::new(42);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
            assert!(a.below(7) < 7);
            b.below(7);
        }
        assert_eq!(a.below(0), 0);
    }

    proptest! {
        #[test]
        fn random_is_connected_deterministic_and_counted(
            seed in any::<u64>(),
            switches in 1u32..40,
            hcas in 0u32..120,
            radix in 3u32..40,
        ) {
            let have = u64::from(switches) * u64::from(radix);
            let need = 2 * (u64::from(switches) - 1) + u64::from(hcas);
            let r = random(seed, switches, hcas, radix);
            if have < need {
                let refused = matches!(r, Err(GenError::NotEnoughPorts { .. }));
                prop_assert!(refused);
                return Ok(());
            }
            let t = r.unwrap();
            let c = t.counts();
            prop_assert_eq!(c.switches, switches as usize);
            prop_assert_eq!(c.hcas, hcas as usize);
            prop_assert_eq!(c.nodes, (switches + hcas) as usize);
            prop_assert_eq!(c.ports, 2 * c.links);
            prop_assert!(c.links >= (switches - 1 + hcas) as usize);
            prop_assert!(t.is_connected());
            // Every HCA is cabled to a switch.
            for n in t.nodes().iter().filter(|n| !n.is_switch()) {
                let (r, _) = n.ports[1].remote.unwrap();
                prop_assert!(t.node(r).unwrap().is_switch());
            }
            check_unique(&t);
            prop_assert_eq!(&t, &random(seed, switches, hcas, radix).unwrap());
        }

        #[test]
        fn random_depends_on_seed(seed in any::<u64>()) {
            let a = random(seed, 20, 40, 12).unwrap();
            let b = random(seed.wrapping_add(1), 20, 40, 12).unwrap();
            prop_assert_ne!(a, b);
        }
    }
}
