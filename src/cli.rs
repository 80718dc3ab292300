//! The `twobs` command line: clap arguments in, library calls out.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Mutex;

use anyhow::Context as _;
use clap::{Args, Parser, Subcommand};

use crate::backend::cuda;
use crate::backend::nvrtc;
use crate::cache::Cache;
use crate::codegen;
use crate::data::{self, Generator, InputOptions, Inputs, Outside, PointSet, read_frames, read_input, synthesize};
use crate::device::{Device, PROFILE_NAMES, TunedProfile};
use crate::index::{self, IndexChoice, IndexKind};
use crate::plan::{Forced, Plan, Points};
use crate::plot;
use crate::problems;
use crate::report::{self, OutputOptions};
use crate::run::{self, BackendChoice, RunOptions};
use crate::schedule::{self, GpuOptions, Hybrid};
use crate::spec::{Component, Element, Output, ParamKind, Params, Problem, Sets, Spacing};
use crate::stage::contribution::{self, Test};
use crate::stage::input::InputCache;
use crate::stage::output::OutputChoice;
use crate::tune;
use crate::write::{Destination, Format, Target as ResultTarget, WriteError};
use crate::xi::{self, Estimator};

#[derive(Parser)]
#[command(
    name = "twobs",
    version,
    about = "2-body statistics on GPUs: from an XML spec and a CUDA pair function to a planned, generated kernel"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List the built-in problems.
    List,
    /// Explain the plan for a problem: every decision and the numbers behind it.
    Plan {
        #[command(flatten)]
        target: Target,
        /// Print the plan as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        schedule: ScheduleArgs,
    },
    /// Write the CUDA kernel for a problem.
    Gen {
        #[command(flatten)]
        target: Target,
        /// Write DIR/<problem>.cu instead of printing the kernel.
        #[arg(short = 'o', long = "out-dir", value_name = "DIR")]
        out_dir: Option<PathBuf>,
        /// Also compile the kernel with NVRTC and report its registers and spills.
        #[arg(long)]
        check: bool,
        /// With --check: write NVRTC's CUBIN to FILE (for nvdisasm or cuobjdump).
        #[arg(long, value_name = "FILE", requires = "check")]
        cubin: Option<PathBuf>,
    },
    /// Compute a problem on data: exact results on the GPU or the CPU.
    Run(RunArgs),
    /// Time every kernel shape of the totals kernels on this GPU and store the
    /// fastest in its tuned profile, which later plans on it read.
    Tune(TuneArgs),
    /// The two-point correlation function xi(r) of a catalogue against randoms:
    /// DD, RR (and DR) pair counts in distance buckets, and an estimator.
    Xi(XiArgs),
}

#[derive(Args)]
struct XiArgs {
    /// The catalogue: a .npy, .csv/.txt or .bin/.raw file of 3-D positions, or uniform:N ...
    #[arg(long, value_name = "FILE|GEN:N")]
    data: String,
    /// Randoms: positions drawn uniformly over the catalogue's volume and mask.
    #[arg(long, value_name = "FILE|GEN:N")]
    randoms: String,
    /// A weight per data point (1-D .npy or one number per line): pair counts
    /// become sums of weight products, normalised by the weight totals.
    #[arg(long, value_name = "FILE")]
    data_weights: Option<String>,
    /// A weight per random point (each 1 when only --data-weights is given).
    #[arg(long, value_name = "FILE")]
    random_weights: Option<String>,
    /// The pair-distance histogram to count with (a spec with sets="1,2").
    #[arg(long, default_value = "sdh")]
    problem: String,
    /// Buckets and range: bins, r_min, r_max (sdh's parameters).
    #[arg(long = "param", value_name = "NAME=VALUE")]
    params: Vec<String>,
    /// Log-spaced distance buckets (r_min > 0), as correlation functions are usually binned.
    #[arg(long)]
    log_bins: bool,
    /// landy-szalay ((DD - 2DR + RR) / RR, the default) or natural (DD / RR - 1).
    #[arg(long, value_enum, default_value = "landy-szalay")]
    estimator: Estimator,
    /// Where xi goes: a .csv, .npy or .json file, or - for standard output (the default).
    #[arg(long, value_name = "FILE|-")]
    out: Option<String>,
    /// The format, whatever the file is called.
    #[arg(long, value_enum)]
    format: Option<FormatArg>,
    /// Draw xi(r) to FILE.png or FILE.svg.
    #[arg(long, value_name = "FILE.png|svg")]
    plot: Option<PathBuf>,
    /// auto, cuda or cpu.
    #[arg(long, value_enum, default_value = "auto")]
    backend: BackendArg,
    /// CPU threads (default: all cores).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Values per point: of a raw binary input, or of synthetic points where the
    /// problem takes its dimension from the input.
    #[arg(long)]
    dims: Option<u32>,
    /// Seed of synthetic inputs (the randoms use seed + 1).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Standard output carries xi alone.
    #[arg(long)]
    quiet: bool,
}

