//! The CUDA backend through cudarc (dynamic loading: nothing CUDA is needed to
//! build; the driver and NVRTC are found at run time).
//!
//! The input is cut into blocks of points. Each unit of work is a pair of
//! blocks: the problem's own kernel on the diagonal, and the same problem
//! between two sets (A = one block, B = another) off it. Every GPU runs one
//! host thread per stream; each thread takes units from a shared queue and
//! uploads, launches and downloads on its own stream, so that one stream's
//! transfers overlap another's kernels. Results are combined on the host.

use std::collections::VecDeque;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context as _;
use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg, sys};
use indicatif::ProgressBar;
use serde::Serialize;

use crate::codegen::{self, PAD_ELEMENTS};
use crate::data::{Inputs, PointSet};
use crate::device::Device;
use crate::outcome::Outcome;
use crate::plan::{Forced, OutputStage, Plan, Points, Visit};
use crate::spec::{Output, Params, Problem, Scalar, Sets};
use rand::{RngExt, SeedableRng};

/// Whether libcuda can be loaded, and if not, why.
pub fn driver_available() -> Result<(), String> {
    // SAFETY: only probes whether the shared library can be opened.
    if unsafe { sys::is_culib_present() } {
        Ok(())
    } else {
        Err("the CUDA driver library (libcuda.so) was not found".to_owned())
    }
}

/// Whether this machine can run kernels: the driver loads and sees a GPU.
pub fn usable() -> Result<(), String> {
    driver_available()?;
    match CudaContext::device_count() {
        Ok(n) if n > 0 => Ok(()),
        Ok(_) => Err("the CUDA driver sees no GPU".to_owned()),
        Err(e) => Err(format!("the CUDA driver failed: {e}")),
    }
}

/// Reads the limits of GPU `ordinal`; model constants come from the closest profile.
pub fn live_device(ordinal: usize) -> anyhow::Result<Device> {
    driver_available().map_err(anyhow::Error::msg)?;
    let ctx = CudaContext::new(ordinal)?;
    device_of(&ctx, ordinal)
}

fn device_of(ctx: &Arc<CudaContext>, ordinal: usize) -> anyhow::Result<Device> {
    use sys::CUdevice_attribute::*;
    let attr = |a| -> anyhow::Result<u32> { Ok(ctx.attribute(a)? as u32) };
    let cc = (attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?, attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?);
    let base = Device::closest_profile(cc);
    let shared_per_sm = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)?;
    let bus_bits = attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)? as f64;
    let mem_khz = attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)? as f64;
    Ok(Device {
        name: ctx.name()?,
        origin: format!("live GPU {ordinal}"),
        compute_capability: cc,
        multiprocessors: attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        shared_per_sm,
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
}

/// Seconds in each stage, summed over streams and GPUs (CUDA events), and wall time.
#[derive(Debug, Clone, Default, Serialize)]
pub struct GpuTimings {
    pub compile_s: f64,
    pub upload_s: f64,
    pub kernel_s: f64,
    pub download_s: f64,
    pub combine_s: f64,
    pub wall_s: f64,
    pub launches: u64,
    /// Extra launches after the direct output buffer filled up.
    pub overflow_relaunches: u64,
}

pub struct GpuRun {
    pub outcome: Outcome,
    pub devices: Vec<Device>,
    /// The diagonal kernel's plan, and the plan of the kernel between two blocks when one ran.
    pub plans: Vec<Plan>,
    pub timings: GpuTimings,
    pub notes: Vec<String>,
    pub block_points: usize,
}

/// Loads NVRTC's CUBIN for `kernel`, compiling it once per source, architecture and NVRTC version.
fn cubin(kernel: &codegen::Kernel, arch: &str) -> anyhow::Result<(Vec<u8>, bool)> {
    let version = super::nvrtc::version()?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (&kernel.source, arch, version, codegen::NVRTC_OPTIONS).hash(&mut h);
    let dir = super::cpu::cache_dir().join("cuda");
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create the cache {}", dir.display()))?;
    let path = dir.join(format!("{}-{arch}-{:016x}.cubin", kernel.file_name.trim_end_matches(".cu"), h.finish()));
    if let Ok(bytes) = std::fs::read(&path) {
        return Ok((bytes, true));
    }
    let compiled = super::nvrtc::compile(kernel, arch)?;
    let partial = path.with_extension(format!("{}.tmp", std::process::id()));
    std::fs::write(&partial, &compiled.cubin)?;
    std::fs::rename(&partial, &path)?;
    Ok((compiled.cubin, false))
}

/// Which kernel a unit runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KernelKind {
    /// The problem itself, on one block (the diagonal of a one-set problem).
    Own,
    /// The problem between two different blocks.
    Between,
}

