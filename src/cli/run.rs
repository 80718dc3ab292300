//! `twobs run`: a problem computed on data, its result, report and plot written.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Args;

use super::{BackendArg, DEFAULT_STREAMS, ForcedArgs, FormatArg, bind, load, with_input_dims};
use crate::cache::Cache;
use crate::data::{self, InputOptions, Inputs, Outside, PointSet, read_frames};
use crate::index::IndexChoice;
use crate::ranks;
use crate::report::{self, OutputOptions};
use crate::run::{self, Execution, RunOptions};
use crate::schedule::{GpuOptions, Hybrid};
use crate::spec::{Component, Output, ParamKind, Params, Problem, Sets};
use crate::write::{self, Destination, Format, Named, Target as ResultTarget, WriteError};

#[derive(Args)]
pub(super) struct RunArgs {
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
    /// Points outside the problem's periodic box: wrap them in, or refuse the input (default:
    /// wrap where at most half of a set lies outside, refuse the set where more do).
    #[arg(long, value_enum, value_name = "WRAP|REFUSE")]
    outside_box: Option<Outside>,
    /// Pairs in both orders plus (i, i), as GDS-Join counts its results.
    #[arg(long)]
    symmetric: bool,
    /// Sort pairs by (i, j).
    #[arg(long)]
    sorted: bool,
    /// auto (a grid of cells where the spec declares a cutoff and the grid
    /// skips at least half of the pairs; the cell hierarchy where its cost
    /// model says it is cheaper), grid, none (every pair), or cells (the
    /// cell hierarchy: histograms of the built-in Euclidean distance).
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
    /// Re-compute on the CPU backend (all of it, or sampled rows for large inputs) and fail on any
    /// difference: a GPU run, or a CPU run's grid against every pair.
    #[arg(long)]
    verify: bool,
    #[command(flatten)]
    forced: ForcedArgs,
}

/// Points per set of the built-in default dataset.
const DEFAULT_DATASET_POINTS: u64 = 20_000;

pub(super) fn run_command(args: RunArgs) -> anyhow::Result<()> {
    let ranks = start_ranks()?;
    match (run_as(args, ranks.clone()), &ranks) {
        // The other ranks would wait for this one: MPI ends them all.
        (Err(e), Some(h)) if h.0.size() > 1 => {
            eprintln!("error: rank {} of {} on {}: {e:#}", h.0.rank(), h.0.size(), h.0.host());
            // The launcher forwards a rank's output through its proxy, which
            // the abort ends: a moment first, for the message to get out.
            std::thread::sleep(std::time::Duration::from_millis(300));
            h.0.abort(1)
        }
        (result, _) => result,
    }
}

/// MPI's world where an MPI launcher started this process (every rank,
/// one rank too, takes the path of ranks).
#[cfg(feature = "mpi")]
fn start_ranks() -> anyhow::Result<Option<ranks::Handle>> {
    if crate::ranks::launched().is_none() {
        return Ok(None);
    }
    let world = crate::ranks::mpi::World::start()?;
    Ok(Some(ranks::Handle(std::sync::Arc::new(world))))
}

/// Without MPI, a launcher's several copies would each run the whole problem
/// and write the same files: refused.
#[cfg(not(feature = "mpi"))]
fn start_ranks() -> anyhow::Result<Option<ranks::Handle>> {
    match crate::ranks::launched() {
        Some(n) if n > 1 => anyhow::bail!(
            "an MPI launcher started {n} copies of this twobs, which was built without MPI: each would run the whole problem and write the same files; build it with `cargo build --release --features mpi`, or run one process"
        ),
        _ => Ok(None),
    }
}

