//! `twobs run`: a problem computed on data, its result, report and plot written.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Args;

use super::{BackendArg, DEFAULT_STREAMS, ForcedArgs, FormatArg, bind, load, with_input_dims};
use crate::cache::Cache;
use crate::data::{self, Column, InputOptions, Inputs, Outside, PointSet, read_frames};
use crate::index::IndexChoice;
use crate::ranks;
use crate::report::{self, OutputOptions};
use crate::request::{BoxOrigin, Frame, Hint, Joined, Options, Placement, Request, RequestError, Shaping};
use crate::run::{self, Execution, Progress, Workers};
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
    /// Partial g(r) (or any statistic) between two types of atoms of an MD
    /// input (.xyz species, .gro atom names, LAMMPS `element` or `type`): set
    /// A holds the atoms of the first, set B those of the second (one set
    /// where both are the same). A name ending in `*` matches any ending (HW*).
    /// With two --inputs, A is chosen from the first and B from the second.
    #[arg(long, value_name = "A,B")]
    types: Option<String>,
    /// Leave out every pair whose points share this id (the spec's
    /// <exclude same="NAME"/>): `molecule` (an MD file's molecules: LAMMPS
    /// `mol`, .gro residues, an extended XYZ `mol` property), or an id given by --id.
    #[arg(long, value_name = "NAME")]
    exclude_same: Option<String>,
    /// An integer id per point of an --input (once per --input, in order): a
    /// 1-D .npy or a text file of one integer per line. The spec's points carry
    /// it as the member NAME (<id name="NAME"/>); an MD input gives `molecule`
    /// and `type` itself.
    #[arg(long = "id", value_name = "NAME=FILE")]
    ids: Vec<String>,
    /// The atoms' types and molecules for MD inputs that name none (.xtc):
    /// the first frame of an MD file of the same atoms (a .gro, say).
    #[arg(long, value_name = "FILE")]
    topology: Option<String>,
    /// Points outside the problem's periodic box: wrap them in, or refuse the input (default:
    /// wrap where at most half of a set lies outside, refuse the set where more do).
    #[arg(long, value_enum, value_name = "WRAP|REFUSE")]
    outside_box: Option<Outside>,
    /// Where the periodic box lies: its corner at the origin (coordinates in
    /// [0, L), LAMMPS, GROMACS), or centred on it (freud, HOOMD-blue: [-L/2, L/2)).
    #[arg(long, value_enum, default_value = "corner")]
    box_origin: BoxOrigin,
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
    use crate::ranks::Ranks;
    let srun = crate::ranks::srun_tasks();
    if crate::ranks::launched().is_none() {
        return match srun {
            Some(n) => anyhow::bail!(crate::ranks::no_pmi(n)),
            None => Ok(None),
        };
    }
    let world = crate::ranks::mpi::World::start()?;
    if let (1, Some(n)) = (world.size(), srun) {
        anyhow::bail!(crate::ranks::no_pmi(n));
    }
    Ok(Some(ranks::Handle(std::sync::Arc::new(world))))
}

/// Without MPI, a launcher's several copies would each run the whole problem
/// and write the same files: refused.
#[cfg(not(feature = "mpi"))]
fn start_ranks() -> anyhow::Result<Option<ranks::Handle>> {
    match crate::ranks::launched().or(crate::ranks::srun_tasks()) {
        Some(n) if n > 1 => anyhow::bail!(
            "an MPI launcher started {n} copies of this twobs, which was built without MPI: each would run the whole problem and write the same files; build it with `cargo build --release --features mpi`, or run one process"
        ),
        _ => Ok(None),
    }
}

