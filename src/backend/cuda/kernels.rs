//! The kernels a run launches: planned and compiled per GPU model, loaded once
//! per GPU and process, and launched with their plan's parameter list.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream, LaunchConfig, sys};

use super::launch::KernelArgs;
use super::{Doing, GpuError};
use crate::backend::cuda::nvrtc;
use crate::cache::{Cache, Key, Memo};
use crate::codegen;
use crate::device::Device;
use crate::plan::{Forced, Plan, Points};
use crate::spec::{Params, Problem};

/// The key of `problem.as_cross()`, made from `problem`'s (`Key::of_printed`).
pub(super) fn printed_cross(problem: Key) -> Key {
    Key::of(&[&problem.bytes(), b"as_cross"])
}

/// A compiled kernel on one GPU, with its plan.
pub(super) struct Launcher {
    pub(super) func: CudaFunction,
    pub(super) plan: Plan,
    /// The module it is in, whose `__constant__` box a run-time box is set in.
    module: Arc<CudaModule>,
}

static MODULES: Memo<(Arc<CudaModule>, CudaFunction)> = Memo::new();

/// A GPU's kernel on one block of a set, and its kernel between two blocks,
/// each where a unit needs it.
pub(super) type KernelPair<K> = (Option<K>, Option<K>);

/// A kernel planned and compiled for a GPU's architecture, not yet loaded:
/// made while the GPU's context is being created.
#[derive(Clone)]
pub(super) struct Compiled {
    /// What was asked (the problem, parameters, GPU, points, forced shape):
    /// names the cubin, so that loading it need not hash its bytes each run.
    pub(super) asked: Key,
    pub(super) plan: Plan,
    pub(super) entry: String,
    pub(super) cubin: Arc<Vec<u8>>,
}

impl Compiled {
    /// Plans, renders and compiles (or finds) the kernel of `problem` for
    /// `dev`; with `grid` its blocks take a grid's units.
    pub(super) fn new(
        (problem, printed): (&Problem, Key),
        params: &Params,
        dev: &Device,
        points: Points,
        forced: Forced,
        grid: bool,
        cache: &Cache,
    ) -> Result<Compiled, GpuError> {
        // Once per process for the same question: a trajectory's frames (and a
        // session's calls) plan, render and read the disk cache once, not 43 ms a frame.
        static PLANNED: Memo<Compiled> = Memo::new();
        // A box read at run time is not in the key: one kernel serves every box.
        let asked = format!("{}\n{:?}\n{dev:?}\n{points:?}\n{forced:?}\n{grid}", params.code_key(), params.box_time);
        let asked = Key::of(&[&printed.bytes(), asked.as_bytes()]);
        let compiled = PLANNED.get_or_try(asked, || -> Result<Compiled, GpuError> {
            crate::cache::count_program();
            let plan = if grid {
                Plan::grid(problem, params, dev, points, forced)?
            } else {
                Plan::new(problem, params, dev, points, forced)?
            };
            let kernel = codegen::render(problem, params, &plan, dev, "twobs run");
            let (cubin, _) = nvrtc::cubin(&kernel, &dev.arch(), cache)?;
            Ok(Compiled { asked, plan, entry: kernel.entry, cubin })
        })?;
        Ok((*compiled).clone())
    }

    /// Loads the kernel into `ctx` (once per process and GPU).
    pub(super) fn load(self, dev: &Device, ctx: &Arc<CudaContext>) -> Result<Launcher, GpuError> {
        let Compiled { asked, plan, entry, cubin } = self;
        let (module, func) = loaded(ctx, asked, &cubin, &entry, "the kernel", |func| {
            if plan.launch.shared_bytes + plan.launch.contribution_shared_bytes > dev.shared_per_block {
                func.set_attribute(
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    plan.launch.shared_bytes as i32,
                )
                .doing("raising the dynamic shared memory limit")?;
            }
            Ok(())
        })?;
        Ok(Launcher { func, plan, module })
    }
}

