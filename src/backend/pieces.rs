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

/// The smallest piece cut: 2^34 pairs, about 10 ms of an H200 histogram
/// kernel, against some 50 us of launch and per-block flushes.
pub const MIN_PIECE_PAIRS: u128 = 1 << 34;

/// Cuts `units` (each with the walk of its kernel) into pieces for `workers`
/// streams in all, in order: a unit's pieces follow each other, and the last
/// piece of a unit runs to its end (`u32::MAX`), so every step of every block
/// is in exactly one piece whatever the walk's count.
pub fn cut(units: &[(Unit, Walk)], workers: usize, min_pairs: u128) -> Vec<Piece> {
    let mut uncut: u128 = units.iter().map(|(u, _)| u.pairs).sum();
    let share = 2 * workers.max(1) as u128;
    let mut pieces = Vec::new();
    for &(unit, walk) in units {
        let steps = walk.steps();
        let per_step = (unit.pairs / steps.max(1) as u128).max(1);
        let mut first = 0u64;
        loop {
            let want = (uncut / share).max(min_pairs.max(1));
            let end = first + want.div_ceil(per_step).min(u64::MAX as u128) as u64;
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
            let pieces = cut(&[(u, walk)], workers, floor);
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
        let pieces = cut(&[(u, walk), (u, walk)], 4, MIN_PIECE_PAIRS);
        assert_eq!(pieces, vec![Piece::whole(u), Piece::whole(u)]);
    }
}
