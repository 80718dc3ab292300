//! `--verify`: a GPU result re-computed on the CPU backend, compared exactly
//! (sums to a relative 1e-6: the GPU adds in another order, and CUDA's expf and
//! friends are not correctly rounded).

use indicatif::ProgressBar;
use rand::{RngExt, SeedableRng};

use crate::backend::cpu::CpuDriver;
use crate::backend::cuda;
use crate::data::Inputs;
use crate::outcome::Outcome;
use crate::run::{RunOptions, pair_count};
use crate::spec::{Params, Problem};

/// Inputs up to this many pairs are re-computed in full.
pub const FULL_VERIFY_PAIRS: u128 = 4_000_000_000;
/// Query rows sampled beyond that.
pub const SAMPLE_ROWS: usize = 1024;

/// Compares a GPU outcome with the CPU's; Err names the first difference.
pub fn compare(gpu: &Outcome, cpu: &Outcome) -> anyhow::Result<()> {
    match (gpu, cpu) {
        (Outcome::Count(g), Outcome::Count(c)) if g != c => anyhow::bail!("count: GPU {g}, CPU {c}"),
        (Outcome::Histogram(g), Outcome::Histogram(c)) => {
            if let Some(k) = (0..g.len().max(c.len())).find(|&k| g.get(k) != c.get(k)) {
                anyhow::bail!(
                    "bucket {k}: GPU {:?}, CPU {:?} ({} buckets differ; totals {} vs {})",
                    g.get(k),
                    c.get(k),
                    (0..g.len()).filter(|&k| g.get(k) != c.get(k)).count(),
                    g.iter().sum::<u64>(),
                    c.iter().sum::<u64>()
                );
            }
        }
        (Outcome::Sum(g), Outcome::Sum(c)) => {
            if (g - c).abs() > 1e-6 * c.abs().max(f64::MIN_POSITIVE) || g.is_nan() != c.is_nan() {
                anyhow::bail!("sum: GPU {g}, CPU {c} (relative difference {:e})", (g - c).abs() / c.abs());
            }
        }
        (Outcome::Pairs(g), Outcome::Pairs(c)) => {
            let (mut g, mut c) = (g.clone(), c.clone());
            g.sort_unstable();
            c.sort_unstable();
            if g != c {
                let missing = c.iter().find(|p| g.binary_search(p).is_err());
                let extra = g.iter().find(|p| c.binary_search(p).is_err());
                let dup = g.windows(2).find(|w| w[0] == w[1]).map(|w| w[0]);
                anyhow::bail!(
                    "pairs: GPU {} ({} distinct), CPU {}; first missing on the GPU {missing:?}, first extra {extra:?}, first duplicate {dup:?}",
                    g.len(),
                    {
                        let mut d = g.clone();
                        d.dedup();
                        d.len()
                    },
                    c.len()
                );
            }
        }
        (Outcome::Knn { k, ids: gi, values: gv }, Outcome::Knn { ids: ci, values: cv, .. }) => {
            if let Some(at) = (0..gi.len().max(ci.len()))
                .find(|&x| gi.get(x) != ci.get(x) || gv.get(x).map(|v| v.to_bits()) != cv.get(x).map(|v| v.to_bits()))
            {
                let q = at / k.max(&1);
                anyhow::bail!(
                    "query {q}, rank {}: GPU ({:?}, {:?}), CPU ({:?}, {:?})",
                    at % k.max(&1),
                    gi.get(at),
                    gv.get(at),
                    ci.get(at),
                    cv.get(at)
                );
            }
        }
        (g, c) if std::mem::discriminant(g) != std::mem::discriminant(c) => {
            anyhow::bail!("the GPU returned a {}, the CPU a {}", g.kind(), c.kind())
        }
        _ => {}
    }
    Ok(())
}

/// Re-computes on the CPU: in full up to [`FULL_VERIFY_PAIRS`], else the
/// problem between [`SAMPLE_ROWS`] random query rows and the whole other set,
/// on both backends. Returns what was compared.
pub fn verify(
    problem: &Problem,
    params: &Params,
    inputs: &Inputs,
    gpu: &Outcome,
    opts: &RunOptions,
    threads: usize,
) -> anyhow::Result<String> {
    let pairs = pair_count(problem, inputs);
    if pairs <= FULL_VERIFY_PAIRS {
        let cpu = CpuDriver::compile(problem, params, false)?.run(inputs, threads, &ProgressBar::hidden())?;
        compare(gpu, &cpu).map_err(|e| anyhow::anyhow!("--verify: the GPU and the CPU disagree: {e}"))?;
        return Ok(format!("all {pairs} pairs re-computed on the CPU: identical"));
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
    let mut gpu_opts = opts.gpu.clone();
    gpu_opts.block_points = None;
    let g = cuda::run(&cross, params, &sub, &gpu_opts, &ProgressBar::hidden())?.outcome;
    let c = CpuDriver::compile(&cross, params, false)?.run(&sub, threads, &ProgressBar::hidden())?;
    compare(&g, &c)
        .map_err(|e| anyhow::anyhow!("--verify (sampled rows, seed {seed}): the GPU and the CPU disagree: {e}"))?;
    Ok(format!(
        "{} sampled query rows against all {} points of the other set, on the GPU and the CPU: identical",
        rows.len(),
        inputs.other().len()
    ))
}
