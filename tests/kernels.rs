//! Every kernel the generator can emit for the built-in problems: the
//! planner's kernel of each problem pinned as a snapshot, the plan of every
//! forced variant pinned as JSON, and every variant compiled by NVRTC through
//! the runner's own code path.

use std::path::Path;
use twobs::codegen::{self, Kernel};
use twobs::device::Device;
use twobs::plan::{self, Forced, Plan};

use twobs::problems::{BUILT_IN, built_in};
use twobs::spec::{Files, Problem};
use twobs::stage::output::Collect;

/// Reads paths relative to the repository, wherever it is checked out.
struct Repo;

impl Files for Repo {
    fn read(&self, path: &Path) -> Option<String> {
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path)).ok()
    }
}
use twobs::stage::contribution::Test;

/// (snapshot name, problem, parameter overrides): the built-ins, RDF with
/// open boundaries, and the examples' user specs.
fn problems() -> Vec<(String, Problem, Vec<String>)> {
    let mut runs: Vec<(String, Problem, Vec<String>)> =
        BUILT_IN.iter().map(|n| (n.to_string(), built_in(n).unwrap(), vec![])).collect();
    runs.push(("rdf-box0".into(), built_in("rdf").unwrap(), vec!["box=0".to_owned()]));
    runs.push((
        "sdh-log".into(),
        built_in("sdh").unwrap().with_spacing(twobs::spec::Spacing::Log).unwrap(),
        vec!["r_min=0.01".to_owned(), "bins=40".to_owned()],
    ));
    runs.push((
        "rdf-triclinic".into(),
        built_in("rdf").unwrap(),
        vec!["box=1,1.5,2,0.25,0.125,-0.25".to_owned(), "r_max=0.45".to_owned()],
    ));
    // A 2-D histogram whose first axis is log-spaced (its edges in shared memory), in a periodic box.
    runs.push((
        "ddrppi-log-box".into(),
        built_in("ddrppi").unwrap().with_spacing(twobs::spec::Spacing::Log).unwrap(),
        vec!["rp_min=0.01".to_owned(), "box=2".to_owned()],
    ));
    runs.push(("sdh-point-weights".into(), built_in("sdh").unwrap().with_point_weights().unwrap(), vec![]));
    runs.push((
        "kde-5d-point-weights".into(),
        built_in("kde").unwrap().with_dims(5).unwrap().with_point_weights().unwrap(),
        vec![],
    ));
    // Pairs of one molecule excluded: a histogram of one and two sets, a count, pairs.
    for (name, sets) in [("rdf", 1), ("rdf", 2), ("2pcf", 1), ("selfjoin", 1)] {
        let problem = built_in(name).unwrap().with_sets(sets).unwrap().with_exclusion("molecule").unwrap();
        runs.push((format!("{name}-{sets}-sets-exclude-molecule"), problem, vec![]));
    }
    for example in
        ["examples/manhattan/manhattan.xml", "examples/weighted/weighted.xml", "examples/periodic_rdf/periodic_rdf.xml"]
    {
        // Parsed by their path in the repository, as the snapshots show it.
        let text = Repo.read(Path::new(example)).unwrap();
        let problem = Problem::parse(&text, Path::new(example), &Repo).unwrap();
        runs.push((problem.name.clone(), problem, vec![]));
    }
    runs
}

struct Case {
    /// `<problem>[-<overrides>]`.
    problem: String,
    /// `planned`, or the plan's variant name.
    label: String,
    plan: Plan,
    kernel: Kernel,
    /// A 2-D histogram's: its contribution fragment is its own.
    cells: bool,
}

/// The planner's kernel and every forced variant, for each problem on the
/// h100 profile: rendered once for all the tests of this file.
fn cases() -> &'static [Case] {
    static CASES: std::sync::OnceLock<Vec<Case>> = std::sync::OnceLock::new();
    CASES.get_or_init(render_cases)
}

fn render_cases() -> Vec<Case> {
    let dev = Device::profile("h100").unwrap();
    let mut out = Vec::new();
    for (name, problem, overrides) in problems() {
        let params = problem.bind(&overrides).unwrap();
        let cells = matches!(problem.output, twobs::spec::Output::Histogram2d { .. });
        let points = plan::points_of(problem.input.sets, 1_000_000, 1_000_000);
        let mut forced = vec![Forced::default()];
        forced.extend(plan::variants(&problem, &params, points));
        // Where the spec declares a cutoff, every variant walks a grid too
        // (in a triclinic box as well: its cells lie along the faces' normals).
        let grid = problem.cutoff.is_some();
        for f in forced {
            let plan = Plan::new(&problem, &params, &dev, points, f).unwrap();
            let cmd = codegen::regenerate_command(&problem, &dev, None, &overrides, f);
            let label = if f.any() { plan.variant.clone() } else { "planned".to_owned() };
            if grid {
                let plan = Plan::grid(&problem, &params, &dev, points, f).unwrap();
                let kernel = codegen::render(&problem, &params, &plan, &dev, &cmd);
                let label = if f.any() { plan.variant.clone() } else { "planned-grid".to_owned() };
                out.push(Case { problem: name.clone(), label, plan, kernel, cells });
            }
            let kernel = codegen::render(&problem, &params, &plan, &dev, &cmd);
            out.push(Case { problem: name.clone(), label, plan, kernel, cells });
        }
    }
    out
}

