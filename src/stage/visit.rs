//! The visit family: which (i, j) pairs a problem visits, and how blocks of
//! the input meet each other's tiles.
//!
//! Fragment contract (`templates/visit/*.cu`): included in the kernel body
//! after `a`, `other`, `t`, `block`, `first` (the block's first own point; it
//! owns B x R), `here`, `own[R]`, `all_own_valid`, `out` (an `Output`),
//! `tiles` (a `Tiles`), `offer(j, q, valid)` (offers tile point j to every own
//! point r for which `valid(r)`), `always` and `own_valid` are defined. It
//! runs the block's steps: for each step `s` it calls `out.begin_step(s)`,
//! loads the step's tiles into `tiles` and offers every pair of the step, then
//! returns from the kernel when `out.end_step(s)` says the output is full.
//! Full tiles of blocks without padding pass `always`, so interior tiles test
//! nothing. The lower-triangle fragment takes the diagonal tile's pattern as
//! `diagonal` (`templates/visit/diagonal_*.cu`), which needs `tiles.at(j)`
//! when balanced.
//!
//! CPU fragment contract (`templates/cpu/visit/*.cpp`): defines
//! `for_partners(a, b, i, f)` calling `f(j, q)` for every partner `j` of row `i`.

use serde::Serialize;

use super::Template;
use crate::spec::{Output, Problem, Sets};

/// Which pairs every backend visits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Visit {
    /// One set and a symmetric function: each unordered pair i < j once.
    LowerTriangle,
    /// One set, every ordered pair i != j.
    AllPairs,
    /// Two sets: every (a, b).
    Cross,
}

/// How a block pairs its own points with each other on the diagonal tile of a
/// lower-triangle visit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Diagonal {
    /// Thread t meets (t + d) % B for d = 1..B/2: equal work for every thread (section 3.4.1).
    Balanced,
    /// Every thread walks the tile and keeps j > t: for tiles without random access (shuffle).
    Filtered,
}

impl Visit {
    /// The planning rule: two sets meet crosswise; one set with a symmetric
    /// function visits each unordered pair once, except for a per-query output
    /// (KNN), where every query must see every other point.
    pub fn of(problem: &Problem) -> Visit {
        match (problem.input.sets, problem.function.symmetric, &problem.output) {
            (Sets::Two, _, _) => Visit::Cross,
            (Sets::One, true, Output::Knn { .. }) | (Sets::One, false, _) => Visit::AllPairs,
            (Sets::One, true, _) => Visit::LowerTriangle,
        }
    }

