//! Points given on a GPU (`data::DeviceInputs`: another library's arrays)
//! taken there into twobs's own columns by `templates/input/take.cu`, with
//! what the planner reads of each set measured on the GPU: its extremes,
//! its non-finite rows and the strided samples the host path takes
//! (`data::Measured`). Nothing but those samples crosses the bus; the
//! columns become the run's resident inputs on that GPU.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg, sys};

use super::{Doing, GpuError, context};
use crate::backend::nvrtc;
use crate::cache::{Cache, Key, Memo};
use crate::codegen;
use crate::data::{Column, DeviceInputs, DeviceSet, Measured, ProducerStream, spacing_step};
use crate::device::Device;
use crate::spec::{Component, Scalar};
use crate::stage::input::{DeviceBlock, PAD_POINTS};

/// The taker's kernels on one GPU.
struct Taker {
    columns: CudaFunction,
    rows4: CudaFunction,
    rows8: CudaFunction,
}

impl Taker {
    /// Compiled once per architecture and loaded once per GPU and process.
    fn on(ctx: &Arc<CudaContext>, dev: &Device, cache: &Cache) -> Result<Arc<Taker>, GpuError> {
        static TAKERS: Memo<Taker> = Memo::new();
        TAKERS.get_or_try(Key::of(&[dev.arch().as_bytes(), &ctx.ordinal().to_le_bytes()]), || {
            let kernel = codegen::render_take();
            let (cubin, _) = nvrtc::cubin(&kernel, &dev.arch(), cache)?;
            let module = ctx.load_module(cudarc::nvrtc::Ptx::from_binary(cubin.to_vec())).doing("loading the taker")?;
            let f = |entry: &str| module.load_function(entry).doing("finding the taker's kernels");
            Ok(Taker {
                columns: f("twobs_take_columns")?,
                rows4: f("twobs_take_rows4")?,
                rows8: f("twobs_take_rows8")?,
            })
        })
    }
}

/// A run's points taken on their GPU: its columns (handed to the run once,
/// as its resident inputs) and what was measured of each set.
pub struct Taken {
    /// The GPU the points lie on, which alone runs them.
    pub ordinal: usize,
    /// Set A's, and B's for two sets.
    pub measured: Vec<Measured>,
    /// The spec's scalar of each component.
    pub scalars: Vec<Scalar>,
    /// Seconds of the take: the kernels and the samples' download.
    pub take_s: f64,
    blocks: Mutex<Option<(DeviceBlock, Option<DeviceBlock>)>>,
}

impl Taken {
    /// Points of set A, and of the other set (A again for one set).
    pub fn lens(&self) -> (usize, usize) {
        (self.measured[0].len, self.measured.last().expect("set A").len)
    }

    pub fn two_sets(&self) -> bool {
        self.measured.len() == 2
    }

    /// The columns, once: a run's resident inputs.
    pub(super) fn blocks(&self) -> Option<(DeviceBlock, Option<DeviceBlock>)> {
        self.blocks.lock().expect("taken lock").take()
    }
}

/// The GPU that holds `address` (device or managed memory), or why none does.
fn ordinal_of(set: &DeviceSet) -> Result<usize, GpuError> {
    let mut kind: u32 = 0;
    let mut ordinal: i32 = -1;
    // SAFETY: the attributes are written as a CUmemorytype (u32) and an int.
    let read = unsafe {
        sys::cuPointerGetAttribute(
            (&mut kind as *mut u32).cast(),
            sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            set.address,
        )
        .result()
        .and_then(|()| {
            sys::cuPointerGetAttribute(
                (&mut ordinal as *mut i32).cast(),
                sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                set.address,
            )
            .result()
        })
    };
    let device = sys::CUmemorytype::CU_MEMORYTYPE_DEVICE as u32;
    let unified = sys::CUmemorytype::CU_MEMORYTYPE_UNIFIED as u32;
    match read {
        Ok(()) if (kind == device || kind == unified) && ordinal >= 0 => Ok(ordinal as usize),
        Ok(()) => Err(GpuError::NotOnGpu {
            origin: set.origin.clone(),
            address: set.address,
            why: format!("the driver says it is memory of type {kind}, not a GPU's"),
        }),
        Err(e) => Err(GpuError::NotOnGpu { origin: set.origin.clone(), address: set.address, why: e.to_string() }),
    }
}

