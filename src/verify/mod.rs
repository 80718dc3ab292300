//! `--verify`: a run re-computed and compared ([`Outcome::difference`]:
//! exact, sums to a relative 1e-6): a GPU run against the CPU backend, a
//! CPU run on a grid against every pair. And the promise check: a spec's
//! promises (its cutoff, its key map) sampled before a run relies on them.

mod promises;

pub use promises::{Promises, promises};

use indicatif::ProgressBar;
use rand::{RngExt, SeedableRng};

use crate::backend::cpu::{CpuDriver, CpuError};
use crate::backend::cuda::{self, GpuError};
use crate::cache::Cache;
use crate::data::Inputs;
use crate::data::Shapes;
use crate::index::{self, IndexChoice, IndexKind};
use crate::outcome::Outcome;
use crate::plan::{Points, Shape};
use crate::schedule::{GpuOptions, Indexing, Schedule, ScheduleError, Workers};
use crate::spec::{Params, Problem};

/// Inputs up to this many pairs are re-computed in full against a GPU run.
pub const FULL_VERIFY_PAIRS: u128 = 4_000_000_000;
/// Query rows sampled beyond that.
pub const SAMPLE_ROWS: usize = 1024;
/// A CPU run up to this many pairs is re-computed in full, pair by pair; past
/// it, sampled rows make about this many pairs (every pair on the CPU is
/// what the run's grid saved).
pub const CPU_VERIFY_PAIRS: u128 = 1 << 26;

#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("the {what} disagree ({which}): {difference}")]
    Mismatch { what: &'static str, which: String, difference: String },
    #[error("{0}")]
    BrokenPromise(String),
    #[error(transparent)]
    Cpu(#[from] CpuError),
    #[error(transparent)]
    Gpu(#[from] GpuError),
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
}

/// The run under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Under {
    /// The GPU backend: checked against the CPU backend.
    Gpu,
    /// The CPU backend with this index (in f64 mode or not): a grid's run
    /// is checked against every pair.
    Cpu { index: IndexKind, f64_mode: bool },
}

impl Under {
    fn what(self) -> &'static str {
        match self {
            Under::Gpu => "GPU and the CPU",
            Under::Cpu { .. } => "grid and every pair on the CPU",
        }
    }
}

/// Re-computes `run` (the outcome of `under`) and compares. A GPU run: on
/// the CPU, in full up to [`FULL_VERIFY_PAIRS`], else the problem between
/// [`SAMPLE_ROWS`] random query rows and the other set, on both backends. A
/// CPU run on a grid: against every pair, in full up to [`CPU_VERIFY_PAIRS`],
/// else on sampled rows, the grid's walk against every pair. Sampled rows
/// never meet themselves: with one set they leave the other side. Returns
/// what was compared.
#[allow(clippy::too_many_arguments)]
pub fn verify(
    problem: &Problem,
    params: &Params,
    shape: &Shape,
    inputs: &Inputs,
    run: &Outcome,
    under: Under,
    gpu_opts: &GpuOptions,
    index: IndexChoice,
    cache: &Cache,
    threads: usize,
) -> Result<String, VerifyError> {
    let hidden = ProgressBar::hidden();
    let f64_mode = matches!(under, Under::Cpu { f64_mode: true, .. });
    let mismatch = |which: String, difference: String| VerifyError::Mismatch { what: under.what(), which, difference };
    let (full, rows) = match under {
        Under::Cpu { index: IndexKind::None, .. } => {
            return Ok(
                "the run visited every pair on the CPU backend, which is the reference: nothing else to compare".into(),
            );
        }
        Under::Gpu => (shape.pairs <= FULL_VERIFY_PAIRS, SAMPLE_ROWS),
        Under::Cpu { .. } => {
            let per_row = inputs.other().len().max(1) as u128;
            (shape.pairs <= CPU_VERIFY_PAIRS, (CPU_VERIFY_PAIRS / per_row).clamp(16, SAMPLE_ROWS as u128) as usize)
        }
    };
    if full {
        let every = CpuDriver::compile(problem, params, shape, IndexKind::None, f64_mode, cache)?
            .run(inputs, None, threads, &hidden)?;
        if let Some(difference) = run.difference(&every) {
            return Err(mismatch(format!("all {} pairs", shape.pairs), difference));
        }
        return Ok(match under {
            Under::Gpu => format!("all {} pairs re-computed on the CPU: identical", shape.pairs),
            Under::Cpu { .. } => {
                format!("all {} pairs re-computed on the CPU, every pair without the grid: identical", shape.pairs)
            }
        });
    }
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let (sub, sampled) = sample_rows(inputs, rows, &mut rng);
    let cross = problem.as_cross();
    let cross_shape = Shape::new(&cross, params, Points { a: sampled as u64, b: Some(sub.other().len() as u64) });
    let tested = match under {
        // The GPU walks the sample as the run did: on a grid where the run could.
        Under::Gpu => {
            let mut opts = gpu_opts.clone();
            opts.block_points = None;
            cuda::run(&cross, params, &sub, index, &opts, cache, &hidden)?.results.merged()
        }
        Under::Cpu { .. } => cpu_on_grid(&cross, params, &sub, gpu_opts, cache, threads, f64_mode)?,
    };
    let every = CpuDriver::compile(&cross, params, &cross_shape, IndexKind::None, f64_mode, cache)?
        .run(&sub, None, threads, &hidden)?;
    if let Some(difference) = tested.difference(&every) {
        return Err(mismatch(format!("sampled rows, seed {seed}"), difference));
    }
    let others = match &inputs.b {
        Some(b) => format!("all {} points of {}", b.len(), b.origin),
        None => format!("the {} other points (the sampled rows left out)", sub.other().len()),
    };
    Ok(match under {
        Under::Gpu => format!("{sampled} sampled query rows against {others}, on the GPU and the CPU: identical"),
        Under::Cpu { .. } => {
            format!("{sampled} sampled query rows against {others}, on the grid and every pair, on the CPU: identical")
        }
    })
}