#[derive(Debug, Clone, Copy)]
struct Unit {
    kind: KernelKind,
    a_block: usize,
    b_block: usize,
    pairs: u128,
}

/// Block boundaries of a set.
fn blocks(n: usize, per: usize) -> Vec<(usize, usize)> {
    (0..n.div_ceil(per)).map(|k| (k * per, ((k + 1) * per).min(n))).collect()
}

/// A compiled kernel on one GPU.
struct Launcher {
    func: CudaFunction,
    plan: Plan,
}

struct DeviceBuffer {
    _slice: CudaSlice<u8>,
    ptr: u64,
    bytes: usize,
}

impl DeviceBuffer {
    fn new(stream: &Arc<CudaStream>, bytes: usize) -> anyhow::Result<DeviceBuffer> {
        let slice =
            stream.alloc_zeros::<u8>(bytes.max(16)).with_context(|| format!("allocating {bytes} B on the GPU"))?;
        let (ptr, _) = slice.device_ptr(stream);
        Ok(DeviceBuffer { _slice: slice, ptr, bytes })
    }

    fn zero(&self, stream: &CudaStream) -> anyhow::Result<()> {
        unsafe { cudarc::driver::result::memset_d8_async(self.ptr, 0, self.bytes, stream.cu_stream()) }?;
        Ok(())
    }

    fn upload<T>(&self, stream: &CudaStream, data: &[T]) -> anyhow::Result<()> {
        assert!(std::mem::size_of_val(data) <= self.bytes);
        unsafe { cudarc::driver::result::memcpy_htod_async(self.ptr, data, stream.cu_stream()) }?;
        Ok(())
    }

    fn download<T>(&self, stream: &CudaStream, out: &mut [T]) -> anyhow::Result<()> {
        assert!(std::mem::size_of_val(out) <= self.bytes);
        unsafe { cudarc::driver::result::memcpy_dtoh_async(out, self.ptr, stream.cu_stream()) }?;
        Ok(())
    }
}

/// One side of a unit on the device: the component arrays of one block.
struct BlockOnDevice {
    columns: Vec<DeviceBuffer>,
    staging: Vec<cudarc::driver::PinnedHostSlice<u8>>,
    /// (set, block) currently loaded.
    holds: Option<(usize, usize)>,
}

impl BlockOnDevice {
    fn new(
        ctx: &Arc<CudaContext>,
        stream: &Arc<CudaStream>,
        set: &PointSet,
        max_points: usize,
    ) -> anyhow::Result<Self> {
        let padded = max_points.next_multiple_of(PAD_ELEMENTS as usize);
        let mut columns = Vec::new();
        let mut staging = Vec::new();
        for c in &set.columns {
            let bytes = padded * c.scalar().bytes() as usize;
            columns.push(DeviceBuffer::new(stream, bytes)?);
            // SAFETY: filled before every use.
            staging.push(unsafe { ctx.alloc_pinned::<u8>(bytes) }.context("allocating pinned host memory")?);
        }
        Ok(BlockOnDevice { columns, staging, holds: None })
    }

    /// Uploads rows [start, end) of `set` unless already there.
    fn load(
        &mut self,
        stream: &CudaStream,
        set: &PointSet,
        tag: (usize, usize),
        start: usize,
        end: usize,
    ) -> anyhow::Result<()> {
        if self.holds == Some(tag) {
            return Ok(());
        }
        let padded = (end - start).next_multiple_of(PAD_ELEMENTS as usize);
        for ((col, buf), pinned) in set.columns.iter().zip(&self.columns).zip(&mut self.staging) {
            let bytes = padded * col.scalar().bytes() as usize;
            // The previous copy from this staging buffer finished: units end with a sync.
            let host = pinned.as_mut_slice()?;
            col.write_bytes(start, end - start, &mut host[..bytes]);
            buf.upload(stream, &host[..bytes])?;
        }
        self.holds = Some(tag);
        Ok(())
    }
}

/// What the whole run shares.
struct Job<'a> {
    problem: &'a Problem,
    inputs: &'a Inputs,
    a_blocks: Vec<(usize, usize)>,
    b_blocks: Vec<(usize, usize)>,
    queue: Mutex<VecDeque<Vec<Unit>>>,
    opts: &'a GpuOptions,
    streams: usize,
    progress: &'a ProgressBar,
    k: usize,
    slots: usize,
    value: Scalar,
}

