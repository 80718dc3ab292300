//! `twobs run`: a backend chosen, the problem computed on the inputs, and
//! (when asked) checked against the CPU backend.

use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use crate::backend::cpu::{CpuDriver, CpuError};
use crate::backend::cuda::{self, GpuError, GpuTimings};
use crate::backend::nvrtc;
use crate::cache::Cache;
use crate::codegen;
use crate::data::Inputs;
use crate::index::{self, IndexChoice, IndexError, Shapes, Summary};
use crate::outcome::Outcome;
use crate::plan::{Plan, Points, Shape};
use crate::schedule::{GpuOptions, Indexing, Schedule, ScheduleError, Workers};
use crate::spec::{Params, Problem};
use crate::verify::{self, VerifyError};

/// Which backend to run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendChoice {
    /// The GPU when one is usable, else the CPU.
    Auto,
    Cuda,
    Cpu,
}

/// The backend a run used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Cuda,
    Cpu,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Cuda => "cuda",
            Backend::Cpu => "cpu",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("f64 arithmetic is a mode of the CPU backend; this run is on the GPU")]
    F64OnGpu,
    #[error("verifying compares a GPU run with the CPU backend, and this run has no GPU: {0}")]
    VerifyNeedsGpu(String),
    #[error(transparent)]
    Gpu(#[from] GpuError),
    #[error(transparent)]
    Cpu(#[from] CpuError),
    #[error(transparent)]
    Verify(#[from] VerifyError),
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
}

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub backend: BackendChoice,
    /// CPU threads (0: all cores).
    pub threads: usize,
    /// CPU backend in double precision.
    pub f64: bool,
    pub quiet: bool,
    pub gpu: GpuOptions,
    /// Re-compute on the CPU backend and fail on any difference.
    pub verify: bool,
    /// Whether a cut-off problem visits only the pairs of neighbouring grid cells.
    pub index: IndexChoice,
    pub cache: Cache,
}

/// Seconds spent in each stage.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Timings {
    /// Building (or finding in the cache) the driver or kernel.
    pub compile_s: f64,
    /// Pair computation: the CPU loop (with the grid's making), or the GPU's
    /// upload + kernel + download.
    pub compute_s: f64,
    /// Sorting the points into the grid's cells and listing the neighbours.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index_s: Option<f64>,
    pub total_s: f64,
    pub pairs_per_s: f64,
    /// GPU stages from CUDA events, summed over streams and GPUs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuTimings>,
    /// Floating-point PTX instructions of the pair function (an estimate of the work per pair).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fp_instructions_per_pair: Option<u32>,
    /// The GPUs' peak FP32 issue rate (instructions per second).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fp32_issue_rate: Option<f64>,
    /// pairs/s x instructions per pair / issue rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fp32_issue_fraction: Option<f64>,
    /// Seconds spent re-computing on the CPU for --verify.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verify_s: Option<f64>,
}

