//! What a schedule reads of a run's point sets: each set's size, its
//! components' ranges and an evenly strided sample. Read once from the
//! points (or taken with them from a caller's rows, [`take_rows`]), then
//! every decision (the range check, the index, the GPUs' blocks) reads it.

use super::{Column, Inputs, PointSet};

/// Points of each set that a grid's layout (`index::Layout::estimated_pairs`) samples.
pub const ESTIMATE_SAMPLE: usize = 1 << 14;

/// What a grid's layout and its estimates read of one set: its size, each
/// component's range, and an evenly strided sample of at most
/// [`ESTIMATE_SAMPLE`] points. Made from the points, or described (a size
/// and a sample drawn as the points are) where they are not at hand: a
/// schedule for 10^8 points reads 16k of them.
#[derive(Debug, Clone)]
pub struct SetShape {
    pub len: usize,
    /// Each component's (min, max) over the whole set.
    pub ranges: Vec<(f64, f64)>,
    pub sample: PointSet,
}

/// Rows between two of a set's sample: at most [`ESTIMATE_SAMPLE`] rows
/// (the GPU's taker samples points given there at the same rows).
pub fn sample_step(len: usize) -> usize {
    len.div_ceil(ESTIMATE_SAMPLE).max(1)
}

impl SetShape {
    pub fn of(set: &PointSet) -> SetShape {
        let rows: Vec<usize> = (0..set.len()).step_by(sample_step(set.len())).collect();
        SetShape {
            len: set.len(),
            ranges: set.columns.iter().map(Column::min_max).collect(),
            sample: set.subset(&rows, format!("a sample of {}", set.origin)),
        }
    }

    /// A set measured where it lies (on a GPU): the same size, ranges and
    /// sample as [`SetShape::of`] reads from the same points on the host.
    pub fn measured(m: &crate::data::Measured) -> SetShape {
        SetShape { len: m.len, ranges: m.ranges(), sample: m.sample(&m.shape_sample, "a sample") }
    }

    /// A set of `len` points drawn as `sample` is (its ranges are the sample's).
    pub fn described(len: usize, sample: PointSet) -> SetShape {
        SetShape { len, ranges: sample.columns.iter().map(Column::min_max).collect(), sample }
    }

    /// Bytes of one point.
    pub fn point_bytes(&self) -> usize {
        self.sample.columns.iter().map(|c| c.scalar().bytes() as usize).sum::<usize>().max(1)
    }
}

/// The shapes of a run's sets: A, and B for two sets.
#[derive(Debug, Clone)]
pub struct Shapes {
    pub a: SetShape,
    pub b: Option<SetShape>,
}

impl Shapes {
    pub fn of(inputs: &Inputs) -> Shapes {
        Shapes { a: SetShape::of(&inputs.a), b: inputs.b.as_ref().map(SetShape::of) }
    }

    /// The set the "other" point of each pair comes from.
    pub fn other(&self) -> &SetShape {
        self.b.as_ref().unwrap_or(&self.a)
    }

    /// Points of the larger set.
    pub fn most(&self) -> usize {
        self.a.len.max(self.other().len)
    }

    pub fn sets(&self) -> impl Iterator<Item = &SetShape> {
        std::iter::once(&self.a).chain(self.b.as_ref())
    }
}
