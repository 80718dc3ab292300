//! Points given on a GPU (`data::DeviceInputs`: another library's arrays)
//! taken there into twobs's own columns by `templates/input/take.cu`, with
//! what the planner reads of each set measured on the GPU: its extremes,
//! its non-finite rows and the strided samples the host path takes
//! (`data::Measured`). Nothing but those samples crosses the bus; the
//! columns become the run's resident inputs on that GPU.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg, sys};

use super::blocks::DeviceBlock;
use super::{Doing, GpuError, context};
use crate::backend::cuda::nvrtc;
use crate::cache::{Cache, Key, Memo};
use crate::codegen;
use crate::data::{Column, DeviceInputs, DeviceSet, Measured, ProducerStream, spacing_step};
use crate::device::Device;
use crate::spec::{Component, Scalar};
use crate::stage::input::PAD_POINTS;

/// The taker's kernels on one GPU.
struct Taker {
    columns: CudaFunction,
    samples: CudaFunction,
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
            Ok(Taker { columns: f("twobs_take_columns")?, samples: f("twobs_take_samples")? })
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
    /// Seconds compiling and loading the taker (a process's first take on a GPU).
    pub compile_s: f64,
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
    let compiling = Instant::now();
    let taker = Taker::on(&ctx, &dev, cache)?;
    let compile_s = compiling.elapsed().as_secs_f64();
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
        take_s: start.elapsed().as_secs_f64() - compile_s,
        compile_s,
        blocks: Mutex::new(Some((a, blocks.next()))),
    })
}

fn launch_cfg(threads: u32, blocks: u32) -> LaunchConfig {
    LaunchConfig { grid_dim: (blocks.max(1), 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 }
}

/// Where a set's measurements lie in its one buffer of 64-bit words
/// (`state` of `templates/input/take.cu`): the columns' addresses, the
/// extremes' keys, the bad rows' word, then the two samples, each
/// component's values one after another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateLayout {
    pub components: usize,
    /// Bytes of a value of the spec's scalar.
    pub width: usize,
    /// Rows and step of the planner's sample (`data::sample_step`) and of the range check's (`spacing_step`).
    pub shape: (usize, usize),
    pub spacing: (usize, usize),
}

impl StateLayout {
    pub fn new(n: usize, components: usize, width: usize) -> StateLayout {
        let sample = |step: usize| (n.div_ceil(step), step);
        StateLayout { components, width, shape: sample(crate::data::sample_step(n)), spacing: sample(spacing_step(n)) }
    }

    /// The word the samples start at.
    pub fn sample_word(&self) -> usize {
        3 * self.components + 1
    }

    /// Words of the whole buffer.
    pub fn words(&self) -> usize {
        let bytes = self.components * (self.shape.0 + self.spacing.0) * self.width;
        self.sample_word() + bytes.div_ceil(8)
    }

    /// The words uploaded before the take: the columns' addresses, extremes
    /// that any value replaces, and no bad row.
    pub fn initial(&self, addresses: &[u64]) -> Vec<u64> {
        let mut words = addresses.to_vec();
        words.extend([u64::MAX, 0].repeat(self.components));
        words.push(u64::from(u32::MAX));
        words
    }

    /// The extremes' keys, the bad rows (first, count) and the two samples'
    /// bytes of each component, read from the downloaded buffer.
    #[allow(clippy::type_complexity, reason = "the buffer's parts, each once")]
    pub fn read<'a>(&self, words: &'a [u64]) -> (Vec<[u64; 2]>, Option<(u32, u32)>, [Vec<&'a [u8]>; 2]) {
        let c = self.components;
        let keys = words[c..3 * c].chunks_exact(2).map(|k| [k[0], k[1]]).collect();
        let bad_word = words[3 * c];
        let (first, count) = (bad_word as u32, (bad_word >> 32) as u32);
        // SAFETY: the words' memory viewed as bytes (u8 has no alignment and every bit pattern is one).
        let bytes: &[u8] = unsafe {
            std::slice::from_raw_parts(
                words[self.sample_word()..].as_ptr().cast(),
                (words.len() - self.sample_word()) * 8,
            )
        };
        let (shape_bytes, spacing_bytes) = bytes.split_at(c * self.shape.0 * self.width);
        let per = |all: &'a [u8], rows: usize| -> Vec<&'a [u8]> {
            (0..c).map(|k| &all[k * rows * self.width..(k + 1) * rows * self.width]).collect()
        };
        (
            keys,
            (count > 0).then_some((first, count)),
            [per(shape_bytes, self.shape.0), per(spacing_bytes, self.spacing.0)],
        )
    }
}

