//! One run of a problem on one frame of sets, as the tests describe it:
//! the backend and its options in one literal, made into the library's
//! `Request` (`Request::of_columns`) and `Workers`, and run through the
//! one entry point, `run::execute`.

#![allow(dead_code, reason = "each test file uses what it needs")]

use twobs::cache::Cache;
use twobs::data::Inputs;
use twobs::index::IndexChoice;
use twobs::request::{Frame, Joined, Options, Placement, Request};
use twobs::run::{self, BackendChoice, Execution, RunError, Workers};
use twobs::schedule::GpuOptions;
use twobs::spec::{Params, Problem};

/// What a test asks of a run besides the problem and its points.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub backend: BackendChoice,
    pub threads: usize,
    pub f64: bool,
    pub quiet: bool,
    pub gpu: GpuOptions,
    pub verify: bool,
    pub index: IndexChoice,
    pub cache: Cache,
    pub ranks: Option<twobs::ranks::Handle>,
}

/// `problem` on `inputs` (whose sets carry every column it reads).
#[allow(clippy::result_large_err, reason = "the run's own error")]
pub fn execute(problem: &Problem, params: &Params, inputs: &Inputs, opts: &RunOptions) -> Result<Execution, RunError> {
    let options = Options { index: opts.index, verify: opts.verify, f64: opts.f64 };
    let request = Request::of_columns(problem.clone(), params.clone(), inputs.clone(), options)?;
    run::execute(&request, &workers(opts))
}

/// `problem` over the frames of a trajectory, each with its parameters.
#[allow(clippy::result_large_err, reason = "the run's own error")]
pub fn execute_frames(
    problem: &Problem,
    frame_params: &[Params],
    frames: &[Inputs],
    opts: &RunOptions,
) -> Result<Execution, RunError> {
    let options = Options { index: opts.index, verify: opts.verify, f64: opts.f64 };
    let frames = frame_params
        .iter()
        .zip(frames)
        .map(|(params, inputs)| Frame { params: params.clone(), inputs: inputs.clone(), shapes: None })
        .collect();
    let request = Request::host(problem.clone(), frames, Joined::default(), Placement::default(), options)?;
    run::execute(&request, &workers(opts))
}

impl RunOptions {
    pub fn options(&self) -> Options {
        Options { index: self.index, verify: self.verify, f64: self.f64 }
    }

    pub fn workers(&self) -> Workers {
        workers(self)
    }
}

fn workers(opts: &RunOptions) -> Workers {
    Workers {
        backend: opts.backend,
        threads: opts.threads,
        gpu: opts.gpu.clone(),
        progress: if opts.quiet { run::Progress::Off } else { run::Progress::Terminal },
        cache: opts.cache.clone(),
        ranks: opts.ranks.clone(),
        root_sends_points: false,
    }
}
