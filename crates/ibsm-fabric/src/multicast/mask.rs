//! [`PortMask`]: the set of a switch's ports one multicast LID is forwarded to, the
//! value of one MulticastForwardingTable entry. Leaf value type: trees produce it and
//! the MFT block layer splits it into 16-port positions.

use std::fmt;

/// Ports of one switch, 0 ..= 255: bit `n` is port `n`, bit 0 the switch's
/// management port (its own SMA/agents). Covers every port number IBA allows,
/// so a 64-port switch (65 port numbers with port 0) fits.
///
/// In a MulticastForwardingTable this is split into 16-bit PortMask entries, one
/// per *position*: position `p` holds ports `16p .. 16p + 15`, bit `i` of it
/// port `16p + i` ([`PortMask::position`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct PortMask([u64; 4]);

impl PortMask {
    /// No port.
    pub const EMPTY: PortMask = PortMask([0; 4]);

    /// No port.
    pub fn new() -> PortMask {
        PortMask::EMPTY
    }

    /// A mask holding `ports`.
    pub fn of(ports: impl IntoIterator<Item = u8>) -> PortMask {
        let mut m = PortMask::EMPTY;
        for p in ports {
            m.set(p);
        }
        m
    }

    fn word_bit(port: u8) -> (usize, u64) {
        (usize::from(port / 64), 1u64 << (port % 64))
    }

    /// Add a port.
    pub fn set(&mut self, port: u8) {
        let (w, b) = PortMask::word_bit(port);
        if let Some(x) = self.0.get_mut(w) {
            *x |= b;
        }
    }

    /// Remove a port.
    pub fn clear(&mut self, port: u8) {
        let (w, b) = PortMask::word_bit(port);
        if let Some(x) = self.0.get_mut(w) {
            *x &= !b;
        }
    }

    /// True when the port is in the mask.
    pub fn contains(&self, port: u8) -> bool {
        let (w, b) = PortMask::word_bit(port);
        self.0.get(w).is_some_and(|x| x & b != 0)
    }

    /// True when no port is in the mask.
    pub fn is_empty(&self) -> bool {
        self.0 == [0; 4]
    }

    /// Number of ports in the mask.
    pub fn len(&self) -> u32 {
        self.0.iter().map(|w| w.count_ones()).sum()
    }

    /// The highest port in the mask.
    pub fn highest(&self) -> Option<u8> {
        self.ports().last()
    }

    /// The ports, in increasing order.
    pub fn ports(&self) -> impl Iterator<Item = u8> + '_ {
        self.0.iter().enumerate().flat_map(|(wi, &word)| {
            let mut bits = word;
            std::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let b = bits.trailing_zeros();
                bits &= bits - 1;
                u8::try_from(wi as u32 * 64 + b).ok()
            })
        })
    }

    /// Every port of either mask.
    pub fn union(self, other: PortMask) -> PortMask {
        let mut out = self;
        for (a, b) in out.0.iter_mut().zip(other.0) {
            *a |= b;
        }
        out
    }

    /// The 16-bit MFT PortMask of `position` (0 ..= 15): bit `i` is port
    /// `16 * position + i`. 0 for positions beyond 15.
    pub fn position(&self, position: u8) -> u16 {
        let Some(&word) = self.0.get(usize::from(position / 4)) else {
            return 0;
        };
        (word >> (16 * u32::from(position % 4))) as u16
    }

    /// Replace the ports of `position` (0 ..= 15) with `bits` (bit `i` =
    /// port `16 * position + i`); positions beyond 15 are ignored.
    pub fn set_position(&mut self, position: u8, bits: u16) {
        let shift = 16 * u32::from(position % 4);
        if let Some(word) = self.0.get_mut(usize::from(position / 4)) {
            *word = (*word & !(0xFFFFu64 << shift)) | (u64::from(bits) << shift);
        }
    }
}

impl std::ops::BitOr for PortMask {
    type Output = PortMask;
    fn bitor(self, rhs: PortMask) -> PortMask {
        self.union(rhs)
    }
}

impl fmt::Debug for PortMask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.ports()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_clear_iterate() {
        let mut m = PortMask::new();
        assert!(m.is_empty());
        for p in [0u8, 1, 15, 16, 63, 64, 65, 200, 255] {
            m.set(p);
        }
        assert_eq!(
            m.ports().collect::<Vec<_>>(),
            vec![0, 1, 15, 16, 63, 64, 65, 200, 255]
        );
        assert_eq!(m.len(), 9);
        assert_eq!(m.highest(), Some(255));
        assert!(m.contains(64) && !m.contains(2));
        m.clear(64);
        assert!(!m.contains(64));
        assert_eq!(
            PortMask::of([3, 4]) | PortMask::of([4, 5]),
            PortMask::of(3..=5)
        );
        assert_eq!(format!("{:?}", PortMask::of([1, 9])), "{1, 9}");
    }

    #[test]
    fn positions_are_sixteen_ports() {
        let m = PortMask::of([0, 1, 16, 17, 36, 64, 255]);
        assert_eq!(m.position(0), 0b11);
        assert_eq!(m.position(1), 0b11);
        assert_eq!(m.position(2), 1 << 4);
        assert_eq!(m.position(4), 1);
        assert_eq!(m.position(15), 1 << 15);
        assert_eq!(m.position(16), 0);
        let mut r = PortMask::new();
        for p in 0..16 {
            r.set_position(p, m.position(p));
        }
        assert_eq!(r, m);
        r.set_position(1, 0);
        assert_eq!(r.ports().collect::<Vec<_>>(), vec![0, 1, 36, 64, 255]);
        r.set_position(99, 0xFFFF);
        assert_eq!(r.len(), 5);
    }
}
