//! A box read at run time (`BoxTime::Run`: one kernel or driver for every
//! box of an NPT trajectory) gives the bits a box folded into the code gives,
//! on the CPU backend: orthorhombic and triclinic boxes, one set and two,
//! every pair and the grid, on fresh random points; and a trajectory of three
//! frames with three boxes builds one driver and adds up to its frames run
//! alone. The seed is printed; TWOBS_TEST_SEED repeats a run.

mod support;

use rand::{RngExt, SeedableRng};
use support::RunOptions;
use twobs::cache::Cache;
use twobs::data::{Column, Inputs, Outside, PointSet};
use twobs::index::{IndexChoice, IndexKind};
use twobs::outcome::Outcome;
use twobs::problems::built_in;
use twobs::run::BackendChoice;
use twobs::schedule::GpuOptions;
use twobs::spec::{BoxTime, Params, PeriodicBox, Problem, Scalar};

fn seed() -> u64 {
    let s = std::env::var("TWOBS_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    println!("TWOBS_TEST_SEED={s}");
    s
}

/// A cache of this test's own, so that the drivers it builds can be counted.
fn options(index: IndexChoice, cache: &str) -> RunOptions {
    RunOptions {
        backend: BackendChoice::Cpu,
        threads: 2,
        f64: false,
        quiet: true,
        gpu: GpuOptions::default(),
        verify: false,
        index,
        cache: Cache::at(format!("{}/twobs-run-time-box-{cache}", env!("CARGO_TARGET_TMPDIR"))),
        ranks: None,
    }
}

/// The CPU drivers of `problem` in the cache (its key probes aside).
fn drivers(opts: &RunOptions, problem: &str) -> usize {
    let dir = opts.cache.dir().join("cpu");
    std::fs::read_dir(&dir).map_or(0, |d| {
        d.filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(&format!("{problem}-")) && !n.contains("-keys-") && n.ends_with(".so"))
            .count()
    })
}

/// `n` points spread uniformly over `b` (fractional coordinates in [0, 1)), in f32.
fn points_in(rng: &mut rand::rngs::StdRng, b: &PeriodicBox, n: usize, origin: &str) -> PointSet {
    let mut columns: Vec<Vec<f32>> = (0..3).map(|_| Vec::with_capacity(n)).collect();
    for _ in 0..n {
        let s = [rng.random::<f64>(), rng.random::<f64>(), rng.random::<f64>()];
        for (c, x) in columns.iter_mut().zip(b.cartesian(s)) {
            c.push(x as f32);
        }
    }
    let mut set =
        PointSet { columns: columns.into_iter().map(Column::F32).collect(), origin: origin.into(), rows: None };
    // f32 rounding may put a point a hair outside: back in, as the command line's --outside-box wrap does.
    set.into_box(("box", b), Some(Outside::Wrap)).unwrap();
    set
}

fn inputs(rng: &mut rand::rngs::StdRng, b: &PeriodicBox, sets: usize, n: usize) -> Inputs {
    let a = points_in(rng, b, n, "set A");
    let other = (sets == 2).then(|| points_in(rng, b, n * 3 / 4, "set B"));
    Inputs { a, b: other }
}

fn rdf(sets: usize) -> Problem {
    built_in("rdf").unwrap().with_sets(sets).unwrap()
}

fn bind(problem: &Problem, b: &str, r_max: &str) -> Params {
    problem.bind(&[format!("box={b}"), format!("r_max={r_max}"), "bins=64".into()]).unwrap()
}

fn counts(outcome: &Outcome) -> u64 {
    match outcome {
        Outcome::Totals(t) => t.as_f64().iter().sum::<f64>() as u64,
        _ => unreachable!("g(r) is a histogram"),
    }
}

