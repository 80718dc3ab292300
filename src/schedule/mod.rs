//! The schedule: who does which part of a run, decided on the host before
//! any kernel runs.
//!
//! From the problem, its inputs and a described set of workers (GPUs by
//! their profiles or live limits, their streams, the host's cores) it says
//! how the pairs are found (every pair in blocks, a grid the host sorts, or
//! a grid each GPU sorts for itself), which GPUs take part and how units
//! reach them, and whether the CPU's threads share the work, each with its
//! reason. Making one needs no GPU: the suite tests every decision with
//! described workers (none, one, two, eight GPUs), and `twobs plan
//! --schedule` prints it. Backends run a schedule; they do not choose.
//!
//! The CPU-beside-GPU model (seeds 002 and 003) is here too: whether the
//! CPU's threads save more of the GPUs' kernel time than sharing costs.

use std::ops::Range;

pub mod hierarchy;
pub mod pieces;

use serde::Serialize;

use crate::data::Shapes;
use crate::device::Device;
use crate::index::{self, CPU_RUNS, IndexChoice, IndexError, IndexKind, Layout, Runs, Summary};
use crate::plan::{Forced, Plan, PlanError, Points, Shape};
use crate::spec::{Output, Params, Problem};
use crate::stage::contribution::CpuBuckets;
use crate::stage::input::PAD_POINTS;

/// What a GPU run was asked for, besides the problem and its inputs.
#[derive(Debug, Clone, Default)]
pub struct GpuOptions {
    /// GPU ordinals; all visible GPUs when None.
    pub gpus: Option<Vec<usize>>,
    /// Points per block; the whole set (as memory allows) when None.
    pub block_points: Option<usize>,
    /// Streams (host threads) per GPU.
    pub streams: usize,
    pub forced: Forced,
    /// Pairs the direct output buffer holds; sized from a sample when None.
    pub pool_pairs: Option<u64>,
    /// Pairs in the smallest piece of work; `pieces::MIN_PIECE_PAIRS` when None.
    pub piece_pairs: Option<u64>,
    /// Whether the CPU's cores take part of a grid run.
    pub hybrid: Hybrid,
}

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

/// The machine a schedule is made for: described, not opened.
#[derive(Debug, Clone)]
pub struct Workers {
    /// The GPUs that may take part, in the order of `--gpus` (none: the CPU backend).
    pub gpus: Vec<Device>,
    /// Bytes of memory of the smallest GPU.
    pub gpu_memory: usize,
    /// Streams (host threads) per GPU.
    pub streams: usize,
    /// The host's cores.
    pub cores: usize,
}

impl Workers {
    /// `count` GPUs of `profile`, `memory` bytes each, fed by `streams`
    /// streams each, beside `cores` host cores.
    pub fn described(profile: &Device, count: usize, memory: usize, streams: usize, cores: usize) -> Workers {
        Workers { gpus: vec![profile.clone(); count], gpu_memory: memory, streams: streams.max(1), cores: cores.max(1) }
    }

    /// The host's `threads` threads alone (the CPU backend).
    pub fn cpu(threads: usize) -> Workers {
        Workers { gpus: Vec::new(), gpu_memory: 0, streams: 1, cores: threads.max(1) }
    }

    /// The workers of `ranks` processes, each with these GPUs: the machine
    /// every MPI rank describes alike, its GPUs rank after rank.
    pub fn repeated(&self, ranks: usize) -> Workers {
        let gpus = (0..ranks.max(1)).flat_map(|_| self.gpus.iter().cloned()).collect();
        Workers { gpus, ..self.clone() }
    }

    /// The machine in words, as ranks compare theirs.
    pub fn describe(&self) -> String {
        let names: Vec<&str> = self.gpus.iter().map(|g| g.name.as_str()).collect();
        format!(
            "{} GPU(s) [{}] of {} bytes, {} stream(s) each",
            self.gpus.len(),
            names.join(", "),
            self.gpu_memory,
            self.streams
        )
    }

    /// CPU threads that may take part beside the threads feeding the GPUs.
    pub fn cpu_threads(&self) -> usize {
        self.cores.saturating_sub(self.gpus.len() * self.streams).max(1)
    }
}

