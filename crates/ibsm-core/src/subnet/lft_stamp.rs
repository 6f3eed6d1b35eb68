//! The LFT stamp: a programming-in-progress marker kept in each switch, so a
//! standby's earlier read of a switch's LinearForwardingTable can stand in for a
//! read after the master died.
//!
//! # Why
//!
//! A takeover is "verified" when every LFT block the switches hold is confirmed
//! to be what the replica says. Reading every block after the master fell silent
//! is 7,040 SMPs on a k=16 fat tree, most of a takeover's time. A standby can read
//! them while the master is alive, but that read proves nothing about the time of
//! the takeover unless the standby can tell, cheaply and after the master died,
//! that no block of that switch was written since. Nothing in IBA counts LFT
//! writes, and the replica cannot say it either: it may lag what the master
//! committed, and a master killed between programming and publishing published
//! nothing.
//!
//! # The stamp
//!
//! The entry of LID 0 in LFT block 0. LID 0 is reserved: no packet is ever
//! forwarded by it, and our routing leaves it [`UNREACHABLE`] in every table. The
//! master writes a stamp there, a seqlock in the switch itself:
//!
//! * `0..=253` is a stamp: **even** = settled (the switch holds exactly what the
//!   master finished programming), **odd** = a programming round in progress.
//!   Stamps wrap modulo [`STAMP_SPACE`] (254, even, so the parity survives).
//! * `254` and `255` are **no stamp** (a reset switch, a switch OpenSM or an older
//!   release programmed): never trusted.
//!
//! The master's order for one switch whose blocks other than 0 change:
//!
//! 1. block 0 with the new content and an odd stamp ([`open`]), and wait for its
//!    response (a lost or failed open stops the round for that switch: its other
//!    blocks are not sent);
//! 2. the changed blocks, and wait for every response;
//! 3. block 0 again with the next even stamp ([`close`]).
//!
//! A switch with no stamp skips step 1 (nothing trusts it yet, and step 3 still
//! comes last); a round that changes block 0 alone is one Set with [`close`]
//! (one SMP is atomic).
//!
//! A reader (a standby keeping a read of the fabric) reads block 0, then the other
//! blocks, then block 0 again after every other answer came, and keeps the table
//! only if both stamps are the same even value. At takeover, reading block 0
//! alone and finding that same stamp proves no stamping master wrote the switch
//! since: any write would have opened (odd) or closed (a different even value).
//! A switch reset loses the stamp (no stamp). What it does not catch: a master
//! that does not stamp (OpenSM, an older release) writing blocks other than 0, so
//! a standby keeps such reads only while it follows an ibsmd master of its own
//! replication cluster, and the replica records the stamp each switch was closed
//! with (`Inherited::lft_stamps`), cleared by a digest written without one; and
//! 127 rounds on one switch between two checks of the reader bringing the stamp
//! back to the same value (the reader re-checks every stamp periodically).
//!
//! In every table this crate keeps (routing, programmed state, read-backs,
//! digests), entry 0 is [`UNREACHABLE`]: the stamp lives only on the wire, taken
//! out by [`split_block0`] when block 0 is read and put in by [`stamped_block0`]
//! when it is written.

use std::sync::Arc;

use ibsm_fabric::routing::UNREACHABLE;

/// Stamps are `0..STAMP_SPACE`; `STAMP_SPACE` and above are "no stamp".
pub const STAMP_SPACE: u8 = 254;

/// What LID 0's entry of LFT block 0 says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stamp {
    /// Settled by a stamping master at this (even) stamp.
    Settled(u8),
    /// A stamping master opened a round (odd) and did not close it.
    InProgress(u8),
    /// No stamp: never programmed by a stamping master, or reset since.
    None,
}

impl Stamp {
    /// The stamp in LID 0's entry `entry`.
    pub fn of(entry: u8) -> Stamp {
        if entry >= STAMP_SPACE {
            Stamp::None
        } else if entry.is_multiple_of(2) {
            Stamp::Settled(entry)
        } else {
            Stamp::InProgress(entry)
        }
    }