/// What one stream thread found.
#[derive(Default)]
struct StreamResult {
    slots: Vec<u64>,
    sum: f64,
    pairs: Vec<[u32; 2]>,
    /// (first query, values, ids) of each query block it finished.
    knn: Vec<(usize, Vec<f64>, Vec<u32>)>,
    timings: GpuTimings,
}

pub fn run(
    problem: &Problem,
    params: &Params,
    inputs: &Inputs,
    opts: &GpuOptions,
    progress: &ProgressBar,
) -> anyhow::Result<GpuRun> {
    let wall = Instant::now();
    usable().map_err(anyhow::Error::msg)?;
    super::nvrtc::available().map_err(anyhow::Error::msg)?;
    let count = CudaContext::device_count()? as usize;
    let ordinals = opts.gpus.clone().unwrap_or_else(|| (0..count).collect());
    if ordinals.is_empty() {
        anyhow::bail!("--gpus: no GPU chosen");
    }
    if let Some(&bad) = ordinals.iter().find(|&&g| g >= count) {
        anyhow::bail!("--gpus: there is no GPU {bad}; this machine has {count} (0 to {})", count.saturating_sub(1));
    }
    let contexts: Vec<Arc<CudaContext>> = ordinals.iter().map(|&g| CudaContext::new(g)).collect::<Result<_, _>>()?;
    for ctx in &contexts {
        // Each stream thread owns its buffers and synchronizes its own stream.
        unsafe { ctx.disable_event_tracking() };
    }
    let devices: Vec<Device> =
        contexts.iter().zip(&ordinals).map(|(c, &g)| device_of(c, g)).collect::<anyhow::Result<_>>()?;

    // Blocks: as large as a quarter of the smallest GPU's free memory allows, per set and stream.
    let n_a = inputs.a.len();
    let n_b = inputs.other().len();
    let streams = opts.streams.max(1);
    let per_point = inputs.a.columns.iter().map(|c| c.scalar().bytes() as usize).sum::<usize>().max(1);
    let free = contexts
        .iter()
        .map(|c| c.mem_get_info().map(|(f, _)| f))
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .min()
        .unwrap_or(0);
    let fit = (free / 4 / (2 * streams) / per_point).max(PAD_ELEMENTS as usize);
    let block_points = opts.block_points.unwrap_or(n_a.max(n_b)).min(fit).max(1);
    let mut notes = Vec::new();
    if opts.block_points.is_none() && block_points < n_a.max(n_b) {
        notes.push(format!("inputs do not fit the GPU at once: blocks of {block_points} points"));
    }
    let a_blocks = blocks(n_a, block_points);
    let b_blocks = if inputs.b.is_some() { blocks(n_b, block_points) } else { a_blocks.clone() };

    let visit = crate::plan::visit_of(problem);
    let per_query = matches!(problem.output, Output::Knn { .. });
    let pairs_of = |kind: KernelKind, p: usize, q: usize| -> u128 {
        let (a, b) = ((a_blocks[p].1 - a_blocks[p].0) as u128, (b_blocks[q].1 - b_blocks[q].0) as u128);
        match (kind, visit) {
            (KernelKind::Own, Visit::LowerTriangle) => a * a.saturating_sub(1) / 2,
            (KernelKind::Own, Visit::AllPairs) => a * a.saturating_sub(1),
            _ => a * b,
        }
    };
    // Units in groups: a group runs in order on one stream (the K best of a query
    // block are refined block after block); groups run anywhere.
    let mut groups: Vec<Vec<Unit>> = Vec::new();
    for p in 0..a_blocks.len() {
        let mut group = Vec::new();
        let unit = |kind, q| Unit { kind, a_block: p, b_block: q, pairs: pairs_of(kind, p, q) };
        match visit {
            Visit::Cross => (0..b_blocks.len()).for_each(|q| group.push(unit(KernelKind::Between, q))),
            Visit::LowerTriangle => {
                group.push(unit(KernelKind::Own, p));
                (p + 1..a_blocks.len()).for_each(|q| group.push(unit(KernelKind::Between, q)));
            }
            Visit::AllPairs => {
                group.push(unit(KernelKind::Own, p));
                (0..a_blocks.len()).filter(|&q| q != p).for_each(|q| group.push(unit(KernelKind::Between, q)));
            }
        }
        if per_query {
            groups.push(group);
        } else {
            groups.extend(group.into_iter().map(|u| vec![u]));
        }
    }
    // Largest first, so that no stream is left with a big unit at the end.
    groups.sort_by_key(|g| std::cmp::Reverse(g.iter().map(|u| u.pairs).sum::<u128>()));
    let needs_between = groups.iter().flatten().any(|u| u.kind == KernelKind::Between);
    let needs_own = groups.iter().flatten().any(|u| u.kind == KernelKind::Own);

    let (k, slots) = match &problem.output {
        Output::Knn { k } => (params.eval(k).as_f64() as usize, 0),
        Output::Histogram { bins, .. } => (0, params.eval(bins).as_f64() as usize),
        Output::Count { .. } => (0, 1),
        _ => (0, 0),
    };
    let job = Job {
        problem,
        inputs,
        a_blocks,
        b_blocks,
        queue: Mutex::new(groups.into()),
        opts,
        streams,
        progress,
        k,
        slots,
        value: problem.function.returns,
    };

    // Plans and kernels, per GPU (GPUs may differ).
    let compile_start = Instant::now();
    let between_problem = problem.as_cross();
    let points = |own: bool| Points {
        a: block_points.min(n_a) as u64,
        b: (!own || problem.input.sets == Sets::Two).then_some(block_points.min(n_b) as u64),
    };
    let mut launchers: Vec<(Option<Launcher>, Option<Launcher>)> = Vec::new();
    let mut plans = Vec::new();
    for (ctx, dev) in contexts.iter().zip(&devices) {
        let make = |p: &Problem, pts: Points| -> anyhow::Result<Launcher> {
            let plan = Plan::new(p, params, dev, pts, opts.forced)?;
            let kernel = codegen::render(p, params, &plan, dev, "twobs run")?;
            let (bytes, _) = cubin(&kernel, &dev.arch())?;
            let module = ctx.load_module(cudarc::nvrtc::Ptx::from_binary(bytes))?;
            let func = module.load_function(&kernel.entry)?;
            if plan.shared_bytes > dev.shared_per_block {
                func.set_attribute(
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    plan.shared_bytes as i32,
                )
                .with_context(|| format!("raising the dynamic shared memory limit to {} B", plan.shared_bytes))?;
            }
            Ok(Launcher { func, plan })
        };
        let own = if needs_own { Some(make(problem, points(true))?) } else { None };
        let between = if needs_between { Some(make(&between_problem, points(false))?) } else { None };
        if plans.is_empty() {
            plans.extend(own.iter().chain(between.iter()).map(|l| l.plan.clone()));
        }
        launchers.push((own, between));
    }
    let compile_s = compile_start.elapsed().as_secs_f64();

    // One host thread per stream per GPU.
    let results: Vec<anyhow::Result<StreamResult>> = std::thread::scope(|s| {
        let mut handles = Vec::new();
        for (ctx, launch) in contexts.iter().zip(&launchers) {
            for _ in 0..streams {
                let job = &job;
                handles.push(s.spawn(move || stream_worker(job, ctx, launch, block_points)));
            }
        }
        handles.into_iter().map(|h| h.join().expect("GPU worker panicked")).collect()
    });
    let results: Vec<StreamResult> = results.into_iter().collect::<anyhow::Result<_>>()?;

    // Combine on the host.
    let combine = Instant::now();
    let mut timings = GpuTimings { compile_s, ..Default::default() };
    for r in &results {
        timings.upload_s += r.timings.upload_s;
        timings.kernel_s += r.timings.kernel_s;
        timings.download_s += r.timings.download_s;
        timings.launches += r.timings.launches;
        timings.overflow_relaunches += r.timings.overflow_relaunches;
    }
    let outcome = match &problem.output {
        Output::Count { .. } => Outcome::Count(results.iter().map(|r| r.slots.first().copied().unwrap_or(0)).sum()),
        Output::Histogram { .. } => {
            let mut h = vec![0u64; slots];
            for r in &results {
                h.iter_mut().zip(&r.slots).for_each(|(t, x)| *t += x);
            }
            Outcome::Histogram(h)
        }
        Output::Sum => Outcome::Sum(results.iter().map(|r| r.sum).sum()),
        Output::Pairs { .. } => Outcome::Pairs(results.into_iter().flat_map(|r| r.pairs).collect()),
        Output::Knn { .. } => {
            let mut values = vec![f64::INFINITY; n_a * k];
            let mut ids = vec![u32::MAX; n_a * k];
            for r in results {
                for (first, v, i) in r.knn {
                    values[first * k..first * k + v.len()].copy_from_slice(&v);
                    ids[first * k..first * k + i.len()].copy_from_slice(&i);
                }
            }
            Outcome::Knn { k, ids, values }
        }
    };
    timings.combine_s = combine.elapsed().as_secs_f64();
    timings.wall_s = wall.elapsed().as_secs_f64();
    Ok(GpuRun { outcome, devices, plans, timings, notes, block_points })
}

