//! The grid index gives what brute force gives: every built-in with a cutoff
//! and user specs with one, on fresh random data (uniform, clustered,
//! exponential with lambda = 40, and points on a lattice whose separations
//! land exactly on the cutoff), 1-D to 6-D, one set and two, periodic and
//! open, on the CPU backend. The seed is printed; TWOBS_TEST_SEED repeats a run.

mod support;

use indicatif::ProgressBar;
use rand::{RngExt, SeedableRng};
use support::RunOptions;
use twobs::backend::cpu::CpuDriver;
use twobs::cache::Cache;
use twobs::data::{Column, Generator, Inputs, PointSet, synthesize};
use twobs::index::{self, Cells, IndexChoice, IndexKind, Runs};
use twobs::outcome::Outcome;
use twobs::plan::{Points, Shape};
use twobs::problems::built_in;
use twobs::run::{BackendChoice, Execution};
use twobs::schedule::GpuOptions;
use twobs::spec::{Disk, Metric, PeriodicBox, Problem, Scalar, Spacing};

fn seed() -> u64 {
    let s = std::env::var("TWOBS_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    println!("TWOBS_TEST_SEED={s}");
    s
}

fn options(index: IndexChoice) -> RunOptions {
    RunOptions {
        backend: BackendChoice::Cpu,
        threads: 2,
        f64: false,
        quiet: true,
        gpu: GpuOptions::default(),
        verify: false,
        index,
        cache: Cache::at(concat!(env!("CARGO_TARGET_TMPDIR"), "/twobs-cache")),
        ranks: None,
    }
}

fn run(problem: &Problem, params: &[String], inputs: &Inputs, index: IndexChoice) -> Execution {
    let params = problem.bind(params).unwrap();
    support::execute(problem, &params, inputs, &options(index)).unwrap()
}

/// Runs brute force and the grid; they must agree exactly, and the grid must
/// have been used and have skipped pairs when `skips` says it should.
fn agree(what: &str, problem: &Problem, params: &[String], inputs: &Inputs, skips: bool) {
    let brute = run(problem, params, inputs, IndexChoice::None);
    let grid = run(problem, params, inputs, IndexChoice::Grid);
    assert_eq!(brute.index.index, IndexKind::None);
    assert_eq!(grid.index.index, IndexKind::Grid, "{what}: {}", grid.index.why);
    if skips {
        assert!(grid.index.pairs < brute.index.pairs / 2, "{what}: the grid skips too little: {}", grid.index.why);
    }
    if let Some(d) = grid.outcome.difference(&brute.outcome) {
        panic!("{what}: the grid differs from brute force: {d} ({})", grid.index.why);
    }
    // A result that holds nothing would agree trivially.
    let found = match &brute.outcome {
        Outcome::Totals(t) => t.as_f64().iter().sum::<f64>(),
        Outcome::Pairs(p) => p.len() as f64,
        Outcome::Knn { .. } | Outcome::KnnOnGpu(_) => unreachable!("KNN is checked by agree_knn"),
    };
    assert!(found > 0.0, "{what}: brute force found nothing, so the comparison proves nothing");
    // Units over runs of cells, as the GPU's blocks take them: tiny runs,
    // runs of a block's size, and runs of whole rows.
    let params = problem.bind(params).unwrap();
    let shape =
        Shape::new(problem, &params, Points { a: inputs.a.len() as u64, b: inputs.b.as_ref().map(|b| b.len() as u64) });
    let driver =
        CpuDriver::compile(problem, &params, &shape, IndexKind::Grid, false, &options(IndexChoice::Grid).cache)
            .unwrap();
    // And cells as wide as the cutoff (the GPU's) and finer (the CPU's).
    for points in [7, 256, 100_000] {
        for cells in [Cells::Widest, Cells::Finer] {
            let runs = Runs { points, whole_rows: true, cells };
            let (grid, summary) =
                index::choose(problem, &params, inputs, shape.visit, shape.pairs, IndexChoice::Grid, runs).unwrap();
            let got = driver.run(inputs, grid.as_ref(), 2, &ProgressBar::hidden()).unwrap();
            if let Some(d) = got.difference(&brute.outcome) {
                panic!(
                    "{what}: the grid in runs of up to {points} points, {cells:?} cells, differs from brute force: {d} ({})",
                    summary.why
                );
            }
        }
    }
}

fn synthetic(problem: &Problem, generator: Generator, n: u64, seed: u64) -> PointSet {
    synthesize(generator, n, &problem.input.components(), seed).unwrap()
}

/// `n` points whose coordinates are multiples of 1/16 in [0, 1): many pairs
/// lie exactly one cutoff of 1/8 apart, on cell edges or across them.
fn lattice(rng: &mut rand::rngs::StdRng, n: usize, d: usize) -> PointSet {
    PointSet {
        columns: (0..d)
            .map(|_| Column::F32((0..n).map(|_| rng.random_range(0..16u32) as f32 / 16.0).collect()))
            .collect(),
        origin: "lattice".into(),
        rows: None,
    }
}

const GENERATORS: [Generator; 3] = [Generator::Uniform, Generator::Clustered, Generator::Exponential];

#[test]
fn selfjoin_and_2pcf_from_one_to_six_dimensions() {
    let seed = seed();
    for (name, param) in [("selfjoin", "eps"), ("2pcf", "r")] {
        for dims in 1..=6u32 {
            let p = built_in(name).unwrap().with_dims(dims).unwrap();
            for (g, generator) in GENERATORS.into_iter().enumerate() {
                let cutoff = [0.02, 0.05, 0.08, 0.15, 0.2, 0.25][dims as usize - 1];
                let inputs = Inputs { a: synthetic(&p, generator, 3000, seed + g as u64), b: None };
                let what = format!("{name} {dims}-D {} {param}={cutoff}", generator.name());
                agree(&what, &p, &[format!("{param}={cutoff}")], &inputs, generator == Generator::Uniform && dims <= 3);
            }
        }
    }
}

#[test]
fn separations_exactly_at_the_cutoff() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    for dims in 1..=4 {
        for (name, param) in [("selfjoin", "eps"), ("2pcf", "r")] {
            let p = built_in(name).unwrap().with_dims(dims).unwrap();
            let inputs = Inputs { a: lattice(&mut rng, 1500, dims as usize), b: None };
            agree(&format!("{name} {dims}-D lattice"), &p, &[format!("{param}=0.125")], &inputs, false);
        }
    }
}

