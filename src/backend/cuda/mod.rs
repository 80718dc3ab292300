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

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, DriverError, LaunchConfig, PushKernelArg, sys};
use indicatif::ProgressBar;
use serde::Serialize;

use super::KeyCheck;
use super::cpu::{CpuDriver, CpuError};
use super::hybrid::{self, CpuSide};
use super::nvrtc::{self, NvrtcError};
use crate::cache::{Cache, Key};
use crate::codegen;
use crate::data::{Inputs, PointSet};
use crate::device::{Device, ProfileError, TunedProfile};
use crate::index::{self, Grid, IndexChoice, IndexError, IndexKind, Layout, Shapes, Summary};
use crate::outcome::Outcome;
use crate::plan::{Forced, Plan, PlanError, Points, Shape};
use crate::schedule::pieces::{self, GridWork, Piece};
use crate::schedule::{self, GpuOptions, Hybrid, Indexing, Part, Schedule, ScheduleError, Sharing, Split, Workers};
use crate::spec::{ParamKind, Params, Problem, Sets};
use crate::stage::contribution::Test;
use crate::stage::input::{DeviceBlock, PAD_POINTS};
use crate::stage::output::download::{self, Staging};
use crate::stage::output::{self, Collect, OutputStage, Partial};
use crate::stage::visit::{KernelKind, Unit};
use crate::stage::{GridArgs, RingArgs, RingShape};
use kernels::{Compiled, KernelPair, Launcher, dob_drain};
use workers::{Gpu, GpuResult, Job, busy, gpu_worker};

mod grid;
mod kernels;
pub mod pinned;
pub mod take;
mod workers;

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
        "the grid needs both sets whole on GPU {ordinal}, and its free memory holds blocks of {fits} points of the {points} (pass --index none to stream blocks)"
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

/// Whether libcuda can be loaded.
pub fn driver_available() -> Result<(), GpuError> {
    // Once per process: the probe opens the library each time (a millisecond
    // a run, where a session runs many), and a loaded driver stays loaded.
    static PRESENT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    // SAFETY: only probes whether the shared library can be opened.
    if *PRESENT.get_or_init(|| unsafe { sys::is_culib_present() }) { Ok(()) } else { Err(GpuError::NoDriver) }
}

/// Whether this machine can run kernels: the driver loads and sees a GPU.
pub fn usable() -> Result<(), GpuError> {
    driver_available()?;
    match CudaContext::device_count().doing("counting GPUs")? {
        n if n > 0 => Ok(()),
        _ => Err(GpuError::NoGpu),
    }
}

/// The process's contexts, by ordinal.
static CONTEXTS: Mutex<Option<HashMap<usize, Arc<CudaContext>>>> = Mutex::new(None);

/// Whether GPU `ordinal`'s context was made already (by an earlier run of the process).
fn context_made(ordinal: usize) -> bool {
    CONTEXTS.lock().expect("context lock").as_ref().is_some_and(|m| m.contains_key(&ordinal))
}

/// A context a run of this process made (the lowest GPU's), if any.
fn any_context() -> Option<Arc<CudaContext>> {
    let contexts = CONTEXTS.lock().expect("context lock");
    contexts.as_ref()?.iter().min_by_key(|(ordinal, _)| **ordinal).map(|(_, ctx)| ctx.clone())
}

/// The context of GPU `ordinal`, made once per process: modules loaded into it stay loaded.
fn context(ordinal: usize) -> Result<Arc<CudaContext>, GpuError> {
    let mut contexts = CONTEXTS.lock().expect("context lock");
    let map = contexts.get_or_insert_with(HashMap::new);
    if let Some(ctx) = map.get(&ordinal) {
        return Ok(ctx.clone());
    }
    let ctx = CudaContext::new(ordinal).doing("creating a CUDA context")?;
    // Each stream thread owns its buffers and synchronizes its own stream.
    unsafe { ctx.disable_event_tracking() };
    // A process's first stream-ordered allocation sets up the GPU's memory
    // pool: 7.5-10 ms on the H200, the next ones 15 us
    // (bench/host-copies.py). Once per process, like the context.
    // (4493914 reverted this while selfjoin/grid-four-streams failed; that
    // failure was the staged copy reading past its chunk, fixed in 32f49c8.)
    let stream = ctx.default_stream();
    drop(stream.alloc_zeros::<u8>(1).doing("setting up the memory pool")?);
    stream.synchronize().doing("setting up the memory pool")?;
    keep_freed_memory(&ctx)?;
    map.insert(ordinal, ctx.clone());
    Ok(ctx)
}

/// Bytes of freed GPU memory the GPU's pool keeps for the next allocations
/// (its release threshold): an eighth of the GPU's memory. The pool's
/// default, none, hands every freed buffer back to the driver at the next
/// synchronization, so each call mapped its buffers afresh: a 10M-point
/// KNN's 1.3 GB of lists, sorted columns and grid cost 2.3 ms of setup on
/// the H200. An eighth holds every buffer of a call on 80M points and
/// leaves seven eighths to other libraries, as CuPy's and PyTorch's caching
/// pools keep theirs.
pub fn kept_pool_bytes(total_memory: usize) -> u64 {
    total_memory as u64 / 8
}

/// GPU `ctx`'s default memory pool: the one stream-ordered allocations take from.
fn default_pool(ctx: &Arc<CudaContext>) -> Result<sys::CUmemoryPool, DriverError> {
    let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
    // SAFETY: the context's device; the handle is written through a valid pointer.
    unsafe { sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()) }.result()?;
    Ok(pool)
}

/// Sets GPU `ctx`'s default memory pool to keep [`kept_pool_bytes`] of
/// freed memory (every context twobs makes; public for the probes that time its buffers).
pub fn keep_freed_memory(ctx: &Arc<CudaContext>) -> Result<(), GpuError> {
    let doing = "keeping freed memory in the GPU's pool";
    let mut keep = kept_pool_bytes(ctx.total_mem().doing(doing)?);
    let pool = default_pool(ctx).doing(doing)?;
    // SAFETY: the threshold is a cuuint64_t, as CU_MEMPOOL_ATTR_RELEASE_THRESHOLD takes it.
    unsafe {
        sys::cuMemPoolSetAttribute(
            pool,
            sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            (&mut keep as *mut u64).cast(),
        )
    }
    .result()
    .doing(doing)
}

/// GPU `ordinal`'s memory in bytes, read from the driver once per process.
fn total_memory(ordinal: usize) -> Result<usize, GpuError> {
    static READ: crate::cache::Memo<usize> = crate::cache::Memo::new();
    let read = READ.get_or_try(crate::cache::Key::of(&[b"total memory", &ordinal.to_le_bytes()]), || {
        let cu = cudarc::driver::result::device::get(ordinal as i32).doing("reading GPU memory")?;
        // SAFETY: a device the driver just returned.
        unsafe { cudarc::driver::result::device::total_mem(cu) }.doing("reading GPU memory")
    })?;
    Ok(*read)
}

/// Bytes a run may allocate on GPU `ctx`: the driver's free memory and
/// what the pool keeps unused (freed by earlier calls, [`kept_pool_bytes`]),
/// which the driver counts as used.
fn free_memory(ctx: &Arc<CudaContext>) -> Result<usize, DriverError> {
    let free = ctx.mem_get_info()?.0;
    let pool = default_pool(ctx)?;
    let attribute = |attr: sys::CUmemPool_attribute| -> Result<u64, DriverError> {
        let mut value = 0u64;
        // SAFETY: both attributes read are cuuint64_t, written through a valid pointer.
        unsafe { sys::cuMemPoolGetAttribute(pool, attr, (&mut value as *mut u64).cast()) }.result()?;
        Ok(value)
    };
    let reserved = attribute(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)?;
    let used = attribute(sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_CURRENT)?;
    Ok(free + reserved.saturating_sub(used) as usize)
}