#[test]
fn the_planners_kernel_of_each_problem_matches_its_snapshot() {
    insta::with_settings!({ snapshot_path => "snapshots/kernels", prepend_module_to_snapshot => false, omit_expression => true }, {
        for case in cases().iter().filter(|c| c.label == "planned") {
            insta::assert_snapshot!(case.problem.as_str(), case.kernel.source.as_str());
        }
        for case in cases().iter().filter(|c| c.label == "planned-grid") {
            insta::assert_snapshot!(format!("{}-grid", case.problem), case.kernel.source.as_str());
        }
    });
}

/// What a plan decided, without the prose that explains it.
fn decided(plan: &Plan) -> serde_json::Value {
    serde_json::json!({
        "variant": plan.variant,
        "class": plan.class,
        "visit": plan.shape.visit,
        "collect": plan.shape.collect,
        "input_cache": plan.input_cache,
        "output": plan.output,
        "diagonal": plan.diagonal,
        "launch": plan.launch,
        "params": plan.params.iter().map(|p| format!("{} {}", p.ctype, p.name)).collect::<Vec<_>>(),
    })
}

#[test]
fn the_plan_of_every_variant_matches_its_snapshot() {
    let cases = cases();
    insta::with_settings!({ snapshot_path => "snapshots/plans", prepend_module_to_snapshot => false, omit_expression => true }, {
        for (name, _, _) in problems() {
            let plans: Vec<serde_json::Value> = cases
                .iter()
                .filter(|c| c.problem == name)
                .map(|c| serde_json::json!({ "label": c.label, "plan": decided(&c.plan) }))
                .collect();
            insta::assert_snapshot!(name.as_str(), serde_json::to_string_pretty(&plans).unwrap());
        }
    });
}

/// The kernels CI compiles: every problem's planned kernel (and its grid
/// kernel), and enough of the other variants that every pair of template
/// choices a kernel is made of (what it collects, its visit, input cache,
/// output stage, test, index, diagonal, one or several own points a thread)
/// is compiled together at least once: a fragment that breaks beside
/// another fails here. Copies, block sizes and counters are constants
/// within those fragments. TWOBS_ALL_KERNELS=1 compiles every variant, as
/// the GPU suite does on the device (all 1,092 took NVRTC 37 minutes on a
/// 2-core machine).
fn to_compile(cases: &[Case]) -> Vec<&Case> {
    if std::env::var_os("TWOBS_ALL_KERNELS").is_some_and(|v| v != "0") {
        return cases.iter().collect();
    }
    let choices = |c: &Case| -> Vec<String> {
        let p = &c.plan;
        let collects = match p.shape.collect {
            Collect::Totals { total, .. } if c.cells => format!("totals of {total:?} in 2-D cells"),
            Collect::Totals { total, .. } => format!("totals of {total:?}"),
            Collect::Pairs => "pairs".into(),
            Collect::Knn { .. } => "knn".into(),
        };
        let rest = serde_json::json!([
            p.shape.visit,
            p.input_cache,
            p.output.choice(),
            p.test,
            p.index,
            p.diagonal,
            p.launch.points_per_thread > 1
        ]);
        std::iter::once(collects).chain(rest.as_array().unwrap().iter().map(|v| v.to_string())).collect()
    };
    let mut covered = std::collections::BTreeSet::new();
    cases
        .iter()
        .filter(|c| {
            let made_of = choices(c);
            let mut new = false;
            for i in 0..made_of.len() {
                for j in i + 1..made_of.len() {
                    new |= covered.insert((i, made_of[i].clone(), j, made_of[j].clone()));
                }
            }
            c.label.starts_with("planned") || new
        })
        .collect()
}

