//! `twobs tune`: the kernel shapes (input cache, shared copies or registers,
//! own points per thread, block size) timed on the live GPU, and the shapes
//! that serve the measured cases best stored in the GPU's tuned profile,
//! which every later plan on a GPU of that name reads.
//!
//! Each case walks from the planner's current shape one knob at a time over
//! all of that knob's values, keeping what is faster, until a pass changes
//! nothing. The fit then takes, among every case's best shape, the one that
//! leaves the fewest cases more than 5% above their best (then the least
//! above it by geometric mean), judged by what the planner makes of it on
//! each case, for totals in shared copies and totals in registers apart.
//! Every shape's result must equal the planner's, or nothing is stored.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::backend::cuda::{self, GpuError};
use crate::cache::Cache;
use crate::data::Inputs;
use crate::device::{Device, InputCache, KernelShape, TunedProfile, Tuning};
use crate::index::IndexChoice;
use crate::outcome::Outcome;
use crate::plan::{Forced, POINTS_PER_THREAD, Plan, PlanError, Points};
use crate::run::RunError;
use crate::schedule::{GpuOptions, Hybrid};
use crate::spec::{Params, Problem};
use crate::stage::output::totals::Store;
use crate::stage::output::{OutputChoice, OutputStage};

/// Block sizes tried: below 128 a block holds too few warps to hide the
/// shared atomics' latency on any GPU since Pascal.
const BLOCK_SIZES: [u32; 4] = [128, 256, 512, 1024];
/// Shared copies tried (1: one copy a block).
const COPIES: [u32; 6] = [1, 2, 4, 8, 16, 32];
/// Input caches tried; `naive` (every partner read from global memory,
/// the paper's Algorithm 1) is the baseline the others exist to beat.
const INPUT_CACHES: [InputCache; 3] = [InputCache::RegisterShm, InputCache::RegisterRoc, InputCache::Shuffle];
/// A shape this much slower than the case's best after one run is not run again.
const RERUN_WITHIN: f64 = 1.1;
/// A case counts as served where the planner's pick is within this of its best.
pub const WITHIN: f64 = 1.05;

#[derive(Debug, thiserror::Error)]
pub enum TuneError {
    #[error(
        "`{problem}` collects {kind}: twobs tune measures the kernels that sum pairs into totals (histograms, counts, sums)"
    )]
    NotTotals { problem: String, kind: &'static str },
    #[error("{case}: shape {shape} found another result than the planner's ({difference}); nothing was stored")]
    Disagrees { case: String, shape: KernelShape, difference: String },
    #[error("{case}: {cause}")]
    Plan { case: String, cause: PlanError },
    #[error("{case}, shape {shape}: {cause}")]
    Run { case: String, shape: KernelShape, cause: Box<RunError> },
}

/// One workload to time: a problem, its parameters and its points.
pub struct Case {
    pub label: String,
    pub problem: Problem,
    pub params: Params,
    pub inputs: Inputs,
}

/// Which kind of totals a case's kernel keeps, so which knobs it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Keeps {
    Shared,
    Registers,
}

/// A shape's kernel time on one case.
#[derive(Debug, Clone, Serialize)]
pub struct Timed {
    pub shape: KernelShape,
    /// The least of its runs (None: the shape does not fit this GPU or case).
    pub kernel_s: Option<f64>,
}

/// What the sweep found for one case.
#[derive(Debug, Clone, Serialize)]
pub struct CaseResult {
    pub label: String,
    pub keeps: Keeps,
    /// The planner's shape before tuning, and its time.
    pub before: Timed,
    pub best: Timed,
    /// The planner's shape with the fitted profile, and its time.
    pub planned: Timed,
    pub timed: Vec<Timed>,
}

impl CaseResult {
    /// The planner's pick over the best shape's time.
    pub fn planned_over_best(&self) -> f64 {
        self.planned.kernel_s.unwrap_or(f64::INFINITY) / self.best.kernel_s.unwrap_or(f64::INFINITY)
    }
}

/// The sweep's cases and the shapes fitted to them.
#[derive(Debug, Clone, Serialize)]
pub struct Sweep {
    pub device: String,
    pub cases: Vec<CaseResult>,
    pub tuning: Tuning,
}

