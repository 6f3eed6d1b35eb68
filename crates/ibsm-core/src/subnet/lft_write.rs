//! The master's side of the LFT stamp ([`lft_stamp`](super::lft_stamp)): the order
//! in which a heavy sweep's distribution writes one switch's LFT blocks.
//!
//! [`plan`] turns the blocks of a switch that change into a *round*, from the
//! stamp the switch holds as [`Programmed`](super::sweep::Programmed) knows it
//! (unknown: no stamp):
//!
//! * block 0 alone changes: one Set of block 0 with [`close`];
//! * other blocks change and the switch is settled at `s`: block 0 (its new
//!   content) with [`open`] `s + 1` first; the other blocks only once the open
//!   is answered; block 0 again with [`close`] `s + 2` only once every one of
//!   them is answered (whatever its status);
//! * other blocks change and the switch has no stamp or an open one: the other
//!   blocks, then block 0 with [`close`].
//!
//! Block 0 thus always ends a round, also when its content did not change. What
//! waits is kept in the switch's [`Round`] and released into `Sweep::lft_next` by
//! [`done`], which every LFT Set passes through when it leaves the sweep; the
//! waiting Sets count as planned for the node from the start, so the node's
//! ports are armed only after its close (see `activation`). Other switches' Sets
//! keep flowing meanwhile: nothing waits across switches.
//!
//! A failed open (rejected, or no answer) ends the round: the switch's other
//! blocks and the close are not sent this sweep (`SweepReport::lft_opens_failed`)
//! and the switch's table is not remembered as programmed, so the next sweep
//! writes it again. A failed close may still have reached the switch (only its
//! answer lost), so the switch holds the open stamp or the close stamp; the stamp
//! remembered is then the close's as if settled ([`after_failed_close`]), which
//! makes the next round open again and close two past it: no value a reader can
//! hold for the switch comes back. (Remembering the open stamp instead would skip
//! the next open and close at the same value a reader may have read after the
//! lost answer.) A table not remembered is not replicated, nor is its stamp
//! (`SubnetManager::programmed_lft_stamps`).

use ibsm_fabric::NodeIdx;

use super::activation;
use super::lft_stamp::{close, open, Stamp};
use super::sweep::{Op, Programmed, Round, Sweep};

/// How an LFT Set left the sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Answered with status 0.
    Answered,
    /// Rejected (status) or no answer after retries.
    Failed,
    /// Never sent (its node found dead, or the SMP could not be built).
    NotSent,
}

/// Plan the LFT Sets of switch `node` whose `changed` blocks (ascending) differ
/// from what it holds, the switch stamped `cur`: what goes first is queued in
/// `sw.ops`, the rest kept in its round. Returns how many Sets were kept back
/// (they count as planned for the node).
pub(super) fn plan(sw: &mut Sweep, node: u32, changed: &[u16], cur: Stamp) -> usize {
    let block0 = changed.first() == Some(&0);
    let others: Vec<u16> = changed.iter().copied().filter(|&b| b != 0).collect();
    let close = close(cur);
    if others.is_empty() {
        if block0 {
            sw.ops.push_back(block0_op(node, close, true));
        }
        return 0;
    }
    let (round, kept) = match open(cur) {
        Some(o) => {
            sw.ops.push_back(block0_op(node, o, block0));
            let kept = others.len() + 1;
            let round = Round {
                held: others,
                awaiting: 0,
                close,
                close_content: false,
            };
            (round, kept)
        }
        None => {
            let awaiting = others.len();
            sw.ops.extend(others.into_iter().map(|b| block_op(node, b)));
            let round = Round {
                held: Vec::new(),
                awaiting,
                close,
                close_content: block0,
            };
            (round, 1)
        }
    };
    sw.lft_rounds.insert(node, round);
    kept
}

fn block0_op(node: u32, stamp: u8, content: bool) -> Op {
    Op::Lft {
        node,
        block: 0,
        stamp: Some(stamp),
        content,
    }
}

