//! Point sets: read from files or generated, validated against the spec,
//! stored as one column per component (the layout the device wants).

pub mod device;
pub mod md;
mod range;
mod read;
mod rows;
mod shape;
mod synth;
mod values;

use std::fmt;
use std::mem::MaybeUninit;

use serde::Serialize;

pub use device::{
    DeviceInputs, DeviceSet, Given, MAX_GPU_COMPONENTS, Measured, ProducerStream, from_order_key, order_key,
};
pub use range::{OutOfF32, Spacing, Spread, f32_range, f32_range_of, spacing_step};
pub use read::{InputOptions, read_frames, read_ids, read_input, read_weights, values_per_point};
pub use rows::{SHARED_FROM, TakenRows, take_rows, take_rows_shared_from};
pub use shape::{ESTIMATE_SAMPLE, SetShape, Shapes, sample_step};
pub use synth::{Generator, synthesize};
pub use values::RowValue;
pub(crate) use values::{extreme_pair, extremes, less, more};

use crate::spec::{Component, PeriodicBox, Scalar};

/// Input that cannot be read as the spec's points: what was wrong, and where
/// (the file, line, row or field).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InputError(pub String);

/// An [`InputError`] from a format string.
#[macro_export]
macro_rules! input_error {
    ($($t:tt)*) => { $crate::data::InputError(format!($($t)*)) };
}

/// The largest set twobs indexes: pair indices are 32-bit.
pub const MAX_POINTS: u64 = u32::MAX as u64;