#[test]
fn histograms_of_sdh_and_rdf_open_and_periodic_one_set_and_two() {
    let seed = seed();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let sdh = built_in("sdh").unwrap();
    for generator in GENERATORS {
        let inputs = Inputs { a: synthetic(&sdh, generator, 3000, seed), b: None };
        let what = format!("sdh {}", generator.name());
        agree(&what, &sdh, &["r_max=0.15".into(), "bins=37".into()], &inputs, generator == Generator::Uniform);
    }
    for sets in [1, 2] {
        let rdf = built_in("rdf").unwrap().with_sets(sets).unwrap();
        for boxed in ["0", "1", "1,1.25,0.8125"] {
            let params = ["r_max=0.125".to_owned(), "bins=50".into(), format!("box={boxed}")];
            let lattice_inputs =
                Inputs { a: lattice(&mut rng, 2000, 3), b: (sets == 2).then(|| lattice(&mut rng, 1500, 3)) };
            // Lattice points fill the unit cube; a larger box leaves room to wrap.
            agree(&format!("rdf {sets} set(s) box={boxed} lattice"), &rdf, &params, &lattice_inputs, false);
            for generator in GENERATORS {
                let inputs = Inputs {
                    a: synthetic(&rdf, generator, 2500, seed + 1),
                    b: (sets == 2).then(|| synthetic(&rdf, generator, 2000, seed + 2)),
                };
                let what = format!("rdf {sets} set(s) box={boxed} {}", generator.name());
                agree(&what, &rdf, &params, &inputs, generator == Generator::Uniform);
            }
        }
    }
}

#[test]
fn two_dimensional_histograms_ddrppi_and_ddsmu_open_and_periodic() {
    // Their cutoffs: ddrppi's the largest of rp_max and pi_max (a component
    // past both adds nothing), ddsmu's s_max (Euclidean). Lattice points lie
    // exactly a cutoff of 1/8 (or 1/4) apart, on cell edges or across them.
    let seed = seed();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for (name, ranges) in [("ddrppi", ["rp_max=0.125", "pi_max=0.25"]), ("ddsmu", ["s_max=0.125", "mu_bins=8"])] {
        for sets in [1, 2] {
            let p = built_in(name).unwrap().with_sets(sets).unwrap();
            for boxed in ["0", "1"] {
                let params: Vec<String> =
                    ranges.iter().map(|r| r.to_string()).chain([format!("box={boxed}"), "pi_bins=4".into()]).collect();
                let params: Vec<String> =
                    params.into_iter().filter(|q| name == "ddrppi" || !q.starts_with("pi_bins")).collect();
                let inputs =
                    Inputs { a: lattice(&mut rng, 1000, 3), b: (sets == 2).then(|| lattice(&mut rng, 800, 3)) };
                agree(&format!("{name} {sets} set(s) box={boxed} lattice"), &p, &params, &inputs, false);
                let inputs = Inputs {
                    a: synthetic(&p, Generator::Clustered, 1500, seed + 1),
                    b: (sets == 2).then(|| synthetic(&p, Generator::Uniform, 1000, seed + 2)),
                };
                agree(&format!("{name} {sets} set(s) box={boxed} clustered"), &p, &params, &inputs, false);
            }
        }
    }
}

/// `n` points of the box `b` (f32): a third on the faces of cells 1/q of
/// the box wide (q from 2 to 16, fractional coordinates j / q), a third at
/// random, and a third `r` from one of those in a random direction (across
/// the box's faces as often as not).
fn in_box(rng: &mut rand::rngs::StdRng, n: usize, b: &PeriodicBox, r: f64) -> PointSet {
    let mut rows: Vec<[f64; 3]> = Vec::new();
    while rows.len() < n {
        let s = [0, 1, 2].map(|_| match rng.random_range(0..2u32) {
            0 => {
                let q = [2u32, 3, 4, 5, 7, 8, 11, 16][rng.random_range(0..8usize)];
                rng.random_range(0..q) as f64 / q as f64
            }
            _ => rng.random::<f64>(),
        });
        let p = b.cartesian(s);
        let dir = [0, 1, 2].map(|_| rng.random::<f64>() - 0.5);
        let norm = dir.iter().map(|x| x * x).sum::<f64>().sqrt().max(1e-9);
        rows.push(p);
        rows.push([0, 1, 2].map(|k| p[k] + r * dir[k] / norm));
        rows.push(b.cartesian([0, 1, 2].map(|_| rng.random::<f64>())));
    }
    rows.truncate(n);
    PointSet {
        columns: (0..3).map(|d| Column::F32(rows.iter().map(|p| p[d] as f32).collect())).collect(),
        origin: "in a box".into(),
        rows: None,
    }
}

