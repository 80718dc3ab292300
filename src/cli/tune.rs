//! `twobs tune`: every kernel shape of the totals kernels timed on this GPU,
//! the fastest stored in its tuned profile.

use anyhow::Context as _;
use clap::Args;

use super::{DEFAULT_STREAMS, bind, load};
use crate::backend::cuda;
use crate::cache::Cache;
use crate::data::{self, InputOptions, Inputs};
use crate::device::TunedProfile;
use crate::problems;
use crate::spec::{Element, Problem, Sets};
use crate::tune;

#[derive(Args)]
pub(super) struct TuneArgs {
    /// A built-in problem name or the path of a spec: tune for it alone
    /// (its shapes stored apart). Without it: SDH (50 to 1000 buckets), RDF
    /// (open and periodic box) and 2PCF, the shapes every problem then gets.
    problem: Option<String>,
    /// Points per set of each case, uniform in [0, 1).
    #[arg(long, value_delimiter = ',', default_value = "262144,1048576")]
    points: Vec<usize>,
    /// Override a parameter of PROBLEM's spec.
    #[arg(long = "param", value_name = "NAME=VALUE", requires = "problem")]
    params: Vec<String>,
    /// Values per point, for a problem that takes its dimension from the input.
    #[arg(long)]
    dims: Option<u32>,
    /// The GPU to tune (its profile serves every GPU of that name).
    #[arg(long, default_value_t = 0)]
    gpu: usize,
    /// Runs of a shape that may be the best (the least time is kept).
    #[arg(long, default_value_t = 2)]
    reps: usize,
    /// Seed of the points (set B uses seed + 1).
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Print the sweep, store nothing.
    #[arg(long)]
    dry_run: bool,
    /// No line per shape timed.
    #[arg(long, short)]
    quiet: bool,
}

/// The cases `twobs tune` times without a problem: histograms of several
/// bucket counts, open and periodic, and a count.
const TUNE_CASES: [(&str, usize, &[&str]); 7] = [
    ("sdh", 1, &["bins=50"]),
    ("sdh", 1, &["bins=200"]),
    ("sdh", 1, &["bins=500"]),
    ("sdh", 1, &["bins=1000"]),
    ("rdf", 2, &["box=0", "r_max=0.5"]),
    ("rdf", 2, &["box=1", "r_max=0.5"]),
    ("2pcf", 1, &["r=0.1"]),
];

pub(super) fn tune_command(args: TuneArgs) -> anyhow::Result<()> {
    if let Some(n) = args.points.iter().find(|&&n| n < 2) {
        anyhow::bail!("--points {n}: each case needs at least 2 points a set to have a pair to time");
    }
    let dev = cuda::live_device(args.gpu).context("twobs tune times kernels on a GPU")?;
    let specs: Vec<(Problem, Vec<String>)> = match &args.problem {
        Some(name) => {
            let problem = load(name, false)?;
            let sets = if problem.input.sets == Sets::Two { 2 } else { 1 };
            vec![(problem.with_sets(sets)?, args.params.clone())]
        }
        None => TUNE_CASES
            .iter()
            .map(|&(name, sets, params)| {
                let problem = problems::built_in(name).expect("built-in").with_sets(sets)?;
                Ok((problem, params.iter().map(|p| p.to_string()).collect()))
            })
            .collect::<anyhow::Result<_>>()?,
    };
    let mut cases = Vec::new();
    for (problem, overrides) in &specs {
        let params = bind(problem, overrides)?;
        let problem = match (args.dims, &problem.input.element) {
            (Some(dims), Element::Vector { .. }) => problem.with_dims(dims)?,
            _ => problem.clone(),
        };
        for &n in &args.points {
            let components = problem.input.element.components();
            let set = |seed| {
                let opts = InputOptions { dims: args.dims, drop_nonfinite: false, seed };
                data::read_input(&format!("uniform:{n}"), &components, &opts)
            };
            let inputs = Inputs {
                a: set(args.seed)?,
                b: if problem.input.sets == Sets::Two { Some(set(args.seed + 1)?) } else { None },
            };
            let given = if overrides.is_empty() { String::new() } else { format!(" {}", overrides.join(" ")) };
            let label = format!("{}{given}, {n} points", problem.name);
            cases.push(tune::Case { label, problem: problem.clone(), params: params.clone(), inputs });
        }
    }
    let quiet = args.quiet;
    let cache = Cache::user()?;
    let mut opts = tune::TuneOptions {
        reps: args.reps,
        run: Box::new(tune::on_gpu(args.gpu, DEFAULT_STREAMS, cache.clone())),
        prepare: Box::new(tune::compile_on_host(dev.clone(), cache)),
        progress: Box::new(move |line| {
            if !quiet {
                eprintln!("{line}");
            }
        }),
    };
    let sweep = tune::sweep(&dev, &cases, &mut opts)?;
    print!("{}", sweep.table());
    let t = &sweep.tuning;
    println!(
        "\nfitted on {}: totals in shared copies {}, totals in registers {}; the planner's pick within 5% of the best shape on {} of {} cases",
        dev.name,
        t.shared,
        t.registers,
        sweep.served(),
        sweep.cases.len()
    );
    if args.dry_run {
        println!("--dry-run: nothing stored");
        return Ok(());
    }
    let path = TunedProfile::path_in(&TunedProfile::folder()?, &dev.name);
    let problem = args.problem.as_ref().map(|_| cases[0].problem.name.as_str());
    tune::store(&sweep, &dev, problem, &path)?;
    println!(
        "stored in {} (plans on a GPU named {} read it{})",
        path.display(),
        dev.name,
        problem.map_or(String::new(), |p| format!(" for {p}"))
    );
    Ok(())
}