/// One component of every point of a set.
#[derive(Debug, Clone, PartialEq)]
pub enum Column {
    F32(Vec<f32>),
    F64(Vec<f64>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    U32(Vec<u32>),
}

/// `$body` with `$v` bound to the values of whichever type `$column` holds.
macro_rules! each {
    ($column:expr, $v:ident => $body:expr) => {
        match $column {
            Column::F32($v) => $body,
            Column::F64($v) => $body,
            Column::I32($v) => $body,
            Column::I64($v) => $body,
            Column::U32($v) => $body,
        }
    };
}

/// A column of `$column`'s type holding `$body`, made from its values `$v`.
macro_rules! map {
    ($column:expr, $v:ident => $body:expr) => {
        match $column {
            Column::F32($v) => Column::F32($body),
            Column::F64($v) => Column::F64($body),
            Column::I32($v) => Column::I32($body),
            Column::I64($v) => Column::I64($body),
            Column::U32($v) => Column::U32($body),
        }
    };
}

impl Column {
    pub fn len(&self) -> usize {
        each!(self, v => v.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn scalar(&self) -> Scalar {
        match self {
            Column::F32(_) => Scalar::F32,
            Column::F64(_) => Scalar::F64,
            Column::I32(_) => Scalar::I32,
            Column::I64(_) => Scalar::I64,
            Column::U32(_) => Scalar::U32,
        }
    }

    /// An empty column of `scalar` with room for `n`.
    pub fn with_capacity(scalar: Scalar, n: usize) -> Column {
        match scalar {
            Scalar::F32 => Column::F32(Vec::with_capacity(n)),
            Scalar::F64 => Column::F64(Vec::with_capacity(n)),
            Scalar::I32 => Column::I32(Vec::with_capacity(n)),
            Scalar::I64 => Column::I64(Vec::with_capacity(n)),
            Scalar::U32 => Column::U32(Vec::with_capacity(n)),
        }
    }

    /// The first value's address, for the CPU driver.
    pub fn as_ptr(&self) -> *const std::ffi::c_void {
        each!(self, v => v.as_ptr().cast())
    }

    /// The smallest and largest value, as f64 (NaNs skipped, as f64::min
    /// skips them): compared in the column's own type, sixteen running
    /// extremes at a time so that the loop vectorizes, on every core past a
    /// million values (a session's call checks its points' ranges twice).
    pub fn min_max(&self) -> (f64, f64) {
        fn fold<T: RowValue>(v: &[T]) -> (f64, f64) {
            use rayon::prelude::*;
            let part = |v: &[T]| {
                let (lo, hi, _) = extremes(v);
                (lo, hi)
            };
            let (lo, hi) = if v.len() < 1 << 20 {
                part(v)
            } else {
                v.par_chunks(1 << 18)
                    .map(part)
                    .reduce(|| (T::HIGHEST, T::LOWEST), |(l, h), (a, b)| (less(l, a), more(h, b)))
            };
            extreme_pair(lo, hi)
        }
        each!(self, v => fold(v))
    }

    pub fn get_f64(&self, i: usize) -> f64 {
        match self {
            Column::F32(v) => v[i] as f64,
            Column::F64(v) => v[i],
            Column::I32(v) => v[i] as f64,
            Column::I64(v) => v[i] as f64,
            Column::U32(v) => v[i] as f64,
        }
    }

    /// Rows [start, start + len) as the bytes in memory: little-endian, as
    /// the GPU reads them (twobs runs on little-endian hosts only).
    pub fn bytes(&self, start: usize, len: usize) -> &[u8] {
        const { assert!(cfg!(target_endian = "little"), "the GPU reads the host's bytes as little-endian") };
        fn raw<T>(v: &[T]) -> &[u8] {
            // SAFETY: plain numbers without padding; u8 has no alignment to keep.
            unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
        }
        each!(self, v => raw(&v[start..start + len]))
    }

    /// Little-endian bytes of rows [start, start + len) into `dst`, zeros after them.
    pub fn write_bytes(&self, start: usize, len: usize, dst: &mut [u8]) {
        let w = self.scalar().bytes() as usize;
        each!(self, v => {
            for (k, x) in v[start..start + len].iter().enumerate() {
                dst[k * w..(k + 1) * w].copy_from_slice(&x.to_le_bytes());
            }
        });
        dst[len * w..].fill(0);
    }

    /// Sets value `i` to `x`, rounded once (an integer to the nearest, saturating).
    pub fn set_f64(&mut self, i: usize, x: f64) {
        match self {
            Column::F32(v) => v[i] = x as f32,
            Column::F64(v) => v[i] = x,
            Column::I32(v) => v[i] = x.round() as i32,
            Column::I64(v) => v[i] = x.round() as i64,
            Column::U32(v) => v[i] = x.round() as u32,
        }
    }

    /// Row `i` alone, as a column of one value.
    pub fn clone_row(&self, i: usize) -> Column {
        self.select(&[i])
    }

    /// The rows `keep` of this column, in order.
    pub fn select(&self, keep: &[usize]) -> Column {
        map!(self, v => keep.iter().map(|&i| v[i]).collect())
    }

    /// The values at `idx`, in order, gathered on up to `threads` threads.
    pub fn gather(&self, idx: &[u32], threads: usize) -> Column {
        fn gather<T: Copy + Send + Sync>(v: &[T], idx: &[u32], threads: usize) -> Vec<T> {
            let Some(&fill) = v.first() else { return Vec::new() };
            let mut out = vec![fill; idx.len()];
            let chunk = idx.len().div_ceil(threads.max(1)).max(1 << 16);
            std::thread::scope(|s| {
                for (dst, src) in out.chunks_mut(chunk).zip(idx.chunks(chunk)) {
                    s.spawn(move || dst.iter_mut().zip(src).for_each(|(d, &i)| *d = v[i as usize]));
                }
            });
            out
        }
        map!(self, v => gather(v, idx, threads))
    }

    /// `n` values of `scalar` whose little-endian bytes `fill` writes, every
    /// one of them (a download from the GPU, straight into the column's memory).
    /// The memory is a column given back to [`recycle`] where one fits.
    pub fn from_bytes_filled<E>(
        scalar: Scalar,
        n: usize,
        fill: impl FnOnce(&mut [MaybeUninit<u8>]) -> Result<(), E>,
    ) -> Result<Column, E> {
        let Some(mut column) = recycled(scalar, n) else {
            return Ok(match scalar {
                Scalar::F32 => Column::F32(filled(n, fill)?),
                Scalar::F64 => Column::F64(filled(n, fill)?),
                Scalar::I32 => Column::I32(filled(n, fill)?),
                Scalar::I64 => Column::I64(filled(n, fill)?),
                Scalar::U32 => Column::U32(filled(n, fill)?),
            });
        };
        each!(&mut column, v => refill(v, n, fill)?);
        Ok(column)
    }

    /// The values' memory, for a writer that fills every byte (the CPU driver).
    pub fn as_mut_ptr(&mut self) -> *mut std::ffi::c_void {
        each!(self, v => v.as_mut_ptr().cast())
    }

    /// `n` zeros of `scalar`.
    pub fn zeros(scalar: Scalar, n: usize) -> Column {
        match scalar {
            Scalar::F32 => Column::F32(vec![0.0; n]),
            Scalar::F64 => Column::F64(vec![0.0; n]),
            Scalar::I32 => Column::I32(vec![0; n]),
            Scalar::I64 => Column::I64(vec![0; n]),
            Scalar::U32 => Column::U32(vec![0; n]),
        }
    }

    /// Values [at, at + from.len()) become `from`'s, which has this column's type.
    pub fn copy_in(&mut self, at: usize, from: &Column) {
        match (self, from) {
            (Column::F32(v), Column::F32(f)) => v[at..at + f.len()].copy_from_slice(f),
            (Column::F64(v), Column::F64(f)) => v[at..at + f.len()].copy_from_slice(f),
            (Column::I32(v), Column::I32(f)) => v[at..at + f.len()].copy_from_slice(f),
            (Column::I64(v), Column::I64(f)) => v[at..at + f.len()].copy_from_slice(f),
            (Column::U32(v), Column::U32(f)) => v[at..at + f.len()].copy_from_slice(f),
            (v, f) => panic!("a column of {} takes no values of {}", v.scalar().name(), f.scalar().name()),
        }
    }

    /// Rows of `k` values moved: row s goes to row `to[s]` ([`rows_moved`]).
    pub fn rows_moved(&self, k: usize, to: &[u32]) -> Column {
        map!(self, v => rows_moved(v, k, to))
    }

    /// Rows of `k` values of `from` written over rows `to[s]` of this column
    /// (of the same type).
    pub fn place_rows(&mut self, k: usize, from: &Column, to: &[u32]) {
        assert_eq!(self.scalar(), from.scalar(), "rows of one type");
        let w = self.scalar().bytes() as usize * k;
        let src = from.bytes(0, from.len());
        // SAFETY: this column's values viewed as bytes; any bytes make a value of its numeric types.
        let dst = unsafe {
            std::slice::from_raw_parts_mut(self.as_mut_ptr().cast::<u8>(), self.len() * self.scalar().bytes() as usize)
        };
        for (row, &at) in src.chunks_exact(w.max(1)).zip(to) {
            dst[at as usize * w..(at as usize + 1) * w].copy_from_slice(row);
        }
    }

    /// Value `i` exactly as stored: the bits of a float, an integer as it is.
    pub fn bits(&self, i: usize) -> u64 {
        match self {
            Column::F32(v) => v[i].to_bits() as u64,
            Column::F64(v) => v[i].to_bits(),
            Column::I32(v) => v[i] as u32 as u64,
            Column::I64(v) => v[i] as u64,
            Column::U32(v) => v[i] as u64,
        }
    }

    /// Value `i` as the shortest text that reads back as it.
    pub fn show(&self, i: usize) -> String {
        each!(self, v => v[i].to_string())
    }

    /// Value `i` as JSON: a number, or null where JSON has none (inf, NaN).
    pub fn json(&self, i: usize) -> serde_json::Value {
        each!(self, v => serde_json::json!(v[i]))
    }

    /// The column in f64 (for the CPU backend's f64 mode): floats widen, integers stay.
    pub fn widened(&self) -> Column {
        match self {
            Column::F32(v) => Column::F64(v.iter().map(|&x| x as f64).collect()),
            other => other.clone(),
        }
    }

    /// Values the column holds room for.
    pub fn capacity(&self) -> usize {
        each!(self, v => v.capacity())
    }

    /// Empties the column, keeping its room (a buffer to fill again).
    pub fn clear(&mut self) {
        each!(self, v => v.clear())
    }

    /// Whether every value is finite (integers always are).
    pub(crate) fn all_finite(&self) -> bool {
        match self {
            Column::F32(v) => v.iter().fold(true, |all, x| all & x.is_finite()),
            Column::F64(v) => v.iter().fold(true, |all, x| all & x.is_finite()),
            _ => true,
        }
    }

    fn is_finite(&self, i: usize) -> bool {
        match self {
            Column::F32(v) => v[i].is_finite(),
            Column::F64(v) => v[i].is_finite(),
            _ => true,
        }
    }
}

/// Rows of `k` values of `v` moved: row s goes to row `to[s]` (a permutation).
pub fn rows_moved<T: Copy + Default>(v: &[T], k: usize, to: &[u32]) -> Vec<T> {
    let mut out = vec![T::default(); v.len()];
    for (from, &row) in v.chunks_exact(k.max(1)).zip(to) {
        out[row as usize * k..(row as usize + 1) * k].copy_from_slice(from);
    }
    out
}

/// Columns of downloaded results given back by their last reader (the
/// Python package's arrays, when Python frees them), kept for the next
/// download of about as many values: memory already touched takes a copy
/// without a page fault a 4 KiB (a fresh 64 MB list faults 16k pages, most
/// of a million-point KNN's 6 ms download on a GPU host). Per process, at
/// most [`RECYCLED_BYTES`] held.
static RECYCLED: std::sync::Mutex<Vec<Column>> = std::sync::Mutex::new(Vec::new());

/// Bytes the recycled columns hold at most.
pub const RECYCLED_BYTES: usize = 1 << 30;

/// Columns smaller than this are not kept: their faults cost little.
const RECYCLED_LEAST: usize = 1 << 20;

/// Gives a column's memory back for the next download ([`Column::from_bytes_filled`]).
pub fn recycle(column: Column) {
    let bytes = |c: &Column| c.capacity() * c.scalar().bytes() as usize;
    if bytes(&column) < RECYCLED_LEAST || bytes(&column) > RECYCLED_BYTES {
        return;
    }
    let mut kept = RECYCLED.lock().expect("recycled lock");
    kept.push(column);
    // The oldest go first.
    while kept.iter().map(bytes).sum::<usize>() > RECYCLED_BYTES {
        kept.remove(0);
    }
}

/// A recycled column of `scalar` with room for `n` values and at most twice that.
fn recycled(scalar: Scalar, n: usize) -> Option<Column> {
    if n * (scalar.bytes() as usize) < RECYCLED_LEAST {
        return None;
    }
    let mut kept = RECYCLED.lock().expect("recycled lock");
    let k = kept.iter().position(|c| c.scalar() == scalar && c.capacity() >= n && c.capacity() <= 2 * n)?;
    Some(kept.swap_remove(k))
}

/// `v` holding `n` plain numbers whose bytes `fill` writes, in its own memory.
fn refill<T: Copy, E>(
    v: &mut Vec<T>,
    n: usize,
    fill: impl FnOnce(&mut [MaybeUninit<u8>]) -> Result<(), E>,
) -> Result<(), E> {
    v.clear();
    v.reserve(n);
    let room = &mut v.spare_capacity_mut()[..n];
    // SAFETY: the room's n x size_of::<T>() bytes, viewed as bytes (no alignment to keep).
    let bytes =
        unsafe { std::slice::from_raw_parts_mut(room.as_mut_ptr().cast::<MaybeUninit<u8>>(), size_of_val(room)) };
    fill(bytes)?;
    // SAFETY: `fill` wrote every byte, and any bytes make a value of these numeric types.
    unsafe { v.set_len(n) };
    Ok(())
}

/// A vector of `n` plain numbers (every bit pattern a value) whose bytes
/// `fill` writes, all of them.
fn filled<T: Copy, E>(n: usize, fill: impl FnOnce(&mut [MaybeUninit<u8>]) -> Result<(), E>) -> Result<Vec<T>, E> {
    let mut v: Vec<T> = Vec::with_capacity(n);
    let room = &mut v.spare_capacity_mut()[..n];
    // SAFETY: the room's n x size_of::<T>() bytes, viewed as bytes (no alignment to keep).
    let bytes =
        unsafe { std::slice::from_raw_parts_mut(room.as_mut_ptr().cast::<MaybeUninit<u8>>(), size_of_val(room)) };
    fill(bytes)?;
    // SAFETY: `fill` wrote every byte, and any bytes make a value of these numeric types.
    unsafe { v.set_len(n) };
    Ok(v)
}

/// A set of points: one column per component of the spec's element.
#[derive(Debug, Clone, PartialEq)]
pub struct PointSet {
    pub columns: Vec<Column>,
    /// Where it came from, for messages and the report.
    pub origin: String,
    /// When rows were dropped: the original row number of each kept row.
    pub rows: Option<Vec<u64>>,
}

impl PointSet {
    pub fn len(&self) -> usize {
        self.columns.first().map_or(0, Column::len)
    }

    /// The bytes of its columns.
    pub fn held_bytes(&self) -> u64 {
        self.columns.iter().map(|c| c.len() as u64 * c.scalar().bytes() as u64).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The original row number of point `i`.
    pub fn original_row(&self, i: u64) -> u64 {
        self.rows.as_ref().map_or(i, |r| r[i as usize])
    }

    /// Checks the set against the spec's components; with `drop_nonfinite`, rows
    /// holding NaN or infinity are dropped (and remembered), otherwise refused.
    pub fn validate(self, components: &[Component], drop_nonfinite: bool) -> Result<PointSet, InputError> {
        self.validate_known(components, drop_nonfinite, None)
    }

    /// [`PointSet::validate`], where the caller's pass over the points found
    /// whether every value is finite (`finite`), and this one need not read them again.
    pub fn validate_known(
        mut self,
        components: &[Component],
        drop_nonfinite: bool,
        finite: Option<bool>,
    ) -> Result<PointSet, InputError> {
        if self.columns.len() != components.len() {
            return Err(input_error!(
                "{}: {} columns per point, but the spec's element has {} ({})",
                self.origin,
                self.columns.len(),
                components.len(),
                components.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ")
            ));
        }
        for (col, comp) in self.columns.iter().zip(components) {
            debug_assert_eq!(col.scalar(), comp.scalar, "readers convert to the spec's types");
        }
        let n = self.len();
        if n == 0 {
            return Err(input_error!("{}: no points", self.origin));
        }
        if n as u64 > MAX_POINTS {
            return Err(input_error!(
                "{}: {n} points, but twobs indexes points with 32 bits: at most {MAX_POINTS} per set",
                self.origin
            ));
        }
        // Most sets are finite throughout: a pass over each column says so (vectorised).
        let finite = finite.unwrap_or_else(|| self.columns.iter().all(Column::all_finite));
        let bad: Vec<usize> = if finite {
            Vec::new()
        } else {
            (0..n).filter(|&i| !self.columns.iter().all(|c| c.is_finite(i))).collect()
        };
        if let Some(&first) = bad.first() {
            if !drop_nonfinite {
                return Err(nonfinite(&self.origin, first, bad.len()));
            }
            let keep: Vec<usize> = (0..n).filter(|i| bad.binary_search(i).is_err()).collect();
            if keep.is_empty() {
                return Err(input_error!("{}: every row holds NaN or infinity", self.origin));
            }
            eprintln!(
                "note: {}: dropped {} rows holding NaN or infinity; indices in the results are the original row numbers",
                self.origin,
                bad.len()
            );
            self.columns = self.columns.iter().map(|c| c.select(&keep)).collect();
            self.rows = Some(keep.iter().map(|&i| i as u64).collect());
        }
        Ok(self)
    }

    /// The points at `rows`, in order, as a new set (indices start again at 0).
    pub fn subset(&self, rows: &[usize], origin: String) -> PointSet {
        PointSet { columns: self.columns.iter().map(|c| c.select(rows)).collect(), origin, rows: None }
    }

    /// Puts every point into the periodic box `b` (fractional coordinates in
    /// [0, 1)) or refuses the first one outside, as `policy` says; without a
    /// policy, wraps where at most half the points lie outside and refuses
    /// the set, naming its extent, where more do: such a box is not the
    /// data's (coordinates in [0, 10) and the default box of 1), and wrapping
    /// would make it look uniform. Wrapping moves a point by whole edge
    /// vectors, in f64, rounded once to the column's type; the minimum-image
    /// distances are those of the point unmoved, with the precision of
    /// coordinates near the box. Returns how many points moved.
    pub fn into_box(&mut self, within: (&str, &PeriodicBox), policy: Option<Outside>) -> Result<usize, InputError> {
        self.into_box_ranged(within, policy, None)
    }

    /// [`PointSet::into_box`], where the caller knows each column's extremes (`ranges`, as [`Column::min_max`]).
    pub fn into_box_ranged(
        &mut self,
        (name, b): (&str, &PeriodicBox),
        policy: Option<Outside>,
        ranges: Option<&[(f64, f64)]>,
    ) -> Result<usize, InputError> {
        // An orthorhombic box's fractional coordinate is x / L, monotone in x:
        // the extremes of each column say whether any point lies outside.
        if b.tilts == [0.0; 3]
            && (0..3).all(|c| {
                let (lo, hi) = ranges.map_or_else(|| self.columns[c].min_max(), |r| r[c]);
                lo / b.lengths[c] >= 0.0 && hi / b.lengths[c] < 1.0
            })
        {
            return Ok(0);
        }
        let outside = |r: [f64; 3]| !b.fractional(r).iter().all(|x| (0.0..1.0).contains(x));
        let policy = match policy {
            Some(p) => p,
            None => {
                let n = self.len();
                let out = (0..n).filter(|&i| outside([0, 1, 2].map(|c| self.columns[c].get_f64(i)))).count();
                if 2 * out > n {
                    return Err(input_error!(
                        "{}: {out} of {n} points lie outside the periodic box {name}={b}, whose corner is the origin; the data spans {}. Give the data's box ({name}=...), or have the points wrapped into this one",
                        self.origin,
                        extent(&self.bounds())
                    ));
                }
                Outside::Wrap
            }
        };
        let mut moved = 0;
        for i in 0..self.len() {
            let r = [0, 1, 2].map(|c| self.columns[c].get_f64(i));
            if !outside(r) {
                continue;
            }
            let s = b.fractional(r);
            // Refusing, a point on the far face counts as inside: x / L may round up to 1.
            if policy == Outside::Refuse && !s.iter().all(|x| (0.0..=1.0).contains(x)) {
                return Err(input_error!(
                    "{}: row {} (counting from 0) = ({}, {}, {}) lies outside the box {name}={b} (fractional coordinates {:.6}, {:.6}, {:.6}, each should be in [0, 1]); pass {} to move points into it by whole box vectors",
                    self.origin,
                    self.original_row(i as u64),
                    r[0],
                    r[1],
                    r[2],
                    s[0],
                    s[1],
                    s[2],
                    crate::remedy::Remedy::WrapIntoBox
                ));
            }
            if policy == Outside::Refuse {
                continue;
            }
            let inside = b.cartesian(s.map(|x| x - x.floor()));
            for (c, x) in inside.into_iter().enumerate() {
                self.columns[c].set_f64(i, x);
            }
            moved += 1;
        }
        Ok(moved)
    }

    /// Every point moved by `by` (the first three components, in f64,
    /// rounded once to the column's type).
    pub fn shift(&mut self, by: [f64; 3]) {
        for (c, d) in by.into_iter().enumerate() {
            for i in 0..self.len() {
                let x = self.columns[c].get_f64(i);
                self.columns[c].set_f64(i, x + d);
            }
        }
    }

    /// The smallest and largest value of each component.
    pub fn bounds(&self) -> Vec<(f64, f64)> {
        self.columns
            .iter()
            .map(|c| {
                (0..c.len())
                    .map(|i| c.get_f64(i))
                    .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| (lo.min(x), hi.max(x)))
            })
            .collect()
    }
}

/// The refusal of a set whose row `first` (and `count` rows in all) holds NaN or infinity.
pub fn nonfinite(origin: &str, first: usize, count: usize) -> InputError {
    input_error!(
        "{origin}: row {first} (counting from 0) holds NaN or infinity, and {count} rows in all; fix the data or pass {} to leave them out",
        crate::remedy::Remedy::DropNonfinite
    )
}

/// Ranges of components as `[lo, hi] x [lo, hi] x ...`, each end as
/// [`short`] writes it (for messages: the extent of a set).
pub fn extent(bounds: &[(f64, f64)]) -> String {
    bounds.iter().map(|(lo, hi)| format!("[{}, {}]", short(*lo), short(*hi))).collect::<Vec<_>>().join(" x ")
}

/// A number for a message: to seven digits, with an exponent where it is
/// very large or very small.
pub fn short(x: f64) -> String {
    let f = x as f32;
    if x == 0.0 || !x.is_finite() || (1e-4..1e7).contains(&x.abs()) { format!("{f}") } else { format!("{f:e}") }
}

/// What to do with a point outside the periodic box.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Outside {
    /// Move it into the box by whole box vectors.
    Wrap,
    /// Refuse the input, naming the row.
    Refuse,
}

/// The inputs of one run: A, and B for a two-set problem.
#[derive(Debug, Clone)]
pub struct Inputs {
    pub a: PointSet,
    pub b: Option<PointSet>,
}

impl Inputs {
    /// The set the "other" point of each pair comes from.
    pub fn other(&self) -> &PointSet {
        self.b.as_ref().unwrap_or(&self.a)
    }

