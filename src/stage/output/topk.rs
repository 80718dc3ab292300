//! Per-query top-K: each query thread keeps its K best (value, index) pairs in
//! registers, starting from the lists already in the output so that launches
//! over further blocks of the other set refine them, and writes them back
//! once. A query block's lists start empty (the value type's worst value, no
//! index) and are downloaded when all its units have run; each query's list
//! comes from the one stream that ran its block.
//!
//! Fragment contract, beyond [`super`]'s: the contribution fragment defines
//! `K` and `struct TopK` with `offer(value, index)`.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DriverError};
use serde::Serialize;

use super::PushArg;
use crate::spec::Scalar;
use crate::stage::{KernelParam, Source};

/// The stage's kernel arguments, in the order of the kernel's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Arg {
    /// K values per query, best first.
    Values,
    /// K whole-input indices per query.
    Indices,
}

pub fn params() -> Vec<KernelParam> {
    vec![
        KernelParam {
            name: "values".into(),
            ctype: "Value*".into(),
            source: Source::Output(super::Arg::TopK(Arg::Values)),
        },
        KernelParam {
            name: "indices".into(),
            ctype: "unsigned*".into(),
            source: Source::Output(super::Arg::TopK(Arg::Indices)),
        },
    ]
}

/// The lists of one query block on one stream.
pub struct DeviceTopK {
    values: CudaSlice<u8>,
    indices: CudaSlice<u32>,
    k: usize,
    value: Scalar,
}

impl DeviceTopK {
    /// Room for `queries` queries of `k` entries of `value`.
    pub fn new(stream: &Arc<CudaStream>, queries: usize, k: u32, value: Scalar) -> Result<Self, DriverError> {
        let n = queries.max(1) * k as usize;
        Ok(DeviceTopK {
            values: stream.alloc_zeros::<u8>(n * value.bytes() as usize)?,
            indices: stream.alloc_zeros::<u32>(n)?,
            k: k as usize,
            value,
        })
    }

    pub fn arg(&self, arg: Arg) -> &dyn PushArg {
        match arg {
            Arg::Values => &self.values,
            Arg::Indices => &self.indices,
        }
    }

    /// Empties the lists of the first `queries` queries: every entry ranks after any real value.
    pub fn reset(&mut self, stream: &Arc<CudaStream>, queries: usize) -> Result<(), DriverError> {
        let n = queries * self.k;
        let worst = worst_bytes(self.value);
        let values: Vec<u8> = worst.iter().copied().cycle().take(worst.len() * n).collect();
        stream.memcpy_htod(&values, &mut self.values.slice_mut(..values.len()))?;
        stream.memcpy_htod(&vec![u32::MAX; n], &mut self.indices.slice_mut(..n))?;
        Ok(())
    }

    /// The lists of the first `queries` queries: (values as f64, indices).
    pub fn download(&self, stream: &Arc<CudaStream>, queries: usize) -> Result<(Vec<f64>, Vec<u32>), DriverError> {
        let n = queries * self.k;
        let w = self.value.bytes() as usize;
        let bytes = stream.clone_dtoh(&self.values.slice(..n * w))?;
        let ids = stream.clone_dtoh(&self.indices.slice(..n))?;
        stream.synchronize()?;
        let values = bytes.chunks_exact(w).map(|b| self.value.decode_f64(b)).collect();
        Ok((values, ids))
    }
}

/// The value type's worst value, little-endian: +inf, or the largest integer.
fn worst_bytes(value: Scalar) -> Vec<u8> {
    match value {
        Scalar::F32 => f32::INFINITY.to_le_bytes().to_vec(),
        Scalar::F64 => f64::INFINITY.to_le_bytes().to_vec(),
        Scalar::I32 => i32::MAX.to_le_bytes().to_vec(),
        Scalar::I64 => i64::MAX.to_le_bytes().to_vec(),
        Scalar::U32 => u32::MAX.to_le_bytes().to_vec(),
    }
}
