//! The cell hierarchy (`--index cells`, src/cells.rs) against brute force
//! on the CPU backend: every histogram equal bucket for bucket, on fresh
//! random data (the seed is printed; TWOBS_TEST_SEED repeats it) and on data
//! made to break it: points whose separations lie on bucket edges or a few
//! ulps from them, lattices, duplicates, tight clusters, one and two sets,
//! 1 to 3 coordinates, linear and log-spaced buckets.

mod support;

use rand::{RngExt, SeedableRng};
use support::{RunOptions, execute};
use twobs::cache::Cache;
use twobs::data::{Column, Inputs, PointSet};
use twobs::index::IndexChoice;
use twobs::outcome::Outcome;
use twobs::problems::built_in;
use twobs::run::Execution;
use twobs::spec::{Problem, Spacing};

fn cache() -> Cache {
    Cache::at(concat!(env!("CARGO_TARGET_TMPDIR"), "/twobs-cache"))
}

fn seed() -> u64 {
    let s = std::env::var("TWOBS_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    println!("TWOBS_TEST_SEED={s}");
    s
}

fn run(problem: &Problem, params: &[String], inputs: &Inputs, index: IndexChoice) -> Execution {
    let opts = RunOptions {
        backend: twobs::run::BackendChoice::Cpu,
        threads: 2,
        f64: false,
        quiet: true,
        gpu: Default::default(),
        verify: false,
        index,
        cache: cache(),
        ranks: None,
    };
    execute(problem, &problem.bind(params).unwrap(), inputs, &opts).unwrap_or_else(|e| panic!("{e}"))
}

fn set(points: &[Vec<f32>]) -> PointSet {
    let d = points.first().map_or(3, Vec::len);
    PointSet {
        columns: (0..d).map(|c| Column::F32(points.iter().map(|p| p[c]).collect())).collect(),
        origin: "test".into(),
        rows: None,
    }
}

/// The buckets' edges of sdh with `params`, as the value type holds them.
fn edges(problem: &Problem, params: &[String]) -> Vec<f32> {
    let p = problem.bind(params).unwrap();
    twobs::stage::contribution::histogram_edges(problem, &p).iter().map(|&e| e as f32).collect()
}

/// Points made to break the hierarchy: clusters a bucket edge's width wide,
/// pairs exactly an edge apart (and an ulp or two either side), lattice
/// points, duplicates and uniform ones.
fn adversarial(rng: &mut rand::rngs::StdRng, n: usize, dims: usize, edges: &[f32]) -> Vec<Vec<f32>> {
    let mut out: Vec<Vec<f32>> = Vec::with_capacity(n);
    while out.len() < n {
        let base: Vec<f32> = (0..dims).map(|_| rng.random::<f32>() * 0.5).collect();
        match rng.random_range(0..6u32) {
            0 => {
                // An edge apart on one axis, and an ulp or two off it.
                let e = edges[rng.random_range(0..edges.len())];
                let axis = rng.random_range(0..dims);
                let mut q = base.clone();
                let bits = (base[axis] + e).to_bits() as i64 + rng.random_range(-2..=2i64);
                q[axis] = f32::from_bits(bits.max(0) as u32);
                out.push(base);
                out.push(q);
            }
            1 => {
                // A lattice of sixteenths: many separations on linear edges.
                out.push((0..dims).map(|_| rng.random_range(0..16u32) as f32 / 16.0).collect());
            }
            2 => {
                // Duplicates.
                out.push(base.clone());
                out.push(base);
            }
            3 => {
                // A tight cluster.
                let w = 10f32.powi(-rng.random_range(2..6i32));
                for _ in 0..rng.random_range(2..40usize) {
                    out.push(base.iter().map(|x| x + w * rng.random::<f32>()).collect());
                }
            }
            _ => out.push((0..dims).map(|_| rng.random::<f32>()).collect()),
        }
    }
    out.truncate(n);
    out
}

fn uniform(rng: &mut rand::rngs::StdRng, n: usize, dims: usize) -> Vec<Vec<f32>> {
    (0..n).map(|_| (0..dims).map(|_| rng.random::<f32>()).collect()).collect()
}

/// Gaussian blobs of a few thousandths, as galaxies cluster.
fn clustered(rng: &mut rand::rngs::StdRng, n: usize, dims: usize) -> Vec<Vec<f32>> {
    let centres: Vec<Vec<f32>> = uniform(rng, 50, dims);
    (0..n)
        .map(|_| {
            let c = &centres[rng.random_range(0..centres.len())];
            c.iter()
                .map(|x| {
                    let g: f32 = (0..4).map(|_| rng.random::<f32>() - 0.5).sum();
                    (x + 0.01 * g).clamp(0.0, 1.0)
                })
                .collect()
        })
        .collect()
}

/// The histogram of `inputs` by brute force and by the hierarchy; equal,
/// and the hierarchy resolved at least `least_resolved` of the pairs.
fn same_as_brute(what: &str, problem: &Problem, params: &[String], inputs: &Inputs, least_resolved: f64) {
    let brute = run(problem, params, inputs, IndexChoice::None);
    let cells = run(problem, params, inputs, IndexChoice::Cells);
    let (Outcome::Totals(b), Outcome::Totals(c)) = (&brute.outcome, &cells.outcome) else { panic!("totals") };
    assert_eq!(b, c, "{what}: the hierarchy's histogram differs from brute force's ({})", cells.index.why);
    // The report names the hierarchy as --index does, not the grid whose code walks its leaves.
    assert_eq!((cells.index.name(), brute.index.name()), ("cells", "none"), "{what}");
    // Its host steps are reported, and only where it ran.
    assert!(cells.timings.hierarchy.is_some() && brute.timings.hierarchy.is_none(), "{what}: timings.hierarchy");
    let resolved = 1.0 - cells.index.pairs as f64 / cells.index.all_pairs.max(1) as f64;
    assert!(
        resolved >= least_resolved,
        "{what}: only {:.1}% of the pairs resolved: the test proves little ({})",
        100.0 * resolved,
        cells.index.why
    );
}

fn sdh(spacing: Spacing) -> Problem {
    let p = built_in("sdh").unwrap();
    if spacing == Spacing::Log { p.with_spacing(Spacing::Log).unwrap() } else { p }
}

#[test]
fn histograms_of_adversarial_points_equal_brute_force() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    for (dims, spacing, bins, lo, hi) in [
        (3, Spacing::Linear, 16, 0.0, 1.0),
        (3, Spacing::Linear, 4, 0.0, 1.7320508),
        (2, Spacing::Linear, 8, 0.0, 0.5),
        (1, Spacing::Linear, 16, 0.0, 1.0),
        (3, Spacing::Log, 20, 0.001, 0.5),
        (2, Spacing::Log, 10, 0.0001, 1.0),
    ] {
        let problem = sdh(spacing).with_dims(dims as u32).unwrap();
        let params = vec![format!("bins={bins}"), format!("r_min={lo}"), format!("r_max={hi}")];
        let e = edges(&problem, &params);
        let a = set(&adversarial(&mut rng, 3000, dims, &e));
        let what = format!("{dims}-D, {spacing:?}, {bins} buckets over [{lo}, {hi})");
        same_as_brute(&format!("{what}, one set"), &problem, &params, &Inputs { a: a.clone(), b: None }, 0.05);
        let b = set(&adversarial(&mut rng, 1700, dims, &e));
        let two = problem.with_sets(2).unwrap();
        same_as_brute(&format!("{what}, two sets"), &two, &params, &Inputs { a, b: Some(b) }, 0.05);
    }
}