/// This process's part of a schedule that several processes (MPI ranks)
/// make alike from the same inputs and the same described workers (each
/// rank's GPUs, once a rank).
#[derive(Clone, Copy, Default)]
pub struct Part<'a> {
    /// This process's first GPU's place among every rank's GPUs.
    pub first_gpu: usize,
    /// Hands out the places of a queue that every rank shares; None where
    /// the queue is this process's alone.
    pub counter: Option<&'a dyn crate::ranks::Counter>,
    /// Where rank 0 sends the other ranks the rows of set A with each
    /// piece (`run::rows_of_a_travel`): each place's rows [lo, hi) of A, set
    /// once the queue is cut, which rank 0's counter reads to answer.
    pub spans: Option<&'a std::sync::OnceLock<Vec<(usize, usize)>>>,
}

impl Part<'_> {
    /// The schedule's GPUs that are this process's: at most `mine` of them,
    /// from its first GPU's place, of the `taking_part` that do.
    pub fn gpus(&self, mine: usize, taking_part: usize) -> usize {
        taking_part.saturating_sub(self.first_gpu).min(mine)
    }
}

impl std::fmt::Debug for Part<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Part {{ first_gpu: {}, shared: {} }}", self.first_gpu, self.counter.is_some())
    }
}

/// How a run finds its pairs.
#[derive(Debug, Clone)]
pub enum Indexing {
    /// Every pair, in blocks of points.
    Brute(Summary),
    /// A grid the host sorts into units of `runs`: the CPU's threads walk it,
    /// and every GPU taking part uploads it.
    Host { layout: Layout, runs: Runs },
    /// A grid each GPU taking part sorts for itself from the layout (units of
    /// B x R own points along a row, as its kernel's blocks take them).
    Device(Layout),
}

impl Indexing {
    /// The grid's layout, where there is one.
    pub fn layout(&self) -> Option<&Layout> {
        match self {
            Indexing::Brute(_) => None,
            Indexing::Host { layout, .. } | Indexing::Device(layout) => Some(layout),
        }
    }
}

/// How the units reach the GPUs taking part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Sharing {
    /// One queue of pieces, which every stream of every GPU (and the CPU's
    /// threads, from the back) takes from.
    Queue,
    /// Each GPU sorts its own copy of the grid and takes the units of its
    /// consecutive rows of cells, split by their pairs ([`split_rows`]).
    /// Within one cell the GPUs' sorts may order points differently, and
    /// a unit's own row pairs point i with the sorted points after i, so
    /// GPUs split only where a row of cells begins.
    Rows,
}

/// Who does what in one run, each decision with its reason.
#[derive(Debug, Clone)]
pub struct Schedule {
    pub indexing: Indexing,
    /// The GPUs that take part: the first `gpus` of the workers'.
    pub gpus: usize,
    pub sharing: Sharing,
    /// Why those GPUs, that way.
    pub why_gpus: String,
    /// Whether the CPU's threads take part, and why.
    pub hybrid: Split,
    /// Points per block of a set (each set whole where a grid runs).
    pub block_points: usize,
    /// The grid's pairs, estimated from a sample where a decision needed them.
    pub estimated_pairs: Option<u128>,
    /// How the CPU's driver finds a histogram pair's bucket, and why, where
    /// the CPU takes part in a histogram.
    pub cpu_buckets: Option<(CpuBuckets, String)>,
}

#[derive(Debug, thiserror::Error)]
pub enum ScheduleError {
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error(transparent)]
    Plan(#[from] PlanError),
}

/// Fewest pairs (estimated) a grid must visit for several GPUs to share it:
/// about 2 ms of one H200's grid kernels (5.3e11 pairs a second). Each GPU
/// makes its context, uploads the inputs and sorts its grid at the same
/// time as the others, so a second GPU costs little more than its context
/// (once per process); below this it would save less than that.
pub const SEVERAL_GPUS_GRID_PAIRS: u128 = 1 << 30;

