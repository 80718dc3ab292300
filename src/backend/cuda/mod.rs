//! The CUDA backend through cudarc (dynamic loading: nothing CUDA is needed to
//! build; the driver and NVRTC are found at run time).
//!
//! The input is cut into blocks of points. Each unit of work is a pair of
//! blocks (the visit family says which): the problem's own kernel on the
//! diagonal, and the same problem between two sets (A = one block, B =
//! another) off it. Units are cut into pieces (`backend::pieces`), ranges of
//! steps over every block of a launch, which every stream of every GPU takes
//! from one queue (`workers`). [`run`] prepares the GPUs in parallel:
//! contexts on their own threads, which also upload inputs that fit a GPU
//! whole, while NVRTC compiles one kernel per GPU model (`kernels`). The
//! output family merges what the GPUs found.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, DriverError, LaunchConfig, PushKernelArg, sys};
use indicatif::ProgressBar;
use serde::Serialize;

use super::KeyCheck;
use super::cpu::{CpuDriver, CpuError};
use super::hybrid::{self, CpuSide, Hybrid, Rates, Split};
use super::nvrtc::{self, NvrtcError};
use super::pieces::{self, GridWork, Piece, Work};
use crate::cache::Cache;
use crate::codegen;
use crate::data::{Inputs, PointSet};
use crate::device::{Device, ProfileError, TunedProfile};
use crate::index::{self, Grid, IndexChoice, IndexError, IndexKind, Layout, Runs, Summary};
use crate::outcome::Outcome;
use crate::plan::{Forced, Plan, PlanError, Points, Shape};
use crate::spec::{Params, Problem, Sets};
use crate::stage::contribution::Test;
use crate::stage::input::{DeviceBlock, PAD_POINTS};
use crate::stage::output::download::{self, Staging};
use crate::stage::output::{self, Collect, OutputStage, Partial};
use crate::stage::visit::{KernelKind, Unit, Walk};
use crate::stage::{GridArgs, RingArgs, RingShape};
use kernels::{Compiled, KernelPair, Launcher, dob_drain};
use workers::{Gpu, GpuResult, Job, busy, gpu_worker};

mod grid;
mod kernels;
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
    #[error("{what}: {source}")]
    Driver { what: String, source: DriverError },
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Nvrtc(#[from] NvrtcError),
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error(transparent)]
    Profile(#[from] ProfileError),
    #[error("the CPU's part of the run: {0}")]
    Cpu(Box<CpuError>),
    #[error(
        "the grid needs both sets whole on GPU {ordinal}, and its free memory holds blocks of {fits} points of the {points} (pass --index none to stream blocks)"
    )]
    GridDoesNotFit { ordinal: usize, fits: usize, points: usize },
}

/// Names what a driver call was doing when it failed.
trait Doing<T> {
    fn doing(self, what: &str) -> Result<T, GpuError>;
}

impl<T> Doing<T> for Result<T, DriverError> {
    fn doing(self, what: &str) -> Result<T, GpuError> {
        self.map_err(|source| GpuError::Driver { what: what.to_owned(), source })
    }
}

impl From<CpuError> for GpuError {
    fn from(e: CpuError) -> Self {
        GpuError::Cpu(Box::new(e))
    }
}

impl From<DriverError> for GpuError {
    fn from(source: DriverError) -> Self {
        GpuError::Driver { what: "the CUDA driver".into(), source }
    }
}

/// Whether libcuda can be loaded.
pub fn driver_available() -> Result<(), GpuError> {
    // SAFETY: only probes whether the shared library can be opened.
    if unsafe { sys::is_culib_present() } { Ok(()) } else { Err(GpuError::NoDriver) }
}

/// Whether this machine can run kernels: the driver loads and sees a GPU.
pub fn usable() -> Result<(), GpuError> {
    driver_available()?;
    match CudaContext::device_count().doing("counting GPUs")? {
        n if n > 0 => Ok(()),
        _ => Err(GpuError::NoGpu),
    }
}

