//! A row-major array's points (numpy's C order) as the engine's columns, in
//! one pass that also measures them: each column's extremes, whether every
//! value is finite, and the planner's strided sample. That is what
//! [`PointSet::validate`] and [`super::Shapes::of`] would read again,
//! each on a thread whose cache holds none of the points: 150 us each for
//! 100k 3-D points on the H200's host, against 35 us for a pass on a warm
//! cache.

use std::mem::MaybeUninit;

use rayon::prelude::*;

use super::{PointSet, RowValue, extreme_pair, extremes, less, more};
use super::{SetShape, sample_step};

/// Rows a task takes where the rows are shared by every core.
const CHUNK: usize = 1 << 14;

/// Rows from which the take is shared by every core; fewer are taken on the
/// calling thread alone, where waking the pool's threads costs more than it
/// saves. On the H200's host with the AVX2 take (`git show 2c654b2:scripts/probe-take.rs`, medians, us,
/// one thread against shared, three calls): cold (after 300 ms asleep or
/// 600 MB read) one thread won at 50k (124-130 against 220-254) and 100k
/// (216-276 against 269-326); warm they were even at 100k (87-119 against
/// 79-173); from 200k sharing won (369 against 522 cold, 106 against 192
/// warm). A user's array is mostly cold when it is passed.
pub const SHARED_FROM: usize = 1 << 17;

/// Sets taken from rows: the points, what [`SetShape::of`] would read of
/// them (the same extremes and sample), and whether every value is finite.
pub struct TakenRows {
    pub set: PointSet,
    pub shape: SetShape,
    pub finite: bool,
}

/// What one task measured of its rows.
struct Part<T> {
    ranges: Vec<(f64, f64)>,
    finite: bool,
    sample: Vec<Vec<T>>,
}

/// The `n` rows of `rows` (row-major, `columns.len()` values a row) into
/// `columns` (empty, reused buffers), measured as they are copied.
pub fn take_rows<T: RowValue>(rows: &[T], n: usize, columns: Vec<Vec<T>>, origin: &str) -> TakenRows {
    take_rows_shared_from(rows, n, columns, origin, SHARED_FROM)
}

/// [`take_rows`], shared by every core from `shared_from` rows (a probe compares).
pub fn take_rows_shared_from<T: RowValue>(
    rows: &[T],
    n: usize,
    mut columns: Vec<Vec<T>>,
    origin: &str,
    shared_from: usize,
) -> TakenRows {
    let d = columns.len();
    assert_eq!(rows.len(), n * d, "{n} rows of {d} values");
    let step = sample_step(n);
    for c in columns.iter_mut() {
        c.clear();
        c.reserve(n);
    }
    let parts: Vec<Part<T>> = {
        let mut spare: Vec<&mut [MaybeUninit<T>]> =
            columns.iter_mut().map(|c| &mut c.spare_capacity_mut()[..n]).collect();
        if n < shared_from.max(CHUNK + 1) || d == 0 {
            vec![part(&mut spare, rows, 0, step)]
        } else {
            // Chunk k of every column, beside chunk k of the rows.
            let mut chunks: Vec<Vec<&mut [MaybeUninit<T>]>> = Vec::new();
            let mut iters: Vec<_> = spare.into_iter().map(|s| s.chunks_mut(CHUNK)).collect();
            while let Some(first) = iters[0].next() {
                let mut outs = vec![first];
                outs.extend(iters[1..].iter_mut().map(|it| it.next().expect("columns of one length")));
                chunks.push(outs);
            }
            chunks
                .into_par_iter()
                .zip(rows.par_chunks(CHUNK * d))
                .enumerate()
                .map(|(k, (mut outs, rows))| part(&mut outs, rows, k * CHUNK, step))
                .collect()
        }
    };
    // SAFETY: the parts wrote the first n slots of every column.
    for c in columns.iter_mut() {
        unsafe { c.set_len(n) };
    }
    let mut ranges = vec![(f64::INFINITY, f64::NEG_INFINITY); d];
    let mut finite = true;
    let mut sample: Vec<Vec<T>> = (0..d).map(|_| Vec::with_capacity(n.div_ceil(step))).collect();
    for p in parts {
        for (r, q) in ranges.iter_mut().zip(&p.ranges) {
            *r = (less(r.0, q.0), more(r.1, q.1));
        }
        finite &= p.finite;
        for (s, q) in sample.iter_mut().zip(p.sample) {
            s.extend(q);
        }
    }
    let sample = PointSet {
        columns: sample.into_iter().map(T::column).collect(),
        origin: format!("a sample of {origin}"),
        rows: None,
    };
    TakenRows {
        set: PointSet { columns: columns.into_iter().map(T::column).collect(), origin: origin.to_owned(), rows: None },
        shape: SetShape { len: n, ranges, sample },
        finite,
    }
}