    /// The bytes of every column of both sets (what a process holds of its inputs).
    pub fn held_bytes(&self) -> u64 {
        self.a.held_bytes() + self.b.as_ref().map_or(0, PointSet::held_bytes)
    }

    /// Set A, then set B where there is one.
    pub fn sets(&self) -> impl Iterator<Item = &PointSet> {
        std::iter::once(&self.a).chain(self.b.as_ref())
    }

    /// Set A, then set B where there is one.
    pub fn sets_mut(&mut self) -> impl Iterator<Item = &mut PointSet> {
        std::iter::once(&mut self.a).chain(self.b.as_mut())
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct SetSummary {
    pub origin: String,
    pub points: usize,
}

impl fmt::Display for SetSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} points from {}", self.points, self.origin)
    }
}

impl PointSet {
    pub fn summary(&self) -> SetSummary {
        SetSummary { origin: self.origin.clone(), points: self.len() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};

    #[test]
    fn a_recycled_column_takes_the_next_download_of_about_its_size() {
        // A size no other test downloads, so that the process-wide pool's answer is this test's.
        let n = (1 << 20) + 4099;
        let first = Column::from_bytes_filled(Scalar::I64, n, |room| {
            room.iter_mut().for_each(|b| {
                b.write(7);
            });
            Ok::<(), ()>(())
        })
        .unwrap();
        let at = first.as_ptr();
        recycle(first);
        let bytes: Vec<u8> = (0..8 * (n - 5)).map(|i| (i % 251) as u8).collect();
        let next = Column::from_bytes_filled(Scalar::I64, n - 5, |room| {
            room.iter_mut().zip(&bytes).for_each(|(r, &b)| {
                r.write(b);
            });
            Ok::<(), ()>(())
        })
        .unwrap();
        assert_eq!(next.as_ptr(), at, "the recycled memory");
        assert_eq!((next.len(), next.bytes(0, n - 5)), (n - 5, &bytes[..]));
        // Too small to keep, or far smaller than the kept one: fresh memory.
        let zeros = |room: &mut [MaybeUninit<u8>]| {
            room.iter_mut().for_each(|b| {
                b.write(0);
            });
            Ok::<(), ()>(())
        };
        let half = Column::from_bytes_filled(Scalar::I64, n / 3, zeros).unwrap();
        assert_ne!(half.as_ptr(), at);
    }

    #[test]
    fn min_max_finds_the_extremes_wherever_they_lie() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(rand::rng().random());
        // Past a thread's quarter million values, and short of a lane's eight.
        for n in [1, 7, 9, 1000, (1 << 20) + 3, 3 << 20] {
            let v: Vec<f32> = (0..n).map(|_| rng.random::<f32>() * 100.0 - 50.0).collect();
            let want =
                v.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &x| (l.min(x as f64), h.max(x as f64)));
            assert_eq!(Column::F32(v.clone()).min_max(), want, "{n} floats");
            let ints: Vec<i64> = v.iter().map(|&x| (x * 1e6) as i64).collect();
            let want = (*ints.iter().min().unwrap() as f64, *ints.iter().max().unwrap() as f64);
            assert_eq!(Column::I64(ints).min_max(), want, "{n} integers");
            // NaNs are skipped wherever they lie, the first value included.
            let mut holed = v.clone();
            for k in [0, n / 2, n - 1] {
                holed[k] = f32::NAN;
            }
            let want =
                holed.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &x| (l.min(x as f64), h.max(x as f64)));
            assert_eq!(Column::F32(holed).min_max(), want, "{n} floats with NaNs");
        }
        assert_eq!(Column::F64(vec![f64::NAN; 5]).min_max(), (f64::INFINITY, f64::NEG_INFINITY));
        assert_eq!(Column::F64(Vec::new()).min_max(), (f64::INFINITY, f64::NEG_INFINITY));
    }
}
