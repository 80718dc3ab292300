//! The planner against the paper: the decision tree of Fig. 9 and the copy
//! counts of Table 5.

use twobs::device::Device;
use twobs::plan::{Forced, Plan, PlanError, Points};
use twobs::problems::built_in;
use twobs::spec::Problem;
use twobs::stage::contribution::Test;
use twobs::stage::input::InputCache;
use twobs::stage::output::totals::CopyModel;
use twobs::stage::output::{OutputChoice, OutputClass};
use twobs::stage::visit::Visit;

fn plan(name: &str, device: &str, n: u64, params: &[&str], forced: Forced) -> Result<Plan, PlanError> {
    plan_of(built_in(name).unwrap(), device, n, params, forced)
}

fn plan_of(p: Problem, device: &str, n: u64, params: &[&str], forced: Forced) -> Result<Plan, PlanError> {
    let params = p.bind(&params.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    let dev = Device::profile(device).unwrap();
    let b = matches!(p.input.sets, twobs::spec::Sets::Two).then_some(n);
    Plan::new(&p, &params, &dev, Points { a: n, b }, forced)
}

/// The output stage's name and copy count.
fn output(p: &Plan) -> (OutputChoice, u32) {
    use twobs::stage::output::{OutputStage, totals::Store};
    match p.output {
        OutputStage::Totals { store: Store::Shared { copies, .. }, .. } => (p.output.choice(), copies),
        other => (other.choice(), 1),
    }
}

/// The copy count the model picks for SDH with `bins` buckets on the Titan XP,
/// 512,000 points, in the paper's setup: 64-bit output ("our paper focuses on
/// 64-bit output data type", section 3.3), B = 64, register_roc input (no
/// tile in shared memory), 32 registers. (twobs itself counts in 32 bits
/// where no copy can overflow: see `shared_copies_count_in_32_bits_when_they_cannot_overflow`.)
fn titanxp_copies(bins: u32) -> u32 {
    let dev = Device::profile("titanxp").unwrap();
    CopyModel::new(&dev, bins, 8, 0, 64, 32, 512_000).expect("fits").best
}

/// Table 5, theoretical column: the first output size at which each copy count is chosen.
const TABLE5: [(u32, u32); 6] = [(32, 1), (16, 11), (8, 31), (4, 66), (2, 151), (1, 451)];

#[test]
fn copy_counts_follow_table5_of_the_paper() {
    let choices: Vec<u32> = (1..=1000).map(titanxp_copies).collect();
    // Never more copies for a larger output.
    for w in choices.windows(2) {
        assert!(w[1] <= w[0], "copy count rises with output size: {choices:?}");
    }
    for (copies, paper_start) in TABLE5 {
        let start = choices.iter().position(|&c| c == copies).map(|i| i as u32 + 1);
        let start = start.unwrap_or_else(|| panic!("{copies} copies never chosen: {choices:?}"));
        let error = (start as f64 - paper_start as f64).abs() / paper_start as f64;
        println!(
            "{copies:>2} copies from {start:>3} buckets (paper {paper_start:>3}): {:+.0}%",
            100.0 * (start as f64 / paper_start as f64 - 1.0)
        );
        assert!(error <= 0.25, "{copies} copies start at {start}, the paper at {paper_start}");
    }
}

#[test]
fn type_i_outputs_go_to_registers_with_shared_tiles() {
    for name in ["2pcf", "kde"] {
        let p = plan(name, "h100", 1_000_000, &[], Forced::default()).unwrap();
        assert_eq!(p.class, OutputClass::TypeI);
        assert_eq!((p.input_cache, output(&p).0), (InputCache::RegisterShm, OutputChoice::Register), "{name}");
    }
    // Two buckets of 8 bytes still fit alpha = 16 bytes.
    let p = plan("sdh", "h100", 1_000_000, &["bins=2"], Forced::default()).unwrap();
    assert_eq!((p.class, output(&p).0), (OutputClass::TypeI, OutputChoice::Register));
    let p = plan("sdh", "h100", 1_000_000, &["bins=3"], Forced::default()).unwrap();
    assert_eq!(p.class, OutputClass::TypeII);
}

#[test]
fn type_ii_histograms_are_privatized_with_read_only_input() {
    // The paper's RDF case study: RoC input and privatized output, more copies for fewer buckets.
    let rdf = built_in("rdf").unwrap().with_sets(2).unwrap();
    let large = plan_of(rdf.clone(), "titanxp", 1_000_000, &["bins=500"], Forced::default()).unwrap();
    let small = plan_of(rdf, "titanxp", 1_000_000, &["bins=50"], Forced::default()).unwrap();
    for p in [&large, &small] {
        assert_eq!(p.input_cache, InputCache::RegisterRoc);
        assert!(matches!(output(p).0, OutputChoice::Op | OutputChoice::Aop), "{:?}", p.output);
        assert_eq!(p.shape.visit, Visit::Cross);
    }
    assert!(output(&small).1 > output(&large).1, "{:?} {:?}", small.output, large.output);
    // In the paper's 64-bit setup: 500 buckets -> OP, 50 -> AOP.
    let dev = Device::profile("titanxp").unwrap();
    let model = |bins| CopyModel::new(&dev, bins, 8, 0, 64, 32, 1_000_000).unwrap().best;
    assert_eq!(model(500), 1);
    assert!(model(50) > 1);
}

#[test]
fn shared_copies_count_in_32_bits_and_launches_cannot_overflow_them() {
    use twobs::stage::output::{
        OutputStage,
        totals::{Counter, Store},
    };
    let counter = |p: &Plan| match p.output {
        OutputStage::Totals { store: Store::Shared { counter, .. }, .. } => counter,
        other => panic!("{other:?}"),
    };
    // A block's own points (B x R) all may share one copy: each launch lets
    // every own point meet so few partners that the copy stays below 2^32.
    let f = Forced {
        block_size: Some(1024),
        output: Some(OutputChoice::Op),
        points_per_thread: Some(2),
        ..Default::default()
    };
    for (forced, points) in
        [(Forced::default(), 1_000_000), (Forced::default(), 10_000_000), (f, 4_000_000), (f, 1 << 31)]
    {
        let p = plan("sdh", "h100", points, &[], forced).unwrap();
        assert_eq!(counter(&p), Counter::U32, "{points} points");
        let own = u64::from(p.launch.block_size * p.launch.points_per_thread);
        let bound = p.launch.partners_per_launch.expect("32-bit counters bound the launches");
        assert!(own * bound <= u64::from(u32::MAX) && own * (bound + 1) > u64::from(u32::MAX), "{points}: {bound}");
    }
    // Register tallies are 32-bit too, and so are their block sums.
    let p = plan("2pcf", "h200", 1_000_000, &["r=0.1"], Forced::default()).unwrap();
    assert!(matches!(p.output, OutputStage::Totals { store: Store::Registers, .. }), "{:?}", p.output);
    let own = u64::from(p.launch.block_size * p.launch.points_per_thread);
    assert_eq!(p.launch.partners_per_launch, Some(u64::from(u32::MAX) / own));
    // Sums add in f64, unbounded.
    let p =
        plan("kde", "h100", 1_000_000, &[], Forced { output: Some(OutputChoice::Op), ..Default::default() }).unwrap();
    assert_eq!(counter(&p), Counter::Total);
    assert_eq!(p.launch.partners_per_launch, None);
}

#[test]
fn type_iii_outputs_use_the_direct_output_buffer() {
    for name in ["selfjoin", "nlj"] {
        let p = plan(name, "h100", 1_000_000, &[], Forced::default()).unwrap();
        assert_eq!(
            (p.class, p.input_cache, output(&p).0),
            (OutputClass::TypeIII, InputCache::RegisterShm, OutputChoice::Dob),
            "{name}"
        );
        let twobs::stage::output::OutputStage::Dob { page_pairs } = p.output else { panic!("{:?}", p.output) };
        assert!(page_pairs >= 32, "a warp's 32 pairs must fit one fresh page");
    }
    // A histogram beyond shared memory goes to global atomics.
    let p = plan("sdh", "h100", 1_000_000, &["bins=100000"], Forced::default()).unwrap();
    assert_eq!((p.class, output(&p).0), (OutputClass::TypeIII, OutputChoice::Global));
}

#[test]
fn knn_keeps_k_per_query_over_all_ordered_pairs() {
    let p = plan("knn", "h100", 1_000_000, &[], Forced::default()).unwrap();
    assert_eq!((p.class, output(&p).0, p.shape.visit), (OutputClass::PerQuery, OutputChoice::Topk, Visit::AllPairs));
}

#[test]
fn visits_follow_sets_and_symmetry() {
    assert_eq!(plan("sdh", "h100", 1000, &[], Forced::default()).unwrap().shape.visit, Visit::LowerTriangle);
    assert_eq!(plan("sdh", "h100", 1000, &[], Forced::default()).unwrap().shape.pairs, 1000 * 999 / 2);
    assert_eq!(plan("nlj", "h100", 1000, &[], Forced::default()).unwrap().shape.pairs, 1000 * 1000);
}

#[test]
fn small_inputs_use_smaller_blocks_so_every_multiprocessor_works() {
    let p = plan("2pcf", "h100", 5000, &[], Forced::default()).unwrap();
    assert!(p.launch.grid >= 132 / 2, "grid {} for 5000 points", p.launch.grid);
}

#[test]
fn hopper_totals_and_grids_take_their_measured_shapes() {
    // Totals on Hopper take blocks of 512 of 4 own points a thread (measured
    // on the H200), grids blocks of 256 of 2; the paper's 512 elsewhere.
    let hopper = plan("2pcf", "h100", 10_000_000, &[], Forced::default()).unwrap();
    assert_eq!((hopper.launch.block_size, hopper.launch.points_per_thread), (512, 4));
    let (p, dev) = (built_in("2pcf").unwrap(), Device::profile("h100").unwrap());
    let points = Points { a: 10_000_000, b: None };
    let grid = Plan::grid(&p, &p.bind(&[]).unwrap(), &dev, points, Forced::default()).unwrap();
    assert_eq!((grid.launch.block_size, grid.launch.points_per_thread), (256, 2));
    assert_eq!(plan("2pcf", "titanxp", 10_000_000, &[], Forced::default()).unwrap().launch.block_size, 512);
}

#[test]
fn impossible_forced_choices_say_why() {
    let err =
        |name: &str, params: &[&str], f: Forced| format!("{:#}", plan(name, "h100", 100_000, params, f).unwrap_err());
    let e = err("sdh", &[], Forced { output: Some(OutputChoice::Register), ..Default::default() });
    assert!(e.contains("register is impossible: the output is 4000 B per thread") && e.contains("alpha = 16 B"), "{e}");
    let e = err("sdh", &[], Forced { output: Some(OutputChoice::Dob), ..Default::default() });
    assert!(e.contains("dob cannot produce a histogram output; possible: register, op, aop, global"), "{e}");
    let e = err("sdh", &["bins=4000"], Forced { copies: Some(32), ..Default::default() });
    assert!(e.contains("needs 518272 B of shared memory per block") && e.contains("at most 232448 B"), "{e}");
    let keys = Forced { copies: Some(32), test: Some(Test::Keys), ..Default::default() };
    let e = err("sdh", &["bins=4000"], keys);
    assert!(e.contains("512128 B for 32 output copies + 0 B of key edges"), "{e}");
    let e = err("kde", &[], Forced { test: Some(Test::Keys), ..Default::default() });
    assert!(e.contains("`kde` cannot be tested on keys"), "{e}");
    let e = err("sdh", &[], Forced { copies: Some(3), ..Default::default() });
    assert!(e.contains("one of 1, 2, 4, 8, 16, 32"), "{e}");
    let e = err("kde", &[], Forced { output: Some(OutputChoice::Topk), ..Default::default() });
    assert!(e.contains("topk cannot produce a sum output; possible: register, op, aop, global"), "{e}");
    let e = err("sdh", &[], Forced { output: Some(OutputChoice::Op), copies: Some(4), ..Default::default() });
    assert!(e.contains("4 copies with the op output stage"), "{e}");
    let e = err("sdh", &[], Forced { block_size: Some(100), ..Default::default() });
    assert!(e.contains("power of two from 32 to 1024"), "{e}");
}

#[test]
fn worse_forced_choices_are_called_out() {
    let p = plan("sdh", "titanxp", 512_000, &["bins=20"], Forced { copies: Some(1), ..Default::default() }).unwrap();
    assert_eq!(output(&p), (OutputChoice::Op, 1));
    let notes = p.notes.join("\n");
    let best = p.copy_model.as_ref().unwrap().best;
    assert!(best > 1);
    assert!(
        notes.contains("1 copies: the model predicts") && notes.contains(&format!("the cost of {best} copies")),
        "{notes}"
    );
    assert!(notes.contains("output op is forced; the planner chooses aop"), "{notes}");
    let p = plan("2pcf", "h100", 1_000_000, &[], Forced { input_cache: Some(InputCache::Naive), ..Default::default() })
        .unwrap();
    assert!(p.notes[0].contains("input_cache naive is forced; the planner chooses register_shm"), "{:?}", p.notes);
}

#[test]
fn every_listed_variant_plans() {
    for name in twobs::problems::BUILT_IN {
        let p = built_in(name).unwrap();
        let params = p.bind(&[]).unwrap();
        let dev = Device::profile("h100").unwrap();
        let points = Points { a: 1_000_000, b: None };
        let variants = twobs::plan::variants(&p, &params, points);
        assert!(variants.len() >= 4, "{name}");
        for f in variants {
            Plan::new(&p, &params, &dev, points, f).unwrap_or_else(|e| panic!("{name} {f:?}: {e:#}"));
        }
    }
}

/// SDH on 1,000,000 uniform points on an H100, register_roc input, B = 64:
/// measured pairs/s (x 1e11) for 1 to 32 copies (docs/benchmarks.md, "The copy model on Hopper").
const H100_SDH: [(u32, [f64; 6]); 2] =
    [(50, [2.192, 2.380, 2.465, 2.427, 2.427, 2.419]), (500, [2.552, 2.544, 2.230, 1.495, 0.7148, 0.2454])];

/// Squared log error between the model's R x L and the measured times, each
/// bucket count up to a scale of its own.
fn h100_fit_error(c_lp: f64) -> f64 {
    let dev = Device::profile("h100").unwrap();
    let constants = twobs::device::ModelConstants { c_l: 1.0, c_lp, source: "fit" };
    let mut err = 0.0;
    for (bins, rates) in H100_SDH {
        let problem = twobs::model::CopyProblem {
            slots: bins,
            bytes_per_slot: 8,
            other_shared_bytes: 0,
            block_size: 64,
            registers_per_thread: 32,
            total_threads: 1_000_000u64.div_ceil(64) * 64,
        };
        let rows = twobs::model::copy_table(&dev, problem, constants);
        let logs: Vec<f64> = rows.iter().zip(rates).map(|(r, rate)| (1.0 / rate / r.cost.unwrap()).ln()).collect();
        let mean = logs.iter().sum::<f64>() / logs.len() as f64;
        err += logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>();
    }
    err
}

#[test]
fn hopper_constants_are_the_best_fit_to_the_measured_times() {
    let best =
        (0..=200).map(|i| i as f64 * 0.01).min_by(|a, b| h100_fit_error(*a).total_cmp(&h100_fit_error(*b))).unwrap();
    for name in ["h100", "h200"] {
        let m = Device::profile(name).unwrap().model;
        assert!((m.c_lp - best).abs() < 0.005, "{name}: C_LP {} but the best fit is {best}", m.c_lp);
    }
    println!(
        "C_LP best fit {best}: error {:.3} (vs {:.3} at the Titan XP's 0.6)",
        h100_fit_error(best),
        h100_fit_error(0.6)
    );
}

#[test]
fn a_forced_block_is_planned_within_the_registers_its_launch_bounds_allow() {
    // 8-D points, 2 own points per thread: the estimate exceeds 64 registers,
    // but __launch_bounds__(1024) holds the compiler to 64, so the block fits
    // (the H200 ran this plan exactly: knn-8d/block-1024-r2 in tests/parity.rs).
    let forced = Forced { block_size: Some(1024), points_per_thread: Some(2), ..Forced::default() };
    let p = plan_of(built_in("knn").unwrap().with_dims(8).unwrap(), "h200", 100_000, &[], forced).unwrap();
    assert_eq!((p.launch.block_size, p.launch.points_per_thread), (1024, 2));
}

#[test]
fn histograms_bucket_on_keys_only_where_the_bracket_floors_exactly() {
    // Fewer than 2^23 buckets, each wider than 2^-62: the bracket's floors are
    // exact, and a subnormal key's flushed estimate lands in bucket 0.
    let test = |params: &[&str]| {
        let p = plan("sdh", "h200", 1_000_000, params, Forced::default()).unwrap();
        let why = p.decisions.iter().find(|d| d.what == twobs::plan::Choice::Test).unwrap().why.clone();
        (p.test, why)
    };
    assert_eq!(test(&["bins=8388607"]).0, Test::Keys);
    for params in [&["bins=8388608"][..], &["bins=2", "r_max=1e-19"][..]] {
        let (t, why) = test(params);
        assert_eq!(t, Test::Values, "{params:?}");
        assert!(why.contains("fewer than 2^23") && why.contains("wider than 2^-62"), "{why}");
    }
    assert_eq!(test(&["bins=2", "r_max=1e-18"]).0, Test::Keys);
}

#[test]
fn histograms_bucket_on_keys_only_with_a_proven_estimate() {
    // The built-in, by name or as its file: the estimate is proven, buckets come from keys.
    assert_eq!(plan("sdh", "h200", 1_000_000, &[], Forced::default()).unwrap().test, Test::Keys);
    let dir = std::env::temp_dir().join(format!("twobs-proven-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let root = env!("CARGO_MANIFEST_DIR");
    std::fs::copy(format!("{root}/problems/sdh.xml"), dir.join("sdh.xml")).unwrap();
    let snippet = std::fs::read_to_string(format!("{root}/problems/distance.cu")).unwrap();
    std::fs::write(dir.join("distance.cu"), &snippet).unwrap();
    let as_file = twobs::problems::load(dir.join("sdh.xml").to_str().unwrap()).unwrap();
    assert_eq!(plan_of(as_file, "h200", 1_000_000, &[], Forced::default()).unwrap().test, Test::Keys);
    // A user's snippet, one character away: its estimate is not proven, so values.
    std::fs::write(dir.join("distance.cu"), snippet + "\n// mine\n").unwrap();
    let user = twobs::problems::load(dir.join("sdh.xml").to_str().unwrap()).unwrap();
    let p = plan_of(user.clone(), "h200", 1_000_000, &[], Forced::default()).unwrap();
    assert_eq!(p.test, Test::Values);
    let why = &p.decisions.iter().find(|d| d.what == twobs::plan::Choice::Test).unwrap().why;
    assert!(why.contains("proven for the built-ins only") && why.contains("--test keys"), "{why}");
    // Forced, the user's estimate is trusted.
    let forced = Forced { test: Some(Test::Keys), ..Default::default() };
    assert_eq!(plan_of(user, "h200", 1_000_000, &[], forced).unwrap().test, Test::Keys);
    std::fs::remove_dir_all(&dir).unwrap();
}
