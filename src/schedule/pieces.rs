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

use std::collections::VecDeque;

use crate::plan::Plan;
use std::sync::Arc;

use crate::ranks::{Carried, Counter};
use crate::stage::visit::{KernelKind, Unit, Walk};

/// One launch's worth of work: steps [first, end) of every block of `unit`,
/// or of the grid's units `grid_units` (one block each) where the run walks a grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    pub unit: Unit,
    pub steps: (u32, u32),
    pub pairs: u128,
    pub grid_units: Option<[u32; 2]>,
}

impl Piece {
    /// The whole of `unit`.
    pub fn whole(unit: Unit) -> Piece {
        Piece { unit, steps: (0, u32::MAX), pairs: unit.pairs, grid_units: None }
    }

    /// Blocks of the launch: one per grid unit, or the kernel's own grid for `points` own points.
    pub fn blocks(&self, grid_for: impl FnOnce() -> u32) -> u32 {
        self.grid_units.map_or_else(grid_for, |[first, end]| end - first)
    }
}

/// A grid unit to cut: the pairs it visits and the most steps (tiles) it takes.
#[derive(Debug, Clone, Copy)]
pub struct GridWork {
    pub pairs: u64,
    pub steps: u64,
}

impl GridWork {
    /// A unit that visits `pairs` pairs and meets `partners` points of the
    /// other set over `ranges` ranges, in tiles of `tile` points: each range
    /// may take one tile more than its points fill (it starts mid-tile).
    pub fn new(pairs: u64, partners: u64, ranges: u32, tile: u64) -> GridWork {
        GridWork { pairs, steps: partners.div_ceil(tile) + u64::from(ranges) }
    }
}

/// Cuts a grid's units (one block each, in the grid's order: most pairs
/// first) into pieces of consecutive units, by the same guided
/// self-scheduling as [`cut`]. Where a unit could meet more partners per own
/// point than `max_partners` (tiles of `tile` points), each piece runs its
/// units' steps a window at a time; its pairs are then shared evenly among
/// the windows (a window's exact share would need each unit's ranges).
pub fn cut_grid(
    unit: Unit,
    work: &[GridWork],
    tile: u64,
    max_partners: Option<u64>,
    workers: usize,
    min_pairs: u128,
) -> Vec<Piece> {
    let mut uncut: u128 = work.iter().map(|w| w.pairs as u128).sum();
    let share = 2 * workers.max(1) as u128;
    let window = max_partners.map_or(u64::MAX, |p| (p / tile.max(1)).max(1));
    let mut pieces = Vec::new();
    let mut first = 0usize;
    while first < work.len() {
        let want = (uncut / share).max(min_pairs.max(1));
        let (mut end, mut pairs, mut steps) = (first, 0u128, 0u64);
        while end < work.len() && (end == first || pairs < want) {
            pairs += work[end].pairs as u128;
            steps = steps.max(work[end].steps);
            end += 1;
        }
        uncut -= pairs;
        let windows = steps.div_ceil(window).max(1);
        for w in 0..windows {
            let from = (w * window) as u32;
            let to = if w + 1 == windows { u32::MAX } else { ((w + 1) * window) as u32 };
            let mine = pairs / windows as u128 + if w + 1 == windows { pairs % windows as u128 } else { 0 };
            pieces.push(Piece { unit, steps: (from, to), pairs: mine, grid_units: Some([first as u32, end as u32]) });
        }
        first = end;
    }
    pieces
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
                pieces.push(Piece { unit, steps: (first as u32, u32::MAX), pairs, grid_units: None });
                uncut -= pairs;
                break;
            }
            let pairs = walk.pairs(first, end);
            pieces.push(Piece { unit, steps: (first as u32, end as u32), pairs, grid_units: None });
            uncut -= pairs;
            first = end;
        }
    }
    pieces
}

/// Each GPU's units of a grid (one share for all where they share a queue), and their pairs.
pub type GridShares = Vec<(Vec<GridWork>, u128)>;

/// How a run's queues are cut: streams per GPU, `--piece-pairs`, whether
/// the CPU's threads take units from the back, whether a KNN search of rings runs.
#[derive(Debug, Clone, Copy)]
pub struct Cut {
    pub streams: usize,
    /// GPUs that share one queue: this process's, or every rank's where
    /// ranks share it (the first pieces are a 1/(2W) share for W streams in all).
    pub gpus: usize,
    /// Each GPU walks its own rows of a grid (`Sharing::Rows`): a queue a GPU.
    pub own_rows: bool,
    pub piece_pairs: Option<u64>,
    pub with_cpu: bool,
    pub rings: bool,
}