/// GPU `ordinal`'s pinned buffers for downloads of pairs, made once per
/// process like its context (and timed with it).
fn staging(ctx: &Arc<CudaContext>) -> Result<Arc<Mutex<Staging>>, GpuError> {
    static STAGING: Mutex<Option<HashMap<usize, Arc<Mutex<Staging>>>>> = Mutex::new(None);
    let mut all = STAGING.lock().expect("staging lock");
    let map = all.get_or_insert_with(HashMap::new);
    if let Some(s) = map.get(&ctx.ordinal()) {
        return Ok(s.clone());
    }
    let s = Arc::new(Mutex::new(Staging::new(ctx).doing("pinning host memory for downloads")?));
    map.insert(ctx.ordinal(), s.clone());
    Ok(s)
}

/// Reads the limits of GPU `ordinal`; model constants come from the closest
/// profile, kernel shapes from the GPU's tuned profile where `twobs tune` made one.
pub fn live_device(ordinal: usize) -> Result<Device, GpuError> {
    usable()?;
    device_of(ordinal)
}

/// GPU `ordinal` as the planner sees it: its limits, with the shapes of its
/// tuned profile where there is one.
fn device_of(ordinal: usize) -> Result<Device, GpuError> {
    let dev = limits_of(ordinal)?;
    let path = TunedProfile::path_in(&TunedProfile::folder()?, &dev.name);
    Ok(match TunedProfile::read(&path)? {
        Some(tuned) => tuned.apply(dev, &path)?,
        None => dev,
    })
}

/// The limits of GPU `ordinal`, read from the driver without a context (so
/// that kernels can be planned and compiled while the context is made).
fn limits_of(ordinal: usize) -> Result<Device, GpuError> {
    // A GPU's limits do not change while the process lives: read once.
    static READ: crate::cache::Memo<Device> = crate::cache::Memo::new();
    let read = READ.get_or_try(crate::cache::Key::of(&[&ordinal.to_le_bytes()]), || read_limits(ordinal))?;
    Ok((*read).clone())
}

fn read_limits(ordinal: usize) -> Result<Device, GpuError> {
    use cudarc::driver::result::device;
    use sys::CUdevice_attribute::*;
    let reading = "reading the GPU's limits";
    let cu = device::get(ordinal as i32).doing(reading)?;
    // SAFETY: `cu` is a device the driver just returned.
    let attr = |a| -> Result<u32, GpuError> { Ok(unsafe { device::get_attribute(cu, a) }.doing(reading)? as u32) };
    let cc = (attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?, attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?);
    let base = Device::closest_profile(cc);
    let bus_bits = attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)? as f64;
    let mem_khz = attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)? as f64;
    Ok(Device {
        name: device::get_name(cu).doing("reading the GPU's name")?,
        origin: format!("live GPU {ordinal}"),
        compute_capability: cc,
        multiprocessors: attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        shared_per_sm: attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)?,
        shared_per_block: attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?,
        shared_per_block_optin: attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
        shared_reserved_per_block: attr(CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK)?,
        registers_per_sm: attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR)?,
        max_registers_per_thread: 255,
        threads_per_sm: attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR)?,
        blocks_per_sm: attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR)?,
        readonly_cache_per_sm: base.readonly_cache_per_sm,
        unified_l1: base.unified_l1,
        boost_clock_mhz: attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE)? / 1000,
        fp32_lanes_per_sm: base.fp32_lanes_per_sm,
        // Double data rate: two transfers per clock over the bus.
        memory_bandwidth_gbs: if mem_khz > 0.0 {
            2.0 * mem_khz * 1e3 * bus_bits / 8.0 / 1e9
        } else {
            base.memory_bandwidth_gbs
        },
        model: base.model,
        tuning: base.tuning,
        tuned_problems: base.tuned_problems,
        grid_tuning: base.grid_tuning,
    })
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
    pub hierarchy: Option<crate::cells::Steps>,
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
    RowsOfA { a: &'a crate::index::SetShape, b: &'a crate::data::PointSet },
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

/// What a run was asked: the problem on its inputs, with its options.
#[derive(Clone, Copy)]
pub struct Ask<'a> {
    pub problem: &'a Problem,
    pub params: &'a Params,
    pub inputs: Located<'a>,
    pub choice: IndexChoice,
    pub opts: &'a GpuOptions,
    pub cache: &'a Cache,
    pub progress: &'a ProgressBar,
    /// This process's part, where MPI ranks share the schedule.
    pub part: Part<'a>,
}

/// Runs `problem` on `inputs` on the GPUs of `opts`; `index` says whether a
/// cut-off problem's blocks may take the units of a grid. The schedule is
/// made here for this machine's GPUs, then run.
pub fn run(
    problem: &Problem,
    params: &Params,
    inputs: &Inputs,
    index: IndexChoice,
    opts: &GpuOptions,
    cache: &Cache,
    progress: &ProgressBar,
) -> Result<GpuRun, GpuError> {
    let gpus = gpus(opts)?;
    // The schedule's sample of the grid is made for these inputs: compute, not preparation.
    let start = Instant::now();
    let schedule = Schedule::make(problem, params, &Shapes::of(inputs), index, opts, &gpus.workers)?;
    let ask = Ask {
        problem,
        params,
        inputs: Located::Host(inputs),
        choice: index,
        opts,
        cache,
        progress,
        part: Part::default(),
    };
    run_scheduled(ask, &gpus, &schedule, start.elapsed().as_secs_f64())
}

/// Runs `schedule`, made for `gpus` in `schedule_s` seconds.
pub fn run_scheduled(ask: Ask, gpus: &LiveGpus, schedule: &Schedule, schedule_s: f64) -> Result<GpuRun, GpuError> {
    let mut run = run_schedule(ask, schedule, &gpus.ordinals, &gpus.workers.gpus, gpus.began, schedule_s)?;
    run.timings.context_s += gpus.driver_s;
    Ok(run)
}

/// How the GPUs find their pairs, once the host's grid (where the schedule
/// asks for one) is sorted: every pair, the host's grid, or a grid each GPU
/// sorts from the layout.
#[allow(clippy::large_enum_variant, reason = "one per run")]
enum Found {
    Brute(Summary),
    Host(Grid, Summary),
    Device(Layout),
}

