//! Feeds arbitrary bytes to the SMP decoder and every attribute decoder and typed
//! modifier; anything that decodes must survive encode -> decode unchanged.
#![no_main]

use ibsm_mad::modifier::*;
use ibsm_mad::*;
use libfuzzer_sys::fuzz_target;

fn attr<A: SmpAttribute + PartialEq + core::fmt::Debug>(data: &[u8]) {
    if let Ok(a) = A::decode(data) {
        assert_eq!(A::decode(&a.encode()).as_ref(), Ok(&a));
    }
}

fuzz_target!(|data: &[u8]| {
    let _ = Smp::peek_tid(data);
    let _ = MadHeader::decode(data);
    if let Ok(s) = Smp::decode(data) {
        assert_eq!(Smp::decode(&s.encode()), Ok(s));
        let _ = s.response();
        let m = s.attr_mod;
        let _ = (
            VlArbBlock::from_attr_mod(m),
            SmInfoControl::from_attr_mod(m),
            PKeyBlock::from_attr_mod(m),
            Sl2VlPorts::from_attr_mod(m),
            MftBlock::from_attr_mod(m),
        );
    }
    // Attributes from the SMP data field position and from the raw input.
    for d in [data.get(64..).unwrap_or(&[]), data] {
        attr::<NodeInfo>(d);
        attr::<NodeDescription>(d);
        attr::<PortInfo>(d);
        attr::<SwitchInfo>(d);
        attr::<SmInfo>(d);
        attr::<GuidInfo>(d);
        attr::<PKeyTable>(d);
        attr::<SlToVlMappingTable>(d);
        attr::<VlArbitrationTable>(d);
        attr::<LinearForwardingTable>(d);
        attr::<RandomForwardingTable>(d);
        attr::<MulticastForwardingTable>(d);
        attr::<LedInfo>(d);
        attr::<VendorDiag>(d);
        attr::<Notice>(d);
        if let Ok(n) = Notice::decode(d) {
            if let Some(t) = n.details() {
                assert_eq!(TrapDetails::decode(t.trap_number(), &t.encode()), Some(t));
            }
        }
    }
});