/// Rows of cells each GPU should get for a split by rows to be even: a row
/// is the coarsest part a GPU takes.
pub const ROWS_PER_GPU: u64 = 16;

const NO_GRID: &str = "the GPUs alone: the CPU takes part in grid runs only (brute force's pieces are ranges of a \
                       kernel's steps, which the CPU's driver does not walk)";

impl Schedule {
    /// The schedule of `problem` on inputs of `shapes` for `workers`, with
    /// the index `choice` and the options asked for.
    pub fn make(
        problem: &Problem,
        params: &Params,
        shapes: &Shapes,
        choice: IndexChoice,
        opts: &GpuOptions,
        workers: &Workers,
    ) -> Result<Schedule, ScheduleError> {
        let points = Points { a: shapes.a.len as u64, b: shapes.b.as_ref().map(|b| b.len as u64) };
        let shape = Shape::new(problem, params, points);
        let all = workers.gpus.len();
        let most = shapes.most();
        // The CPU's threads read both sets whole.
        let block_points = match all {
            0 => most,
            _ => block_points(shapes.a.point_bytes(), most, opts, workers.gpu_memory, workers.streams),
        };
        let buckets = || matches!(problem.output, Output::Histogram { .. }).then(|| CpuBuckets::choose(problem));
        let brute = |summary: Summary| Schedule {
            indexing: Indexing::Brute(summary),
            gpus: all,
            sharing: Sharing::Queue,
            why_gpus: every_gpu(all, "pieces of the blocks' units"),
            hybrid: if all == 0 { Split::cpu_alone(workers.cores) } else { Split::gpus_alone(NO_GRID) },
            block_points,
            estimated_pairs: None,
            cpu_buckets: if all == 0 { buckets() } else { None },
        };
        // The CPU alone walks cells finer than the cutoff; GPUs walk theirs.
        let fineness = if all == 0 { CPU_RUNS.cells } else { index::Cells::Widest };
        let layout = match index::layout(problem, params, shapes, shape.pairs, choice, fineness)? {
            Ok(layout) => layout,
            Err(summary) => return Ok(brute(summary)),
        };
        if all == 0 {
            return Ok(Schedule {
                indexing: Indexing::Host { layout, runs: CPU_RUNS },
                gpus: 0,
                sharing: Sharing::Queue,
                why_gpus: "no GPU: the CPU's threads take every unit".into(),
                hybrid: Split::cpu_alone(workers.cores),
                block_points,
                estimated_pairs: None,
                cpu_buckets: buckets(),
            });
        }
        if block_points < most {
            let why = format!(
                "the grid needs both sets whole on each GPU, and blocks of {block_points} of the {most} points were asked for or fit"
            );
            return match choice {
                IndexChoice::Grid => Err(IndexError::Unusable(why).into()),
                _ => Ok(brute(Summary::brute(why, shape.pairs))),
            };
        }
        let several = all > 1;
        let rings = layout.kind == IndexKind::Rings;
        let rates = Rates::of(&workers.gpus, workers.cpu_threads());
        // A sample of the grid's pairs, where a decision turns on them: the
        // split over GPUs, or the CPU's share where every pair could make it pay.
        let could_pay = opts.hybrid == Hybrid::Auto && could_pay(&rates, shape.pairs, most);
        let estimate = ((several && !rings) || could_pay).then(|| layout.estimated_pairs(shapes, shape.visit));
        let hybrid = match estimate {
            Some(e) => decide(opts.hybrid, &rates, e, "estimated from a sample", most),
            None => decide(opts.hybrid, &rates, shape.pairs, "every pair, at most", most),
        };
        let host = |layout: Layout| -> Result<Indexing, ScheduleError> {
            let plan = Plan::grid(problem, params, &workers.gpus[0], points, opts.forced)?;
            let runs = Runs {
                points: plan.launch.block_size * plan.launch.points_per_thread,
                whole_rows: true,
                cells: index::Cells::Widest,
            };
            Ok(Indexing::Host { layout, runs })
        };
        let schedule = |indexing, gpus, sharing, why_gpus: String| Schedule {
            indexing,
            gpus,
            sharing,
            why_gpus,
            hybrid: hybrid.clone(),
            block_points: most,
            estimated_pairs: estimate,
            cpu_buckets: if hybrid.cpu { buckets() } else { None },
        };
        let first_alone = |why: String| format!("the first GPU alone: {why}");
        // A search of rings writes every list of its GPU in one buffer, which
        // one GPU's lists fill (and the CPU's rows overwrite).
        let why_rings =
            (rings && several).then(|| first_alone(format!("a KNN search of rings runs on one GPU, not on {all}")));
        if hybrid.cpu {
            let gpus = if why_rings.is_some() { 1 } else { all };
            let why = why_rings.unwrap_or_else(|| {
                every_gpu(
                    all,
                    "pieces of the host's grid from the front of one queue, the CPU's threads units from its back",
                )
            });
            return Ok(schedule(host(layout)?, gpus, Sharing::Queue, why));
        }
        if let Some(why) = why_rings {
            return Ok(schedule(Indexing::Device(layout), 1, Sharing::Queue, why));
        }
        if !several {
            return Ok(schedule(Indexing::Device(layout), 1, Sharing::Queue, "one GPU sorts its own grid".into()));
        }
        let estimate = estimate.expect("several GPUs sample the grid");
        // Forced pieces (--piece-pairs) are shared from two of them.
        let least = opts.piece_pairs.map_or(SEVERAL_GPUS_GRID_PAIRS, |p| 2 * u128::from(p));
        if estimate < least {
            let why = first_alone(format!(
                "the grid's ~{estimate} pairs (estimated from a sample) are fewer than {least}, too few to be worth {all} GPUs"
            ));
            return Ok(schedule(Indexing::Device(layout), 1, Sharing::Queue, why));
        }
        let rows = layout.rows();
        if rows >= ROWS_PER_GPU * all as u64 {
            let why = format!(
                "each of {all} GPUs sorts its own grid and takes consecutive rows of its {rows} rows of cells, split by their pairs (~{estimate} in all, estimated from a sample)"
            );
            return Ok(schedule(Indexing::Device(layout), all, Sharing::Rows, why));
        }
        let why = format!(
            "the grid has {rows} rows of cells, too few to split between {all} GPUs by rows: the host sorts it, and {}",
            every_gpu(all, "pieces from one queue")
        );
        Ok(schedule(host(layout)?, all, Sharing::Queue, why))
    }