#[test]
fn rdf_in_triclinic_boxes_up_to_half_the_least_width() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    // Triclinic boxes with real tilts, and the cube and box where a quarter
    // of a side once gave no grid.
    for (t, text) in ["6,5,4,0.5,-0.3,0.25", "3,3,3,-0.9,0.7,0.6", "1", "1,1.25,0.8125"].into_iter().enumerate() {
        let b = PeriodicBox::parse(Scalar::F32, text).unwrap();
        let least = b.widths().into_iter().fold(f64::INFINITY, f64::min);
        for (s, share) in [0.15, 0.25, 1.0 / 3.0, 0.5 * (1.0 - 1e-5)].into_iter().enumerate() {
            let r = (share * least) as f32;
            // One set or two, alternating: each box and each share meets both
            // twice (each box and r_max is a kernel of its own to compile).
            let sets = 1 + (t + s) % 2;
            let rdf = built_in("rdf").unwrap().with_sets(sets).unwrap();
            let params = [format!("r_max={r:?}"), "bins=40".into(), format!("box={text}")];
            let inputs = Inputs {
                a: in_box(&mut rng, 1200, &b, r as f64),
                b: (sets == 2).then(|| in_box(&mut rng, 900, &b, r as f64)),
            };
            let what = format!("rdf {sets} set(s) box={text} r_max={r} ({share:.4} of the least width)");
            agree(&what, &rdf, &params, &inputs, false);
            if share <= 0.25 {
                let grid = run(&rdf, &params, &inputs, IndexChoice::Grid);
                assert!(grid.index.cells.unwrap_or(1) > 1, "{what}: one cell: {}", grid.index.why);
            }
        }
    }
}

#[test]
fn band_join_on_whole_number_keys() {
    let seed = seed();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let nlj = built_in("nlj").unwrap();
    let keys = |rng: &mut rand::rngs::StdRng, n: usize, lo: i32, hi: i32| PointSet {
        columns: vec![Column::I32((0..n).map(|_| rng.random_range(lo..=hi)).collect())],
        origin: "keys".into(),
        rows: None,
    };
    for d in [0, 1, 7, 1073] {
        // Keys spread over all of i32, and keys crowded into a few hundred values.
        for (lo, hi) in [(i32::MIN, i32::MAX), (-300, 300), (0, 20000)] {
            let inputs = Inputs { a: keys(&mut rng, 3000, lo, hi), b: Some(keys(&mut rng, 2500, lo, hi)) };
            let what = format!("nlj d={d} keys in [{lo}, {hi}]");
            let brute = run(&nlj, &[format!("d={d}")], &inputs, IndexChoice::None);
            let Outcome::Pairs(found) = &brute.outcome else { panic!("pairs") };
            if found.is_empty() {
                // Sparse keys with a narrow band: still the grid must find nothing too.
                let grid = run(&nlj, &[format!("d={d}")], &inputs, IndexChoice::Grid);
                assert_eq!(grid.outcome, brute.outcome, "{what}");
                continue;
            }
            agree(&what, &nlj, &[format!("d={d}")], &inputs, false);
        }
    }
}

/// A user's problem: a non-symmetric function on one set (every ordered pair
/// is visited), with its own cutoff, in a histogram.
const SHIFT: &str = r#"<problem name="shift">
  <summary>signed x separation of pairs within r of each other in every coordinate</summary>
  <input sets="1" type="f32" dims="3"/>
  <function file="shift.cu" name="shift"/>
  <output kind="histogram" bins="bins" min="lo" max="r"/>
  <cutoff value="r"/>
  <param name="bins" type="u32" default="40"/>
  <param name="lo" type="f32" default="-0.1"/>
  <param name="r" type="f32" default="0.1"/>
</problem>
"#;
const SHIFT_CU: &str = "__device__ float shift(float3 a, float3 b) {
  const float dx = a.x - b.x, dy = a.y - b.y, dz = a.z - b.z;
  // Past r in any coordinate the pair falls outside the histogram: the cutoff's promise.
  return fmaxf(fabsf(dx), fmaxf(fabsf(dy), fabsf(dz))) <= params::r ? dx + 0.25f * dy : 1e30f;
}
";

#[test]
fn a_user_spec_with_a_cutoff_and_every_ordered_pair() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("shift.cu"), SHIFT_CU).unwrap();
    let path = dir.path().join("shift.xml");
    std::fs::write(&path, SHIFT).unwrap();
    let p = Problem::parse(SHIFT, &path, &Disk).unwrap();
    let seed = seed();
    for generator in GENERATORS {
        let inputs = Inputs { a: synthetic(&p, generator, 3000, seed), b: None };
        agree(&format!("shift {}", generator.name()), &p, &[], &inputs, generator == Generator::Uniform);
    }
}

