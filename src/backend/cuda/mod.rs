//! The CUDA backend through cudarc (dynamic loading: nothing CUDA is needed to
//! build; the driver and NVRTC are found at run time).
//!
//! The input is cut into blocks of points. Each unit of work is a pair of
//! blocks (the visit family says which): the problem's own kernel on the
//! diagonal, and the same problem between two sets (A = one block, B =
//! another) off it. Units are cut into pieces (`schedule::pieces`), ranges of
//! steps over every block of a launch, which every stream of every GPU takes
//! from one queue (`workers`). [`run`] prepares the GPUs in parallel:
//! contexts on their own threads, which also upload inputs that fit a GPU
//! whole, while NVRTC compiles one kernel per GPU model (`kernels`). The
//! output family merges what the GPUs found.

use std::time::Instant;

use cudarc::driver::{CudaContext, DriverError, LaunchConfig, PushKernelArg};
use serde::Serialize;

use super::KeyCheck;
use super::cpu::CpuError;
use crate::cache::{Cache, Key};
use crate::codegen;
use crate::data::Inputs;
use crate::device::{Device, ProfileError};
use crate::index::{IndexError, Summary};
use crate::outcome::Outcome;
use crate::plan::{Forced, Plan, PlanError, Points};
use crate::schedule::{GpuOptions, Schedule, ScheduleError, Split, Workers};
use crate::spec::{Params, Problem};
use crate::stage::contribution::Test;
use crate::stage::output::Partial;
use kernels::Compiled;
use nvrtc::NvrtcError;

mod blocks;
mod device;
mod grid;
mod kernels;
mod launch;
pub mod nvrtc;
mod orchestrate;
mod outputs;
pub mod pinned;
mod resident;
pub mod take;
mod workers;

use device::{any_context, context, device_of, free_memory, total_memory};
pub use device::{driver_available, keep_freed_memory, kept_pool_bytes, live_device, usable};
pub use orchestrate::{Ask, run, run_scheduled};
use resident::*;

/// Why the GPU could not run a problem.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    #[error("the CUDA driver library (libcuda.so) was not found")]
    NoDriver,
    #[error("the CUDA driver sees no GPU")]
    NoGpu,
    #[error("there is no GPU {ordinal}; this machine has {count} (0 to {})", count.saturating_sub(1))]
    NoSuchGpu { ordinal: usize, count: usize },
    #[error("no GPU chosen")]
    NoGpuChosen,
    #[error("{what}: {cause}")]
    Driver { what: String, cause: DriverError },
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Nvrtc(#[from] NvrtcError),
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    #[error(transparent)]
    Profile(#[from] ProfileError),
    #[error("the CPU's part of the run: {0}")]
    Cpu(Box<CpuError>),
    #[error(
        "the grid needs both sets whole on GPU {ordinal}, and its free memory holds blocks of {fits} points of the {points} (pass {} to stream blocks)",
        crate::remedy::Remedy::EveryPair
    )]
    GridDoesNotFit { ordinal: usize, fits: usize, points: usize },
    #[error(transparent)]
    Stopped(#[from] crate::stop::Stopped),
    #[error(transparent)]
    Input(crate::data::InputError),
    #[error(
        "{origin}: the array at {address:#x} is not in a GPU's memory as the CUDA driver sees it ({why}); pass a host array, or one of this process's GPU arrays"
    )]
    NotOnGpu { origin: String, address: u64, why: String },
    #[error("set A lies on GPU {a} and set B on GPU {b}: put both on one GPU (twobs reads them where they lie)")]
    SetsOnTwoGpus { a: usize, b: usize },
    #[error(
        "the points lie on GPU {ordinal}, which is not among the session's GPUs {gpus:?}: twobs reads them where they lie"
    )]
    NotAsked { ordinal: usize, gpus: Vec<usize> },
    #[error("{0}: the GPU reads points given on it whole; this needs the points on the host (pass a host array)")]
    NeedsHost(String),
    /// The rows of A that rank 0 sent with a piece could not be read.
    #[error("the rows of set A sent with a piece: {0}")]
    Rows(crate::ranks::WireError),
}