/// Runs `schedule` on the GPUs `ordinals` (described by `devices`), from
/// `wall`, the start of the run; making the schedule took `schedule_s`.
fn run_schedule(
    ask: Ask,
    schedule: &Schedule,
    ordinals: &[usize],
    devices: &[Device],
    wall: Instant,
    schedule_s: f64,
) -> Result<GpuRun, GpuError> {
    let Ask { problem, params, inputs, choice, .. } = ask;
    let given = ordinals.len();
    // Every rank's GPUs taking part (rank after rank, each rank's alike), and this process's.
    let all: Vec<Device> = (0..schedule.gpus).map(|g| devices[g % devices.len()].clone()).collect();
    let mine = ask.part.gpus(given, schedule.gpus);
    assert!(mine > 0, "a process whose GPUs take no part in the schedule does not run it");
    let (ordinals, devices) = (&ordinals[..mine], &devices[..mine]);
    let shape = Shape::new(problem, params, plan_points(inputs));
    let index_start = Instant::now();
    let mut split = schedule.hybrid.clone();
    let cells = cells_on_gpus(ask, schedule, &shape, &all)?;
    let (cells_found, resolved, hierarchy) = match cells {
        Some(c) => (Some(Found::Host(c.grid, c.summary)), Some(c.counts), Some(c.steps)),
        None => (None, None, None),
    };
    let found = match (cells_found, &schedule.indexing) {
        (Some(found), _) => found,
        (None, indexing) => match indexing {
            Indexing::Brute(summary) => Found::Brute(summary.clone()),
            Indexing::Device(layout) => Found::Device(layout.clone()),
            Indexing::Host { layout, runs } => {
                let inputs = inputs.host("a grid the host sorts")?;
                match index::sort_and_decide(layout, inputs, shape.visit, shape.pairs, choice, *runs) {
                    (Some(grid), summary) => Found::Host(grid, summary),
                    (None, summary) => {
                        split = Split::gpus_alone(format!("the GPUs alone: the grid was not taken ({})", summary.why));
                        Found::Brute(summary)
                    }
                }
            }
        },
    };
    let host_index_s = index_start.elapsed().as_secs_f64();
    let mut ready = prepare(ask, &found, &split, schedule.block_points, ordinals, devices, wall)?;
    ready.timings.index_s = schedule_s + host_index_s;
    ready.timings.hierarchy = hierarchy;
    if let Some(e) = ready.cpu_driver_error.take() {
        split = Split::gpus_alone(format!("the GPUs alone: the CPU's driver did not build ({e})"));
    }
    // The GPUs' own grids: sorted where the inputs lie, then taken where
    // they skip enough, else every pair with brute force's kernels.
    let (grid_work, summary) = match &found {
        Found::Brute(summary) => (None, summary.clone()),
        Found::Host(grid, summary) => {
            let tile = ready.grid_tile();
            let work = grid
                .units
                .iter()
                .map(|u| GridWork::new(u.pairs, grid.partners(u), u.ranges[1] - u.ranges[0], tile))
                .collect();
            (Some(vec![(work, grid.pairs)]), summary.clone())
        }
        Found::Device(layout) => sort_on_gpus(ask, &mut ready, layout, schedule.sharing, devices, &all)?,
    };
    if let Some(work) = &grid_work
        && !ask.progress.is_hidden()
    {
        let pairs: u128 = work.iter().map(|(_, p)| p).sum();
        ask.progress.set_length(pairs.min(u64::MAX as u128) as u64);
    }
    let host_grid = match &found {
        Found::Host(grid, _) => Some(grid),
        _ => None,
    };
    let mut run = compute(ask, ready, grid_work, summary, host_grid, &mut split, ordinals, devices, wall, schedule)?;
    run.timings.hybrid = split;
    if let (Some(counts), Results::Merged(outcome)) = (&resolved, &mut run.results) {
        *outcome =
            crate::cells::add_resolved(std::mem::replace(outcome, Outcome::Pairs(Default::default())), Some(counts));
    }
    run.schedule = Some(schedule.clone());
    // Fewer GPUs than the run was given: the report says why.
    run.notes.splice(0..0, (schedule.gpus < given).then(|| schedule.why_gpus.clone()));
    Ok(run)
}

/// Per-pair and per-cell-pair costs of a GPU run in nanoseconds of wall
/// time: brute force's keys at 2.5e11 pairs a second (the H200's SDH,
/// docs/planner.md), the grid kernel's units at 1.5e11 (its tiles start
/// before their ranges and stop short), the host's resolver and trees
/// (`cells::CPU_COSTS`) over its cores.
fn gpu_costs(gpus: usize, cores: usize) -> crate::cells::Costs {
    let (gpus, cores) = (gpus.max(1) as f64, cores.max(1) as f64);
    let cpu = crate::cells::CPU_COSTS;
    crate::cells::Costs {
        brute_pair: 1.0 / 250.0 / gpus,
        unit_pair: 1.0 / 150.0 / gpus,
        node_pair: cpu.node_pair / cores,
        tree_point: cpu.tree_point / cores,
    }
}

/// The cell hierarchy in place of the schedule's index, where it applies
/// and costs less (or `--index cells`): leaves of the grid kernel's B x R own
/// points, so that a unit is one block's. Not under MPI ranks (each would
/// add the resolved pairs), nor with streamed blocks.
fn cells_on_gpus(
    ask: Ask,
    schedule: &Schedule,
    shape: &Shape,
    all: &[Device],
) -> Result<Option<crate::cells::Cells>, GpuError> {
    let Ask { problem, params, inputs, choice, opts, .. } = ask;
    let forced = choice == IndexChoice::Cells;
    if !(forced || choice == IndexChoice::Auto) || ask.part.counter.is_some() || all.is_empty() {
        return Ok(None);
    }
    if !forced && !crate::cells::tried_by_gpu_auto(problem) {
        return Ok(None);
    }
    // The hierarchy's trees are built on the host.
    let inputs = match inputs {
        Located::Host(inputs) => inputs,
        Located::Device(_) | Located::RowsOfA { .. } if forced => {
            return Err(GpuError::NeedsHost("the cell hierarchy (index=cells)".into()));
        }
        Located::Device(_) | Located::RowsOfA { .. } => return Ok(None),
    };
    let how = match crate::cells::applies(problem, params, inputs, shape.visit, false) {
        Ok(how) => how,
        Err(why) if forced => return Err(IndexError::NoCells(why).into()),
        Err(_) => return Ok(None),
    };
    let plan = Plan::grid(problem, params, &all[0], plan_points(inputs), opts.forced)?;
    let leaf = plan.launch.block_size * plan.launch.points_per_thread;
    let costs = gpu_costs(all.len(), crate::memory::host_cores());
    let other = match &schedule.indexing {
        _ if forced => None,
        Indexing::Brute(_) => Some((shape.pairs as f64 * costs.brute_pair, "every pair".to_owned())),
        Indexing::Host { layout, .. } | Indexing::Device(layout) => {
            let pairs =
                schedule.estimated_pairs.unwrap_or_else(|| layout.estimated_pairs(&Shapes::of(inputs), shape.visit));
            Some((pairs as f64 * costs.unit_pair, "the grid".to_owned()))
        }
    };
    // The grid kernel reads both sets whole.
    if schedule.block_points < inputs.a.len().max(inputs.other().len()) && !forced {
        return Ok(None);
    }
    let leaves = crate::cells::Leaves::of(leaf);
    match crate::cells::build(&how, inputs, shape.visit, leaves, costs, other) {
        Ok(c) => Ok(Some(c)),
        Err(_) => Ok(None),
    }
}

fn plan_points<'a>(sets: impl Into<Located<'a>>) -> Points {
    let sets = sets.into();
    let (a, b) = sets.lens();
    Points { a: a as u64, b: sets.two_sets().then_some(b as u64) }
}

impl<'a> From<&'a Inputs> for Located<'a> {
    fn from(inputs: &'a Inputs) -> Located<'a> {
        Located::Host(inputs)
    }
}

/// The GPUs made ready: contexts, kernels loaded, inputs resident where
/// they fit, and the CPU's driver where it takes part.
struct Ready {
    /// The problem's key as printed (`Key::of_printed`).
    printed: Key,
    contexts: Vec<Arc<CudaContext>>,
    stagings: Vec<Option<Arc<Mutex<Staging>>>>,
    residents: Vec<Option<Resident>>,
    /// Each GPU's kernels (brute force's where a grid fell back to every pair).
    compiled: Vec<KernelPair<Compiled>>,
    /// Brute force's kernels, where a grid the GPUs sort may be found not worth it.
    compiled_brute: Option<Result<Vec<KernelPair<Compiled>>, GpuError>>,
    cpu_driver: Option<CpuDriver>,
    cpu_driver_error: Option<CpuError>,
    block_points: usize,
    timings: GpuTimings,
    /// Seconds of the resident uploads that ran after the kernels were ready.
    upload_after_compile: f64,
}

impl Ready {
    /// The grid kernel's tile (its block size).
    fn grid_tile(&self) -> u64 {
        self.compiled[0].0.as_ref().expect("the grid's kernel").plan.launch.block_size as u64
    }
}