/// The queues of pieces: one that every GPU shares (units of blocks, or one
/// grid for all), or one per GPU where each walks its own share of a grid
/// (`grid_work`). `kernels` holds each GPU's plans, of its own kernel and of
/// the kernel between two blocks. Units largest first, so that no stream is
/// left with a big one at the end.
pub fn queues(
    kernels: &[[Option<&Plan>; 2]],
    mut groups: Vec<Vec<Unit>>,
    grid_work: Option<GridShares>,
    [a_blocks, b_blocks]: [&[(usize, usize)]; 2],
    cut: Cut,
) -> Vec<VecDeque<Vec<Piece>>> {
    let streams = cut.streams.max(1);
    let Some(shares) = grid_work else {
        groups.sort_by_key(|g| std::cmp::Reverse(g.iter().map(|u| u.pairs).sum::<u128>()));
        if kernels[0].iter().flatten().next().is_some_and(|p| p.output.refines_per_query()) {
            // Per-query lists are refined unit after unit of a query block, on one stream.
            return vec![groups.into_iter().map(|g| g.into_iter().map(Piece::whole).collect()).collect()];
        }
        let units: Vec<Unit> = groups.into_iter().flatten().collect();
        let work = work(kernels, &units, a_blocks, b_blocks);
        let min_pairs = cut.piece_pairs.map_or(MIN_PIECE_PAIRS, u128::from);
        return vec![self::cut(&work, cut.gpus.max(1) * streams, min_pairs).into_iter().map(|p| vec![p]).collect()];
    };
    // Consecutive units of the grid (most pairs first) per piece.
    let plan = kernels[0][0].expect("the grid's kernel");
    let tile = plan.launch.block_size as u64;
    let max_partners = kernels.iter().filter_map(|[own, _]| (*own)?.launch.partners_per_launch).min();
    // One queue that every GPU shares, or a queue for each GPU's own share.
    let workers = if cut.own_rows { streams } else { cut.gpus.max(1) * streams };
    shares
        .into_iter()
        .map(|(work, pairs)| {
            let unit = Unit { kernel: KernelKind::Own, a_block: 0, b_block: 0, pairs };
            if cut.rings && !cut.with_cpu {
                // One launch searches for every query, and its lists come back once.
                return VecDeque::from([cut_grid(unit, &work, tile, None, 1, u128::MAX)]);
            }
            // Where the CPU takes units from the back, the GPUs' pieces shrink
            // to a 64th of the pairs, so that the two meet within a small piece.
            let floor = if cut.with_cpu { (pairs / 64).max(1) } else { MIN_PIECE_PAIRS };
            let min_pairs = cut.piece_pairs.map_or(floor, u128::from);
            // A search's launch meets each own point's rings alone: no counters to bound.
            let max_partners = if cut.rings { None } else { max_partners };
            cut_grid(unit, &work, tile, max_partners, workers, min_pairs).into_iter().map(|p| vec![p]).collect()
        })
        .collect()
}

/// Every unit with the walk of its kernel (every GPU's kernels walk alike:
/// their block size and points per thread are the first GPU's) and the
/// tightest bound of any GPU's counters for it.
fn work(
    kernels: &[[Option<&Plan>; 2]],
    units: &[Unit],
    a_blocks: &[(usize, usize)],
    b_blocks: &[(usize, usize)],
) -> Vec<Work> {
    let len = |(lo, hi): (usize, usize)| (hi - lo) as u64;
    units
        .iter()
        .map(|&unit| {
            let side = match unit.kernel {
                KernelKind::Own => 0,
                KernelKind::Between => 1,
            };
            let plans = kernels.iter().map(|k| k[side].expect("a kernel is compiled for every kind of unit"));
            let max_partners = plans.clone().filter_map(|p| p.launch.partners_per_launch).min();
            let plan = plans.clone().next().expect("at least one GPU");
            let walk = Walk {
                visit: plan.shape.visit,
                n_a: len(a_blocks[unit.a_block]),
                // One set: the own kernel pairs the block with itself (b_blocks are A's).
                n_other: len(b_blocks[unit.b_block]),
                block_size: plan.launch.block_size as u64,
                points_per_thread: plan.launch.points_per_thread as u64,
            };
            Work { unit, walk, max_partners }
        })
        .collect()
}