    /// The raw entry value (`UNREACHABLE` for no stamp).
    pub fn raw(self) -> u8 {
        match self {
            Stamp::Settled(s) | Stamp::InProgress(s) => s,
            Stamp::None => UNREACHABLE,
        }
    }

    /// The settled stamp, if any: the only kind a reader may trust.
    pub fn settled(self) -> Option<u8> {
        match self {
            Stamp::Settled(s) => Some(s),
            _ => None,
        }
    }
}

/// The odd stamp that opens a round on a switch stamped `cur` (`None` when the
/// switch has no stamp: no open is needed, see the module doc).
pub fn open(cur: Stamp) -> Option<u8> {
    match cur {
        Stamp::Settled(s) => Some((s + 1) % STAMP_SPACE),
        // Already open (a master died mid-round): nobody trusts it; stay open.
        Stamp::InProgress(_) | Stamp::None => None,
    }
}

/// The even stamp that closes a round on a switch stamped `cur` (opened by
/// [`open`] or not): always a value no reader can hold for the switch as it was
/// before the round (it differs from `cur`'s settled value).
pub fn close(cur: Stamp) -> u8 {
    match cur {
        Stamp::Settled(s) => (s + 2) % STAMP_SPACE,
        Stamp::InProgress(s) => (s + 1) % STAMP_SPACE,
        Stamp::None => 0,
    }
}

/// Split block 0 as read from a switch into its stamp and the 64 entries as
/// every table here keeps them (entry 0 [`UNREACHABLE`]).
pub fn split_block0(ports: &[u8; 64]) -> (Stamp, [u8; 64]) {
    let mut clean = *ports;
    clean[0] = UNREACHABLE;
    (Stamp::of(ports[0]), clean)
}

/// Block 0 as written: `ports` (entry 0 as kept, ignored) with `stamp` in LID 0's
/// entry.
pub fn stamped_block0(ports: &[u8; 64], stamp: u8) -> [u8; 64] {
    let mut out = *ports;
    out[0] = stamp;
    out
}

/// One switch's table as the standing read holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StandingLft {
    /// The settled stamp both block-0 reads carried.
    pub stamp: u8,
    /// LinearFDBTop the table was read up to (from the standby's discovery).
    pub top: u16,
    /// Entries `0..=top` (entry 0 [`UNREACHABLE`]).
    pub table: Arc<[u8]>,
    /// The replicated ((LinearFDBTop, digest), stamp) it was read under.
    pub(super) replicated: Replicated,
}

pub(super) type Replicated = (Option<(u16, u64)>, Option<u8>);

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn values_at_and_above_the_space_are_no_stamp() {
        assert_eq!(Stamp::of(0xFF), Stamp::None);
        assert_eq!(Stamp::of(254), Stamp::None);
        assert_eq!(Stamp::of(0), Stamp::Settled(0));
        assert_eq!(Stamp::of(253), Stamp::InProgress(253));
        assert_eq!(Stamp::None.raw(), UNREACHABLE);
    }

    #[test]
    fn block0_round_trips_with_entry_0_kept_unreachable() {
        let mut ports = [7u8; 64];
        ports[0] = UNREACHABLE;
        let wire = stamped_block0(&ports, 42);
        assert_eq!(wire[0], 42);
        assert_eq!(split_block0(&wire), (Stamp::Settled(42), ports));
    }

    proptest! {
        /// Open is odd, close is even, both stay in the space, and a close never
        /// gives back the settled stamp a reader may hold.
        #[test]
        fn open_and_close_keep_parity_and_move(entry in any::<u8>()) {
            let cur = Stamp::of(entry);
            if let Some(o) = open(cur) {
                prop_assert!(o < STAMP_SPACE && !o.is_multiple_of(2));
                prop_assert_eq!(close(Stamp::of(o)), close(cur));
            }
            let c = close(cur);
            prop_assert!(c < STAMP_SPACE && c.is_multiple_of(2));
            prop_assert_ne!(Some(c), cur.settled());
        }
    }
}
