//! How a GPU run's work is cut into pieces that every stream of every GPU
//! takes from one queue.
//!
//! A unit (a pair of blocks) is one kernel over one grid; a piece is a range
//! of its steps over every block of the grid ([`Walk`]), so pieces of one
//! unit may run at once on different streams and GPUs, and each is a known
//! number of pairs. The cut is guided self-scheduling: each piece takes a
//! 1/(2W) share of the pairs still uncut for W workers, down to a floor, so the
//! first pieces are large (few launches) and the last ones small, and the
//! workers finish within one small piece of each other.

use crate::stage::visit::{Unit, Walk};

/// One launch's worth of work: steps [first, end) of every block of `unit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    pub unit: Unit,
    pub steps: (u32, u32),
    pub pairs: u128,
}

impl Piece {
    /// The whole of `unit`.
    pub fn whole(unit: Unit) -> Piece {
        Piece { unit, steps: (0, u32::MAX), pairs: unit.pairs }
    }
}

/// A unit to cut, with the walk of its kernel and the most partners an own
/// point may meet in one launch (the plan's bound for 32-bit counters).
#[derive(Debug, Clone, Copy)]
pub struct Work {
    pub unit: Unit,
    pub walk: Walk,
    pub max_partners: Option<u64>,
}

/// The smallest piece cut: 2^34 pairs, about 10 ms of an H200 histogram
/// kernel, against some 50 us of launch and per-block flushes.
pub const MIN_PIECE_PAIRS: u128 = 1 << 34;

/// Cuts the units of `work` into pieces for `workers` streams in all, in
/// order: a unit's pieces follow each other, and the last piece of a unit
/// runs to its end (`u32::MAX`), so every step of every block is in exactly
/// one piece whatever the walk's count. No piece lets an own point meet more
/// partners than its unit's `max_partners`.
pub fn cut(work: &[Work], workers: usize, min_pairs: u128) -> Vec<Piece> {
    let mut uncut: u128 = work.iter().map(|w| w.unit.pairs).sum();
    let share = 2 * workers.max(1) as u128;
    let mut pieces = Vec::new();
    for &Work { unit, walk, max_partners } in work {
        let steps = walk.steps();
        let per_step = (unit.pairs / steps.max(1) as u128).max(1);
        let max_steps = max_partners.map_or(u64::MAX, |p| (p / walk.partners_per_step()).max(1));
        let mut first = 0u64;
        loop {
            let want = (uncut / share).max(min_pairs.max(1));
            let end = first + (want.div_ceil(per_step).min(u64::MAX as u128) as u64).min(max_steps);
            if end >= steps {
                let pairs = walk.pairs(first, u64::MAX);
                pieces.push(Piece { unit, steps: (first as u32, u32::MAX), pairs });
                uncut -= pairs;
                break;
            }
            let pairs = walk.pairs(first, end);
            pieces.push(Piece { unit, steps: (first as u32, end as u32), pairs });
            uncut -= pairs;
            first = end;
        }
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stage::visit::{KernelKind, Visit};

    fn unit(pairs: u128) -> Unit {
        Unit { kernel: KernelKind::Own, a_block: 0, b_block: 0, pairs }
    }

    #[test]
    fn pieces_cover_every_step_once_and_shrink_to_the_floor() {
        let walk = Walk {
            visit: Visit::LowerTriangle,
            n_a: 1_000_003,
            n_other: 1_000_003,
            block_size: 256,
            points_per_thread: 2,
        };
        let u = unit(Visit::LowerTriangle.pairs(walk.n_a, 0));
        for workers in [1, 2, 4, 16] {
            let floor = u.pairs / 500;
            let pieces = cut(&[Work { unit: u, walk, max_partners: None }], workers, floor);
            assert_eq!(pieces.iter().map(|p| p.pairs).sum::<u128>(), u.pairs, "{workers} workers");
            assert_eq!(pieces[0].steps.0, 0);
            assert_eq!(pieces.last().unwrap().steps.1, u32::MAX);
            for w in pieces.windows(2) {
                assert_eq!(w[0].steps.1, w[1].steps.0, "adjacent ranges");
                assert!(w[0].pairs + 2 * walk.pairs(0, 1) >= w[1].pairs, "non-increasing, up to a step: {w:?}");
            }
            // The first piece is a 1/(2W) share; all but the last are at least the floor less a step.
            let first = pieces[0].pairs as f64 / u.pairs as f64;
            assert!((first - 0.5 / workers as f64).abs() < 0.01, "{workers}: first share {first}");
            let step = walk.pairs(1, 2);
            assert!(pieces[..pieces.len() - 1].iter().all(|p| p.pairs + step >= floor));
        }
    }

    #[test]
    fn small_units_are_one_piece_each() {
        let walk = Walk { visit: Visit::Cross, n_a: 1000, n_other: 700, block_size: 64, points_per_thread: 1 };
        let u = unit(700_000);
        let w = Work { unit: u, walk, max_partners: None };
        let pieces = cut(&[w, w], 4, MIN_PIECE_PAIRS);
        assert_eq!(pieces, vec![Piece::whole(u), Piece::whole(u)]);
    }

    #[test]
    fn no_piece_meets_more_partners_than_the_counters_hold() {
        // 10^9 points: a block's 512 own points would meet 5 x 10^8 partners each.
        let walk =
            Walk { visit: Visit::LowerTriangle, n_a: 1_000_000_000, n_other: 0, block_size: 256, points_per_thread: 2 };
        let u = unit(Visit::LowerTriangle.pairs(walk.n_a, 0));
        let bound = u64::from(u32::MAX) / 512;
        let pieces = cut(&[Work { unit: u, walk, max_partners: Some(bound) }], 1, MIN_PIECE_PAIRS);
        assert_eq!(pieces.iter().map(|p| p.pairs).sum::<u128>(), u.pairs);
        for p in &pieces {
            let steps = u64::from(p.steps.1.min(walk.steps() as u32) - p.steps.0);
            assert!(512 * steps * walk.partners_per_step() <= u64::from(u32::MAX), "{p:?}");
        }
    }
}