    pub fn why(self, problem: &Problem) -> &'static str {
        match self {
            Visit::LowerTriangle => "one set and a symmetric function: each unordered pair i < j once",
            Visit::AllPairs if matches!(problem.output, Output::Knn { .. }) => {
                "per-query output: each query thread sees every other point (j != i)"
            }
            Visit::AllPairs => "one set and a function that is not symmetric: every ordered pair i != j",
            Visit::Cross => "two sets: every (a, b)",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Visit::LowerTriangle => "lower_triangle",
            Visit::AllPairs => "all_pairs",
            Visit::Cross => "cross",
        }
    }

    /// Pairs visited between `n_a` points and `n_b` others (`n_b` is ignored for one set).
    pub fn pairs(self, n_a: u64, n_b: u64) -> u128 {
        let a = n_a as u128;
        match self {
            Visit::LowerTriangle => a * a.saturating_sub(1) / 2,
            Visit::AllPairs => a * a.saturating_sub(1),
            Visit::Cross => a * n_b as u128,
        }
    }

    /// Pairs of rows [lo, hi) of A, among `n_a` points and `n_b` others.
    pub fn pairs_of_rows(self, lo: u64, hi: u64, n_a: u64, n_b: u64) -> u128 {
        let rows = (hi - lo) as u128;
        match self {
            // Row i meets the n_a - 1 - i rows after it.
            Visit::LowerTriangle => rows * (2 * n_a as u128 - lo as u128 - hi as u128 - 1) / 2,
            Visit::AllPairs => rows * (n_a as u128).saturating_sub(1),
            Visit::Cross => rows * n_b as u128,
        }
    }

    /// Whether a pair is reported once as (min, max) rather than as (own, other).
    pub fn unordered(self) -> bool {
        self == Visit::LowerTriangle
    }

    /// The tile pattern of the diagonal step, for tiles with or without random access.
    pub fn diagonal(self, random_access: bool) -> Option<Diagonal> {
        (self == Visit::LowerTriangle).then_some(if random_access { Diagonal::Balanced } else { Diagonal::Filtered })
    }

    pub fn fragment(self) -> Template {
        match self {
            Visit::LowerTriangle => Template::VisitLowerTriangle,
            Visit::AllPairs => Template::VisitAllPairs,
            Visit::Cross => Template::VisitCross,
        }
    }

    pub fn cpu_fragment(self) -> Template {
        match self {
            Visit::LowerTriangle => Template::CpuVisitLowerTriangle,
            Visit::AllPairs => Template::CpuVisitAllPairs,
            Visit::Cross => Template::CpuVisitCross,
        }
    }

    /// The units of work over blocks of the input: for every A block `p`, the
    /// problem's own kernel on `p` where the visit pairs a set with itself, and
    /// the two-set kernel between `p` and each other block it must meet. Units
    /// of one A block come together, in order (per-query outputs refine their
    /// lists block after block).
    pub fn units(self, a_blocks: &[(usize, usize)], b_blocks: &[(usize, usize)]) -> Vec<Vec<Unit>> {
        let len = |(lo, hi): (usize, usize)| (hi - lo) as u64;
        (0..a_blocks.len())
            .map(|p| {
                let own =
                    Unit { kernel: KernelKind::Own, a_block: p, b_block: p, pairs: self.pairs(len(a_blocks[p]), 0) };
                let between = |q: usize| Unit {
                    kernel: KernelKind::Between,
                    a_block: p,
                    b_block: q,
                    pairs: Visit::Cross.pairs(len(a_blocks[p]), len(b_blocks[q])),
                };
                match self {
                    Visit::Cross => (0..b_blocks.len()).map(between).collect(),
                    Visit::LowerTriangle => std::iter::once(own).chain((p + 1..a_blocks.len()).map(between)).collect(),
                    Visit::AllPairs => {
                        std::iter::once(own).chain((0..a_blocks.len()).filter(|&q| q != p).map(between)).collect()
                    }
                }
            })
            .collect()
    }
}

impl Diagonal {
    pub fn name(self) -> &'static str {
        match self {
            Diagonal::Balanced => "balanced",
            Diagonal::Filtered => "filtered",
        }
    }

    pub fn why(self) -> &'static str {
        match self {
            Diagonal::Balanced => {
                "thread t pairs with (t + s) % B for s = 1..B/2: no divergence on the diagonal tile (section 3.4.1)"
            }
            Diagonal::Filtered => "shuffled tiles allow no random access: walk the tile and keep j > t",
        }
    }

    pub fn fragment(self) -> Template {
        match self {
            Diagonal::Balanced => Template::DiagonalBalanced,
            Diagonal::Filtered => Template::DiagonalFiltered,
        }
    }
}

/// Which kernel a unit runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelKind {
    /// The problem itself, on one block (the diagonal of a one-set problem).
    Own,
    /// The problem between two different blocks (a two-set kernel).
    Between,
}

/// One launch: block `a_block` of set A against block `b_block` of the other set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unit {
    pub kernel: KernelKind,
    pub a_block: usize,
    pub b_block: usize,
    pub pairs: u128,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_add_up_to_the_whole() {
        for visit in [Visit::LowerTriangle, Visit::AllPairs, Visit::Cross] {
            let by_rows: u128 =
                [(0, 3), (3, 10), (10, 11)].iter().map(|&(lo, hi)| visit.pairs_of_rows(lo, hi, 11, 7)).sum();
            assert_eq!(by_rows, visit.pairs(11, 7), "{visit:?}");
        }
    }

    #[test]
    fn units_cover_every_pair_once() {
        let blocks = [(0, 10), (10, 20), (20, 25)];
        for visit in [Visit::LowerTriangle, Visit::AllPairs, Visit::Cross] {
            let total: u128 = visit.units(&blocks, &blocks).iter().flatten().map(|u| u.pairs).sum();
            assert_eq!(total, visit.pairs(25, 25), "{visit:?}");
        }
    }
}