impl Sweep {
    /// Cases whose planned shape is within [`WITHIN`] of their best.
    pub fn served(&self) -> usize {
        self.cases.iter().filter(|c| c.planned_over_best() <= WITHIN).count()
    }

    /// The sweep as a markdown table.
    pub fn table(&self) -> String {
        let time = |t: &Timed| t.kernel_s.map_or("does not fit".into(), |s| format!("{s:.4}"));
        let mut out = String::from(
            "| case | keeps | planner before (s) | best shape | best (s) | planner now | now (s) | now / best |\n\
             | --- | --- | ---: | --- | ---: | --- | ---: | ---: |\n",
        );
        for c in &self.cases {
            out += &format!(
                "| {} | {:?} | {} | {} | {} | {} | {} | {:.3} |\n",
                c.label,
                c.keeps,
                time(&c.before),
                c.best.shape,
                time(&c.best),
                c.planned.shape,
                time(&c.planned),
                c.planned_over_best()
            );
        }
        out
    }
}

/// One run of a case with forced choices: its result and kernel time.
pub type Runner<'r> = dyn FnMut(&Case, Forced) -> Result<(Outcome, f64), Box<RunError>> + 'r;

/// Readies the kernels of a case's shapes before they are timed.
pub type Prepare<'r> = dyn FnMut(&Case, &[Forced]) + 'r;

/// How the sweep runs.
pub struct TuneOptions<'r> {
    /// Runs of a shape that may be the best (the least is kept).
    pub reps: usize,
    /// Runs a case on the GPU ([`on_gpu`]).
    pub run: Box<Runner<'r>>,
    /// Readies the kernels of shapes about to be timed (compiles them at once).
    pub prepare: Box<Prepare<'r>>,
    /// Called with a line per shape timed.
    pub progress: Box<dyn Fn(&str) + 'r>,
}

/// Times the shapes of every case on GPU `dev` and fits the shapes that
/// serve them best.
pub fn sweep(dev: &Device, cases: &[Case], opts: &mut TuneOptions) -> Result<Sweep, TuneError> {
    let mut walks = Vec::new();
    for case in cases {
        let mut walk = Walk::start(dev, case, opts)?;
        walk.descend(opts)?;
        walks.push(walk);
    }
    let start = starting_tuning(dev);
    let shared = fit(dev, Keeps::Shared, &mut walks, opts)?.unwrap_or(start.shared);
    let registers = fit(dev, Keeps::Registers, &mut walks, opts)?.unwrap_or(start.registers);
    let mut tuning = Tuning { shared, registers, source: String::new() };
    // What the planner picks with the fitted shapes (it may cap a block or
    // drop copies that do not fit a case).
    let tuned = with_tuning(dev, tuning.clone());
    let mut results = Vec::new();
    for (walk, case) in walks.iter_mut().zip(cases) {
        // The pick as the planner makes it (R halved for few points, copies
        // dropped where they do not fit beside the tile).
        let (planned, _) = planned(&tuned, case)?;
        let planned = Timed { shape: planned, kernel_s: walk.time(planned, opts)? };
        results.push(walk.result(planned));
    }
    let mut sweep = Sweep { device: dev.name.clone(), cases: results, tuning: tuning.clone() };
    tuning.source = format!(
        "measured by `twobs tune` on this GPU: within 5% of the best shape on {} of {} cases",
        sweep.served(),
        sweep.cases.len()
    );
    sweep.tuning = tuning;
    Ok(sweep)
}