/// Names what a driver call was doing when it failed.
trait Doing<T> {
    fn doing(self, what: &str) -> Result<T, GpuError>;
}

impl<T> Doing<T> for Result<T, DriverError> {
    fn doing(self, what: &str) -> Result<T, GpuError> {
        self.map_err(|source| GpuError::Driver { what: what.to_owned(), cause: source })
    }
}

impl From<CpuError> for GpuError {
    fn from(e: CpuError) -> Self {
        GpuError::Cpu(Box::new(e))
    }
}

impl From<DriverError> for GpuError {
    fn from(source: DriverError) -> Self {
        GpuError::Driver { what: "the CUDA driver".into(), cause: source }
    }
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

/// Seconds in each stage, summed over streams and GPUs (CUDA events), and wall time.
#[derive(Debug, Clone, Default, Serialize)]
pub struct GpuTimings {
    /// Loading the CUDA driver and NVRTC, reading the GPUs' limits and
    /// creating the contexts (the last while the kernels compile): once per
    /// process, like compilation, so apart from the compute time.
    pub context_s: f64,
    pub compile_s: f64,
    /// Sizing the grid's cells (the extents and a sample, on the host),
    /// sorting the points into them and listing each unit's ranges (part of
    /// the compute time).
    pub index_s: f64,
    /// Of `index_s`, the GPU's sort of its grid and listing of the units.
    pub grid_s: f64,
    /// Of `index_s`, the cell hierarchy's steps on the host, where it runs.
    #[serde(skip)]
    pub hierarchy: Option<crate::index::cells::Steps>,
    /// Points given on the GPU taken into twobs's columns and measured
    /// there (part of the compute time, as the host path's upload is).
    #[serde(skip_serializing_if = "is_zero")]
    pub take_s: f64,
    /// From the start to the kernels loaded: the driver, contexts and
    /// compilation, overlapped, and the upload of inputs that fit the GPUs
    /// whole where it ran while NVRTC compiled; compute time is the rest of
    /// the wall time.
    pub prepare_s: f64,
    /// Streams, device buffers and pinned staging memory, before the first
    /// upload (the slowest stream's).
    pub setup_s: f64,
    /// Freeing them after the last download (the slowest stream's).
    pub teardown_s: f64,
    pub upload_s: f64,
    /// Seconds in which a kernel ran on a GPU (the union over its streams,
    /// whose kernels overlap), summed over the GPUs.
    pub kernel_s: f64,
    pub download_s: f64,
    pub combine_s: f64,
    pub wall_s: f64,
    pub launches: u64,
    /// Extra launches after the direct output buffer filled up.
    pub overflow_relaunches: u64,
    /// Pieces of work the queue was cut into (`schedule::pieces`).
    pub pieces: u64,
    /// What each GPU did, in the order of `--gpus`.
    pub per_gpu: Vec<GpuWork>,
    /// Whether the CPU took part, why, and what it did.
    pub hybrid: Split,
}

/// One GPU's part of a run: its share of the pairs and how long it worked.
#[derive(Debug, Clone, Default, Serialize)]
pub struct GpuWork {
    pub ordinal: usize,
    pub pieces: u64,
    pub pairs: u128,
    /// Its pairs over the run's.
    pub share: f64,
    /// Seconds in which at least one of its streams was running a piece
    /// (upload, kernel, download), from the start of the compute.
    pub busy_s: f64,
    /// Seconds in which at least one of its kernels ran.
    pub kernel_s: f64,
    /// The rest of the compute's wall time: buffers before the first piece,
    /// gaps between pieces, and waiting for the other GPUs at the end.
    pub idle_s: f64,
}

impl GpuTimings {
    /// Adds a stream's timings to the run's (kernel time is each GPU's, apart).
    fn add(&mut self, o: &GpuTimings) {
        self.setup_s = self.setup_s.max(o.setup_s);
        self.teardown_s = self.teardown_s.max(o.teardown_s);
        self.upload_s += o.upload_s;
        self.download_s += o.download_s;
        self.launches += o.launches;
        self.overflow_relaunches += o.overflow_relaunches;
    }
}

/// What a run found: merged, or (where it is one MPI rank's part of a
/// run) the partial results, for rank 0 to merge with the other ranks'.
pub enum Results {
    Merged(Outcome),
    Parts(Vec<Partial>),
}

impl Results {
    /// The outcome of a run that was not a rank's part.
    pub fn merged(self) -> Outcome {
        match self {
            Results::Merged(outcome) => outcome,
            Results::Parts(_) => panic!("a rank's partial results are merged on rank 0, not taken as an outcome"),
        }
    }