/// Kernel arguments: device pointers and 32-bit counts, in order.
enum Arg {
    Ptr(u64),
    U32(u32),
}

impl Arg {
    fn copy(&self) -> Arg {
        match self {
            Arg::Ptr(p) => Arg::Ptr(*p),
            Arg::U32(v) => Arg::U32(*v),
        }
    }
}

fn launch(stream: &Arc<CudaStream>, l: &Launcher, grid: u32, args: &[Arg]) -> anyhow::Result<()> {
    let cfg = LaunchConfig {
        grid_dim: (grid, 1, 1),
        block_dim: (l.plan.block_size, 1, 1),
        shared_mem_bytes: l.plan.shared_bytes,
    };
    let mut b = stream.launch_builder(&l.func);
    for a in args {
        match a {
            Arg::Ptr(p) => b.arg(p),
            Arg::U32(v) => b.arg(v),
        };
    }
    // SAFETY: the arguments follow the kernel's parameter list, rendered from the same plan.
    unsafe { b.launch(cfg) }.context("launching the kernel")?;
    Ok(())
}

/// Per-stream output state on the device.
struct OutputOnDevice {
    result: Option<DeviceBuffer>,
    dob: Option<Dob>,
    knn: Option<(DeviceBuffer, DeviceBuffer)>,
}