/// The context of GPU `ordinal`, made once per process: modules loaded into it stay loaded.
fn context(ordinal: usize) -> Result<Arc<CudaContext>, GpuError> {
    static CONTEXTS: Mutex<Option<HashMap<usize, Arc<CudaContext>>>> = Mutex::new(None);
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
    // (scripts/probe-host-copies.py). Once per process, like the context.
    // (4493914 reverted this while selfjoin/grid-four-streams failed; that
    // failure was the staged copy reading past its chunk, fixed in 32f49c8.)
    let stream = ctx.default_stream();
    drop(stream.alloc_zeros::<u8>(1).doing("setting up the memory pool")?);
    stream.synchronize().doing("setting up the memory pool")?;
    map.insert(ordinal, ctx.clone());
    Ok(ctx)
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
    let path = TunedProfile::path_in(&TunedProfile::folder(), &dev.name);
    Ok(match TunedProfile::read(&path)? {
        Some(tuned) => tuned.apply(dev, &path)?,
        None => dev,
    })
}

/// The limits of GPU `ordinal`, read from the driver without a context (so
/// that kernels can be planned and compiled while the context is made).
fn limits_of(ordinal: usize) -> Result<Device, GpuError> {
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

#[derive(Debug, Clone, Default)]
pub struct GpuOptions {
    /// GPU ordinals; all visible GPUs when None.
    pub gpus: Option<Vec<usize>>,
    /// Points per block; the whole set (as memory allows) when None.
    pub block_points: Option<usize>,
    /// Streams (host threads) per GPU.
    pub streams: usize,
    pub forced: Forced,
    /// Pairs the direct output buffer holds; sized from a sample when None.
    pub pool_pairs: Option<u64>,
    /// Pairs in the smallest piece of work; `pieces::MIN_PIECE_PAIRS` when None.
    pub piece_pairs: Option<u64>,
    /// Whether the CPU's cores take part of a grid run (`backend::hybrid`).
    pub hybrid: Hybrid,
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
    /// Pieces of work the queue was cut into (`backend::pieces`).
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

pub struct GpuRun {
    pub outcome: Outcome,
    pub devices: Vec<Device>,
    /// The diagonal kernel's plan, and the plan of the kernel between two blocks when one ran.
    pub plans: Vec<Plan>,
    pub timings: GpuTimings,
    pub notes: Vec<String>,
    pub block_points: usize,
    /// Whether the blocks took a grid's units, and why.
    pub index: Summary,
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
    forced.par_iter().for_each(|&f| {
        let _ = Compiled::new(problem, params, dev, points, f, false, cache);
    });
}

/// Block boundaries of a set.
fn blocks(n: usize, per: usize) -> Vec<(usize, usize)> {
    (0..n.div_ceil(per)).map(|k| (k * per, ((k + 1) * per).min(n))).collect()
}

/// Runs `problem` on `inputs` on the GPUs of `opts`; `index` says whether a
/// cut-off problem's blocks may take the units of a grid.
pub fn run(
    problem: &Problem,
    params: &Params,
    inputs: &Inputs,
    index: IndexChoice,
    opts: &GpuOptions,
    cache: &Cache,
    progress: &ProgressBar,
) -> Result<GpuRun, GpuError> {
    let wall = Instant::now();
    // The driver's initialisation (the first call into it) counts with the contexts.
    let driver_start = Instant::now();
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
    let devices: Vec<Device> = ordinals.iter().map(|&g| device_of(g)).collect::<Result<_, _>>()?;
    let driver_s = driver_start.elapsed().as_secs_f64();

    // Blocks: as large as a quarter of the smallest GPU's memory allows, per
    // set and stream: its total memory while the contexts are made, then its
    // free memory (a GPU others use gets smaller blocks, and a recompile).
    let n_a = inputs.a.len();
    let n_b = inputs.other().len();
    let streams = opts.streams.max(1);
    let per_point = inputs.a.columns.iter().map(|c| c.scalar().bytes() as usize).sum::<usize>().max(1);
    let block_points_for = |memory: usize| {
        let fit = (memory / 4 / (2 * streams) / per_point).max(PAD_POINTS);
        opts.block_points.unwrap_or(n_a.max(n_b)).min(fit).max(1)
    };
    let mut total = usize::MAX;
    for &g in &ordinals {
        let cu = cudarc::driver::result::device::get(g as i32).doing("reading GPU memory")?;
        // SAFETY: a device the driver just returned.
        total = total.min(unsafe { cudarc::driver::result::device::total_mem(cu) }.doing("reading GPU memory")?);
    }
    let whole = |points: usize| points >= n_a.max(n_b);
    // Pairs, and KNN lists too large to copy into pageable memory fast, come
    // back through pinned buffers.
    let collect = crate::stage::contribution::collect(problem, params);
    let downloads_staged = collect.bytes(n_a as u64, problem.function.returns).is_none_or(download::is_staged);

    // The grid, where the spec's cutoff and the data make it worth it. It is
    // made for these inputs, so it counts as compute, not preparation.
    let choice = index;
    let index_start = Instant::now();
    let gpu_threads = ordinals.len() * streams;
    let rates = Rates::of(&devices, hybrid::cpu_threads(gpu_threads));
    let (indexing, one_gpu, mut split) =
        choose_index(problem, params, inputs, choice, opts, &devices, block_points_for(total), &rates)?;
    let (ordinals, devices) = match one_gpu {
        Some(_) => (ordinals[..1].to_vec(), devices[..1].to_vec()),
        None => (ordinals, devices),
    };
    let mut index_s = index_start.elapsed().as_secs_f64();
    let mut grid_s = 0.0;
    // The grid kernel where a grid may be walked, and brute force's where every
    // pair may be (auto decides after the GPU's grid is made).
    let grid_kernel = !matches!(indexing, Indexing::Brute(_));
    let brute_kernels = match &indexing {
        Indexing::Brute(_) => true,
        Indexing::Host(..) => false,
        Indexing::Device(..) => choice != IndexChoice::Grid,
    };

    // Plans and kernels, per GPU (GPUs may differ): the problem's own kernel on
    // one block, and the two-set kernel between blocks, where units need them.
    let between_problem = problem.as_cross();
    // Each set's blocks, and the units of work over them. With a grid
    // (`grid_pairs`), each set is one block, and the problem's own kernel
    // walks the grid's units.
    let layout = |block_points: usize, grid_pairs: Option<u128>| {
        let a_blocks = blocks(n_a, block_points);
        let b_blocks = if inputs.b.is_some() { blocks(n_b, block_points) } else { a_blocks.clone() };
        let groups = match grid_pairs {
            Some(pairs) => vec![vec![Unit { kernel: KernelKind::Own, a_block: 0, b_block: 0, pairs }]],
            None => crate::stage::visit::Visit::of(problem).units(&a_blocks, &b_blocks),
        };
        (a_blocks, b_blocks, groups)
    };
    let compile = |block_points: usize, on_grid: bool| -> Result<Vec<KernelPair<Compiled>>, GpuError> {
        let (_, _, groups) = layout(block_points, on_grid.then_some(0));
        let needs = |kind| groups.iter().flatten().any(|u| u.kernel == kind);
        let own_points = Points {
            a: block_points.min(n_a) as u64,
            b: (problem.input.sets == Sets::Two).then_some(block_points.min(n_b) as u64),
        };
        let between_points = Points { a: block_points.min(n_a) as u64, b: Some(block_points.min(n_b) as u64) };
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
            let make = |p: &Problem, points, forced| Compiled::new(p, params, dev, points, forced, on_grid, cache);
            let own = if needs(KernelKind::Own) { Some(make(problem, own_points, own_forced)?) } else { None };
            let between = if needs(KernelKind::Between) {
                Some(make(&between_problem, between_points, between_forced)?)
            } else {
                None
            };
            kernels.push((own, between));
        }
        Ok(kernels)
    };
    // The contexts are made on their own threads while NVRTC compiles here;
    // where the inputs fit a GPU whole, its thread uploads them meanwhile.
    let mut block_points = if grid_kernel { n_a.max(n_b).max(1) } else { block_points_for(total) };
    let mut compiled_at = 0.0;
    let (made, compiled, compiled_brute, cpu_driver, mut compile_s) = std::thread::scope(|s| {
        // The CPU's driver over the host's grid, where the CPU takes part,
        // built by the host compiler while NVRTC compiles.
        let cpu_driver = match (&indexing, split.cpu) {
            (Indexing::Host(_, summary), true) => {
                let shape =
                    Shape::new(problem, params, Points { a: n_a as u64, b: inputs.b.as_ref().map(|_| n_b as u64) });
                Some(s.spawn(move || CpuDriver::compile(problem, params, &shape, summary.index, false, cache)))
            }
            _ => None,
        };
        let making: Vec<_> = ordinals
            .iter()
            .map(|&g| {
                let (block_points_for, indexing) = (&block_points_for, &indexing);
                s.spawn(move || -> Result<Made, GpuError> {
                    let start = Instant::now();
                    let ctx = context(g)?;
                    let staging = if downloads_staged { Some(staging(&ctx)?) } else { None };
                    let context_s = start.elapsed().as_secs_f64();
                    let free = ctx.mem_get_info().doing("reading free GPU memory")?.0;
                    let made_at = wall.elapsed().as_secs_f64();
                    let fits = block_points_for(free);
                    let resident = match indexing {
                        // The grid's kernel reads both sets whole, in cell order.
                        Indexing::Host(..) | Indexing::Device(..) if !whole(fits) => {
                            return Err(GpuError::GridDoesNotFit { ordinal: g, fits, points: n_a.max(n_b) });
                        }
                        Indexing::Host(grid, summary) => {
                            Some(Resident::upload_grid(&ctx, grid, summary.index == IndexKind::Rings)?)
                        }
                        // The GPU sorts the inputs it holds.
                        Indexing::Device(..) => Some(Resident::upload(&ctx, inputs)?),
                        // Where the upload fails (the GPU filled up meanwhile), the streams load blocks of their own.
                        Indexing::Brute(_) if whole(fits) => Resident::upload(&ctx, inputs).ok(),
                        Indexing::Brute(_) => None,
                    };
                    Ok(Made {
                        ctx,
                        staging,
                        context_s,
                        free,
                        resident,
                        made_at,
                        uploaded_at: wall.elapsed().as_secs_f64(),
                    })
                })
            })
            .collect();
        let start = Instant::now();
        let compiled = compile(block_points, grid_kernel);
        let compiled_brute = (grid_kernel && brute_kernels).then(|| compile(block_points, false));
        let compile_s = start.elapsed().as_secs_f64();
        compiled_at = wall.elapsed().as_secs_f64();
        let made: Vec<Result<Made, GpuError>> =
            making.into_iter().map(|h| h.join().expect("context thread panicked")).collect();
        let cpu_driver = cpu_driver.map(|h| h.join().expect("CPU driver's build panicked"));
        (made, compiled, compiled_brute, cpu_driver, compile_s)
    });
    let cpu_driver = match cpu_driver {
        Some(Ok(driver)) => {
            compile_s = compile_s.max(driver.compile_seconds);
            Some(driver)
        }
        Some(Err(e)) if opts.hybrid == Hybrid::On => return Err(e.into()),
        Some(Err(e)) => {
            split = Split::gpus_alone(format!("the GPUs alone: the CPU's driver did not build ({e})"));
            None
        }
        None => None,
    };
    let mut contexts = Vec::new();
    let mut stagings = Vec::new();
    let mut residents = Vec::new();
    let mut context_s: f64 = 0.0;
    let mut free = usize::MAX;
    // Uploads hide behind the compilation and the slowest context; what ran
    // after both is compute time.
    let mut ready_at = compiled_at;
    let mut uploaded_at: f64 = 0.0;
    for m in made {
        let m = m?;
        ready_at = ready_at.max(m.made_at);
        uploaded_at = uploaded_at.max(m.uploaded_at);
        contexts.push(m.ctx);
        stagings.push(m.staging);
        residents.push(m.resident);
        context_s = context_s.max(m.context_s);
        free = free.min(m.free);
    }
    let mut compiled = compiled?;
    if !grid_kernel && block_points_for(free) < block_points {
        block_points = block_points_for(free);
        let start = Instant::now();
        compiled = compile(block_points, false)?;
        compile_s += start.elapsed().as_secs_f64();
    }
    // The GPU's own grid: sorted where the inputs lie (one GPU), then taken
    // where it skips enough, else every pair with brute force's kernels.
    let (grid_work, index) = match &indexing {
        Indexing::Brute(summary) => (None, summary.clone()),
        Indexing::Host(grid, summary) => {
            let tile = compiled[0].0.as_ref().expect("the grid's kernel").plan.launch.block_size as u64;
            let work = grid
                .units
                .iter()
                .map(|u| GridWork::new(u.pairs, grid.partners(u), u.ranges[1] - u.ranges[0], tile))
                .collect();
            (Some((work, grid.pairs)), summary.clone())
        }
        Indexing::Device(layout) => {
            let start = Instant::now();
            let builder = grid::Builder::new(&contexts[0], &devices[0], cache)?;
            compile_s += start.elapsed().as_secs_f64();
            let start = Instant::now();
            let plan = &compiled[0].0.as_ref().expect("the grid's kernel").plan;
            let raw = residents[0].take().expect("the GPU holds the inputs it sorts");
            let stream = contexts[0].new_stream().doing("creating a stream")?;
            let built = grid::build(
                &builder,
                &stream,
                layout,
                (&inputs.a, &raw.a),
                inputs.b.as_ref().map(|b| (b, raw.b.as_ref().expect("the other set, uploaded"))),
                plan.shape.visit,
                (plan.launch.block_size * plan.launch.points_per_thread, plan.launch.block_size),
            )?;
            let all_pairs = Shape::new(problem, params, plan.shape.points).pairs;
            let summary = index::decide(layout, built.pairs, all_pairs, choice);
            grid_s = start.elapsed().as_secs_f64();
            index_s += grid_s;
            if summary.index != IndexKind::None {
                residents[0] =
                    Some(Resident { a: built.a, b: built.b, upload_s: raw.upload_s, grid: Some(built.grid) });
                (Some((built.work, built.pairs)), summary)
            } else {
                residents[0] = Some(raw);
                compiled = compiled_brute.expect("brute force's kernels, where auto may fall back")?;
                (None, summary)
            }
        }
    };
    if grid_work.is_some() && !progress.is_hidden() {
        progress.set_length(index.pairs.min(u64::MAX as u128) as u64);
    }
    let upload_after_compile = (uploaded_at - ready_at).max(0.0);
    // Every GPU holds the inputs whole, or every stream streams its blocks.
    if !whole(block_points) || residents.iter().any(Option::is_none) {
        residents.iter_mut().for_each(|r| *r = None);
    }
    let mut notes: Vec<String> = one_gpu.into_iter().collect();
    if opts.block_points.is_none() && block_points < n_a.max(n_b) {
        notes.push(format!("inputs do not fit the GPU at once: blocks of {block_points} points"));
    }
    let (a_blocks, b_blocks, mut groups) = layout(block_points, grid_work.as_ref().map(|(_, pairs)| *pairs));
    let mut launchers: Vec<KernelPair<Launcher>> = Vec::new();
    for ((own, between), (ctx, dev)) in compiled.into_iter().zip(contexts.iter().zip(&devices)) {
        let own = own.map(|c| c.load(dev, ctx)).transpose()?;
        let between = between.map(|c| c.load(dev, ctx)).transpose()?;
        launchers.push((own, between));
    }
    let plans: Vec<Plan> = launchers[0].0.iter().chain(launchers[0].1.iter()).map(|l| l.plan.clone()).collect();
    let stage = plans[0].output;
    // The direct output buffer's drain, on every GPU.
    let drains: Vec<Option<CudaFunction>> = match stage {
        OutputStage::Dob { .. } => {
            let start = Instant::now();
            let drains = contexts
                .iter()
                .zip(&devices)
                .map(|(ctx, dev)| dob_drain(ctx, dev, cache).map(Some))
                .collect::<Result<_, _>>()?;
            compile_s += start.elapsed().as_secs_f64();
            drains
        }
        _ => vec![None; contexts.len()],
    };
    // Everything before the first upload that a second run in this process
    // would not repeat, and the part of the resident upload it hid.
    let prepare_s = wall.elapsed().as_secs_f64() - upload_after_compile - index_s;

    // Units largest first, so that no stream is left with a big one at the end.
    groups.sort_by_key(|g| std::cmp::Reverse(g.iter().map(|u| u.pairs).sum::<u128>()));
    let workers = contexts.len() * streams;
    let queue: Vec<Vec<Piece>> = if let Some((work, _)) = &grid_work {
        // Consecutive units of the grid (most pairs first) per piece.
        let plan = &launchers[0].0.as_ref().expect("the grid's kernel").plan;
        let tile = plan.launch.block_size as u64;
        let max_partners = launchers.iter().filter_map(|(own, _)| own.as_ref()?.plan.launch.partners_per_launch).min();
        let unit = groups.into_iter().flatten().next().expect("the grid's unit");
        let rings = index.index == IndexKind::Rings;
        if rings && cpu_driver.is_none() {
            // One launch searches for every query, and its lists come back once.
            vec![pieces::cut_grid(unit, work, tile, None, 1, u128::MAX)]
        } else {
            // Where the CPU takes units from the back, the GPUs' pieces shrink
            // to a 64th of the pairs, so that the two meet within a small piece.
            let floor = if cpu_driver.is_some() { (unit.pairs / 64).max(1) } else { pieces::MIN_PIECE_PAIRS };
            let min_pairs = opts.piece_pairs.map_or(floor, u128::from);
            // A search's launch meets each own point's rings alone: no counters to bound.
            let max_partners = if rings { None } else { max_partners };
            pieces::cut_grid(unit, work, tile, max_partners, workers, min_pairs).into_iter().map(|p| vec![p]).collect()
        }
    } else if stage.refines_per_query() {
        // Per-query lists are refined unit after unit of a query block, on one stream.
        groups.into_iter().map(|g| g.into_iter().map(Piece::whole).collect()).collect()
    } else {
        let units: Vec<Unit> = groups.into_iter().flatten().collect();
        let work = work(&launchers, &units, &a_blocks, &b_blocks);
        let min_pairs = opts.piece_pairs.map_or(pieces::MIN_PIECE_PAIRS, u128::from);
        pieces::cut(&work, workers, min_pairs).into_iter().map(|p| vec![p]).collect()
    };
    let piece_count = queue.iter().map(Vec::len).sum::<usize>() as u64;
    // No more streams than groups to share: an idle stream would only allocate
    // and free its buffers. A search of rings keeps every list of a GPU in one
    // stream's buffer.
    let streams_used = match index.index {
        IndexKind::Rings => 1,
        _ => streams.min(queue.len().div_ceil(contexts.len())).max(1),
    };
    let job = Job {
        inputs,
        a_blocks,
        b_blocks,
        queue: Mutex::new(queue.into()),
        start: Instant::now(),
        opts,
        streams,
        progress,
        block_points,
        value: problem.function.returns,
    };

    // One host thread per GPU, which runs one per stream.
    // The CPU's threads, where it takes part, walk the host's grid; its first
    // claim is made before any stream starts, so that a forced split shows.
    let host_grid = match &indexing {
        Indexing::Host(grid, _) => Some(grid),
        _ => None,
    };
    let cpu_side = cpu_driver
        .as_ref()
        .zip(host_grid)
        .map(|(d, g)| CpuSide::new(d.walker(inputs, Some(g)), g, &split, progress, job.start));
    let first_claim = cpu_side.as_ref().and_then(|c| c.claim(&job.queue));
    let (results, cpu_results) = std::thread::scope(|s| {
        let cpu_handles: Vec<_> = cpu_side
            .iter()
            .flat_map(|side| {
                let job = &job;
                (0..side.threads)
                    .map(move |t| s.spawn(move || hybrid::cpu_worker(side, &job.queue, first_claim.filter(|_| t == 0))))
            })
            .collect();
        let handles: Vec<_> = contexts
            .iter()
            .zip(&launchers)
            .zip(&residents)
            .zip(&drains)
            .zip(&stagings)
            .map(|((((ctx, launch), resident), drain), staging)| {
                let job = &job;
                let gpu = Gpu {
                    ctx,
                    launchers: launch,
                    resident: resident.as_ref(),
                    drain: drain.as_ref(),
                    staging: staging.as_deref(),
                };
                s.spawn(move || gpu_worker(job, gpu, stage, streams_used))
            })
            .collect();
        let results: Vec<Result<GpuResult, GpuError>> =
            handles.into_iter().map(|h| h.join().expect("GPU worker panicked")).collect();
        let cpu_results: Vec<hybrid::CpuResult> =
            cpu_handles.into_iter().map(|h| h.join().expect("CPU worker panicked")).collect();
        (results, cpu_results)
    });
    let compute_end = job.start.elapsed().as_secs_f64();
    let mut timings = GpuTimings {
        context_s: driver_s + context_s,
        compile_s,
        index_s,
        grid_s,
        prepare_s,
        pieces: piece_count,
        ..Default::default()
    };
    // The resident inputs' upload, overlapped with the compilation.
    timings.upload_s += residents.iter().flatten().map(|r| r.upload_s).sum::<f64>();
    let mut parts = Vec::new();
    for (r, &ordinal) in results.into_iter().zip(&ordinals) {
        let done = r?;
        for t in &done.streams {
            timings.add(t);
        }
        parts.extend(done.parts);
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
    // What the CPU did, and its lists (its totals and pairs merge with the GPUs').
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
    let combine = Instant::now();
    // A search of rings wrote each list to its query's input row itself; the
    // CPU's lists go over the rows it took.
    let outcome = match stage.collect() {
        Collect::Knn { k } if cpu_side.is_some() => {
            let gpu = parts.into_iter().find_map(|p| match p {
                Partial::Knn(mut rows) => rows.pop().map(|(_, values, ids)| (values, ids)),
                _ => None,
            });
            hybrid::lists_with_cpu_rows(k as usize, problem.function.returns, n_a, gpu, cpu_rows)
        }
        collect => output::merge(collect, problem.function.returns, n_a, parts),
    };
    timings.hybrid = split;
    timings.combine_s += combine.elapsed().as_secs_f64();
    timings.wall_s = wall.elapsed().as_secs_f64();
    Ok(GpuRun { outcome, devices, plans, timings, notes, block_points, index })
}

/// How a run finds its pairs: every pair, a grid sorted on the host (which
/// several GPUs must share: the GPU's sort orders a cell's points as its
/// atomics fall), or a grid the one GPU sorts itself from the layout.
#[allow(clippy::large_enum_variant, reason = "one per run")]
enum Indexing {
    Brute(Summary),
    Host(Grid, Summary),
    Device(Layout),
}

/// Fewest pairs (estimated) a grid shared by several GPUs must visit. The
/// H200 host sorts 10M points in about 0.25 s, and one H200's grid kernel
/// visits about 5e11 pairs a second (the 2-D join: 8.4e8 in 1.6 ms): below
/// 2^36 pairs (0.13 s of kernel) a second GPU saves less than the host's
/// sort costs, while one GPU sorts its own grid in milliseconds.
const SEVERAL_GPUS_GRID_PAIRS: u128 = 1 << 36;

/// How the run finds its pairs, why only the first of several GPUs runs
/// (where it does), and whether the CPU's threads (at `rates`) take part. A
/// unit is at most one block's own points (B x R of the kernel's plan) over
/// a row of cells; the grid's kernel reads both sets whole, so blocks of
/// `fits` points must hold them.
#[allow(clippy::too_many_arguments, reason = "the run's inputs and options, each once")]
fn choose_index(
    problem: &Problem,
    params: &Params,
    inputs: &Inputs,
    choice: IndexChoice,
    opts: &GpuOptions,
    devices: &[Device],
    fits: usize,
    rates: &Rates,
) -> Result<(Indexing, Option<String>, Split), GpuError> {
    const NO_GRID: &str = "the GPUs alone: the CPU takes part in grid runs only (brute force's pieces are \
                           ranges of a kernel's steps, which the CPU's driver does not walk)";
    let points = Points { a: inputs.a.len() as u64, b: inputs.b.as_ref().map(|b| b.len() as u64) };
    let shape = Shape::new(problem, params, points);
    let layout = match index::layout(problem, params, inputs, shape.pairs, choice)? {
        Ok(layout) => layout,
        Err(brute) => return Ok((Indexing::Brute(brute), None, Split::gpus_alone(NO_GRID))),
    };
    let most = inputs.a.len().max(inputs.other().len());
    if fits < most {
        let why = format!(
            "the grid needs both sets whole on each GPU, and blocks of {fits} of the {most} points were asked for or fit"
        );
        return match choice {
            IndexChoice::Grid => Err(IndexError::Unusable(why).into()),
            _ => Ok((Indexing::Brute(Summary::brute(why, shape.pairs)), None, Split::gpus_alone(NO_GRID))),
        };
    }
    let several = devices.len() > 1;
    let rings = layout.kind == IndexKind::Rings;
    // Several GPUs need one grid, sorted on the host: worth it only where the
    // pairs keep them busy for longer than that sort takes. A search of rings
    // runs on the GPU that holds its grid's cells.
    // Forced pieces (--piece-pairs) are shared from two of them.
    let least = opts.piece_pairs.map_or(SEVERAL_GPUS_GRID_PAIRS, |p| 2 * u128::from(p));
    let estimate = (several && !rings).then(|| layout.estimated_pairs(inputs, shape.visit));
    let host_for_gpus = estimate.is_some_and(|e| e >= least);
    // The CPU's part: a sample of the grid's pairs only where every pair
    // could make it pay.
    let split = match (opts.hybrid, estimate) {
        (Hybrid::Auto, None) if !hybrid::could_pay(rates, shape.pairs, most, host_for_gpus) => {
            hybrid::decide(Hybrid::Auto, rates, shape.pairs, "every pair, at most", most, host_for_gpus)
        }
        (Hybrid::Auto, _) => {
            let e = estimate.unwrap_or_else(|| layout.estimated_pairs(inputs, shape.visit));
            hybrid::decide(Hybrid::Auto, rates, e, "estimated from a sample", most, host_for_gpus)
        }
        (forced, Some(e)) => hybrid::decide(forced, rates, e, "estimated from a sample", most, host_for_gpus),
        (forced, None) => hybrid::decide(forced, rates, shape.pairs, "every pair, at most", most, host_for_gpus),
    };
    let first_alone = |why: String| format!("the first GPU alone: {why}");
    let one_gpu = match estimate {
        _ if !several => None,
        _ if rings => Some(first_alone(format!(
            "a KNN search of rings runs on the GPU that holds its grid's cells, not on {}",
            devices.len()
        ))),
        // The CPU's grid is sorted on the host: every GPU may share it.
        Some(e) if e < least && !split.cpu => Some(first_alone(format!(
            "the grid's ~{e} pairs (estimated from a sample) are fewer than {least}, too few to be worth \
             sorting on the host for {} GPUs",
            devices.len()
        ))),
        _ => None,
    };
    if !split.cpu && !host_for_gpus {
        // One GPU sorts its own grid (its units follow the compiled kernel's blocks).
        return Ok((Indexing::Device(layout), one_gpu, split));
    }
    // The host sorts the grid: the GPUs share it, or the CPU walks it beside them.
    let plan = Plan::grid(problem, params, &devices[0], points, opts.forced)?;
    let runs = Runs { points: plan.launch.block_size * plan.launch.points_per_thread, whole_rows: true };
    let (grid, summary) = index::choose(problem, params, inputs, shape.visit, shape.pairs, choice, runs)?;
    Ok(match grid {
        Some(grid) => (Indexing::Host(grid, summary), one_gpu, split),
        None => (Indexing::Brute(summary), None, Split::gpus_alone(NO_GRID)),
    })
}

/// Every unit with the walk of its kernel (every GPU's kernels walk alike:
/// their block size and points per thread are the first GPU's) and the
/// tightest bound of any GPU's counters for it.
fn work(
    launchers: &[KernelPair<Launcher>],
    units: &[Unit],
    a_blocks: &[(usize, usize)],
    b_blocks: &[(usize, usize)],
) -> Vec<Work> {
    let len = |(lo, hi): (usize, usize)| (hi - lo) as u64;
    units
        .iter()
        .map(|&unit| {
            let plans = launchers.iter().map(|(own, between)| {
                let launcher = match unit.kernel {
                    KernelKind::Own => own.as_ref(),
                    KernelKind::Between => between.as_ref(),
                };
                &launcher.expect("a kernel is compiled for every kind of unit").plan
            });
            let max_partners = plans.clone().filter_map(|p| p.launch.partners_per_launch).min();
            let plan = plans.clone().next().expect("at least one GPU");
            let walk = Walk {
                visit: plan.shape.visit,
                n_a: len(a_blocks[unit.a_block]),
                // One set: the own kernel pairs the block with itself (b_blocks are A's).
                n_other: len(b_blocks[unit.b_block]),
                block_size: plan.launch.block_size as u64,
                points_per_thread: plan.launch.points_per_thread as u64,
            };
            Work { unit, walk, max_partners }
        })
        .collect()
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

/// A GPU's copy of inputs that fit it whole (each set one block): uploaded
/// once while the kernels compile, and read by every stream of the GPU.
struct Resident {
    a: DeviceBlock,
    /// The second set, for two.
    b: Option<DeviceBlock>,
    upload_s: f64,
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

impl Resident {
    fn upload(ctx: &Arc<CudaContext>, inputs: &Inputs) -> Result<Resident, GpuError> {
        let start = Instant::now();
        let upload = "uploading points";
        let (a, b, stream) = upload_sets(ctx, (&inputs.a, inputs.b.as_ref()), 0, upload)?;
        stream.synchronize().doing(upload)?;
        Ok(Resident { a, b, upload_s: start.elapsed().as_secs_f64(), grid: None })
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
        Ok(Resident { a, b, upload_s: start.elapsed().as_secs_f64(), grid: Some(dev_grid) })
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
    use super::{SAMPLE_PAIRS, SAMPLE_UNITS, sample_units};

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
