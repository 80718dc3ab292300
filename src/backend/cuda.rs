//! The CUDA driver through cudarc (dynamic loading: nothing CUDA is needed to build).

use cudarc::driver::{CudaContext, sys};

use crate::device::Device;

/// Whether libcuda can be loaded, and if not, why.
pub fn driver_available() -> Result<(), String> {
    // SAFETY: only probes whether the shared library can be opened.
    if unsafe { sys::is_culib_present() } {
        Ok(())
    } else {
        Err("the CUDA driver library (libcuda.so) was not found".to_owned())
    }
}

/// Reads the limits of GPU `ordinal`; model constants come from the closest profile.
pub fn live_device(ordinal: usize) -> anyhow::Result<Device> {
    driver_available().map_err(anyhow::Error::msg)?;
    let ctx = CudaContext::new(ordinal)?;
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
        readonly_cache_per_sm: if base.unified_l1 {
            base.readonly_cache_per_sm.max(shared_per_sm)
        } else {
            base.readonly_cache_per_sm
        },
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

/// Whether this machine can run kernels: the driver loads and sees a GPU.
pub fn usable() -> Result<(), String> {
    driver_available()?;
    match CudaContext::device_count() {
        Ok(n) if n > 0 => Ok(()),
        Ok(_) => Err("the CUDA driver sees no GPU".to_owned()),
        Err(e) => Err(format!("the CUDA driver failed: {e}")),
    }
}