#[test]
fn auto_keeps_brute_force_where_the_grid_skips_too_little_and_says_why() {
    let p = built_in("2pcf").unwrap();
    let inputs = Inputs { a: synthetic(&p, Generator::Uniform, 2000, seed()), b: None };
    let far = run(&p, &["r=0.6".into()], &inputs, IndexChoice::Auto);
    assert_eq!(far.index.index, IndexKind::None);
    assert!(far.index.why.contains("fewer than 4 cells on every axis"), "{}", far.index.why);
    // In 1-D, 4 cells of 0.25 visit 5/8 of the pairs: the grid is made, then
    // not taken. (40 points are too few for cells finer than the cutoff.)
    let line = p.with_dims(1).unwrap();
    let sparse = Inputs { a: synthetic(&line, Generator::Uniform, 40, seed()), b: None };
    let wide = run(&line, &["r=0.245".into()], &sparse, IndexChoice::Auto);
    assert_eq!(wide.index.index, IndexKind::None);
    assert!(wide.index.why.contains("too many to be worth a grid"), "{}", wide.index.why);
    // 2000 points take cells a quarter of the cutoff wide: 17 of them, each
    // unit meeting 9, visit about a quarter of the pairs, and the grid is taken.
    let one_d = Inputs { a: synthetic(&line, Generator::Uniform, 2000, seed()), b: None };
    let finer = run(&line, &["r=0.245".into()], &one_d, IndexChoice::Auto);
    assert_eq!(finer.index.index, IndexKind::Grid, "{}", finer.index.why);
    assert!(finer.index.why.contains("1/4 of it wide"), "{}", finer.index.why);
    assert_eq!(finer.outcome, run(&line, &["r=0.245".into()], &one_d, IndexChoice::None).outcome);
    let near = run(&p, &["r=0.05".into()], &inputs, IndexChoice::Auto);
    assert_eq!(near.index.index, IndexKind::Grid, "{}", near.index.why);
    assert!(near.index.pairs < far.index.pairs / 20, "{}", near.index.why);
    // A grid forced where no axis gets cells still visits every pair, once.
    let one_cell = run(&p, &["r=0.6".into()], &inputs, IndexChoice::Grid);
    assert_eq!(one_cell.index.index, IndexKind::Grid);
    assert_eq!(one_cell.index.pairs, one_cell.index.all_pairs);
    assert_eq!(one_cell.outcome, far.outcome);
    // No cutoff, no grid: forced, that is an error naming the problem.
    let kde = built_in("kde").unwrap();
    let params = kde.bind(&[]).unwrap();
    let err = support::execute(&kde, &params, &inputs, &options(IndexChoice::Grid)).unwrap_err().to_string();
    assert!(err.contains("needs a <cutoff>") && err.contains("`kde`"), "{err}");
    let negative = p.bind(&["r=-1".into()]).unwrap_err().to_string();
    assert!(negative.contains("must not be negative"), "{negative}");
}

#[test]
fn the_f64_mode_walks_the_grid_too() {
    let p = built_in("selfjoin").unwrap().with_dims(3).unwrap();
    let inputs = Inputs { a: synthetic(&p, Generator::Clustered, 3000, seed()), b: None };
    let params = p.bind(&["eps=0.03".into()]).unwrap();
    let f64_run =
        |index| support::execute(&p, &params, &inputs, &RunOptions { f64: true, ..options(index) }).unwrap().outcome;
    let (brute, grid) = (f64_run(IndexChoice::None), f64_run(IndexChoice::Grid));
    assert!(matches!(&brute, Outcome::Pairs(v) if !v.is_empty()));
    assert_eq!(grid.difference(&brute), None);
}

/// The sample estimate of a grid's pairs (which keeps small cut-off jobs on
/// one of several GPUs) is exact for a set no larger than its sample (2^14
/// points), and within 5% of the grid's count on larger ones (the cases
/// sample thousands of pairs or more), uniform and clustered, one set and
/// two, open and periodic.
#[test]
fn the_sample_estimate_of_a_grids_pairs() {
    let cases: [(&str, &[&str], Generator, u64); 6] = [
        ("selfjoin", &["eps=0.02"], Generator::Uniform, 10_000),
        ("selfjoin", &["eps=0.004"], Generator::Uniform, 400_000),
        ("2pcf", &["r=0.01"], Generator::Clustered, 400_000),
        ("rdf", &["r_max=0.02", "box=0"], Generator::Exponential, 300_000),
        ("rdf", &["r_max=0.03", "box=1"], Generator::Uniform, 8_000),
        ("rdf", &["r_max=0.02", "box=1,1.25,0.8125"], Generator::Clustered, 200_000),
    ];
    for (name, params, generator, n) in cases {
        let p = built_in(name).unwrap();
        let b = (p.input.sets == twobs::spec::Sets::Two).then(|| synthetic(&p, generator, n / 2, seed() + 1));
        let inputs = Inputs { a: synthetic(&p, generator, n, seed()), b };
        let given = params.join(" ");
        let params = p.bind(&params.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        let points = Points { a: inputs.a.len() as u64, b: inputs.b.as_ref().map(|b| b.len() as u64) };
        let shape = Shape::new(&p, &params, points);
        let shapes = twobs::data::Shapes::of(&inputs);
        let layout = index::layout(&p, &params, &shapes, shape.pairs, IndexChoice::Grid, index::CPU_RUNS.cells)
            .unwrap()
            .unwrap();
        let (grid, _) =
            index::choose(&p, &params, &inputs, shape.visit, shape.pairs, IndexChoice::Grid, index::CPU_RUNS).unwrap();
        let exact = grid.unwrap().pairs as f64;
        let estimate = layout.estimated_pairs(&shapes, shape.visit) as f64;
        let what = format!("{name} {given} on {n} {generator:?} points: estimate {estimate}, grid {exact}");
        if n <= 1 << 14 {
            assert_eq!(estimate, exact, "{what}");
        } else {
            assert!((estimate / exact - 1.0).abs() < 0.05, "{what}");
        }
    }
}

/// Runs KNN by brute force and by a search of rings; the lists (neighbours,
/// values, and ties broken to the smaller index) must be the same.
fn agree_knn(what: &str, problem: &Problem, params: &[String], inputs: &Inputs) {
    let brute = run(problem, params, inputs, IndexChoice::None);
    let rings = run(problem, params, inputs, IndexChoice::Grid);
    assert_eq!(rings.index.index, IndexKind::Rings, "{what}: {}", rings.index.why);
    let Outcome::Knn { ids, .. } = &brute.outcome else { panic!("{what}: a KNN outcome") };
    assert!(
        ids.iter().any(|&i| i != u32::MAX),
        "{what}: brute force found no neighbour, so the comparison proves nothing"
    );
    if let Some(d) = rings.outcome.difference(&brute.outcome) {
        panic!("{what}: the search of rings differs from brute force: {d} ({})", rings.index.why);
    }
    // Equal lists, not merely equally good ones.
    assert_eq!(rings.outcome, brute.outcome, "{what}");
}

#[test]
fn knn_by_rings_of_cells_from_one_to_six_dimensions() {
    let seed = seed();
    for dims in 1..=6u32 {
        let p = built_in("knn").unwrap().with_dims(dims).unwrap();
        // One k a dimension, turning: each k is a kernel of its own to compile
        // (in CI, most of this test's time), and each meets two dimensions.
        let k = [1, 8, 33][dims as usize % 3];
        for (g, generator) in GENERATORS.into_iter().enumerate() {
            let inputs = Inputs { a: synthetic(&p, generator, 2500, seed + g as u64 + k), b: None };
            agree_knn(&format!("knn {dims}-D {} k={k}", generator.name()), &p, &[format!("k={k}")], &inputs);
        }
    }
}

#[test]
fn knn_by_rings_with_ties_outliers_and_too_few_points() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let p = built_in("knn").unwrap();
    // Lattice points: many neighbours at equal distances, and equal points.
    for dims in [2, 3] {
        let p = p.with_dims(dims).unwrap();
        let inputs = Inputs { a: lattice(&mut rng, 3000, dims as usize), b: None };
        agree_knn(&format!("knn {dims}-D lattice"), &p, &["k=12".into()], &inputs);
    }
    // A dense cloud and a few points far from it and from each other: their
    // searches run over many empty rings.
    let mut a = synthetic(&p, Generator::Uniform, 3000, rng.random());
    if let [Column::F32(x), Column::F32(y), Column::F32(z)] = &mut a.columns[..] {
        for (i, far) in [(0, 40.0), (1, -25.0), (2, 300.0), (3, 7.5)] {
            x[i] = far;
            y[i * 7] = -far;
            z[i * 11] = far / 3.0;
        }
    }
    agree_knn("knn with outliers", &p, &["k=5".into()], &Inputs { a: a.clone(), b: None });
    // More neighbours asked for than there are points: every cell is met and the lists are padded.
    let few = Inputs { a: synthetic(&p, Generator::Clustered, 40, rng.random()), b: None };
    agree_knn("knn k > n", &p, &["k=64".into()], &few);
}

