//! `twobs run`: inputs in, a backend chosen, the outcome translated back to
//! the user's row numbers.

use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use crate::backend::cpu::CpuDriver;
use crate::backend::cuda::{self, GpuOptions, GpuTimings};
use crate::data::Inputs;
use crate::outcome::Outcome;
use crate::plan::Plan;
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
    pub gpu: GpuOptions,
    /// Re-compute on the CPU backend and fail on any difference.
    pub verify: bool,
}

/// Seconds spent in each stage.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Timings {
    /// Building (or finding in the cache) the driver or kernel.
    pub compile_s: f64,
    /// Pair computation: the CPU loop, or the GPU's upload + kernel + download.
    pub compute_s: f64,
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
    pub backend: &'static str,
    pub device: String,
    pub notes: Vec<String>,
    pub pairs: u128,
    pub outcome: Outcome,
    pub timings: Timings,
    /// The GPU plans (diagonal kernel, kernel between blocks).
    pub plans: Vec<Plan>,
    /// What --verify compared.
    pub verified: Option<String>,
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
        BackendChoice::Auto => match cuda::usable().and_then(|()| crate::backend::nvrtc::available()) {
            Ok(()) => BackendChoice::Cuda,
            Err(why) => {
                notes.push(format!("no usable GPU ({why}): running on the CPU backend"));
                BackendChoice::Cpu
            }
        },
    };
    let threads =
        if opts.threads == 0 { std::thread::available_parallelism().map_or(1, |n| n.get()) } else { opts.threads };
    let mut exec = if backend == BackendChoice::Cuda {
        if opts.f64 {
            anyhow::bail!("--f64 is a mode of the CPU backend; use --backend cpu");
        }
        let bar = progress_bar(pairs, opts.quiet);
        let run = cuda::run(problem, params, inputs, &opts.gpu, &bar)?;
        bar.finish_and_clear();
        notes.extend(run.notes.iter().cloned());
        let g = &run.timings;
        let compute_s = g.wall_s - g.compile_s;
        let pair_rate = pairs as f64 / compute_s.max(1e-9);
        let issue_rate: f64 = run.devices.iter().map(|d| d.fp32_issue_rate()).sum();
        let fp = crate::codegen::render_probe(problem, params)
            .and_then(|probe| crate::backend::nvrtc::fp_instructions(&probe, &run.devices[0].arch()))
            .ok();
        let name = &run.devices[0].name;
        Execution {
            backend: "cuda",
            device: format!(
                "{} x {name} ({}), blocks of {} points, {} stream(s) per GPU",
                run.devices.len(),
                run.devices[0].arch(),
                run.block_points,
                opts.gpu.streams.max(1)
            ),
            notes,
            pairs,
            outcome: run.outcome,
            timings: Timings {
                compile_s: g.compile_s,
                compute_s,
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
            verified: None,
        }
    } else {
        let driver = CpuDriver::compile(problem, params, opts.f64)?;
        let bar = progress_bar(pairs, opts.quiet);
        let compute = Instant::now();
        let outcome = driver.run(inputs, threads, &bar)?;
        bar.finish_and_clear();
        let compute_s = compute.elapsed().as_secs_f64();
        Execution {
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
                pairs_per_s: pairs as f64 / compute_s.max(1e-9),
                ..Default::default()
            },
            plans: vec![],
            verified: None,
        }
    };
    if opts.verify {
        if exec.backend == "cpu" {
            anyhow::bail!("--verify checks a GPU run against the CPU backend; this run is on the CPU");
        }
        let t = Instant::now();
        exec.verified = Some(crate::verify::verify(problem, params, inputs, &exec.outcome, opts, threads)?);
        exec.timings.verify_s = Some(t.elapsed().as_secs_f64());
    }
    exec.timings.total_s = start.elapsed().as_secs_f64();
    Ok(exec)
}
