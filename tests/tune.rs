//! `twobs tune` without a GPU: the sweep's walk and fit against runners whose
//! times follow a known law (each shape's plan made by the real planner, so
//! shapes the GPU cannot hold fail as they would), the tuned profile on disk,
//! and the planner reading a tuning.

use std::collections::BTreeMap;

use twobs::backend::cuda::GpuError;
use twobs::data::{InputOptions, Inputs, read_input};
use twobs::device::{Device, InputCache, KernelShape, TunedProfile, Tuning};
use twobs::outcome::{Outcome, Totals};
use twobs::plan::{Forced, Plan, Points};
use twobs::problems::built_in;
use twobs::run::RunError;
use twobs::stage::output::OutputStage;
use twobs::stage::output::totals::Store;
use twobs::tune::{self, Case, Keeps, TuneError, TuneOptions};

fn case(name: &str, sets: usize, given: &[&str], n: usize) -> Case {
    let problem = built_in(name).unwrap().with_sets(sets).unwrap();
    let params = problem.bind(&given.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    let components = problem.input.element.components();
    let set = |seed| read_input(&format!("uniform:{n}"), &components, &InputOptions { seed, ..Default::default() });
    let inputs = Inputs { a: set(1).unwrap(), b: (sets == 2).then(|| set(2).unwrap()) };
    Case { label: format!("{name} {} {n}", given.join(" ")), problem, params, inputs }
}

/// The shape the planner makes of `forced` for `case` on `dev`.
fn shape_of(dev: &Device, case: &Case, forced: Forced) -> Result<KernelShape, Box<RunError>> {
    let points = Points { a: case.inputs.a.len() as u64, b: case.inputs.b.as_ref().map(|b| b.len() as u64) };
    let plan = Plan::new(&case.problem, &case.params, dev, points, forced)
        .map_err(|e| Box::new(RunError::Gpu(GpuError::Plan(e))))?;
    let copies = match plan.output {
        OutputStage::Totals { store: Store::Shared { copies, .. }, .. } => copies,
        _ => 1,
    };
    Ok(KernelShape {
        block_size: plan.launch.block_size,
        points_per_thread: plan.launch.points_per_thread,
        copies,
        input_cache: plan.input_cache,
    })
}

fn answer() -> Outcome {
    Outcome::Totals(Totals::Counts(vec![3, 1, 4, 1, 5]))
}

/// Sweeps `cases` on the h200 profile with kernel times from `law`.
fn sweep_with(
    cases: &[Case],
    law: impl Fn(&Case, KernelShape) -> (Outcome, f64),
) -> Result<(tune::Sweep, usize), TuneError> {
    let dev = Device::profile("h200").unwrap();
    let runs = std::cell::Cell::new(0);
    let mut opts = TuneOptions {
        reps: 2,
        run: Box::new(|case: &Case, forced| {
            runs.set(runs.get() + 1);
            let shape = shape_of(&dev, case, forced)?;
            Ok(law(case, shape))
        }),
        prepare: Box::new(|_, _| {}),
        progress: Box::new(|_| {}),
    };
    let sweep = tune::sweep(&dev, cases, &mut opts)?;
    drop(opts);
    Ok((sweep, runs.get()))
}

fn octaves(x: u32, best: u32) -> f64 {
    (x as f64 / best as f64).log2().abs()
}

#[test]
fn the_walk_finds_the_fastest_shape_and_the_planner_then_picks_it() {
    // Every knob away from where the H200's sweep starts (B = 512, R = 4,
    // 16 copies, shared tiles).
    let best = KernelShape { block_size: 256, points_per_thread: 8, copies: 8, input_cache: InputCache::RegisterRoc };
    let law = |_: &Case, s: KernelShape| {
        let t = 1.0
            + 0.1 * octaves(s.block_size, 256)
            + 0.07 * octaves(s.points_per_thread, 8)
            + 0.05 * octaves(s.copies, 8)
            + if s.input_cache == InputCache::RegisterRoc { 0.0 } else { 0.2 };
        (answer(), t)
    };
    let cases = [case("sdh", 1, &["bins=50"], 1 << 18), case("sdh", 1, &["bins=500"], 1 << 18)];
    let (sweep, runs) = sweep_with(&cases, law).unwrap();
    assert_eq!(sweep.tuning.shared, best, "{}", sweep.table());
    for c in &sweep.cases {
        assert_eq!(c.keeps, Keeps::Shared);
        assert_eq!(c.best.shape, best);
        assert_eq!(c.planned.shape, best, "the planner reads the fitted shape: {}", sweep.table());
        assert!((c.planned_over_best() - 1.0).abs() < 1e-12);
        // Every knob's every value was timed from the best shape.
        for b in [128, 256, 512, 1024] {
            assert!(c.timed.iter().any(|t| t.shape == KernelShape { block_size: b, ..best }), "B = {b}");
        }
    }
    assert_eq!(sweep.served(), 2);
    // A walk, not every combination (3 x 6 x 4 x 4 = 288 shapes a case).
    assert!(runs < 2 * 60, "{runs} runs");
}

#[test]
fn cases_that_disagree_share_the_shape_least_above_their_bests() {
    // The 50-bucket case wants B = 256 badly, the 500-bucket one B = 1024 a little.
    let law = |c: &Case, s: KernelShape| {
        let wants = if c.label.contains("bins=50 ") { 256 } else { 1024 };
        let penalty = if wants == 256 { 0.5 } else { 0.1 };
        (answer(), 1.0 + if s.block_size == wants { 0.0 } else { penalty })
    };
    let cases = [case("sdh", 1, &["bins=50"], 1 << 18), case("sdh", 1, &["bins=500"], 1 << 18)];
    let (sweep, _) = sweep_with(&cases, law).unwrap();
    assert_eq!(sweep.tuning.shared.block_size, 256, "{}", sweep.table());
    assert_eq!(sweep.served(), 1, "the other case is 10% above its best: {}", sweep.table());
    assert!((sweep.cases[1].planned_over_best() - 1.1).abs() < 1e-9);
}

fn some_shape() -> KernelShape {
    KernelShape { block_size: 256, points_per_thread: 2, copies: 16, input_cache: InputCache::RegisterShm }
}

#[test]
fn a_shape_that_finds_another_result_stops_the_sweep() {
    let law = |_: &Case, s: KernelShape| {
        let outcome =
            if s.points_per_thread == 8 { Outcome::Totals(Totals::Counts(vec![3, 1, 4, 1, 6])) } else { answer() };
        (outcome, 1.0 / s.points_per_thread as f64)
    };
    let err = sweep_with(&[case("sdh", 1, &["bins=5"], 1 << 18)], law).unwrap_err();
    match err {
        TuneError::Disagrees { shape, .. } => assert_eq!(shape.points_per_thread, 8),
        other => panic!("{other}"),
    }
}

#[test]
fn counts_tune_the_shape_of_totals_in_registers() {
    let law = |_: &Case, s: KernelShape| {
        assert_eq!(s.copies, 1, "counts keep no shared copies");
        (Outcome::Totals(Totals::Counts(vec![7])), 1.0 + 0.1 * octaves(s.points_per_thread, 8))
    };
    // 2^20 points: R = 8 at the H200's B = 512 still gives every multiprocessor a block.
    let (sweep, _) = sweep_with(&[case("2pcf", 1, &["r=0.1"], 1 << 20)], law).unwrap();
    assert_eq!(sweep.cases[0].keeps, Keeps::Registers);
    assert_eq!(sweep.tuning.registers.points_per_thread, 8);
    // No histogram was swept: the shared shape stays the planner's.
    assert_eq!(sweep.tuning.shared, Device::profile("h200").unwrap().tuning.unwrap().shared);
}

#[test]
fn pair_outputs_are_refused_by_name() {
    let err = sweep_with(&[case("selfjoin", 1, &[], 1000)], |_, _| (answer(), 1.0)).unwrap_err();
    assert!(matches!(err, TuneError::NotTotals { .. }), "{err}");
    assert!(err.to_string().contains("selfjoin"), "{err}");
}

fn tuning(shared: KernelShape) -> Tuning {
    Tuning { shared, registers: KernelShape { copies: 1, ..shared }, source: "a test".into() }
}

#[test]
fn the_planner_takes_the_tuned_shapes_and_a_problem_s_own_first() {
    let shape = KernelShape { block_size: 512, points_per_thread: 4, copies: 8, input_cache: InputCache::RegisterRoc };
    let mut dev = Device::profile("h200").unwrap();
    dev.tuning = Some(tuning(shape));
    let sdh = case("sdh", 1, &["bins=50"], 1 << 20);
    assert_eq!(shape_of(&dev, &sdh, Forced::default()).unwrap(), shape);
    let pcf = case("2pcf", 1, &["r=0.1"], 1 << 20);
    assert_eq!(shape_of(&dev, &pcf, Forced::default()).unwrap(), KernelShape { copies: 1, ..shape });
    let own = KernelShape { block_size: 128, points_per_thread: 1, copies: 2, input_cache: InputCache::Shuffle };
    dev.tuned_problems.insert("sdh".into(), tuning(own));
    assert_eq!(shape_of(&dev, &sdh, Forced::default()).unwrap(), own);
    assert_eq!(shape_of(&dev, &pcf, Forced::default()).unwrap(), KernelShape { copies: 1, ..shape });
    // Few points: R halves until the blocks cover half the 132 multiprocessors.
    dev.tuned_problems.clear();
    dev.tuning = Some(tuning(KernelShape { block_size: 1024, points_per_thread: 8, ..shape }));
    let few = case("sdh", 1, &["bins=50"], 1 << 18);
    assert_eq!(shape_of(&dev, &few, Forced::default()).unwrap().points_per_thread, 2);
    assert_eq!(shape_of(&dev, &sdh, Forced::default()).unwrap().points_per_thread, 8);
    // Copies that do not fit beside the tile leave the choice to the copy model.
    dev.tuning = Some(tuning(KernelShape { copies: 32, ..shape }));
    let wide = case("sdh", 1, &["bins=4000"], 1 << 20);
    assert!(shape_of(&dev, &wide, Forced::default()).unwrap().copies < 32);
}

fn profile() -> TunedProfile {
    TunedProfile {
        device: "NVIDIA H200".into(),
        compute_capability: (9, 0),
        tuning: Some(tuning(some_shape())),
        problems: BTreeMap::from([("sdh".to_owned(), tuning(KernelShape { block_size: 1024, ..some_shape() }))]),
        sweeps: BTreeMap::new(),
    }
}

#[test]
fn a_tuned_profile_goes_to_disk_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = TunedProfile::path_in(dir.path(), "NVIDIA H200 (SXM) ");
    assert_eq!(path.file_name().unwrap(), "nvidia-h200--sxm.json");
    assert!(TunedProfile::read(&path).unwrap().is_none());
    profile().write(&path).unwrap();
    assert_eq!(TunedProfile::read(&path).unwrap(), Some(profile()));
    // The live device takes its shapes, a problem's own beside them.
    let mut live = Device::profile("h200").unwrap();
    live.tuning = None;
    let tuned = profile().apply(live, &path).unwrap();
    assert!(tuned.origin.ends_with(&format!("shapes from {}", path.display())), "{}", tuned.origin);
    assert_eq!(tuned.tuning_for("sdh").unwrap().shared.block_size, 1024);
    assert_eq!(tuned.tuning_for("rdf").unwrap().shared, some_shape());
}