/// A user's KNN of set A's points among set B's, in a periodic box (the
/// minimum image distance of the RDF built-in), and open.
const PERIODIC_KNN: &str = r#"<problem name="boxknn">
  <summary>the K nearest points of B to each point of A, by minimum image distance</summary>
  <input sets="1,2" type="f32" dims="3"/>
  <function file="rdf.cu" name="min_image_distance" symmetric="true"/>
  <output kind="knn" k="k"/>
  <cutoff/>
  <param name="k" type="u32" default="6">neighbours</param>
  <param name="box" type="box" default="1.0">periodic box; 0 for open</param>
</problem>
"#;

#[test]
fn knn_by_rings_in_a_periodic_box_one_set_and_two() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rdf.cu"), include_str!("../problems/rdf.cu")).unwrap();
    let path = dir.path().join("boxknn.xml");
    std::fs::write(&path, PERIODIC_KNN).unwrap();
    let p = Problem::parse(PERIODIC_KNN, &path, &Disk).unwrap();
    let seed = seed();
    for (g, generator) in GENERATORS.into_iter().enumerate() {
        for boxed in ["0", "1", "1,1.25,0.8125"] {
            for sets in [1, 2] {
                let p = p.with_sets(sets).unwrap();
                let s = seed + 10 * g as u64;
                let a = synthetic(&p, generator, 2000, s);
                let b = (sets == 2).then(|| synthetic(&p, generator, 1500, s + 1));
                let what = format!("boxknn {sets} set(s) box={boxed} {}", generator.name());
                agree_knn(&what, &p, &[format!("box={boxed}"), "k=9".into()], &Inputs { a, b });
            }
        }
    }
}

/// A user spec, in a fresh folder, parsed as `twobs run` reads it.
fn user_spec(name: &str, spec: &str, snippet: &str) -> (Problem, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(format!("{name}.cu")), snippet).unwrap();
    let path = dir.path().join(format!("{name}.xml"));
    std::fs::write(&path, spec).unwrap();
    (Problem::parse(spec, &path, &Disk).unwrap(), dir)
}

/// A weighted L1 distance whose cutoff is its threshold: with a weight below
/// 1, a pair farther apart than the cutoff in x can still pass.
const WEIGHTED_L1: &str = r#"<problem name="wl1">
  <summary>pairs within eps by a weighted L1 distance</summary>
  <input sets="1" type="f32" dims="3"/>
  <function file="wl1.cu" name="wl1" symmetric="true"/>
  <output kind="count" threshold="eps" compare="le"/>
  <cutoff value="eps"/>
  <param name="eps" type="f32" default="0.05"/>
</problem>
"#;

