//! The visit family: which (i, j) pairs a problem visits, and how blocks of
//! the input meet each other's tiles.
//!
//! Which points a block owns is the visit's too: `visit/own_block.cu` gives
//! block b the span of B x R points from b·B·R; `visit/own_unit.cu` gives it
//! a grid unit (`unit`: own points [x, y), ranges [z, w)). Either defines
//! `first` and `own_end`, the block's own points [first, own_end) (at most
//! B x R of them).
//!
//! Fragment contract (`templates/visit/*.cu`): included in the kernel body
//! after `a`, `other`, `t`, `block`, `first`, `own_end`, `here`, `own[R]`,
//! `all_own_valid`, `out` (an `Output`),
//! `tiles` (a `Tiles`), `offer(j, q, valid)` (offers tile point j to every own
//! point r for which `valid(r)`), `always` and `own_valid` are defined. It
//! runs the block's steps from `out.first_step(step_first)` up to
//! `step_end` (kernel parameters: a launch may run a piece of the steps, see
//! [`Walk`]): for each step `s` it calls `out.begin_step(s)`,
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

use super::{KernelParam, Source, Template};
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

/// The kernel parameters of the visit: a launch runs steps
/// [step_first, step_end) of every block, so that a unit can be cut into
/// pieces that several streams and GPUs share.
pub fn params() -> Vec<KernelParam> {
    let bound = |name: &str, source| KernelParam { name: name.into(), ctype: "unsigned".into(), source };
    vec![bound("step_first", Source::StepFirst), bound("step_end", Source::StepEnd)]
}

/// The kernel parameters of a visit over a grid (`templates/visit/grid.cu`):
/// block b takes unit `unit_first + b` of `grid_units`, whose ranges index
/// `grid_ranges`.
pub fn grid_params() -> Vec<KernelParam> {
    vec![
        KernelParam::new("grid_units", "const uint4*", Source::GridUnits),
        KernelParam::new("grid_ranges", "const uint2*", Source::GridRanges),
        KernelParam::new("unit_first", "unsigned", Source::UnitFirst),
    ]
}

/// The parameters of a search of rings (`visit/rings.cu`): the grid's units
/// (runs of queries), the other set's cell starts, each query's cell, both
/// sets' input indices (a query's list goes to its input row), and the
/// grid's shape.
pub fn ring_params() -> Vec<KernelParam> {
    // A grid's units and first unit, without its ranges.
    let mut params = grid_params();
    params.retain(|p| p.source != Source::GridRanges);
    params.extend([
        KernelParam::new("grid_cell_start", "const unsigned* __restrict__", Source::RingCellStart),
        KernelParam::new("grid_cell_a", "const unsigned* __restrict__", Source::RingCellA),
        KernelParam::new("grid_perm_a", "const unsigned* __restrict__", Source::RingPermA),
        KernelParam::new("grid_perm_b", "const unsigned* __restrict__", Source::RingPermB),
        KernelParam::new("grid_shape", "RingShape", Source::RingShape),
    ]);
    params
}

/// How a kernel's blocks walk the pairs of one unit, step by step, as the
/// visit fragments do: block b owns points [b·B·R, (b+1)·B·R) of A; each
/// step meets one span of B·R points (the lower triangle, its own span last)
/// or one tile of B points of the other set. Every block's steps are the
/// same work except for the spans and tiles cut short by the end of a set,
/// so a range of steps over every block is a piece of work of known size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Walk {
    pub visit: Visit,
    /// Own points (set A's block).
    pub n_a: u64,
    /// Points of the other set's block (ignored by the lower triangle).
    pub n_other: u64,
    /// Threads per block: points per tile.
    pub block_size: u64,
    /// Own points per thread.
    pub points_per_thread: u64,
}

impl Walk {
    fn span(&self) -> u64 {
        self.block_size * self.points_per_thread
    }

    /// Blocks of the launch (as `Launch::grid_for`).
    pub fn blocks(&self) -> u64 {
        self.n_a.div_ceil(self.span()).max(1)
    }

    /// Own points of block b.
    fn own(&self, b: u64) -> u64 {
        self.n_a.saturating_sub(b * self.span()).min(self.span())
    }

    /// Spans of the lower triangle, or tiles of the other set.
    fn parts(&self) -> u64 {
        match self.visit {
            Visit::LowerTriangle => self.n_a.div_ceil(self.span()),
            Visit::Cross | Visit::AllPairs => self.n_other.div_ceil(self.block_size),
        }
    }

    /// The lower triangle's off-diagonal steps of block b (its diagonal step comes after them).
    fn off_diagonal(&self, b: u64) -> u64 {
        let spans = self.parts();
        (spans - 1) / 2 + u64::from(spans.is_multiple_of(2) && b < spans / 2)
    }

    /// Steps of block b.
    fn steps_of(&self, b: u64) -> u64 {
        match self.visit {
            Visit::LowerTriangle if self.n_a == 0 => 0,
            Visit::LowerTriangle => self.off_diagonal(b) + 1,
            Visit::Cross | Visit::AllPairs => self.parts(),
        }
    }

    /// The most partners an own point meets in one step: a span, or a tile.
    pub fn partners_per_step(&self) -> u64 {
        match self.visit {
            Visit::LowerTriangle => self.span(),
            Visit::Cross | Visit::AllPairs => self.block_size,
        }
    }

    /// The most steps any block takes: a launch over [0, steps()) runs the whole unit.
    pub fn steps(&self) -> u64 {
        self.steps_of(0)
    }

    /// Pairs the blocks visit in steps [first, end).
    pub fn pairs(&self, first: u64, end: u64) -> u128 {
        (0..self.blocks()).map(|b| self.block_pairs(b, first, end)).sum()
    }

