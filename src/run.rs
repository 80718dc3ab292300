//! `twobs run`: inputs in, a backend chosen, the outcome translated back to
//! the user's row numbers.

use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use crate::backend::cpu::CpuDriver;
use crate::data::Inputs;
use crate::outcome::Outcome;
use crate::plan::{Visit, visit_of};
use crate::spec::{Params, Problem};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendChoice {
    Auto,
    Cuda,
    Cpu,
}

impl std::str::FromStr for BackendChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(BackendChoice::Auto),
            "cuda" => Ok(BackendChoice::Cuda),
            "cpu" => Ok(BackendChoice::Cpu),
            _ => Err(format!("unknown backend `{s}`; expected auto, cuda or cpu")),
        }
    }
}

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub backend: BackendChoice,
    /// CPU threads (0: all cores).
    pub threads: usize,
    /// CPU backend in double precision.
    pub f64: bool,
    pub quiet: bool,
}

/// Seconds spent in each stage.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Timings {
    /// Building (or finding in the cache) the driver or kernel.
    pub compile_s: f64,
    pub compute_s: f64,
    pub total_s: f64,
    pub pairs_per_s: f64,
}

/// What a run did and found.
#[derive(Debug, Clone)]
pub struct Execution {
    pub backend: &'static str,
    pub device: String,
    pub notes: Vec<String>,
    pub pairs: u128,
    pub outcome: Outcome,
    pub timings: Timings,
}

pub fn pair_count(problem: &Problem, inputs: &Inputs) -> u128 {
    let n = inputs.a.len() as u128;
    match visit_of(problem) {
        Visit::LowerTriangle => n * n.saturating_sub(1) / 2,
        Visit::AllPairs => n * n.saturating_sub(1),
        Visit::Cross => n * inputs.other().len() as u128,
    }
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

/// Runs `problem` on `inputs` on the chosen backend.
pub fn execute(problem: &Problem, params: &Params, inputs: &Inputs, opts: &RunOptions) -> anyhow::Result<Execution> {
    let start = Instant::now();
    let pairs = pair_count(problem, inputs);
    let mut notes = Vec::new();
    let backend = match opts.backend {
        BackendChoice::Cpu => BackendChoice::Cpu,
        BackendChoice::Cuda => BackendChoice::Cuda,
        BackendChoice::Auto => match crate::backend::cuda::usable() {
            Ok(()) => BackendChoice::Cuda,
            Err(why) => {
                notes.push(format!("no usable GPU ({why}): running on the CPU backend"));
                BackendChoice::Cpu
            }
        },
    };
    if backend == BackendChoice::Cuda {
        if opts.f64 {
            anyhow::bail!("--f64 is a mode of the CPU backend; use --backend cpu");
        }
        anyhow::bail!("the CUDA backend cannot run problems yet; use --backend cpu");
    }
    let threads =
        if opts.threads == 0 { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { opts.threads };
    let driver = CpuDriver::compile(problem, params, opts.f64)?;
    let bar = progress_bar(pairs, opts.quiet);
    let compute = Instant::now();
    let outcome = driver.run(inputs, threads, &bar)?;
    bar.finish_and_clear();
    let compute_s = compute.elapsed().as_secs_f64();
    Ok(Execution {
        backend: "cpu",
        device: format!(
            "{threads} CPU threads, {}{}",
            if opts.f64 { "f64 arithmetic" } else { "the spec's arithmetic" },
            if driver.cached { ", driver from the cache" } else { "" }
        ),
        notes,
        pairs,
        outcome,
        timings: Timings {
            compile_s: driver.compile_seconds,
            compute_s,
            total_s: start.elapsed().as_secs_f64(),
            pairs_per_s: pairs as f64 / compute_s.max(1e-9),
        },
    })
}
