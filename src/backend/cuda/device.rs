//! The GPUs as the driver gives them, once per process: contexts, their
//! memory pools, limits and the pinned buffers for downloads.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, DriverError, sys};

use super::outputs::download::Staging;
use super::{Doing, GpuError};
use crate::device::{Device, TunedProfile};

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
pub(super) static CONTEXTS: Mutex<Option<HashMap<usize, Arc<CudaContext>>>> = Mutex::new(None);

/// Whether GPU `ordinal`'s context was made already (by an earlier run of the process).
pub(super) fn context_made(ordinal: usize) -> bool {
    CONTEXTS.lock().expect("context lock").as_ref().is_some_and(|m| m.contains_key(&ordinal))
}

/// A context a run of this process made (the lowest GPU's), if any.
pub(super) fn any_context() -> Option<Arc<CudaContext>> {
    let contexts = CONTEXTS.lock().expect("context lock");
    contexts.as_ref()?.iter().min_by_key(|(ordinal, _)| **ordinal).map(|(_, ctx)| ctx.clone())
}

/// The context of GPU `ordinal`, made once per process: modules loaded into it stay loaded.
pub(super) fn context(ordinal: usize) -> Result<Arc<CudaContext>, GpuError> {
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
pub(super) fn default_pool(ctx: &Arc<CudaContext>) -> Result<sys::CUmemoryPool, DriverError> {
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
pub(super) fn total_memory(ordinal: usize) -> Result<usize, GpuError> {
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
pub(super) fn free_memory(ctx: &Arc<CudaContext>) -> Result<usize, DriverError> {
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
pub(super) fn staging(ctx: &Arc<CudaContext>) -> Result<Arc<Mutex<Staging>>, GpuError> {
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
pub(super) fn device_of(ordinal: usize) -> Result<Device, GpuError> {
    let dev = limits_of(ordinal)?;
    let path = TunedProfile::path_in(&TunedProfile::folder()?, &dev.name);
    Ok(match TunedProfile::read(&path)? {
        Some(tuned) => tuned.apply(dev, &path)?,
        None => dev,
    })
}

/// The limits of GPU `ordinal`, read from the driver without a context (so
/// that kernels can be planned and compiled while the context is made).
pub(super) fn limits_of(ordinal: usize) -> Result<Device, GpuError> {
    // A GPU's limits do not change while the process lives: read once.
    static READ: crate::cache::Memo<Device> = crate::cache::Memo::new();
    let read = READ.get_or_try(crate::cache::Key::of(&[&ordinal.to_le_bytes()]), || read_limits(ordinal))?;
    Ok((*read).clone())
}

pub(super) fn read_limits(ordinal: usize) -> Result<Device, GpuError> {
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