/// Makes the contexts on their own threads (which also upload inputs that
/// fit a GPU whole) while NVRTC compiles here, and the host compiler the
/// CPU's driver where the CPU takes part.
fn prepare(
    ask: Ask,
    found: &Found,
    split: &Split,
    scheduled_block_points: usize,
    ordinals: &[usize],
    devices: &[Device],
    wall: Instant,
) -> Result<Ready, GpuError> {
    let Ask { problem, params, inputs, choice, opts, cache, .. } = ask;
    let (n_a, n_b) = inputs.lens();
    let streams = opts.streams.max(1);
    // Points taken on their GPU are resident there already, whatever a block would hold.
    let whole = |points: usize| points >= n_a.max(n_b) || matches!(inputs, Located::Device(_));
    let point_bytes = inputs.point_bytes();
    let block_points_for = |memory: usize| schedule::block_points(point_bytes, n_a.max(n_b), opts, memory, streams);
    // Pairs, and KNN lists too large to copy into pageable memory fast, come
    // back through pinned buffers.
    let collect = crate::stage::contribution::collect(problem, params);
    let downloads_staged = collect.bytes(n_a as u64, problem.function.returns).is_none_or(download::is_staged);
    // The grid kernel where a grid may be walked, and brute force's where every
    // pair may be (where a GPU's own grid is found not worth it).
    let grid_kernel = !matches!(found, Found::Brute(_));
    let brute_kernels = match found {
        Found::Brute(_) => true,
        Found::Host(..) => false,
        Found::Device(..) => choice != IndexChoice::Grid,
    };
    // The problem printed and hashed once for every kernel this run looks up.
    let printed = Key::of_printed(problem);
    let compile = |block_points: usize, on_grid: bool| compile_kernels(ask, printed, devices, block_points, on_grid);
    // A grid's kernel reads both sets whole, and so does every kernel on points taken on their GPU.
    let mut block_points = match (grid_kernel, inputs) {
        (false, Located::Host(_) | Located::RowsOfA { .. }) => scheduled_block_points,
        _ => n_a.max(n_b).max(1),
    };
    let mut compiled_at = 0.0;
    let make = |g: usize| -> Result<Made, GpuError> {
        let start = Instant::now();
        let ctx = context(g)?;
        let staging = if downloads_staged { Some(staging(&ctx)?) } else { None };
        let context_s = start.elapsed().as_secs_f64();
        // Asked only where the inputs could fill half the GPU's memory.
        let free = match schedule::whole_in_half(point_bytes, n_a.max(n_b), opts, total_memory(g)?, streams) {
            true => usize::MAX,
            false => free_memory(&ctx).doing("reading free GPU memory")?,
        };
        let made_at = wall.elapsed().as_secs_f64();
        let fits = block_points_for(free);
        let resident = match found {
            // The grid's kernel reads both sets whole, in cell order.
            Found::Host(..) | Found::Device(..) if !whole(fits) => {
                return Err(GpuError::GridDoesNotFit { ordinal: g, fits, points: n_a.max(n_b) });
            }
            Found::Host(grid, summary) => Some(Resident::upload_grid(&ctx, grid, summary.index == IndexKind::Rings)?),
            // The GPU sorts the inputs it holds.
            Found::Device(..) => Some(Resident::of(&ctx, inputs)?),
            // Where the upload fails (the GPU filled up meanwhile), the streams load blocks of their own.
            Found::Brute(_) if matches!(inputs, Located::Device(_)) => Some(Resident::of(&ctx, inputs)?),
            Found::Brute(_) if whole(fits) => Resident::of(&ctx, inputs).and_then(|mut r| r.wait().map(|()| r)).ok(),
            Found::Brute(_) => None,
        };
        Ok(Made { ctx, staging, context_s, free, resident, made_at, uploaded_at: wall.elapsed().as_secs_f64() })
    };
    let (made, compiled, compiled_brute, cpu_driver, mut compile_s) = std::thread::scope(|s| {
        // The CPU's driver over the host's grid, where the CPU takes part,
        // built by the host compiler while NVRTC compiles.
        let cpu_driver = match (found, split.cpu) {
            (Found::Host(_, summary), true) => {
                let shape = Shape::new(problem, params, plan_points(inputs));
                Some(s.spawn(move || CpuDriver::compile(problem, params, &shape, summary.index, false, cache)))
            }
            _ => None,
        };
        // One GPU whose context a run made before (a session's next call)
        // is made ready on this thread, its upload queued before the kernels
        // are found and waited for after them: a thread spawned to overlap
        // them cost 70-120 us on the H200's host, more than finding kernels
        // already compiled.
        let here = matches!(ordinals, [g] if context_made(*g));
        let (queued, making): (Vec<_>, Vec<_>) = match here {
            true => (ordinals.iter().map(|&g| make(g)).collect(), Vec::new()),
            false => (
                Vec::new(),
                ordinals
                    .iter()
                    .map(|&g| {
                        let make = &make;
                        s.spawn(move || make(g).and_then(|m| m.finish(wall)))
                    })
                    .collect(),
            ),
        };
        let start = Instant::now();
        let compiled = compile(block_points, grid_kernel);
        let compiled_brute = (grid_kernel && brute_kernels).then(|| compile(block_points, false));
        let compile_s = start.elapsed().as_secs_f64();
        compiled_at = wall.elapsed().as_secs_f64();
        let made: Vec<Result<Made, GpuError>> = match here {
            true => queued.into_iter().map(|m| m.and_then(|m| m.finish(wall))).collect(),
            false => making.into_iter().map(|h| h.join().expect("context thread panicked")).collect(),
        };
        let cpu_driver = cpu_driver.map(|h| h.join().expect("CPU driver's build panicked"));
        (made, compiled, compiled_brute, cpu_driver, compile_s)
    });
    let (cpu_driver, cpu_driver_error) = match cpu_driver {
        Some(Ok(driver)) => {
            compile_s = compile_s.max(driver.compile_seconds);
            (Some(driver), None)
        }
        Some(Err(e)) if opts.hybrid == Hybrid::On => return Err(e.into()),
        Some(Err(e)) => (None, Some(e)),
        None => (None, None),
    };
    let mut ready = Ready {
        printed,
        contexts: Vec::new(),
        stagings: Vec::new(),
        residents: Vec::new(),
        compiled: Vec::new(),
        compiled_brute,
        cpu_driver,
        cpu_driver_error,
        block_points,
        timings: GpuTimings::default(),
        upload_after_compile: 0.0,
    };
    let mut free = usize::MAX;
    // Uploads hide behind the compilation and the slowest context; what ran
    // after both is compute time.
    let mut ready_at = compiled_at;
    let mut uploaded_at: f64 = 0.0;
    for m in made {
        let m = m?;
        ready_at = ready_at.max(m.made_at);
        uploaded_at = uploaded_at.max(m.uploaded_at);
        ready.contexts.push(m.ctx);
        ready.stagings.push(m.staging);
        ready.residents.push(m.resident);
        ready.timings.context_s = ready.timings.context_s.max(m.context_s);
        free = free.min(m.free);
    }
    ready.compiled = compiled?;
    if !grid_kernel && block_points_for(free) < block_points && matches!(inputs, Located::Host(_)) {
        block_points = block_points_for(free);
        let start = Instant::now();
        ready.compiled = compile(block_points, false)?;
        compile_s += start.elapsed().as_secs_f64();
    }
    ready.block_points = block_points;
    ready.timings.compile_s = compile_s;
    ready.upload_after_compile = (uploaded_at - ready_at).max(0.0);
    Ok(ready)
}