/// The next group of `queue`, a queue of `length` groups at the start: its
/// front where the queue is this process's alone (`counter` None), else
/// the group at the place `counter` hands out, where every rank holds the
/// same queue and takes from one counter. The groups before that place were
/// taken by other ranks: they are dropped here. The caller holds the
/// queue's lock while it takes, so this process's places arrive in order.
/// With the group, the bytes the counter carried with its place (the rows
/// of A it reads, where rank 0 sends them: [`Counter::next_carried`]).
pub fn take<T>(
    queue: &mut VecDeque<T>,
    length: usize,
    counter: Option<&dyn Counter>,
) -> Option<(T, Option<Arc<Carried>>)> {
    let Some(counter) = counter else { return queue.pop_front().map(|g| (g, None)) };
    let (place, carried) = counter.next_carried();
    let place = usize::try_from(place).unwrap_or(usize::MAX);
    let taken = length - queue.len();
    if place >= length {
        queue.clear();
        return None;
    }
    assert!(place >= taken, "a counter hands out places in order (place {place}, {taken} taken here)");
    queue.drain(..place - taken);
    queue.pop_front().map(|g| (g, carried))
}

/// The CPU's claim on a grid run's queue (`backend::hybrid`): units from
/// the back, where the grid's order leaves its sparsest units, while the
/// GPUs' streams take pieces from the front. The claim takes a `part` of
/// the pairs still queued, at least `floor` and at least one unit, off the
/// end of the last piece (popping it when it takes all of it). Every unit
/// is in exactly one claim or piece. None when the queue is empty or its
/// last piece runs its units a window of steps at a time: those windows
/// share units, so only the GPU may run them.
pub fn take_back(queue: &mut VecDeque<Vec<Piece>>, unit_pairs: &[u64], part: f64, floor: u128) -> Option<[u32; 2]> {
    let queued: u128 = queue.iter().flatten().map(|p| p.pairs).sum();
    let want = ((queued as f64 * part) as u128).max(floor).max(1);
    let [piece] = &mut queue.back_mut()?[..] else { return None };
    let [first, end] = piece.grid_units?;
    if piece.steps != (0, u32::MAX) {
        return None;
    }
    let (mut from, mut pairs) = (end, 0u128);
    while from > first && (from == end || pairs < want) {
        from -= 1;
        pairs += u128::from(unit_pairs[from as usize]);
    }
    if from == first {
        queue.pop_back();
    } else {
        piece.grid_units = Some([first, from]);
        piece.pairs = piece.pairs.saturating_sub(pairs);
    }
    Some([from, end])
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
    fn grid_pieces_take_every_unit_once_in_order() {
        // Units most pairs first, as the grid lists them.
        let work: Vec<GridWork> =
            (0..1000u64).rev().map(|k| GridWork { pairs: 100 * k + 7, steps: k % 9 + 1 }).collect();
        let total: u128 = work.iter().map(|w| w.pairs as u128).sum();
        for (workers, floor) in [(1, 1), (4, 1), (4, 50_000), (16, 1 << 40)] {
            let pieces = cut_grid(unit(total), &work, 64, None, workers, floor);
            assert_eq!(pieces.iter().map(|p| p.pairs).sum::<u128>(), total, "{workers} workers, floor {floor}");
            assert_eq!(pieces[0].grid_units.unwrap()[0], 0);
            assert_eq!(pieces.last().unwrap().grid_units.unwrap()[1], work.len() as u32);
            for w in pieces.windows(2) {
                assert_eq!(w[0].grid_units.unwrap()[1], w[1].grid_units.unwrap()[0], "consecutive units");
            }
            assert!(pieces.iter().all(|p| p.steps == (0, u32::MAX)), "no windows without a bound");
            if workers > 1 && floor == 1 {
                assert!(pieces.len() >= 2 * workers, "{workers} workers share {} pieces", pieces.len());
            }
        }
    }

    #[test]
    fn grid_pieces_run_in_windows_where_counters_could_overflow() {
        // 64-point tiles, at most 640 partners a launch: windows of 10 steps.
        let work = [GridWork { pairs: 5000, steps: 25 }, GridWork { pairs: 30, steps: 3 }];
        let pieces = cut_grid(unit(5030), &work, 64, Some(640), 1, 1 << 40);
        let windows: Vec<(u32, u32)> = pieces.iter().map(|p| p.steps).collect();
        assert_eq!(windows, vec![(0, 10), (10, 20), (20, u32::MAX)]);
        assert!(pieces.iter().all(|p| p.grid_units == Some([0, 2])));
        assert_eq!(pieces.iter().map(|p| p.pairs).sum::<u128>(), 5030);
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

    #[test]
    fn ranks_sharing_one_queue_take_each_group_once() {
        use crate::ranks::Local;
        // Three ranks hold the same queue of 50 groups; one counter hands out places.
        let counter = Local::default();
        let mut queues: Vec<VecDeque<u32>> = (0..3).map(|_| (0..50).collect()).collect();
        let mut got: Vec<Vec<u32>> = vec![Vec::new(); 3];
        // The ranks ask in an uneven order: rank 2 often, rank 0 seldom.
        let turns = [2, 2, 1, 2, 0, 1, 2, 2, 1];
        for t in 0.. {
            let r = turns[t % turns.len()];
            match take(&mut queues[r], 50, Some(&counter)) {
                Some((g, carried)) => {
                    assert!(carried.is_none(), "a local counter carries nothing");
                    got[r].push(g)
                }
                None if got.iter().map(Vec::len).sum::<usize>() == 50 => break,
                None => {}
            }
        }
        let mut all: Vec<u32> = got.iter().flatten().copied().collect();
        all.sort_unstable();
        assert_eq!(all, (0..50).collect::<Vec<_>>(), "{got:?}");
        assert!(got.iter().all(|g| g.windows(2).all(|w| w[0] < w[1])), "each rank's groups in order");
        // Alone, a queue is taken from its front.
        let mut alone: VecDeque<u32> = (0..3).collect();
        assert_eq!(take(&mut alone, 3, None).map(|(g, _)| g), Some(0));
    }

    #[test]
    fn the_cpu_takes_units_from_the_back_and_the_gpu_from_the_front() {
        // Units most pairs first; pieces of consecutive units for two streams.
        let work: Vec<GridWork> = (0..500u64).rev().map(|k| GridWork { pairs: 3 * k + 1, steps: 1 }).collect();
        let unit_pairs: Vec<u64> = work.iter().map(|w| w.pairs).collect();
        let total: u128 = unit_pairs.iter().map(|&p| p as u128).sum();
        for (part, floor) in [(0.0, 1), (0.01, 1), (0.2, 50), (1.0, 1)] {
            let pieces = cut_grid(unit(total), &work, 64, None, 2, total / 16);
            let mut queue: VecDeque<Vec<Piece>> = pieces.into_iter().map(|p| vec![p]).collect();
            let mut taken = vec![0u32; work.len()];
            let mut claims = 0;
            // The GPU and the CPU take turns until the queue is empty.
            loop {
                if let Some(group) = queue.pop_front() {
                    let [first, end] = group[0].grid_units.unwrap();
                    let pairs: u128 = unit_pairs[first as usize..end as usize].iter().map(|&p| p as u128).sum();
                    assert_eq!(group[0].pairs, pairs, "a piece's pairs follow its units");
                    (first..end).for_each(|u| taken[u as usize] += 1);
                }
                match take_back(&mut queue, &unit_pairs, part, floor) {
                    Some([first, end]) => {
                        assert!(first < end, "a claim holds a unit");
                        (first..end).for_each(|u| taken[u as usize] += 1);
                        claims += 1;
                    }
                    None => assert!(queue.is_empty(), "only an empty queue refuses the CPU"),
                }
                if queue.is_empty() {
                    break;
                }
            }
            assert!(taken.iter().all(|&t| t == 1), "part {part}: every unit once: {taken:?}");
            assert!(claims > 0);
        }
        // Windows of steps share their units: the CPU leaves them to the GPU.
        let windowed = cut_grid(unit(5030), &[GridWork { pairs: 5000, steps: 25 }], 64, Some(640), 1, 1 << 40);
        let mut queue: VecDeque<Vec<Piece>> = windowed.into_iter().map(|p| vec![p]).collect();
        assert_eq!(take_back(&mut queue, &[5000], 0.5, 1), None);
        assert_eq!(queue.len(), 3);
    }
}