    /// The schedule in words, a line a decision (for `twobs plan --schedule` and the report).
    pub fn describe(&self) -> Vec<(&'static str, String)> {
        let index = match &self.indexing {
            Indexing::Brute(summary) => format!("every pair: {}", summary.why),
            Indexing::Host { layout, runs } => format!(
                "a grid the host sorts ({}; {} cells), units of at most {} own points{}",
                layout.cutoff,
                layout.cells,
                runs.points,
                if runs.whole_rows { " along a row" } else { " in one cell" }
            ),
            Indexing::Device(layout) => {
                format!(
                    "a grid each GPU sorts for itself ({}; {} cells, {} rows)",
                    layout.cutoff,
                    layout.cells,
                    layout.rows()
                )
            }
        };
        let mut lines = vec![("index", index), ("gpus", format!("{}: {}", self.gpus, self.why_gpus))];
        lines.push(("cpu", self.hybrid.why.clone()));
        lines.push(("blocks", format!("{} points a block", self.block_points)));
        if let Some(e) = self.estimated_pairs {
            lines.push(("estimate", format!("~{e} pairs on the grid, from a sample")));
        }
        if let Some((_, why)) = &self.cpu_buckets {
            lines.push(("cpu buckets", why.clone()));
        }
        lines
    }
}

/// "every GPU takes `what`", or what one GPU or the CPU does.
fn every_gpu(count: usize, what: &str) -> String {
    match count {
        0 => "no GPU: the CPU's threads take every unit".into(),
        1 => format!("the GPU takes {what}"),
        n => format!("each of {n} GPUs takes {what}"),
    }
}