/// Plans and kernels, per GPU (GPUs may differ): the problem's own kernel
/// on one block, and the two-set kernel between blocks, where units need them.
fn compile_kernels(
    ask: Ask,
    printed: Key,
    devices: &[Device],
    block_points: usize,
    on_grid: bool,
) -> Result<Vec<KernelPair<Compiled>>, GpuError> {
    let Ask { problem, params, inputs, opts, cache, .. } = ask;
    let (n_a, n_b) = inputs.lens();
    let (_, _, groups) = units_of(problem, inputs, block_points, on_grid.then_some(0));
    let needs = |kind| groups.iter().flatten().any(|u| u.kernel == kind);
    let own_points = Points {
        a: block_points.min(n_a) as u64,
        b: (problem.input.sets == Sets::Two).then_some(block_points.min(n_b) as u64),
    };
    let between_points = Points { a: block_points.min(n_a) as u64, b: Some(block_points.min(n_b) as u64) };
    // A whole problem's clone, made only where a unit needs the kernel between two blocks.
    let between_problem = std::cell::OnceCell::new();
    // GPUs share pieces of the same units, ranges of steps: every GPU's
    // kernel walks as the first GPU's (its block size and points per thread).
    let walk_as = |first: Option<&Compiled>| match first {
        Some(c) => Forced {
            block_size: Some(c.plan.launch.block_size),
            points_per_thread: Some(c.plan.launch.points_per_thread),
            ..opts.forced
        },
        None => opts.forced,
    };
    let mut kernels: Vec<KernelPair<Compiled>> = Vec::new();
    for (i, dev) in devices.iter().enumerate() {
        // One plan and one compilation serve every GPU of the same model.
        let same = |d: &Device| Device { origin: dev.origin.clone(), ..d.clone() } == *dev;
        if let Some(k) = devices[..i].iter().position(same) {
            kernels.push(kernels[k].clone());
            continue;
        }
        let (own_first, between_first) =
            kernels.first().map_or((None, None), |(own, between)| (own.as_ref(), between.as_ref()));
        let (own_forced, between_forced) = (walk_as(own_first), walk_as(between_first));
        let make = |p, points, forced| Compiled::new(p, params, dev, points, forced, on_grid, cache);
        let own = if needs(KernelKind::Own) { Some(make((problem, printed), own_points, own_forced)?) } else { None };
        let between = if needs(KernelKind::Between) {
            let between_problem = between_problem.get_or_init(|| problem.as_cross());
            Some(make((between_problem, kernels::printed_cross(printed)), between_points, between_forced)?)
        } else {
            None
        };
        kernels.push((own, between));
    }
    Ok(kernels)
}

/// Points [lo, hi) of each block of a set.
type Blocks = Vec<(usize, usize)>;

use crate::schedule::pieces::GridShares;

/// Each set's blocks, and the units of work over them. With a grid
/// (`grid_pairs`), each set is one block, and the problem's own kernel
/// walks the grid's units.
fn units_of(
    problem: &Problem,
    inputs: Located,
    block_points: usize,
    grid_pairs: Option<u128>,
) -> (Blocks, Blocks, Vec<Vec<Unit>>) {
    let (n_a, n_b) = inputs.lens();
    let a_blocks = blocks(n_a, block_points);
    let b_blocks = if inputs.two_sets() { blocks(n_b, block_points) } else { a_blocks.clone() };
    let groups = match grid_pairs {
        Some(pairs) => vec![vec![Unit { kernel: KernelKind::Own, a_block: 0, b_block: 0, pairs }]],
        None => crate::stage::visit::Visit::of(problem).units(&a_blocks, &b_blocks),
    };
    (a_blocks, b_blocks, groups)
}

