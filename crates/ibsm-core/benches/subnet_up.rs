//! Brings up generated 3-level fat trees in the embedded simulator with a real
//! clock and prints, per size, the phase times of the first heavy sweep and the
//! peak heap per phase, then a failover's takeover work at that size: a second SM
//! on another CA, handed what the replica holds (every switch's LFT digest and the
//! cabling), reads every LFT back, verifies it and adopts it.
//!
//! Default sizes: k=16, k=32, k=56 (47,824 LIDs: the "48k LIDs" fabric) and
//! k=58 with 44,946 HCAs (49,151 LIDs: every unicast LID 1..=0xBFFF in use).
//! `SUBNET_UP_K=16,32,58:44946` picks them (`k` or `k:max_hcas`);
//! `SUBNET_UP_TAKEOVER=0` skips the takeover; `SUBNET_UP_SWITCH_SL2VL=1` also
//! programs switch SLtoVL per port pair.
//!
//! Memory: a counting global allocator (live and peak bytes of the whole
//! process's heap, the simulated fabric included). Each round of the driving
//! loop is timed and attributed to the phase its midpoint falls in (the phases'
//! boundaries are the sweep's own `PhaseTimes`), and the peak of the heap during
//! that phase's rounds is printed; `base` is the heap before the SM starts (topology and simulator).
//! `HWM` is the process's VmHWM (resident peak) at the end of the row.
//!
//! `cargo bench -p ibsm-core --bench subnet_up` (release).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ibsm_core::subnet::{
    lft_digest, links_of, Inherited, SubnetConfig, SubnetEvent, SubnetManager,
};
use ibsm_core::transactions::TransactionsConfig;
use ibsm_fabric::{gen, NodeIdx};
use ibsm_sim::{ClientId, Sim, SimConfig};

/// The system allocator, counting live bytes and their peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize) {
    let live = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

// SAFETY: every call is passed to `System` unchanged; only counters are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// Start a new peak window at the current live size.
fn reset_peak() {
    PEAK.store(live(), Ordering::Relaxed);
}

fn peak() -> usize {
    PEAK.load(Ordering::Relaxed)
}

fn mib(b: usize) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

fn vm_hwm_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// One SM on the simulator, driven with the real clock from `start`. Every loop
/// round is recorded as (its start, the heap's peak during it) in `rounds`.
struct Driver<'a> {
    sim: &'a mut Sim,
    client: ClientId,
    start: Instant,
    rounds: Vec<(Duration, usize)>,
    /// When [`SubnetManager::last_inherit`] first said the read-back was compared.
    verified_at: Option<Duration>,
}

impl Driver<'_> {
    /// Run until `stop` matches an event (returns it), or 600 s.
    fn run(
        &mut self,
        sm: &mut SubnetManager,
        mut stop: impl FnMut(&SubnetEvent) -> bool,
    ) -> Option<SubnetEvent> {
        loop {
            let t = self.start.elapsed();
            reset_peak();
            let mut busy = false;
            while let Some(o) = sm.poll_transmit() {
                busy = true;
                let now = self.start.elapsed();
                let r = match o.dlid {
                    None => self.sim.send(now, self.client, &o.mad),
                    Some(l) => self.sim.send_to(now, self.client, l, &o.mad),
                };
                if let Err(e) = r {
                    eprintln!("send: {e}");
                }
            }
            let now = self.start.elapsed();
            while let Some((c, mad)) = self.sim.poll_delivery(now) {
                busy = true;
                if c == self.client {
                    sm.handle_incoming(now, &mad);
                }
            }
            let mut hit = None;
            while let Some(ev) = sm.poll_event() {
                if hit.is_none() && stop(&ev) {
                    hit = Some(ev);
                }
            }
            if !busy && sm.poll_timeout().is_some_and(|t| t <= self.start.elapsed()) {
                sm.handle_timeout(self.start.elapsed());
            }
            self.record(t, self.start.elapsed());
            if self.verified_at.is_none() && sm.last_inherit().is_some() {
                self.verified_at = Some(self.start.elapsed());
            }
            if hit.is_some() {
                return hit;
            }
            if self.start.elapsed() > Duration::from_secs(600) {
                eprintln!("no matching event after 600 s");
                return None;
            }
        }
    }

    /// Keep one record per millisecond of the round's midpoint (its largest peak),
    /// so a million rounds do not allocate a million records. A round counts in
    /// the phase that holds its midpoint: a compute phase (LIDs, routing) is one
    /// long round that starts a little before the phase's mark.
    fn record(&mut self, start: Duration, end: Duration) {
        let p = peak();
        let mid = start + (end.saturating_sub(start)) / 2;
        match self.rounds.last_mut() {
            Some((last, q)) if mid.as_millis() == last.as_millis() => *q = (*q).max(p),
            _ => self.rounds.push((mid, p)),
        }
    }

    /// Peak heap per phase, the phases given as consecutive durations from `t0`.
    fn peaks(&self, t0: Duration, phases: &[Duration]) -> Vec<usize> {
        let mut bounds = Vec::with_capacity(phases.len() + 1);
        let mut b = t0;
        bounds.push(b);
        for d in phases {
            b += *d;
            bounds.push(b);
        }
        let mut out = vec![0usize; phases.len()];
        for &(t, p) in &self.rounds {
            // The phase whose [start, end) holds t; the last round (end of
            // activation) counts in activation.
            let i = bounds
                .windows(2)
                .position(|w| t >= w[0] && t < w[1])
                .unwrap_or(phases.len().saturating_sub(1));
            if let Some(x) = out.get_mut(i) {
                *x = (*x).max(p);
            }
        }
        out
    }
}