#[test]
fn a_file_that_is_no_profile_is_named_and_never_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nvidia-h200.json");
    std::fs::write(&path, "my notes, not a profile\n").unwrap();
    let err = TunedProfile::read(&path).unwrap_err().to_string();
    assert!(err.contains(&path.display().to_string()) && err.contains("twobs tune"), "{err}");
    let err = profile().write(&path).unwrap_err().to_string();
    assert!(err.contains("not replaced"), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "my notes, not a profile\n");
}

#[test]
fn a_profile_measured_on_another_architecture_is_refused() {
    let mut live = Device::profile("a100").unwrap();
    live.name = "NVIDIA H200".into();
    let err = profile().apply(live, std::path::Path::new("nvidia-h200.json")).unwrap_err().to_string();
    assert!(err.contains("sm_90") && err.contains("sm_80"), "{err}");
}

#[test]
fn a_shape_is_judged_by_what_the_planner_makes_of_it_on_each_case() {
    // 1M points run best at R = 4, 262,144 at R = 2 (R = 4 at B = 1024 would
    // leave half the multiprocessors without a block; the planner halves it).
    let law = |c: &Case, s: KernelShape| {
        let large = c.inputs.a.len() > 1 << 19;
        let r_cost = match (large, s.points_per_thread) {
            (true, 4) => 0.0,
            (true, _) => 0.1,
            (false, 2) => 0.0,
            (false, _) => 1.0,
        };
        (answer(), 1.0 + r_cost + if s.block_size == 1024 { 0.0 } else { 0.2 })
    };
    let cases = [case("sdh", 1, &["bins=50"], 1 << 18), case("sdh", 1, &["bins=50"], 1 << 20)];
    let (sweep, _) = sweep_with(&cases, law).unwrap();
    assert_eq!(sweep.tuning.shared.points_per_thread, 4, "{}", sweep.table());
    assert_eq!(sweep.cases[0].planned.shape.points_per_thread, 2, "{}", sweep.table());
    assert_eq!(sweep.served(), 2, "{}", sweep.table());
}