    /// [`Results::merged`], borrowed.
    pub fn outcome(&self) -> &Outcome {
        match self {
            Results::Merged(outcome) => outcome,
            Results::Parts(_) => panic!("a rank's partial results are merged on rank 0, not taken as an outcome"),
        }
    }
}

pub struct GpuRun {
    pub results: Results,
    /// The problem's key as printed (`Key::of_printed`), which its kernels were found by.
    pub printed: Key,
    pub devices: Vec<Device>,
    /// The diagonal kernel's plan, and the plan of the kernel between two blocks when one ran.
    pub plans: Vec<Plan>,
    pub timings: GpuTimings,
    pub notes: Vec<String>,
    pub block_points: usize,
    /// Whether the blocks took a grid's units, and why.
    pub index: Summary,
    /// What the run was scheduled to do.
    pub schedule: Option<Schedule>,
}

/// Compiles the kernels of `forced` shapes for `problem` on `dev` at once,
/// over the host's cores, into `cache`, so that the runs after find them
/// there (`twobs tune`, which times many shapes). Shapes that cannot be
/// planned are left to the run, which says why.
pub fn compile_ahead(
    problem: &Problem,
    params: &Params,
    dev: &Device,
    points: Points,
    forced: &[Forced],
    cache: &Cache,
) {
    use rayon::prelude::*;
    let printed = Key::of_printed(problem);
    forced.par_iter().for_each(|&f| {
        let _ = Compiled::new((problem, printed), params, dev, points, f, false, cache);
    });
}

/// Block boundaries of a set.
fn blocks(n: usize, per: usize) -> Vec<(usize, usize)> {
    (0..n.div_ceil(per)).map(|k| (k * per, ((k + 1) * per).min(n))).collect()
}

/// The GPUs a run takes: their ordinals, and the workers a schedule is made for.
pub struct LiveGpus {
    pub ordinals: Vec<usize>,
    pub workers: Workers,
    /// When the run began (before the driver was first called), and the
    /// driver's start-up, which counts with the contexts.
    pub began: Instant,
    pub driver_s: f64,
}

/// The GPUs of `opts` (all visible ones where none are named) as a schedule
/// sees them, with their ordinals.
pub fn gpus(opts: &GpuOptions) -> Result<LiveGpus, GpuError> {
    let began = Instant::now();
    let (ordinals, workers) = workers(opts)?;
    Ok(LiveGpus { ordinals, workers, began, driver_s: began.elapsed().as_secs_f64() })
}

fn workers(opts: &GpuOptions) -> Result<(Vec<usize>, Workers), GpuError> {
    usable()?;
    nvrtc::available()?;
    let count = CudaContext::device_count().doing("counting GPUs")? as usize;
    let ordinals = opts.gpus.clone().unwrap_or_else(|| (0..count).collect());
    if ordinals.is_empty() {
        return Err(GpuError::NoGpuChosen);
    }
    if let Some(&ordinal) = ordinals.iter().find(|&&g| g >= count) {
        return Err(GpuError::NoSuchGpu { ordinal, count });
    }
    let gpus: Vec<Device> = ordinals.iter().map(|&g| device_of(g)).collect::<Result<_, _>>()?;
    // Blocks are sized from the smallest GPU's total memory while the
    // contexts are made, then from its free memory.
    let mut memory = usize::MAX;
    for &g in &ordinals {
        memory = memory.min(total_memory(g)?);
    }
    let streams = opts.streams.max(1);
    Ok((ordinals, Workers { gpus, gpu_memory: memory, streams, cores: crate::memory::host_cores() }))
}

/// Where a run's points lie as the GPUs take them.
#[derive(Clone, Copy)]
pub enum Located<'a> {
    /// The host's columns: uploaded to each GPU, or streamed in blocks.
    Host(&'a Inputs),
    /// Taken on their GPU already ([`take::take`]): that GPU's resident inputs.
    Device(&'a take::Taken),
    /// Set B on the host, and of set A its shape alone: A's rows come with
    /// each piece from MPI rank 0 (`run::rows_of_a_travel`), a block at a
    /// time, into each stream's buffers.
    RowsOfA { a: &'a crate::data::SetShape, b: &'a crate::data::PointSet },
}

impl<'a> Located<'a> {
    /// Points of set A, and of the other set (A again for one set).
    pub fn lens(&self) -> (usize, usize) {
        match self {
            Located::Host(inputs) => (inputs.a.len(), inputs.other().len()),
            Located::Device(taken) => taken.lens(),
            Located::RowsOfA { a, b } => (a.len, b.len()),
        }
    }

    /// Points of the larger set.
    fn most(&self) -> usize {
        let (a, b) = self.lens();
        a.max(b)
    }

    /// Whether there is a set B.
    fn two_sets(&self) -> bool {
        match self {
            Located::Host(inputs) => inputs.b.is_some(),
            Located::Device(taken) => taken.two_sets(),
            Located::RowsOfA { .. } => true,
        }
    }

    /// Bytes of one point of set A.
    fn point_bytes(&self) -> usize {
        match self {
            Located::Host(inputs) => inputs.a.columns.iter().map(|c| c.scalar().bytes() as usize).sum(),
            Located::Device(taken) => taken.scalars.iter().map(|s| s.bytes() as usize).sum(),
            Located::RowsOfA { a, .. } => a.sample.columns.iter().map(|c| c.scalar().bytes() as usize).sum(),
        }
    }

    /// The scalar of each component of set A.
    fn scalars(&self) -> Vec<crate::spec::Scalar> {
        match self {
            Located::Host(inputs) => inputs.a.columns.iter().map(|c| c.scalar()).collect(),
            Located::Device(taken) => taken.scalars.clone(),
            Located::RowsOfA { a, .. } => a.sample.columns.iter().map(|c| c.scalar()).collect(),
        }
    }

    /// The host's columns, where `what` needs them.
    fn host(&self, what: &str) -> Result<&'a Inputs, GpuError> {
        match self {
            Located::Host(inputs) => Ok(inputs),
            Located::Device(_) | Located::RowsOfA { .. } => Err(GpuError::NeedsHost(what.to_owned())),
        }
    }

    /// What streams load their blocks from: set A where the host holds it
    /// (None where its rows come with the pieces), a set with A's columns
    /// (A, or its sample: the buffers' layout), and the other set.
    fn streamed(&self) -> Result<Streamed<'a>, GpuError> {
        match self {
            Located::Host(inputs) => Ok(Streamed { a: Some(&inputs.a), a_like: &inputs.a, other: inputs.other() }),
            Located::RowsOfA { a, b } => Ok(Streamed { a: None, a_like: &a.sample, other: b }),
            Located::Device(_) => Err(GpuError::NeedsHost("points streamed in blocks".into())),
        }
    }
}