    /// Pairs block b visits in steps [first, end), in O(R) (the fragments'
    /// loops, counted in closed form).
    fn block_pairs(&self, b: u64, first: u64, end: u64) -> u128 {
        let end = end.min(self.steps_of(b));
        if first >= end {
            return 0;
        }
        let own = self.own(b) as u128;
        let in_range = |s: u64| first <= s && s < end;
        match self.visit {
            Visit::LowerTriangle => {
                let spans = self.parts();
                let span = self.span() as u128;
                let off_end = end.min(self.off_diagonal(b));
                let mut others = off_end.saturating_sub(first) as u128 * span;
                // Step s meets span (b + 1 + s) % spans; the last span may be short.
                let last = spans - 1;
                let short = span - self.own(last) as u128;
                let s_last = (last + spans - b - 1) % spans;
                if b != last && first <= s_last && s_last < off_end {
                    others -= short;
                }
                let diagonal = if in_range(self.off_diagonal(b)) { own * own.saturating_sub(1) / 2 } else { 0 };
                own * others + diagonal
            }
            Visit::Cross | Visit::AllPairs => {
                // Step s meets tile (b R + s) % tiles; the last tile may be short.
                let tiles = self.parts();
                let tile = self.block_size as u128;
                let mut others = (end - first) as u128 * tile;
                let last = tiles - 1;
                let s_last = (last + tiles - (b * self.points_per_thread) % tiles) % tiles;
                if in_range(s_last) {
                    others -= tile - (self.n_other - last * self.block_size) as u128;
                }
                let mut pairs = own * others;
                if self.visit == Visit::AllPairs {
                    // A point is not its own partner: the tiles over the block's own
                    // points (steps 0 .. R) lose one pair per own point they hold.
                    let (lo, hi) = (b * self.span(), b * self.span() + self.own(b));
                    for s in first..end.min(self.points_per_thread) {
                        let t = b * self.points_per_thread + s;
                        let (t_lo, t_hi) = (t * self.block_size, ((t + 1) * self.block_size).min(self.n_other));
                        pairs -= hi.min(t_hi).saturating_sub(lo.max(t_lo)) as u128;
                    }
                }
                pairs
            }
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

    /// The pairs block b visits in step s, enumerated the way the visit
    /// fragments loop (the diagonal step: every pair of the block's own points).
    fn fragment_pairs(w: &Walk, b: u64, s: u64) -> Vec<(u64, u64)> {
        let (bs, r) = (w.block_size, w.points_per_thread);
        let span = bs * r;
        let first = b * span;
        let own: Vec<u64> =
            (0..r).flat_map(|k| (0..bs).map(move |t| first + t + k * bs)).filter(|&i| i < w.n_a).collect();
        let mut out = Vec::new();
        match w.visit {
            Visit::LowerTriangle => {
                let spans = w.n_a.div_ceil(span);
                let offdiag = (spans - 1) / 2 + u64::from(spans % 2 == 0 && b < spans / 2);
                if s == offdiag {
                    for &i in &own {
                        out.extend(own.iter().filter(|&&j| j > i).map(|&j| (i, j)));
                    }
                } else if s < offdiag {
                    let partner = (b + 1 + s) % spans;
                    for u in 0..r {
                        let start = partner * span + u * bs;
                        if start >= w.n_a {
                            break;
                        }
                        for j in start..(start + bs).min(w.n_a) {
                            out.extend(own.iter().map(|&i| (i.min(j), i.max(j))));
                        }
                    }
                }
            }
            Visit::Cross | Visit::AllPairs => {
                let tiles = w.n_other.div_ceil(bs);
                if s < tiles {
                    let tile = (b * r + s) % tiles;
                    for j in tile * bs..((tile + 1) * bs).min(w.n_other) {
                        out.extend(own.iter().filter(|&&i| w.visit == Visit::Cross || i != j).map(|&i| (i, j)));
                    }
                }
            }
        }
        out
    }

    #[test]
    fn walks_count_the_pairs_their_fragments_visit() {
        for visit in [Visit::LowerTriangle, Visit::AllPairs, Visit::Cross] {
            for (n_a, n_other) in [(1, 1), (2, 3), (31, 64), (64, 64), (200, 97), (257, 300), (520, 511)] {
                for (block_size, points_per_thread) in [(32, 1), (32, 2), (16, 4), (64, 8)] {
                    let n_other = if visit == Visit::Cross { n_other } else { n_a };
                    let w = Walk { visit, n_a, n_other, block_size, points_per_thread };
                    let what = format!("{w:?}");
                    let mut seen = std::collections::HashSet::new();
                    for b in 0..w.blocks() {
                        for s in 0..w.steps() + 2 {
                            let pairs = fragment_pairs(&w, b, s);
                            assert_eq!(w.block_pairs(b, s, s + 1), pairs.len() as u128, "{what} block {b} step {s}");
                            for p in pairs {
                                assert!(seen.insert(p), "{what}: pair {p:?} visited twice");
                            }
                        }
                    }
                    assert_eq!(seen.len() as u128, visit.pairs(n_a, n_other), "{what}: every pair once");
                    // Any cut of the steps adds up to the whole.
                    let steps = w.steps();
                    let mut cut = [0, steps / 3, steps / 3 + 1, steps.saturating_sub(1), u64::from(u32::MAX)];
                    cut.sort_unstable();
                    let by_pieces: u128 = cut.windows(2).map(|c| w.pairs(c[0], c[1])).sum();
                    assert_eq!(by_pieces, visit.pairs(n_a, n_other), "{what}: pieces");
                }
            }
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
