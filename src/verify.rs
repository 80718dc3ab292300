//! `--verify`: a GPU result re-computed on the CPU backend and compared
//! ([`Outcome::difference`]: exact, sums to a relative 1e-6).

use indicatif::ProgressBar;
use rand::{RngExt, SeedableRng};

use crate::backend::cpu::{CpuDriver, CpuError};
use crate::backend::cuda::{self, GpuError};
use crate::cache::Cache;
use crate::data::Inputs;
use crate::index::{IndexChoice, IndexKind};
use crate::outcome::Outcome;
use crate::plan::{Points, Shape};
use crate::schedule::GpuOptions;
use crate::spec::{Params, Problem};

/// Inputs up to this many pairs are re-computed in full.
pub const FULL_VERIFY_PAIRS: u128 = 4_000_000_000;
/// Query rows sampled beyond that.
pub const SAMPLE_ROWS: usize = 1024;

#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("the GPU and the CPU disagree ({what}): {difference}")]
    Mismatch { what: String, difference: String },
    #[error(transparent)]
    Cpu(#[from] CpuError),
    #[error(transparent)]
    Gpu(#[from] GpuError),
}

/// Re-computes on the CPU: in full up to [`FULL_VERIFY_PAIRS`], else the
/// problem between [`SAMPLE_ROWS`] random query rows and the whole other set,
/// on both backends. Returns what was compared.
#[allow(clippy::too_many_arguments)]
pub fn verify(
    problem: &Problem,
    params: &Params,
    shape: &Shape,
    inputs: &Inputs,
    gpu: &Outcome,
    gpu_opts: &GpuOptions,
    index: IndexChoice,
    cache: &Cache,
    threads: usize,
) -> Result<String, VerifyError> {
    let hidden = ProgressBar::hidden();
    if shape.pairs <= FULL_VERIFY_PAIRS {
        let cpu = CpuDriver::compile(problem, params, shape, IndexKind::None, false, cache)?
            .run(inputs, None, threads, &hidden)?;
        if let Some(difference) = gpu.difference(&cpu) {
            return Err(VerifyError::Mismatch { what: format!("all {} pairs", shape.pairs), difference });
        }
        return Ok(format!("all {} pairs re-computed on the CPU: identical", shape.pairs));
    }
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let n = inputs.a.len();
    let mut rows: Vec<usize> = (0..SAMPLE_ROWS.min(n)).map(|_| rng.random_range(0..n)).collect();
    rows.sort_unstable();
    rows.dedup();
    let sample = inputs.a.subset(&rows, format!("{} rows sampled from {}", rows.len(), inputs.a.origin));
    let sub = Inputs { a: sample, b: Some(inputs.other().clone()) };
    let cross = problem.as_cross();
    let cross_shape = Shape::new(&cross, params, Points { a: rows.len() as u64, b: Some(inputs.other().len() as u64) });
    let mut opts = gpu_opts.clone();
    opts.block_points = None;
    // The GPU walks the sample as the run did: on a grid where the run could.
    let g = cuda::run(&cross, params, &sub, index, &opts, cache, &hidden)?.outcome;
    let c = CpuDriver::compile(&cross, params, &cross_shape, IndexKind::None, false, cache)?
        .run(&sub, None, threads, &hidden)?;
    if let Some(difference) = g.difference(&c) {
        return Err(VerifyError::Mismatch { what: format!("sampled rows, seed {seed}"), difference });
    }
    Ok(format!(
        "{} sampled query rows against all {} points of the other set, on the GPU and the CPU: identical",
        rows.len(),
        inputs.other().len()
    ))
}
