//! The per-query lists' device buffers (`stage::output::topk`): a query
//! block's K best on one stream, refined launch after launch, downloaded or
//! kept on the GPU when its units have run.

use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DriverError};

use super::download::{Staging, download_parts};
use crate::backend::cuda::launch::PushArg;
use crate::data::Column;
use crate::outcome::OnGpu;
use crate::spec::Scalar;
use crate::stage::output::topk::Arg;

/// The lists of one query block on one stream.
pub struct DeviceTopK {
    values: CudaSlice<u8>,
    indices: CudaSlice<u32>,
    /// 1 until the query block's first launch.
    fresh: u32,
    k: usize,
    value: Scalar,
}

impl DeviceTopK {
    /// Room for `queries` queries of `k` entries of `value`: zeroed, or,
    /// where `written` (a search of rings, whose one launch writes every
    /// query's whole list, `templates/visit/rings.cu`), left as the pool
    /// hands it: 10M lists of 16 are 1.3 GB not written twice.
    pub fn new(
        stream: &Arc<CudaStream>,
        queries: usize,
        k: u32,
        value: Scalar,
        written: bool,
    ) -> Result<Self, DriverError> {
        let n = queries.max(1) * k as usize;
        let bytes = n * value.bytes() as usize;
        let (values, indices) = match written {
            // SAFETY: every entry is written by the search before anything reads it.
            true => unsafe { (stream.alloc::<u8>(bytes)?, stream.alloc::<u32>(n)?) },
            false => (stream.alloc_zeros::<u8>(bytes)?, stream.alloc_zeros::<u32>(n)?),
        };
        Ok(DeviceTopK { values, indices, fresh: 1, k: k as usize, value })
    }

    pub fn arg(&self, arg: Arg) -> &dyn PushArg {
        match arg {
            Arg::Values => &self.values,
            Arg::Indices => &self.indices,
            Arg::Fresh => &self.fresh,
        }
    }

    /// The next launch begins a query block: its lists start empty.
    pub fn begin_query_block(&mut self) {
        self.fresh = 1;
    }

    /// A launch has run: the next refines its lists.
    pub fn launched(&mut self) {
        self.fresh = 0;
    }

    /// The lists of the first `queries` queries, left where they are (the
    /// last launch on `stream` has finished): their addresses, and this
    /// buffer as their owner.
    pub fn keep(self, stream: &Arc<CudaStream>, queries: usize) -> OnGpu {
        let values = self.values.device_ptr(stream).0;
        let ids = self.indices.device_ptr(stream).0;
        OnGpu {
            ordinal: stream.context().ordinal(),
            k: self.k,
            queries,
            value: self.value,
            values,
            ids,
            owner: Arc::new(self),
        }
    }

    /// The lists of the first `queries` queries: (values, indices), through
    /// the GPU's pinned buffers where they are free (`staging`).
    pub fn download(
        &self,
        stream: &Arc<CudaStream>,
        queries: usize,
        staging: Option<&Mutex<Staging>>,
    ) -> Result<(Column, Vec<u32>), DriverError> {
        let n = queries * self.k;
        let w = self.value.bytes() as usize;
        // SAFETY: the indices' u32 words, viewed as their bytes.
        let id_bytes = unsafe { self.indices.transmute::<u8>(n * 4) }.expect("room for every query's list");
        // Both columns in one pass through the pinned buffers, the bus busy throughout.
        let mut ids = None;
        let values = Column::from_bytes_filled(self.value, n, |value_room| {
            ids = Some(Column::from_bytes_filled(Scalar::U32, n, |id_room| {
                download_parts(stream, vec![(self.values.slice(..n * w), value_room), (id_bytes, id_room)], staging)
            })?);
            Ok::<(), DriverError>(())
        })?;
        let Some(Column::U32(ids)) = ids else { unreachable!("a column of u32, filled") };
        Ok((values, ids))
    }
}
