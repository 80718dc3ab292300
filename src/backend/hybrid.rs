//! CPU and GPU on one job (the heterogeneous join and HybridKNN seeds, 002
//! and 003): in a grid run the CPU backend's driver takes units from the
//! back of the run's queue, where the grid's order (most pairs first)
//! leaves the sparsest cells, while the GPUs' streams take pieces from the
//! front, until they meet ([`pieces::take_back`]). Both read one grid,
//! sorted on the host, and compute each pair with the same arithmetic, so
//! the result is the GPU's alone, bit for bit.
//!
//! Whether the CPU takes part is the model's call ([`decide`]): what its
//! threads would save of the GPUs' kernel time against what sharing costs
//! (the host's sort of the grid, where the GPU would sort its own, and the
//! extra launches).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Instant;

use indicatif::ProgressBar;
use serde::Serialize;

use super::cpu::Walker;
use super::pieces::{self, Piece};
use crate::data::Column;
use crate::device::Device;
use crate::index::Grid;
use crate::stage::output::Partial;

/// `--hybrid`: whether the CPU's cores take part of a GPU run's work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Hybrid {
    /// Where the model says the CPU saves more time than sharing costs.
    #[default]
    Auto,
    /// In every grid run (to measure it).
    On,
    /// The GPUs alone.
    Off,
}

/// FP32 lane-cycles of a GPU per pair its grid kernels visit: one H200
/// (3.35e13 lane-cycles a second) visited 5.3e11 pairs a second in the 2-D
/// and 3-D self-joins (docs/bench/h200-issue11-grid-c11.json: 8.4e8 pairs in
/// 1.58 ms, 9.9e8 in 1.82 ms).
const GPU_LANE_CYCLES_PER_PAIR: f64 = 63.0;

/// Pairs one CPU thread visits a second in a GPU's grid (units of whole
/// rows of cells).
const CPU_PAIRS_PER_THREAD_S: f64 = 5e7;

/// Points a second the host sorts into a grid, per thread: 10M points in
/// about 0.25 s on the H200 host's 16 cores.
const HOST_SORT_POINTS_PER_THREAD_S: f64 = 2.5e6;

/// Points a second a GPU sorts into its own grid: grid_s of 8.7 ms for 10M
/// points on one H200 (c11).
const DEVICE_SORT_POINTS_PER_S: f64 = 1.1e9;

/// What sharing the queue costs besides the sort: more, smaller pieces
/// (each a launch and a synchronization), and the threads' start.
const SHARING_S: f64 = 1e-3;

/// The smallest claim: a few hundred microseconds of one thread, so that
/// claims cost nothing beside their work.
const CLAIM_FLOOR_PAIRS: u128 = 1 << 13;

/// The rates the model weighs.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Rates {
    pub gpu_pairs_per_s: f64,
    pub cpu_pairs_per_s: f64,
    pub cpu_threads: usize,
}

impl Rates {
    /// The GPUs' rate from their FP32 issue rates, and `cpu_threads` threads'.
    pub fn of(devices: &[Device], cpu_threads: usize) -> Rates {
        Rates {
            gpu_pairs_per_s: devices.iter().map(|d| d.fp32_issue_rate() / GPU_LANE_CYCLES_PER_PAIR).sum(),
            cpu_pairs_per_s: cpu_threads as f64 * CPU_PAIRS_PER_THREAD_S,
            cpu_threads,
        }
    }

    /// The CPU's share of the pairs where both run until they meet.
    pub fn cpu_share(&self) -> f64 {
        self.cpu_pairs_per_s / (self.cpu_pairs_per_s + self.gpu_pairs_per_s)
    }
}

/// CPU threads that may take part beside `gpu_threads` threads feeding GPUs.
pub fn cpu_threads(gpu_threads: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    cores.saturating_sub(gpu_threads).max(1)
}

/// How a run's work was split between the CPU and the GPUs, and why.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Split {
    /// Whether the CPU's threads took part.
    pub cpu: bool,
    pub why: String,
    pub cpu_threads: usize,
    /// The model's share of the pairs for the CPU.
    pub predicted_cpu_share: f64,
    /// What the CPU did: units taken, their pairs and share, and the
    /// seconds in which at least one of its threads was walking them.
    pub cpu_units: u64,
    pub cpu_pairs: u128,
    pub cpu_share: f64,
    pub cpu_busy_s: f64,
}

impl Split {
    /// The GPUs alone, for `why`.
    pub fn gpus_alone(why: impl Into<String>) -> Split {
        Split { why: why.into(), ..Default::default() }
    }
}