/// The run, as one process or as one rank of several: only rank 0 writes
/// the result, the report and the plot, and says the notes.
fn run_as(mut args: RunArgs, ranks: Option<ranks::Handle>) -> anyhow::Result<()> {
    let root = ranks.as_ref().is_none_or(|h| h.0.rank() == 0);
    args.quiet |= !root;
    let problem = load(&args.problem, args.log_bins)?;
    let params = bind(&problem, &args.params)?;
    refuse_flags_of_another_backend(&args)?;
    let opts = InputOptions { dims: args.dims, drop_nonfinite: args.drop_nonfinite, seed: args.seed };
    let given = inputs_or_default(&problem, &args);
    let sets_per_frame = if args.frames { 1 } else { given.len() };
    let problem = problem.with_sets(sets_per_frame)?;
    let problem = with_input_dims(problem, &given[0], &opts)?;
    // Points are read as the element is; the weights join them after.
    let components = problem.input.element.components();
    let problem = with_weights(problem, args.weights.len(), sets_per_frame)?;
    // Where the result, the report and the plot go is checked before the
    // input is read: a large input takes a while to read or draw.
    let destinations = if root { Some(Destinations::check(&problem, &args)?) } else { None };
    let mut run_opts = run_options(&args)?;
    run_opts.ranks = ranks.clone();
    // Rank 0 reads the inputs once and sends them to every rank.
    let (frames, input_notes) = match ranks.as_ref().map(|h| &*h.0).filter(|r| r.size() > 1) {
        None => read_points(&problem, &params, &given, &components, &opts, &args)?,
        Some(r) => {
            let read = if root {
                let (frames, notes) = read_points(&problem, &params, &given, &components, &opts, &args)?;
                Some(ranks::encode_frames(&frames, &notes))
            } else {
                None
            };
            ranks::decode_frames(&r.broadcast(read))?
        }
    };
    let mut exec = run::execute_frames(&problem, &params, &frames, &run_opts)?;
    exec.notes.splice(0..0, input_notes);
    if !args.quiet {
        for note in &exec.notes {
            eprintln!("note: {note}");
        }
    }
    match destinations {
        Some(destinations) => write_outputs(&problem, &params, &frames, &exec, destinations, &args),
        None => Ok(()),
    }
}

/// Flags that only one backend has, refused on a run on the other.
fn refuse_flags_of_another_backend(args: &RunArgs) -> anyhow::Result<()> {
    if args.f64 && matches!(args.backend, BackendArg::Cuda) {
        anyhow::bail!("--f64 is a mode of the CPU backend; use --backend cpu");
    }
    if args.hybrid == Hybrid::On && matches!(args.backend, BackendArg::Cpu) {
        anyhow::bail!(
            "--hybrid on shares a GPU run with the CPU's cores; this run is on the CPU alone (--backend cpu)"
        );
    }
    Ok(())
}

/// The `--input`s, or the default dataset once per set of the problem.
fn inputs_or_default(problem: &Problem, args: &RunArgs) -> Vec<String> {
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
    given
}

/// The problem with a weight per point when `--weights` gives one file per set.
fn with_weights(problem: Problem, files: usize, sets_per_frame: usize) -> anyhow::Result<Problem> {
    Ok(match files {
        0 => problem,
        n if n == sets_per_frame => problem.with_point_weights()?,
        n => anyhow::bail!(
            "--weights: {n} files for {sets_per_frame} set{} of points; give one per --input, in the same order",
            if sets_per_frame == 1 { "" } else { "s" }
        ),
    })
}

/// Where the result and the report go.
struct Destinations {
    result: Option<ResultTarget>,
    report: Option<ResultTarget>,
}

impl Destinations {
    /// Checks the result's, the plot's and the report's destinations, in
    /// that order, and that none of them is an input or another of them.
    fn check(problem: &Problem, args: &RunArgs) -> anyhow::Result<Destinations> {
        let result = result_target(problem, args)?;
        let mut written = Vec::new();
        if let Some(ResultTarget { destination: Destination::File(path), format }) = &result {
            let role = if args.out.is_some() { "--out" } else { "the result file" };
            written.push(Named::new(role, path));
            // KNN's values go beside its ids, and both are put in place together.
            if matches!(problem.output, Output::Knn { .. }) && *format == Format::Npy {
                let values = write::knn_values_path(path);
                write::check_writable(&values)
                    .map_err(|source| WriteError::Io { path: values.clone(), cause: source })?;
                let role = format!("its values file {} (beside {})", values.display(), path.display());
                written.push(Named { role, path: values });
            }
        }
        if let Some(path) = &args.plot {
            report::check_plot(problem, path)?;
            written.push(Named::new("--plot", path));
        }
        let report = match args.report.as_deref() {
            None => None,
            Some("-") => Some(ResultTarget::new(Destination::Stdout, Some(Format::Json))?),
            Some(path) => {
                written.push(Named::new("--report", path));
                Some(ResultTarget::new(Destination::File(path.into()), Some(Format::Json))?)
            }
        };
        write::refuse_clashes(&written, &files_read(problem, args))?;
        Ok(Destinations { result, report })
    }
}