/// Each GPU's grid, sorted on the GPU from the inputs it holds, with the
/// units of its share; where the grid does not skip enough (auto), every
/// GPU falls back to every pair with brute force's kernels. Returns each
/// GPU's units (None for brute force) and the index's summary.
fn sort_on_gpus(
    ask: Ask,
    ready: &mut Ready,
    layout: &Layout,
    sharing: Sharing,
    devices: &[Device],
    all: &[Device],
) -> Result<(Option<GridShares>, Summary), GpuError> {
    let Ask { problem, params, inputs, choice, cache, .. } = ask;
    let start = Instant::now();
    let builders: Vec<Arc<grid::Builder>> = ready
        .contexts
        .iter()
        .zip(devices)
        .map(|(ctx, dev)| grid::Builder::new(ctx, dev, cache))
        .collect::<Result<_, _>>()?;
    ready.timings.compile_s += start.elapsed().as_secs_f64();
    let start = Instant::now();
    let plan = ready.compiled[0].0.as_ref().expect("the grid's kernel").plan.clone();
    let run = (plan.launch.block_size * plan.launch.points_per_thread, plan.launch.block_size);
    // GPUs split by rows in proportion to their FP32 issue rates: every
    // rank's GPUs, of which this process's take their own places.
    let weights: Vec<f64> = all.iter().map(Device::fp32_issue_rate).collect();
    let first = ask.part.first_gpu;
    let raws: Vec<Resident> =
        ready.residents.iter_mut().map(|r| r.take().expect("the GPU holds the inputs it sorts")).collect();
    let build = |part: usize, ctx: &Arc<CudaContext>, builder: &grid::Builder, raw: &Resident| {
        ctx.bind_to_thread().doing("binding the context")?;
        let stream = ctx.new_stream().doing("creating a stream")?;
        let share = match sharing {
            Sharing::Rows => grid::Share::Rows { part: first + part, weights: &weights },
            Sharing::Queue => grid::Share::All,
        };
        let (n_a, n_b) = inputs.lens();
        grid::build(
            builder,
            &stream,
            layout,
            &inputs.scalars(),
            (n_a, &raw.a),
            inputs.two_sets().then(|| (n_b, raw.b.as_ref().expect("the other set, uploaded"))),
            plan.shape.visit,
            run,
            share,
        )
    };
    // One GPU's grid is built on this thread (a thread spawned costs about 30 us on the H200's host).
    let built: Vec<Result<grid::Built, GpuError>> = match (&ready.contexts[..], &builders[..], &raws[..]) {
        ([ctx], [builder], [raw]) => vec![build(0, ctx, builder, raw)],
        _ => std::thread::scope(|s| {
            let handles: Vec<_> = ready
                .contexts
                .iter()
                .zip(&builders)
                .zip(&raws)
                .enumerate()
                .map(|(part, ((ctx, builder), raw))| {
                    let build = &build;
                    s.spawn(move || build(part, ctx, builder, raw))
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("a GPU's grid build panicked")).collect()
        }),
    };
    let built: Vec<grid::Built> = built.into_iter().collect::<Result<_, _>>()?;
    let all_pairs = Shape::new(problem, params, plan.shape.points).pairs;
    let summary = index::decide(layout, built[0].pairs, all_pairs, choice);
    ready.timings.grid_s = start.elapsed().as_secs_f64();
    ready.timings.index_s += ready.timings.grid_s;
    if summary.index == IndexKind::None {
        ready.residents = raws.into_iter().map(Some).collect();
        ready.compiled = ready.compiled_brute.take().expect("brute force's kernels, where auto may fall back")?;
        return Ok((None, summary));
    }
    let mut work = Vec::new();
    for (resident, (built, raw)) in ready.residents.iter_mut().zip(built.into_iter().zip(raws)) {
        work.push((built.work, built.share_pairs));
        *resident =
            Some(Resident { a: built.a, b: built.b, upload_s: raw.upload_s, queued: None, grid: Some(built.grid) });
    }
    Ok((Some(work), summary))
}

/// Loads the kernels, cuts the work into pieces, runs every GPU's streams
/// (and the CPU's threads, where they take part) until the queues are
/// empty, and merges what they found.
#[allow(clippy::too_many_arguments, reason = "the run's parts, each once")]
fn compute(
    ask: Ask,
    ready: Ready,
    grid_work: Option<GridShares>,
    index: Summary,
    host_grid: Option<&Grid>,
    split: &mut Split,
    ordinals: &[usize],
    devices: &[Device],
    wall: Instant,
    schedule: &Schedule,
) -> Result<GpuRun, GpuError> {
    let Ask { problem, inputs, opts, progress, .. } = ask;
    let Ready {
        printed,
        contexts,
        stagings,
        mut residents,
        compiled,
        cpu_driver,
        block_points,
        mut timings,
        upload_after_compile,
        ..
    } = ready;
    let streams = opts.streams.max(1);
    // Every GPU holds the inputs whole, or every stream streams its blocks.
    let whole = block_points >= inputs.most() || matches!(inputs, Located::Device(_));
    if !whole || residents.iter().any(Option::is_none) {
        residents.iter_mut().for_each(|r| *r = None);
    }
    let mut notes = Vec::new();
    if opts.block_points.is_none() && !whole {
        notes.push(format!("inputs do not fit the GPU at once: blocks of {block_points} points"));
    }
    let grid_pairs = grid_work.as_ref().map(|w| w.iter().map(|(_, p)| p).sum());
    let (a_blocks, b_blocks, groups) = units_of(problem, inputs, block_points, grid_pairs);
    let (launchers, drains) = load(ask, compiled, &contexts, devices, &mut timings)?;
    let plans: Vec<Plan> = launchers[0].0.iter().chain(launchers[0].1.iter()).map(|l| l.plan.clone()).collect();
    let stage = plans[0].output;
    // Everything before the first upload that a second run in this process
    // would not repeat, and the part of the resident upload it hid.
    timings.prepare_s = wall.elapsed().as_secs_f64() - upload_after_compile - timings.index_s;
    let rings = index.index == IndexKind::Rings;
    // Each GPU's kernels (own, between), as the pieces' cut reads them.
    let kernel_plans: Vec<[Option<&Plan>; 2]> = launchers
        .iter()
        .map(|(own, between)| [own.as_ref().map(|l| &l.plan), between.as_ref().map(|l| &l.plan)])
        .collect();
    // A split by rows gives each GPU a queue of its own; every other queue is
    // shared by every GPU taking part, every rank's.
    let own_rows = grid_work.is_some() && schedule.sharing == Sharing::Rows;
    let cut = pieces::Cut {
        streams,
        gpus: schedule.gpus,
        own_rows,
        piece_pairs: opts.piece_pairs,
        with_cpu: cpu_driver.is_some(),
        rings,
    };
    let queues = pieces::queues(&kernel_plans, groups, grid_work, [&a_blocks, &b_blocks], cut);
    // Where A's rows travel with the pieces: each place's block of A (a
    // group's pieces are of one block), which rank 0's counter sends.
    if let Some(spans) = ask.part.spans {
        assert!(queues.len() == 1, "rows of A travel with pieces of one shared queue");
        let of = |group: &Vec<Piece>| {
            let block = group[0].unit.a_block;
            assert!(group.iter().all(|p| p.unit.a_block == block), "a group's pieces read one block of A");
            a_blocks[block]
        };
        let _ = spans.set(queues[0].iter().map(of).collect());
    }
    timings.pieces = queues.iter().map(|q| q.iter().map(Vec::len).sum::<usize>()).sum::<usize>() as u64;
    // No more streams than groups to share: an idle stream would only allocate
    // and free its buffers. A search of rings keeps every list of a GPU in one
    // stream's buffer.
    let streams_used = match index.index {
        IndexKind::Rings => 1,
        _ => {
            let most = queues.iter().map(VecDeque::len).max().unwrap_or(0);
            let per_gpu = if queues.len() == 1 { most.div_ceil(contexts.len()) } else { most };
            streams.min(per_gpu).max(1)
        }
    };
    let job = Job {
        inputs,
        a_blocks,
        b_blocks,
        start: Instant::now(),
        opts,
        streams,
        progress,
        block_points,
        value: problem.function.returns,
        watch: crate::stop::Watch::start(),
    };
    // Where ranks share one queue, each takes the places a counter hands out.
    let shared = ask.part.counter.filter(|_| !own_rows).map(|c| (c, queues[0].len()));
    assert!(shared.is_none() || queues.len() == 1, "ranks share one queue");
    assert!(
        shared.is_none() || cpu_driver.is_none(),
        "the CPU beside the GPUs takes from the back of this process's queue alone"
    );
    let queues: Vec<Mutex<VecDeque<Vec<Piece>>>> = queues.into_iter().map(Mutex::new).collect();
    // The CPU's threads, where it takes part, walk the host's grid.
    let cpu_side = cpu_driver
        .as_ref()
        .zip(host_grid)
        .map(|(d, g)| -> Result<CpuSide, GpuError> {
            let inputs = inputs.host("the CPU beside the GPUs")?;
            Ok(CpuSide::new(d.walker(inputs, Some(g)), g, split, progress, job.start))
        })
        .transpose()?;
    let gpus: Vec<Gpu> = (0..contexts.len())
        .map(|g| Gpu {
            ctx: &contexts[g],
            launchers: &launchers[g],
            resident: residents[g].as_ref(),
            drain: drains[g].as_ref(),
            staging: stagings[g].as_deref(),
            // One queue for all, or each GPU its own (a split by rows).
            queue: &queues[g.min(queues.len() - 1)],
            shared,
        })
        .collect();
    let (results, cpu_results) = run_threads(&job, &gpus, cpu_side.as_ref(), &queues[0], stage, streams_used);
    timings.upload_s += residents.iter().flatten().map(|r| r.upload_s).sum::<f64>();
    let (parts, cpu_rows, kept) =
        gather(results, cpu_results, ordinals, job.start.elapsed().as_secs_f64(), &mut timings, split)?;
    let combine = Instant::now();
    // A rank's part: rank 0 merges every rank's partials.
    let results = match (ask.part.counter, kept) {
        (_, Some(lists)) => Results::Merged(Outcome::KnnOnGpu(lists)),
        (Some(_), None) => Results::Parts(parts),
        (None, None) => Results::Merged(merge(ask, stage, (parts, cpu_rows))),
    };
    timings.combine_s += combine.elapsed().as_secs_f64();
    timings.wall_s = wall.elapsed().as_secs_f64();
    Ok(GpuRun {
        results,
        printed,
        devices: devices.to_vec(),
        plans,
        timings,
        notes,
        block_points,
        index,
        schedule: None,
    })
}

/// The GPUs' partial results merged, with the CPU's KNN rows where it took part.
fn merge(ask: Ask, stage: OutputStage, parts: (Vec<Partial>, Option<Vec<hybrid::CpuRows>>)) -> Outcome {
    let Ask { problem, inputs, .. } = ask;
    match (stage.collect(), parts) {
        // A search of rings wrote each list to its query's input row itself;
        // the CPU's lists go over the rows it took.
        (Collect::Knn { k }, (parts, Some(cpu_rows))) => {
            let gpu = parts.into_iter().find_map(|p| match p {
                Partial::Knn(mut rows) => rows.pop().map(|(_, values, ids)| (values, ids)),
                _ => None,
            });
            hybrid::lists_with_cpu_rows(k as usize, problem.function.returns, inputs.lens().0, gpu, cpu_rows)
        }
        (collect, (parts, _)) => output::merge(collect, problem.function.returns, inputs.lens().0, parts),
    }
}

/// Each GPU's drain of the direct output buffer, where the output is pairs.
type Drains = Vec<Option<CudaFunction>>;

/// Each GPU's compiled kernels loaded into its context, and the direct
/// output buffer's drain where the output is pairs.
fn load(
    ask: Ask,
    compiled: Vec<KernelPair<Compiled>>,
    contexts: &[Arc<CudaContext>],
    devices: &[Device],
    timings: &mut GpuTimings,
) -> Result<(Vec<KernelPair<Launcher>>, Drains), GpuError> {
    let mut launchers: Vec<KernelPair<Launcher>> = Vec::new();
    for ((own, between), (ctx, dev)) in compiled.into_iter().zip(contexts.iter().zip(devices)) {
        let own = own.map(|c| c.load(dev, ctx)).transpose()?;
        let between = between.map(|c| c.load(dev, ctx)).transpose()?;
        // A box read at run time is set in each module before any stream launches it.
        if let Some(b) = ask.params.run_time_box() {
            let name = &ask.problem.params.iter().find(|p| p.kind == ParamKind::Box).expect("a box parameter").name;
            let stream = ctx.default_stream();
            for launcher in own.iter().chain(&between) {
                launcher.use_box(&stream, name, b.scalar, &b.run_time_numbers())?;
            }
        }
        launchers.push((own, between));
    }
    let stage = launchers[0].0.as_ref().or(launchers[0].1.as_ref()).expect("a kernel").plan.output;
    let drains = match stage {
        OutputStage::Dob { .. } => {
            let start = Instant::now();
            let drains = contexts
                .iter()
                .zip(devices)
                .map(|(ctx, dev)| dob_drain(ctx, dev, ask.cache).map(Some))
                .collect::<Result<_, _>>()?;
            timings.compile_s += start.elapsed().as_secs_f64();
            drains
        }
        _ => vec![None; contexts.len()],
    };
    Ok((launchers, drains))
}

/// One host thread per GPU (which runs one per stream), and the CPU's
/// threads where it takes part; the CPU's first claim is made before any
/// stream starts, so that a forced split shows.
fn run_threads(
    job: &Job,
    gpus: &[Gpu],
    cpu_side: Option<&CpuSide>,
    shared_queue: &Mutex<VecDeque<Vec<Piece>>>,
    stage: OutputStage,
    streams_used: usize,
) -> (Vec<Result<GpuResult, GpuError>>, Vec<hybrid::CpuResult>) {
    let first_claim = cpu_side.and_then(|c| c.claim(shared_queue));
    // One GPU alone runs on this thread (a thread spawned costs about 30 us on the H200's host).
    if let ([gpu], None) = (gpus, cpu_side) {
        return (vec![gpu_worker(job, *gpu, stage, streams_used)], Vec::new());
    }
    std::thread::scope(|s| {
        let cpu_handles: Vec<_> = cpu_side
            .iter()
            .flat_map(|&side| {
                (0..side.threads).map(move |t| {
                    s.spawn(move || hybrid::cpu_worker(side, shared_queue, first_claim.filter(|_| t == 0)))
                })
            })
            .collect();
        let handles: Vec<_> =
            gpus.iter().map(|&gpu| s.spawn(move || gpu_worker(job, gpu, stage, streams_used))).collect();
        let results = handles.into_iter().map(|h| h.join().expect("GPU worker panicked")).collect();
        let cpu_results = cpu_handles.into_iter().map(|h| h.join().expect("CPU worker panicked")).collect();
        (results, cpu_results)
    })
}

/// The partial results, the CPU's KNN rows where it took part, and KNN lists left on a GPU.
type Gathered = (Vec<Partial>, Option<Vec<hybrid::CpuRows>>, Option<crate::outcome::OnGpu>);

/// What the GPUs and the CPU's threads found, with each one's timings and
/// share added to the run's: the partial results, the CPU's KNN rows
/// where it took part (None where it did not), and KNN lists left on a GPU.
fn gather(
    results: Vec<Result<GpuResult, GpuError>>,
    cpu_results: Vec<hybrid::CpuResult>,
    ordinals: &[usize],
    compute_end: f64,
    timings: &mut GpuTimings,
    split: &mut Split,
) -> Result<Gathered, GpuError> {
    let mut parts = Vec::new();
    let mut kept = None;
    for (r, &ordinal) in results.into_iter().zip(ordinals) {
        let done = r?;
        for t in &done.streams {
            timings.add(t);
        }
        parts.extend(done.parts);
        kept = kept.or(done.kept);
        let busy_s = busy(done.intervals);
        let kernel_s = busy(done.kernels);
        timings.kernel_s += kernel_s;
        timings.per_gpu.push(GpuWork {
            ordinal,
            pieces: done.pieces,
            pairs: done.pairs,
            share: 0.0,
            busy_s,
            kernel_s,
            idle_s: (compute_end - busy_s).max(0.0),
        });
    }
    let cpu_took_part = !cpu_results.is_empty();
    let mut cpu_rows = Vec::new();
    let mut cpu_intervals = Vec::new();
    for r in cpu_results {
        parts.extend(r.parts);
        cpu_rows.extend(r.rows);
        split.cpu_units += r.units;
        split.cpu_pairs += r.pairs;
        cpu_intervals.extend(r.intervals);
    }
    split.cpu_busy_s = busy(cpu_intervals);
    let all_pairs: u128 = timings.per_gpu.iter().map(|g| g.pairs).sum::<u128>() + split.cpu_pairs;
    for g in &mut timings.per_gpu {
        g.share = g.pairs as f64 / all_pairs.max(1) as f64;
    }
    split.cpu_share = split.cpu_pairs as f64 / all_pairs.max(1) as f64;
    Ok((parts, cpu_took_part.then_some(cpu_rows), kept))
}

/// A GPU's context, made on its own thread, and what that thread found and uploaded.
struct Made {
    ctx: Arc<CudaContext>,
    /// Its pinned buffers for downloads, where the problem collects pairs.
    staging: Option<Arc<Mutex<Staging>>>,
    context_s: f64,
    /// Free memory before any upload.
    free: usize,
    resident: Option<Resident>,
    /// Seconds from the start of the run to the context made, and to the upload done.
    made_at: f64,
    uploaded_at: f64,
}

impl Made {
    /// Waits for the resident upload queued by `make` (`Resident::wait`):
    /// `uploaded_at` is when it finished, from the run's start `wall`.
    fn finish(mut self, wall: Instant) -> Result<Made, GpuError> {
        if let Some(r) = self.resident.as_mut() {
            r.wait()?;
        }
        self.uploaded_at = wall.elapsed().as_secs_f64();
        Ok(self)
    }
}

/// A GPU's copy of inputs that fit it whole (each set one block): uploaded
/// once while the kernels compile, and read by every stream of the GPU.
struct Resident {
    a: DeviceBlock,
    /// The second set, for two.
    b: Option<DeviceBlock>,
    upload_s: f64,
    /// The stream its upload was queued on, until [`Resident::wait`] waits for it.
    queued: Option<Arc<CudaStream>>,
    /// The grid, where the blocks walk one (`a` and `b` are then in cell order).
    grid: Option<DeviceGrid>,
}

/// A grid on one GPU: its units and ranges (`index::Unit`, as u32 words), the
/// permutations that name sorted points by their input index, and a sample
/// of units that sizes the direct output buffer.
struct DeviceGrid {
    /// Own points [lo, hi) and ranges [first, end), 4 words per unit.
    units: CudaSlice<u32>,
    /// Sorted points [lo, hi) of the other set, 2 words per range.
    ranges: CudaSlice<u32>,
    perm_a: CudaSlice<u32>,
    /// The other set's, for two sets.
    perm_b: Option<CudaSlice<u32>>,
    /// Units spread over the grid's order (most pairs first), 4 words each.
    sample: CudaSlice<u32>,
    /// The sample's units and the pairs they visit.
    sample_units: u32,
    sample_pairs: u64,
    /// What a search of rings reads besides (KNN).
    rings: Option<DeviceRings>,
}

/// A KNN grid's cells on one GPU: the other set's cell starts, the cell of
/// each of A's sorted points, and the grid's shape.
struct DeviceRings {
    cell_start: CudaSlice<u32>,
    cell_a: CudaSlice<u32>,
    shape: RingShape,
}

impl DeviceGrid {
    /// The grid's buffers for a launch from unit `first` on (`units` may be its sample).
    fn args<'a>(&'a self, units: &'a CudaSlice<u32>, first: u32) -> GridArgs<'a> {
        GridArgs {
            units,
            ranges: &self.ranges,
            first,
            rings: self.rings.as_ref().map(|r| RingArgs {
                cell_start: &r.cell_start,
                cell_a: &r.cell_a,
                perm_a: &self.perm_a,
                perm_b: self.perm_b.as_ref().unwrap_or(&self.perm_a),
                shape: &r.shape,
            }),
        }
    }

    /// The grid of `units` (4 words each, in the grid's order, most pairs
    /// first; unit k visits `pairs(k)` pairs) on `stream`, with its sample.
    fn upload(
        stream: &Arc<CudaStream>,
        units: &[u32],
        pairs: impl Fn(usize) -> u64,
        ranges: CudaSlice<u32>,
        (perm_a, perm_b): (CudaSlice<u32>, Option<CudaSlice<u32>>),
    ) -> Result<DeviceGrid, DriverError> {
        let sampled = sample_units(units.len() / 4, &pairs);
        let sample: Vec<u32> = sampled.iter().flat_map(|&k| units[4 * k..4 * k + 4].iter().copied()).collect();
        Ok(DeviceGrid {
            units: upload_words(stream, units)?,
            ranges,
            perm_a,
            perm_b,
            sample: upload_words(stream, &sample)?,
            sample_units: sampled.len() as u32,
            sample_pairs: sampled.iter().map(|&k| pairs(k)).sum(),
            rings: None,
        })
    }
}

/// `words` on the device; an empty buffer cannot be allocated, so none
/// becomes one word.
fn upload_words(stream: &Arc<CudaStream>, words: &[u32]) -> Result<CudaSlice<u32>, DriverError> {
    stream.clone_htod(if words.is_empty() { &[0u32][..] } else { words })
}

/// Most units of the grid whose pairs sample the selectivity of a pairs problem.
const SAMPLE_UNITS: usize = 256;
/// Pairs the sample visits, about: dense units visit millions of pairs
/// each, and 256 of them once found 5.6e8 pairs in 20 launches, 0.8 s of
/// a 2 s run.
const SAMPLE_PAIRS: u64 = 1 << 26;

/// The units (numbered in the grid's order, most pairs first) that sample
/// its selectivity: evenly spread over all of them (the middle of each of
/// m equal runs), as many as visit about [`SAMPLE_PAIRS`] pairs on average,
/// from 1 to [`SAMPLE_UNITS`]. The densest units are no sample: their wide
/// neighbourhoods pass the smallest share (once the pool came out too small).
fn sample_units(total: usize, pairs: impl Fn(usize) -> u64) -> Vec<usize> {
    if total == 0 {
        return Vec::new();
    }
    let all: u128 = (0..total).map(|k| u128::from(pairs(k))).sum();
    let mean = (all / total as u128).max(1);
    let m = ((u128::from(SAMPLE_PAIRS) / mean) as usize).clamp(1, SAMPLE_UNITS.min(total));
    (0..m).map(|i| (2 * i + 1) * total / (2 * m)).collect()
}

/// Set A and the other set, if any, each loaded once into blocks with room
/// for `pad` points past its end, on a new stream of `ctx` (returned, still
/// copying). A set loaded once is copied from its columns, not pinned.
fn upload_sets(
    ctx: &Arc<CudaContext>,
    (a, b): (&PointSet, Option<&PointSet>),
    pad: usize,
    upload: &str,
) -> Result<(DeviceBlock, Option<DeviceBlock>, Arc<CudaStream>), GpuError> {
    ctx.bind_to_thread().doing("binding the context")?;
    let stream = ctx.new_stream().doing("creating a stream")?;
    let block = |set: &PointSet, tag| -> Result<DeviceBlock, GpuError> {
        let mut dev = DeviceBlock::new(ctx, &stream, set, set.len() + pad, false).doing(upload)?;
        dev.load(&stream, set, tag, (0, set.len())).doing(upload)?;
        Ok(dev)
    };
    let a = block(a, (0, 0))?;
    let b = b.map(|set| block(set, (1, 0))).transpose()?;
    Ok((a, b, stream))
}

/// A resident dropped before its queued upload was waited for (a run that
/// failed meanwhile) waits for it first: the copy reads the run's columns,
/// which the caller may free or hand back as soon as the run returns.
impl Drop for Resident {
    fn drop(&mut self) {
        if let Some(stream) = self.queued.take() {
            let _ = stream.synchronize();
        }
    }
}

impl Resident {
    /// The inputs on GPU `ctx`: uploaded from the host, or the columns taken there.
    fn of(ctx: &Arc<CudaContext>, inputs: Located) -> Result<Resident, GpuError> {
        match inputs {
            Located::Host(inputs) => Resident::upload(ctx, inputs),
            // Streamed, never resident: A's rows come a block at a time.
            Located::RowsOfA { .. } => Err(GpuError::NeedsHost("set A whole on the GPU".into())),
            Located::Device(taken) => {
                let (a, b) = taken.blocks().expect("a run takes the columns taken for it once");
                Ok(Resident { a, b, upload_s: 0.0, queued: None, grid: None })
            }
        }
    }

    /// Queued, not waited for ([`Resident::wait`]).
    fn upload(ctx: &Arc<CudaContext>, inputs: &Inputs) -> Result<Resident, GpuError> {
        let start = Instant::now();
        let (a, b, stream) = upload_sets(ctx, (&inputs.a, inputs.b.as_ref()), 0, "uploading points")?;
        Ok(Resident { a, b, upload_s: start.elapsed().as_secs_f64(), queued: Some(stream), grid: None })
    }

    /// Waits for its queued upload, which every stream after reads; the
    /// wait counts in `upload_s`.
    fn wait(&mut self) -> Result<(), GpuError> {
        if let Some(stream) = self.queued.take() {
            let start = Instant::now();
            stream.synchronize().doing("uploading points")?;
            self.upload_s += start.elapsed().as_secs_f64();
        }
        Ok(())
    }

    /// Uploads both sets in `grid`'s cell order, padded by a tile past the
    /// end (a unit's tiles start anywhere), with the grid itself (and its
    /// cells, for a search of `rings`).
    fn upload_grid(ctx: &Arc<CudaContext>, grid: &Grid, rings: bool) -> Result<Resident, GpuError> {
        let start = Instant::now();
        let upload = "uploading the grid";
        let (a, b, stream) = upload_sets(ctx, (&grid.a.set, grid.b.as_ref().map(|s| &s.set)), PAD_POINTS, upload)?;
        let units: Vec<u32> = grid.units.iter().flat_map(|u| [u.own[0], u.own[1], u.ranges[0], u.ranges[1]]).collect();
        let ranges = upload_words(&stream, grid.ranges.as_flattened()).doing(upload)?;
        let perms = (
            upload_words(&stream, &grid.a.perm).doing(upload)?,
            grid.b.as_ref().map(|s| upload_words(&stream, &s.perm)).transpose().doing(upload)?,
        );
        let mut dev_grid = DeviceGrid::upload(&stream, &units, |k| grid.units[k].pairs, ranges, perms).doing(upload)?;
        if rings {
            dev_grid.rings = Some(DeviceRings {
                cell_start: upload_words(&stream, &grid.other().cell_start).doing(upload)?,
                cell_a: upload_words(&stream, &grid.a.cell).doing(upload)?,
                shape: index::ring_shape(&grid.axes),
            });
        }
        stream.synchronize().doing(upload)?;
        Ok(Resident { a, b, upload_s: start.elapsed().as_secs_f64(), queued: None, grid: Some(dev_grid) })
    }
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