/// The run, as one process or as one rank of several: rank 0 reads the
/// inputs (the run sends the other ranks what they hold) and alone writes
/// the result, the report and the plot, and says the notes.
fn run_as(mut args: RunArgs, ranks: Option<ranks::Handle>) -> anyhow::Result<()> {
    let root = ranks.as_ref().is_none_or(|h| h.0.rank() == 0);
    args.quiet |= !root;
    refuse_flags_of_another_backend(&args)?;
    let opts = InputOptions { dims: args.dims, drop_nonfinite: args.drop_nonfinite, seed: args.seed };
    let given = inputs_or_default(&load(&args.problem, args.log_bins)?, &args);
    let types = args.types.as_deref().map(TypePair::parse).transpose()?;
    let problem = shaped_problem(&args, &given, types.as_ref(), &opts)?;
    let params = bind(&problem, &md_box_placeholder(&problem, &args))?;
    // Where the result, the report and the plot go is checked before the
    // input is read: a large input takes a while to read or draw.
    let destinations = if root { Some(Destinations::check(&problem, &args)?) } else { None };
    let workers = workers(&args, ranks)?;
    let options = Options { index: args.index, verify: args.verify, f64: args.f64 };
    let request = match root {
        true => read_request(problem, &params, &given, &opts, &args, types.as_ref(), options)?,
        false => Request::from_root(problem, params, options),
    };
    let exec = run::execute(&request, &workers)?;
    if !args.quiet {
        for note in &exec.notes {
            eprintln!("note: {note}");
        }
    }
    match destinations {
        Some(destinations) => write_outputs(&request, &exec, destinations, &args),
        None => Ok(()),
    }
}