#[test]
fn histograms_of_random_points_equal_brute_force() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    for (name, points) in [("uniform", uniform(&mut rng, 6000, 3)), ("clustered", clustered(&mut rng, 6000, 3))] {
        for (spacing, bins, lo, hi, least) in
            [(Spacing::Log, 20, 0.001, 0.5, 0.2), (Spacing::Linear, 3, 0.0, 1.7320508, 0.05)]
        {
            let problem = sdh(spacing);
            let params = vec![format!("bins={bins}"), format!("r_min={lo}"), format!("r_max={hi}")];
            let inputs = Inputs { a: set(&points), b: None };
            same_as_brute(&format!("{name}, {spacing:?} {bins} buckets"), &problem, &params, &inputs, least);
        }
    }
}

#[test]
fn a_lattice_with_edges_on_its_separations_equals_brute_force() {
    // Every separation of a lattice of eighths is sqrt(k) / 8, and edges of
    // 1/8 fall on many of them exactly: only the rounding bound keeps cell
    // pairs whose separations touch an edge from resolving.
    let problem = sdh(Spacing::Linear);
    let params = vec!["bins=14".to_owned(), "r_min=0".to_owned(), "r_max=1.75".to_owned()];
    let points: Vec<Vec<f32>> =
        (0..512).map(|i| vec![(i % 8) as f32 / 8.0, (i / 8 % 8) as f32 / 8.0, (i / 64) as f32 / 8.0]).collect();
    let doubled: Vec<Vec<f32>> = points.iter().chain(&points).cloned().collect();
    same_as_brute(
        "lattice of eighths, each point twice",
        &problem,
        &params,
        &Inputs { a: set(&doubled), b: None },
        0.0,
    );
}