/// What a run did and found.
#[derive(Debug, Clone)]
pub struct Execution {
    pub backend: Backend,
    pub device: String,
    pub notes: Vec<String>,
    /// Which pairs were visited and what they added up to.
    pub shape: Shape,
    /// Whether a grid found the pairs, and why.
    pub index: Summary,
    pub outcome: Outcome,
    pub timings: Timings,
    /// The GPU plans (diagonal kernel, kernel between blocks).
    pub plans: Vec<Plan>,
    /// What the schedule decided, a line a decision (`Schedule::describe`).
    pub schedule: Vec<(&'static str, String)>,
    /// What --verify compared.
    pub verified: Option<String>,
}

fn progress_bar(total: u128, quiet: bool) -> ProgressBar {
    // Only long runs get a bar; indicatif draws nothing when stderr is not a terminal.
    if quiet || total < 2_000_000_000 {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(total.min(u64::MAX as u128) as u64);
    bar.set_style(
        ProgressStyle::with_template("{spinner} {bar:40} {percent:>3}% of {human_len} pairs, {eta} left")
            .expect("valid template"),
    );
    bar
}

/// The backend `choice` resolves to on this machine, with a note when `auto` falls back.
fn backend(choice: BackendChoice, notes: &mut Vec<String>) -> Backend {
    match choice {
        BackendChoice::Cpu => Backend::Cpu,
        BackendChoice::Cuda => Backend::Cuda,
        BackendChoice::Auto => {
            match cuda::usable().map_err(|e| e.to_string()).and_then(|()| nvrtc::available().map_err(|e| e.to_string()))
            {
                Ok(()) => Backend::Cuda,
                Err(why) => {
                    notes.push(format!("no usable GPU ({why}): running on the CPU backend"));
                    Backend::Cpu
                }
            }
        }
    }
}

/// Runs `problem` on `inputs` on the chosen backend.
/// Runs every frame of a trajectory and adds their totals: counts and sums
/// over all frames (the report divides g(r) by the frames' pairs). Only
/// totals add up this way; the caller refuses frames for pairs and KNN.
pub fn execute_frames(
    problem: &Problem,
    params: &Params,
    frames: &[Inputs],
    opts: &RunOptions,
) -> Result<Execution, RunError> {
    let start = Instant::now();
    let (first, rest) = frames.split_first().expect("a run has at least one frame");
    let mut exec = execute(problem, params, first, opts)?;
    for (f, inputs) in rest.iter().enumerate() {
        let next = execute(problem, params, inputs, opts)?;
        let (Outcome::Totals(sum), Outcome::Totals(more)) = (&mut exec.outcome, &next.outcome) else {
            unreachable!("frames are refused for pairs and KNN")
        };
        sum.add(more);
        exec.shape.pairs += next.shape.pairs;
        exec.index.pairs += next.index.pairs;
        exec.index.all_pairs += next.index.all_pairs;
        let t = &mut exec.timings;
        t.compile_s += next.timings.compile_s;
        t.compute_s += next.timings.compute_s;
        t.verify_s = t.verify_s.zip(next.timings.verify_s).map(|(a, b)| a + b);
        if let Some(v) = next.verified {
            exec.verified = exec.verified.map(|mine| format!("{mine}; frame {}: {v}", f + 1));
        }
        for note in next.notes {
            if !exec.notes.contains(&note) {
                exec.notes.push(note);
            }
        }
    }
    exec.timings.pairs_per_s = exec.index.pairs as f64 / exec.timings.compute_s.max(1e-9);
    exec.timings.total_s = start.elapsed().as_secs_f64();
    Ok(exec)
}

pub fn execute(problem: &Problem, params: &Params, inputs: &Inputs, opts: &RunOptions) -> Result<Execution, RunError> {
    let start = Instant::now();
    let points = Points { a: inputs.a.len() as u64, b: inputs.b.as_ref().map(|b| b.len() as u64) };
    let shape = Shape::new(problem, params, points);
    let mut notes = Vec::new();
    let backend = backend(opts.backend, &mut notes);
    let threads =
        if opts.threads == 0 { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { opts.threads };
    if backend == Backend::Cuda && opts.f64 {
        return Err(RunError::F64OnGpu);
    }
    if backend == Backend::Cpu && opts.verify {
        let why = notes.first().cloned().unwrap_or_else(|| "the CPU backend was chosen".into());
        return Err(RunError::VerifyNeedsGpu(why));
    }
    // A grid made and then found not worth it cost its time too.
    let grid_tried = problem.cutoff.is_some() && opts.index != IndexChoice::None;
    let mut exec = match backend {
        Backend::Cuda => {
            // The GPU backend makes its grid itself: its units follow the plan's blocks.
            let bar = progress_bar(shape.pairs, opts.quiet);
            let run = cuda::run(problem, params, inputs, opts.index, &opts.gpu, &opts.cache, &bar)?;
            bar.finish_and_clear();
            notes.extend(run.notes.iter().cloned());
            let g = &run.timings;
            let compute_s = g.wall_s - g.prepare_s;
            let pair_rate = run.index.pairs as f64 / compute_s.max(1e-9);
            let issue_rate: f64 = run.devices.iter().map(|d| d.fp32_issue_rate()).sum();
            let fp = nvrtc::fp_instructions(
                &codegen::render_probe(problem, params, run.plans[0].test),
                &run.devices[0].arch(),
            )
            .ok();
            let name = &run.devices[0].name;
            Execution {
                backend,
                device: format!(
                    "{} x {name} ({}), blocks of {} points, {} stream(s) per GPU",
                    run.devices.len(),
                    run.devices[0].arch(),
                    run.block_points,
                    opts.gpu.streams.max(1)
                ),
                notes,
                shape,
                index: run.index,
                outcome: run.outcome,
                timings: Timings {
                    compile_s: g.compile_s,
                    compute_s,
                    index_s: grid_tried.then_some(g.index_s),
                    total_s: 0.0,
                    pairs_per_s: pair_rate,
                    gpu: Some(g.clone()),
                    fp_instructions_per_pair: fp,
                    fp32_issue_rate: Some(issue_rate),
                    // An integer problem does no floating-point work to compare with the FP32 rate.
                    fp32_issue_fraction: fp.filter(|&f| f > 0).map(|f| pair_rate * f as f64 / issue_rate),
                    verify_s: None,
                },
                plans: run.plans,
                schedule: run.schedule.as_ref().map(Schedule::describe).unwrap_or_default(),
                verified: None,
            }
        }
        Backend::Cpu => {
            let index_start = Instant::now();
            let workers = Workers::cpu(threads);
            let schedule = Schedule::make(problem, params, &Shapes::of(inputs), opts.index, &opts.gpu, &workers)?;
            let (grid, index) = match &schedule.indexing {
                Indexing::Brute(summary) => (None, summary.clone()),
                Indexing::Host { layout, runs } => {
                    index::sort_and_decide(layout, inputs, shape.visit, shape.pairs, opts.index, *runs)
                }
                Indexing::Device(_) => unreachable!("a schedule without GPUs sorts its grid on the host"),
            };
            let index_s = grid_tried.then(|| index_start.elapsed().as_secs_f64());
            let bar = progress_bar(index.pairs, opts.quiet);
            let driver = CpuDriver::compile(problem, params, &shape, index.index, opts.f64, &opts.cache)?;
            if let Some(why) = &driver.rebuilt {
                notes.push(format!("the cached CPU driver was built again: {why}"));
            }
            let compute = Instant::now();
            let outcome = driver.run(inputs, grid.as_ref(), threads, &bar)?;
            bar.finish_and_clear();
            let compute_s = compute.elapsed().as_secs_f64() + index_s.unwrap_or(0.0);
            let pairs = index.pairs;
            Execution {
                backend,
                device: format!(
                    "{threads} CPU threads, {}{}",
                    if opts.f64 { "f64 arithmetic" } else { "the spec's arithmetic" },
                    if driver.cached { ", driver from the cache" } else { "" }
                ),
                notes,
                shape,
                index,
                outcome,
                timings: Timings {
                    compile_s: driver.compile_seconds,
                    compute_s,
                    index_s,
                    pairs_per_s: pairs as f64 / compute_s.max(1e-9),
                    ..Default::default()
                },
                plans: vec![],
                schedule: schedule.describe(),
                verified: None,
            }
        }
    };
    if opts.verify {
        let t = Instant::now();
        exec.verified = Some(verify::verify(
            problem,
            params,
            &shape,
            inputs,
            &exec.outcome,
            &opts.gpu,
            opts.index,
            &opts.cache,
            threads,
        )?);
        exec.timings.verify_s = Some(t.elapsed().as_secs_f64());
    }
    exec.timings.total_s = start.elapsed().as_secs_f64();
    Ok(exec)
}