/// The direct output buffer and its bookkeeping.
struct Dob {
    pool: DeviceBuffer,
    owner: DeviceBuffer,
    fill: DeviceBuffer,
    next_page: DeviceBuffer,
    overflow: DeviceBuffer,
    resume: DeviceBuffer,
    pages: u32,
}

impl Dob {
    fn new(stream: &Arc<CudaStream>, pages: u32, page: u32, max_grid: usize) -> anyhow::Result<Dob> {
        Ok(Dob {
            pool: DeviceBuffer::new(stream, pages as usize * page as usize * 8)?,
            owner: DeviceBuffer::new(stream, pages as usize * 8)?,
            fill: DeviceBuffer::new(stream, pages as usize * 4)?,
            next_page: DeviceBuffer::new(stream, 4)?,
            overflow: DeviceBuffer::new(stream, 4)?,
            resume: DeviceBuffer::new(stream, max_grid * 4)?,
            pages,
        })
    }
}

const DONE: u32 = u32::MAX;

fn stream_worker(
    job: &Job,
    ctx: &Arc<CudaContext>,
    launchers: &(Option<Launcher>, Option<Launcher>),
    block_points: usize,
) -> anyhow::Result<StreamResult> {
    ctx.bind_to_thread()?;
    let stream = ctx.new_stream()?;
    let inputs = job.inputs;
    let other = inputs.other();
    let mut a_dev = BlockOnDevice::new(ctx, &stream, &inputs.a, block_points)?;
    let mut b_dev = BlockOnDevice::new(ctx, &stream, other, block_points)?;
    let mut res = StreamResult { slots: vec![0; job.slots], ..Default::default() };
    let timing_event = || ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT));
    let (e0, e1, e2, e3) = (timing_event()?, timing_event()?, timing_event()?, timing_event()?);

    let mut out = OutputOnDevice { result: None, dob: None, knn: None };
    let visit = crate::plan::visit_of(job.problem);
    // Pairs (8 B each) one stream's pool may take: a quarter of free memory shared by the streams.
    let pool_cap = ctx.mem_get_info().map_or(1 << 26, |(free, _)| (free / 4 / 8 / job.streams.max(1)) as u64);
    let mut selectivity: Option<f64> = None;
    match &job.problem.output {
        Output::Count { .. } | Output::Histogram { .. } => {
            let b = DeviceBuffer::new(&stream, job.slots * 8)?;
            b.zero(&stream)?;
            out.result = Some(b);
        }
        Output::Sum => {
            let b = DeviceBuffer::new(&stream, 8)?;
            b.zero(&stream)?;
            out.result = Some(b);
        }
        Output::Pairs { .. } => {}
        Output::Knn { .. } => {
            let n = block_points * job.k;
            out.knn =
                Some((DeviceBuffer::new(&stream, n * job.value.bytes() as usize)?, DeviceBuffer::new(&stream, n * 4)?));
        }
    }

    loop {
        let Some(group) = job.queue.lock().expect("queue lock").pop_front() else { break };
        let (q_start, q_end) = job.a_blocks[group[0].a_block];
        if let Some((values, ids)) = &out.knn {
            // Every query starts with K empty slots: +inf (or the type's largest) and no index.
            let len = (q_end - q_start) * job.k;
            values.upload(&stream, &worst_values(job.value, len))?;
            ids.upload(&stream, &vec![u32::MAX; len])?;
        }
        for unit in &group {
            let launcher = match unit.kind {
                KernelKind::Own => launchers.0.as_ref(),
                KernelKind::Between => launchers.1.as_ref(),
            }
            .expect("kernel compiled for every unit kind in the queue");
            let (a0, a1) = job.a_blocks[unit.a_block];
            let (b0, b1) = job.b_blocks[unit.b_block];
            e0.record(&stream)?;
            a_dev.load(&stream, &inputs.a, (0, unit.a_block), a0, a1)?;
            let b_ptrs: Vec<u64> = if unit.kind == KernelKind::Between {
                b_dev.load(&stream, other, (1, unit.b_block), b0, b1)?;
                b_dev.columns.iter().map(|c| c.ptr).collect()
            } else {
                vec![]
            };
            e1.record(&stream)?;
            let mut args: Vec<Arg> = a_dev.columns.iter().map(|c| Arg::Ptr(c.ptr)).collect();
            args.push(Arg::U32((a1 - a0) as u32));
            if unit.kind == KernelKind::Between {
                args.extend(b_ptrs.iter().map(|&p| Arg::Ptr(p)));
                args.push(Arg::U32((b1 - b0) as u32));
            }
            let other_offset = if unit.kind == KernelKind::Between { b0 } else { a0 };
            args.push(Arg::U32(a0 as u32));
            args.push(Arg::U32(other_offset as u32));
            let grid = (a1 - a0).div_ceil(launcher.plan.block_size as usize) as u32;
            if launcher.plan.output == OutputStage::Dob {
                let wanted = match job.opts.pool_pairs {
                    Some(p) => p,
                    None => {
                        let sel = match selectivity {
                            Some(s) => s,
                            None => {
                                let s =
                                    sample_selectivity(job, &stream, launcher, unit, &mut a_dev, &mut b_dev, visit)?;
                                selectivity = Some(s);
                                // The sample displaced the blocks: load them again.
                                a_dev.load(&stream, &inputs.a, (0, unit.a_block), a0, a1)?;
                                if unit.kind == KernelKind::Between {
                                    b_dev.load(&stream, other, (1, unit.b_block), b0, b1)?;
                                }
                                s
                            }
                        };
                        pool_for(
                            sel,
                            unit.pairs,
                            grid,
                            launcher.plan.block_size,
                            launcher.plan.page_size.unwrap_or(1),
                            pool_cap,
                        )
                    }
                };
                let (launches, kernel_s, drain_s) =
                    run_dob(&stream, launcher, grid, &args, wanted, &mut out.dob, &mut res.pairs)?;
                res.timings.launches += launches;
                res.timings.overflow_relaunches += launches - 1;
                res.timings.kernel_s += kernel_s;
                res.timings.download_s += drain_s;
                e2.record(&stream)?;
                e3.record(&stream)?;
            } else {
                match (&out.result, &out.knn) {
                    (Some(r), _) => args.push(Arg::Ptr(r.ptr)),
                    (None, Some((v, i))) => {
                        args.push(Arg::Ptr(v.ptr));
                        args.push(Arg::Ptr(i.ptr));
                    }
                    _ => unreachable!("every output kind has its buffers"),
                }
                launch(&stream, launcher, grid, &args)?;
                res.timings.launches += 1;
                e2.record(&stream)?;
                e3.record(&stream)?;
            }
            stream.synchronize().context("running the kernel")?;
            res.timings.upload_s += e0.elapsed_ms(&e1)? as f64 / 1e3;
            if launcher.plan.output != OutputStage::Dob {
                res.timings.kernel_s += e1.elapsed_ms(&e2)? as f64 / 1e3;
            }
            job.progress.inc(unit.pairs.min(u64::MAX as u128) as u64);
        }
        if let Some((values, ids)) = &out.knn {
            let len = (q_end - q_start) * job.k;
            let t = Instant::now();
            let v = download_values(&stream, values, job.value, len)?;
            let mut i = vec![0u32; len];
            ids.download(&stream, &mut i)?;
            stream.synchronize()?;
            res.timings.download_s += t.elapsed().as_secs_f64();
            res.knn.push((q_start, v, i));
        }
    }
    if let Some(r) = &out.result {
        let t = Instant::now();
        if job.slots > 0 {
            r.download(&stream, &mut res.slots)?;
        } else {
            let mut s = [0f64; 1];
            r.download(&stream, &mut s)?;
            res.sum = s[0];
        }
        stream.synchronize()?;
        res.timings.download_s += t.elapsed().as_secs_f64();
    }
    Ok(res)
}

