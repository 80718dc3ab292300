//! Whether a run's points fit f32's arithmetic: a pair function of f32
//! points squares their separations (every distance does), and a square
//! past f32's largest number is infinite, one below its smallest normal
//! number loses its digits or becomes 0. Read from the data's extent and
//! the smallest spacing of a sample, before anything runs.

use std::fmt;

use super::{Inputs, PointSet, extent};
use crate::spec::{Element, Params, Problem, Scalar};

/// Points of each set whose closest pair stands for the data's spacing.
const SPACING_SAMPLE: usize = 1024;

/// Why f32 cannot hold the squared separations of a run's points.
#[derive(Debug, Clone, PartialEq)]
pub enum OutOfF32 {
    /// The largest squared separation that matters (over the extent, or the
    /// cutoff where it is shorter) is past f32::MAX.
    Overflow { squared: f64, extent: String, cutoff: Option<f64> },
    /// The closest two points of the sample, or the cutoff, square below
    /// f32::MIN_POSITIVE.
    Underflow { what: Spacing, length: f64 },
}

/// The length whose square falls below f32's normal numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spacing {
    /// The closest two distinct points of an evenly strided sample.
    Sampled,
    /// The spec's cutoff.
    Cutoff,
}

impl fmt::Display for OutOfF32 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OutOfF32::Overflow { squared, extent, cutoff } => write!(
                f,
                "the points span {extent}{}: squared separations reach {squared:.3e}, past f32's largest number {:.4e}, where they become infinite (pairs lost, values inf)",
                cutoff.map_or(String::new(), |c| format!(" (and pairs within the cutoff {} matter)", super::short(c))),
                f32::MAX
            ),
            OutOfF32::Underflow { what, length } => write!(
                f,
                "{} {}: squared, {:.3e}, below f32's smallest normal number {:.4e}, where squared separations lose their digits or become 0",
                match what {
                    Spacing::Sampled => "the closest two points of a sample are",
                    Spacing::Cutoff => "the cutoff is",
                },
                super::short(*length),
                length * length,
                f32::MIN_POSITIVE
            ),
        }
    }
}

/// What the range check reads of one set: each component's extremes and
/// an evenly strided sample of rows ([`spacing_step`] apart), from the
/// host's columns or measured on a GPU (`data::Measured::spread`).
#[derive(Debug, Clone)]
pub struct Spread {
    pub ranges: Vec<(f64, f64)>,
    pub sample: PointSet,
}

/// Rows between two of a set's spacing sample: at most [`SPACING_SAMPLE`] rows.
pub fn spacing_step(len: usize) -> usize {
    len.div_ceil(SPACING_SAMPLE).max(1)
}

impl Spread {
    /// The first `dims` components of `set` (a set's weights and ids come after them).
    pub fn of(set: &PointSet, dims: usize) -> Spread {
        Spread::with_ranges(set, set.columns[..dims].iter().map(|c| c.min_max()).collect())
    }

    /// The first `ranges.len()` components of `set`, whose ranges are known
    /// (`data::SetShape::of` read them): a pass over the points saved.
    pub fn with_ranges(set: &PointSet, ranges: Vec<(f64, f64)>) -> Spread {
        let rows: Vec<usize> = (0..set.len()).step_by(spacing_step(set.len())).collect();
        let columns = set.columns[..ranges.len()].iter().map(|c| c.select(&rows)).collect();
        Spread { ranges, sample: PointSet { columns, origin: set.origin.clone(), rows: None } }
    }
}

/// Where the squared separations of `inputs` leave f32's range, for a
/// problem of f32 points (None for any other element: integers and records
/// square nothing we can see, f64 has the range).
pub fn f32_range(problem: &Problem, params: &Params, inputs: &Inputs) -> Option<OutOfF32> {
    let Element::Vector { scalar: Scalar::F32, dims } = problem.input.element else { return None };
    let sets: Vec<Spread> =
        std::iter::once(&inputs.a).chain(inputs.b.as_ref()).map(|s| Spread::of(s, dims as usize)).collect();
    f32_range_of(problem, params, &sets)
}

/// [`f32_range`] of sets described by their [`Spread`]s.
pub fn f32_range_of(problem: &Problem, params: &Params, sets: &[Spread]) -> Option<OutOfF32> {
    let Element::Vector { scalar: Scalar::F32, dims } = problem.input.element else { return None };
    let dims = dims as usize;
    let cutoff = problem.cutoff.as_ref().and_then(|c| c.value.as_ref()).map(|v| params.eval(v).as_f64());
    if let Some(c) = cutoff
        && c > 0.0
        && c * c < f32::MIN_POSITIVE as f64
    {
        return Some(OutOfF32::Underflow { what: Spacing::Cutoff, length: c });
    }
    let bounds: Vec<(f64, f64)> = (0..dims)
        .map(|c| {
            sets.iter()
                .map(|s| s.ranges[c])
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), (a, b)| (l.min(a), h.max(b)))
        })
        .collect();
    // Past the cutoff a pair adds nothing, whatever its (infinite) value.
    let squared: f64 = bounds.iter().map(|(lo, hi)| (hi - lo).min(cutoff.unwrap_or(f64::INFINITY)).powi(2)).sum();
    if squared > f32::MAX as f64 {
        return Some(OutOfF32::Overflow { squared, extent: extent(&bounds), cutoff });
    }
    let length = closest(sets, dims)?;
    (length * length < f32::MIN_POSITIVE as f64).then_some(OutOfF32::Underflow { what: Spacing::Sampled, length })
}

/// The smallest non-zero distance between points of each set's spacing
/// sample (in f64); None where all of them coincide.
fn closest(sets: &[Spread], dims: usize) -> Option<f64> {
    use rayon::prelude::*;
    // Two coordinates whose nonzero magnitudes are all at least 2^-40 differ by
    // 0 or by at least 2^-63, whose square is f32's smallest normal: no pair of
    // the sample can be closer than that, and the quadratic search is skipped
    // (a millisecond a call, where a session's frames come many a second).
    // Read in the columns, before a point of the sample is made (a vector each).
    let far = |x: f64| x == 0.0 || x.abs() >= (-40f64).exp2();
    if sets.iter().all(|s| s.sample.columns[..dims].iter().all(|c| (0..c.len()).all(|i| far(c.get_f64(i))))) {
        return None;
    }
    let sample: Vec<Vec<f64>> = sets
        .iter()
        .flat_map(|s| (0..s.sample.len()).map(|i| (0..dims).map(|c| s.sample.columns[c].get_f64(i)).collect()))
        .collect();
    let nearest = (0..sample.len())
        .into_par_iter()
        .map(|i| {
            sample[i + 1..]
                .iter()
                .map(|q| sample[i].iter().zip(q).map(|(x, y)| (x - y) * (x - y)).sum::<f64>())
                .filter(|&d| d > 0.0)
                .fold(f64::INFINITY, f64::min)
        })
        .reduce(|| f64::INFINITY, f64::min);
    nearest.is_finite().then(|| nearest.sqrt())
}
