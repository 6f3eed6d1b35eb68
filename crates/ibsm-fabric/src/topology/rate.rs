//! [`Rate`], the PathRecord/MCMemberRecord rate a link's width and speed give, and
//! the IBA MTU encoding. Leaf value types next to [`LinkWidth`]/[`LinkSpeed`]: the SA
//! answers with the minimum of both along a path ([`crate::path`]).
//!
//! The rate codes are IBA's (PathRecord.Rate, OpenSM's `IB_PATH_RECORD_RATE_*`);
//! they are not in bandwidth order (5 Gb/s is 5, 30 Gb/s is 4), so [`Rate`] orders
//! by bandwidth, like OpenSM's `ib_path_compare_rates`, never by code. The width x
//! speed table is OpenSM's `ib_port_info_compute_rate`: FDR10 counts as QDR (it
//! reports LinkSpeedActive QDR), HDR as 50 Gb/s and NDR as 100 Gb/s per lane.

use std::cmp::Ordering;
use std::fmt;

use super::link::{LinkSpeed, LinkWidth};

/// MTU 256 bytes (IBA MTU encoding).
pub const MTU_256: u8 = 1;
/// MTU 512 bytes.
pub const MTU_512: u8 = 2;
/// MTU 1024 bytes.
pub const MTU_1024: u8 = 3;
/// MTU 2048 bytes: what ibsim reports on every cabled port, and the default of
/// [`crate::Port::mtu`].
pub const MTU_2048: u8 = 4;
/// MTU 4096 bytes.
pub const MTU_4096: u8 = 5;

/// Bytes of an IBA MTU code (1 = 256 ... 5 = 4096); `None` for 0 and reserved codes.
pub fn mtu_bytes(mtu: u8) -> Option<u32> {
    (MTU_256..=MTU_4096).contains(&mtu).then(|| 128u32 << mtu)
}

/// (code, Mb/s) of every IBA rate, PathRecord.Rate 2..=24.
const RATES: [(u8, u32); 23] = [
    (2, 2_500),
    (3, 10_000),
    (4, 30_000),
    (5, 5_000),
    (6, 20_000),
    (7, 40_000),
    (8, 60_000),
    (9, 80_000),
    (10, 120_000),
    (11, 14_000),
    (12, 56_000),
    (13, 112_000),
    (14, 168_000),
    (15, 25_000),
    (16, 100_000),
    (17, 200_000),
    (18, 300_000),
    (19, 28_000),
    (20, 50_000),
    (21, 400_000),
    (22, 600_000),
    (23, 800_000),
    (24, 1_200_000),
];

/// A data rate as PathRecord.Rate / MCMemberRecord.Rate encode it. Ordered by
/// bandwidth, so `min` is the slower rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rate(u8);

impl Rate {
    /// 2.5 Gb/s (1x SDR), the slowest rate.
    pub const GBPS_2_5: Rate = Rate(2);
    /// 10 Gb/s (4x SDR, ibsim's default link).
    pub const GBPS_10: Rate = Rate(3);
    /// 1200 Gb/s (12x NDR), the fastest rate.
    pub const GBPS_1200: Rate = Rate(24);

    /// Decode a PathRecord.Rate code; `None` for 0, 1 and codes above 24.
    pub fn from_iba(code: u8) -> Option<Rate> {
        RATES.iter().any(|&(c, _)| c == code).then_some(Rate(code))
    }

    /// The PathRecord.Rate code.
    pub fn to_iba(self) -> u8 {
        self.0
    }

    /// Bandwidth in Mb/s (2.5 Gb/s = 2500).
    pub fn mbps(self) -> u32 {
        RATES
            .iter()
            .find(|&&(c, _)| c == self.0)
            .map_or(0, |&(_, m)| m)
    }

    /// The rate with this bandwidth, if IBA has a code for it.
    pub fn from_mbps(mbps: u32) -> Option<Rate> {
        RATES
            .iter()
            .find(|&&(_, m)| m == mbps)
            .map(|&(c, _)| Rate(c))
    }

    /// The rate of a link of this width and speed (OpenSM's
    /// `ib_port_info_compute_rate`). Every combination has a code.
    pub fn of_link(width: LinkWidth, speed: LinkSpeed) -> Rate {
        let lane_mbps: u32 = match speed {
            LinkSpeed::Sdr => 2_500,
            LinkSpeed::Ddr => 5_000,
            LinkSpeed::Qdr | LinkSpeed::Fdr10 => 10_000,
            LinkSpeed::Fdr => 14_000,
            LinkSpeed::Edr => 25_000,
            LinkSpeed::Hdr => 50_000,
            LinkSpeed::Ndr => 100_000,
        };
        Rate::from_mbps(lane_mbps * u32::from(width.lanes())).unwrap_or(Rate::GBPS_2_5)
    }
}