fn worst_values(value: Scalar, len: usize) -> Vec<u8> {
    let one: Vec<u8> = match value {
        Scalar::F32 => f32::INFINITY.to_le_bytes().to_vec(),
        Scalar::F64 => f64::INFINITY.to_le_bytes().to_vec(),
        Scalar::I32 => i32::MAX.to_le_bytes().to_vec(),
        Scalar::I64 => i64::MAX.to_le_bytes().to_vec(),
        Scalar::U32 => u32::MAX.to_le_bytes().to_vec(),
    };
    one.iter().copied().cycle().take(one.len() * len).collect()
}

fn download_values(
    stream: &Arc<CudaStream>,
    buf: &DeviceBuffer,
    value: Scalar,
    len: usize,
) -> anyhow::Result<Vec<f64>> {
    let mut bytes = vec![0u8; len * value.bytes() as usize];
    buf.download(stream, &mut bytes)?;
    stream.synchronize()?;
    let w = value.bytes() as usize;
    Ok(bytes
        .chunks_exact(w)
        .map(|b| match value {
            Scalar::F32 => f32::from_le_bytes(b.try_into().unwrap()) as f64,
            Scalar::F64 => f64::from_le_bytes(b.try_into().unwrap()),
            Scalar::I32 => i32::from_le_bytes(b.try_into().unwrap()) as f64,
            Scalar::I64 => i64::from_le_bytes(b.try_into().unwrap()) as f64,
            Scalar::U32 => u32::from_le_bytes(b.try_into().unwrap()) as f64,
        })
        .collect())
}

