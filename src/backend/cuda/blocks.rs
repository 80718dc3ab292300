//! One block of a set on the device, and the host memory its uploads go through.

use std::sync::Arc;

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DriverError, PinnedHostSlice};

use crate::data::PointSet;
use crate::stage::input::PAD_POINTS;

/// One block of a set on the device: one padded array per component, and the
/// host memory its uploads go through.
pub struct DeviceBlock {
    pub columns: Vec<CudaSlice<u8>>,
    staging: Staging,
    /// (tag, block) now loaded, so that a block used twice is uploaded once.
    holds: Option<(u32, usize)>,
}

/// Host memory the uploads go through: pinned where a buffer is loaded again
/// and again (streamed blocks), so that copies run at bus speed; none for a
/// set loaded once, which is copied from the columns themselves, where
/// pinning (about a millisecond per MB on the H200) would cost more than it saves.
enum Staging {
    Pinned(Vec<PinnedHostSlice<u8>>),
    Direct,
}

impl DeviceBlock {
    /// Room for `max_points` points of `set`'s components; `reloaded` when
    /// more than one block of the set will pass through it.
    pub fn new(
        ctx: &Arc<CudaContext>,
        stream: &Arc<CudaStream>,
        set: &PointSet,
        max_points: usize,
        reloaded: bool,
    ) -> Result<Self, DriverError> {
        let padded = max_points.max(1).next_multiple_of(PAD_POINTS);
        let mut columns = Vec::new();
        let sizes: Vec<usize> = set.columns.iter().map(|c| padded * c.scalar().bytes() as usize).collect();
        for &bytes in &sizes {
            columns.push(stream.alloc_zeros::<u8>(bytes)?);
        }
        let staging = if reloaded {
            // SAFETY: pinned memory is written before every upload reads it.
            Staging::Pinned(
                sizes.iter().map(|&bytes| unsafe { ctx.alloc_pinned::<u8>(bytes) }).collect::<Result<_, _>>()?,
            )
        } else {
            Staging::Direct
        };
        Ok(DeviceBlock { columns, staging, holds: None })
    }

    /// A block whose columns were made on the device (a grid's sorted sets):
    /// nothing is ever uploaded through it.
    pub fn from_columns(columns: Vec<CudaSlice<u8>>) -> Self {
        DeviceBlock { columns, staging: Staging::Direct, holds: Some((u32::MAX, usize::MAX)) }
    }

    /// Uploads rows [start, end) of `set` (zeros after them up to the padding),
    /// unless `(tag, block)` is what the buffers already hold.
    pub fn load(
        &mut self,
        stream: &Arc<CudaStream>,
        set: &PointSet,
        tag: (u32, usize),
        (start, end): (usize, usize),
    ) -> Result<(), DriverError> {
        if self.holds == Some(tag) {
            return Ok(());
        }
        let padded = (end - start).max(1).next_multiple_of(PAD_POINTS);
        for (k, (col, dev)) in set.columns.iter().zip(&mut self.columns).enumerate() {
            let bytes = padded * col.scalar().bytes() as usize;
            match &mut self.staging {
                // The previous upload from this buffer has finished: every unit ends with a synchronize.
                Staging::Pinned(pinned) => {
                    let host = &mut pinned[k].as_mut_slice()?[..bytes];
                    col.write_bytes(start, end - start, host);
                    stream.memcpy_htod(&*host, &mut dev.slice_mut(..bytes))?;
                }
                // Rows past the end keep the zeros the buffer was made with (a
                // block loaded once), or an earlier block's rows: padding either way.
                Staging::Direct => {
                    let rows = col.bytes(start, end - start);
                    if !rows.is_empty() {
                        stream.memcpy_htod(rows, &mut dev.slice_mut(..rows.len()))?;
                    }
                }
            }
        }
        self.holds = Some(tag);
        Ok(())
    }
}
