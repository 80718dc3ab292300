//! A cut-off problem's grid, made on the GPU from the inputs it already
//! holds (`templates/index/grid.cu`): the same cells as the host's
//! (`index::Layout`), a counting sort of each set by cell, and the units:
//! runs of at most B x R own points along a row of cells, with the ranges of
//! the other set's points in the neighbouring cells. Only the units' pairs
//! come back to the host, which orders the units (most pairs first) and
//! cuts them into pieces.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr, LaunchConfig, PushKernelArg};

use super::blocks::DeviceBlock;
use super::{DeviceGrid, DeviceRings, Doing, GpuError};
use crate::backend::cuda::nvrtc;
use crate::cache::{Cache, Key, Memo};
use crate::codegen;
use crate::device::Device;
use crate::index::{self, IndexKind, Layout};
use crate::schedule::pieces::GridWork;
use crate::spec::Scalar;
use crate::stage::input::PAD_POINTS;
use crate::stage::visit::Visit;

/// Values one block of the scan takes (`SCAN_THREADS` x `SCAN_PER_THREAD`).
const SCAN_BLOCK: u32 = 2048;

/// The builder's kernels on one GPU.
pub(super) struct Builder {
    cells: CudaFunction,
    scan_blocks: CudaFunction,
    scan_add: CudaFunction,
    scatter: CudaFunction,
    gather4: CudaFunction,
    gather8: CudaFunction,
    row_units: CudaFunction,
    units: CudaFunction,
}

impl Builder {
    /// Compiles (once per architecture) and loads (once per GPU and process,
    /// one module for all its kernels) the builder.
    pub(super) fn new(ctx: &Arc<CudaContext>, dev: &Device, cache: &Cache) -> Result<Arc<Builder>, GpuError> {
        // Keyed by the GPU before anything is rendered or read: a trajectory's
        // frames find it in memory.
        static BUILDERS: Memo<Builder> = Memo::new();
        BUILDERS.get_or_try(Key::of(&[dev.arch().as_bytes(), &ctx.ordinal().to_le_bytes()]), || {
            let kernel = codegen::render_grid_builder();
            let (cubin, _) = nvrtc::cubin(&kernel, &dev.arch(), cache)?;
            let module =
                ctx.load_module(cudarc::nvrtc::Ptx::from_binary(cubin.to_vec())).doing("loading the grid builder")?;
            let f = |entry: &str| module.load_function(entry).doing("finding the grid builder's kernels");
            Ok(Builder {
                cells: f("twobs_grid_cells")?,
                scan_blocks: f("twobs_grid_scan_blocks")?,
                scan_add: f("twobs_grid_scan_add")?,
                scatter: f("twobs_grid_scatter")?,
                gather4: f("twobs_grid_gather4")?,
                gather8: f("twobs_grid_gather8")?,
                row_units: f("twobs_grid_row_units")?,
                units: f("twobs_grid_units")?,
            })
        })
    }
}

/// `struct Axes` of the builder, field for field.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct AxesArg {
    column: [u64; 3],
    kind: [u32; 3],
    origin: [f64; 3],
    side: [f64; 3],
    cells: [u32; 3],
    periodic: [u32; 3],
    count: u32,
    tilted: [u32; 3],
    normal: [[f64; 3]; 3],
    box_column: [u64; 3],
    box_kind: [u32; 3],
    box_count: u32,
}

// SAFETY: plain old data laid out as the CUDA struct (repr(C), same order and types).
unsafe impl cudarc::driver::DeviceRepr for AxesArg {}

/// `struct Stencil` of the builder, field for field.
#[repr(C)]
#[derive(Clone, Copy)]
struct StencilArg {
    axes: u32,
    cells: [i32; 3],
    periodic: [u32; 3],
    rows: u32,
    offset: [[i32; 2]; MAX_ROWS],
    diagonal: u32,
    skip_self: u32,
    run: u32,
    stride: u32,
    reach: i32,
}

/// `MAX_ROWS` of the builder: the rows within reach 4 over axes 1 and 2.
const MAX_ROWS: usize = 81;

impl Default for StencilArg {
    fn default() -> StencilArg {
        StencilArg {
            axes: 0,
            cells: [0; 3],
            periodic: [0; 3],
            rows: 0,
            offset: [[0; 2]; MAX_ROWS],
            diagonal: 0,
            skip_self: 0,
            run: 0,
            stride: 0,
            reach: 0,
        }
    }
}