/// The problem as the flags and inputs make it: its sets (one a frame, or
/// a type each), the inputs' dimension, weights, ids and exclusion.
fn shaped_problem(
    args: &RunArgs,
    given: &[String],
    types: Option<&TypePair>,
    opts: &InputOptions,
) -> anyhow::Result<Problem> {
    let problem = load(&args.problem, args.log_bins)?;
    let sets = match types {
        _ if args.frames => 1,
        Some(t) if given.len() == 1 => 1 + usize::from(t.a != t.b),
        _ => given.len(),
    };
    if types.is_some() && !args.weights.is_empty() {
        anyhow::bail!("--weights with --types: the weights would be of the chosen atoms; give one of them");
    }
    if !args.weights.is_empty() && args.weights.len() != sets {
        anyhow::bail!(
            "--weights: {} files for {sets} set{} of points; give one per --input, in the same order",
            args.weights.len(),
            if sets == 1 { "" } else { "s" }
        );
    }
    let mut ids = Vec::new();
    for item in &args.ids {
        let (name, _) = item.split_once('=').ok_or_else(|| anyhow::anyhow!("--id {item}: expected NAME=FILE"))?;
        // An id's name is checked by itself first, for a message that names the flag.
        problem.with_id(name).with_context(|| format!("--id {item}"))?;
        ids.push(name.to_owned());
    }
    let shaping = Shaping {
        sets,
        log_bins: false,
        dims: None,
        weighted: !args.weights.is_empty(),
        ids,
        exclude_same: args.exclude_same.clone(),
        f64: args.f64,
        pair_weight: None,
    };
    let problem = shaping.apply(&problem).map_err(|e| match (&args.exclude_same, e) {
        (Some(_), RequestError::Param(e)) if e.to_string().contains("excluding pairs") => {
            anyhow::Error::new(e).context("--exclude-same")
        }
        (_, e) => e.into(),
    })?;
    with_input_dims(problem, &given[0], opts)
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
            if matches!(problem.output, Output::Knn { .. })
                && *format == Format::Npy
                && let Some(values) = write::knn_values_path(path)
            {
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
    read.extend(args.topology.iter().filter(exists).map(|t| Named::new("--topology", t)));
    read.extend(
        args.ids
            .iter()
            .filter_map(|i| i.split_once('='))
            .map(|(_, f)| f.to_owned())
            .filter(|f| exists(&f))
            .map(|f| Named::new("--id", f)),
    );
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

/// The request of the frames of points to run on: read, chosen by type,
/// checked to add up, moved into the periodic box, with their weights and
/// ids, and each frame's parameters (its own box where an MD file gives
/// one, else one set for all).
fn read_request(
    problem: Problem,
    params: &Params,
    given: &[String],
    opts: &InputOptions,
    args: &RunArgs,
    types: Option<&TypePair>,
    options: Options,
) -> anyhow::Result<Request> {
    let topology = match &args.topology {
        Some(t) => Some(data::md::read_all(Path::new(t)).context("--topology")?.swap_remove(0)),
        None => None,
    };
    let components = problem.input.element.components();
    let read = read_frames_of(given, &components, opts, args.frames, types, &args.ids, topology.as_ref())?;
    let (frame_params, file_boxes, notes) = frame_params(&problem, params, &read, args)?;
    let frames: Vec<Frame> = read
        .iter()
        .enumerate()
        .map(|(f, (a, b))| Frame {
            params: frame_params[f.min(frame_params.len() - 1)].clone(),
            inputs: Inputs { a: a.set.clone(), b: b.as_ref().map(|b| b.set.clone()) },
            shapes: None,
        })
        .collect();
    // One file of weights serves every frame of a trajectory: the weights are the atoms'.
    let weights = args
        .weights
        .iter()
        .zip(frames[0].inputs.sets())
        .map(|(file, set)| data::read_weights(file, set.len()))
        .collect::<Result<_, _>>()?;
    let joined = Joined { weights, ids: id_columns(&problem, &read)? };
    // A box read from the file is the data's: points a little outside it are wrapped in.
    let outside = args.outside_box.or(file_boxes.then_some(Outside::Wrap));
    let placement = Placement { origin: args.box_origin, outside };
    let mut request = Request::host(problem, frames, joined, placement, options).map_err(|e| match e.hint() {
        // The library names no flag: the wrapping it offers is --outside-box wrap here.
        Some(Hint::WrapIntoBox) => anyhow::anyhow!("{e} (--outside-box wrap)"),
        None => match &e {
            RequestError::Refused(why) if why.contains("has no periodic box") && args.outside_box.is_some() => {
                anyhow::anyhow!("--outside-box: {why}")
            }
            _ => e.into(),
        },
    })?;
    request.notes.splice(0..0, notes);
    Ok(request)
}

/// The --params, with the box open (0) where the inputs are MD files and
/// --param leaves the box alone: each frame's box comes from the file
/// ([`frame_params`]), and a file without one has open boundaries.
fn md_box_placeholder(problem: &Problem, args: &RunArgs) -> Vec<String> {
    let mut params = args.params.clone();
    let Some(b) = problem.params.iter().find(|p| p.kind == ParamKind::Box) else { return params };
    let md = !args.inputs.is_empty() && args.inputs.iter().all(|i| data::md::Format::of(Path::new(i)).is_some());
    if md && !params.iter().any(|p| p.split_once('=').is_some_and(|(n, _)| n.trim() == b.name)) {
        params.push(format!("{}=0", b.name));
    }
    params
}

/// One set of one frame as read: its points, and the box and ids an MD
/// file (or an --id file) gives beside them.
#[derive(Clone)]
struct SetRead {
    set: PointSet,
    cell: Option<data::md::Cell>,
    /// Each point's type name (MD files).
    types: Option<Vec<String>>,
    /// Integer ids by name: an MD file's `molecule` and `type`, and --id files.
    ids: Vec<(String, Vec<i64>)>,
}

impl SetRead {
    fn subset(&self, rows: &[usize], origin: String) -> SetRead {
        SetRead {
            set: self.set.subset(rows, origin),
            cell: self.cell,
            types: self.types.as_ref().map(|t| rows.iter().map(|&r| t[r].clone()).collect()),
            ids: self.ids.iter().map(|(n, v)| (n.clone(), rows.iter().map(|&r| v[r]).collect())).collect(),
        }
    }
}

/// `--types A,B`: the atom types of set A and set B.
struct TypePair {
    a: String,
    b: String,
}

impl TypePair {
    fn parse(text: &str) -> anyhow::Result<TypePair> {
        match text.split(',').map(str::trim).collect::<Vec<_>>()[..] {
            [a, b] if !a.is_empty() && !b.is_empty() => Ok(TypePair { a: a.to_owned(), b: b.to_owned() }),
            [a] if !a.is_empty() => Ok(TypePair { a: a.to_owned(), b: a.to_owned() }),
            _ => anyhow::bail!("--types {text}: expected A,B (two type names, e.g. OW,HW*), or one name"),
        }
    }

    /// Whether `name` is of `pattern` (a trailing `*` matches any ending).
    fn matches(pattern: &str, name: &str) -> bool {
        match pattern.strip_suffix('*') {
            Some(stem) => name.starts_with(stem),
            None => name == pattern,
        }
    }

    /// The points of `set` whose type is `pattern`; refused where it has no types or none is.
    fn choose(pattern: &str, set: &SetRead) -> anyhow::Result<SetRead> {
        let Some(types) = &set.types else {
            anyhow::bail!(
                "--types: {} names no types of atoms; an MD file does (.xyz, .gro, .lammpstrj; .xtc with --topology)",
                set.set.origin
            )
        };
        let rows: Vec<usize> = (0..types.len()).filter(|&i| Self::matches(pattern, &types[i])).collect();
        if rows.is_empty() {
            let mut names: Vec<&str> = types.iter().map(String::as_str).collect();
            names.sort_unstable();
            names.dedup();
            anyhow::bail!(
                "--types: no atom of {} is of type `{pattern}`; its types are {}",
                set.set.origin,
                names.join(", ")
            );
        }
        Ok(set.subset(&rows, format!("{} ({pattern})", set.set.origin)))
    }
}

/// The frames of `arg`, with an MD file's boxes, types and ids (from
/// `topology` where the file names none).
fn read_sets(
    arg: &str,
    components: &[Component],
    opts: &InputOptions,
    topology: Option<&data::md::Frame>,
) -> anyhow::Result<Vec<SetRead>> {
    if data::md::Format::of(Path::new(arg)).is_none() || !Path::new(arg).exists() {
        let sets = read_frames(arg, components, opts)?;
        return Ok(sets.into_iter().map(|set| SetRead { set, cell: None, types: None, ids: Vec::new() }).collect());
    }
    data::md::read_all(Path::new(arg))?
        .into_iter()
        .map(|f| {
            let f = match topology {
                Some(t) => f.with_topology(t)?,
                None => f,
            };
            let set = f.points(components)?.validate(components, false)?;
            let mut ids = Vec::new();
            let types = (!f.types.is_empty()).then(|| {
                ids.push(("type".to_owned(), type_ids(&f.types)));
                f.types
            });
            if let Some(m) = f.molecules {
                ids.push(("molecule".to_owned(), m));
            }
            Ok(SetRead { set, cell: f.cell, types, ids })
        })
        .collect()
}

/// An integer per type name: the name where it is a number (LAMMPS types),
/// else the name's place in the order the names first appear.
fn type_ids(types: &[String]) -> Vec<i64> {
    let mut seen: Vec<&str> = Vec::new();
    types
        .iter()
        .map(|t| {
            t.parse::<i64>().unwrap_or_else(|_| match seen.iter().position(|s| s == t) {
                Some(k) => k as i64,
                None => {
                    seen.push(t);
                    seen.len() as i64 - 1
                }
            })
        })
        .collect()
}

/// The frames of a run. With --frames every input is a frame of one set;
/// otherwise each input is a set (A, then B), a 3-D .npy or an MD file holding that set's
/// trajectory. Two sets of several frames have the same number of them; a set
/// of one frame stays put in every frame of the other. `--types` chooses A
/// and B among each frame's atoms.
fn read_frames_of(
    given: &[String],
    components: &[Component],
    opts: &InputOptions,
    each_a_frame: bool,
    types: Option<&TypePair>,
    id_files: &[String],
    topology: Option<&data::md::Frame>,
) -> anyhow::Result<Vec<(SetRead, Option<SetRead>)>> {
    let mut sets: Vec<Vec<SetRead>> = Vec::new();
    for (k, arg) in given.iter().enumerate() {
        let opts = InputOptions { seed: opts.seed + k as u64, ..opts.clone() };
        let mut frames =
            read_sets(arg, components, &opts, topology).with_context(|| ["set A", "set B"][k.min(1)].to_owned())?;
        for (name, file) in id_files_of(id_files, k, given.len(), each_a_frame)? {
            let n = frames[0].set.len();
            let column = data::read_ids(&file, n).with_context(|| format!("--id {name}={file}"))?;
            for f in frames.iter_mut() {
                f.ids.retain(|(m, _)| *m != name);
                f.ids.push((name.clone(), column.clone()));
            }
        }
        sets.push(frames);
    }
    let choose = |a: SetRead, b: Option<SetRead>| -> anyhow::Result<(SetRead, Option<SetRead>)> {
        let Some(t) = types else { return Ok((a, b)) };
        let chosen_a = TypePair::choose(&t.a, &a)?;
        Ok(match b {
            Some(b) => (chosen_a, Some(TypePair::choose(&t.b, &b)?)),
            None if t.a == t.b => (chosen_a, None),
            None => (chosen_a, Some(TypePair::choose(&t.b, &a)?)),
        })
    };
    if each_a_frame {
        return sets.into_iter().flatten().map(|a| choose(a, None)).collect();
    }
    let a = &sets[0];
    let b = sets.get(1);
    let n_b = b.map_or(1, Vec::len);
    if a.len() != n_b && a.len() != 1 && n_b != 1 {
        anyhow::bail!(
            "set A has {} frames and set B {n_b}: give both the same number, or one frame for a set that stays put",
            a.len()
        );
    }
    let frame = |set: &[SetRead], f: usize| set[f.min(set.len() - 1)].clone();
    (0..a.len().max(n_b)).map(|f| choose(frame(a, f), b.map(|b| frame(b, f)))).collect()
}

/// The `--id NAME=FILE`s of input `k` of `inputs`: the k-th of each name
/// (with --frames, every input is a frame of one set, and the one file of a
/// name serves them all).
fn id_files_of(
    id_files: &[String],
    k: usize,
    inputs: usize,
    each_a_frame: bool,
) -> anyhow::Result<Vec<(String, String)>> {
    let mut by_name: Vec<(String, Vec<String>)> = Vec::new();
    for item in id_files {
        let (name, file) = item.split_once('=').ok_or_else(|| anyhow::anyhow!("--id {item}: expected NAME=FILE"))?;
        match by_name.iter_mut().find(|(n, _)| n == name) {
            Some((_, files)) => files.push(file.to_owned()),
            None => by_name.push((name.to_owned(), vec![file.to_owned()])),
        }
    }
    let mut out = Vec::new();
    for (name, files) in by_name {
        let wanted = if each_a_frame { 1 } else { inputs };
        if files.len() != wanted {
            anyhow::bail!(
                "--id {name}: {} files for {wanted} input{}; give one per --input, in the same order",
                files.len(),
                if wanted == 1 { "" } else { "s" }
            );
        }
        out.push((name, files[if each_a_frame { 0 } else { k }].clone()));
    }
    Ok(out)
}

/// Each frame's parameters: where the problem has a periodic box and the
/// input an MD file's box, the frame's own (unless --param sets the box);
/// whether any came from a file; and notes.
fn frame_params(
    problem: &Problem,
    params: &Params,
    read: &[(SetRead, Option<SetRead>)],
    args: &RunArgs,
) -> anyhow::Result<(Vec<Params>, bool, Vec<String>)> {
    let cells: Vec<Option<data::md::Cell>> =
        read.iter().map(|(a, b)| a.cell.or(b.as_ref().and_then(|b| b.cell))).collect();
    for (f, (a, b)) in read.iter().enumerate() {
        if let (Some(x), Some(y)) = (a.cell, b.as_ref().and_then(|b| b.cell))
            && x != y
        {
            anyhow::bail!(
                "frame {f}: set A's file gives the box {} and set B's {}; the sets of a frame share one box",
                x.param_text(),
                y.param_text()
            );
        }
    }
    let Some(box_param) = problem.params.iter().find(|p| p.kind == ParamKind::Box) else {
        return Ok((vec![params.clone()], false, Vec::new()));
    };
    if cells.iter().all(Option::is_none) {
        return Ok((vec![params.clone()], false, Vec::new()));
    }
    let named = |p: &String| p.split_once('=').is_some_and(|(n, _)| n.trim() == box_param.name);
    if args.params.iter().any(named) {
        // (the user's own box; a placeholder is never in args.params)
        return Ok((
            vec![params.clone()],
            false,
            vec![format!("--param {} is the box; the one in the input file is not used", box_param.name)],
        ));
    }
    if cells.iter().any(Option::is_none) {
        anyhow::bail!(
            "some frames of the input give a periodic box and some do not; give --param {}=...",
            box_param.name
        );
    }
    let mut out: Vec<Params> = Vec::new();
    for (f, cell) in cells.iter().enumerate() {
        let cell = cell.expect("every frame has one");
        let mut overrides = args.params.clone();
        overrides.push(format!("{}={}", box_param.name, cell.param_text()));
        let p = problem.bind(&overrides).with_context(|| format!("frame {f}: the box read from the file"))?;
        out.push(p);
    }
    // Several boxes are read at run time, one kernel for all (`run::execute_frames` says so).
    if out.iter().all(|p| *p == out[0]) {
        out.truncate(1);
    }
    Ok((out, true, Vec::new()))
}

/// Each id's column per set (`<id>`) of every frame: an MD file's
/// molecules and types, or --id files, as i32.
type FrameIds = Vec<(String, Vec<Vec<Column>>)>;
fn id_columns(problem: &Problem, read: &[(SetRead, Option<SetRead>)]) -> anyhow::Result<FrameIds> {
    let mut out = Vec::new();
    for name in &problem.input.ids {
        let mut frames = Vec::new();
        for (a, b) in read {
            frames.push(set_ids(problem, name, a, b.as_ref())?);
        }
        out.push((name.clone(), frames));
    }
    Ok(out)
}

/// Id `name`'s column of each set of one frame, as i32.
fn set_ids(problem: &Problem, name: &str, a: &SetRead, b: Option<&SetRead>) -> anyhow::Result<Vec<Column>> {
    {
        let mut columns = Vec::new();
        for from in std::iter::once(a).chain(b) {
            let Some((_, v)) = from.ids.iter().find(|(n, _)| n == name) else {
                anyhow::bail!(
                    "problem `{}` takes an id `{name}` per point, which {} does not give; give --id {name}=FILE (one integer per point){}",
                    problem.name,
                    from.set.origin,
                    if name == "molecule" { ", or an MD file with molecules (LAMMPS mol, .gro residues)" } else { "" }
                );
            };
            let column = v
                .iter()
                .enumerate()
                .map(|(r, &x)| {
                    i32::try_from(x)
                        .map_err(|_| anyhow::anyhow!("{}: point {r}: {name} {x} does not fit i32", from.set.origin))
                })
                .collect::<anyhow::Result<Vec<i32>>>()?;
            columns.push(Column::I32(column));
        }
        Ok(columns)
    }
}

/// Who runs: the backend, the CPU's threads, the GPUs and how work reaches
/// them, and the MPI ranks (rank 0 sends the others what they hold).
fn workers(args: &RunArgs, ranks: Option<ranks::Handle>) -> anyhow::Result<Workers> {
    crate::memory::check_threads(args.threads).map_err(|e| anyhow::anyhow!("--threads {}: {e}", args.threads))?;
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
    Ok(Workers {
        backend: args.backend.choice(),
        threads: args.threads,
        gpu,
        progress: if args.quiet { Progress::Off } else { Progress::Terminal },
        cache: Cache::user()?,
        ranks,
        root_sends_points: true,
    })
}

/// The result, the report and the plot, each where it was asked to go.
fn write_outputs(
    request: &Request,
    exec: &Execution,
    destinations: Destinations,
    args: &RunArgs,
) -> anyhow::Result<()> {
    let out_opts =
        OutputOptions { out: destinations.result, symmetric: args.symmetric, sorted: args.sorted, quiet: args.quiet };
    let to_stdout = args.report.as_deref() == Some("-");
    let (problem, frames) = (&request.problem, request.frames());
    let report = report::present(problem, frames, exec, &out_opts, to_stdout)?;
    if let Some(target) = &destinations.report {
        crate::write::document(target, &report)?;
    }
    if let Some(path) = &args.plot {
        report::plot(problem, frames, exec, path)?;
        if !args.quiet {
            eprintln!("drew {}", path.display());
        }
    }
    Ok(())
}
