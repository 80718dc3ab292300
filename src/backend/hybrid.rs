//! CPU and GPU on one job (the heterogeneous join and HybridKNN seeds, 002
//! and 003): in a grid run the CPU backend's driver takes units from the
//! back of the run's queue, where the grid's order (most pairs first)
//! leaves the sparsest cells, while the GPUs' streams take pieces from the
//! front, until they meet ([`pieces::take_back`]). Both read one grid,
//! sorted on the host, and compute each pair with the same arithmetic, so
//! the result is the GPU's alone, bit for bit.
//!
//! Whether the CPU takes part is the schedule's call (`schedule::decide`):
//! what its threads would save of the GPUs' kernel time against what
//! sharing costs (the host's sort of the grid, where the GPU would sort its
//! own, and the extra launches).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Instant;

use super::cpu::Walker;
use crate::data::Column;
use crate::index::Grid;
use crate::schedule::Split;
use crate::schedule::pieces::{self, Piece};
use crate::stage::output::Partial;
use indicatif::ProgressBar;

/// The smallest claim: a few hundred microseconds of one thread, so that
/// claims cost nothing beside their work.
const CLAIM_FLOOR_PAIRS: u128 = 1 << 13;

/// What the CPU's threads share in a run: the driver over the host's grid,
/// the run's queue, and how much of it each claim takes.
pub struct CpuSide<'a> {
    pub walker: Walker<'a>,
    pub grid: &'a Grid,
    /// The pairs of each of the grid's units, which claims count.
    unit_pairs: Vec<u64>,
    pub threads: usize,
    /// Each claim's part of the pairs still queued: half of one thread's
    /// share, as the GPUs' pieces take half of one stream's.
    pub part: f64,
    pub progress: &'a ProgressBar,
    /// When the compute began: claims are timed from it.
    pub start: Instant,
    /// A stop asked: no more claims (the GPUs' streams return the error).
    watch: crate::stop::Watch,
}

impl<'a> CpuSide<'a> {
    pub fn new(walker: Walker<'a>, grid: &'a Grid, split: &Split, progress: &'a ProgressBar, start: Instant) -> Self {
        let threads = split.cpu_threads.max(1);
        let unit_pairs = grid.units.iter().map(|u| u.pairs).collect();
        CpuSide {
            walker,
            grid,
            unit_pairs,
            threads,
            part: split.predicted_cpu_share / (2 * threads) as f64,
            progress,
            start,
            watch: crate::stop::Watch::start(),
        }
    }
}

impl CpuSide<'_> {
    /// Units from the back of `queue`, if the CPU may take any.
    pub fn claim(&self, queue: &Mutex<VecDeque<Vec<Piece>>>) -> Option<[u32; 2]> {
        let mut q = queue.lock().expect("queue lock");
        pieces::take_back(&mut q, &self.unit_pairs, self.part, CLAIM_FLOOR_PAIRS)
    }
}

/// Rows of KNN lists the CPU found, by their input rows.
pub struct CpuRows {
    pub rows: Vec<u32>,
    pub values: Column,
    pub ids: Vec<u32>,
}

/// What one CPU thread found: totals or pairs, or lists by input row.
pub struct CpuResult {
    pub parts: Vec<Partial>,
    pub rows: Vec<CpuRows>,
    pub units: u64,
    pub pairs: u128,
    /// (start, end) of each claim, from the start of the compute.
    pub intervals: Vec<(f64, f64)>,
}

/// One CPU thread: walks `claimed` (a claim made for it), then claims units
/// from the back of `queue` and walks them until the queue is empty or its
/// back is the GPUs' alone.
pub fn cpu_worker(side: &CpuSide, queue: &Mutex<VecDeque<Vec<Piece>>>, mut claimed: Option<[u32; 2]>) -> CpuResult {
    let mut out = CpuResult { parts: Vec::new(), rows: Vec::new(), units: 0, pairs: 0, intervals: Vec::new() };
    let mut buffer = side.walker.buffer();
    while let Some([first, end]) = claimed.take().or_else(|| side.claim(queue)).filter(|_| !side.watch.asked()) {
        let began = side.start.elapsed().as_secs_f64();
        let units = &side.grid.units[first as usize..end as usize];
        if side.walker.rings {
            // A search of rings walks queries: each unit's own points, in cell order.
            for u in units {
                let (lo, hi) = (u.own[0] as usize, u.own[1] as usize);
                let Partial::Knn(mut lists) = side.walker.walk(lo, hi, &mut buffer) else {
                    unreachable!("a search of rings finds lists")
                };
                let (_, values, ids) = lists.pop().expect("one block of rows");
                out.rows.push(CpuRows { rows: side.grid.a.perm[lo..hi].to_vec(), values, ids });
            }
        } else {
            out.parts.push(side.walker.walk(first as usize, end as usize, &mut buffer));
        }
        let pairs: u128 = units.iter().map(|u| u128::from(u.pairs)).sum();
        side.progress.inc(pairs.min(u64::MAX as u128) as u64);
        out.units += u64::from(end - first);
        out.pairs += pairs;
        out.intervals.push((began, side.start.elapsed().as_secs_f64()));
    }
    out
}

/// Lists of every query: the GPU's (every row, in input order; None where
/// it ran no query), with the rows the CPU found written over theirs.
pub fn lists_with_cpu_rows(
    k: usize,
    value: crate::spec::Scalar,
    queries: usize,
    gpu: Option<(Column, Vec<u32>)>,
    cpu: Vec<CpuRows>,
) -> crate::outcome::Outcome {
    let (mut values, mut ids) = gpu.unwrap_or_else(|| (Column::zeros(value, queries * k), vec![u32::MAX; queries * k]));
    for r in cpu {
        values.place_rows(k, &r.values, &r.rows);
        for (from, &row) in r.ids.chunks_exact(k.max(1)).zip(&r.rows) {
            ids[row as usize * k..(row as usize + 1) * k].copy_from_slice(from);
        }
    }
    crate::outcome::Outcome::Knn { k, ids, values }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_rows_land_on_their_input_rows() {
        let k = 2;
        let gpu = (Column::F32(vec![9.0; 8]), vec![7u32; 8]);
        let cpu =
            vec![CpuRows { rows: vec![3, 0], values: Column::F32(vec![1.0, 2.0, 3.0, 4.0]), ids: vec![1, 2, 3, 4] }];
        let crate::outcome::Outcome::Knn { ids, values, .. } =
            lists_with_cpu_rows(k, crate::spec::Scalar::F32, 4, Some(gpu), cpu)
        else {
            unreachable!()
        };
        assert_eq!(ids, vec![3, 4, 7, 7, 7, 7, 1, 2]);
        assert_eq!(values, Column::F32(vec![3.0, 4.0, 9.0, 9.0, 9.0, 9.0, 1.0, 2.0]));
    }
}