#[test]
fn the_hierarchy_is_refused_with_the_reason_where_it_cannot_bound_the_value() {
    let problem = built_in("rdf").unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let inputs = Inputs { a: set(&uniform(&mut rng, 100, 3)), b: None };
    let opts = RunOptions {
        backend: twobs::run::BackendChoice::Cpu,
        threads: 1,
        f64: false,
        quiet: true,
        gpu: Default::default(),
        verify: false,
        index: IndexChoice::Cells,
        cache: cache(),
        ranks: None,
    };
    let err = execute(&problem, &problem.bind(&[]).unwrap(), &inputs, &opts).expect_err("refused").to_string();
    assert!(err.contains("--index cells") && err.contains("Euclidean"), "{err}");
}

/// Pairs of one molecule left out (`<exclude same>`): a cell pair's n_a x n_b
/// would count them, so the hierarchy is refused when forced, and auto's
/// choice (log buckets of clustered points, where it would take the
/// hierarchy) counts them one by one, as brute force does.
#[test]
fn excluded_pairs_keep_the_hierarchy_out() {
    let problem = built_in("sdh").unwrap().with_id("molecule").unwrap().with_exclusion("molecule").unwrap();
    let problem = problem.with_spacing(Spacing::Log).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let mut a = set(&clustered(&mut rng, 4000, 3));
    // Molecules of 1 to 4 neighbouring rows: clustered points of one blob share some.
    let molecules: Vec<i32> = (0..4000).map(|i: i32| i / rng.random_range(1..=4)).collect();
    a.columns.push(Column::I32(molecules));
    let inputs = Inputs { a, b: None };
    let params: Vec<String> = ["bins=20", "r_min=0.001", "r_max=0.5"].map(String::from).to_vec();
    let forced = std::panic::catch_unwind(|| run(&problem, &params, &inputs, IndexChoice::Cells));
    let err = forced.expect_err("--index cells with excluded pairs is refused");
    let err = err.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(err.contains("pairs of the same `molecule` are excluded"), "{err}");
    let counts = |e: Execution| match e.outcome {
        Outcome::Totals(t) => t.as_f64(),
        other => panic!("not a histogram: {other:?}"),
    };
    let auto = run(&problem, &params, &inputs, IndexChoice::Auto);
    assert!(!auto.index.why.contains("hierarch"), "{}", auto.index.why);
    let brute = counts(run(&problem, &params, &inputs, IndexChoice::None));
    let auto = counts(auto);
    assert_eq!(auto, brute);
    assert!(brute.iter().sum::<f64>() < 4000.0 * 3999.0 / 2.0 - 1000.0, "few pairs excluded: {brute:?}");
}

/// The planner's choice (`--index auto`): the hierarchy for log-binned
/// counts of clustered points, which it resolves mostly; brute force for
/// SDH of 500 buckets, which it cannot (docs/planner.md's model: every
/// cell pair straddles an edge), with the reason; both equal brute force.
#[test]
fn auto_takes_the_hierarchy_where_it_resolves_and_every_pair_where_it_does_not() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let points = clustered(&mut rng, 20_000, 3);
    let inputs = Inputs { a: set(&points), b: None };
    let log = sdh(Spacing::Log);
    let params = vec!["bins=20".to_owned(), "r_min=0.001".to_owned(), "r_max=0.5".to_owned()];
    let auto = run(&log, &params, &inputs, IndexChoice::Auto);
    assert!(auto.index.why.starts_with("cell hierarchy"), "log buckets: {}", auto.index.why);
    let brute = run(&log, &params, &inputs, IndexChoice::None);
    assert_eq!(auto.outcome, brute.outcome, "log buckets: auto's counts");
    let linear = sdh(Spacing::Linear);
    let params = vec!["bins=500".to_owned()];
    let inputs = Inputs { a: set(&uniform(&mut rng, 20_000, 3)), b: None };
    let auto = run(&linear, &params, &inputs, IndexChoice::Auto);
    assert!(
        !auto.index.why.starts_with("cell hierarchy") && auto.index.why.contains("costs less"),
        "500 buckets: {}",
        auto.index.why
    );
    assert_eq!(auto.index.pairs, auto.index.all_pairs, "500 buckets: every pair");
}

/// The GPUs' `auto` (backend::cuda, where no GPU runs in CI) asks this rule:
/// log-spaced buckets try the hierarchy, linear ones (SDH, g(r)) never do.
#[test]
fn gpu_auto_tries_the_hierarchy_for_log_spaced_buckets_alone() {
    let sdh = built_in("sdh").unwrap();
    assert!(!twobs::index::cells::tried_by_gpu_auto(&sdh));
    assert!(twobs::index::cells::tried_by_gpu_auto(&sdh.with_spacing(Spacing::Log).unwrap()));
    assert!(!twobs::index::cells::tried_by_gpu_auto(&built_in("rdf").unwrap()));
    assert!(!twobs::index::cells::tried_by_gpu_auto(&built_in("knn").unwrap()));
}