#[test]
fn the_fit_serves_the_most_cases_before_the_least_mean() {
    // B = 512 (where the H200's sweep starts) is 3% above the best on both
    // cases; B = 1024 is best on one and 5.5% above on the other: 512 serves
    // both, though its geometric mean (1.030) is above 1024's (1.027).
    let law = |c: &Case, s: KernelShape| {
        let first = c.label.contains("bins=50 ");
        let t = match (s.block_size, first) {
            (512, _) => 1.03,
            (1024, true) => 1.0,
            (1024, false) => 1.055,
            (256, false) => 1.0,
            _ => 1.5,
        };
        (answer(), t)
    };
    let cases = [case("sdh", 1, &["bins=50"], 1 << 18), case("sdh", 1, &["bins=500"], 1 << 18)];
    let (sweep, _) = sweep_with(&cases, law).unwrap();
    assert_eq!(sweep.tuning.shared.block_size, 512, "{}", sweep.table());
    assert_eq!(sweep.served(), 2, "{}", sweep.table());
}

#[test]
fn a_problem_s_sweep_is_stored_beside_what_the_profile_held() {
    let dir = tempfile::tempdir().unwrap();
    let path = TunedProfile::path_in(dir.path(), "NVIDIA H200");
    profile().write(&path).unwrap();
    let law = |_: &Case, s: KernelShape| (answer(), 1.0 + 0.1 * octaves(s.block_size, 128));
    let (sweep, _) = sweep_with(&[case("sdh", 1, &["bins=50"], 1 << 18)], law).unwrap();
    let mut dev = Device::profile("h200").unwrap();
    dev.name = "NVIDIA H200".into();
    tune::store(&sweep, &dev, Some("rdf"), &path).unwrap();
    let stored = TunedProfile::read(&path).unwrap().unwrap();
    assert_eq!(stored.tuning, profile().tuning, "the general shapes stay");
    assert_eq!(stored.problems["sdh"], profile().problems["sdh"], "another problem's shapes stay");
    assert_eq!(stored.problems["rdf"].shared.block_size, 128);
    assert!(stored.problems["rdf"].source.contains(&path.display().to_string()));
    assert!(stored.sweeps.contains_key("rdf"));
    // Without a problem, the general shapes are replaced.
    tune::store(&sweep, &dev, None, &path).unwrap();
    let stored = TunedProfile::read(&path).unwrap().unwrap();
    assert_eq!(stored.tuning.unwrap().shared.block_size, 128);
    assert_eq!(stored.problems.len(), 2);
}
