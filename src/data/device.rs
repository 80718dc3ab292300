//! Points that already lie in a GPU's memory: an array of another library
//! (CuPy, PyTorch, Numba through `__cuda_array_interface__`; JAX through
//! DLPack), described by its address, shape, strides and stream. The GPU
//! backend reads them in place (`backend::cuda::take`) into columns of its
//! own; they never cross the bus, and only what the planner reads of a set
//! comes back to the host: each component's extremes, its non-finite rows
//! and the strided samples that the host path takes from its columns. The
//! decisions are then those of the same points given on the host
//! (`data::SetShape::measured`, tested in `tests/device_inputs.rs`).

use super::{Column, InputError, PointSet, Spread};
use crate::spec::Scalar;

/// Components a point given on a GPU may have: the taker's registers hold
/// each one's running extremes (`MAX_COMPONENTS` of `templates/input/take.cu`).
pub const MAX_GPU_COMPONENTS: usize = 16;

/// The stream whose work on an array must be done before twobs reads it
/// (`__cuda_array_interface__` version 3's `stream`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProducerStream {
    /// None given: the array is ready (the interface's `None`, or DLPack
    /// after the producer synchronized).
    Ready,
    /// The legacy default stream (the interface's 1).
    Legacy,
    /// The per-thread default stream (the interface's 2).
    PerThread,
    /// A stream handle (`CUstream`) of the producer's.
    Handle(u64),
}

impl ProducerStream {
    /// The interface's `stream` entry: absent or None, 1, 2, or a handle; 0 is disallowed by the protocol.
    pub fn from_interface(stream: Option<u64>) -> Result<ProducerStream, InputError> {
        Ok(match stream {
            None => ProducerStream::Ready,
            Some(0) => {
                return Err(InputError(
                    "__cuda_array_interface__: stream 0 is ambiguous and disallowed by the protocol (version 3); the producer should pass 1 for the legacy default stream or 2 for the per-thread one".into(),
                ));
            }
            Some(1) => ProducerStream::Legacy,
            Some(2) => ProducerStream::PerThread,
            Some(h) => ProducerStream::Handle(h),
        })
    }
}

/// A matrix of points (rows x components) in a GPU's memory, of another
/// library's, read where it lies.
#[derive(Debug, Clone)]
pub struct DeviceSet {
    /// The address of row 0, component 0.
    pub address: u64,
    pub rows: usize,
    pub components: usize,
    /// The scalar the array holds (converted on the GPU to the spec's, as the host path converts).
    pub given: Scalar,
    /// Bytes from a row to the next and from a component to the next (negative where reversed).
    pub strides: [i64; 2],
    pub stream: ProducerStream,
    /// Where it came from, for messages (`set A`, `set B`).
    pub origin: String,
}

impl DeviceSet {
    /// Checks what can be checked without the GPU: a scalar the taker reads,
    /// strides that are whole elements apart, and components it holds.
    pub fn check(&self, spec_components: usize) -> Result<(), InputError> {
        let origin = &self.origin;
        if !matches!(self.given, Scalar::F32 | Scalar::F64 | Scalar::I32 | Scalar::I64) {
            return Err(crate::input_error!(
                "{origin}: an array of {} on the GPU; twobs reads f32, f64, i32 or i64 points there",
                self.given.name()
            ));
        }
        if self.components != spec_components {
            return Err(crate::input_error!(
                "{origin}: points of {} components on the GPU, but the spec's element has {spec_components}",
                self.components
            ));
        }
        if self.components > MAX_GPU_COMPONENTS {
            return Err(crate::input_error!(
                "{origin}: {} components a point; points on a GPU may have at most {MAX_GPU_COMPONENTS} (pass a host array)",
                self.components
            ));
        }
        let width = self.given.bytes() as i64;
        if let Some(s) = self.strides.iter().find(|&&s| s % width != 0) {
            return Err(crate::input_error!(
                "{origin}: a stride of {s} bytes between elements of {width} bytes; twobs reads arrays whose strides are whole elements (make it contiguous first)"
            ));
        }
        if !self.address.is_multiple_of(width as u64) {
            return Err(crate::input_error!(
                "{origin}: the array starts at {:#x}, not on a {width}-byte boundary",
                self.address
            ));
        }
        if self.rows == 0 {
            return Err(crate::input_error!("{origin}: no points"));
        }
        if self.rows as u64 > super::MAX_POINTS {
            return Err(crate::input_error!(
                "{origin}: {} points, but twobs indexes points with 32 bits: at most {} per set",
                self.rows,
                super::MAX_POINTS
            ));
        }
        Ok(())
    }
}