fn xi_command(args: XiArgs) -> anyhow::Result<()> {
    let problem = load(&args.problem, args.log_bins)?;
    let params = bind(&problem, &args.params)?;
    let opts = InputOptions { dims: args.dims, drop_nonfinite: false, seed: args.seed };
    let problem = with_input_dims(problem, &args.data, &opts)?;
    let components = problem.input.element.components();
    let format = args.format.map(FormatArg::format);
    let target = match args.out.as_deref() {
        None | Some("-") => ResultTarget::new(Destination::Stdout, format)?,
        Some(path) => ResultTarget::new(Destination::File(path.into()), format)?,
    };
    if let Some(path) = &args.plot {
        plot::check(path)?;
    }
    let mut data = read_input(&args.data, &components, &opts).context("--data")?;
    let mut randoms =
        read_input(&args.randoms, &components, &InputOptions { seed: args.seed + 1, ..opts }).context("--randoms")?;
    // Weighted, both catalogues carry a weight column; a missing one is all ones.
    if args.data_weights.is_some() || args.random_weights.is_some() {
        for (set, file) in [(&mut data, &args.data_weights), (&mut randoms, &args.random_weights)] {
            let weights = match file {
                Some(file) => data::read_weights(file, set.len())?,
                None => crate::data::Column::F64(vec![1.0; set.len()]),
            };
            set.columns.push(weights);
        }
    }
    let run_opts = RunOptions {
        backend: args.backend.choice(),
        threads: args.threads,
        f64: false,
        quiet: args.quiet,
        gpu: GpuOptions { streams: 2, ..Default::default() },
        verify: false,
        index: IndexChoice::Auto,
        cache: Cache::user(),
    };
    let (counts, runs) = xi::count(
        &problem,
        &params,
        &Inputs { a: data, b: None },
        &Inputs { a: randoms, b: None },
        args.estimator,
        &run_opts,
    )?;
    let xi = counts.xi(args.estimator);
    let (dd, rr, dr) = (&counts.dd, &counts.rr, &counts.dr);
    let n = xi.len();
    let mut columns: Vec<(&str, &[f64])> = vec![("r_lo", &counts.edges[..n]), ("r_hi", &counts.edges[1..]), ("dd", dd)];
    if let Some(dr) = dr {
        columns.push(("dr", dr));
    }
    columns.extend([("rr", &rr[..]), ("xi", &xi[..])]);
    crate::write::table(&target, &columns)?;
    if let Some(path) = &args.plot {
        let figure = plot::Figure {
            title: format!(
                "ξ(r), {}: {} data points, {} randoms",
                args.estimator.name(),
                counts.data_points,
                counts.random_points
            ),
            x_label: "r".into(),
            y_label: "ξ(r)".into(),
            log_x: args.log_bins,
            series: vec![plot::Series { label: "ξ".into(), edges: &counts.edges, values: &xi }],
        };
        plot::draw(&figure, path)?;
    }
    if !args.quiet {
        let say = |line: String| match target.destination {
            Destination::Stdout => eprintln!("{line}"),
            Destination::File(_) => println!("{line}"),
        };
        say(format!(
            "xi(r) by the {} estimator: {} data points, {} randoms, {}",
            args.estimator.name(),
            counts.data_points,
            counts.random_points,
            contribution::describe(&problem, &params)
        ));
        for (what, run) in ["DD", "RR", "DR"].iter().zip(&runs) {
            say(format!("{what}: {} pairs on {}, {:.3} s", run.shape.pairs, run.device, run.timings.total_s));
        }
        if xi.iter().any(|x| x.is_nan()) {
            say("xi is NaN (null in JSON) where the randoms have no pair: use more randoms or wider buckets".into());
        }
        if let Destination::File(path) = &target.destination {
            say(format!("{} buckets -> {}", n, path.display()));
        }
    }
    Ok(())
}