/// Whether the CPU takes part of a grid run of ~`pairs` pairs (as
/// `pairs_from` says they were found) over `points` points, by `choice`; `host_grid_anyway` where the GPUs share a grid the
/// host sorts anyway (several GPUs), so that only the sharing costs.
pub fn decide(
    choice: Hybrid,
    rates: &Rates,
    pairs: u128,
    pairs_from: &str,
    points: usize,
    host_grid_anyway: bool,
) -> Split {
    let share = rates.cpu_share();
    let gpu_s = pairs as f64 / rates.gpu_pairs_per_s;
    let saves = gpu_s * share;
    let costs = sharing_costs(rates, points, host_grid_anyway);
    let threads = rates.cpu_threads;
    let rates_text = format!(
        "{threads} CPU threads at ~{:.1e} pairs/s against the GPUs' ~{:.1e}: {:.2}% of the ~{pairs} pairs ({pairs_from})",
        rates.cpu_pairs_per_s,
        rates.gpu_pairs_per_s,
        100.0 * share
    );
    let costs_text = if host_grid_anyway {
        format!("{:.1} ms of sharing the queue", 1e3 * costs)
    } else {
        format!("{:.1} ms of sorting the grid on the host and sharing the queue", 1e3 * costs)
    };
    let (cpu, why) = match choice {
        Hybrid::Off => (false, "--hybrid off: the GPUs alone".to_owned()),
        Hybrid::On => {
            (true, format!("--hybrid on: the CPU takes units from the back of the queue; the model gives {rates_text}"))
        }
        Hybrid::Auto if saves > costs => {
            (true, format!("the CPU takes part: {rates_text}, saving ~{:.1} ms against {costs_text}", 1e3 * saves))
        }
        Hybrid::Auto => {
            (false, format!("the GPUs alone: {rates_text} would save ~{:.2} ms, less than {costs_text}", 1e3 * saves))
        }
    };
    Split { cpu, why, cpu_threads: if cpu { threads } else { 0 }, predicted_cpu_share: share, ..Default::default() }
}

/// Seconds that sharing a grid run of `points` points with the CPU costs:
/// the host's sort of the grid beyond the GPU's own (none where the host
/// sorts it anyway for several GPUs), and the sharing itself.
fn sharing_costs(rates: &Rates, points: usize, host_grid_anyway: bool) -> f64 {
    let sort = if host_grid_anyway {
        0.0
    } else {
        points as f64 / (HOST_SORT_POINTS_PER_THREAD_S * rates.cpu_threads as f64)
            - points as f64 / DEVICE_SORT_POINTS_PER_S
    };
    sort.max(0.0) + SHARING_S
}

/// The model in words, for `twobs plan`: the CPU's share of a grid run of
/// `points` points, and the GPUs' kernel time above which it pays.
pub fn describe(rates: &Rates, points: usize) -> String {
    let share = rates.cpu_share();
    let costs = sharing_costs(rates, points, false);
    format!(
        "{} CPU threads at ~{:.1e} pairs/s beside the GPU's ~{:.1e} would take {:.2}% of a grid run's pairs: \
         worth it where the GPU's kernels would run longer than {:.2} s ({:.1} ms of sorting {points} points on the \
         host and sharing the queue); a run decides from its grid (--hybrid on forces it)",
        rates.cpu_threads,
        rates.cpu_pairs_per_s,
        rates.gpu_pairs_per_s,
        100.0 * share,
        costs / share,
        1e3 * costs
    )
}

/// The most pairs a grid run may visit for the CPU to be worth asking
/// about: where even every pair of the inputs would not make it pay, no
/// sample of the grid's pairs is taken.
pub fn could_pay(rates: &Rates, all_pairs: u128, points: usize, host_grid_anyway: bool) -> bool {
    decide(Hybrid::Auto, rates, all_pairs, "", points, host_grid_anyway).cpu
}

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
    while let Some([first, end]) = claimed.take().or_else(|| side.claim(queue)) {
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

    fn h200() -> Device {
        Device::profile("h200").expect("the h200 profile")
    }

    #[test]
    fn one_h200_runs_the_target_joins_alone_and_says_why() {
        let rates = Rates::of(&[h200()], 15);
        assert!(rates.cpu_share() < 0.01, "{rates:?}");
        // The 2-D self-join of 2M points: 8.4e8 pairs.
        let split = decide(Hybrid::Auto, &rates, 844_108_333, "a test", 2_000_000, false);
        assert!(!split.cpu, "{}", split.why);
        assert!(split.why.contains("the GPUs alone") && split.why.contains("sorting the grid"), "{}", split.why);
        // Forced, it takes part, with the model's share named.
        let on = decide(Hybrid::On, &rates, 844_108_333, "a test", 2_000_000, false);
        assert!(on.cpu && on.cpu_threads == 15 && on.predicted_cpu_share > 0.0, "{}", on.why);
        assert!(!decide(Hybrid::Off, &rates, u128::MAX >> 8, "a test", 10, true).cpu);
    }

    #[test]
    fn the_cpu_takes_part_where_it_saves_more_than_sharing_costs() {
        // A slow GPU (a twentieth of an H200) beside 64 threads: a large share.
        let slow = Device { multiprocessors: h200().multiprocessors / 20, ..h200() };
        let rates = Rates::of(&[slow], 64);
        assert!(rates.cpu_share() > 0.05, "{rates:?}");
        let pairs = 1u128 << 40;
        let split = decide(Hybrid::Auto, &rates, pairs, "a test", 1_000_000, false);
        assert!(split.cpu, "{}", split.why);
        // Too few pairs for the sort to pay off.
        assert!(!decide(Hybrid::Auto, &rates, 1 << 20, "a test", 1_000_000, false).cpu);
        // Where the host sorts the grid anyway, only the sharing costs.
        let fewer = 1u128 << 32;
        assert!(!decide(Hybrid::Auto, &rates, fewer, "a test", 100_000_000, false).cpu);
        assert!(decide(Hybrid::Auto, &rates, fewer, "a test", 100_000_000, true).cpu);
        assert!(could_pay(&rates, pairs, 1_000_000, false));
    }

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