/// Rows starting at row `first` into `outs`, measured: the sample takes rows that are multiples of `step`.
fn part<T: RowValue>(outs: &mut [&mut [MaybeUninit<T>]], rows: &[T], first: usize, step: usize) -> Part<T> {
    let d = outs.len();
    let count = rows.len() / d.max(1);
    let (ranges, finite) = match outs {
        // Points in space, the common case, in one pass (`RowValue::take_three`).
        [x, y, z] => {
            let (extremes, finite) = T::take_three(rows, [&mut **x, &mut **y, &mut **z]);
            (extremes.iter().map(|&(lo, hi)| extreme_pair(lo, hi)).collect(), finite)
        }
        // The copy with each column's slice in hand, then the columns just
        // written, a column at a time in vector lanes.
        _ => {
            match outs {
                [x] => copy_rows(rows.iter().zip(x.iter_mut()), |&v, x| {
                    x.write(v);
                }),
                [x, y] => copy_rows(rows.chunks_exact(2).zip(x.iter_mut().zip(y.iter_mut())), |r, (x, y)| {
                    x.write(r[0]);
                    y.write(r[1]);
                }),
                _ => {
                    for (i, row) in rows.chunks_exact(d.max(1)).enumerate() {
                        for (out, &v) in outs.iter_mut().zip(row) {
                            out[i].write(v);
                        }
                    }
                }
            }
            let mut finite = true;
            let ranges = outs
                .iter()
                .map(|out| {
                    // SAFETY: the first `count` values of every column were written just above.
                    let column: &[T] = unsafe { std::slice::from_raw_parts(out.as_ptr().cast::<T>(), count) };
                    let (lo, hi, all_finite) = extremes(column);
                    finite &= all_finite;
                    extreme_pair(lo, hi)
                })
                .collect();
            (ranges, finite)
        }
    };
    // From the columns just written (a stride of `step` values, not rows).
    let from = first.next_multiple_of(step) - first;
    let sample = outs
        .iter()
        .map(|out| {
            // SAFETY: the first `count` values of every column were written above.
            let column: &[T] = unsafe { std::slice::from_raw_parts(out.as_ptr().cast::<T>(), count) };
            column.iter().skip(from).step_by(step).copied().collect()
        })
        .collect();
    Part { ranges, finite, sample }
}

