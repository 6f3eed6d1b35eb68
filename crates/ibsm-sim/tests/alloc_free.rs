//! The hot path (DR Get NodeInfo/PortInfo through a few hops) allocates nothing once
//! the delivery queue has warmed up. Counted with a wrapping global allocator; this
//! file holds a single test so no other test thread allocates meanwhile.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ibsm_mad::{AttributeId, Smp};
use ibsm_sim::{Sim, SimConfig};

struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Count this thread's allocations only: the test harness's own thread allocates
    /// while a test runs (its timers and channels), which says nothing of the code here.
    static COUNT_HERE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNT_HERE.try_with(std::cell::Cell::get).unwrap_or(false) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn dr_get_round_trips_do_not_allocate() {
    let topo = common::two_switch_topology();
    let mut sim = Sim::new(&topo, SimConfig::default());
    let sm = sim.attach(topo.find_by_name("Hca1").unwrap(), 1).unwrap();
    let reqs: Vec<[u8; 256]> = [
        Smp::get_dr(&[], AttributeId::NODE_INFO, 0, 1),
        Smp::get_dr(&[1, 3], AttributeId::NODE_INFO, 0, 2),
        Smp::get_dr(&[1, 3, 5, 2], AttributeId::PORT_INFO, 1, 3),
        Smp::get_dr(&[1, 5, 1], AttributeId::PORT_INFO, 0, 4),
    ]
    .iter()
    .map(Smp::encode)
    .collect();
    let mut now = Duration::ZERO;
    let round = |now: &mut Duration, sim: &mut Sim| {
        // Keep a window of 4 in flight, like an SM does.
        for r in &reqs {
            sim.send(*now, sm, r).unwrap();
        }
        *now += Duration::from_micros(10);
        let mut got = 0;
        while sim.poll_delivery(*now).is_some() {
            got += 1;
        }
        assert_eq!(got, reqs.len());
    };
    for _ in 0..100 {
        round(&mut now, &mut sim);
    }
    COUNT_HERE.with(|c| c.set(true));
    let before = ALLOCS.load(Ordering::Relaxed);
    for _ in 0..1000 {
        round(&mut now, &mut sim);
    }
    let after = ALLOCS.load(Ordering::Relaxed);
    COUNT_HERE.with(|c| c.set(false));
    assert_eq!(after - before, 0, "allocations on the hot path");
}