/// Runs a DOB kernel to completion: launch, drain the pages of finished steps
/// into `sink`, relaunch from the resume points while the pool overflows; grow
/// the pool when a launch makes no progress at all. `dob` is reused when it
/// holds at least `pool_pairs`. Returns (launches, seconds in kernels, seconds draining).
#[allow(clippy::too_many_arguments)]
fn run_dob(
    stream: &Arc<CudaStream>,
    launcher: &Launcher,
    grid: u32,
    args: &[Arg],
    pool_pairs: u64,
    dob: &mut Option<Dob>,
    sink: &mut Vec<[u32; 2]>,
) -> anyhow::Result<(u64, f64, f64)> {
    let page = launcher.plan.page_size.expect("a DOB plan has pages");
    let max_grid = grid as usize;
    let pages = pool_pairs.div_ceil(page as u64).clamp(1, u32::MAX as u64 / 2) as u32;
    if dob.as_ref().is_none_or(|d| d.resume.bytes < max_grid * 4 || d.pages < pages) {
        *dob = None; // free the old pool first
        *dob = Some(Dob::new(stream, pages, page, max_grid)?);
    }
    let dob = dob.as_mut().expect("allocated above");
    let (mut launches, mut kernel_s, mut drain_s) = (0, 0.0, 0.0);
    dob.resume.zero(stream)?;
    let mut last_resume = vec![0u32; grid as usize];
    loop {
        dob.next_page.zero(stream)?;
        dob.overflow.zero(stream)?;
        // The kernel's DOB parameters follow the inputs: pool, page_owner, page_fill,
        // next_page, num_pages, resume, overflow.
        let mut full: Vec<Arg> = args.iter().map(Arg::copy).collect();
        full.extend([dob.pool.ptr, dob.owner.ptr, dob.fill.ptr, dob.next_page.ptr].map(Arg::Ptr));
        full.push(Arg::U32(dob.pages));
        full.push(Arg::Ptr(dob.resume.ptr));
        full.push(Arg::Ptr(dob.overflow.ptr));
        let t0 = Instant::now();
        launch(stream, launcher, grid, &full)?;
        stream.synchronize().context("running the kernel")?;
        kernel_s += t0.elapsed().as_secs_f64();
        launches += 1;
        let t = Instant::now();
        let mut head = [0u32; 2];
        dob.next_page.download(stream, &mut head[..1])?;
        dob.overflow.download(stream, &mut head[1..])?;
        let mut resume = vec![0u32; grid as usize];
        dob.resume.download(stream, &mut resume)?;
        stream.synchronize()?;
        let used = head[0].min(dob.pages) as usize;
        let mut owner = vec![0u32; used * 2];
        let mut fill = vec![0u32; used];
        let mut pool = vec![0u32; used * page as usize * 2];
        if used > 0 {
            dob.owner.download(stream, &mut owner)?;
            dob.fill.download(stream, &mut fill)?;
            dob.pool.download(stream, &mut pool)?;
            stream.synchronize()?;
        }
        let mut kept = 0usize;
        for p in 0..used {
            let (block, step) = (owner[2 * p] as usize, owner[2 * p + 1]);
            let stop = resume[block];
            if stop == DONE || step < stop {
                let base = p * page as usize * 2;
                let n = (fill[p] as usize).min(page as usize);
                sink.extend((0..n).map(|e| [pool[base + 2 * e], pool[base + 2 * e + 1]]));
                kept += n;
            }
        }
        drain_s += t.elapsed().as_secs_f64();
        if head[1] == 0 {
            break;
        }
        if kept == 0 && resume == last_resume {
            // Not one block finished a step: the pool is too small for any; grow it.
            let pages = dob.pages.saturating_mul(4).min(u32::MAX / 2);
            *dob = Dob::new(stream, pages, page, max_grid)?;
            dob.resume.upload(stream, &resume)?;
        }
        last_resume = resume;
    }
    Ok((launches, kernel_s, drain_s))
}