fn block_op(node: u32, block: u16) -> Op {
    Op::Lft {
        node,
        block,
        stamp: None,
        content: true,
    }
}

/// `op` left the sweep with `outcome`: move its switch's round on (release the
/// held blocks after an answered open, the close after the last block) or end it
/// (a failed or unsent open drops the held Sets, each done for `activation`). A
/// failed LFT Set marks the switch's table as not programmed. Returns the stamp
/// the switch holds after a close that went out.
pub(super) fn done(sw: &mut Sweep, op: Op, outcome: Outcome) -> Option<Stamp> {
    let Op::Lft {
        node, block, stamp, ..
    } = op
    else {
        return None;
    };
    if outcome != Outcome::Answered {
        if let Some(f) = sw.lft_failed.get_mut(node as usize) {
            *f = true;
        }
    }
    match (block, stamp) {
        (0, Some(s)) if !s.is_multiple_of(2) => {
            if outcome == Outcome::Answered {
                let released = match sw.lft_rounds.get_mut(&node) {
                    Some(r) => {
                        let held = std::mem::take(&mut r.held);
                        r.awaiting = held.len();
                        held
                    }
                    None => Vec::new(),
                };
                sw.lft_next
                    .extend(released.into_iter().map(|b| block_op(node, b)));
            } else if let Some(r) = sw.lft_rounds.remove(&node) {
                if outcome == Outcome::Failed {
                    sw.report.lft_opens_failed += 1;
                    tracing::warn!(
                        node,
                        open = s,
                        blocks = r.held.len(),
                        "LFT stamp open failed: the switch's other blocks wait for the next sweep"
                    );
                }
                for b in r.held {
                    activation::op_done(sw, block_op(node, b));
                }
                activation::op_done(sw, block0_op(node, r.close, r.close_content));
            }
            None
        }
        (0, Some(c)) => {
            sw.lft_rounds.remove(&node);
            match outcome {
                Outcome::Answered => Some(Stamp::Settled(c)),
                Outcome::Failed => Some(after_failed_close(c)),
                Outcome::NotSent => None,
            }
        }
        _ => {
            let close = match sw.lft_rounds.get_mut(&node) {
                Some(r) if r.held.is_empty() && r.awaiting > 0 => {
                    r.awaiting -= 1;
                    (r.awaiting == 0).then_some((r.close, r.close_content))
                }
                _ => None,
            };
            if let Some((c, content)) = close {
                sw.lft_next.push_back(block0_op(node, c, content));
            }
            None
        }
    }
}

/// [`done`], recording the stamp a close left in `prog` (by the switch's NodeGUID).
pub(super) fn finish(sw: &mut Sweep, prog: &mut Programmed, op: Op, outcome: Outcome) {
    if let Some(stamp) = done(sw, op, outcome) {
        if let Some(n) = sw.res.topology.node(NodeIdx(op.node())) {
            prog.lft_stamps.insert(n.node_guid, stamp);
        }
    }
}

/// The stamp to remember after a close `c` that failed: the switch holds the
/// round's open (odd) or `c`, and the next round must open past both, so `c` is
/// taken as settled (see the module doc).
pub(super) fn after_failed_close(c: u8) -> Stamp {
    Stamp::Settled(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subnet::lft_stamp::STAMP_SPACE;

    /// Whatever a failed close left in the switch (the open or the close), the
    /// next round opens to a new odd value and closes to an even value no reader
    /// can hold: neither the stamp before the failed round nor the failed close.
    #[test]
    fn a_failed_close_makes_the_next_round_open_and_move_past_it() {
        for s in (0..STAMP_SPACE).step_by(2) {
            let failed_close = close(Stamp::Settled(s));
            let next = after_failed_close(failed_close);
            let reopen = open(next).expect("the next round opens");
            assert!(!reopen.is_multiple_of(2));
            let c = close(next);
            assert_ne!(c, failed_close);
            assert_ne!(c, s);
        }
    }
}
