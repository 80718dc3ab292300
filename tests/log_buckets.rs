//! Log-spaced buckets from the bits of a key or value (src/stage/bucket_table.rs,
//! issue 51) on adversarial pairs: for every edge, pairs whose distance is
//! exactly the edge, a few floats below it and above it, along an axis and
//! across two, among fresh random points; counted by every index (every pair,
//! the grid, the cell hierarchy) on the CPU backend, and on the GPU where one
//! is usable, against a direct count over every pair written here in Rust's
//! f32 arithmetic (IEEE, as the snippets'). Counts must be equal, bucket for
//! bucket; each run's totals are checked whole (a bucket no pair reaches must
//! read 0). The seed is printed (TWOBS_TEST_SEED repeats it).

mod support;

use rand::{RngExt, SeedableRng};
use support::RunOptions;
use twobs::cache::Cache;
use twobs::data::{Column, Inputs, PointSet};
use twobs::index::IndexChoice;
use twobs::outcome::{Outcome, Totals};
use twobs::problems::built_in;
use twobs::run::BackendChoice;
use twobs::schedule::GpuOptions;
use twobs::spec::{Output, Params, Problem, Spacing};
use twobs::stage::contribution::{axis_edges, log_edges};

fn seed() -> u64 {
    let s = std::env::var("TWOBS_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    println!("TWOBS_TEST_SEED={s}");
    s
}

fn options(backend: BackendChoice, index: IndexChoice) -> RunOptions {
    RunOptions {
        backend,
        threads: 2,
        f64: false,
        quiet: true,
        gpu: GpuOptions { streams: 1, ..Default::default() },
        verify: false,
        index,
        cache: Cache::at(concat!(env!("CARGO_TARGET_TMPDIR"), "/twobs-cache")),
        ranks: None,
    }
}

/// The backends to run: the CPU, and the GPU where one is usable (said once).
fn backends() -> Vec<BackendChoice> {
    let gpu = twobs::backend::cuda::usable()
        .map_err(|e| e.to_string())
        .and_then(|()| twobs::backend::cuda::nvrtc::available().map_err(|e| e.to_string()));
    match gpu {
        Ok(()) => vec![BackendChoice::Cpu, BackendChoice::Cuda],
        Err(why) => {
            println!("GPU cases skipped: no GPU here ({why})");
            vec![BackendChoice::Cpu]
        }
    }
}

fn set(points: &[[f32; 3]]) -> PointSet {
    let columns: Vec<Column> = (0..3).map(|c| Column::F32(points.iter().map(|p| p[c]).collect())).collect();
    PointSet { columns, origin: "test".into(), rows: None }
}

fn up(x: f32, n: i32) -> f32 {
    f32::from_bits((x.to_bits() as i64 + n as i64) as u32)
}

/// Random points, and for each of `separations` (each edge and the floats
/// around it) a pair that far apart: along one axis from a point with that
/// coordinate 0 (so the difference is exact: the distance is the edge
/// itself), along one axis from a random point (the difference rounds), and
/// across two axes (a key that is no float's square).
fn adversarial(rng: &mut rand::rngs::StdRng, separations: &[f32], random: usize) -> Vec<[f32; 3]> {
    let (a, b) = adversarial_pairs(rng, separations, random);
    a.into_iter().chain(b).collect()
}

/// The same, the first point of each pair in one set and the second in another.
fn adversarial_pairs(
    rng: &mut rand::rngs::StdRng,
    separations: &[f32],
    random: usize,
) -> (Vec<[f32; 3]>, Vec<[f32; 3]>) {
    let mut p: Vec<[f32; 3]> = (0..random).map(|_| [0, 1, 2].map(|_| rng.random_range(0.0f32..1.0))).collect();
    let mut q: Vec<[f32; 3]> = (0..random / 2).map(|_| [0, 1, 2].map(|_| rng.random_range(0.0f32..1.0))).collect();
    for &d in separations {
        let axis = rng.random_range(0..3usize);
        let mut a = [0, 1, 2].map(|_| rng.random_range(0.0f32..1.0));
        a[axis] = 0.0;
        let mut b = a;
        b[axis] = d;
        p.push(a);
        q.push(b);
        let a = [0, 1, 2].map(|_| rng.random_range(0.0f32..0.5));
        let mut b = a;
        b[axis] = a[axis] + d;
        p.push(a);
        q.push(b);
        let (u, v) = (axis, (axis + 1) % 3);
        let t = rng.random_range(0.0f32..1.0);
        let mut b = a;
        b[u] = a[u] + d * t.sqrt();
        b[v] = a[v] + d * (1.0 - t).sqrt();
        p.push(a);
        q.push(b);
    }
    (p, q)
}

/// Each edge, and the floats 1 and 2 below and above it.
fn around(edges: &[f32]) -> Vec<f32> {
    edges.iter().flat_map(|&e| (-2..=2).map(move |n| up(e, n))).collect()
}

/// distance.cu's distance in f32, step by step.
fn distance(a: &[f32; 3], b: &[f32; 3]) -> f32 {
    let d = [a[0] - b[0], a[1] - b[1], a[2] - b[2]];
    let k = d[2].mul_add(d[2], d[1].mul_add(d[1], d[0] * d[0]));
    (if k > 0.0 { k } else { 0.0 }).sqrt()
}

/// The bucket of `v` among log-spaced f32 `edges`: E_k <= v < E_k+1.
fn bucket(v: f32, edges: &[f32]) -> Option<usize> {
    (v >= edges[0] && v < edges[edges.len() - 1]).then(|| edges.partition_point(|e| *e <= v) - 1)
}

fn counts(outcome: &Outcome) -> Vec<u64> {
    match outcome {
        Outcome::Totals(Totals::Counts(c)) => c.clone(),
        other => panic!("a count, not {}", other.kind()),
    }
}

fn f32_edges(problem: &Problem, params: &Params) -> Vec<f32> {
    log_edges(problem, params).iter().map(|v| v.as_f64() as f32).collect()
}

/// Pairs whose distance is (or lies a float or two from) each edge, how many
/// of them lie exactly on one, below one and above one.
fn near_edges(values: impl Iterator<Item = f32>, edges: &[f32]) -> [usize; 3] {
    let mut seen = [0; 3];
    for v in values {
        for &e in edges {
            if v == e {
                seen[0] += 1;
            } else if v < e && v >= up(e, -2) {
                seen[1] += 1;
            } else if v > e && v <= up(e, 2) {
                seen[2] += 1;
            }
        }
    }
    seen
}

#[test]
fn log_spaced_distance_buckets_equal_a_direct_count_on_pairs_at_every_edge() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let sdh = built_in("sdh").unwrap().with_spacing(Spacing::Log).unwrap();
    let two = sdh.with_sets(2).unwrap();
    let cases: [(&Problem, &[&str]); 4] = [
        (&sdh, &["bins=20", "r_min=0.001", "r_max=0.5"]),
        (&sdh, &["bins=37", "r_min=0.01", "r_max=1.7"]),
        (&sdh, &["bins=3", "r_min=0.3", "r_max=0.31"]),
        (&two, &["bins=20", "r_min=0.001", "r_max=0.5"]),
    ];
    let backends = backends();
    for (problem, params) in cases {
        let params = problem.bind(&params.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        let edges = f32_edges(problem, &params);
        let (a, b) = match problem.input.sets {
            twobs::spec::Sets::Two => {
                let (a, b) = adversarial_pairs(&mut rng, &around(&edges), 300);
                (a, Some(b))
            }
            _ => (adversarial(&mut rng, &around(&edges), 300), None),
        };
        let mut want = vec![0u64; edges.len() - 1];
        let mut values = Vec::new();
        let mut add = |p: &[f32; 3], q: &[f32; 3]| {
            let v = distance(p, q);
            values.push(v);
            if let Some(k) = bucket(v, &edges) {
                want[k] += 1;
            }
        };
        match &b {
            None => (0..a.len()).for_each(|i| (0..i).for_each(|j| add(&a[i], &a[j]))),
            Some(b) => a.iter().for_each(|p| b.iter().for_each(|q| add(p, q))),
        }
        let seen = near_edges(values.iter().copied(), &edges);
        assert!(seen.iter().all(|&n| n >= edges.len()), "pairs on, below, above the edges: {seen:?}");
        let inputs = Inputs { a: set(&a), b: b.as_ref().map(|b| set(b)) };
        for &backend in &backends {
            for index in [IndexChoice::None, IndexChoice::Grid, IndexChoice::Cells] {
                let run = support::execute(problem, &params, &inputs, &options(backend, index)).unwrap();
                assert_eq!(
                    counts(&run.outcome),
                    want,
                    "{params:?} {backend:?}, {index:?}, tests {:?}",
                    run.plans.iter().map(|p| p.test).collect::<Vec<_>>()
                );
            }
        }
    }
}

/// rp_pi's and s_mu's two values, as problems/los.cu computes them (open box).
fn los_values(name: &str, a: &[f32; 3], b: &[f32; 3]) -> (f32, f32) {
    let d = [a[0] - b[0], a[1] - b[1], a[2] - b[2]];
    let across = d[1].mul_add(d[1], d[0] * d[0]);
    match name {
        "ddrppi" => (across.sqrt(), d[2].abs()),
        _ => {
            let s = d[2].mul_add(d[2], across).sqrt();
            (s, if s > 0.0 { d[2].abs() / s } else { 0.0 })
        }
    }
}

/// A linear axis's bucket of `v`: floor((v - lo) * scale) in f32, as bucket.cu's.
fn linear_bucket(v: f32, edges: &[f32]) -> Option<usize> {
    let bins = edges.len() - 1;
    let (lo, hi) = (edges[0], edges[bins]);
    let scale = (bins as f64 / (hi as f64 - lo as f64)) as f32;
    let x = (v - lo) * scale;
    (v >= lo && x < bins as f32).then_some(x as usize)
}

#[test]
fn log_spaced_first_axes_equal_a_direct_count_on_pairs_at_every_edge() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let cases: [(&str, &[&str]); 3] = [
        ("ddsmu", &["s_bins=20", "s_min=0.001", "s_max=0.5", "mu_bins=10"]),
        ("ddrppi", &["rp_bins=20", "rp_min=0.001", "rp_max=0.5", "pi_bins=8", "pi_max=0.4"]),
        ("ddsmu", &["s_bins=7", "s_min=0.05", "s_max=0.3", "mu_bins=3", "mu_max=0.9"]),
    ];
    let backends = backends();
    for (name, params) in cases {
        let problem = built_in(name).unwrap().with_spacing(Spacing::Log).unwrap();
        let params = problem.bind(&params.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        let Output::Histogram2d { axes, .. } = &problem.output else { panic!("a 2-D histogram") };
        let edges: Vec<Vec<f32>> = axes
            .iter()
            .map(|x| axis_edges(x, problem.function.returns, &params).iter().map(|v| v.as_f64() as f32).collect())
            .collect();
        // Pairs at the first axis's edges; along z (pi and mu) at the second's.
        let mut a = adversarial(&mut rng, &around(&edges[0]), 300);
        for &d in &around(&edges[1]) {
            let p = [0, 1, 2].map(|_| rng.random_range(0.0f32..0.5));
            let scale = if name == "ddsmu" { 0.3 } else { 1.0 };
            a.extend([[p[0], p[1], 0.0], [p[0] + rng.random_range(0.0f32..0.05), p[1], d * scale]]);
        }
        let bins = [edges[0].len() - 1, edges[1].len() - 1];
        let mut want = vec![0u64; bins[0] * bins[1]];
        let mut firsts = Vec::new();
        for i in 0..a.len() {
            for j in 0..i {
                let (x, y) = los_values(name, &a[i], &a[j]);
                firsts.push(x);
                if let (Some(u), Some(v)) = (bucket(x, &edges[0]), linear_bucket(y, &edges[1])) {
                    want[u * bins[1] + v] += 1;
                }
            }
        }
        let seen = near_edges(firsts.into_iter(), &edges[0]);
        assert!(seen.iter().all(|&n| n >= edges[0].len()), "{name}: pairs on, below, above the edges: {seen:?}");
        let inputs = Inputs { a: set(&a), b: None };
        for &backend in &backends {
            for index in [IndexChoice::None, IndexChoice::Grid] {
                let run = support::execute(&problem, &params, &inputs, &options(backend, index)).unwrap();
                assert_eq!(counts(&run.outcome), want, "{name} {params:?} {backend:?}, {index:?}");
            }
        }
    }
}