#[derive(Args)]
struct TuneArgs {
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

#[derive(Args)]
struct RunArgs {
    /// A built-in problem name (see `twobs list`) or the path of a spec.
    problem: String,
    /// Input points: a .npy, .csv/.txt or .bin/.raw file, or uniform:N, clustered:N,
    /// exponential:N. Once for a one-set problem, twice (A, then B) for two sets.
    /// Without it a built-in default dataset is used.
    #[arg(long = "input", value_name = "FILE|GEN:N")]
    inputs: Vec<String>,
    /// Override a parameter of the spec.
    #[arg(long = "param", value_name = "NAME=VALUE")]
    params: Vec<String>,
    /// Space the histogram's buckets logarithmically (min > 0): edge k is min (max / min)^(k / bins).
    #[arg(long)]
    log_bins: bool,
    /// auto (the GPU when one is usable, else the CPU), cuda or cpu.
    #[arg(long, value_enum, default_value = "auto")]
    backend: BackendArg,
    /// Where the result goes: a .csv, .npy or .json file (the extension names the
    /// format), or - for standard output.
    #[arg(long, value_name = "FILE|-")]
    out: Option<String>,
    /// The result's format, whatever the file is called (default: the extension's; csv on stdout).
    #[arg(long, value_enum)]
    format: Option<FormatArg>,
    /// Write a JSON report of the run to FILE (- for stdout).
    #[arg(long, value_name = "FILE")]
    report: Option<String>,
    /// Draw the histogram (g(r) for rdf) to FILE.png or FILE.svg.
    #[arg(long, value_name = "FILE.png|svg")]
    plot: Option<PathBuf>,
    /// Values per point: of a raw binary input, or of synthetic points where the
    /// problem takes its dimension from the input.
    #[arg(long)]
    dims: Option<u32>,
    /// Seed of synthetic inputs (set B uses seed + 1).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// A weight per point of the --input in the same place: a 1-D .npy or a
    /// text file of one number per line (histograms and sums; a pair weighs
    /// the product of its points' weights).
    #[arg(long = "weights", value_name = "FILE")]
    weights: Vec<String>,
    /// Leave out rows holding NaN or infinity instead of refusing the input.
    #[arg(long)]
    drop_nonfinite: bool,
    /// Every --input is one frame of a single set (2-D files, or 3-D .npy
    /// trajectories): counts and histograms add up over the frames and g(r)
    /// is their average. A 3-D .npy input is a trajectory without this flag too.
    #[arg(long)]
    frames: bool,
    /// Points outside the problem's periodic box: wrap them in (default) or refuse the input.
    #[arg(long, value_enum, value_name = "WRAP|REFUSE")]
    outside_box: Option<Outside>,
    /// Pairs in both orders plus (i, i), as GDS-Join counts its results.
    #[arg(long)]
    symmetric: bool,
    /// Sort pairs by (i, j).
    #[arg(long)]
    sorted: bool,
    /// auto (a grid of cells where the spec declares a cutoff and the grid
    /// skips at least half of the pairs), grid, or none (every pair).
    #[arg(long, value_enum, default_value = "auto")]
    index: IndexChoice,
    /// CPU backend: compute in double precision.
    #[arg(long)]
    f64: bool,
    /// CPU threads (default: all cores).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Stdout carries the result alone (a count, a sum, a histogram CSV); no progress bar, notes or summary.
    #[arg(long)]
    quiet: bool,
    /// GPUs to use (default: all visible), e.g. 0,1.
    #[arg(long, value_delimiter = ',')]
    gpus: Option<Vec<usize>>,
    /// Points per block streamed to the GPU (default: as many as fit).
    #[arg(long)]
    block_points: Option<usize>,
    /// CUDA streams per GPU.
    #[arg(long, default_value_t = DEFAULT_STREAMS)]
    streams: usize,
    /// Pairs the direct output buffer holds (default: sized from a sample).
    #[arg(long)]
    pool_pairs: Option<u64>,
    /// Pairs in the smallest piece of work the GPUs share (default: 2^34, about 10 ms of a kernel).
    #[arg(long)]
    piece_pairs: Option<u64>,
    /// GPU runs on a grid: whether the CPU's cores take units of the work
    /// beside the GPUs (auto: where the model says it saves more than sharing
    /// costs; the report says how the work was split and why).
    #[arg(long, value_enum, default_value = "auto")]
    hybrid: Hybrid,
    /// Re-compute on the CPU backend (all of it, or sampled rows for large inputs) and fail on any difference.
    #[arg(long)]
    verify: bool,
    #[command(flatten)]
    forced: ForcedArgs,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum BackendArg {
    Auto,
    Cuda,
    Cpu,
}

impl BackendArg {
    fn choice(self) -> BackendChoice {
        match self {
            BackendArg::Auto => BackendChoice::Auto,
            BackendArg::Cuda => BackendChoice::Cuda,
            BackendArg::Cpu => BackendChoice::Cpu,
        }
    }
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum FormatArg {
    Csv,
    Npy,
    Json,
}

impl FormatArg {
    fn format(self) -> Format {
        match self {
            FormatArg::Csv => Format::Csv,
            FormatArg::Npy => Format::Npy,
            FormatArg::Json => Format::Json,
        }
    }
}

/// Where the result goes, checked before anything is computed.
fn result_target(problem: &Problem, args: &RunArgs) -> anyhow::Result<Option<ResultTarget>> {
    let format = args.format.map(FormatArg::format);
    let target = match args.out.as_deref() {
        Some("-") => Some(ResultTarget::new(Destination::Stdout, format)?),
        Some(path) => Some(ResultTarget::new(Destination::File(path.into()), format).map_err(|e| match e {
            WriteError::UnknownFormat { .. } => {
                anyhow::anyhow!(
                    "--out {path}: the extension names no result format; use .csv, .npy or .json, or --format"
                )
            }
            other => other.into(),
        })?),
        None => match report::default_target(problem)? {
            Some(t) if format.is_some_and(|f| f != t.format) => Some(ResultTarget::new(t.destination, format)?),
            other => other,
        },
    };
    if args.report.as_deref() == Some("-")
        && target.as_ref().is_some_and(|t| t.destination == Destination::Stdout)
        && args.out.is_some()
    {
        anyhow::bail!("--out - and --report - both want standard output; send one of them to a file");
    }
    Ok(target)
}

/// `--param` values bound to the problem's parameters.
fn bind(problem: &Problem, params: &[String]) -> anyhow::Result<Params> {
    Ok(problem.bind(params)?)
}

/// Points per set of the built-in default dataset.
const DEFAULT_DATASET_POINTS: u64 = 20_000;

/// A built-in or a spec, with log-spaced buckets when asked.
fn load(name: &str, log_bins: bool) -> anyhow::Result<Problem> {
    let problem = problems::load(name)?;
    Ok(if log_bins { problem.with_spacing(Spacing::Log)? } else { problem })
}

/// The problem for the points of `input`: of its dimension where the spec
/// takes it from the input (`dims_from_input`), else refused when it differs.
fn with_input_dims(problem: Problem, input: &str, opts: &InputOptions) -> anyhow::Result<Problem> {
    if !matches!(problem.input.element, Element::Vector { .. }) {
        return Ok(problem);
    }
    Ok(match data::values_per_point(input, opts)? {
        Some(dims) => problem.with_dims(dims).with_context(|| format!("--input {input}"))?,
        None => problem,
    })
}

fn run_command(args: RunArgs) -> anyhow::Result<()> {
    let problem = load(&args.problem, args.log_bins)?;
    let params = bind(&problem, &args.params)?;
    if args.f64 && matches!(args.backend, BackendArg::Cuda) {
        anyhow::bail!("--f64 is a mode of the CPU backend; use --backend cpu");
    }
    if args.hybrid == Hybrid::On && matches!(args.backend, BackendArg::Cpu) {
        anyhow::bail!(
            "--hybrid on shares a GPU run with the CPU's cores; this run is on the CPU alone (--backend cpu)"
        );
    }
    if args.verify && matches!(args.backend, BackendArg::Cpu) {
        anyhow::bail!("--verify checks a GPU run against the CPU backend; this run is on the CPU");
    }
    let opts = InputOptions { dims: args.dims, drop_nonfinite: args.drop_nonfinite, seed: args.seed };
    let wanted = match problem.input.sets {
        Sets::One => 1,
        Sets::Two => 2,
    };
    let given: Vec<String> = if args.inputs.is_empty() {
        let default = format!("uniform:{DEFAULT_DATASET_POINTS}");
        if !args.quiet {
            eprintln!(
                "note: no --input: using the default dataset {default} (seed {}{}), coordinates uniform in [0, 1)",
                args.seed,
                if wanted == 2 { format!(" for A, {} for B", args.seed + 1) } else { String::new() }
            );
        }
        vec![default; wanted]
    } else {
        args.inputs.clone()
    };
    // A spec with sets="1,2" runs within one set or A x B, as many inputs as given.
    let same_file = |a: &str, b: &str| {
        let real = |p: &str| std::fs::canonicalize(p).ok().filter(|p| p.is_file());
        real(a).is_some_and(|a| Some(a) == real(b))
    };
    if problem.input.either && given.len() == 2 && same_file(&given[0], &given[1]) && !args.quiet {
        eprintln!(
            "note: the same input twice is A x B: every point also pairs with itself; give --input once for the pairs within one set"
        );
    }
    let problem = problem.with_sets(if args.frames { 1 } else { given.len() })?;
    let problem = with_input_dims(problem, &given[0], &opts)?;
    // Points are read as the element is; the weights join them after.
    let components = problem.input.element.components();
    let sets_per_frame = if args.frames { 1 } else { given.len() };
    let problem = match args.weights.len() {
        0 => problem,
        n if n == sets_per_frame => problem.with_point_weights()?,
        n => anyhow::bail!(
            "--weights: {n} files for {sets_per_frame} set{} of points; give one per --input, in the same order",
            if sets_per_frame == 1 { "" } else { "s" }
        ),
    };
    // Where the result, the report and the plot go is checked before the
    // input is read: a large input takes a while to read or draw.
    let out = result_target(&problem, &args)?;
    if let Some(path) = &args.plot {
        report::check_plot(&problem, path)?;
    }
    let report_target = match args.report.as_deref() {
        None => None,
        Some("-") => Some(ResultTarget::new(Destination::Stdout, Some(Format::Json))?),
        Some(path) => Some(ResultTarget::new(Destination::File(path.into()), Some(Format::Json))?),
    };
    let mut frames = read_frames_of(&given, &components, &opts, args.frames)?;
    if frames.len() > 1 && !matches!(problem.output, Output::Count { .. } | Output::Sum | Output::Histogram { .. }) {
        anyhow::bail!(
            "{} frames: frames add up for counts, sums and histograms, but problem `{}` makes {}; run each frame alone",
            frames.len(),
            problem.name,
            problem.output.kind()
        );
    }
    match (problem.periodic_box(&params), args.outside_box) {
        (Some((name, b)), policy) => {
            // Points moved, per set, over all frames.
            let mut moved = [0, 0];
            for inputs in &mut frames {
                for (k, set) in inputs.sets_mut().enumerate() {
                    moved[k] += set.into_box(&b, policy.unwrap_or(Outside::Wrap))?;
                }
            }
            let over = if frames.len() > 1 { format!(" (over {} frames)", frames.len()) } else { String::new() };
            for (k, moved) in moved.into_iter().enumerate().filter(|(_, m)| *m > 0 && !args.quiet) {
                let set = if args.frames { "the frames".to_owned() } else { given[k].clone() };
                eprintln!("note: {set}: {moved} points outside the box {name}={b} wrapped into it{over}");
            }
        }
        (None, Some(_)) => anyhow::bail!(
            "--outside-box: problem `{}` has no periodic box{}",
            problem.name,
            if problem.params.iter().any(|p| p.kind == ParamKind::Box) { " (its box is open, 0)" } else { "" }
        ),
        (None, None) => {}
    }
    // One file serves every frame of a trajectory: the weights are the atoms'.
    let weights: Vec<data::Column> = args
        .weights
        .iter()
        .zip(frames[0].sets_mut())
        .map(|(file, set)| data::read_weights(file, set.len()))
        .collect::<Result<_, _>>()?;
    for inputs in &mut frames {
        for (set, w) in inputs.sets_mut().zip(&weights) {
            set.columns.push(w.clone());
        }
    }
    if args.block_points == Some(0) {
        anyhow::bail!("--block-points must be at least 1");
    }
    if args.piece_pairs == Some(0) {
        anyhow::bail!("--piece-pairs must be at least 1");
    }
    let gpu = GpuOptions {
        gpus: args.gpus.clone(),
        block_points: args.block_points,
        streams: args.streams.max(1),
        forced: args.forced.forced(),
        pool_pairs: args.pool_pairs,
        piece_pairs: args.piece_pairs,
        hybrid: args.hybrid,
    };
    let run_opts = RunOptions {
        backend: args.backend.choice(),
        threads: args.threads,
        f64: args.f64,
        quiet: args.quiet,
        gpu,
        verify: args.verify,
        index: args.index,
        cache: Cache::user(),
    };
    let exec = run::execute_frames(&problem, &params, &frames, &run_opts)?;
    if !args.quiet {
        for note in &exec.notes {
            eprintln!("note: {note}");
        }
    }
    let out_opts = OutputOptions { out, symmetric: args.symmetric, sorted: args.sorted, quiet: args.quiet };
    let to_stdout = args.report.as_deref() == Some("-");
    let report = report::present(&problem, &params, &frames, &exec, &out_opts, to_stdout)?;
    if let Some(target) = &report_target {
        crate::write::document(target, &report)?;
    }
    if let Some(path) = &args.plot {
        report::plot(&problem, &params, &frames, &exec, path)?;
        if !args.quiet {
            eprintln!("drew {}", path.display());
        }
    }
    Ok(())
}

/// The frames of a run. With --frames every input is a frame of one set;
/// otherwise each input is a set (A, then B), a 3-D .npy holding that set's
/// trajectory. Two sets of several frames have the same number of them; a set
/// of one frame stays put in every frame of the other.
fn read_frames_of(
    given: &[String],
    components: &[Component],
    opts: &InputOptions,
    each_a_frame: bool,
) -> anyhow::Result<Vec<Inputs>> {
    if each_a_frame {
        let mut frames = Vec::new();
        for arg in given {
            frames.extend(read_frames(arg, components, opts)?.into_iter().map(|a| Inputs { a, b: None }));
        }
        return Ok(frames);
    }
    let a = read_frames(&given[0], components, opts).context("set A")?;
    let b = match given.get(1) {
        Some(arg) => {
            Some(read_frames(arg, components, &InputOptions { seed: opts.seed + 1, ..opts.clone() }).context("set B")?)
        }
        None => None,
    };
    let n_b = b.as_ref().map_or(1, Vec::len);
    if a.len() != n_b && a.len() != 1 && n_b != 1 {
        anyhow::bail!(
            "set A has {} frames and set B {n_b}: give both the same number, or one frame for a set that stays put",
            a.len()
        );
    }
    let frame = |set: &[PointSet], f: usize| set[f.min(set.len() - 1)].clone();
    Ok((0..a.len().max(n_b)).map(|f| Inputs { a: frame(&a, f), b: b.as_deref().map(|b| frame(b, f)) }).collect())
}

/// Plan decisions forced for an experiment.
#[derive(Args)]
struct ForcedArgs {
    /// Force the input cache.
    #[arg(long, value_name = "register_shm|register_roc|shuffle|naive")]
    input_cache: Option<InputCache>,
    /// Force the output stage.
    #[arg(long, value_name = "register|op|aop|global|dob|topk")]
    output: Option<OutputChoice>,
    /// Force the number of private output copies (1, 2, 4, 8, 16, 32).
    #[arg(long)]
    copies: Option<u32>,
    /// Force the threads per block (a power of two, 32 to 1024).
    #[arg(long)]
    block_size: Option<u32>,
    /// Force the own points per thread (1, 2, 4, 8).
    #[arg(long)]
    points_per_thread: Option<u32>,
    /// Force how pairs are tested: on their values, or on the spec's key.
    #[arg(long, value_name = "values|keys")]
    test: Option<Test>,
}

impl ForcedArgs {
    fn forced(&self) -> Forced {
        Forced {
            input_cache: self.input_cache,
            output: self.output,
            copies: self.copies,
            block_size: self.block_size,
            points_per_thread: self.points_per_thread,
            test: self.test,
        }
    }
}

/// What to plan for: the problem, the device, the size, and forced choices.
#[derive(Args)]
struct Target {
    /// A built-in problem name (see `twobs list`) or the path of a spec.
    problem: String,
    /// Device profile (titanxp, a100, h100, h200), or auto for the GPU in this machine.
    #[arg(long, default_value = "h100")]
    device: String,
    /// Number of points: N for one set or both, or NxM for sets A and B.
    #[arg(long, default_value = DEFAULT_POINTS, value_name = "N[xM]")]
    points: String,
    /// Override a parameter of the spec.
    #[arg(long = "param", value_name = "NAME=VALUE")]
    params: Vec<String>,
    /// Space the histogram's buckets logarithmically (min > 0).
    #[arg(long)]
    log_bins: bool,
    /// Values per point, for a problem that takes its dimension from the input.
    #[arg(long)]
    dims: Option<u32>,
    /// The kernel whose blocks walk a grid's units (a spec with a <cutoff>;
    /// a run takes it where its data make the grid skip half the pairs).
    #[arg(long)]
    grid: bool,
    #[command(flatten)]
    forced: ForcedArgs,
}

/// `twobs plan --schedule`: the schedule of a run on a described machine.
#[derive(Args)]
struct ScheduleArgs {
    /// Also print the schedule of a run of --points uniform points on a
    /// described machine: the index, which GPUs take part and how, the CPU's share.
    #[arg(long)]
    schedule: bool,
    /// With --schedule: GPUs of the --device profile.
    #[arg(long, default_value_t = 1, value_name = "N", requires = "schedule")]
    gpu_count: usize,
    /// With --schedule: the host's cores (this machine's by default).
    #[arg(long, value_name = "N", requires = "schedule")]
    cores: Option<usize>,
    /// With --schedule: whether the CPU's cores take part (as `twobs run --hybrid`).
    #[arg(long, value_enum, default_value = "auto", requires = "schedule")]
    hybrid: Hybrid,
}

impl ScheduleArgs {
    /// The schedule of `p`'s points, drawn uniformly (a sample of them), on
    /// the described machine.
    fn print(&self, p: &Planned) -> anyhow::Result<()> {
        let components = p.problem.input.components();
        let set = |n: u64, seed: u64| -> anyhow::Result<index::SetShape> {
            let sample = synthesize(Generator::Uniform, n.min(1 << 14), &components, seed)?;
            Ok(index::SetShape::described(n as usize, sample))
        };
        let points = p.plan.shape.points;
        let shapes = index::Shapes { a: set(points.a, 7)?, b: points.b.map(|b| set(b, 8)).transpose()? };
        let cores = self.cores.unwrap_or_else(schedule::host_cores);
        let memory = described_memory(&p.device);
        let workers = schedule::Workers::described(&p.device, self.gpu_count, memory, DEFAULT_STREAMS, cores);
        let opts = GpuOptions { streams: DEFAULT_STREAMS, hybrid: self.hybrid, ..Default::default() };
        let made = schedule::Schedule::make(&p.problem, &p.params, &shapes, IndexChoice::Auto, &opts, &workers)?;
        println!(
            "\nschedule on {} x {} ({} GiB each) beside {cores} cores, for uniform points (a sample of 2^14 a set):",
            self.gpu_count,
            p.device.name,
            memory >> 30
        );
        for (what, why) in made.describe() {
            println!("  {what:<13} {why}");
        }
        Ok(())
    }
}

/// The memory of one GPU of `device`'s profile, for a described machine.
fn described_memory(device: &Device) -> usize {
    let gib = match device.name.to_lowercase() {
        n if n.contains("h200") => 141,
        n if n.contains("h100") || n.contains("a100") => 80,
        n if n.contains("titan") => 12,
        _ => 16,
    };
    gib << 30
}

struct Planned {
    problem: Problem,
    params: Params,
    device: Device,
    plan: Plan,
}

impl Target {
    /// `--points N` or `NxM`; one number for a problem of two sets means N x N,
    /// unless the spec also allows one set (`sets="1,2"`).
    fn points(&self, problem: &Problem) -> anyhow::Result<Points> {
        let parse = |s: &str| {
            s.trim().replace('_', "").parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| {
                anyhow::anyhow!("--points {}: expected a positive whole number, or NxM for two sets", self.points)
            })
        };
        let (a, b) = match self.points.split_once('x') {
            Some((a, b)) => (parse(a)?, Some(parse(b)?)),
            None => (parse(&self.points)?, None),
        };
        Ok(match problem.input.sets {
            _ if problem.input.either => Points { a, b },
            Sets::One if b.is_some() => {
                anyhow::bail!("--points {}: this problem has one set; give one number", self.points)
            }
            Sets::One => Points { a, b: None },
            Sets::Two => Points { a, b: Some(b.unwrap_or(a)) },
        })
    }