#[test]
fn a_box_read_at_run_time_gives_the_folded_boxs_bits() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    // Each box with one set and two, each visit once (a driver build is seconds).
    let cases = [
        ("orthorhombic", "10,11,12", 1, IndexChoice::Grid),
        ("orthorhombic", "10,11,12", 2, IndexChoice::None),
        ("triclinic", "10,11,12,0.3,-0.2,0.1", 1, IndexChoice::None),
        ("triclinic", "10,11,12,0.3,-0.2,0.1", 2, IndexChoice::Grid),
        // The CPU's f64 mode (RunTimeBox<double>, the snippet's float read as double).
        ("triclinic, f64", "10,11,12,0.3,-0.2,0.1", 1, IndexChoice::Grid),
    ];
    for (shape, b, sets, index) in cases {
        let problem = rdf(sets);
        let folded = bind(&problem, b, "2.5");
        let at_run_time = folded.with_box_at_run_time();
        assert_eq!(at_run_time.box_time, BoxTime::Run);
        let (_, pbox) = problem.periodic_box(&folded).unwrap();
        let inputs = inputs(&mut rng, &pbox, sets, 3000);
        let opts = RunOptions { f64: shape.ends_with("f64"), ..options(index, "parity") };
        let what = format!("{shape} box {b}, {sets} set(s), index {index:?}");
        let want = support::execute(&problem, &folded, &inputs, &opts).unwrap();
        let got = support::execute(&problem, &at_run_time, &inputs, &opts).unwrap();
        assert_eq!(want.box_time, BoxTime::Compile, "{what}");
        assert_eq!(got.box_time, BoxTime::Run, "{what}");
        assert_eq!(got.device.contains("f64 arithmetic"), opts.f64, "{what}: {}", got.device);
        let expected = if index == IndexChoice::Grid { IndexKind::Grid } else { IndexKind::None };
        assert_eq!(got.index.index, expected, "{what}: {}", got.index.why);
        if let Some(d) = got.outcome.difference(&want.outcome) {
            panic!("{what}: the run-time box differs from the folded one: {d}");
        }
        assert!(counts(&want.outcome) > 1000, "{what}: too few pairs counted to compare");
    }
}

#[test]
fn a_trajectory_of_three_boxes_builds_one_driver_and_adds_up_its_frames() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    // An NPT-like trajectory: each frame's box a little larger, the last tilted.
    let boxes = ["9.9,10.1,10.3", "10.05,10.2,9.95", "10.2,10.0,10.1,0.05,0.02,-0.04"];
    for sets in [1, 2] {
        let problem = rdf(sets);
        let frame_params: Vec<Params> = boxes.iter().map(|b| bind(&problem, b, "3.1")).collect();
        let frames: Vec<Inputs> =
            frame_params.iter().map(|p| inputs(&mut rng, &problem.periodic_box(p).unwrap().1, sets, 2000)).collect();
        // One set on the grid, two over every pair.
        let index = if sets == 1 { IndexChoice::Grid } else { IndexChoice::None };
        {
            // Each case its own cache: the drivers built are this case's. (A
            // driver the process loaded before is not built again: this test's
            // r_max, in every driver's source, is no other test's.)
            let opts = options(index, &format!("trajectory-{sets}-{index:?}-{}", rng.random::<u64>()));
            let what = format!("{sets} set(s), index {index:?}");
            let before = twobs::cache::programs();
            let all = support::execute_frames(&problem, &frame_params, &frames, &opts).unwrap();
            assert_eq!(all.box_time, BoxTime::Run, "{what}");
            assert!(all.notes.iter().any(|n| n.contains("read at run time")), "{what}: {:?}", all.notes);
            assert_eq!(drivers(&opts, &problem.name), 1, "{what}: one driver for three boxes");
            assert!(twobs::cache::programs() > before, "{what}: the counter counts the driver");
            // Each frame alone, its box folded: a driver each, and the same sums.
            let mut alone: Option<Outcome> = None;
            for (p, inputs) in frame_params.iter().zip(&frames) {
                let one = support::execute(&problem, p, inputs, &opts).unwrap();
                assert_eq!(one.box_time, BoxTime::Compile);
                alone = Some(match (alone, one.outcome) {
                    (None, o) => o,
                    (Some(Outcome::Totals(mut sum)), Outcome::Totals(more)) => {
                        sum.add(&more);
                        Outcome::Totals(sum)
                    }
                    _ => unreachable!("histograms"),
                });
            }
            assert_eq!(drivers(&opts, &problem.name), 4, "{what}: three folded drivers beside the run-time one");
            let alone = alone.unwrap();
            if let Some(d) = all.outcome.difference(&alone) {
                panic!("{what}: the trajectory differs from its frames run alone: {d}");
            }
            assert!(counts(&alone) > 1000, "{what}: too few pairs counted to compare");
        }
    }
}