/// The files a run reads: its inputs and weights, and a spec's own files.
fn files_read(problem: &Problem, args: &RunArgs) -> Vec<Named> {
    let exists = |p: &&String| Path::new(p.as_str()).exists();
    let mut read: Vec<Named> = args.inputs.iter().filter(exists).map(|i| Named::new("--input", i)).collect();
    read.extend(args.weights.iter().filter(exists).map(|w| Named::new("--weights", w)));
    if Path::new(&args.problem).exists() {
        read.push(Named::new("the spec", &args.problem));
        read.push(Named::new("its snippet", &problem.function.file));
    }
    read
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

/// The frames of points to run on: read, checked to add up, moved into the
/// periodic box, and with their weights; and notes of what was moved.
fn read_points(
    problem: &Problem,
    params: &Params,
    given: &[String],
    components: &[Component],
    opts: &InputOptions,
    args: &RunArgs,
) -> anyhow::Result<(Vec<Inputs>, Vec<String>)> {
    let mut frames = read_frames_of(given, components, opts, args.frames)?;
    if frames.len() > 1 && !matches!(problem.output, Output::Count { .. } | Output::Sum | Output::Histogram { .. }) {
        anyhow::bail!(
            "{} frames: frames add up for counts, sums and histograms, but problem `{}` makes {}; run each frame alone",
            frames.len(),
            problem.name,
            problem.output.kind()
        );
    }
    let notes = into_periodic_box(problem, params, &mut frames, given, args)?;
    join_weights(&mut frames, &args.weights)?;
    Ok((frames, notes))
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

/// Points outside the problem's periodic box wrapped into it (or refused, as
/// `--outside-box` says), with a note of how many per set.
fn into_periodic_box(
    problem: &Problem,
    params: &Params,
    frames: &mut [Inputs],
    given: &[String],
    args: &RunArgs,
) -> anyhow::Result<Vec<String>> {
    let mut notes = Vec::new();
    match (problem.periodic_box(params), args.outside_box) {
        (Some((name, b)), policy) => {
            // Points moved, per set, over all frames.
            let mut moved = [0, 0];
            for inputs in frames.iter_mut() {
                for (k, set) in inputs.sets_mut().enumerate() {
                    moved[k] += set.into_box((&name, &b), policy)?;
                }
            }
            let over = if frames.len() > 1 { format!(" (over {} frames)", frames.len()) } else { String::new() };
            for (k, moved) in moved.into_iter().enumerate().filter(|(_, m)| *m > 0) {
                let set = if args.frames { "the frames".to_owned() } else { given[k].clone() };
                notes.push(format!("{set}: {moved} points outside the box {name}={b} wrapped into it{over}"));
            }
        }
        (None, Some(_)) => anyhow::bail!(
            "--outside-box: problem `{}` has no periodic box{}",
            problem.name,
            if problem.params.iter().any(|p| p.kind == ParamKind::Box) { " (its box is open, 0)" } else { "" }
        ),
        (None, None) => {}
    }
    Ok(notes)
}

/// Each set's `--weights` column joined to its points in every frame.
fn join_weights(frames: &mut [Inputs], files: &[String]) -> anyhow::Result<()> {
    // One file serves every frame of a trajectory: the weights are the atoms'.
    let weights: Vec<data::Column> = files
        .iter()
        .zip(frames[0].sets_mut())
        .map(|(file, set)| data::read_weights(file, set.len()))
        .collect::<Result<_, _>>()?;
    for inputs in frames.iter_mut() {
        for (set, w) in inputs.sets_mut().zip(&weights) {
            set.columns.push(w.clone());
        }
    }
    Ok(())
}

/// The backend's and the GPUs' options from the flags.
fn run_options(args: &RunArgs) -> anyhow::Result<RunOptions> {
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
    Ok(RunOptions {
        backend: args.backend.choice(),
        threads: args.threads,
        f64: args.f64,
        quiet: args.quiet,
        gpu,
        verify: args.verify,
        index: args.index,
        cache: Cache::user()?,
        ranks: None,
    })
}

/// The result, the report and the plot, each where it was asked to go.
fn write_outputs(
    problem: &Problem,
    params: &Params,
    frames: &[Inputs],
    exec: &Execution,
    destinations: Destinations,
    args: &RunArgs,
) -> anyhow::Result<()> {
    let out_opts =
        OutputOptions { out: destinations.result, symmetric: args.symmetric, sorted: args.sorted, quiet: args.quiet };
    let to_stdout = args.report.as_deref() == Some("-");
    let report = report::present(problem, params, frames, exec, &out_opts, to_stdout)?;
    if let Some(target) = &destinations.report {
        crate::write::document(target, &report)?;
    }
    if let Some(path) = &args.plot {
        report::plot(problem, params, frames, exec, path)?;
        if !args.quiet {
            eprintln!("drew {}", path.display());
        }
    }
    Ok(())
}
