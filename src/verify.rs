//! `--verify`: a run re-computed and compared ([`Outcome::difference`]:
//! exact, sums to a relative 1e-6): a GPU run against the CPU backend, a
//! CPU run on a grid against every pair. And the promise check: a spec's
//! promises (its cutoff, its key map) sampled before a run relies on them.

use indicatif::ProgressBar;
use rand::{RngExt, SeedableRng};

use crate::backend::cpu::{Alone, CpuDriver, CpuError};
use crate::backend::cuda::{self, GpuError};
use crate::cache::Cache;
use crate::data::{Inputs, PointSet, short};
use crate::index::{self, IndexChoice, IndexKind, Shapes};
use crate::outcome::Outcome;
use crate::plan::{Points, Shape};
use crate::schedule::{GpuOptions, Indexing, Schedule, ScheduleError, Workers};
use crate::spec::{CutoffOver, Element, Params, Problem};

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
            .run(inputs, None, threads, &hidden);
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
            cuda::run(&cross, params, &sub, index, &opts, cache, &hidden)?.outcome
        }
        Under::Cpu { .. } => cpu_on_grid(&cross, params, &sub, gpu_opts, cache, threads, f64_mode)?,
    };
    let every = CpuDriver::compile(&cross, params, &cross_shape, IndexKind::None, f64_mode, cache)?
        .run(&sub, None, threads, &hidden);
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
    Ok(driver.run(inputs, grid.as_ref(), threads, &ProgressBar::hidden()))
}

/// Random pairs of the data the promise check evaluates.
const PROMISE_PAIRS: usize = 4096;
/// Points each moved a little past the cutoff, along each covered component.
const PROMISE_POINTS: usize = 256;
/// A pair's value may fall below its separation by rounding: a few units in
/// the last place of the value, and of the coordinates it is a difference
/// of (a minimum image in a box of length 1 loses the digits of 1). Below it
/// by more than this share of both, the promise is broken.
const KNN_SLACK: f64 = 1.0 / (1u64 << 20) as f64;

/// The promises a run relies on: `cutoff` where it may walk a grid, `key`
/// where the spec declares a key map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Promises {
    pub cutoff: bool,
    pub key: bool,
}

/// One evaluated pair: which points, and how far apart in each covered
/// component (the minimum image's, in a periodic box).
struct Probe {
    /// Row of set A.
    own: usize,
    partner: Partner,
    /// The separation along each covered component.
    apart: Vec<f64>,
}

enum Partner {
    /// Row of the other set.
    Row(usize),
    /// Row `own` of set A moved by `by` along covered component `along`.
    Moved { along: usize, by: f64 },
}