/// Points per block of a set whose larger set has `most` points of
/// `point_bytes` bytes: the whole set (or `--block-points`), at most what a
/// quarter of `memory` holds for both sets of every stream.
pub fn block_points(point_bytes: usize, most: usize, opts: &GpuOptions, memory: usize, streams: usize) -> usize {
    let fit = (memory / 4 / (2 * streams.max(1)) / point_bytes.max(1)).max(PAD_POINTS);
    opts.block_points.unwrap_or(most).min(fit).max(1)
}

/// Whether a run's sets (the larger of `most` points) are held whole in
/// blocks whatever others hold of a GPU of `total` bytes, up to half of it:
/// then the free memory need not be asked (four driver calls, 28-57 us a
/// call on the H200's host), as it would change nothing.
pub fn whole_in_half(point_bytes: usize, most: usize, opts: &GpuOptions, total: usize, streams: usize) -> bool {
    block_points(point_bytes, most, opts, total / 2, streams) >= most
}

/// The units each of `weights.len()` GPUs takes of a grid whose units lie
/// in row order (row r's are units `row_start[r]..row_start[r + 1]`), unit
/// u visiting `pairs[u]` pairs: consecutive whole rows each, so that every
/// GPU's share of the pairs is as near its weight's share as whole rows
/// allow (each cut lands on the row boundary nearest its target).
pub fn split_rows(row_start: &[u32], pairs: &[u64], weights: &[f64]) -> Vec<Range<usize>> {
    let rows = row_start.len().saturating_sub(1);
    let mut before = Vec::with_capacity(rows + 1);
    before.push(0u128);
    for r in 0..rows {
        let units = row_start[r] as usize..row_start[r + 1] as usize;
        before.push(before[r] + pairs[units].iter().map(|&p| u128::from(p)).sum::<u128>());
    }
    let total = before[rows] as f64;
    let whole: f64 = weights.iter().sum::<f64>().max(f64::MIN_POSITIVE);
    let mut cuts = vec![0usize];
    let mut share = 0.0;
    for w in &weights[..weights.len().saturating_sub(1)] {
        share += w;
        let target = total * share / whole;
        let last = *cuts.last().expect("the first cut");
        // The first boundary at or past the target, or the one before it if nearer.
        let past = before.partition_point(|&b| (b as f64) < target).clamp(last, rows);
        let cut = if past > last && target - before[past - 1] as f64 <= before[past] as f64 - target {
            past - 1
        } else {
            past
        };
        cuts.push(cut);
    }
    cuts.push(rows);
    let unit = |row: usize| if rows == 0 { 0 } else { row_start[row] as usize };
    cuts.windows(2).map(|c| unit(c[0])..unit(c[1])).collect()
}

/// FP32 lane-cycles of a GPU per pair its grid kernels visit: one H200
/// (3.35e13 lane-cycles a second) visited 5.3e11 pairs a second in the 2-D
/// and 3-D self-joins (docs/benchmarks.md, "The grid": 8.4e8 pairs in
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

    /// The CPU backend: `threads` threads take every unit.
    fn cpu_alone(threads: usize) -> Split {
        Split {
            cpu: true,
            why: format!("the CPU backend: {threads} threads take every unit"),
            cpu_threads: threads,
            predicted_cpu_share: 1.0,
            ..Default::default()
        }
    }
}