/// Among the cases' best shapes (and the planner's before), the one whose
/// picks leave the fewest cases that keep `keeps` more than [`WITHIN`]
/// above their best, then the least above it by geometric mean. A candidate
/// is judged by what the planner makes of it on each case (it halves R for
/// few points, drops copies that do not fit), and those shapes are timed
/// where they were not.
fn fit(
    dev: &Device,
    keeps: Keeps,
    walks: &mut [Walk],
    opts: &mut TuneOptions,
) -> Result<Option<KernelShape>, TuneError> {
    let mut candidates: Vec<KernelShape> = Vec::new();
    for w in walks.iter().filter(|w| w.keeps == keeps) {
        for s in [w.before, w.best().0] {
            if !candidates.contains(&s) {
                candidates.push(s);
            }
        }
    }
    // Each candidate's pick on each case, in the order of `walks`.
    let mut picks: Vec<Vec<KernelShape>> = Vec::new();
    for &candidate in &candidates {
        let tuned = with_shape(dev, keeps, candidate);
        let mut row = Vec::new();
        for w in walks.iter().filter(|w| w.keeps == keeps) {
            row.push(planned(&tuned, w.case)?.0);
        }
        picks.push(row);
    }
    for (k, w) in walks.iter_mut().filter(|w| w.keeps == keeps).enumerate() {
        let shapes: Vec<KernelShape> = picks.iter().map(|row| row[k]).collect();
        w.time_all(&shapes, opts)?;
    }
    // Scored once every time is in, against each case's final best: the
    // most cases within WITHIN of their best, then the least geometric mean.
    let score = |row: &Vec<KernelShape>| -> (usize, f64) {
        let slowdowns: Vec<f64> = walks
            .iter()
            .filter(|w| w.keeps == keeps)
            .zip(row)
            .map(|(w, shape)| w.times[shape].unwrap_or(f64::INFINITY) / w.best().1)
            .collect();
        let missed = slowdowns.iter().filter(|&&s| s > WITHIN).count();
        (missed, slowdowns.iter().map(|s| s.ln()).sum::<f64>() / slowdowns.len().max(1) as f64)
    };
    let best = picks
        .iter()
        .enumerate()
        .min_by(|a, b| {
            let (a, b) = (score(a.1), score(b.1));
            a.0.cmp(&b.0).then(a.1.total_cmp(&b.1))
        })
        .map(|(i, _)| candidates[i]);
    Ok(best)
}

/// `dev` with `shape` for the totals that keep `keeps` (the rest as they were).
fn with_shape(dev: &Device, keeps: Keeps, shape: KernelShape) -> Device {
    let mut tuning = starting_tuning(dev);
    match keeps {
        Keeps::Shared => tuning.shared = shape,
        Keeps::Registers => tuning.registers = KernelShape { copies: 1, ..shape },
    }
    with_tuning(dev, tuning)
}

/// `dev` with `tuning` for every problem.
fn with_tuning(dev: &Device, tuning: Tuning) -> Device {
    Device { tuning: Some(tuning), tuned_problems: BTreeMap::new(), ..dev.clone() }
}

/// The shapes a sweep starts from: the device's, else (a GPU that was never
/// measured) B = 256, R = 2, one copy, tiles in shared memory.
fn starting_tuning(dev: &Device) -> Tuning {
    const SHAPE: KernelShape =
        KernelShape { block_size: 256, points_per_thread: 2, copies: 1, input_cache: InputCache::RegisterShm };
    dev.tuning.clone().unwrap_or_else(|| Tuning {
        shared: SHAPE,
        registers: SHAPE,
        source: "twobs tune's first shape".into(),
    })
}

/// Stores `sweep` in the tuned profile at `path` (for `problem` alone where
/// given), keeping what the file held for other problems.
pub fn store(sweep: &Sweep, dev: &Device, problem: Option<&str>, path: &std::path::Path) -> Result<(), GpuError> {
    let mut profile = TunedProfile::read(path)?.unwrap_or(TunedProfile {
        device: dev.name.clone(),
        compute_capability: dev.compute_capability,
        tuning: None,
        problems: BTreeMap::new(),
        sweeps: BTreeMap::new(),
    });
    let mut tuning = sweep.tuning.clone();
    tuning.source = format!("{} ({})", tuning.source, path.display());
    match problem {
        Some(name) => {
            profile.problems.insert(name.to_owned(), tuning);
        }
        None => profile.tuning = Some(tuning),
    }
    profile.sweeps.insert(problem.unwrap_or("").to_owned(), serde_json::to_value(sweep).expect("a sweep serializes"));
    profile.device = dev.name.clone();
    profile.compute_capability = dev.compute_capability;
    profile.write(path)?;
    Ok(())
}