// SAFETY: as for AxesArg.
unsafe impl cudarc::driver::DeviceRepr for StencilArg {}

/// One set sorted into the cells on the device.
struct SortedSet {
    block: DeviceBlock,
    perm: CudaSlice<u32>,
    /// Cell c's points are [start[c], start[c + 1]).
    start: CudaSlice<u32>,
    /// The cell of each sorted point.
    cell: CudaSlice<u32>,
}

/// What the build leaves on the GPU, and what the host needs of it.
pub(super) struct Built {
    pub(super) a: DeviceBlock,
    pub(super) b: Option<DeviceBlock>,
    pub(super) grid: DeviceGrid,
    /// Each unit's pairs and steps of the GPU's share, most pairs first.
    pub(super) work: Vec<GridWork>,
    /// Pairs of the whole grid, and of the GPU's share.
    pub(super) pairs: u128,
    pub(super) share_pairs: u128,
}

fn launch_cfg(threads: u32, blocks: u32) -> LaunchConfig {
    LaunchConfig { grid_dim: (blocks.max(1), 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 }
}

/// Enough blocks of 256 threads to stride over n items.
fn stride_cfg(n: usize) -> LaunchConfig {
    launch_cfg(256, (n.div_ceil(256) as u32).clamp(1, 65536))
}

impl Builder {
    /// Exclusive scan of `n` values of `input` into `out`.
    fn scan(
        &self,
        stream: &Arc<CudaStream>,
        input: &CudaSlice<u32>,
        out: &mut CudaSlice<u32>,
        n: u32,
    ) -> Result<(), GpuError> {
        let blocks = n.div_ceil(SCAN_BLOCK).max(1);
        let mut sums = stream.alloc_zeros::<u32>(blocks as usize).doing("scanning")?;
        let mut b = stream.launch_builder(&self.scan_blocks);
        b.arg(input).arg(&mut *out).arg(&n).arg(&mut sums);
        // SAFETY: (const unsigned* in, unsigned* out, unsigned n, unsigned* sums): n values each, a sum per block.
        unsafe { b.launch(launch_cfg(1024, blocks)) }.doing("scanning")?;
        if blocks > 1 {
            let mut scanned = stream.alloc_zeros::<u32>(blocks as usize).doing("scanning")?;
            self.scan(stream, &sums, &mut scanned, blocks)?;
            let mut b = stream.launch_builder(&self.scan_add);
            b.arg(&mut *out).arg(&n).arg(&scanned);
            // SAFETY: (unsigned* out, unsigned n, const unsigned* scanned_sums): a sum per block of out.
            unsafe { b.launch(launch_cfg(256, n.div_ceil(256))) }.doing("scanning")?;
        }
        Ok(())
    }

    /// Sorts a set of `len` points of `scalars` (on the device as `raw`) into the cells of `axes`.
    fn sort(
        &self,
        stream: &Arc<CudaStream>,
        (len, scalars): (usize, &[Scalar]),
        raw: &DeviceBlock,
        axes: &[index::Axis],
        cells: u32,
    ) -> Result<SortedSet, GpuError> {
        let doing = "sorting points into cells";
        let n = len as u32;
        let mut arg = AxesArg { count: axes.len() as u32, ..Default::default() };
        let mut ptrs = Vec::new();
        let kind = |c: usize| match scalars[c] {
            Scalar::F32 => 0,
            Scalar::F64 => 1,
            Scalar::I32 => 2,
            Scalar::I64 => 3,
            Scalar::U32 => 4,
        };
        if axes.iter().any(|a| a.normal.is_some()) {
            arg.box_count = scalars.len().min(3) as u32;
            for c in 0..arg.box_count as usize {
                let (ptr, record) = raw.columns[c].device_ptr(stream);
                ptrs.push(record);
                arg.box_column[c] = ptr;
                arg.box_kind[c] = kind(c);
            }
        }
        for (d, axis) in axes.iter().enumerate() {
            let (ptr, record) = raw.columns[axis.component].device_ptr(stream);
            ptrs.push(record);
            arg.column[d] = ptr;
            arg.kind[d] = kind(axis.component);
            if let Some(normal) = axis.normal {
                arg.tilted[d] = 1;
                arg.normal[d] = normal;
            }
            arg.origin[d] = axis.origin;
            arg.side[d] = axis.side;
            arg.cells[d] = axis.cells;
            arg.periodic[d] = u32::from(axis.periodic);
        }
        // One more count than cells: the scan's last value is then the total.
        let mut count = stream.alloc_zeros::<u32>(cells as usize + 1).doing(doing)?;
        let mut cell_of = written(stream, len).doing(doing)?;
        let mut b = stream.launch_builder(&self.cells);
        b.arg(&arg).arg(&n).arg(&mut cell_of).arg(&mut count);
        // SAFETY: (Axes, unsigned n, unsigned* cell_of, unsigned* count): n cells, cells + 1 counts;
        // the axes' columns hold n values of their kinds.
        unsafe { b.launch(stride_cfg(len)) }.doing(doing)?;
        drop(ptrs);
        let mut start = stream.alloc_zeros::<u32>(cells as usize + 1).doing(doing)?;
        self.scan(stream, &count, &mut start, cells + 1)?;
        let mut next = stream.clone_dtod(&start).doing(doing)?;
        let mut perm = written(stream, len).doing(doing)?;
        let mut cell = written(stream, len).doing(doing)?;
        let mut b = stream.launch_builder(&self.scatter);
        b.arg(&cell_of).arg(&n).arg(&mut next).arg(&mut perm).arg(&mut cell);
        // SAFETY: (const unsigned* cell_of, unsigned n, unsigned* next, unsigned* perm, unsigned* sorted_cell).
        unsafe { b.launch(stride_cfg(len)) }.doing(doing)?;
        // The sorted columns, padded by a tile past the end (zeros), as a resident block.
        let padded = (len + PAD_POINTS).next_multiple_of(PAD_POINTS);
        let mut columns = Vec::new();
        for (c, scalar) in scalars.iter().enumerate() {
            let width = scalar.bytes() as usize;
            let mut to = zero_padded(stream, len * width, padded * width).doing(doing)?;
            let gather = if width == 8 { &self.gather8 } else { &self.gather4 };
            let mut b = stream.launch_builder(gather);
            b.arg(&raw.columns[c]).arg(&mut to).arg(&perm).arg(&n);
            // SAFETY: (const T* from, T* to, const unsigned* perm, unsigned n), T of `width` bytes: both hold n.
            unsafe { b.launch(stride_cfg(len)) }.doing(doing)?;
            columns.push(to);
        }
        Ok(SortedSet { block: DeviceBlock::from_columns(columns), perm, start, cell })
    }
}

/// Room for `n` words that the next kernel writes every one of (the cells
/// of n points, and the scatter's n slots, a permutation of 0..n): not
/// zeroed first, but for n = 0 (one word, zero).
fn written(stream: &Arc<CudaStream>, n: usize) -> Result<CudaSlice<u32>, cudarc::driver::DriverError> {
    match n {
        0 => stream.alloc_zeros::<u32>(1),
        // SAFETY: the caller's next kernel writes all n words before any is read.
        _ => unsafe { stream.alloc::<u32>(n) },
    }
}

/// `bytes` bytes whose first `written` the next kernel writes (a column's
/// values), the rest (the padding past a set's last point) zeroed.
pub(super) fn zero_padded(
    stream: &Arc<CudaStream>,
    written: usize,
    bytes: usize,
) -> Result<CudaSlice<u8>, cudarc::driver::DriverError> {
    assert!(written <= bytes, "{written} bytes written into a column of {bytes}");
    // SAFETY: bytes [0, written) are written by the caller's next kernel before any is read; the rest is zeroed here.
    let mut column = unsafe { stream.alloc::<u8>(bytes) }?;
    if written < bytes {
        stream.memset_zeros(&mut column.slice_mut(written..))?;
    }
    Ok(column)
}

/// Units `mine` in the order the streams take them: most pairs first, to
/// within a sixteenth of an octave (the pair count's float exponent and
/// first four bits), in row order among equals; one for one grid. A
/// counting pass: sorting a KNN grid's 30,000 units by their exact counts
/// took 0.2-0.6 ms on the H200's host, on one core or on all, for an order
/// that only spreads the long units over the streams and multiprocessors
/// first.
fn largest_first(mine: std::ops::Range<usize>, pairs: &[u64]) -> Vec<usize> {
    // Monotone in the count (every u64 is a non-negative float below 2^64).
    let bucket = |p: u64| ((p as f64).to_bits() >> 48) as usize;
    let Some(top) = mine.clone().map(|u| bucket(pairs[u])).max() else { return Vec::new() };
    let least = mine.clone().map(|u| bucket(pairs[u])).min().unwrap_or(top);
    // Units in each bucket, largest bucket first, then where each starts.
    let mut start = vec![0usize; top - least + 2];
    for u in mine.clone() {
        start[top - bucket(pairs[u]) + 1] += 1;
    }
    for b in 1..start.len() {
        start[b] += start[b - 1];
    }
    let mut order = vec![0usize; mine.len()];
    for u in mine {
        let slot = &mut start[top - bucket(pairs[u])];
        order[*slot] = u;
        *slot += 1;
    }
    order
}

/// Which of the grid's units a GPU takes: all of them, or part `part` of
/// consecutive rows split by their pairs in the proportions of `weights`
/// (`schedule::split_rows`).
#[derive(Debug, Clone, Copy)]
pub(super) enum Share<'a> {
    All,
    Rows { part: usize, weights: &'a [f64] },
}

/// Builds the grid of `layout` on the GPU, from the sets it holds (`raw_a`,
/// `raw_b`, of `n_a` and `n_b` points of `scalars`), with units of at most `run` own points; the GPU keeps the
/// units of its `share`.
#[allow(clippy::too_many_arguments, reason = "the grid's inputs, each once")]
pub(super) fn build(
    builder: &Builder,
    stream: &Arc<CudaStream>,
    layout: &Layout,
    scalars: &[Scalar],
    (n_a, raw_a): (usize, &DeviceBlock),
    b: Option<(usize, &DeviceBlock)>,
    visit: Visit,
    (run, tile): (u32, u32),
    share: Share,
) -> Result<Built, GpuError> {
    let doing = "making the grid's units";
    let cells = layout.cells as u32;
    let a = builder.sort(stream, (n_a, scalars), raw_a, &layout.axes, cells)?;
    let b = b.map(|(n, raw)| builder.sort(stream, (n, scalars), raw, &layout.axes, cells)).transpose()?;
    let other = b.as_ref().unwrap_or(&a);

    let k = layout.axes.len();
    let row_len = layout.axes.first().map_or(1, |x| x.cells);
    let rows = cells / row_len;
    let diagonal = visit == Visit::LowerTriangle;
    let offsets = index::stencil_rows(k, diagonal, layout.reach);
    assert!(
        offsets.len() <= MAX_ROWS,
        "reach {} meets {} rows, more than the builder's {MAX_ROWS}",
        layout.reach,
        offsets.len()
    );
    let mut st = StencilArg {
        reach: layout.reach as i32,
        axes: k as u32,
        rows: offsets.len() as u32,
        diagonal: u32::from(diagonal),
        skip_self: u32::from(visit == Visit::AllPairs),
        run,
        // Two ranges a row where it wraps, and the own row's wrap.
        stride: 2 * offsets.len() as u32 + 1,
        ..Default::default()
    };
    for (d, axis) in layout.axes.iter().enumerate() {
        st.cells[d] = axis.cells as i32;
        st.periodic[d] = u32::from(axis.periodic);
    }
    for (o, off) in offsets.iter().enumerate() {
        st.offset[o] = [off[0] as i32, off[1] as i32];
    }
    // Units per row, scanned into each row's first unit.
    let mut per_row = stream.alloc_zeros::<u32>(rows as usize + 1).doing(doing)?;
    let mut bld = stream.launch_builder(&builder.row_units);
    bld.arg(&a.start).arg(&rows).arg(&row_len).arg(&run).arg(&mut per_row);
    // SAFETY: (const unsigned* cell_start, unsigned rows, unsigned row_len, unsigned run, unsigned* units).
    unsafe { bld.launch(launch_cfg(256, rows.div_ceil(256))) }.doing(doing)?;
    let mut unit_start = stream.alloc_zeros::<u32>(rows as usize + 1).doing(doing)?;
    builder.scan(stream, &per_row, &mut unit_start, rows + 1)?;
    let total = stream.clone_dtoh(&unit_start.slice(rows as usize..)).doing(doing)?[0];
    let n_units = total.max(1) as usize;
    let mut ranges = stream.alloc_zeros::<u32>(2 * n_units * st.stride as usize).doing(doing)?;
    // The units (4 words, 2 of these each), their pairs and their partners
    // in one buffer, read back in one download.
    let mut found = stream.alloc_zeros::<u64>(4 * n_units).doing(doing)?;
    {
        let (mut units, mut counts) = found.split_at_mut(2 * n_units);
        let (mut pairs, mut partners) = counts.split_at_mut(n_units);
        let mut bld = stream.launch_builder(&builder.units);
        bld.arg(&st).arg(&unit_start).arg(&rows).arg(&a.start).arg(&a.cell).arg(&other.start).arg(&total);
        bld.arg(&mut units).arg(&mut ranges).arg(&mut pairs).arg(&mut partners);
        // SAFETY: (Stencil, const unsigned* unit_start, unsigned rows, const unsigned* start_a,
        // const unsigned* sorted_cell_a, const unsigned* start_b, unsigned total_units, uint4* units,
        // uint2* ranges, u64* pairs, u64* partners): total units, `stride` ranges each; the units'
        // view starts the buffer (aligned for uint4), 2 words each.
        unsafe { bld.launch(launch_cfg(256, total.div_ceil(256))) }.doing(doing)?;
    }

    // The units of its share (units are numbered in row order), most pairs
    // first (`largest_first`).
    let found = stream.clone_dtoh(&found).doing(doing)?;
    let (unit_words, counts) = found.split_at(2 * n_units);
    let words: Vec<u32> = unit_words.iter().flat_map(|&w| [w as u32, (w >> 32) as u32]).collect();
    let (pairs, partners) = counts.split_at(n_units);
    let total = total as usize;
    let mine = match share {
        Share::All => 0..total,
        Share::Rows { part, weights } => {
            let row_start = stream.clone_dtoh(&unit_start).doing(doing)?;
            crate::schedule::split_rows(&row_start, &pairs[..total], weights)[part].clone()
        }
    };
    let order = largest_first(mine, &pairs[..total]);
    let sorted: Vec<u32> = order.iter().flat_map(|&u| words[4 * u..4 * u + 4].iter().copied()).collect();
    let tile = u64::from(tile);
    let work: Vec<GridWork> = order
        .iter()
        .map(|&u| GridWork::new(pairs[u], partners[u], words[4 * u + 3] - words[4 * u + 2], tile))
        .collect();
    let (b_block, perm_b, b_start) = match b {
        Some(s) => (Some(s.block), Some(s.perm), Some(s.start)),
        None => (None, None, None),
    };
    let mut grid = DeviceGrid::upload(stream, &sorted, |k| pairs[order[k]], ranges, (a.perm, perm_b)).doing(doing)?;
    let share_pairs = order.iter().map(|&u| u128::from(pairs[u])).sum();
    if layout.kind == IndexKind::Rings {
        grid.rings = Some(DeviceRings {
            cell_start: b_start.unwrap_or(a.start),
            cell_a: a.cell,
            shape: index::ring_shape(&layout.axes),
        });
    }
    stream.synchronize().doing(doing)?;
    let all_pairs = pairs[..total].iter().map(|&p| p as u128).sum();
    Ok(Built { a: a.block, b: b_block, grid, pairs: all_pairs, share_pairs, work })
}

#[cfg(test)]
mod tests {
    use super::largest_first;

    #[test]
    fn units_come_largest_first_to_within_a_sixteenth_of_an_octave_and_in_row_order_among_equals() {
        let mut state = 0x853c_49e6_748f_ea9bu64;
        let mut pairs: Vec<u64> = (0..50_000)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (state >> 33) >> ((state >> 10) % 31)
            })
            .collect();
        pairs.extend([0, 0, 1, u64::MAX, u64::MAX - 1, 1 << 40]);
        for mine in [0..pairs.len(), 100..20_000, 7..7] {
            let order = largest_first(mine.clone(), &pairs);
            let mut seen = order.clone();
            seen.sort_unstable();
            assert_eq!(seen, mine.clone().collect::<Vec<_>>(), "each unit of the share once");
            for w in order.windows(2) {
                let (a, b) = (pairs[w[0]] as f64, pairs[w[1]] as f64);
                // Never a unit more than 1/16 of an octave larger after a smaller one.
                assert!(b <= a * (1.0 + 1.0 / 16.0) + 1.0, "{a} before {b}");
                if (a.to_bits() >> 48) == (b.to_bits() >> 48) {
                    assert!(w[0] < w[1], "row order among units of one bucket");
                }
            }
        }
    }
}