/// Whether the CPU takes part of a grid run of ~`pairs` pairs (as
/// `pairs_from` says they were found) over `points` points, by `choice`.
pub fn decide(choice: Hybrid, rates: &Rates, pairs: u128, pairs_from: &str, points: usize) -> Split {
    let share = rates.cpu_share();
    let gpu_s = pairs as f64 / rates.gpu_pairs_per_s;
    let saves = gpu_s * share;
    let costs = sharing_costs(rates, points);
    let threads = rates.cpu_threads;
    let rates_text = format!(
        "{threads} CPU threads at ~{:.1e} pairs/s against the GPUs' ~{:.1e}: {:.2}% of the ~{pairs} pairs ({pairs_from})",
        rates.cpu_pairs_per_s,
        rates.gpu_pairs_per_s,
        100.0 * share
    );
    let costs_text = format!("{:.1} ms of sorting the grid on the host and sharing the queue", 1e3 * costs);
    let (cpu, why) = match choice {
        Hybrid::Off => (false, "the GPUs alone: the CPU beside them is turned off".to_owned()),
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
/// the host's sort of the grid beyond the GPU's own, and the sharing itself.
fn sharing_costs(rates: &Rates, points: usize) -> f64 {
    let sort = points as f64 / (HOST_SORT_POINTS_PER_THREAD_S * rates.cpu_threads as f64)
        - points as f64 / DEVICE_SORT_POINTS_PER_S;
    sort.max(0.0) + SHARING_S
}

/// The model in words, for `twobs plan`: the CPU's share of a grid run of
/// `points` points, and the GPUs' kernel time above which it pays.
pub fn describe_hybrid(rates: &Rates, points: usize) -> String {
    let share = rates.cpu_share();
    let costs = sharing_costs(rates, points);
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

/// Whether even every pair of the inputs would make the CPU pay: where it
/// would not, no sample of the grid's pairs is taken.
pub fn could_pay(rates: &Rates, all_pairs: u128, points: usize) -> bool {
    decide(Hybrid::Auto, rates, all_pairs, "", points).cpu
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h200() -> Device {
        Device::profile("h200").expect("the h200 profile")
    }

    /// A GPU run asks for the free memory only where this says the sets may not fit.
    #[test]
    fn sets_whole_in_half_a_gpu_need_no_free_memory_asked() {
        let opts = GpuOptions { streams: 2, ..Default::default() };
        let h200 = 141 << 30;
        // 100k and 100M 3-D f32 points fit half an H200 whole; 2G do not (12 bytes x 8 a point there).
        assert!(whole_in_half(12, 100_000, &opts, h200, 2));
        assert!(whole_in_half(12, 100_000_000, &opts, h200, 2));
        assert!(!whole_in_half(12, 2_000_000_000, &opts, h200, 2));
        // At the edge: a quarter of half the memory over both sets of two streams.
        let edge = h200 / 2 / 4 / 4 / 12;
        assert!(whole_in_half(12, edge, &opts, h200, 2));
        assert!(!whole_in_half(12, edge + 1, &opts, h200, 2));
        // Blocks the user asked for below the set: streamed, so the free memory is asked.
        let forced = GpuOptions { block_points: Some(4096), ..opts.clone() };
        assert!(!whole_in_half(12, 100_000, &forced, h200, 2));
    }

    #[test]
    fn one_h200_runs_the_target_joins_alone_and_says_why() {
        let rates = Rates::of(&[h200()], 15);
        assert!(rates.cpu_share() < 0.01, "{rates:?}");
        // The 2-D self-join of 2M points: 8.4e8 pairs.
        let split = decide(Hybrid::Auto, &rates, 844_108_333, "a test", 2_000_000);
        assert!(!split.cpu, "{}", split.why);
        assert!(split.why.contains("the GPUs alone") && split.why.contains("sorting the grid"), "{}", split.why);
        // Forced, it takes part, with the model's share named.
        let on = decide(Hybrid::On, &rates, 844_108_333, "a test", 2_000_000);
        assert!(on.cpu && on.cpu_threads == 15 && on.predicted_cpu_share > 0.0, "{}", on.why);
        assert!(!decide(Hybrid::Off, &rates, u128::MAX >> 8, "a test", 10).cpu);
    }

    #[test]
    fn the_cpu_takes_part_where_it_saves_more_than_sharing_costs() {
        // A slow GPU (a twentieth of an H200) beside 64 threads: a large share.
        let slow = Device { multiprocessors: h200().multiprocessors / 20, ..h200() };
        let rates = Rates::of(&[slow], 64);
        assert!(rates.cpu_share() > 0.05, "{rates:?}");
        let pairs = 1u128 << 40;
        assert!(decide(Hybrid::Auto, &rates, pairs, "a test", 1_000_000).cpu);
        // Too few pairs for the host's sort to pay off.
        assert!(!decide(Hybrid::Auto, &rates, 1 << 20, "a test", 1_000_000).cpu);
        assert!(!decide(Hybrid::Auto, &rates, 1 << 32, "a test", 100_000_000).cpu);
        assert!(could_pay(&rates, pairs, 1_000_000));
    }

    #[test]
    fn rows_split_where_rows_begin_and_near_each_share() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(rand::rng().random());
        for _ in 0..200 {
            let rows = rng.random_range(0..60usize);
            let mut row_start = vec![0u32];
            for _ in 0..rows {
                let units = rng.random_range(0..5u32);
                row_start.push(row_start.last().unwrap() + units);
            }
            let units = *row_start.last().unwrap() as usize;
            let pairs: Vec<u64> = (0..units).map(|_| rng.random_range(0..1000u64).pow(2)).collect();
            let gpus = rng.random_range(1..9usize);
            let weights: Vec<f64> = (0..gpus).map(|_| rng.random_range(0.5..2.0)).collect();
            let split = split_rows(&row_start, &pairs, &weights);
            assert_eq!(split.len(), gpus);
            // Every unit once, in order, each cut where a row begins.
            assert_eq!(split[0].start, 0);
            assert_eq!(split[gpus - 1].end, units);
            for w in split.windows(2) {
                assert_eq!(w[0].end, w[1].start);
            }
            for s in &split {
                assert!(s.start <= s.end && row_start.contains(&(s.start as u32)), "{split:?} {row_start:?}");
            }
            // Each cut lies within one row's pairs of its target.
            let total: u128 = pairs.iter().map(|&p| p as u128).sum();
            let heaviest = (0..rows)
                .map(|r| pairs[row_start[r] as usize..row_start[r + 1] as usize].iter().map(|&p| p as u128).sum())
                .max()
                .unwrap_or(0u128);
            let whole: f64 = weights.iter().sum();
            let (mut got, mut want) = (0u128, 0.0);
            for (s, w) in split.iter().zip(&weights) {
                got += pairs[s.clone()].iter().map(|&p| p as u128).sum::<u128>();
                want += total as f64 * w / whole;
                assert!((got as f64 - want).abs() <= heaviest as f64 + 1e-6 * total as f64, "{got} against {want}");
            }
        }
    }

    #[test]
    fn ranks_describe_their_gpus_rank_after_rank_and_take_their_own_places() {
        let one = Workers::described(&h200(), 2, 1 << 37, 2, 32);
        let four = one.repeated(4);
        assert_eq!(four.gpus.len(), 8);
        assert_eq!((four.gpu_memory, four.streams, four.cores), (one.gpu_memory, one.streams, one.cores));
        assert_eq!(four.describe(), Workers::described(&h200(), 8, 1 << 37, 2, 32).describe());
        // Rank r's GPUs are places 2r, 2r + 1 of the schedule's GPUs.
        let part = |rank: usize| Part { first_gpu: 2 * rank, ..Default::default() };
        assert_eq!((0..4).map(|r| part(r).gpus(2, 8)).collect::<Vec<_>>(), vec![2, 2, 2, 2]);
        // A schedule of 3 GPUs: rank 1 runs one of its two, ranks 2 and 3 none.
        assert_eq!((0..4).map(|r| part(r).gpus(2, 3)).collect::<Vec<_>>(), vec![2, 1, 0, 0]);
    }

    #[test]
    fn even_rows_split_evenly() {
        let row_start: Vec<u32> = (0..=100).map(|r| 3 * r).collect();
        let pairs = vec![10u64; 300];
        let split = split_rows(&row_start, &pairs, &[1.0, 1.0]);
        assert_eq!(split, vec![0..150, 150..300]);
        let four = split_rows(&row_start, &pairs, &[1.0; 4]);
        assert_eq!(four, vec![0..75, 75..150, 150..225, 225..300]);
        // A GPU twice as fast takes twice the rows.
        assert_eq!(split_rows(&row_start, &pairs, &[2.0, 1.0])[0].end, 201);
        // No rows: every GPU takes nothing.
        assert_eq!(split_rows(&[0], &[], &[1.0, 1.0]), vec![0..0, 0..0]);
    }
}