    fn plan(&self) -> anyhow::Result<Planned> {
        let problem = load(&self.problem, self.log_bins)?;
        let params = bind(&problem, &self.params)?;
        let device = select_device(&self.device)?;
        let points = self.points(&problem)?;
        let problem = problem.with_sets(if points.b.is_some() { 2 } else { 1 })?;
        let problem = match self.dims {
            Some(dims) => problem.with_dims(dims).context("--dims")?,
            None => problem,
        };
        let forced = self.forced.forced();
        let plan = match (self.grid, &problem.cutoff) {
            (false, _) => Plan::new(&problem, &params, &device, points, forced)?,
            (true, Some(_)) => Plan::grid(&problem, &params, &device, points, forced)?,
            (true, None) => {
                anyhow::bail!("--grid: `{}` declares no <cutoff>, so its pairs are never found on a grid", problem.name)
            }
        };
        Ok(Planned { problem, params, device, plan })
    }

    /// The command that regenerates this kernel, for its header.
    fn command_line(&self, problem: &Problem, device: &Device) -> String {
        let points = (self.points != DEFAULT_POINTS).then_some(self.points.as_str());
        let command = codegen::regenerate_command(problem, device, points, &self.params, self.forced.forced());
        if self.grid { command + " --grid" } else { command }
    }
}

const DEFAULT_POINTS: &str = "1000000";
const DEFAULT_STREAMS: usize = 2;

/// `--device`: a profile name, or `auto` for the GPU in this machine (the h100
/// profile, with a note, when there is none).
fn select_device(name: &str) -> anyhow::Result<Device> {
    if name == "auto" {
        return Ok(cuda::live_device(0).unwrap_or_else(|why| {
            eprintln!("note: --device auto: no usable GPU ({why}); planning for the h100 profile");
            Device::profile("h100").expect("h100 profile exists")
        }));
    }
    Device::profile(name).ok_or_else(|| {
        anyhow::anyhow!("unknown device `{name}`; expected auto or one of: {}", PROFILE_NAMES.join(", "))
    })
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

fn tune_command(args: TuneArgs) -> anyhow::Result<()> {
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
    let mut opts = tune::TuneOptions {
        reps: args.reps,
        run: Box::new(tune::on_gpu(args.gpu, DEFAULT_STREAMS, Cache::user())),
        prepare: Box::new(tune::compile_on_host(dev.clone(), Cache::user())),
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
    let path = TunedProfile::path_in(&TunedProfile::folder(), &dev.name);
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

fn list() {
    for name in problems::BUILT_IN {
        let p = problems::built_in(name).expect("built-in");
        println!("{name:<9} {}", p.summary);
    }
    println!("\nEach is problems/<name>.xml with its CUDA snippet; `twobs plan <name>` explains how it runs.");
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::List => list(),
        Command::Run(args) => run_command(args)?,
        Command::Tune(args) => tune_command(args)?,
        Command::Xi(args) => xi_command(args)?,
        Command::Plan { target, json, schedule } => {
            let p = target.plan()?;
            if json {
                println!("{}", serde_json::to_string_pretty(&p.plan)?);
            } else {
                println!("{} ({}): {}", p.problem.name, p.problem.origin, p.problem.summary);
                println!("output: {}", contribution::describe(&p.problem, &p.params));
                println!(
                    "device: {} ({}, {}): {} SMs, {} KiB shared/SM, {} KiB shared/block opt-in\n",
                    p.device.name,
                    p.device.origin,
                    p.device.arch(),
                    p.device.multiprocessors,
                    p.device.shared_per_sm / 1024,
                    p.device.shared_per_block_optin / 1024
                );
                print!("{}", p.plan);
                if p.problem.cutoff.is_some() {
                    let workers =
                        schedule::Workers::described(&p.device, 1, 0, DEFAULT_STREAMS, schedule::host_cores());
                    let points = p.plan.shape.points.a.max(p.plan.shape.points.b.unwrap_or(0)) as usize;
                    println!(
                        "  {:<13} {:<15} {}",
                        "hybrid",
                        "from the data",
                        schedule::describe_hybrid(&schedule::Rates::of(&workers.gpus, workers.cpu_threads()), points)
                    );
                }
                if let (Some(value), IndexKind::None) =
                    (p.problem.cutoff.as_ref().and_then(|c| c.value.as_ref()), p.plan.index)
                {
                    println!(
                        "  {:<13} {:<15} the spec's cutoff {}: a run sorts the points into cells and walks only neighbouring cells where that skips at least half the pairs (the report says what it chose); `--grid` shows that kernel",
                        "index",
                        "from the data",
                        p.params.describe(value)
                    );
                }
            }
            if schedule.schedule {
                schedule.print(&p)?;
            }
        }
        Command::Gen { target, out_dir, check, cubin } => {
            let p = target.plan()?;
            let cmd = target.command_line(&p.problem, &p.device);
            let kernel = codegen::render(&p.problem, &p.params, &p.plan, &p.device, &cmd);
            match out_dir {
                Some(dir) => {
                    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
                    let path = dir.join(&kernel.file_name);
                    // Only a kernel twobs wrote may be replaced: the spec's own snippet
                    // often has the kernel's name (manhattan.cu beside manhattan.xml).
                    if let Ok(existing) = std::fs::read_to_string(&path)
                        && !existing.starts_with(codegen::KERNEL_FIRST_LINE)
                    {
                        anyhow::bail!(
                            "{} exists and twobs did not write it (it does not start with `{}`); write the kernel elsewhere with -o",
                            path.display(),
                            codegen::KERNEL_FIRST_LINE
                        );
                    }
                    crate::write::file_atomically(&path, |w| w.write_all(kernel.source.as_bytes()))
                        .with_context(|| format!("cannot write {}", path.display()))?;
                    eprintln!("wrote {} ({}, {} lines)", path.display(), p.plan.variant, kernel.source.lines().count());
                }
                None if check => {}
                None => print!("{}", kernel.source),
            }
            if check {
                let compiled = nvrtc::compile(&kernel, &p.device.arch())?;
                eprintln!(
                    "compiled {} for {}: {} registers, {} bytes spilled, {} B cubin",
                    kernel.file_name,
                    compiled.arch,
                    compiled.registers.map_or("?".to_owned(), |r| r.to_string()),
                    compiled.spill_bytes,
                    compiled.cubin.len()
                );
                if std::env::var_os("TWOBS_SHOW_LOG").is_some() {
                    eprintln!("{}", compiled.log);
                }
                if let Some(path) = cubin {
                    if path.exists() {
                        anyhow::bail!("{} exists; twobs does not overwrite a file it did not write", path.display());
                    }
                    std::fs::write(&path, &compiled.cubin)
                        .with_context(|| format!("cannot write {}", path.display()))?;
                    eprintln!("wrote {}", path.display());
                }
            }
        }
    }
    Ok(())
}

/// On SIGINT or SIGTERM: remove the result files half written, then exit as
/// the signal would (128 + its number), so that no partial file is left.
fn remove_partial_files_on_interrupt() {
    let _ = ctrlc::set_handler(|| {
        crate::write::remove_partial_files();
        eprintln!("twobs: interrupted; no result was written");
        std::process::exit(130);
    });
}

pub fn main() -> ExitCode {
    remove_partial_files_on_interrupt();
    guarded(|| run(Cli::parse()))
}

/// The exit status of an internal error (a panic): EX_SOFTWARE of sysexits.h.
pub const INTERNAL_ERROR: u8 = 70;

/// Runs a command: its error becomes `error: ...` and status 1; a panic in
/// it, or in a thread it joined, becomes one line that says where and asks
/// for a report, and status [`INTERNAL_ERROR`]. Partial files are removed
/// as the panic unwinds (`write::file_atomically`). TWOBS_BACKTRACE=1 also
/// prints the panic's own message and a backtrace.
pub fn guarded(command: impl FnOnce() -> anyhow::Result<()>) -> ExitCode {
    static FIRST_PANIC: Mutex<Option<String>> = Mutex::new(None);
    let backtrace = std::env::var_os("TWOBS_BACKTRACE").is_some_and(|v| v != "0");
    std::panic::set_hook(Box::new(move |info| {
        let mut first = FIRST_PANIC.lock().unwrap_or_else(|e| e.into_inner());
        if first.is_none() {
            let message = info
                .payload()
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| info.payload().downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".into());
            let at = info.location().map_or(String::new(), |l| format!(" at {}:{}:{}", l.file(), l.line(), l.column()));
            *first = Some(format!("{message}{at}"));
        }
        if backtrace {
            eprintln!("{info}\n{}", std::backtrace::Backtrace::force_capture());
        }
    }));
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(command));
    let _ = std::panic::take_hook();
    match outcome {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
        Err(_) => {
            crate::write::remove_partial_files();
            let what = FIRST_PANIC.lock().unwrap_or_else(|e| e.into_inner()).take();
            eprintln!("{}", internal_error_line(what.as_deref().unwrap_or("a panic")));
            ExitCode::from(INTERNAL_ERROR)
        }
    }
}

/// The one line an internal error prints.
pub fn internal_error_line(what: &str) -> String {
    format!(
        "twobs: internal error: {what}. This is a bug in twobs {}, not in your input; no result was written. Please report it with the command you ran (TWOBS_BACKTRACE=1 adds a backtrace).",
        env!("CARGO_PKG_VERSION")
    )
}
