//! Data a run keeps on a GPU for its whole life: inputs that fit whole, and
//! a grid's units, ranges and cells.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DriverError};

use super::blocks::DeviceBlock;
use super::launch::{GridArgs, RingArgs};
use super::{Doing, GpuError, Located};
use crate::data::{Inputs, PointSet};
use crate::index::{self, Grid};
use crate::stage::RingShape;
use crate::stage::input::PAD_POINTS;

/// A GPU's copy of inputs that fit it whole (each set one block): uploaded
/// once while the kernels compile, and read by every stream of the GPU.
pub(super) struct Resident {
    pub(super) a: DeviceBlock,
    /// The second set, for two.
    pub(super) b: Option<DeviceBlock>,
    pub(super) upload_s: f64,
    /// The stream its upload was queued on, until [`Resident::wait`] waits for it.
    pub(super) queued: Option<Arc<CudaStream>>,
    /// The grid, where the blocks walk one (`a` and `b` are then in cell order).
    pub(super) grid: Option<DeviceGrid>,
}

/// A grid on one GPU: its units and ranges (`index::Unit`, as u32 words), the
/// permutations that name sorted points by their input index, and a sample
/// of units that sizes the direct output buffer.
pub(super) struct DeviceGrid {
    /// Own points [lo, hi) and ranges [first, end), 4 words per unit.
    pub(super) units: CudaSlice<u32>,
    /// Sorted points [lo, hi) of the other set, 2 words per range.
    pub(super) ranges: CudaSlice<u32>,
    pub(super) perm_a: CudaSlice<u32>,
    /// The other set's, for two sets.
    pub(super) perm_b: Option<CudaSlice<u32>>,
    /// Units spread over the grid's order (most pairs first), 4 words each.
    pub(super) sample: CudaSlice<u32>,
    /// The sample's units and the pairs they visit.
    pub(super) sample_units: u32,
    pub(super) sample_pairs: u64,
    /// What a search of rings reads besides (KNN).
    pub(super) rings: Option<DeviceRings>,
}

/// A KNN grid's cells on one GPU: the other set's cell starts, the cell of
/// each of A's sorted points, and the grid's shape.
pub(super) struct DeviceRings {
    pub(super) cell_start: CudaSlice<u32>,
    pub(super) cell_a: CudaSlice<u32>,
    pub(super) shape: RingShape,
}

impl DeviceGrid {
    /// The grid's buffers for a launch from unit `first` on (`units` may be its sample).
    pub(super) fn args<'a>(&'a self, units: &'a CudaSlice<u32>, first: u32) -> GridArgs<'a> {
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
    pub(super) fn upload(
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
pub(super) fn upload_words(stream: &Arc<CudaStream>, words: &[u32]) -> Result<CudaSlice<u32>, DriverError> {
    stream.clone_htod(if words.is_empty() { &[0u32][..] } else { words })
}

/// Most units of the grid whose pairs sample the selectivity of a pairs problem.
pub(super) const SAMPLE_UNITS: usize = 256;
/// Pairs the sample visits, about: dense units visit millions of pairs
/// each, and 256 of them once found 5.6e8 pairs in 20 launches, 0.8 s of
/// a 2 s run.
pub(super) const SAMPLE_PAIRS: u64 = 1 << 26;

/// The units (numbered in the grid's order, most pairs first) that sample
/// its selectivity: evenly spread over all of them (the middle of each of
/// m equal runs), as many as visit about [`SAMPLE_PAIRS`] pairs on average,
/// from 1 to [`SAMPLE_UNITS`]. The densest units are no sample: their wide
/// neighbourhoods pass the smallest share (once the pool came out too small).
pub(super) fn sample_units(total: usize, pairs: impl Fn(usize) -> u64) -> Vec<usize> {
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
pub(super) fn upload_sets(
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
    pub(super) fn of(ctx: &Arc<CudaContext>, inputs: Located) -> Result<Resident, GpuError> {
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
    pub(super) fn upload(ctx: &Arc<CudaContext>, inputs: &Inputs) -> Result<Resident, GpuError> {
        let start = Instant::now();
        let (a, b, stream) = upload_sets(ctx, (&inputs.a, inputs.b.as_ref()), 0, "uploading points")?;
        Ok(Resident { a, b, upload_s: start.elapsed().as_secs_f64(), queued: Some(stream), grid: None })
    }

    /// Waits for its queued upload, which every stream after reads; the
    /// wait counts in `upload_s`.
    pub(super) fn wait(&mut self) -> Result<(), GpuError> {
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
    pub(super) fn upload_grid(ctx: &Arc<CudaContext>, grid: &Grid, rings: bool) -> Result<Resident, GpuError> {
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