fn sm_config(switch_sl2vl: bool) -> SubnetConfig {
    SubnetConfig {
        transactions: TransactionsConfig {
            window: 64,
            timeout: Duration::from_millis(500),
            retries: 3,
            tid_high: 1,
            tid_low: ibsm_core::transactions::TidRange::ALL,
        },
        switch_sl2vl,
        ..SubnetConfig::default()
    }
}

/// What the takeover cost: time to the read-back verified and to the end of the
/// new master's first sweep, SMPs, LFT blocks read and written, adopted or not.
struct Takeover {
    verified: Duration,
    up: Duration,
    smps: u64,
    blocks_read: u64,
    written: u64,
    adopted: bool,
    verified_switches: usize,
    peak: usize,
}

fn takeover(
    sim: &mut Sim,
    first: (ClientId, SubnetManager),
    at: NodeIdx,
    switch_sl2vl: bool,
) -> Option<Takeover> {
    let (c1, mut master) = first;
    // What the replica holds: every switch's LFT digest, the cabling and the port
    // digests (used only by a verified takeover; this one discovers).
    let inh = Inherited {
        lft_digests: master
            .programmed_lfts()
            .map(|(g, top, t)| (g, (top, lft_digest(t))))
            .collect(),
        links: master.last_discovery().map(|r| links_of(&r.topology)),
        port_digests: master.programmed_port_digests().into_iter().collect(),
        lft_stamps: master.programmed_lft_stamps().collect(),
    };
    master.stop();
    drop(master);
    let _ = sim.detach(c1);
    let client = sim.attach(at, 1).ok()?;
    let _ = sim.set_is_sm(client, true);
    let mut sm = SubnetManager::new(sm_config(switch_sl2vl)).ok()?;
    sm.inherit(inh);
    let start = Instant::now();
    reset_peak();
    let mut d = Driver {
        sim,
        client,
        start,
        rounds: Vec::new(),
        verified_at: None,
    };
    sm.become_master(Duration::ZERO);
    let ev = d.run(&mut sm, |e| matches!(e, SubnetEvent::SubnetUp { .. }));
    let up = start.elapsed();
    let verified = d.verified_at;
    let Some(SubnetEvent::SubnetUp { report: r, .. }) = ev else {
        return None;
    };
    let inh = sm.last_inherit().cloned().unwrap_or_default();
    Some(Takeover {
        verified: verified.unwrap_or(up),
        up,
        smps: r.smps,
        blocks_read: inh.blocks_read,
        written: r.lft_blocks_sent,
        adopted: inh.adopted,
        verified_switches: inh.verified,
        peak: d.rounds.iter().map(|r| r.1).max().unwrap_or(0),
    })
}

