//! Every kernel the generator can emit for the built-in problems: pinned by a
//! snapshot, and compiled by NVRTC through the runner's own code path.

use twobs::codegen::{self, Kernel};
use twobs::device::Device;
use twobs::plan::{self, Forced, Plan, Points};
use twobs::problems::{BUILT_IN, built_in};

struct Case {
    /// `<problem>-<variant>`, unique.
    name: String,
    kernel: Kernel,
}

/// The planner's kernel and every forced variant, for each built-in on the
/// default profile; RDF also with open boundaries (box = 0).
fn cases() -> Vec<Case> {
    let dev = Device::profile("h100").unwrap();
    let mut runs: Vec<(&str, Vec<String>)> = BUILT_IN.iter().map(|n| (*n, vec![])).collect();
    runs.push(("rdf", vec!["box=0".to_owned()]));
    let mut out = Vec::new();
    for (name, overrides) in runs {
        let problem = built_in(name).unwrap();
        let params = problem.bind(&overrides).unwrap();
        let points =
            Points { a: 1_000_000, b: matches!(problem.input.sets, twobs::spec::Sets::Two).then_some(1_000_000) };
        let suffix: String = overrides.iter().map(|o| format!("-{}", o.replace('=', ""))).collect();
        let mut forced = vec![Forced::default()];
        forced.extend(plan::variants(&problem, &params, &dev, points));
        for f in forced {
            let plan = Plan::new(&problem, &params, &dev, points, f).unwrap();
            let cmd = codegen::regenerate_command(&problem, &dev, None, &overrides, f);
            let kernel = codegen::render(&problem, &params, &plan, &dev, &cmd).unwrap();
            let label = if f.any() { plan.variant() } else { "planned".to_owned() };
            out.push(Case { name: format!("{name}{suffix}-{label}"), kernel });
        }
    }
    out
}

#[test]
fn emitted_cuda_matches_the_snapshots() {
    let cases = cases();
    let mut names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), cases.len(), "case names must be unique");
    insta::with_settings!({ snapshot_path => "snapshots/kernels", prepend_module_to_snapshot => false, omit_expression => true }, {
        for case in &cases {
            insta::assert_snapshot!(case.name.as_str(), case.kernel.source.as_str());
        }
    });
}

#[test]
fn nvrtc_compiles_every_kernel() {
    if let Err(why) = twobs::backend::nvrtc::available() {
        panic!("{why}. Run the suite through scripts/test.sh, which installs it.");
    }
    let version = twobs::backend::nvrtc::version().unwrap();
    let arch = Device::profile("h100").unwrap().arch();
    let arch = arch.as_str();
    let cases = cases();
    let results: Vec<(String, anyhow::Result<twobs::backend::nvrtc::Compiled>)> = std::thread::scope(|s| {
        let chunks: Vec<&[Case]> = cases.chunks(cases.len().div_ceil(2)).collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|chunk| {
                s.spawn(move || {
                    chunk
                        .iter()
                        .map(|c| (c.name.clone(), twobs::backend::nvrtc::compile(&c.kernel, arch)))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().unwrap()).collect()
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
            Err(e) => failures.push(format!("{name}: {e:#}")),
        }
    }
    println!("{} kernels compiled, {} failed", results.len() - failures.len(), failures.len());
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn the_probe_counts_the_pair_functions_floating_point_instructions() {
    twobs::backend::nvrtc::available().unwrap_or_else(|why| panic!("{why}. Run the suite through scripts/test.sh."));
    let count = |name: &str| {
        let p = built_in(name).unwrap();
        let params = p.bind(&[]).unwrap();
        twobs::backend::nvrtc::fp_instructions(&codegen::render_probe(&p, &params).unwrap(), "sm_90").unwrap()
    };
    // 3-D distance: 3 sub, 3 mul, 2 add, 1 sqrt (the count the H100 runs reported); 2-D: 6; integer keys: none.
    assert_eq!(count("sdh"), 9);
    assert_eq!(count("selfjoin"), 6);
    assert_eq!(count("nlj"), 0);
}