/// Function `entry` of `cubin` in `ctx`, loaded (and `prepare`d) once per
/// process and GPU.
fn loaded(
    ctx: &Arc<CudaContext>,
    named: Key,
    cubin: &[u8],
    entry: &str,
    what: &str,
    prepare: impl FnOnce(&CudaFunction) -> Result<(), GpuError>,
) -> Result<(Arc<CudaModule>, CudaFunction), GpuError> {
    let key = Key::of(&[&named.bytes(), &ctx.ordinal().to_le_bytes()]);
    let loaded = MODULES.get_or_try(key, || -> Result<_, GpuError> {
        let module =
            ctx.load_module(cudarc::nvrtc::Ptx::from_binary(cubin.to_vec())).doing(&format!("loading {what}"))?;
        let func = module.load_function(entry).doing(&format!("finding {what}"))?;
        prepare(&func)?;
        Ok((module, func))
    })?;
    Ok((*loaded).clone())
}

impl Launcher {
    /// Sets the box the kernel reads at run time (`__constant__ params::NAME`,
    /// `templates/common/types.cu`) to `numbers` (`PeriodicBox::run_time_numbers`),
    /// and waits for the copy, before any stream launches the kernel.
    pub(super) fn use_box(
        &self,
        stream: &Arc<CudaStream>,
        name: &str,
        scalar: crate::spec::Scalar,
        numbers: &[f64; 12],
    ) -> Result<(), GpuError> {
        // The Itanium name of a variable `name` in namespace `params`.
        let symbol = format!("_ZN6params{}{name}E", name.len());
        let bytes: Vec<u8> = match scalar {
            crate::spec::Scalar::F32 => numbers.iter().flat_map(|&x| (x as f32).to_le_bytes()).collect(),
            _ => numbers.iter().flat_map(|&x| x.to_le_bytes()).collect(),
        };
        let mut global =
            self.module.get_global(&symbol, stream).doing(&format!("finding the run-time box {symbol}"))?;
        if global.len() != bytes.len() {
            return Err(GpuError::Driver {
                what: format!(
                    "setting the run-time box {symbol}: the kernel holds {} bytes, the box is {}",
                    global.len(),
                    bytes.len()
                ),
                cause: cudarc::driver::DriverError(sys::CUresult::CUDA_ERROR_INVALID_VALUE),
            });
        }
        stream.memcpy_htod(&bytes, &mut global).doing("setting the run-time box")?;
        stream.synchronize().doing("setting the run-time box")?;
        Ok(())
    }

    /// Launches `grid` blocks with the arguments of the plan's parameter list.
    pub(super) fn launch(&self, stream: &Arc<CudaStream>, grid: u32, args: &KernelArgs) -> Result<(), GpuError> {
        let cfg = LaunchConfig {
            grid_dim: (grid, 1, 1),
            block_dim: (self.plan.launch.block_size, 1, 1),
            shared_mem_bytes: self.plan.launch.shared_bytes,
        };
        let mut builder = stream.launch_builder(&self.func);
        for p in &self.plan.params {
            args.resolve(p.source).push(&mut builder);
        }
        // SAFETY: the kernel's signature was rendered from plan.params, and each
        // argument is resolved from the same entry to a buffer or count of its C type.
        unsafe { builder.launch(cfg) }.doing("launching the kernel")?;
        Ok(())
    }
}

/// The drain kernel of the direct output buffer, compiled once per
/// architecture and loaded once per GPU.
pub(super) fn dob_drain(ctx: &Arc<CudaContext>, dev: &Device, cache: &Cache) -> Result<CudaFunction, GpuError> {
    // Keyed by the GPU before anything is rendered or read: a trajectory's frames find it in memory.
    static DRAINS: Memo<CudaFunction> = Memo::new();
    let key = Key::of(&[dev.arch().as_bytes(), &ctx.ordinal().to_le_bytes()]);
    let drain = DRAINS.get_or_try(key, || {
        let kernel = codegen::render_dob_drain();
        let (cubin, _) = nvrtc::cubin(&kernel, &dev.arch(), cache)?;
        loaded(ctx, key, &cubin, &kernel.entry, "the output drain", |_| Ok(())).map(|(_, func)| func)
    })?;
    Ok((*drain).clone())
}