/// One set's columns of `scalar` (padded by a tile, zeros) and what was
/// measured of it: one upload of its state, two launches and one download.
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
        // The kernel writes the n values; the padding past them is zeroed.
        columns.push(super::grid::zero_padded(stream, n * width, padded * width).doing(doing)?);
    }
    let addresses: Vec<u64> = {
        let ptrs: Vec<_> = columns.iter().map(|c| c.device_ptr(stream)).collect();
        ptrs.iter().map(|(p, _)| *p).collect()
    };
    let layout = StateLayout::new(n, set.components, width);
    let mut state = stream.alloc_zeros::<u64>(layout.words()).doing(doing)?;
    let initial = layout.initial(&addresses);
    stream.memcpy_htod(&initial, &mut state.slice_mut(..initial.len())).doing(doing)?;
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
    b.arg(&mut state);
    let blocks = (n.div_ceil(256) as u32).clamp(1, 8 * multiprocessors.max(1));
    // SAFETY: (const char* base, i64 row_stride, i64 column_stride, unsigned kind, unsigned n,
    // unsigned components, unsigned out_f64, u64* state): the given array holds n rows at its
    // strides (DeviceSet::check and the caller's interface), each column n values of the spec's
    // scalar, state the columns' addresses, 2 keys per component and the bad rows' word.
    unsafe { b.launch(launch_cfg(256, blocks)) }.doing(doing)?;
    let (width32, sample_word) = (width as u32, layout.sample_word() as u32);
    let [(count0, step0), (count1, step1)] = [layout.shape, layout.spacing].map(|(c, s)| (c as u32, s as u32));
    let total = set.components * (layout.shape.0 + layout.spacing.0);
    let mut b = stream.launch_builder(&taker.samples);
    b.arg(&mut state).arg(&comps).arg(&width32).arg(&step0).arg(&count0).arg(&step1).arg(&count1).arg(&sample_word);
    // SAFETY: (u64* state, unsigned components, unsigned width, unsigned step0, unsigned count0,
    // unsigned step1, unsigned count1, unsigned sample_word): rows k step < n of each column, and
    // room in state from sample_word for components (count0 + count1) values of `width` bytes.
    unsafe { b.launch(launch_cfg(256, (total.div_ceil(256) as u32).clamp(1, 1024))) }.doing(doing)?;
    let words = stream.clone_dtoh(&state).doing(doing)?;
    let (extreme_keys, bad, [shape_bytes, spacing_bytes]) = layout.read(&words);
    let sample = |parts: Vec<&[u8]>, count: usize| -> Result<Vec<Column>, GpuError> {
        parts
            .into_iter()
            .map(|bytes| {
                Column::from_bytes_filled(scalar, count, |room| {
                    for (r, x) in room.iter_mut().zip(bytes) {
                        r.write(*x);
                    }
                    Ok::<(), GpuError>(())
                })
            })
            .collect()
    };
    let measured = Measured {
        len: n,
        extreme_keys,
        bad,
        shape_sample: sample(shape_bytes, layout.shape.0)?,
        spacing_sample: sample(spacing_bytes, layout.spacing.0)?,
        origin: set.origin.clone(),
    };
    Ok((DeviceBlock::from_columns(columns), measured))
}

#[cfg(test)]
mod tests {
    use super::StateLayout;

    /// The buffer as the kernels fill it, read back: extremes, bad rows and
    /// each component's samples land where `read` finds them.
    #[test]
    fn the_state_buffer_reads_back_what_the_kernels_write() {
        let (n, components, width) = (1_000_003, 3, 4);
        let layout = StateLayout::new(n, components, width);
        assert_eq!(layout.shape, (n.div_ceil(crate::data::sample_step(n)), crate::data::sample_step(n)));
        assert_eq!(layout.spacing, (n.div_ceil(crate::data::spacing_step(n)), crate::data::spacing_step(n)));
        let mut words = layout.initial(&[11, 22, 33]);
        assert_eq!(words.len(), layout.sample_word());
        let (keys, bad, _) = layout.read(&{
            let mut w = words.clone();
            w.resize(layout.words(), 0);
            w
        });
        assert_eq!((keys, bad), (vec![[u64::MAX, 0]; 3], None));
        words.resize(layout.words(), 0);
        // As the kernels write: component c's keys, 7 bad rows from row 5,
        // and value (sample s, component c, row k) = s << 24 | c << 20 | k.
        for c in 0..components {
            words[components + 2 * c] = 100 + c as u64;
            words[components + 2 * c + 1] = 200 + c as u64;
        }
        words[3 * components] = 7 << 32 | 5;
        let mut bytes: Vec<u8> = Vec::new();
        for (s, (rows, _)) in [layout.shape, layout.spacing].into_iter().enumerate() {
            for c in 0..components {
                for k in 0..rows {
                    bytes.extend(((s << 24 | c << 20 | k) as u32).to_le_bytes());
                }
            }
        }
        for (i, b) in bytes.iter().enumerate() {
            let w = layout.sample_word() + i / 8;
            words[w] |= u64::from(*b) << (8 * (i % 8));
        }
        let (keys, bad, samples) = layout.read(&words);
        assert_eq!(keys, (0..3).map(|c| [100 + c, 200 + c]).collect::<Vec<_>>());
        assert_eq!(bad, Some((5, 7)));
        for (s, (rows, _)) in [layout.shape, layout.spacing].into_iter().enumerate() {
            assert_eq!(samples[s].len(), components);
            for (c, part) in samples[s].iter().enumerate() {
                let values: Vec<u32> =
                    part.chunks_exact(4).map(|b| u32::from_le_bytes(b.try_into().unwrap())).collect();
                assert_eq!(
                    values,
                    (0..rows).map(|k| (s << 24 | c << 20 | k) as u32).collect::<Vec<_>>(),
                    "sample {s} component {c}"
                );
            }
        }
    }
}