fn copy_rows<R, O>(pairs: impl Iterator<Item = (R, O)>, copy: impl Fn(R, O)) {
    for (row, out) in pairs {
        copy(row, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Column;

    /// Each value's bits (a NaN equals itself).
    fn bits(columns: &[Column]) -> Vec<Vec<u64>> {
        columns
            .iter()
            .map(|c| match c {
                Column::F32(v) => v.iter().map(|x| u64::from(x.to_bits())).collect(),
                Column::F64(v) => v.iter().map(|x| x.to_bits()).collect(),
                Column::I32(v) => v.iter().map(|&x| x as u64).collect(),
                Column::I64(v) => v.iter().map(|&x| x as u64).collect(),
                Column::U32(v) => v.iter().map(|&x| u64::from(x)).collect(),
            })
            .collect()
    }

    /// On the calling thread (as a call of fewer than [`SHARED_FROM`] rows
    /// takes them) and shared by every core from past one chunk.
    fn check<T: RowValue + PartialEq + std::fmt::Debug>(rows: &[T], d: usize, leftovers: bool) {
        let n = rows.len() / d;
        let columns: Vec<Column> = (0..d).map(|c| T::column((0..n).map(|i| rows[i * d + c]).collect())).collect();
        let expected = SetShape::of(&PointSet { columns: columns.clone(), origin: "rows".into(), rows: None });
        for shared_from in [usize::MAX, 0] {
            // Buffers as a pool gives them back: holding an earlier call's values.
            let given: Vec<Vec<T>> = (0..d).map(|_| if leftovers { rows.to_vec() } else { Vec::new() }).collect();
            let taken = take_rows_shared_from(rows, n, given, "rows", shared_from);
            let at = format!("n = {n}, shared from {shared_from}");
            assert!(bits(&taken.set.columns) == bits(&columns), "{at}: the columns differ");
            assert_eq!(taken.shape.len, expected.len);
            assert_eq!(taken.shape.ranges, expected.ranges, "{at}");
            assert!(bits(&taken.shape.sample.columns) == bits(&expected.sample.columns), "{at}: the samples differ");
            assert_eq!(taken.shape.sample.origin, expected.sample.origin);
            assert_eq!(taken.finite, taken.set.columns.iter().all(Column::all_finite), "{at}");
        }
    }

    #[test]
    fn taken_rows_are_the_columns_and_shapes_of_the_set() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            state >> 11
        };
        // Around one task's chunk and the sample's step (which grows past 16384 points).
        // Rows past the vector registers' whole blocks (4 f32 or 2 f64 rows) too.
        for n in [1, 2, 3, 4, 5, 6, 7, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 5, 200_003] {
            for d in [1, 2, 3, 5] {
                let f: Vec<f32> =
                    (0..n * d).map(|_| (next() as f64 / (1u64 << 53) as f64 * 200.0 - 100.0) as f32).collect();
                check(&f, d, n % 2 == 0);
                let g: Vec<f64> = (0..n * d).map(|_| next() as f64 / (1u64 << 53) as f64 * 2e6 - 1e6).collect();
                check(&g, d, n % 2 == 1);
                let i: Vec<i64> = (0..n * d).map(|_| next() as i64 - (1 << 52)).collect();
                check(&i, d, false);
            }
        }
        // NaN and infinities, in the first and a later chunk.
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let mut v: Vec<f64> = (0..3 * (2 * CHUNK + 3)).map(|_| next() as f64).collect();
            v[1] = bad;
            check(&v, 3, false);
            let mut w: Vec<f64> = (0..3 * (2 * CHUNK + 3)).map(|_| next() as f64).collect();
            let last = w.len() - 2;
            w[last] = bad;
            check(&w, 3, true);
        }
        let nan: Vec<f32> = vec![f32::NAN; 6];
        check(&nan, 2, false);
        // Every place of 13 3-D rows (blocks and the rows after them), each
        // value that is not finite, in both float types; and columns that are NaN alone.
        for at in 0..39 {
            for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
                let mut v: Vec<f64> = (0..39).map(|_| next() as f64 / (1u64 << 53) as f64 * 8.0 - 4.0).collect();
                v[at] = bad;
                check(&v, 3, at % 2 == 0);
                let f: Vec<f32> = v.iter().map(|&x| x as f32).collect();
                check(&f, 3, at % 2 == 1);
            }
        }
        for n in [1, 4, 9] {
            check(&vec![f32::NAN; 3 * n], 3, false);
            check(&vec![f64::NAN; 3 * n], 3, true);
            let half: Vec<f32> = (0..3 * n).map(|i| if i % 3 == 1 { f32::NAN } else { i as f32 }).collect();
            check(&half, 3, false);
        }
    }
}