/// Waits for the producer's work on an array (its stream) to finish.
fn wait_for(stream: ProducerStream) -> Result<(), GpuError> {
    let handle = match stream {
        ProducerStream::Ready => return Ok(()),
        ProducerStream::Legacy => 0x1 as sys::CUstream,
        ProducerStream::PerThread => 0x2 as sys::CUstream,
        ProducerStream::Handle(h) => h as sys::CUstream,
    };
    // SAFETY: a stream handle the array's producer named (or a default stream's).
    unsafe { sys::cuStreamSynchronize(handle) }.result().doing("waiting for the array's stream")
}

/// The GPU all of `inputs` lie on, checked against the GPUs asked for.
pub fn gpu_of(inputs: &DeviceInputs, gpus: Option<&[usize]>) -> Result<usize, GpuError> {
    super::usable()?;
    // Some drivers answer pointer queries only with a context current.
    context(gpus.and_then(|g| g.first().copied()).unwrap_or(0))?.bind_to_thread().doing("binding the context")?;
    let a = ordinal_of(&inputs.a)?;
    if let Some(b) = &inputs.b {
        let on = ordinal_of(b)?;
        if on != a {
            return Err(GpuError::SetsOnTwoGpus { a, b: on });
        }
    }
    if let Some(g) = gpus
        && !g.contains(&a)
    {
        return Err(GpuError::NotAsked { ordinal: a, gpus: g.to_vec() });
    }
    Ok(a)
}

/// Takes `inputs` (on GPU `ordinal`, [`gpu_of`]) into columns of the
/// spec's `components` on that GPU, measuring each set there.
pub fn take(inputs: &DeviceInputs, components: &[Component], ordinal: usize, cache: &Cache) -> Result<Taken, GpuError> {
    let start = Instant::now();
    let scalar = components[0].scalar;
    if components.iter().any(|c| c.scalar != scalar) || !matches!(scalar, Scalar::F32 | Scalar::F64) {
        return Err(GpuError::Input(crate::input_error!(
            "{}: points on a GPU are taken for a spec whose element is a vector of float32 or float64; this spec's components are {}",
            inputs.a.origin,
            components.iter().map(|c| c.scalar.name()).collect::<Vec<_>>().join(", ")
        )));
    }
    for set in inputs.sets() {
        set.check(components.len()).map_err(GpuError::Input)?;
    }
    let ctx = context(ordinal)?;
    ctx.bind_to_thread().doing("binding the context")?;
    for set in inputs.sets() {
        wait_for(set.stream)?;
    }
    let dev = super::device_of(ordinal)?;
    let taker = Taker::on(&ctx, &dev, cache)?;
    let stream = ctx.new_stream().doing("creating a stream")?;
    let mut measured = Vec::new();
    let mut blocks = Vec::new();
    for set in inputs.sets() {
        let (block, m) = take_set(&taker, &stream, set, scalar, dev.multiprocessors)?;
        blocks.push(block);
        measured.push(m);
    }
    stream.synchronize().doing("taking points on the GPU")?;
    let mut blocks = blocks.into_iter();
    let a = blocks.next().expect("set A");
    Ok(Taken {
        ordinal,
        measured,
        scalars: components.iter().map(|c| c.scalar).collect(),
        take_s: start.elapsed().as_secs_f64(),
        blocks: Mutex::new(Some((a, blocks.next()))),
    })
}