fn main() {
    let sizes: Vec<(u32, u32)> = std::env::var("SUBNET_UP_K")
        .ok()
        .map(|v| {
            v.split(',')
                .filter_map(|s| {
                    let mut it = s.trim().split(':');
                    let k = it.next()?.parse().ok()?;
                    let h = it.next().map_or(Some(u32::MAX), |h| h.parse().ok())?;
                    Some((k, h))
                })
                .collect()
        })
        .unwrap_or_else(|| vec![(16, u32::MAX), (32, u32::MAX), (56, u32::MAX), (58, 44_946)]);
    let switch_sl2vl = std::env::var("SUBNET_UP_SWITCH_SL2VL").is_ok_and(|v| v == "1");
    let do_takeover = !std::env::var("SUBNET_UP_TAKEOVER").is_ok_and(|v| v == "0");
    let mut times = Vec::new();
    let mut mems = Vec::new();
    let mut takeovers = Vec::new();
    for (k, max_hcas) in sizes {
        let label = if max_hcas == u32::MAX {
            format!("k{k}")
        } else {
            format!("k{k}:{max_hcas}")
        };
        let t0 = Instant::now();
        let topo = match gen::fat_tree_3level_hcas(k, max_hcas) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("{label}: {e}");
                continue;
            }
        };
        let mut sim = Sim::new(
            &topo,
            SimConfig {
                latency: Duration::ZERO,
                ..SimConfig::default()
            },
        );
        let cas: Vec<NodeIdx> = topo
            .iter()
            .filter(|(_, n)| !n.is_switch())
            .map(|(i, _)| i)
            .collect();
        let (Some(&ca), Some(&last_ca)) = (cas.first(), cas.last()) else {
            continue;
        };
        drop(topo);
        let Ok(client) = sim.attach(ca, 1) else {
            continue;
        };
        let _ = sim.set_is_sm(client, true);
        let setup = t0.elapsed();
        let base = live();
        let Ok(mut sm) = SubnetManager::new(sm_config(switch_sl2vl)) else {
            continue;
        };
        let start = Instant::now();
        let mut d = Driver {
            sim: &mut sim,
            client,
            start,
            rounds: Vec::new(),
            verified_at: None,
        };
        sm.become_master(Duration::ZERO);
        let Some(SubnetEvent::SubnetUp {
            phases: p,
            report: r,
        }) = d.run(&mut sm, |e| matches!(e, SubnetEvent::SubnetUp { .. }))
        else {
            eprintln!("{label}: no SubnetUp");
            continue;
        };
        let ph = [p.discovery, p.lids, p.routing, p.distribution, p.activation];
        let peaks = d.peaks(Duration::ZERO, &ph);
        let s = |d: Duration| d.as_secs_f64();
        times.push(format!(
            "{:<10} {:>7} {:>7} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>9}",
            label,
            r.nodes,
            r.lids,
            s(setup),
            s(p.discovery),
            s(p.lids),
            s(p.routing),
            s(p.distribution),
            s(p.activation),
            s(p.total()),
            r.smps,
        ));
        mems.push(format!(
            "{:<10} {:>8.0} {:>8.0} {:>8.0} {:>8.0} {:>8.0} {:>8.0} {:>8.0} {:>8}",
            label,
            mib(base),
            mib(peaks[0]),
            mib(peaks[1]),
            mib(peaks[2]),
            mib(peaks[3]),
            mib(peaks[4]),
            mib(live()),
            vm_hwm_kib() / 1024,
        ));
        eprintln!("{label}: up in {:.3} s", s(p.total()));
        if do_takeover {
            match takeover(&mut sim, (client, sm), last_ca, switch_sl2vl) {
                Some(t) => takeovers.push(format!(
                    "{:<10} {:>9} {:>9} {:>9.3} {:>9.3} {:>9} {:>8} {:>8} {:>8.0}",
                    label,
                    t.verified_switches,
                    t.blocks_read,
                    s(t.verified),
                    s(t.up),
                    t.smps,
                    t.written,
                    if t.adopted { "yes" } else { "NO" },
                    mib(t.peak),
                )),
                None => eprintln!("{label}: takeover did not finish"),
            }
        }
    }
    println!("Bring-up in the embedded simulator (one SM, real clock; seconds)");
    println!(
        "{:<10} {:>7} {:>7} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9}",
        "fabric",
        "nodes",
        "LIDs",
        "setup",
        "disc",
        "lids",
        "route",
        "distr",
        "activ",
        "total",
        "SMPs"
    );
    for l in &times {
        println!("{l}");
    }
    println!();
    println!("Peak heap per phase (MiB; base = topology + simulator before the SM; after = live at subnet up; HWM = VmHWM so far)");
    println!(
        "{:<10} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "fabric", "base", "disc", "lids", "route", "distr", "activ", "after", "HWM"
    );
    for l in &mems {
        println!("{l}");
    }
    if !takeovers.is_empty() {
        println!();
        println!("Takeover from the replica's digests and cabling (second SM, last CA; seconds from become_master)");
        println!(
            "{:<10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8}",
            "fabric",
            "switches",
            "blocks",
            "verified",
            "up",
            "SMPs",
            "written",
            "adopted",
            "peakMiB"
        );
        for l in &takeovers {
            println!("{l}");
        }
    }
}
