//! The embedded simulator decodes/encodes ~1M SMPs/s through this crate: the hot
//! path (SMP decode/encode, attribute decode/encode, response building) must not
//! touch the heap. A counting global allocator proves it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use ibsm_mad::*;

struct Counting;
static ALLOCS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Count this thread's allocations only: the test harness's own thread allocates
    /// while a test runs (its timers and channels), which says nothing of the code here.
    static COUNT_HERE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if COUNT_HERE.try_with(std::cell::Cell::get).unwrap_or(false) {
            ALLOCS.fetch_add(1, Ordering::SeqCst);
        }
        // SAFETY: forwards the caller's contract to the system allocator.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwards the caller's contract to the system allocator.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn hot_path_does_not_allocate() {
    let req = Smp::get_dr(&[1, 3, 5], AttributeId::PORT_INFO, 2, 7);
    let mut wire = [0u8; MAD_SIZE];
    COUNT_HERE.with(|c| c.set(true));
    let before = ALLOCS.load(Ordering::SeqCst);
    let mut sum = 0u64;
    for i in 0..10_000u64 {
        let mut r = req;
        r.tid = i;
        r.encode_into(&mut wire);
        let d = Smp::decode(&wire).expect("valid");
        let pi = PortInfo::decode(&d.data).expect("valid");
        let mut pi2 = pi;
        pi2.lid = i as u16;
        let resp = d.response().with_attribute(&pi2);
        let out = resp.encode();
        let back = Smp::decode(&out).expect("valid");
        sum += u64::from(back.attribute::<PortInfo>().expect("valid").lid);
        sum += Smp::peek_tid(&out).unwrap_or(0);
    }
    let after = ALLOCS.load(Ordering::SeqCst);
    COUNT_HERE.with(|c| c.set(false));
    assert!(sum > 0);
    assert_eq!(
        after - before,
        0,
        "SMP/attribute codec allocated on the hot path"
    );
    sa_single_mads_and_records_do_not_allocate();
}

/// Called from the one test of this file: the counter is global, and a second test
/// thread's start-up would be counted against the first.
fn sa_single_mads_and_records_do_not_allocate() {
    use ibsm_mad::sa::*;
    let tmpl = PathRecord {
        dlid: 3,
        ..PathRecord::default()
    };
    let q = SaMad::query(Method::GET, 1, &tmpl, PathRecord::DLID).expect("fits");
    let nr = NodeRecord::default();
    COUNT_HERE.with(|c| c.set(true));
    let before = ALLOCS.load(Ordering::SeqCst);
    let mut hits = 0u32;
    for i in 0..1_000u64 {
        let mut m = q;
        m.header.tid = i;
        let wire = m.encode();
        let d = SaMad::decode(&wire).expect("valid");
        let p: PathRecord = d.record().expect("valid");
        hits += u32::from(p.matches(&tmpl, d.component_mask));
        let mut r = d.response(Method::GET_RESP, SaStatus::SUCCESS);
        r.set_record(&nr).expect("fits");
        let back = NodeRecord::decode(&SaMad::decode(&r.encode()).expect("valid").data);
        hits += u32::from(back.is_ok());
        let mc = McMemberRecord::decode(&r.data).expect("valid");
        hits += u32::from(mc.matches(&mc, McMemberRecord::MGID));
    }
    let after = ALLOCS.load(Ordering::SeqCst);
    COUNT_HERE.with(|c| c.set(false));
    assert_eq!(hits, 3_000);
    assert_eq!(after - before, 0, "SA single-MAD codec allocated");
}