/// The shape the planner picks for `case` on `dev`, and which totals it keeps.
fn planned(dev: &Device, case: &Case) -> Result<(KernelShape, Keeps), TuneError> {
    let plan = Plan::new(&case.problem, &case.params, dev, points(&case.inputs), Forced::default())
        .map_err(|source| TuneError::Plan { case: case.label.clone(), cause: source })?;
    let (copies, keeps) = match plan.output {
        OutputStage::Totals { store: Store::Shared { copies, .. }, .. } => (copies, Keeps::Shared),
        OutputStage::Totals { store: Store::Registers, .. } => (1, Keeps::Registers),
        _ => {
            return Err(TuneError::NotTotals { problem: case.problem.name.clone(), kind: case.problem.output.kind() });
        }
    };
    let shape = KernelShape {
        block_size: plan.launch.block_size,
        points_per_thread: plan.launch.points_per_thread,
        copies,
        input_cache: plan.input_cache,
    };
    Ok((shape, keeps))
}

fn points(inputs: &Inputs) -> Points {
    Points { a: inputs.a.len() as u64, b: inputs.b.as_ref().map(|b| b.len() as u64) }
}

/// One case's walk over its shapes, every time kept.
struct Walk<'a> {
    case: &'a Case,
    keeps: Keeps,
    before: KernelShape,
    reference: Outcome,
    times: HashMap<KernelShape, Option<f64>>,
    order: Vec<KernelShape>,
}