/// About `count` random rows of set A as a set of their own, against the
/// other set; with one set, the other side leaves the sampled rows out, so
/// that no point meets itself (a pair the run never makes, and one where a
/// singular pair function gives NaN). Returns the inputs and the rows taken.
fn sample_rows(inputs: &Inputs, count: usize, rng: &mut rand::rngs::StdRng) -> (Inputs, usize) {
    let n = inputs.a.len();
    let mut rows: Vec<usize> = (0..count.min(n)).map(|_| rng.random_range(0..n)).collect();
    rows.sort_unstable();
    rows.dedup();
    // Another set, or the rows of this one that were not sampled (one row at least stays).
    if inputs.b.is_none() && rows.len() == n {
        rows.pop();
    }
    let sample = inputs.a.subset(&rows, format!("{} rows sampled from {}", rows.len(), inputs.a.origin));
    let other = match &inputs.b {
        Some(b) => b.clone(),
        None => {
            let rest: Vec<usize> = (0..n).filter(|i| rows.binary_search(i).is_err()).collect();
            inputs.a.subset(&rest, format!("the rows of {} not sampled", inputs.a.origin))
        }
    };
    let taken = rows.len();
    (Inputs { a: sample, b: Some(other) }, taken)
}

/// `problem` on the CPU backend on the grid (as `--index grid` runs it).
fn cpu_on_grid(
    problem: &Problem,
    params: &Params,
    inputs: &Inputs,
    gpu_opts: &GpuOptions,
    cache: &Cache,
    threads: usize,
    f64_mode: bool,
) -> Result<Outcome, VerifyError> {
    let points = Points { a: inputs.a.len() as u64, b: inputs.b.as_ref().map(|b| b.len() as u64) };
    let shape = Shape::new(problem, params, points);
    let workers = Workers::cpu(threads);
    let schedule = Schedule::make(problem, params, &Shapes::of(inputs), IndexChoice::Grid, gpu_opts, &workers)?;
    let (grid, summary) = match &schedule.indexing {
        Indexing::Brute(summary) => (None, summary.clone()),
        Indexing::Host { layout, runs } => {
            index::sort_and_decide(layout, inputs, shape.visit, shape.pairs, IndexChoice::Grid, *runs)
        }
        Indexing::Device(_) => unreachable!("a schedule without GPUs sorts its grid on the host"),
    };
    let driver = CpuDriver::compile(problem, params, &shape, summary.index, f64_mode, cache)?;
    Ok(driver.run(inputs, grid.as_ref(), threads, &ProgressBar::hidden())?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::{Column, PointSet};

    /// Issue 30, item 5: sampled rows met themselves on the other side.
    #[test]
    fn sampled_rows_never_meet_themselves() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(rand::rng().random());
        for n in [1usize, 2, 5, 1500] {
            // Each point's x is its row, so the other side says which rows it holds.
            let xs: Vec<f32> = (0..n).map(|i| i as f32 + rng.random::<f32>() / 2.0).collect();
            let set = PointSet { columns: vec![Column::F32(xs.clone())], origin: "test".into(), rows: None };
            let (sub, rows) = sample_rows(&Inputs { a: set.clone(), b: None }, 1024, &mut rng);
            let Some(Column::F32(other)) = sub.b.as_ref().map(|b| &b.columns[0]) else { panic!("another side") };
            let Column::F32(sampled) = &sub.a.columns[0] else { panic!("f32") };
            assert_eq!(sampled.len(), rows);
            assert!(!other.is_empty() && rows + other.len() == n, "n = {n}: {rows} rows and {} others", other.len());
            assert!(sampled.iter().all(|x| !other.contains(x)), "n = {n}: a sampled row on the other side");
            // Two sets: the other is B, whole.
            let (sub, _) = sample_rows(&Inputs { a: set.clone(), b: Some(set.clone()) }, 1024, &mut rng);
            assert_eq!(sub.b.unwrap().len(), n);
        }
    }
}