fn launch_cfg(threads: u32, blocks: u32) -> LaunchConfig {
    LaunchConfig { grid_dim: (blocks.max(1), 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 }
}

/// One set's columns of `scalar` (padded by a tile, zeros) and what was measured of it.
fn take_set(
    taker: &Taker,
    stream: &Arc<CudaStream>,
    set: &DeviceSet,
    scalar: Scalar,
    multiprocessors: u32,
) -> Result<(DeviceBlock, Measured), GpuError> {
    let doing = "taking points on the GPU";
    let n = set.rows;
    let width = scalar.bytes() as usize;
    let padded = n.max(1).next_multiple_of(PAD_POINTS);
    let mut columns: Vec<CudaSlice<u8>> = Vec::new();
    for _ in 0..set.components {
        columns.push(stream.alloc_zeros::<u8>(padded * width).doing(doing)?);
    }
    let addresses: Vec<u64> = {
        let ptrs: Vec<_> = columns.iter().map(|c| c.device_ptr(stream)).collect();
        ptrs.iter().map(|(p, _)| *p).collect()
    };
    let addresses = stream.clone_htod(&addresses).doing(doing)?;
    let mut extremes = stream.clone_htod(&[u64::MAX, 0].repeat(set.components)).doing(doing)?;
    let mut first_bad = stream.clone_htod(&[u32::MAX]).doing(doing)?;
    let mut bad_rows = stream.clone_htod(&[0u32]).doing(doing)?;
    let kind: u32 = match set.given {
        Scalar::F32 => 0,
        Scalar::F64 => 1,
        Scalar::I32 => 2,
        Scalar::I64 => 3,
        Scalar::U32 => unreachable!("DeviceSet::check refuses u32"),
    };
    let (rows, comps, out_f64) = (n as u32, set.components as u32, u32::from(scalar == Scalar::F64));
    let mut b = stream.launch_builder(&taker.columns);
    b.arg(&set.address).arg(&set.strides[0]).arg(&set.strides[1]).arg(&kind).arg(&rows).arg(&comps).arg(&out_f64);
    b.arg(&addresses).arg(&mut extremes).arg(&mut first_bad).arg(&mut bad_rows);
    let blocks = (n.div_ceil(256) as u32).clamp(1, 8 * multiprocessors.max(1));
    // SAFETY: (const char* base, i64 row_stride, i64 column_stride, unsigned kind, unsigned n,
    // unsigned components, unsigned out_f64, void* const* columns, u64* extremes, unsigned* first_bad,
    // unsigned* bad_rows): the given array holds n rows at its strides (DeviceSet::check and the
    // caller's interface), each column n values of the spec's scalar, extremes 2 per component.
    unsafe { b.launch(launch_cfg(256, blocks)) }.doing(doing)?;
    let sample = |step: usize| -> Result<Vec<Column>, GpuError> {
        let count = n.div_ceil(step);
        let mut out = Vec::new();
        for column in &columns {
            let mut to = stream.alloc_zeros::<u8>(count.max(1) * width).doing(doing)?;
            let rows = if width == 8 { &taker.rows8 } else { &taker.rows4 };
            let mut b = stream.launch_builder(rows);
            let (step, count32) = (step as u32, count as u32);
            b.arg(column).arg(&step).arg(&count32).arg(&mut to);
            // SAFETY: (const T* column, unsigned step, unsigned count, T* out): rows k step < n, count of them.
            unsafe { b.launch(launch_cfg(256, count.div_ceil(256) as u32)) }.doing(doing)?;
            let bytes = stream.clone_dtoh(&to).doing(doing)?;
            out.push(Column::from_bytes_filled(scalar, count, |room| {
                for (r, x) in room.iter_mut().zip(&bytes) {
                    r.write(*x);
                }
                Ok::<(), GpuError>(())
            })?);
        }
        Ok(out)
    };
    let shape_sample = sample(crate::index::sample_step(n))?;
    let spacing_sample = sample(spacing_step(n))?;
    let keys = stream.clone_dtoh(&extremes).doing(doing)?;
    let first = stream.clone_dtoh(&first_bad).doing(doing)?[0];
    let bad = stream.clone_dtoh(&bad_rows).doing(doing)?[0];
    let measured = Measured {
        len: n,
        extreme_keys: keys.chunks_exact(2).map(|k| [k[0], k[1]]).collect(),
        bad: (bad > 0).then_some((first, bad)),
        shape_sample,
        spacing_sample,
        origin: set.origin.clone(),
    };
    Ok((DeviceBlock::from_columns(columns), measured))
}