/// The inputs of a run whose points lie on a GPU: A, and B for two sets.
#[derive(Debug, Clone)]
pub struct DeviceInputs {
    pub a: DeviceSet,
    pub b: Option<DeviceSet>,
}

impl DeviceInputs {
    pub fn sets(&self) -> impl Iterator<Item = &DeviceSet> {
        std::iter::once(&self.a).chain(self.b.as_ref())
    }
}

/// Where a run's points lie: the host's columns (the command line, numpy),
/// or a GPU's memory, taken there by the GPU backend.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant, reason = "one per run")]
pub enum Given {
    Host(super::Inputs),
    Device(DeviceInputs),
}

/// A double's bits as an unsigned key in the same order: what the taker's
/// atomics compare (`order_key` in `templates/input/take.cu`).
pub fn order_key(x: f64) -> u64 {
    let bits = x.to_bits();
    if bits >> 63 == 1 { !bits } else { bits | 1 << 63 }
}

/// [`order_key`] undone.
pub fn from_order_key(key: u64) -> f64 {
    f64::from_bits(if key >> 63 == 1 { key & !(1 << 63) } else { !key })
}

/// What the GPU measured of one taken set: the planner's and the range
/// check's inputs, made as the host path makes them from its columns.
#[derive(Debug, Clone)]
pub struct Measured {
    pub len: usize,
    /// Each component's (min, max) keys ([`order_key`]), (u64::MAX, 0) where no value is finite.
    pub extreme_keys: Vec<[u64; 2]>,
    /// The first row holding NaN or infinity, and how many rows do.
    pub bad: Option<(u32, u32)>,
    /// Rows 0, step, 2 step, ... at `data::SetShape`'s step (`data::sample_step`), one column each.
    pub shape_sample: Vec<Column>,
    /// Rows at the range check's step ([`super::spacing_step`]).
    pub spacing_sample: Vec<Column>,
    pub origin: String,
}

impl Measured {
    /// The set's ranges, as `Column::min_max` reads them (NaNs skipped).
    pub fn ranges(&self) -> Vec<(f64, f64)> {
        self.extreme_keys
            .iter()
            .map(|&[lo, hi]| match lo <= hi && lo != u64::MAX {
                true => (from_order_key(lo), from_order_key(hi)),
                false => (f64::INFINITY, f64::NEG_INFINITY),
            })
            .collect()
    }

    /// The host path's refusal of a set holding NaN or infinity (points on a GPU are never dropped).
    pub fn check(&self) -> Result<(), InputError> {
        match self.bad {
            Some((first, count)) => Err(super::nonfinite(&self.origin, first as usize, count as usize)),
            None => Ok(()),
        }
    }

    /// A sample's columns as a set.
    pub fn sample(&self, columns: &[Column], what: &str) -> PointSet {
        PointSet { columns: columns.to_vec(), origin: format!("{what} of {}", self.origin), rows: None }
    }

    /// What the range check reads of the set (`data::SetShape::measured` is what the planner reads).
    pub fn spread(&self) -> Spread {
        Spread { ranges: self.ranges(), sample: self.sample(&self.spacing_sample, "a spacing sample") }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_keys_sort_as_their_doubles_and_come_back_whole() {
        let xs = [f64::NEG_INFINITY, -1e300, -2.5, -0.0, 0.0, 1e-310, 3.25, 1e300, f64::INFINITY];
        for w in xs.windows(2) {
            assert!(order_key(w[0]) <= order_key(w[1]), "{} {}", w[0], w[1]);
        }
        for x in xs {
            assert_eq!(from_order_key(order_key(x)).to_bits(), x.to_bits());
        }
    }
}