/// Samples `problem`'s promises on `inputs` before a run relies on them:
/// random pairs of the data, and sampled points each paired with copies of
/// itself moved just past the cutoff (the pairs a grid skips first) along
/// each covered component, are evaluated alone in the run's arithmetic. A
/// pair past the cutoff must add nothing (a KNN value be at least the
/// separation in every covered component), and with a key map, every value
/// must be map(key) bit for bit, map non-decreasing over the keys met. A
/// broken promise is an error naming the pair; otherwise returns what was
/// checked.
pub fn promises(
    problem: &Problem,
    params: &Params,
    inputs: &Inputs,
    check: Promises,
    f64_mode: bool,
    cache: &Cache,
) -> Result<String, VerifyError> {
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let cutoff = problem.cutoff.as_ref().filter(|_| check.cutoff);
    let components = problem.input.components();
    let over: Vec<usize> = match (cutoff.map(|c| &c.over), &problem.input.element) {
        (None, _) => Vec::new(),
        (Some(CutoffOver::Coordinates), Element::Vector { dims, .. }) => (0..*dims as usize).collect(),
        (Some(CutoffOver::Coordinates), Element::Record { .. }) => {
            unreachable!("the spec reader asks records for `over`")
        }
        (Some(CutoffOver::Fields(names)), _) => names
            .iter()
            .map(|n| components.iter().position(|c| &c.name == n).expect("the spec reader checked the names"))
            .collect(),
    };
    let lengths: Option<[f64; 3]> = problem.periodic_box(params).map(|(_, b)| b.lengths);
    let other = inputs.other();
    let sets: Vec<&PointSet> = std::iter::once(&inputs.a).chain(inputs.b.as_ref()).collect();
    let extent: Vec<f64> = over
        .iter()
        .map(|&c| {
            let (lo, hi) = sets
                .iter()
                .map(|s| s.columns[c].min_max())
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), (a, b)| (l.min(a), h.max(b)));
            hi - lo
        })
        .collect();
    // The separation along covered component k, the minimum image's in a box.
    let apart = |k: usize, x: f64, y: f64| -> f64 {
        let d = x - y;
        match lengths {
            Some(l) if over[k] < 3 => (d - l[over[k]] * (d / l[over[k]]).round()).abs(),
            _ => d.abs(),
        }
    };
    // The largest coordinate (or box length) of a covered component: the
    // scale of a separation's rounding.
    let scale = over
        .iter()
        .map(|&c| {
            let length = lengths.filter(|_| c < 3).map_or(0.0, |l| l[c]);
            sets.iter().map(|s| s.columns[c].min_max()).fold(length, |m, (lo, hi)| m.max(lo.abs()).max(hi.abs()))
        })
        .fold(0.0, f64::max);
    let value = cutoff.and_then(|c| c.value.as_ref()).map(|v| params.eval(v).as_f64());
    // Past this in a component a grid may skip the pair (index::fit_axes's least cell width).
    let least = |k: usize| -> f64 {
        let v = value.unwrap_or(0.0);
        if components[over[k]].scalar.is_integer() {
            v.floor() + 1.0
        } else {
            v * (1.0 + 1.0 / 1024.0) + extent[k] / (1u64 << 20) as f64
        }
    };

    let mut probes: Vec<Probe> = Vec::new();
    let n = inputs.a.len();
    let one_set = inputs.b.is_none();
    for _ in 0..PROMISE_PAIRS {
        let (i, j) = (rng.random_range(0..n), rng.random_range(0..other.len()));
        if one_set && i == j {
            continue;
        }
        let d = over
            .iter()
            .enumerate()
            .map(|(k, &c)| apart(k, inputs.a.columns[c].get_f64(i), other.columns[c].get_f64(j)));
        probes.push(Probe { own: i, partner: Partner::Row(j), apart: d.collect() });
    }
    let real = probes.len();
    if cutoff.is_some() {
        for _ in 0..PROMISE_POINTS.min(n) {
            let i = rng.random_range(0..n);
            for (k, &c) in over.iter().enumerate() {
                // Just past the grid's reach, then farther; for KNN, a spread of
                // scales. And nearly the data's extent: a function that wraps
                // its space without declaring a periodic box finds such a pair close.
                let steps: Vec<f64> = match value {
                    Some(_) => [1.0 + 1.0 / 256.0, 1.5, 3.0]
                        .iter()
                        .map(|f| f * least(k))
                        .chain([extent[k] - least(k) / 2.0])
                        .collect(),
                    None => {
                        [1.0 / 1024.0, 1.0 / 64.0, 0.25, 1.0 - 1.0 / 1024.0].iter().map(|f| f * extent[k]).collect()
                    }
                };
                for by in steps.into_iter().flat_map(|s| [s, -s]) {
                    let x = inputs.a.columns[c].get_f64(i);
                    let mut moved = inputs.a.columns[c].clone_row(i);
                    moved.set_f64(0, x + by);
                    let d = apart(k, moved.get_f64(0), x);
                    let half = lengths.filter(|_| c < 3).map_or(f64::INFINITY, |l| l[c] / 2.0);
                    // Rounding may have moved it less; a box's far half is nearer again.
                    if d.is_nan() || d <= 0.0 || (value.is_some() && d <= least(k)) || d >= half {
                        continue;
                    }
                    let mut a = vec![0.0; over.len()];
                    a[k] = d;
                    probes.push(Probe {
                        own: i,
                        partner: Partner::Moved { along: k, by: moved.get_f64(0) - x },
                        apart: a,
                    });
                }
            }
        }
    }

    // Evaluate: the real pairs against the other set, the moved ones against copies of set A's rows.
    let params_shape =
        Shape::new(problem, params, Points { a: n as u64, b: inputs.b.as_ref().map(|b| b.len() as u64) });
    let driver = CpuDriver::compile(problem, params, &params_shape, IndexKind::None, f64_mode, cache)?;
    let own_rows: Vec<usize> = probes.iter().map(|p| p.own).collect();
    let own = inputs.a.subset(&own_rows, "sampled".into());
    let partner_rows: Vec<usize> = probes
        .iter()
        .map(|p| match p.partner {
            Partner::Row(j) => j,
            Partner::Moved { .. } => p.own,
        })
        .collect();
    let mut moved = inputs.a.subset(&partner_rows[real..], "moved".into());
    for (m, p) in probes[real..].iter().enumerate() {
        let Partner::Moved { along, by } = p.partner else { unreachable!("real pairs come first") };
        let c = over[along];
        let x = moved.columns[c].get_f64(m);
        moved.columns[c].set_f64(m, x + by);
    }
    let partners = other.subset(&partner_rows[..real], "sampled".into());
    let pairs =
        |from: usize, count: usize| -> Vec<[u32; 2]> { (0..count).map(|m| [(from + m) as u32, m as u32]).collect() };
    let mut alone = driver.pairs_alone(&own, &partners, &pairs(0, real));
    let more = driver.pairs_alone(&own, &moved, &pairs(real, probes.len() - real));
    extend(&mut alone, more);

    // Names pair m: its rows, points and separation.
    let describe = |m: usize| -> String {
        let p = &probes[m];
        let point = |s: &PointSet, i: usize| -> String {
            format!("({})", s.columns.iter().take(components.len()).map(|c| c.show(i)).collect::<Vec<_>>().join(", "))
        };
        let own_text = format!("row {} of {} {}", inputs.a.original_row(p.own as u64), inputs.a.origin, point(&own, m));
        let partner = match p.partner {
            Partner::Row(j) => {
                format!("row {} of {} {}", other.original_row(j as u64), other.origin, point(&partners, m))
            }
            Partner::Moved { along, by } => format!(
                "the same point moved by {} along {} to {}",
                short(by),
                components[over[along]].name,
                point(&moved, m - real)
            ),
        };
        let far = p
            .apart
            .iter()
            .enumerate()
            .map(|(k, d)| format!("{} {}", components[over[k]].name, short(*d)))
            .collect::<Vec<_>>()
            .join(", ");
        if over.is_empty() {
            format!("{own_text} and {partner}")
        } else {
            format!("{own_text} and {partner} (apart: {far})")
        }
    };
    let spec = &problem.origin;
    let mut far_pairs = 0;
    if let Some(c) = cutoff {
        for (m, p) in probes.iter().enumerate() {
            match value {
                Some(_) => {
                    if !p.apart.iter().enumerate().any(|(k, &d)| d > least(k)) {
                        continue;
                    }
                    far_pairs += 1;
                    if alone.adds[m] {
                        return Err(VerifyError::BrokenPromise(format!(
                            "{spec}: its cutoff {} promises that a pair farther apart than that in a component adds nothing, but {} adds to the output (its value {}); a grid would leave such pairs out. Fix the cutoff or the pair function, or run every pair (--index none)",
                            params.describe(c.value.as_ref().expect("a value")),
                            describe(m),
                            short(alone.value[m])
                        )));
                    }
                }
                None => {
                    let reach = p.apart.iter().copied().fold(0.0, f64::max);
                    far_pairs += 1;
                    if alone.value[m] < reach - KNN_SLACK * (reach + scale) {
                        return Err(VerifyError::BrokenPromise(format!(
                            "{spec}: <cutoff/> promises that a pair's value is at least its separation in each component, but {} has the value {}, below {}; a search of rings would stop too soon. Fix the pair function, or search every pair (--index none)",
                            describe(m),
                            alone.value[m],
                            short(reach)
                        )));
                    }
                }
            }
        }
    }
    let key = problem.function.key.as_ref().filter(|_| check.key);
    if let Some(k) = key {
        if let Some(m) = (0..probes.len()).find(|&m| !alone.same[m]) {
            return Err(VerifyError::BrokenPromise(format!(
                "{spec}: key=\"{}\" map=\"{}\" promise that {}(a, b) is {}({}(a, b)) bit for bit, but for {} the value is {} and the map of the key {} is {}. Fix the key or the map, or drop them",
                k.key,
                k.map,
                problem.function.name,
                k.map,
                k.key,
                describe(m),
                alone.value[m],
                alone.key[m],
                alone.mapped[m]
            )));
        }
        let mut order: Vec<usize> = (0..probes.len()).filter(|&m| !alone.key[m].is_nan()).collect();
        order.sort_by(|&x, &y| alone.key[x].total_cmp(&alone.key[y]));
        if let Some(w) =
            order.windows(2).find(|w| alone.key[w[0]] < alone.key[w[1]] && alone.mapped[w[0]] > alone.mapped[w[1]])
        {
            return Err(VerifyError::BrokenPromise(format!(
                "{spec}: map=\"{}\" must not decrease, but the key {} of {} maps to {}, more than the map {} of the larger key {} of {}. Fix the map, or drop key and map",
                k.map,
                alone.key[w[0]],
                describe(w[0]),
                alone.mapped[w[0]],
                alone.mapped[w[1]],
                alone.key[w[1]],
                describe(w[1])
            )));
        }
    }
    let mut kept = Vec::new();
    if cutoff.is_some() {
        kept.push(match value {
            Some(_) => format!("{far_pairs} pairs past the cutoff add nothing"),
            None => format!("{far_pairs} values are at least their separations"),
        });
    }
    if key.is_some() {
        kept.push(format!("{} values are the map of their keys, which never decreases", probes.len()));
    }
    Ok(format!("{spec}: its promises hold on a sample (seed {seed}): {}", kept.join("; ")))
}

/// `more` appended to `all`.
fn extend(all: &mut Alone, more: Alone) {
    all.value.extend(more.value);
    all.adds.extend(more.adds);
    all.key.extend(more.key);
    all.mapped.extend(more.mapped);
    all.same.extend(more.same);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Column;

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