impl Ord for Rate {
    fn cmp(&self, other: &Self) -> Ordering {
        self.mbps().cmp(&other.mbps())
    }
}

impl PartialOrd for Rate {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.mbps();
        if m.is_multiple_of(1000) {
            write!(f, "{} Gb/s", m / 1000)
        } else {
            write!(f, "{}.{} Gb/s", m / 1000, (m % 1000) / 100)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_width_and_speed_has_an_exact_code() {
        let widths = [
            LinkWidth::X1,
            LinkWidth::X2,
            LinkWidth::X4,
            LinkWidth::X8,
            LinkWidth::X12,
        ];
        for w in widths {
            for s in LinkSpeed::ALL {
                let r = Rate::of_link(w, s);
                let lane = match s {
                    LinkSpeed::Sdr => 2_500,
                    LinkSpeed::Ddr => 5_000,
                    LinkSpeed::Qdr | LinkSpeed::Fdr10 => 10_000,
                    LinkSpeed::Fdr => 14_000,
                    LinkSpeed::Edr => 25_000,
                    LinkSpeed::Hdr => 50_000,
                    LinkSpeed::Ndr => 100_000,
                };
                assert_eq!(r.mbps(), lane * u32::from(w.lanes()), "{w} {s}");
            }
        }
    }

    #[test]
    fn codes_follow_opensm() {
        // Spot checks against ib_port_info_compute_rate.
        assert_eq!(Rate::of_link(LinkWidth::X1, LinkSpeed::Sdr).to_iba(), 2);
        assert_eq!(Rate::of_link(LinkWidth::X4, LinkSpeed::Sdr).to_iba(), 3);
        assert_eq!(Rate::of_link(LinkWidth::X12, LinkSpeed::Sdr).to_iba(), 4);
        assert_eq!(Rate::of_link(LinkWidth::X2, LinkSpeed::Sdr).to_iba(), 5);
        assert_eq!(Rate::of_link(LinkWidth::X4, LinkSpeed::Ddr).to_iba(), 6);
        assert_eq!(Rate::of_link(LinkWidth::X4, LinkSpeed::Qdr).to_iba(), 7);
        assert_eq!(Rate::of_link(LinkWidth::X4, LinkSpeed::Fdr10).to_iba(), 7);
        assert_eq!(Rate::of_link(LinkWidth::X4, LinkSpeed::Fdr).to_iba(), 12);
        assert_eq!(Rate::of_link(LinkWidth::X2, LinkSpeed::Fdr).to_iba(), 19);
        assert_eq!(Rate::of_link(LinkWidth::X4, LinkSpeed::Edr).to_iba(), 16);
        assert_eq!(Rate::of_link(LinkWidth::X4, LinkSpeed::Hdr).to_iba(), 17);
        assert_eq!(Rate::of_link(LinkWidth::X4, LinkSpeed::Ndr).to_iba(), 21);
        assert_eq!(Rate::of_link(LinkWidth::X12, LinkSpeed::Ndr).to_iba(), 24);
    }

    #[test]
    fn order_is_bandwidth_not_code() {
        let r5 = Rate::from_iba(5).unwrap();
        let r30 = Rate::from_iba(4).unwrap();
        assert!(r5 < r30);
        assert!(Rate::GBPS_2_5 < r5);
        assert_eq!(r5.min(r30), r5);
        for c in 0..=255u8 {
            match Rate::from_iba(c) {
                Some(r) => {
                    assert!((2..=24).contains(&c));
                    assert_eq!(r.to_iba(), c);
                    assert_eq!(Rate::from_mbps(r.mbps()), Some(r));
                }
                None => assert!(!(2..=24).contains(&c)),
            }
        }
        assert_eq!(Rate::GBPS_2_5.to_string(), "2.5 Gb/s");
        assert_eq!(Rate::GBPS_10.to_string(), "10 Gb/s");
    }

    #[test]
    fn mtu_codes() {
        assert_eq!(mtu_bytes(MTU_256), Some(256));
        assert_eq!(mtu_bytes(MTU_2048), Some(2048));
        assert_eq!(mtu_bytes(MTU_4096), Some(4096));
        assert_eq!(mtu_bytes(0), None);
        assert_eq!(mtu_bytes(6), None);
    }
}