impl<'a> Walk<'a> {
    /// The planner's shape, run once to warm the GPU, then as often as any
    /// shape near the best (the least time kept); its first result is the
    /// one every other shape must equal.
    fn start(dev: &Device, case: &'a Case, opts: &mut TuneOptions) -> Result<Walk<'a>, TuneError> {
        let (before, keeps) = planned(dev, case)?;
        let failed = |source| TuneError::Run { case: case.label.clone(), shape: before, cause: source };
        (opts.run)(case, Forced::default()).map_err(failed)?;
        let (reference, mut kernel_s) = (opts.run)(case, Forced::default()).map_err(failed)?;
        for _ in 1..opts.reps {
            kernel_s = kernel_s.min((opts.run)(case, Forced::default()).map_err(failed)?.1);
        }
        let mut walk = Walk { case, keeps, before, reference, times: HashMap::new(), order: Vec::new() };
        walk.times.insert(before, Some(kernel_s));
        walk.order.push(before);
        (opts.progress)(&format!("{}: the planner's {before}: {kernel_s:.4} s", case.label));
        Ok(walk)
    }

    /// The fastest shape timed so far.
    fn best(&self) -> (KernelShape, f64) {
        self.order
            .iter()
            .filter_map(|s| self.times[s].map(|t| (*s, t)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .expect("the planner's shape ran")
    }

    /// The kernel time of `shape` (None where it does not fit), timed once.
    fn time(&mut self, shape: KernelShape, opts: &mut TuneOptions) -> Result<Option<f64>, TuneError> {
        if let Some(&t) = self.times.get(&shape) {
            return Ok(t);
        }
        let forced = self.forced(shape);
        let best = self.best().1;
        let mut least: Option<f64> = None;
        for rep in 0..opts.reps.max(1) {
            match (opts.run)(self.case, forced) {
                Ok((outcome, kernel_s)) => {
                    if let Some(difference) = outcome.difference(&self.reference) {
                        return Err(TuneError::Disagrees { case: self.case.label.clone(), shape, difference });
                    }
                    least = Some(least.map_or(kernel_s, |l: f64| l.min(kernel_s)));
                    if rep == 0 && kernel_s > RERUN_WITHIN * best {
                        break;
                    }
                }
                // A shape the GPU cannot hold (shared memory, registers) is no candidate.
                Err(e) if matches!(*e, RunError::Gpu(GpuError::Plan(_))) => break,
                Err(e) => return Err(TuneError::Run { case: self.case.label.clone(), shape, cause: e }),
            }
        }
        let line = least.map_or("does not fit".into(), |t| format!("{t:.4} s"));
        (opts.progress)(&format!("{}: {shape}: {line}", self.case.label));
        self.times.insert(shape, least);
        self.order.push(shape);
        Ok(least)
    }

    /// The forced choices that make `shape`.
    fn forced(&self, shape: KernelShape) -> Forced {
        Forced {
            input_cache: Some(shape.input_cache),
            output: Some(match (self.keeps, shape.copies) {
                (Keeps::Registers, _) => OutputChoice::Register,
                (Keeps::Shared, 1) => OutputChoice::Op,
                (Keeps::Shared, _) => OutputChoice::Aop,
            }),
            copies: (self.keeps == Keeps::Shared && shape.copies > 1).then_some(shape.copies),
            block_size: Some(shape.block_size),
            points_per_thread: Some(shape.points_per_thread),
            test: None,
        }
    }

    /// Times the shapes not yet timed, their kernels compiled together first.
    fn time_all(&mut self, shapes: &[KernelShape], opts: &mut TuneOptions) -> Result<(), TuneError> {
        let new: Vec<Forced> = shapes.iter().filter(|s| !self.times.contains_key(s)).map(|&s| self.forced(s)).collect();
        (opts.prepare)(self.case, &new);
        for &shape in shapes {
            self.time(shape, opts)?;
        }
        Ok(())
    }

    /// Walks one knob at a time over all its values from the best shape so
    /// far, until a pass finds nothing faster.
    fn descend(&mut self, opts: &mut TuneOptions) -> Result<(), TuneError> {
        loop {
            let start = self.best().0;
            for knob in 0..4 {
                let from = self.best().0;
                let values: Vec<KernelShape> = match knob {
                    0 => INPUT_CACHES.iter().map(|&c| KernelShape { input_cache: c, ..from }).collect(),
                    1 if self.keeps == Keeps::Shared => {
                        COPIES.iter().map(|&c| KernelShape { copies: c, ..from }).collect()
                    }
                    1 => vec![],
                    2 => BLOCK_SIZES.iter().map(|&b| KernelShape { block_size: b, ..from }).collect(),
                    _ => POINTS_PER_THREAD.iter().map(|&r| KernelShape { points_per_thread: r, ..from }).collect(),
                };
                self.time_all(&values, opts)?;
            }
            if self.best().0 == start {
                return Ok(());
            }
        }
    }

    fn result(&self, planned: Timed) -> CaseResult {
        let (best, best_s) = self.best();
        CaseResult {
            label: self.case.label.clone(),
            keeps: self.keeps,
            before: Timed { shape: self.before, kernel_s: self.times[&self.before] },
            best: Timed { shape: best, kernel_s: Some(best_s) },
            planned,
            timed: self.order.iter().map(|s| Timed { shape: *s, kernel_s: self.times[s] }).collect(),
        }
    }
}

/// Runs a case on GPU `ordinal` with `streams` streams, as `twobs run` would
/// (one stream leaves the triangle's tail to a single launch: SDH at 1M
/// points ran 0.306 s there against 0.262 s on two): its result and kernel time.
pub fn on_gpu(
    ordinal: usize,
    streams: usize,
    cache: Cache,
) -> impl FnMut(&Case, Forced) -> Result<(Outcome, f64), Box<RunError>> {
    move |case, forced| {
        let opts = GpuOptions {
            gpus: Some(vec![ordinal]),
            block_points: None,
            streams,
            forced,
            pool_pairs: None,
            piece_pairs: None,
            hybrid: Hybrid::Off,
        };
        let hidden = indicatif::ProgressBar::hidden();
        let run = cuda::run(&case.problem, &case.params, &case.inputs, IndexChoice::None, &opts, &cache, &hidden)
            .map_err(|e| Box::new(RunError::Gpu(e)))?;
        Ok((run.results.merged(), run.timings.kernel_s))
    }
}

/// Compiles a case's shapes on the host's cores, for GPU `dev`.
pub fn compile_on_host(dev: Device, cache: Cache) -> impl FnMut(&Case, &[Forced]) {
    move |case, forced| cuda::compile_ahead(&case.problem, &case.params, &dev, points(&case.inputs), forced, &cache)
}