/// Issue 30, item 4: a spec whose `<cutoff>` promise is false (a weighted L1
/// with a weight below 1) lost pairs on the grid, silently. A sample of far
/// pairs is evaluated before a grid run, and such a spec is refused naming a
/// pair; every pair (`--index none`) still runs it; a spec that keeps its
/// promise runs on the grid, with a note of what was checked.
#[test]
fn a_spec_that_breaks_its_cutoff_promise_is_refused_naming_a_pair() {
    let seed = seed();
    let refuse = |snippet: &str, spec: &str, params: &[String], inputs: &Inputs| -> String {
        let (p, _dir) = user_spec("wl1", spec, snippet);
        let bound = p.bind(params).unwrap();
        match support::execute(&p, &bound, inputs, &options(IndexChoice::Auto)) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("seed {seed}: a broken promise was not caught:\n{snippet}"),
        }
    };
    let half_x = "__device__ float wl1(float3 a, float3 b) {\n  \
                  return 0.5f * fabsf(a.x - b.x) + fabsf(a.y - b.y) + fabsf(a.z - b.z);\n}\n";
    let (p, _dir) = user_spec("wl1", WEIGHTED_L1, half_x);
    let inputs = Inputs { a: synthetic(&p, Generator::Uniform, 20_000, seed), b: None };
    let e = refuse(half_x, WEIGHTED_L1, &[], &inputs);
    assert!(e.contains("wl1.xml: its cutoff eps=0.05 promises that a pair farther apart than that"), "{e}");
    assert!(e.contains(" of uniform:20000 (seed ") && e.contains("adds to the output"), "{e}");
    assert!(e.contains("--index none"), "{e}");
    // Every pair: no promise relied on, and the count the grid would have lost part of.
    let every = run(&p, &[], &inputs, IndexChoice::None);
    let Outcome::Totals(t) = &every.outcome else { panic!("a count") };
    assert!(t.as_f64()[0] > 0.0);

    // A function that wraps a unit cube without declaring the periodic box:
    // pairs across a face are close, though far apart in coordinates.
    let wraps = "__device__ float wl1(float3 a, float3 b) {\n  float s = 0.0f;\n  \
                 for (float d : {a.x - b.x, a.y - b.y, a.z - b.z}) s += fabsf(d - rintf(d));\n  return s;\n}\n";
    let e = refuse(wraps, WEIGHTED_L1, &[], &inputs);
    assert!(e.contains("promises that a pair farther apart than that in a component adds nothing"), "{e}");

    // KNN's promise: a value at least the separation in each component.
    let knn = WEIGHTED_L1
        .replace(r#"<output kind="count" threshold="eps" compare="le"/>"#, r#"<output kind="knn" k="k"/>"#)
        .replace(r#"<cutoff value="eps"/>"#, "<cutoff/>")
        .replace(r#"<param name="eps" type="f32" default="0.05"/>"#, r#"<param name="k" type="u32" default="4"/>"#);
    let e = refuse(half_x, &knn, &[], &inputs);
    assert!(e.contains("<cutoff/> promises that a pair's value is at least its separation in each component"), "{e}");

    // The same distance with every weight 1 keeps the promise.
    let honest = half_x.replace("0.5f * ", "");
    let (p, _dir) = user_spec("wl1", WEIGHTED_L1, &honest);
    let grid = run(&p, &[], &inputs, IndexChoice::Auto);
    assert_eq!(grid.index.index, IndexKind::Grid, "{}", grid.index.why);
    assert!(
        grid.notes
            .iter()
            .any(|n| n.contains("its promises hold on a sample") && n.contains("pairs past the cutoff add nothing")),
        "{:?}",
        grid.notes
    );
    assert_eq!(grid.outcome, run(&p, &[], &inputs, IndexChoice::None).outcome, "seed {seed}");

    // metric="euclidean" promises more: a pair farther apart than eps in
    // Euclidean distance adds nothing. The largest component difference
    // (Chebyshev) keeps the component promise and breaks that one; L1 keeps both.
    let euclidean = WEIGHTED_L1.replace(r#"<cutoff value="eps"/>"#, r#"<cutoff value="eps" metric="euclidean"/>"#);
    let chebyshev = "__device__ float wl1(float3 a, float3 b) {\n  \
                     return fmaxf(fabsf(a.x - b.x), fmaxf(fabsf(a.y - b.y), fabsf(a.z - b.z)));\n}\n";
    let e = refuse(chebyshev, &euclidean, &[], &inputs);
    assert!(e.contains("promises that a pair farther apart than that in Euclidean distance"), "{e}");
    let (p, _dir) = user_spec("wl1", WEIGHTED_L1, chebyshev);
    assert_eq!(run(&p, &[], &inputs, IndexChoice::Grid).outcome, run(&p, &[], &inputs, IndexChoice::None).outcome);
    let (p, _dir) = user_spec("wl1", &euclidean, &honest);
    assert_eq!(run(&p, &[], &inputs, IndexChoice::Grid).outcome, run(&p, &[], &inputs, IndexChoice::None).outcome);
}

/// Points in [0, 1)^d, a third each: uniform, on the lattice of 1/16 (pairs
/// exactly a cutoff of 0.25 = 4/16 apart along an axis, and 5/16 apart on the
/// diagonal of a 3-4 right triangle, in exact f32 arithmetic), and duplicates
/// of earlier points.
fn mixed(rng: &mut rand::rngs::StdRng, n: usize, d: usize) -> PointSet {
    let mut rows: Vec<Vec<f32>> = Vec::with_capacity(n);
    while rows.len() < n {
        let row = match rng.random_range(0..3u32) {
            0 => (0..d).map(|_| rng.random::<f32>()).collect(),
            1 => (0..d).map(|_| rng.random_range(0..16u32) as f32 / 16.0).collect(),
            _ if !rows.is_empty() => rows[rng.random_range(0..rows.len())].clone(),
            _ => continue,
        };
        rows.push(row);
    }
    PointSet {
        columns: (0..d).map(|c| Column::F32(rows.iter().map(|r| r[c]).collect())).collect(),
        origin: "mixed".into(),
        rows: None,
    }
}

/// The built-ins declare metric="euclidean": the CPU's grid of finer cells
/// leaves out the cells of the cube around a unit whose nearest points lie
/// past the cutoff. Dense enough for cells a third or a quarter of the
/// cutoff wide, the grid must then visit fewer pairs than under the
/// component promise (the same spec without the metric) and give exactly
/// what that grid and brute force give: counts, histograms (linear and log
/// buckets) and pair sets, open and periodic, one set and two, with points
/// on the lattice (separations exactly at the cutoff, straight and slanted)
/// and duplicates.
#[test]
fn a_euclidean_cutoff_skips_far_cells_and_finds_the_same_pairs() {
    let seed = seed();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let cases: [(&str, usize, Vec<String>); 6] = [
        ("2pcf", 1, vec!["r=0.25".into()]),
        ("selfjoin", 1, vec!["eps=0.3125".into()]),
        ("sdh", 2, vec!["r_max=0.25".into(), "bins=40".into()]),
        ("sdh", 1, vec!["r_min=0.001".into(), "r_max=0.3125".into(), "bins=20".into()]),
        ("rdf", 1, vec!["r_max=0.25".into(), "bins=50".into(), "box=1".into()]),
        ("rdf", 2, vec!["r_max=0.3125".into(), "bins=30".into(), "box=1".into()]),
    ];
    for (name, sets, params) in cases {
        let mut p = built_in(name).unwrap().with_sets(sets).unwrap();
        if name != "rdf" {
            p = p.with_dims(3).unwrap();
        }
        if name == "sdh" && params[0].starts_with("r_min") {
            p = p.with_spacing(Spacing::Log).unwrap();
        }
        // Pairs within 0.3125 are an eighth of all: fewer points for a pair set.
        let n = if name == "selfjoin" { 12_000 } else { 24_000 };
        let inputs = Inputs { a: mixed(&mut rng, n, 3), b: (sets == 2).then(|| mixed(&mut rng, 20_000, 3)) };
        let what = format!("{name} {} set(s) {params:?} (seed {seed})", sets);
        let euclidean = run(&p, &params, &inputs, IndexChoice::Grid);
        let mut component = p.clone();
        component.cutoff.as_mut().unwrap().metric = Metric::Component;
        let cube = run(&component, &params, &inputs, IndexChoice::Grid);
        assert_eq!(euclidean.index.index, IndexKind::Grid, "{what}: {}", euclidean.index.why);
        assert!(
            euclidean.index.why.contains("1/3 of it wide") || euclidean.index.why.contains("1/4 of it wide"),
            "{what}: cells too wide for the ball to leave any out: {}",
            euclidean.index.why
        );
        assert!(
            euclidean.index.pairs < cube.index.pairs,
            "{what}: the ball visits {} pairs, the cube {}",
            euclidean.index.pairs,
            cube.index.pairs
        );
        if let Some(d) = euclidean.outcome.difference(&cube.outcome) {
            panic!("{what}: the ball differs from the cube: {d}");
        }
        let brute = run(&p, &params, &inputs, IndexChoice::None);
        if let Some(d) = euclidean.outcome.difference(&brute.outcome) {
            panic!("{what}: the ball differs from brute force: {d}");
        }
        let found = match &brute.outcome {
            Outcome::Totals(t) => t.as_f64().iter().sum::<f64>(),
            Outcome::Pairs(p) => p.len() as f64,
            Outcome::Knn { .. } | Outcome::KnnOnGpu(_) => unreachable!("no KNN here"),
        };
        assert!(found > 0.0, "{what}: brute force found nothing");
    }
}

/// The squared distance as a key of the distance, written wrongly two ways.
const KEYED: &str = r#"<problem name="keyed">
  <summary>pairs closer than r, tested on a key</summary>
  <input sets="1" type="f32" dims="3"/>
  <function file="keyed.cu" name="dist" symmetric="true" key="squared" map="root"/>
  <output kind="count" threshold="r" compare="lt"/>
  <param name="r" type="f32" default="0.1"/>
</problem>
"#;

/// Issue 30, item 4, the key and map promise: a value that is not map(key)
/// bit for bit, or a map that decreases, is refused naming a pair.
#[test]
fn a_spec_that_breaks_its_key_promise_is_refused_naming_a_pair() {
    let seed = seed();
    let squared = "__device__ float squared(float3 a, float3 b) {\n  \
                   const float dx = a.x - b.x, dy = a.y - b.y, dz = a.z - b.z;\n  \
                   return fmaf(dz, dz, fmaf(dy, dy, dx * dx));\n}\n";
    let cases = [
        // The value rounds otherwise than the map of the key.
        (
            "__device__ float root(float k) { return sqrtf(k > 0.0f ? k : 0.0f); }\n\
          __device__ float dist(float3 a, float3 b) { return sqrtf(squared(a, b)) * 1.0000001f; }\n",
            "bit for bit, but for row ",
        ),
        // A decreasing map, of which the value is the map.
        (
            "__device__ float root(float k) { return -sqrtf(k > 0.0f ? k : 0.0f); }\n\
          __device__ float dist(float3 a, float3 b) { return root(squared(a, b)); }\n",
            "must not decrease, but the key ",
        ),
    ];
    for (rest, says) in cases {
        let snippet = format!("{squared}{rest}");
        let (p, _dir) = user_spec("keyed", KEYED, &snippet);
        let inputs = Inputs { a: synthetic(&p, Generator::Uniform, 3000, seed), b: None };
        let bound = p.bind(&[]).unwrap();
        let Err(e) = support::execute(&p, &bound, &inputs, &options(IndexChoice::None)) else {
            panic!("seed {seed}: a broken key promise was not caught:\n{snippet}")
        };
        let e = e.to_string();
        assert!(e.contains("keyed.xml: ") && e.contains(says) && e.contains("uniform:3000 (seed "), "{e}");
    }
    let snippet = format!(
        "{squared}__device__ float root(float k) {{ return sqrtf(k > 0.0f ? k : 0.0f); }}\n\
         __device__ float dist(float3 a, float3 b) {{ return root(squared(a, b)); }}\n"
    );
    let (p, _dir) = user_spec("keyed", KEYED, &snippet);
    let inputs = Inputs { a: synthetic(&p, Generator::Uniform, 3000, seed), b: None };
    let kept = run(&p, &[], &inputs, IndexChoice::None);
    assert!(
        kept.notes.iter().any(|n| n.contains("values are the map of their keys, which never decreases")),
        "{:?}",
        kept.notes
    );
}

/// A user's own g(r) spec (the built-in's snippet, so nothing is taken as
/// proven) in strongly tilted boxes keeps its promises: the promise check
/// measures a pair's separation along the faces' normals, as the triclinic
/// grid does, not along x, y and z (where a minimum image across a tilted
/// face is nearer than the per-axis separation says, and a true promise was
/// refused). The grid then gives what every pair gives; half the distance
/// (pairs up to twice the cutoff counted) is still refused.
#[test]
fn a_user_spec_in_a_triclinic_box_keeps_its_promises() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let snippet = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/problems/rdf.cu")).unwrap();
    let spec = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/problems/rdf.xml"))
        .unwrap()
        .replace(r#"<problem name="rdf">"#, r#"<problem name="myrdf">"#)
        .replace(r#"file="rdf.cu""#, r#"file="myrdf.cu""#);
    let component = spec.replace(r#" metric="euclidean""#, "");
    for (metric, spec, text) in
        [("euclidean", &spec, "10,10,10,0.45,0.4,0.45"), ("component", &component, "8,9,7,-0.5,0.45,-0.4")]
    {
        let (p, _dir) = user_spec("myrdf", spec, &snippet);
        let b = PeriodicBox::parse(Scalar::F32, text).unwrap();
        let least = b.widths().into_iter().fold(f64::INFINITY, f64::min);
        let r = (0.2 * least) as f32;
        let params = [format!("r_max={r:?}"), "bins=20".into(), format!("box={text}")];
        let inputs = Inputs { a: in_box(&mut rng, 3000, &b, r as f64), b: None };
        let what = format!("{metric} cutoff, box={text}, r_max={r}");
        let bound = p.bind(&params).unwrap();
        let grid = support::execute(&p, &bound, &inputs, &options(IndexChoice::Auto))
            .unwrap_or_else(|e| panic!("{what}: a true promise refused: {e}"));
        assert_eq!(grid.index.index, IndexKind::Grid, "{what}: {}", grid.index.why);
        assert!(grid.notes.iter().any(|n| n.contains("its promises hold on a sample")), "{what}: {:?}", grid.notes);
        assert_eq!(grid.outcome, run(&p, &params, &inputs, IndexChoice::None).outcome, "{what}");
        if metric == "component" {
            let halved = snippet.replace(
                "{ return root(squared_min_image_distance(a, b)); }",
                "{ return 0.5f * root(squared_min_image_distance(a, b)); }",
            );
            assert_ne!(halved, snippet);
            let (p, _dir) = user_spec("myrdf", spec, &halved);
            let e = support::execute(&p, &p.bind(&params).unwrap(), &inputs, &options(IndexChoice::Auto))
                .err()
                .unwrap_or_else(|| panic!("{what}: half the distance kept its promise"))
                .to_string();
            assert!(
                e.contains("along a normal of the box's faces") && e.contains("along the normal of faces"),
                "{what}: {e}"
            );
        }
    }
}

/// The key of `sdh`'s distance as its snippet computes it in f32
/// (`problems/distance.cu`): dx * dx, then fmaf of each other component.
fn sdh_distance_f32(a: [f32; 3], b: [f32; 3]) -> f32 {
    let d0 = a[0] - b[0];
    let mut sum = d0 * d0;
    for k in 1..3 {
        let d = a[k] - b[k];
        sum = d.mul_add(d, sum);
    }
    sum.max(0.0).sqrt()
}

#[test]
fn log_binned_counts_on_the_grid_land_pairs_on_edges_in_the_upper_bucket() {
    // The CPU counts keys edge by edge, 16 a comparison (AVX-512 where the
    // host has it), from runs whose keys are computed in whole vectors:
    // random points, and pairs exactly on each edge and one f32 step either
    // side of it, against the edge table pair by pair.
    let seed = seed();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let log = built_in("sdh").unwrap().with_spacing(Spacing::Log).unwrap();
    for bins in [20u32, 40] {
        let params = [format!("bins={bins}"), "r_min=0.001".into(), "r_max=0.1".into()];
        let edges = twobs::stage::contribution::histogram_edges(&log, &log.bind(&params).unwrap());
        let mut pts: Vec<[f32; 3]> = (0..1500).map(|_| [rng.random(), rng.random(), rng.random()]).collect();
        for &e in &edges {
            let e = e as f32;
            for x in [e.next_down(), e, e.next_up()] {
                let (y, z): (f32, f32) = (rng.random(), rng.random());
                // Along x from 0, the separation is x exactly; along y, x too.
                pts.push([0.0, y, z]);
                pts.push([x, y, z]);
                pts.push([y, 0.0, z]);
                pts.push([y, x, z]);
            }
        }
        let columns = (0..3).map(|k| Column::F32(pts.iter().map(|p| p[k]).collect())).collect();
        let inputs = Inputs { a: PointSet { columns, origin: "edges".into(), rows: None }, b: None };
        let got = run(&log, &params, &inputs, IndexChoice::Grid);
        assert_eq!(got.index.index, IndexKind::Grid, "{}", got.index.why);
        let mut want = vec![0u64; bins as usize];
        for i in 0..pts.len() {
            for j in i + 1..pts.len() {
                let d = sdh_distance_f32(pts[i], pts[j]) as f64;
                if d >= edges[0] && d < edges[bins as usize] {
                    want[edges.partition_point(|e| *e <= d) - 1] += 1;
                }
            }
        }
        assert!(want.iter().all(|&c| c > 0), "every bucket holds pairs: {want:?}");
        assert_eq!(got.outcome, Outcome::Totals(twobs::outcome::Totals::Counts(want)), "bins {bins}, seed {seed}");
    }
}