#[test]
fn one_box_for_every_frame_stays_folded() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let problem = rdf(1);
    let params = bind(&problem, "10", "2");
    let (_, b) = problem.periodic_box(&params).unwrap();
    let frames: Vec<Inputs> = (0..2).map(|_| inputs(&mut rng, &b, 1, 500)).collect();
    let exec =
        support::execute_frames(&problem, &[params.clone(), params], &frames, &options(IndexChoice::None, "one"))
            .unwrap();
    assert_eq!(exec.box_time, BoxTime::Compile);
}

#[test]
fn a_run_time_box_has_the_f32_numbers_the_compiler_folds() {
    let b = PeriodicBox::parse(Scalar::F32, "3,7,10.1,0.3,0.2,0.1").unwrap();
    let n = b.run_time_numbers();
    assert_eq!(n[6], f64::from(1.0f32 / 3.0f32));
    assert_eq!(n[8], f64::from(1.0f32 / 10.1f32));
    assert_eq!(n[9], f64::from(0.3f32 * 7.0f32));
    assert_eq!(n[10], f64::from(0.2f32 * 10.1f32));
    assert_ne!(n[10], 0.2f32 as f64 * 10.1f32 as f64, "rounded once in f32, not in f64");
}

/// The GPU's kernels with a run-time box compile under NVRTC without warnings
/// (every pair with one set, the grid with two), hold none of the box's numbers
/// (two boxes render the same source, so the cache hands one kernel for both
/// and never a folded one), and define the `__constant__` the runner sets
/// by name (`_ZN6params3boxE`).
#[test]
fn the_gpus_run_time_box_kernels_compile_and_hold_no_box() {
    if let Err(why) = twobs::backend::cuda::nvrtc::available() {
        panic!("{why}. Run the suite through scripts/test.sh, which installs it.");
    }
    let dev = twobs::device::Device::profile("h100").unwrap();
    let arch = dev.arch();
    // One set over every pair, two on the grid (an NVRTC compile is seconds).
    for (sets, grid) in [(1, false), (2, true)] {
        let problem = rdf(sets);
        let points = twobs::plan::Points { a: 100_000, b: (sets == 2).then_some(80_000) };
        let one = bind(&problem, "10.25,11,12", "2.5").with_box_at_run_time();
        let other = bind(&problem, "10,11.5,12,0.25,0.5,-0.125", "2.5").with_box_at_run_time();
        let folded = bind(&problem, "10.25,11,12", "2.5");
        {
            let plan_of = |p: &Params| {
                if grid {
                    twobs::plan::Plan::grid(&problem, p, &dev, points, Default::default()).unwrap()
                } else {
                    twobs::plan::Plan::new(&problem, p, &dev, points, Default::default()).unwrap()
                }
            };
            let what = format!("{sets} set(s), grid {grid}");
            let plan = plan_of(&one);
            assert_eq!(plan.box_time, BoxTime::Run, "{what}");
            assert!(plan.to_string().contains("run time"), "{what}: the plan says where the box is:\n{plan}");
            let kernel = twobs::codegen::render(&problem, &one, &plan, &dev, "test");
            let again = twobs::codegen::render(&problem, &other, &plan_of(&other), &dev, "test");
            assert_eq!(kernel.source, again.source, "{what}: two boxes, one source");
            assert!(!kernel.source.contains("10.25"), "{what}: the box's numbers are not in the source");
            let folded_kernel = twobs::codegen::render(&problem, &folded, &plan_of(&folded), &dev, "test");
            assert!(folded_kernel.source.contains("10.25"), "{what}: a folded box is");
            assert_ne!(folded_kernel.source, kernel.source, "{what}");
            let compiled =
                twobs::backend::cuda::nvrtc::compile(&kernel, &arch).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert!(!compiled.log.contains("warning"), "{what}: {}", compiled.log);
            let symbol = b"_ZN6params3boxE";
            assert!(compiled.cubin.windows(symbol.len()).any(|w| w == symbol), "{what}: the cubin names params::box");
        }
    }
}