/// Rows sampled from a block to estimate the selectivity of a pairs problem.
const SELECTIVITY_SAMPLE_ROWS: usize = 2048;

/// The fraction of pairs that pass, measured on the kernel itself over up to
/// SELECTIVITY_SAMPLE_ROWS rows of each side of `unit` (the self-join seed sizes its
/// result buffer from such a sample).
#[allow(clippy::too_many_arguments)]
fn sample_selectivity(
    job: &Job,
    stream: &Arc<CudaStream>,
    launcher: &Launcher,
    unit: &Unit,
    a_dev: &mut BlockOnDevice,
    b_dev: &mut BlockOnDevice,
    visit: Visit,
) -> anyhow::Result<f64> {
    let pick = |set: &PointSet, (lo, hi): (usize, usize), salt: u64| -> PointSet {
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed ^ salt ^ lo as u64);
        let mut rows: Vec<usize> = if hi - lo <= SELECTIVITY_SAMPLE_ROWS {
            (lo..hi).collect()
        } else {
            (0..SELECTIVITY_SAMPLE_ROWS).map(|_| rng.random_range(lo..hi)).collect()
        };
        rows.sort_unstable();
        rows.dedup();
        set.subset(&rows, "sample".into())
    };
    let sa = pick(&job.inputs.a, job.a_blocks[unit.a_block], 1);
    a_dev.load(stream, &sa, (2, unit.a_block), 0, sa.len())?;
    let mut args: Vec<Arg> = a_dev.columns.iter().map(|c| Arg::Ptr(c.ptr)).collect();
    args.push(Arg::U32(sa.len() as u32));
    let n = sa.len() as f64;
    let pairs = if unit.kind == KernelKind::Between {
        let sb = pick(job.inputs.other(), job.b_blocks[unit.b_block], 2);
        b_dev.load(stream, &sb, (3, unit.b_block), 0, sb.len())?;
        args.extend(b_dev.columns.iter().map(|c| Arg::Ptr(c.ptr)));
        args.push(Arg::U32(sb.len() as u32));
        n * sb.len() as f64
    } else if visit == Visit::LowerTriangle {
        n * (n - 1.0) / 2.0
    } else {
        n * (n - 1.0)
    };
    args.push(Arg::U32(0));
    args.push(Arg::U32(0));
    let grid = sa.len().div_ceil(launcher.plan.block_size as usize) as u32;
    let mut found = Vec::new();
    let mut scratch = None;
    run_dob(stream, launcher, grid, &args, (pairs as u64).clamp(1 << 16, 1 << 23), &mut scratch, &mut found)?;
    Ok(if pairs > 0.0 { found.len() as f64 / pairs } else { 0.0 })
}

/// The pool for a unit of `pairs` pairs at the sampled selectivity: the
/// estimate with a quarter to spare, plus the partly filled page each warp may
/// leave, at least 64 Ki pairs and at most `cap`. A short pool only costs relaunches.
fn pool_for(selectivity: f64, pairs: u128, grid: u32, block: u32, page: u32, cap: u64) -> u64 {
    let warps = grid as u64 * (block as u64 / 32).max(1);
    let estimate = (selectivity * pairs as f64 * 1.25) as u64;
    (estimate + warps * page as u64).clamp(1 << 16, cap.max(1 << 16))
}