/// The host's sets that streams load blocks from ([`Located::streamed`]).
pub(super) struct Streamed<'a> {
    pub(super) a: Option<&'a crate::data::PointSet>,
    pub(super) a_like: &'a crate::data::PointSet,
    pub(super) other: &'a crate::data::PointSet,
}

/// Checks the key edges of `problem` on GPU `ordinal` for every key of ranks
/// [first, first + count): for f32 keys, ranks 0 .. 2^32 are every bit
/// pattern. None where pairs are tested on values.
pub fn check_keys(
    problem: &Problem,
    params: &Params,
    cache: &Cache,
    ordinal: usize,
    (first, count): (u64, u64),
) -> Result<Option<KeyCheck>, GpuError> {
    if !Test::keys_possible(problem, params) {
        return Ok(None);
    }
    usable()?;
    let ctx = context(ordinal)?;
    let dev = device_of(ordinal)?;
    let probe = codegen::render_key_probe(problem, params, Some(dev.compute_capability)).expect("keys are possible");
    let (cubin, _) = nvrtc::cubin(&probe, &dev.arch(), cache)?;
    let module = ctx.load_module(cudarc::nvrtc::Ptx::from_binary(cubin.to_vec())).doing("loading the key probe")?;
    let func = module.load_function(&probe.entry).doing("finding the key probe")?;
    let stream = ctx.default_stream();
    let mut mismatches = stream.alloc_zeros::<u64>(1).doing("allocating GPU memory")?;
    let mut first_bad = stream.clone_htod(&[u64::MAX]).doing("allocating GPU memory")?;
    let mut worst = stream.alloc_zeros::<u64>(1).doing("allocating GPU memory")?;
    let cfg = LaunchConfig { grid_dim: (dev.multiprocessors * 16, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
    let mut builder = stream.launch_builder(&func);
    builder.arg(&first).arg(&count).arg(&mut mismatches).arg(&mut first_bad).arg(&mut worst);
    // SAFETY: the probe's signature is (u64 first, u64 count, u64* mismatches, u64* first_bad,
    // u64* worst_estimate_error: a double's bits), as pushed.
    unsafe { builder.launch(cfg) }.doing("launching the key probe")?;
    let found = stream.clone_dtoh(&mismatches).doing("reading the key probe")?[0];
    let bad = stream.clone_dtoh(&first_bad).doing("reading the key probe")?[0];
    let estimate_error = f64::from_bits(stream.clone_dtoh(&worst).doing("reading the key probe")?[0]);
    stream.synchronize().doing("running the key probe")?;
    Ok(Some(KeyCheck { checked: count, mismatches: found, first_bad: (found > 0).then_some(bad), estimate_error }))
}

#[cfg(test)]
mod tests {
    use super::{SAMPLE_PAIRS, SAMPLE_UNITS, kept_pool_bytes, sample_units};

    #[test]
    fn the_pool_keeps_a_ten_million_point_knn_call_and_leaves_most_memory() {
        // K = 16 lists of f32 values and u32 ids, the take's and the grid's
        // 3 columns of f32, and its perm, cell and cell_of words, per point.
        let knn_10m = 10_000_000u64 * (16 * 8 + 2 * 3 * 4 + 3 * 4);
        for total in [80usize << 30, 141 << 30] {
            let kept = kept_pool_bytes(total);
            assert!(kept >= knn_10m, "{kept} bytes kept of {total}: less than a 10M KNN's {knn_10m}");
            assert!(kept <= total as u64 / 8, "{kept} bytes kept of {total}");
        }
    }

    #[test]
    fn the_selectivity_sample_is_spread_and_bounded_in_pairs() {
        // Light units: SAMPLE_UNITS of them, the middle of each run of 1000 / 256.
        let light = sample_units(1000, |_| 1000);
        assert_eq!(light.len(), SAMPLE_UNITS);
        assert_eq!((light[0], light[1], light[255]), (1, 5, 998));
        // Heavy units: as many as visit SAMPLE_PAIRS, spread over all of them.
        assert_eq!(sample_units(1000, |_| SAMPLE_PAIRS / 2), vec![250, 750]);
        assert_eq!(sample_units(1000, |_| SAMPLE_PAIRS * 8), vec![500]);
        assert_eq!(sample_units(3, |_| 1), vec![0, 1, 2]);
        assert!(sample_units(0, |_| 1).is_empty());
    }
}
