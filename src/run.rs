//! `twobs run`: a backend chosen, the problem computed on the inputs, and
//! (when asked) checked against the CPU backend.

use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use crate::backend::cpu::{CpuDriver, CpuError};
use crate::backend::cuda::nvrtc;
use crate::backend::cuda::{self, GpuError, GpuTimings};
pub use crate::backend::{Backend, BackendChoice};
use crate::cache::Cache;
use crate::codegen;
use crate::data::{DeviceInputs, Inputs, Measured, OutOfF32, Spread};
use crate::data::{SetShape, Shapes};
use crate::index::cells;
use crate::index::{self, Grid, IndexChoice, IndexError, IndexKind, Summary};
use crate::outcome::Outcome;
use crate::plan::{Plan, Points, Shape};
use crate::ranks::{self, Holding, Keyed, Pieces, RankWork, Ranks, WireError};
use crate::request::{self, Frame, Options, Request};
use crate::schedule::hierarchy::{Walkers, Without, hierarchy};
use crate::schedule::{self, GpuOptions, Hybrid, Indexing, Part, Schedule, ScheduleError};
use crate::spec::{Params, Problem};
use crate::stage::output::Partial;
use crate::stage::output::{self, Collect};
use crate::stage::visit::Visit;
use crate::verify::{self, VerifyError};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("f64 arithmetic is a mode of the CPU backend; this run is on the GPU")]
    F64OnGpu,
    #[error("{origin}: {why}; {}", if *built_in {
        format!("the CPU backend runs `{problem}` in f64 ({}), or rescale the coordinates", crate::remedy::Remedy::CpuBackend)
    } else {
        format!("rescale the coordinates, or run the snippet in f64 on the CPU backend ({})", crate::remedy::Remedy::CpuF64)
    })]
    OutOfF32 { origin: String, problem: String, why: OutOfF32, built_in: bool },
    #[error(transparent)]
    Gpu(#[from] GpuError),
    #[error(transparent)]
    Cpu(#[from] CpuError),
    #[error(transparent)]
    Verify(#[from] VerifyError),
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    #[error(transparent)]
    Wire(#[from] WireError),
    #[error("the MPI ranks cannot share one schedule: {0}")]
    Unlike(String),
    #[error(transparent)]
    Request(#[from] crate::request::RequestError),
    /// Points given on a GPU where the run needs them on the host.
    #[error("{0}")]
    OnGpu(String),
}

/// Who computes a request: the backend, the CPU's threads, the GPUs and
/// how work reaches them, the MPI ranks that share the run, and the cache
/// of compiled kernels and drivers.
#[derive(Debug, Clone)]
pub struct Workers {
    pub backend: BackendChoice,
    /// CPU threads (0: all cores).
    pub threads: usize,
    pub gpu: GpuOptions,
    /// Where the run's progress goes.
    pub progress: Progress,
    pub cache: Cache,
    /// The MPI ranks that share this run, where it is one of several processes.
    pub ranks: Option<ranks::Handle>,
    /// Under ranks: rank 0 read the points and sends every rank what it
    /// holds (the command line); otherwise every rank holds the same points
    /// (Python's `comm=`).
    pub root_sends_points: bool,
}

/// A request's options and its workers, as every step of a run reads them.
struct Asked<'a> {
    options: Options,
    workers: &'a Workers,
}

/// Seconds spent in each stage.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Timings {
    /// Building (or finding in the cache) the driver or kernel.
    pub compile_s: f64,
    /// Pair computation: the CPU loop (with the grid's making), or the GPU's
    /// upload + kernel + download.
    pub compute_s: f64,
    /// Sorting the points into the grid's cells and listing the neighbours.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index_s: Option<f64>,
    pub total_s: f64,
    pub pairs_per_s: f64,
    /// GPU stages from CUDA events, summed over streams and GPUs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuTimings>,
    /// Floating-point PTX instructions of the pair function (an estimate of the work per pair).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fp_instructions_per_pair: Option<u32>,
    /// The GPUs' peak FP32 issue rate (instructions per second).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fp32_issue_rate: Option<f64>,
    /// pairs/s x instructions per pair / issue rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fp32_issue_fraction: Option<f64>,
    /// Seconds spent re-computing on the CPU for --verify.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verify_s: Option<f64>,
    /// Of `index_s`, the cell hierarchy's steps on the host, where it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hierarchy: Option<cells::Steps>,
}

/// What a run did and found.
#[derive(Debug, Clone)]
pub struct Execution {
    pub backend: Backend,
    pub device: String,
    pub notes: Vec<String>,
    /// Which pairs were visited and what they added up to.
    pub shape: Shape,
    /// Whether a grid found the pairs, and why.
    pub index: Summary,
    pub outcome: Outcome,
    pub timings: Timings,
    /// The GPU plans (diagonal kernel, kernel between blocks).
    pub plans: Vec<Plan>,
    /// What the schedule decided, a line a decision (`Schedule::describe`).
    pub schedule: Vec<(&'static str, String)>,
    /// What --verify compared.
    pub verified: Option<String>,
    /// What each MPI rank did, on rank 0 of a run of several (empty otherwise).
    pub ranks: Vec<RankWork>,
    /// Whether the periodic box was folded into the code or read at run time.
    pub box_time: crate::spec::BoxTime,
}

/// Where a run's progress goes.
#[derive(Debug, Clone, Default)]
pub enum Progress {
    /// Nowhere.
    #[default]
    Off,
    /// A bar on the terminal (standard error) for a run the schedule's rates
    /// say takes more than [`LONG_RUN_S`].
    Terminal,
    /// Into this bar's counters, hidden, which the caller reads while it
    /// waits (Python's session draws them, in a notebook too).
    Watched(Watched),
}

/// A run's pairs done and to do, and the schedule's estimate of its seconds.
#[derive(Debug, Clone)]
pub struct Watched {
    pub bar: ProgressBar,
    /// The estimate's seconds, as f64 bits.
    estimate: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Default for Watched {
    fn default() -> Watched {
        Watched { bar: ProgressBar::hidden(), estimate: Default::default() }
    }
}

impl Watched {
    /// The seconds the schedule's rates give the run now under way (0 before one starts).
    pub fn estimate_s(&self) -> f64 {
        f64::from_bits(self.estimate.load(std::sync::atomic::Ordering::Relaxed))
    }
}

/// Runs estimated to take longer than this show their progress.
pub const LONG_RUN_S: f64 = 3.0;

/// The bar of a run of `total` pairs on `workers` ("cpu, 2 threads"), at
/// `rate` pairs a second by the schedule's rates.
fn progress_bar(total: u128, progress: &Progress, workers: String, rate: f64) -> ProgressBar {
    let total_u64 = total.min(u64::MAX as u128) as u64;
    let estimate = total as f64 / rate.max(1.0);
    match progress {
        Progress::Watched(w) => {
            w.bar.reset();
            w.bar.set_length(total_u64);
            w.estimate.store(estimate.to_bits(), std::sync::atomic::Ordering::Relaxed);
            return w.bar.clone();
        }
        // indicatif draws nothing where stderr is not a terminal.
        Progress::Terminal if estimate > LONG_RUN_S => {}
        _ => return ProgressBar::hidden(),
    }
    let bar = ProgressBar::new(total_u64);
    bar.set_style(
        ProgressStyle::with_template("{spinner} {msg}: {bar:30} {percent:>3}% of {human_len} pairs, {eta} left")
            .expect("valid template"),
    );
    bar.set_message(workers);
    // Drawn from the start, not at the first finished chunk: the compile
    // and a CPU's first chunks took seconds with nothing on the terminal.
    bar.enable_steady_tick(std::time::Duration::from_millis(250));
    bar
}

/// The pairs a second `threads` CPU threads count, by the schedule's rates.
fn cpu_rate(threads: usize) -> f64 {
    schedule::Rates::of(&[], threads).cpu_pairs_per_s
}

/// The pairs a second the GPUs count, by the schedule's rates.
fn gpu_rate(gpus: &cuda::LiveGpus) -> f64 {
    schedule::Rates::of(&gpus.workers.gpus, 0).gpu_pairs_per_s
}

/// Computes `request` on `workers`: the one way a run starts. Frames add
/// their totals (a trajectory), points on a GPU stay there, and MPI ranks
/// share the work: where rank 0 sends the points, it decides what each
/// rank holds (both sets whole, or set B and the rows of A with each piece).
pub fn execute(request: &Request, workers: &Workers) -> Result<Execution, RunError> {
    let start = Instant::now();
    let opts = Asked { options: request.options, workers };
    let sent_by_root = workers.root_sends_points && workers.ranks.as_ref().is_some_and(|h| h.0.size() > 1);
    let mut exec = match &request.points {
        request::Points::Device { params, inputs } => on_points_on_gpu(&request.problem, params, inputs, &opts)?,
        request::Points::FromRoot { params } => from_root(&request.problem, params, &opts)?,
        request::Points::Host(frames) if sent_by_root => as_root(request, frames, &opts)?,
        request::Points::Host(frames) => over_frames(&request.problem, frames, &opts)?,
    };
    exec.notes.splice(0..0, request.notes.iter().cloned());
    exec.timings.total_s = start.elapsed().as_secs_f64();
    Ok(exec)
}

/// Every frame of a trajectory run and their totals added: counts and sums
/// over all frames (the report divides g(r) by the frames' pairs). Only
/// totals add up this way; a request of several frames is one of totals.
fn over_frames(problem: &Problem, frames: &[Frame], opts: &Asked) -> Result<Execution, RunError> {
    let (first, rest) = frames.split_first().expect("a request has at least one frame");
    let mut exec = one_frame(problem, &first.params, &first.inputs, first.shapes.as_ref(), opts, true)?;
    for (f, frame) in rest.iter().enumerate() {
        // The spec's promises were sampled on the first frame.
        let next = one_frame(problem, &frame.params, &frame.inputs, frame.shapes.as_ref(), opts, false)?;
        let (Outcome::Totals(sum), Outcome::Totals(more)) = (&mut exec.outcome, &next.outcome) else {
            unreachable!("a request of several frames is one of totals")
        };
        sum.add(more);
        exec.shape.pairs += next.shape.pairs;
        exec.index.pairs += next.index.pairs;
        exec.index.all_pairs += next.index.all_pairs;
        let t = &mut exec.timings;
        t.compile_s += next.timings.compile_s;
        t.compute_s += next.timings.compute_s;
        t.verify_s = t.verify_s.zip(next.timings.verify_s).map(|(a, b)| a + b);
        if let Some(v) = next.verified {
            exec.verified = exec.verified.map(|mine| format!("{mine}; frame {}: {v}", f + 1));
        }
        for note in next.notes {
            if !exec.notes.contains(&note) {
                exec.notes.push(note);
            }
        }
    }
    exec.notes.extend(rdf_volume(problem, frames));
    exec.timings.pairs_per_s = exec.index.pairs as f64 / exec.timings.compute_s.max(1e-9);
    Ok(exec)
}

/// Rank 0 of a run whose rank 0 read the points: it sends every rank what
/// it holds (the frames whole, or set B alone where A's rows travel with
/// the pieces, [`travel_of`]) and runs its share.
fn as_root(request: &Request, frames: &[Frame], opts: &Asked) -> Result<Execution, RunError> {
    let r = &*opts.workers.ranks.as_ref().expect("a run of several ranks").0;
    let problem = &request.problem;
    // The other ranks know the parameters they were given, not a box read from a file.
    if frames.len() > 1 && frames.iter().any(|f| f.params != frames[0].params) {
        return Err(RunError::Unlike(
            "a box read from an MD file per frame is not sent to the other MPI ranks yet; give the box as a parameter, or run one process".into(),
        ));
    }
    let travel = match frames {
        [one] => travel_of(problem, &one.params, &one.inputs, opts)?,
        _ => None,
    };
    let sent = match travel {
        Some(t) => {
            let a_shape = SetShape::of(&frames[0].inputs.a);
            ranks::encode_rows_of_a(&frames[0].inputs, &a_shape, t.f64_mode, t.pieces)
        }
        None => {
            let inputs: Vec<Inputs> = frames.iter().map(|f| f.inputs.clone()).collect();
            ranks::encode_frames(&inputs, &request.notes)
        }
    };
    let sent = r.broadcast(Some(sent)).len() as u64;
    match travel {
        Some(t) => rows_of_a(problem, &frames[0].params, Held::Root(&frames[0].inputs, t), opts),
        None => {
            let mut exec = over_frames(problem, frames, opts)?;
            // Every other rank received the frames.
            exec.ranks.iter_mut().filter(|w| w.rank != 0).for_each(|w| w.received_bytes = sent);
            Ok(exec)
        }
    }
}

/// A rank other than 0 of a run whose rank 0 read the points: what rank 0
/// sends, then this rank's share (what it found goes to rank 0).
fn from_root(problem: &Problem, params: &Params, opts: &Asked) -> Result<Execution, RunError> {
    let r = &*opts.workers.ranks.as_ref().expect("a run of several ranks").0;
    match ranks::decode_sent(&r.broadcast(None))? {
        ranks::Sent::RowsOfA(rows) => rows_of_a(problem, params, Held::Rank(&rows), opts),
        ranks::Sent::Whole { frames, notes: _ } => {
            let frames: Vec<Frame> =
                frames.into_iter().map(|inputs| Frame { params: params.clone(), inputs, shapes: None }).collect();
            over_frames(problem, &frames, opts)
        }
    }
}

/// The boxes a session's problems ran with, so that a problem asked with a
/// second periodic box reads its box at run time from then on (`BoxTime::Run`):
/// a notebook's or a Python loop's NPT frames compile one kernel more, not one
/// a frame, and a problem that keeps its box keeps the folded kernel.
#[derive(Debug, Default)]
pub struct Boxes(std::sync::Mutex<std::collections::HashMap<crate::cache::Key, Seen>>);

#[derive(Debug, Clone, Copy, PartialEq)]
enum Seen {
    One(crate::spec::PeriodicBox),
    Several,
}

impl Boxes {
    /// `params` as this call runs them: with the box at run time where the
    /// same problem (its other parameters and `f64` alike) ran with another box.
    pub fn params_for(&self, problem: &Problem, params: &Params, f64: bool) -> Params {
        self.params_for_key(Boxes::key_of(problem), problem, params, f64)
    }

    /// The key [`Boxes::params_for_key`] takes for `problem`: its whole spec
    /// (about 20 us to print and hash a built-in's, which a session keeps).
    pub fn key_of(problem: &Problem) -> crate::cache::Key {
        crate::cache::Key::of_printed(problem)
    }

    /// [`Boxes::params_for`] with the problem's key (`Boxes::key_of`) at hand.
    pub fn params_for_key(
        &self,
        problem_key: crate::cache::Key,
        problem: &Problem,
        params: &Params,
        f64: bool,
    ) -> Params {
        let Some((_, b)) = problem.periodic_box(params) else { return params.clone() };
        let boxless = params.with_box_at_run_time().code_key();
        let key = crate::cache::Key::of(&[&problem_key.bytes(), boxless.as_bytes(), &[f64 as u8]]);
        let mut seen = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let now = match seen.get(&key) {
            None => Seen::One(b),
            Some(Seen::One(first)) if *first == b => Seen::One(b),
            Some(_) => Seen::Several,
        };
        seen.insert(key, now);
        match now {
            Seen::One(_) => params.clone(),
            Seen::Several => params.with_box_at_run_time(),
        }
    }
}

/// Whether a run in the spec's arithmetic must move to f64: where the
/// squared separations of f32 points leave f32's range, the CPU backend
/// takes a built-in's snippet (checked in f64 mode) to f64, with a note;
/// anything else is refused with the reason.
fn f64_for_range(
    problem: &Problem,
    params: &Params,
    (inputs, shapes): (&Inputs, &Shapes),
    backend: Backend,
    notes: &mut Vec<String>,
) -> Result<bool, RunError> {
    let crate::spec::Element::Vector { scalar: crate::spec::Scalar::F32, dims } = problem.input.element else {
        return Ok(false);
    };
    // The ranges the shapes read, and each set's spacing sample.
    let spreads: Vec<Spread> = std::iter::once((&inputs.a, &shapes.a))
        .chain(inputs.b.as_ref().zip(shapes.b.as_ref()))
        .map(|(set, shape)| Spread::with_ranges(set, shape.ranges[..dims as usize].to_vec()))
        .collect();
    let Some(why) = crate::data::f32_range_of(problem, params, &spreads) else { return Ok(false) };
    let built_in = crate::problems::snippet_is_built_in(problem);
    let origin = match &inputs.b {
        Some(b) => format!("{} and {}", inputs.a.origin, b.origin),
        None => inputs.a.origin.clone(),
    };
    if backend == Backend::Cpu && built_in {
        notes.push(format!(
            "{origin}: {why}; so `{}` runs in f64 arithmetic (as {})",
            problem.name,
            crate::remedy::Remedy::CpuF64
        ));
        return Ok(true);
    }
    Err(RunError::OutOfF32 { origin, problem: problem.name.clone(), why, built_in })
}

/// For g(r): the volume its pair density is taken over, the periodic box or
/// the data's bounding box, said in every run: a box that is not the data's
/// gives a g(r) that looks right and is not.
fn rdf_volume(problem: &Problem, frames: &[Frame]) -> Option<String> {
    if problem.normalize != Some(crate::spec::Normalization::Rdf) {
        return None;
    }
    let params = &frames[0].params;
    if frames.len() > 1 && frames.iter().any(|f| f.params != *params) {
        let name = problem.params.iter().find(|p| p.kind == crate::spec::ParamKind::Box).map_or("box", |p| &p.name);
        return Some(format!("g(r) takes each frame's own periodic box ({name} read from the file) as its volume"));
    }
    if let Some((name, b)) = problem.periodic_box(params) {
        return Some(format!(
            "g(r) takes the periodic box {name}={b} (volume {}, corner at the origin) as the volume of the data",
            b.volume()
        ));
    }
    let box_param = problem.params.iter().find(|p| p.kind == crate::spec::ParamKind::Box);
    let open = box_param.map_or("no periodic box".to_owned(), |p| format!("{}=0, open boundaries", p.name));
    let [Frame { inputs, .. }] = frames else {
        return Some(format!("g(r) with {open}: each frame's volume is the bounding box of its points"));
    };
    let mut bounds = inputs.a.bounds();
    if let Some(b) = &inputs.b {
        for (x, y) in bounds.iter_mut().zip(b.bounds()) {
            *x = (x.0.min(y.0), x.1.max(y.1));
        }
    }
    let volume: f64 = bounds.iter().map(|(lo, hi)| hi - lo).product();
    Some(format!(
        "g(r) with {open}: the volume is the bounding box of the points, {} ({})",
        crate::data::extent(&bounds),
        volume as f32
    ))
}

/// Runs `problem` on points that lie on a GPU (another library's arrays),
/// on that GPU alone and without their crossing the bus: taken into
/// twobs's columns there (`cuda::take`), measured there (extremes,
/// non-finite rows, the strided samples the host path reads), planned and
/// scheduled from those measurements as the host path plans from its
/// columns, and run with the grid sorted on the GPU. A search of rings
/// leaves its KNN lists there (`Outcome::KnnOnGpu`). What needs the points
/// on the host is refused, naming it: the CPU backend, `--verify`, MPI
/// ranks, f64 arithmetic, the cell hierarchy, wrapping into a box, and
/// points too many for the GPU's grid.
fn on_points_on_gpu(
    problem: &Problem,
    params: &Params,
    inputs: &DeviceInputs,
    opts: &Asked,
) -> Result<Execution, RunError> {
    let mut notes = Vec::new();
    let origin = &inputs.a.origin;
    let needs_host = |what: &str| {
        RunError::OnGpu(format!("{origin} lies on a GPU; {what} needs the points on the host: pass a host array"))
    };
    // What can be checked without a GPU, first: the arrays' shapes, scalars and strides.
    let components = problem.input.element.components();
    for set in inputs.sets() {
        set.check(components.len()).map_err(|e| RunError::Gpu(GpuError::Input(e)))?;
    }
    if opts.workers.backend.resolve(&mut notes) == Backend::Cpu {
        let why = notes.pop().unwrap_or_else(|| "the session runs on the CPU backend".into());
        return Err(needs_host(&format!("the CPU backend ({why})")));
    }
    if opts.options.f64 {
        return Err(RunError::F64OnGpu);
    }
    if opts.options.verify {
        return Err(needs_host("re-computing on the CPU backend (verify)"));
    }
    if opts.workers.ranks.is_some() {
        return Err(needs_host("sharing a run between MPI ranks"));
    }
    let ordinal = cuda::take::gpu_of(inputs, opts.workers.gpu.gpus.as_deref())?;
    let taken = cuda::take::take(inputs, &components, ordinal, &opts.workers.cache)?;
    let take_s = taken.take_s;
    for m in &taken.measured {
        m.check().map_err(|e| RunError::Gpu(GpuError::Input(e)))?;
    }
    if let Some((name, b)) = problem.periodic_box(params) {
        for m in &taken.measured {
            // An orthorhombic box's points lie inside where each component's extremes do.
            let inside = !b.is_triclinic()
                && m.ranges().iter().take(3).zip(b.lengths).all(|(&(lo, hi), l)| lo / l >= 0.0 && hi / l < 1.0);
            if !inside {
                return Err(needs_host(&format!(
                    "the periodic box {name}={b}, which its points do not all lie in (they span {}), or which is triclinic,",
                    crate::data::extent(&m.ranges())
                )));
            }
        }
    }
    let spreads: Vec<Spread> = taken.measured.iter().map(Measured::spread).collect();
    if let Some(why) = crate::data::f32_range_of(problem, params, &spreads) {
        let origin = taken.measured.iter().map(|m| m.origin.as_str()).collect::<Vec<_>>().join(" and ");
        let built_in = crate::problems::snippet_is_built_in(problem);
        return Err(RunError::OutOfF32 { origin, problem: problem.name.clone(), why, built_in });
    }
    let shapes = Shapes { a: SetShape::measured(&taken.measured[0]), b: taken.measured.get(1).map(SetShape::measured) };
    if !problem.promises_proven {
        // A user's promises, sampled on the points the planner samples.
        let sampled = Inputs { a: shapes.a.sample.clone(), b: shapes.b.as_ref().map(|b| b.sample.clone()) };
        sample_promises(problem, params, &sampled, opts, Backend::Cuda, false, &mut notes)?;
    }
    let points = Points { a: shapes.a.len as u64, b: shapes.b.as_ref().map(|b| b.len as u64) };
    let shape = Shape::new(problem, params, points);
    // The GPU the points lie on, alone; the CPU's threads would need them on the host.
    let gpu_opts = GpuOptions { gpus: Some(vec![ordinal]), hybrid: Hybrid::Off, ..opts.workers.gpu.clone() };
    let gpus = cuda::gpus(&gpu_opts)?;
    let bar = progress_bar(shape.pairs, &opts.workers.progress, "cuda".into(), gpu_rate(&gpus));
    let made = Instant::now();
    let schedule = Schedule::make(problem, params, &shapes, opts.options.index, &gpu_opts, &gpus.workers)?;
    let schedule_s = made.elapsed().as_secs_f64();
    if matches!(schedule.indexing, Indexing::Host { .. }) {
        return Err(needs_host("a grid the host sorts"));
    }
    let ask = cuda::Ask {
        problem,
        params,
        inputs: cuda::Located::Device(&taken),
        choice: opts.options.index,
        opts: &gpu_opts,
        cache: &opts.workers.cache,
        progress: &bar,
        part: Part::default(),
    };
    let mut run = cuda::run_scheduled(ask, &gpus, &schedule, schedule_s)?;
    bar.finish_and_clear();
    run.timings.take_s = take_s;
    // The take is compute: the host path's copy in and upload are. Making
    // the taker is not: a second run would not repeat it.
    run.timings.wall_s += take_s + taken.compile_s;
    run.timings.compile_s += taken.compile_s;
    run.timings.prepare_s += taken.compile_s;
    let outcome = std::mem::replace(&mut run.results, cuda::Results::Parts(Vec::new())).merged();
    let grid_tried = problem.cutoff.is_some() && opts.options.index != IndexChoice::None;
    Ok(gpu_execution(problem, params, shape, run, (outcome, Vec::new()), notes, opts, grid_tried))
}

/// One frame of host points (measured already where `shapes` are given),
/// sampling a user's promises first where `check_promises` says.
fn one_frame(
    problem: &Problem,
    params: &Params,
    inputs: &Inputs,
    shapes: Option<&Shapes>,
    opts: &Asked,
    check_promises: bool,
) -> Result<Execution, RunError> {
    let start = Instant::now();
    // A kernel or driver holds one run-time box: such runs take turns.
    let _box = crate::backend::one_box_at_a_time(params);
    let points = Points { a: inputs.a.len() as u64, b: inputs.b.as_ref().map(|b| b.len() as u64) };
    let shape = Shape::new(problem, params, points);
    let mut notes = Vec::new();
    let mut backend = opts.workers.backend.resolve(&mut notes);
    let threads = threads_of(opts);
    if backend == Backend::Cuda && opts.options.f64 {
        // f64 arithmetic is the CPU backend's: a run that may take either takes it there.
        if opts.workers.backend != BackendChoice::Auto {
            return Err(RunError::F64OnGpu);
        }
        notes.push("f64 arithmetic: on the CPU backend (the GPU's kernels compute in the spec's f32)".into());
        backend = Backend::Cpu;
    }
    // Each set's size, ranges and sample, read once for the range check and the schedule.
    let shapes = shapes.map_or_else(|| std::borrow::Cow::Owned(Shapes::of(inputs)), std::borrow::Cow::Borrowed);
    let f64_mode = opts.options.f64 || f64_for_range(problem, params, (inputs, &shapes), backend, &mut notes)?;
    if check_promises {
        sample_promises(problem, params, inputs, opts, backend, f64_mode, &mut notes)?;
    }
    let run = Run { problem, params, inputs, shapes: &shapes, opts, shape };
    let mut exec = match backend {
        Backend::Cuda => run.on_gpus(notes)?,
        Backend::Cpu => run.on_cpu(notes, threads, f64_mode)?,
    };
    // Under MPI, rank 0 holds the merged result and checks it.
    let holds_result = opts.workers.ranks.as_ref().is_none_or(|h| h.0.rank() == 0);
    if opts.options.verify && holds_result {
        let under = match exec.backend {
            Backend::Cuda => verify::Under::Gpu,
            Backend::Cpu => verify::Under::Cpu { index: exec.index.index, f64_mode },
        };
        verify_into(&mut exec, problem, params, (&shape, inputs), under, opts, threads)?;
    }
    exec.timings.total_s = start.elapsed().as_secs_f64();
    Ok(exec)
}

/// A user's spec is taken at its word only after a sample of its promises
/// (its cutoff where a grid may run, its key map); what held goes in the notes.
fn sample_promises(
    problem: &Problem,
    params: &Params,
    inputs: &Inputs,
    opts: &Asked,
    backend: Backend,
    f64_mode: bool,
    notes: &mut Vec<String>,
) -> Result<(), RunError> {
    let relied_on = verify::Promises {
        cutoff: problem.cutoff.is_some() && opts.options.index != IndexChoice::None,
        key: problem.function.key.is_some(),
    };
    if problem.promises_proven || !(relied_on.cutoff || relied_on.key) {
        return Ok(());
    }
    match verify::promises(problem, params, inputs, relied_on, f64_mode, &opts.workers.cache) {
        Ok(kept) => notes.push(kept),
        // A GPU host without a C++ compiler runs as before the check, and is told.
        Err(VerifyError::Cpu(e @ CpuError::NoCompiler(_))) if backend == Backend::Cuda => {
            notes.push(format!("{}: its promises (cutoff, key map) were not sampled: {e}", problem.origin));
        }
        Err(e) => return Err(e.into()),
    }
    Ok(())
}

/// The pair function's floating-point instructions (PTX) for `arch`: rendered
/// and counted once per process for the problem, its parameters and the test
/// (the probe's rendering alone took 0.14 ms of each session call).
fn fp_per_pair(
    (problem, printed): (&Problem, crate::cache::Key),
    params: &Params,
    test: crate::stage::Test,
    arch: &str,
) -> Option<u32> {
    static COUNTED: crate::cache::Memo<Option<u32>> = crate::cache::Memo::new();
    let asked = format!("{}\n{:?}\n{test:?}", params.code_key(), params.box_time);
    let key = crate::cache::Key::of(&[&printed.bytes(), asked.as_bytes(), arch.as_bytes()]);
    let Ok(counted) = COUNTED.get_or_try(key, || {
        Ok::<_, std::convert::Infallible>(
            nvrtc::fp_instructions(&codegen::render_probe(problem, params, test), arch).ok(),
        )
    });
    *counted
}

/// The pairs a CPU run walks (a grid's units or every pair), why, and the
/// pairs the cell hierarchy resolved by bucket where it runs.
type WithCells = (Option<Grid>, Summary, Option<(Vec<u64>, cells::Steps)>);

/// One run of `problem` on `inputs`, on a backend.
struct Run<'a> {
    problem: &'a Problem,
    params: &'a Params,
    inputs: &'a Inputs,
    /// What the schedule reads of the inputs (`Shapes::of`).
    shapes: &'a Shapes,
    opts: &'a Asked<'a>,
    shape: Shape,
}

impl Run<'_> {
    /// Whether a grid was tried: a grid made and then found not worth it cost its time too.
    fn grid_tried(&self) -> bool {
        self.problem.cutoff.is_some() && self.opts.options.index != IndexChoice::None
    }

    /// The cell hierarchy in place of `grid` (or every pair) where the
    /// schedule's rule tries it (`schedule::hierarchy`) and it costs less: its
    /// units, its summary and the pairs it resolved by bucket.
    fn cells_or(&self, grid: Option<Grid>, index: Summary, f64_mode: bool) -> Result<WithCells, RunError> {
        let Run { problem, params, inputs, shapes: _, opts, shape } = *self;
        let without = match &grid {
            Some(g) => Without::Grid(g.pairs),
            None => Without::EveryPair(shape.pairs),
        };
        let tried =
            hierarchy(problem, params, inputs, shape.visit, opts.options.index, f64_mode, Walkers::Cpu, without)?;
        let Some(tried) = tried else { return Ok((grid, index, None)) };
        match tried.build(inputs, shape.visit) {
            Ok(c) => Ok((Some(c.grid), c.summary, Some((c.counts, c.steps)))),
            Err(why) => {
                let index = Summary { why: format!("{}; {why}", index.why), ..index };
                Ok((grid, index, None))
            }
        }
    }

    /// On the GPUs: the schedule is made here, for the GPUs this machine
    /// has, and the backend runs it.
    fn on_gpus(&self, mut notes: Vec<String>) -> Result<Execution, RunError> {
        let Run { problem, params, inputs, shapes, opts, shape } = *self;
        let gpus = cuda::gpus(&opts.workers.gpu)?;
        let bar = progress_bar(shape.pairs, &opts.workers.progress, "cuda".into(), gpu_rate(&gpus));
        let names: Vec<&str> = gpus.workers.gpus.iter().map(|g| g.name.as_str()).collect();
        bar.set_message(format!("cuda, {}", names.join(" + ")));
        let ranked = opts.workers.ranks.as_ref().map(|h| &*h.0);
        let mut gpu_opts = opts.workers.gpu.clone();
        // Every rank makes the schedule for every rank's GPUs.
        let workers = match ranked {
            None => gpus.workers.clone(),
            Some(r) => {
                agree(r, gpus.workers.describe())?;
                if gpu_opts.hybrid != Hybrid::Off {
                    notes.push("MPI ranks: the GPUs alone (the CPU beside the GPUs takes from the back of one process's queue, which ranks share)".into());
                    gpu_opts.hybrid = Hybrid::Off;
                }
                gpus.workers.repeated(r.size())
            }
        };
        let start = Instant::now();
        let schedule = Schedule::make(problem, params, shapes, opts.options.index, &gpu_opts, &workers)?;
        let schedule_s = start.elapsed().as_secs_f64();
        let counter = ranked.map(|r| r.counter());
        let part = Part {
            first_gpu: ranked.map_or(0, |r| r.rank() * gpus.ordinals.len()),
            counter: counter.as_deref(),
            spans: None,
        };
        let ask = cuda::Ask {
            problem,
            params,
            inputs: cuda::Located::Host(inputs),
            choice: opts.options.index,
            opts: &gpu_opts,
            cache: &opts.workers.cache,
            progress: &bar,
            part,
        };
        let mine = part.gpus(gpus.ordinals.len(), schedule.gpus);
        let run = (mine > 0).then(|| cuda::run_scheduled(ask, &gpus, &schedule, schedule_s)).transpose();
        // This rank has stopped taking work (rank 0 waits here for the others).
        drop(counter);
        let Some(run) = run? else {
            let r = ranked.expect("rank 0 runs the first GPU");
            return idle_rank(r, self.shape, notes, &schedule, inputs);
        };
        bar.finish_and_clear();
        let mut run = run;
        let results = std::mem::replace(&mut run.results, cuda::Results::Parts(Vec::new()));
        let (outcome, ranks) = match (results, ranked) {
            (cuda::Results::Merged(outcome), _) => (outcome, Vec::new()),
            (cuda::Results::Parts(parts), Some(r)) => {
                let work = gpu_rank_work(r, &run, Holding::Whole, (inputs.held_bytes(), 0));
                combined(r, &shape, keyed(r, parts), work, |parts| {
                    output::merge(shape.collect, problem.function.returns, inputs.a.len(), parts)
                })?
            }
            (cuda::Results::Parts(_), None) => unreachable!("partial results come back only from a rank's part"),
        };
        Ok(gpu_execution(problem, params, shape, run, (outcome, ranks), notes, opts, self.grid_tried()))
    }

    /// On the CPU's `threads` threads, in f64 where `f64_mode` says.
    fn on_cpu(&self, mut notes: Vec<String>, threads: usize, f64_mode: bool) -> Result<Execution, RunError> {
        let Run { problem, params, inputs, shapes, opts, shape } = *self;
        let index_start = Instant::now();
        let workers = schedule::Workers::cpu(threads);
        // `--index cells` puts the hierarchy in place of every pair.
        let scheduled = if opts.options.index == IndexChoice::Cells { IndexChoice::None } else { opts.options.index };
        let schedule = Schedule::make(problem, params, shapes, scheduled, &opts.workers.gpu, &workers)?;
        let (grid, index) = match &schedule.indexing {
            Indexing::Brute(summary) => (None, summary.clone()),
            Indexing::Host { layout, runs } => {
                index::sort_and_decide(layout, inputs, shape.visit, shape.pairs, opts.options.index, *runs)
            }
            Indexing::Device(_) => unreachable!("a schedule without GPUs sorts its grid on the host"),
        };
        let (grid, index, resolved) = self.cells_or(grid, index, f64_mode)?;
        let index_s = (self.grid_tried() || resolved.is_some()).then(|| index_start.elapsed().as_secs_f64());
        let bar =
            progress_bar(index.pairs, &opts.workers.progress, format!("cpu, {threads} threads"), cpu_rate(threads));
        let driver = CpuDriver::compile(problem, params, &shape, index.index, f64_mode, &opts.workers.cache)?;
        if let Some(why) = &driver.rebuilt {
            notes.push(format!("the cached CPU driver was built again: {why}"));
        }
        let compute = Instant::now();
        let (outcome, ranks) = match opts.workers.ranks.as_ref().map(|h| &*h.0) {
            None => (driver.run(inputs, grid.as_ref(), threads, &bar)?, Vec::new()),
            Some(r) => {
                // The chunks depend on the thread count: every rank must cut alike.
                agree(r, format!("{threads} CPU threads"))?;
                let counter = r.counter();
                let ran = driver.run_parts(inputs, grid.as_ref(), threads, &bar, &*counter);
                drop(counter);
                let (parts, pairs) = ran?;
                let work = RankWork {
                    rank: r.rank(),
                    host: r.host(),
                    gpus: 0,
                    threads,
                    taken: parts.len() as u64,
                    pairs,
                    compute_s: compute.elapsed().as_secs_f64(),
                    holding: Holding::Whole,
                    input_bytes: inputs.held_bytes(),
                    received_bytes: 0,
                };
                combined(r, &shape, parts, work, |parts| driver.finish(inputs, grid.as_ref(), parts))?
            }
        };
        bar.finish_and_clear();
        let outcome = cells::add_resolved(outcome, resolved.as_ref().map(|(c, _)| c.as_slice()));
        let compute_s = compute.elapsed().as_secs_f64() + index_s.unwrap_or(0.0);
        let pairs = index.pairs;
        Ok(Execution {
            backend: Backend::Cpu,
            device: cpu_device(threads, f64_mode, driver.cached),
            notes,
            shape,
            index,
            outcome,
            timings: Timings {
                compile_s: driver.compile_seconds,
                compute_s,
                index_s,
                pairs_per_s: pairs as f64 / compute_s.max(1e-9),
                hierarchy: resolved.map(|(_, steps)| steps),
                ..Default::default()
            },
            plans: vec![],
            schedule: schedule.describe(),
            verified: None,
            ranks,
            box_time: params.box_time,
        })
    }
}

/// On rank 0, every rank's partials (`parts` are this rank's) merged by
/// `merge` in key order, and what each rank did; on the other ranks the
/// outcome keeps nothing of `shape`'s (what they found went to rank 0).
fn combined(
    r: &dyn Ranks,
    shape: &Shape,
    parts: Vec<Keyed>,
    work: RankWork,
    merge: impl FnOnce(Vec<Partial>) -> Outcome,
) -> Result<(Outcome, Vec<RankWork>), RunError> {
    let works = r.gather(serde_json::to_vec(&work).expect("a rank's work is plain data"));
    let parts = r.gather(ranks::encode(&parts));
    let (Some(works), Some(parts)) = (works, parts) else {
        return Ok((kept_elsewhere(shape), Vec::new()));
    };
    let works = works
        .iter()
        .map(|b| serde_json::from_slice(b).map_err(|e| WireError { at: e.column(), len: b.len(), what: e.to_string() }))
        .collect::<Result<Vec<RankWork>, _>>()?;
    let parts = parts.iter().map(|b| ranks::decode(b)).collect::<Result<Vec<_>, _>>()?;
    Ok((merge(ranks::in_order(parts)), works))
}

/// What a GPU run did and found, as its [`Execution`]: `found` is its
/// outcome (merged on rank 0 under MPI ranks) and what each rank did.
#[allow(clippy::too_many_arguments, reason = "the run's parts, each once")]
fn gpu_execution(
    problem: &Problem,
    params: &Params,
    shape: Shape,
    run: cuda::GpuRun,
    (outcome, ranks): (Outcome, Vec<RankWork>),
    mut notes: Vec<String>,
    opts: &Asked,
    grid_tried: bool,
) -> Execution {
    notes.extend(run.notes.iter().cloned());
    let g = &run.timings;
    let compute_s = g.wall_s - g.prepare_s;
    let pair_rate = run.index.pairs as f64 / compute_s.max(1e-9);
    let issue_rate: f64 = run.devices.iter().map(|d| d.fp32_issue_rate()).sum();
    let fp = fp_per_pair((problem, run.printed), params, run.plans[0].test, &run.devices[0].arch());
    let name = &run.devices[0].name;
    Execution {
        backend: Backend::Cuda,
        device: format!(
            "{} x {name} ({}), blocks of {} points, {} stream(s) per GPU",
            run.devices.len(),
            run.devices[0].arch(),
            run.block_points,
            opts.workers.gpu.streams.max(1)
        ),
        notes,
        shape,
        index: run.index,
        outcome,
        timings: Timings {
            compile_s: g.compile_s,
            compute_s,
            index_s: grid_tried.then_some(g.index_s),
            total_s: 0.0,
            pairs_per_s: pair_rate,
            gpu: Some(g.clone()),
            fp_instructions_per_pair: fp,
            fp32_issue_rate: Some(issue_rate),
            // An integer problem does no floating-point work to compare with the FP32 rate.
            fp32_issue_fraction: fp.filter(|&f| f > 0).map(|f| pair_rate * f as f64 / issue_rate),
            verify_s: None,
            hierarchy: g.hierarchy,
        },
        plans: run.plans,
        schedule: run.schedule.as_ref().map(Schedule::describe).unwrap_or_default(),
        verified: None,
        ranks,
        box_time: params.box_time,
    }
}

/// The CPU backend as a report names it: threads, arithmetic, and whether
/// the driver came from the cache.
fn cpu_device(threads: usize, f64_mode: bool, cached: bool) -> String {
    format!(
        "{threads} CPU threads, {}{}",
        if f64_mode { "f64 arithmetic" } else { "the spec's arithmetic" },
        if cached { ", driver from the cache" } else { "" }
    )
}

/// What a rank other than 0 keeps of a run: nothing, of the run's kind.
fn kept_elsewhere(shape: &Shape) -> Outcome {
    match shape.collect {
        Collect::Totals { total, .. } => Outcome::Totals(total.zeros(0)),
        Collect::Pairs => Outcome::Pairs(Default::default()),
        Collect::Knn { k } => {
            Outcome::Knn { k: k as usize, ids: Vec::new(), values: crate::data::Column::F32(Vec::new()) }
        }
    }
}

/// Whether every rank describes the same machine (`mine`; or the same
/// inputs, `ranks::fingerprint`): rank 0 compares, and every rank gets its
/// verdict, so that all go on or all stop.
pub fn agree(r: &dyn Ranks, mine: String) -> Result<(), RunError> {
    let verdict = r.gather(mine.into_bytes()).map(|all| {
        let described: Vec<String> = all.into_iter().map(|b| String::from_utf8_lossy(&b).into_owned()).collect();
        ranks::unlike(&described).unwrap_or_default().into_bytes()
    });
    match r.broadcast(verdict) {
        v if v.is_empty() => Ok(()),
        v => Err(RunError::Unlike(String::from_utf8_lossy(&v).into_owned())),
    }
}

/// A rank none of whose GPUs the schedule takes (a run too small for every
/// rank's GPUs): it sends rank 0 nothing but its word.
fn idle_rank(
    r: &dyn Ranks,
    shape: Shape,
    notes: Vec<String>,
    schedule: &Schedule,
    inputs: &Inputs,
) -> Result<Execution, RunError> {
    let work = RankWork {
        rank: r.rank(),
        host: r.host(),
        gpus: 0,
        threads: 0,
        taken: 0,
        pairs: 0,
        compute_s: 0.0,
        holding: Holding::Whole,
        input_bytes: inputs.held_bytes(),
        received_bytes: 0,
    };
    let _ = r.gather(serde_json::to_vec(&work).expect("a rank's work is plain data"));
    let _ = r.gather(ranks::encode(&[]));
    Ok(Execution {
        backend: Backend::Cuda,
        device: format!("none of this rank's GPUs: {}", schedule.why_gpus),
        notes,
        shape,
        index: Summary::brute("this rank took no part".into(), 0),
        outcome: kept_elsewhere(&shape),
        timings: Timings::default(),
        plans: Vec::new(),
        schedule: schedule.describe(),
        verified: None,
        ranks: Vec::new(),
        box_time: crate::spec::BoxTime::Compile,
    })
}

/// A rank's partial results, each keyed by the rank and its place, so that
/// rank 0 merges every rank's in one order.
fn keyed(r: &dyn Ranks, parts: Vec<Partial>) -> Vec<Keyed> {
    parts.into_iter().enumerate().map(|(i, p)| (((r.rank() as u64) << 32) | i as u64, p)).collect()
}

/// What a rank's GPUs did, for the report: `bytes` are the input held at
/// most and received.
fn gpu_rank_work(
    r: &dyn Ranks,
    run: &cuda::GpuRun,
    holding: Holding,
    (input_bytes, received_bytes): (u64, u64),
) -> RankWork {
    let g = &run.timings;
    RankWork {
        rank: r.rank(),
        host: r.host(),
        gpus: run.devices.len(),
        threads: 0,
        taken: g.per_gpu.iter().map(|g| g.pieces).sum(),
        pairs: g.per_gpu.iter().map(|g| g.pairs).sum(),
        compute_s: g.wall_s - g.prepare_s,
        holding,
        input_bytes,
        received_bytes,
    }
}

/// Where a run of several ranks sends the others only set B, and with each
/// piece they take that piece's rows of A (docs/architecture.md, "A rank's
/// memory"): two sets, every pair walked. Decided on rank 0, which holds
/// `inputs`: how the rows travel (the arithmetic, which depends on A's
/// range, and the backend: the other ranks are told both), or None where
/// every rank holds both sets whole: one set (a piece of rows pairs them
/// with every later row), a grid or the cell hierarchy (each sorted from
/// whole sets), and GPU runs whose A is one block ([`gpu_rows_block`]).
fn travel_of(problem: &Problem, params: &Params, inputs: &Inputs, opts: &Asked) -> Result<Option<Travel>, RunError> {
    let points = Points { a: inputs.a.len() as u64, b: inputs.b.as_ref().map(|b| b.len() as u64) };
    let shape = Shape::new(problem, params, points);
    if shape.visit != Visit::Cross || opts.options.index == IndexChoice::Cells {
        return Ok(None);
    }
    let shapes = Shapes::of(inputs);
    if opts.workers.backend.resolve(&mut Vec::new()) == Backend::Cuda {
        let r = &*opts.workers.ranks.as_ref().expect("rows of A travel between ranks").0;
        if opts.options.f64 {
            return Err(RunError::F64OnGpu);
        }
        // Out of f32's range is refused here, before the others are sent anything.
        f64_for_range(problem, params, (inputs, &shapes), Backend::Cuda, &mut Vec::new())?;
        let gpus = cuda::gpus(&opts.workers.gpu)?;
        let block = gpu_rows_block(
            problem,
            params,
            &shapes,
            (opts.options.index, &opts.workers.gpu),
            &gpus.workers.repeated(r.size()),
        )?;
        return Ok(block.map(|_| Travel { f64_mode: false, pieces: Pieces::GpuBlocks }));
    }
    let f64_mode =
        opts.options.f64 || f64_for_range(problem, params, (inputs, &shapes), Backend::Cpu, &mut Vec::new())?;
    let schedule = Schedule::make(
        problem,
        params,
        &shapes,
        opts.options.index,
        &opts.workers.gpu,
        &schedule::Workers::cpu(threads_of(opts)),
    )?;
    let without = Without::EveryPair(shape.pairs);
    let cells = hierarchy(problem, params, inputs, shape.visit, opts.options.index, f64_mode, Walkers::Cpu, without)?;
    Ok((matches!(schedule.indexing, Indexing::Brute(_)) && cells.is_none())
        .then_some(Travel { f64_mode, pieces: Pieces::CpuChunks }))
}

/// How A's rows travel with the pieces ([`travel_of`]): the
/// arithmetic, and whose pieces they travel with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Travel {
    pub f64_mode: bool,
    pub pieces: Pieces,
}

/// A GPU run whose A's rows travel cuts A into blocks of at least this
/// many points (a launch over 2^20 own points, at 256 threads of 2 points,
/// is 2048 thread blocks: about two waves of an H200's)...
pub const LEAST_ROWS_BLOCK: usize = 1 << 20;

/// ...into at least this many blocks, so that a rank holds a few eighths
/// of A at most...
pub const ROWS_BLOCKS: usize = 8;

/// ...and into blocks of at most this many points (200 MB of 3 f32
/// coordinates; a block travels in one message of at most 1 GB).
pub const MOST_ROWS_BLOCK: usize = 1 << 24;

/// The GPU run's block of A, in points, where A's rows travel with the
/// pieces: every rank cuts A (and B) into blocks of it, and a GPU piece
/// reads one block of A (`Unit::a_block`), which rank 0 sends with it. None
/// where every rank holds both sets whole: the schedule walks a grid (its
/// kernels read both sets whole, in cell order), it leaves some rank's GPUs
/// idle (an idle rank would ask for pieces ahead and never run them), or
/// A is one block anyway (at most [`LEAST_ROWS_BLOCK`] points, or all the
/// GPUs' memory takes). `workers`: every rank's GPUs.
pub fn gpu_rows_block(
    problem: &Problem,
    params: &Params,
    shapes: &Shapes,
    (index, gpu): (IndexChoice, &GpuOptions),
    workers: &schedule::Workers,
) -> Result<Option<usize>, ScheduleError> {
    let gpu_opts = GpuOptions { hybrid: Hybrid::Off, ..gpu.clone() };
    let points = Points { a: shapes.a.len as u64, b: shapes.b.as_ref().map(|b| b.len as u64) };
    if Shape::new(problem, params, points).visit != Visit::Cross || index == IndexChoice::Cells {
        return Ok(None);
    }
    let every_pair = |s: &Schedule| matches!(s.indexing, Indexing::Brute(_)) && s.gpus == workers.gpus.len();
    let whole = Schedule::make(problem, params, shapes, index, &gpu_opts, workers)?;
    if !every_pair(&whole) {
        return Ok(None);
    }
    let block = shapes.a.len.div_ceil(ROWS_BLOCKS).clamp(LEAST_ROWS_BLOCK, MOST_ROWS_BLOCK).min(whole.block_points);
    if shapes.a.len <= block {
        return Ok(None);
    }
    let blocks = GpuOptions { block_points: Some(block), ..gpu_opts };
    let cut = Schedule::make(problem, params, shapes, index, &blocks, workers)?;
    Ok(every_pair(&cut).then_some(cut.block_points))
}

/// What a rank holds of a run whose rows of A travel with its pieces ([`travel_of`]).
#[derive(Clone, Copy)]
enum Held<'a> {
    /// Rank 0: both sets, read, and how their rows travel; it sends the rows.
    Root(&'a Inputs, Travel),
    /// Another rank: set B, and A's size.
    Rank(&'a ranks::RowsOfA),
}

/// A run as one of several ranks, where rank 0 sends the rows of set A
/// with each piece the others take ([`travel_of`]): a rank other
/// than 0 holds set B and the rows of its pieces in flight, never all of A.
/// The pieces are [`CpuDriver::run_parts`]'s chunks, cut alike on every
/// rank, so the merge is the one process's.
fn rows_of_a(problem: &Problem, params: &Params, held: Held<'_>, opts: &Asked) -> Result<Execution, RunError> {
    let start = Instant::now();
    // A kernel or driver holds one run-time box: such runs take turns.
    let _box = crate::backend::one_box_at_a_time(params);
    let r = &*opts.workers.ranks.as_ref().expect("rows of A travel between ranks").0;
    let pieces = match held {
        Held::Root(_, travel) => travel.pieces,
        Held::Rank(rows) => rows.pieces,
    };
    if pieces == Pieces::GpuBlocks {
        return rows_of_a_on_gpus(problem, params, held, opts, start);
    }
    let (a_points, b) = match held {
        Held::Root(inputs, _) => (inputs.a.len(), inputs.b.as_ref().expect("rows of A travel for two sets")),
        Held::Rank(rows) => (rows.a_points, &rows.b),
    };
    let shape = Shape::new(problem, params, Points { a: a_points as u64, b: Some(b.len() as u64) });
    let mut notes = Vec::new();
    let threads = threads_of(opts);
    // Rank 0 checks what depends on A (its range, the spec's promises) and
    // says why every pair is walked; the others were told the arithmetic.
    let (f64_mode, index, schedule) = match held {
        Held::Root(inputs, _) => {
            let shapes = Shapes::of(inputs);
            let f64_mode =
                opts.options.f64 || f64_for_range(problem, params, (inputs, &shapes), Backend::Cpu, &mut notes)?;
            sample_promises(problem, params, inputs, opts, Backend::Cpu, f64_mode, &mut notes)?;
            let schedule = Schedule::make(
                problem,
                params,
                &shapes,
                opts.options.index,
                &opts.workers.gpu,
                &schedule::Workers::cpu(threads),
            )?;
            let Indexing::Brute(index) = &schedule.indexing else {
                unreachable!("rows of A travel where every pair is walked")
            };
            (f64_mode, index.clone(), schedule.describe())
        }
        Held::Rank(rows) => {
            (rows.f64_mode, Summary::brute("every pair (rank 0 decided)".into(), shape.pairs), Vec::new())
        }
    };
    agree(r, format!("{threads} CPU threads"))?;
    let bar = progress_bar(shape.pairs, &opts.workers.progress, format!("cpu, {threads} threads"), cpu_rate(threads));
    let driver = CpuDriver::compile(problem, params, &shape, IndexKind::None, f64_mode, &opts.workers.cache)?;
    if let Some(why) = &driver.rebuilt {
        notes.push(format!("the cached CPU driver was built again: {why}"));
    }
    let compute = Instant::now();
    let walker = match held {
        Held::Root(inputs, _) => driver.walker(inputs, None),
        Held::Rank(rows) => driver.walker_without_a(rows.a_points, &rows.b),
    };
    let chunk = driver.chunk(&walker, threads);
    // The rows of A that chunk c reads, which rank 0 sends with it.
    let span = |c: u64| -> Option<(usize, usize)> {
        let lo = usize::try_from(c).unwrap_or(usize::MAX).saturating_mul(chunk);
        // Past the end: nothing (the rank stops asking).
        (lo < a_points).then(|| (lo, lo.saturating_add(chunk).min(a_points)))
    };
    let rows = match held {
        Held::Root(inputs, _) => Some(ranks::RowsOfPlaces::new(&inputs.a, &span)),
        Held::Rank(_) => None,
    };
    let mut ran = None;
    // Each thread's next piece on its way while it computes one.
    r.carrying(rows.as_ref(), threads, &mut |counter| ran = Some(driver.run_walker(&walker, threads, &bar, counter)));
    let ran = ran.expect("the counter lends itself to the work")?;
    bar.finish_and_clear();
    let compute_s = compute.elapsed().as_secs_f64();
    let work = RankWork {
        rank: r.rank(),
        host: r.host(),
        gpus: 0,
        threads,
        taken: ran.parts.len() as u64,
        pairs: ran.pairs,
        compute_s,
        holding: Holding::RowsOfA,
        input_bytes: match held {
            Held::Root(inputs, _) => inputs.held_bytes(),
            Held::Rank(rows) => rows.b.held_bytes() + ran.rows_held_bytes,
        },
        received_bytes: match held {
            Held::Root(..) => 0,
            Held::Rank(rows) => rows.received_bytes + ran.rows_received_bytes,
        },
    };
    let (outcome, ranks) = combined(r, &shape, ran.parts, work, |parts| driver.merge(a_points, parts))?;
    let mut exec = Execution {
        backend: Backend::Cpu,
        device: cpu_device(threads, f64_mode, driver.cached),
        notes,
        shape,
        index,
        outcome,
        timings: Timings {
            compile_s: driver.compile_seconds,
            compute_s,
            pairs_per_s: shape.pairs as f64 / compute_s.max(1e-9),
            ..Default::default()
        },
        plans: vec![],
        schedule,
        verified: None,
        ranks,
        box_time: params.box_time,
    };
    if let Held::Root(inputs, _) = held {
        if opts.options.verify {
            let under = verify::Under::Cpu { index: IndexKind::None, f64_mode };
            verify_into(&mut exec, problem, params, (&shape, inputs), under, opts, threads)?;
        }
        exec.notes
            .extend(rdf_volume(problem, &[Frame { params: params.clone(), inputs: inputs.clone(), shapes: None }]));
    }
    exec.timings.total_s = start.elapsed().as_secs_f64();
    Ok(exec)
}

/// [`rows_of_a`] on the GPUs: every rank cuts A into blocks of
/// [`gpu_rows_block`] and B alike, makes the same schedule (the others from
/// A's shape, which rank 0 sent), and streams its blocks; a piece reads one
/// block of A, which a rank other than 0 gets from rank 0 with the piece
/// (once for the pieces of one block that it takes one after another:
/// [`ranks::RowsOfPlaces`]) and holds while its stream runs that block.
fn rows_of_a_on_gpus(
    problem: &Problem,
    params: &Params,
    held: Held<'_>,
    opts: &Asked,
    start: Instant,
) -> Result<Execution, RunError> {
    let r = &*opts.workers.ranks.as_ref().expect("rows of A travel between ranks").0;
    let mut notes = Vec::new();
    let (shapes, a_points, inputs) = match held {
        Held::Root(inputs, _) => {
            sample_promises(problem, params, inputs, opts, Backend::Cuda, false, &mut notes)?;
            (Shapes::of(inputs), inputs.a.len(), cuda::Located::Host(inputs))
        }
        Held::Rank(rows) => {
            let shapes = Shapes { a: rows.a_shape.clone(), b: Some(SetShape::of(&rows.b)) };
            (shapes, rows.a_points, cuda::Located::RowsOfA { a: &rows.a_shape, b: &rows.b })
        }
    };
    let points = Points { a: a_points as u64, b: shapes.b.as_ref().map(|b| b.len as u64) };
    let shape = Shape::new(problem, params, points);
    let gpus = cuda::gpus(&opts.workers.gpu)?;
    // Every rank makes the schedule for every rank's GPUs.
    agree(r, gpus.workers.describe())?;
    let workers = gpus.workers.repeated(r.size());
    let made = Instant::now();
    let block = gpu_rows_block(problem, params, &shapes, (opts.options.index, &opts.workers.gpu), &workers)?
        .expect("rank 0 sends A's rows with the pieces only where A is cut into blocks");
    if opts.workers.gpu.hybrid != Hybrid::Off {
        notes.push("MPI ranks: the GPUs alone (the CPU beside the GPUs takes from the back of one process's queue, which ranks share)".into());
    }
    let gpu_opts = GpuOptions { hybrid: Hybrid::Off, block_points: Some(block), ..opts.workers.gpu.clone() };
    let schedule = Schedule::make(problem, params, &shapes, opts.options.index, &gpu_opts, &workers)?;
    let schedule_s = made.elapsed().as_secs_f64();
    notes.push(format!(
        "MPI ranks: set A ({a_points} points) in blocks of {block}; rank 0 sends the other ranks each piece's block of A, and each rank holds set B"
    ));
    let bar = progress_bar(shape.pairs, &opts.workers.progress, "cuda".into(), gpu_rate(&gpus));
    // Each place's block of A, once rank 0's run has cut the queue; rank 0's
    // server waits for them (another rank may ask before rank 0 has compiled).
    let spans = std::sync::OnceLock::<Vec<(usize, usize)>>::new();
    let span = |k: u64| -> Option<(usize, usize)> {
        let spans = loop {
            match spans.get() {
                Some(s) => break s,
                None => std::thread::sleep(std::time::Duration::from_millis(1)),
            }
        };
        spans.get(usize::try_from(k).ok()?).copied()
    };
    let rows = match held {
        Held::Root(inputs, _) => Some(ranks::RowsOfPlaces::new(&inputs.a, &span)),
        Held::Rank(_) => None,
    };
    let (mut ran, mut counted) = (None, (0, 0));
    // Each stream's next piece on its way while it runs one.
    let ahead = 1;
    r.carrying(rows.as_ref(), ahead, &mut |counter| {
        let part = Part { first_gpu: r.rank() * gpus.ordinals.len(), counter: Some(counter), spans: Some(&spans) };
        let ask = cuda::Ask {
            problem,
            params,
            inputs,
            choice: opts.options.index,
            opts: &gpu_opts,
            cache: &opts.workers.cache,
            progress: &bar,
            part,
        };
        ran = Some(cuda::run_scheduled(ask, &gpus, &schedule, schedule_s));
        // A run that failed before it cut the queue: rank 0 answers every place with the end.
        let _ = spans.set(Vec::new());
        counted = (counter.most_bytes_ahead(), counter.received_bytes());
    });
    let mut run = ran.expect("the counter lends itself to the work")?;
    bar.finish_and_clear();
    let cuda::Results::Parts(parts) = std::mem::replace(&mut run.results, cuda::Results::Parts(Vec::new())) else {
        unreachable!("a rank's part comes back as partial results")
    };
    // B, and the rows of A in flight: asked ahead, or a stream's block.
    let bytes = match held {
        Held::Root(inputs, _) => (inputs.held_bytes(), 0),
        Held::Rank(rows) => (rows.b.held_bytes() + counted.0, rows.received_bytes + counted.1),
    };
    let work = gpu_rank_work(r, &run, Holding::RowsOfA, bytes);
    let found = combined(r, &shape, keyed(r, parts), work, |parts| {
        output::merge(shape.collect, problem.function.returns, a_points, parts)
    })?;
    let grid_tried = problem.cutoff.is_some() && opts.options.index != IndexChoice::None;
    let mut exec = gpu_execution(problem, params, shape, run, found, notes, opts, grid_tried);
    exec.schedule = schedule.describe();
    if let Held::Root(inputs, _) = held {
        if opts.options.verify {
            verify_into(&mut exec, problem, params, (&shape, inputs), verify::Under::Gpu, opts, threads_of(opts))?;
        }
        exec.notes
            .extend(rdf_volume(problem, &[Frame { params: params.clone(), inputs: inputs.clone(), shapes: None }]));
    }
    exec.timings.total_s = start.elapsed().as_secs_f64();
    Ok(exec)
}

/// `--verify`: `exec`'s outcome checked against a second computation
/// (`under` says which), and the time it took.
fn verify_into(
    exec: &mut Execution,
    problem: &Problem,
    params: &Params,
    (shape, inputs): (&Shape, &Inputs),
    under: verify::Under,
    opts: &Asked,
    threads: usize,
) -> Result<(), RunError> {
    let t = Instant::now();
    let verified = verify::verify(
        problem,
        params,
        shape,
        inputs,
        &exec.outcome,
        under,
        &opts.workers.gpu,
        opts.options.index,
        &opts.workers.cache,
        threads,
    )?;
    exec.verified = Some(verified);
    exec.timings.verify_s = Some(t.elapsed().as_secs_f64());
    Ok(())
}

/// The CPU threads a run takes (`opts.workers.threads`, 0: every core).
fn threads_of(opts: &Asked) -> usize {
    if opts.workers.threads == 0 { crate::memory::host_cores() } else { opts.workers.threads }
}