#[test]
fn nvrtc_compiles_every_kernel() {
    if let Err(why) = twobs::backend::cuda::nvrtc::available() {
        panic!("{why}. Run the suite through scripts/test.sh, which installs it.");
    }
    let version = twobs::backend::cuda::nvrtc::version().unwrap();
    let arch = Device::profile("h100").unwrap().arch();
    let arch = arch.as_str();
    let cases = cases();
    let all = cases.len();
    let cases = to_compile(cases);
    println!("{} of {all} kernels compiled here (TWOBS_ALL_KERNELS=1: all of them)", cases.len());
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let results: Vec<(String, Result<twobs::backend::cuda::nvrtc::Compiled, _>)> = std::thread::scope(|s| {
        let chunks: Vec<&[&Case]> = cases.chunks(cases.len().div_ceil(threads)).collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                s.spawn(move || {
                    chunk
                        .iter()
                        .map(|c| {
                            (
                                format!("{}-{}", c.problem, c.label),
                                twobs::backend::cuda::nvrtc::compile(&c.kernel, arch),
                            )
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut results: Vec<_> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
        // The direct output buffer's drain, one kernel for every problem.
        let drain = twobs::codegen::render_dob_drain();
        results.push(("dob-drain".into(), twobs::backend::cuda::nvrtc::compile(&drain, arch)));
        // The grid builder, likewise.
        let builder = twobs::codegen::render_grid_builder();
        results.push(("grid-builder".into(), twobs::backend::cuda::nvrtc::compile(&builder, arch)));
        // The taker of points already on a GPU, likewise.
        let take = twobs::codegen::render_take();
        results.push(("take".into(), twobs::backend::cuda::nvrtc::compile(&take, arch)));
        results
    });
    println!("NVRTC {}.{} for {arch}:", version.0, version.1);
    let mut failures = Vec::new();
    for (name, r) in &results {
        match r {
            Ok(c) => {
                println!("  {name:<48} {:>3} registers {:>4} B spilled", c.registers.unwrap_or(0), c.spill_bytes);
                if c.log.contains("warning") {
                    failures.push(format!("{name}: compiler warnings:\n{}", c.log));
                }
            }
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    println!("{} kernels compiled, {} failed", results.len() - failures.len(), failures.len());
    assert!(results.len() >= 40, "{} kernels: every pair of template choices", results.len());
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn the_grid_builder_compiles_without_warnings_and_its_stencil_fits_reach_4() {
    twobs::backend::cuda::nvrtc::available()
        .unwrap_or_else(|why| panic!("{why}. Run the suite through scripts/test.sh."));
    let builder = twobs::codegen::render_grid_builder();
    for arch in ["sm_80", "sm_90"] {
        let compiled = twobs::backend::cuda::nvrtc::compile(&builder, arch).unwrap_or_else(|e| panic!("{arch}: {e}"));
        assert!(!compiled.log.contains("warning"), "{arch}: {}", compiled.log);
    }
    // The builder's stencil holds (2 reach + 1)^2 rows over axes 1 and 2 at the largest reach.
    assert!(builder.source.contains("constexpr unsigned MAX_ROWS = 81;"));
    assert_eq!(twobs::index::stencil_rows(3, false, 4).len(), 81);
    assert_eq!(twobs::index::stencil_rows(3, true, 4).len(), 41);
}

#[test]
fn the_taker_of_gpu_arrays_compiles_without_warnings() {
    twobs::backend::cuda::nvrtc::available()
        .unwrap_or_else(|why| panic!("{why}. Run the suite through scripts/test.sh."));
    let take = twobs::codegen::render_take();
    for arch in ["sm_80", "sm_90"] {
        let compiled = twobs::backend::cuda::nvrtc::compile(&take, arch).unwrap_or_else(|e| panic!("{arch}: {e}"));
        assert!(!compiled.log.contains("warning"), "{arch}: {}", compiled.log);
    }
    // The Rust side refuses more components than the kernel's registers hold.
    assert!(take.source.contains(&format!("constexpr unsigned MAX_COMPONENTS = {};", twobs::data::MAX_GPU_COMPONENTS)));
}

#[test]
fn the_probe_counts_the_pair_functions_floating_point_instructions() {
    twobs::backend::cuda::nvrtc::available()
        .unwrap_or_else(|why| panic!("{why}. Run the suite through scripts/test.sh."));
    let count = |name: &str| {
        let p = built_in(name).unwrap();
        let params = p.bind(&[]).unwrap();
        twobs::backend::cuda::nvrtc::fp_instructions(
            &codegen::render_probe(&p, &params, Test::choose(&p, &params, (9, 0)).0),
            "sm_90",
        )
        .unwrap()
    };
    // Pairs tested on keys evaluate the key: the squared 3-D distance is 3 sub,
    // 1 mul, 2 fma; the 2-D one 4 (thresholds and histograms alike). Values:
    // the distance adds a max and a sqrt. Integer keys: none.
    assert_eq!(count("2pcf"), 6);
    assert_eq!(count("selfjoin"), 4);
    assert_eq!(count("sdh"), 6);
    assert_eq!(count("knn"), 8);
    assert_eq!(count("nlj"), 0);
}

#[test]
fn kernel_parameters_come_from_one_list() {
    // The signature is rendered from the plan's list: every entry, in order.
    for case in cases() {
        let signature_start = case.kernel.source.find(&format!("{}(", case.kernel.entry)).unwrap();
        let signature = &case.kernel.source[signature_start..];
        let signature = &signature[..signature.find(") {").unwrap()];
        let declared: Vec<String> = signature
            .split('(')
            .nth(1)
            .unwrap()
            .split(',')
            .map(|d| d.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        let listed: Vec<String> = case.plan.params.iter().map(|p| format!("{} {}", p.ctype, p.name)).collect();
        assert_eq!(declared, listed, "{}-{}", case.problem, case.label);
    }
}
