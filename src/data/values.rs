//! The value types of columns as one trait, and a column's extremes in
//! them: what `Column::min_max` reads and what `data::take_rows` measures
//! as it copies rows, by the same fold.

use std::mem::MaybeUninit;

use super::Column;

/// A value a column holds (f32, f64, i32, i64 or u32), as the extremes' fold and the rows' take read it.
pub trait RowValue: Copy + Send + Sync + PartialOrd {
    /// The greatest and least values (infinities for floats), which any value replaces as an extreme.
    const HIGHEST: Self;
    const LOWEST: Self;
    fn as_f64(self) -> f64;
    fn finite(self) -> bool;
    fn column(values: Vec<Self>) -> Column;
    /// Rows of three values (x y z x y z ...) into three columns, measured
    /// as they are copied: each column's extremes by [`extremes`]' fold and
    /// whether every value is finite. Each `out` holds a slot per row.
    fn take_three(rows: &[Self], out: [&mut [MaybeUninit<Self>]; 3]) -> ([(Self, Self); 3], bool) {
        take_three_rows(rows, out)
    }
}

macro_rules! row_value {
    ($t:ty, $variant:ident, $highest:expr, $lowest:expr, $finite:expr $(, $take_three:path)?) => {
        impl RowValue for $t {
            const HIGHEST: $t = $highest;
            const LOWEST: $t = $lowest;
            fn as_f64(self) -> f64 {
                self as f64
            }
            fn finite(self) -> bool {
                $finite(self)
            }
            fn column(values: Vec<$t>) -> Column {
                Column::$variant(values)
            }
            $(
                fn take_three(rows: &[$t], out: [&mut [MaybeUninit<$t>]; 3]) -> ([($t, $t); 3], bool) {
                    $take_three(rows, out)
                }
            )?
        }
    };
}
#[cfg(target_arch = "x86_64")]
row_value!(f32, F32, f32::INFINITY, f32::NEG_INFINITY, f32::is_finite, x86::take_three_f32);
#[cfg(target_arch = "x86_64")]
row_value!(f64, F64, f64::INFINITY, f64::NEG_INFINITY, f64::is_finite, x86::take_three_f64);
#[cfg(not(target_arch = "x86_64"))]
row_value!(f32, F32, f32::INFINITY, f32::NEG_INFINITY, f32::is_finite);
#[cfg(not(target_arch = "x86_64"))]
row_value!(f64, F64, f64::INFINITY, f64::NEG_INFINITY, f64::is_finite);
row_value!(i32, I32, i32::MAX, i32::MIN, |_| true);
row_value!(i64, I64, i64::MAX, i64::MIN, |_| true);
row_value!(u32, U32, u32::MAX, u32::MIN, |_| true);

/// `b` where it is smaller than `a` (a NaN is never taken, as in `Column::min_max`), in the values' own type.
pub(crate) fn less<T: RowValue>(a: T, b: T) -> T {
    if b < a { b } else { a }
}

pub(crate) fn more<T: RowValue>(a: T, b: T) -> T {
    if b > a { b } else { a }
}

/// A column's least and greatest values (NaN never taken), and whether every one is finite, in 16 lanes.
pub(crate) fn extremes<T: RowValue>(v: &[T]) -> (T, T, bool) {
    const LANES: usize = 16;
    let (mut lo, mut hi, mut finite) = ([T::HIGHEST; LANES], [T::LOWEST; LANES], [true; LANES]);
    let chunks = v.chunks_exact(LANES);
    for &x in chunks.remainder() {
        (lo[0], hi[0]) = (less(lo[0], x), more(hi[0], x));
        finite[0] &= x.finite();
    }
    for c in chunks {
        for l in 0..LANES {
            (lo[l], hi[l]) = (less(lo[l], c[l]), more(hi[l], c[l]));
            finite[l] &= c[l].finite();
        }
    }
    let lo = lo.into_iter().fold(T::HIGHEST, less);
    let hi = hi.into_iter().fold(T::LOWEST, more);
    (lo, hi, finite.into_iter().all(|f| f))
}

/// [`RowValue::take_three`] a row at a time: what every type but x86-64's
/// floats takes (an AArch64 build vectorizes it with its own interleaved loads).
fn take_three_rows<T: RowValue>(rows: &[T], [x, y, z]: [&mut [MaybeUninit<T>]; 3]) -> ([(T, T); 3], bool) {
    let (mut lo, mut hi, mut finite) = ([T::HIGHEST; 3], [T::LOWEST; 3], true);
    for (i, row) in rows.chunks_exact(3).enumerate() {
        x[i].write(row[0]);
        y[i].write(row[1]);
        z[i].write(row[2]);
        for c in 0..3 {
            (lo[c], hi[c]) = (less(lo[c], row[c]), more(hi[c], row[c]));
            finite &= row[c].finite();
        }
    }
    ([(lo[0], hi[0]), (lo[1], hi[1]), (lo[2], hi[2])], finite)
}

/// x86-64's floats taken three columns at a time in SSE2 registers (where
/// the processor has no AVX2; every x86-64 processor has SSE2): loads of
/// whole rows, shuffles that deinterleave them, MINPS/MAXPS (which keep
/// the extreme where the value is a NaN, as [`less`] and [`more`] do) and a
/// test of the exponent's bits.
/// `take_rows` of 100k 3-D f32 rows on one thread of the development VM
/// took a median 225-300 us (least 188-274), against 469 (393) for a copy
/// then a pass over each column, and 83-87 us for a memcpy of the rows
/// (`git show 2c654b2:scripts/probe-call-overhead.rs`, --take-alone).
#[cfg(target_arch = "x86_64")]
mod sse2 {
    use std::arch::x86_64::*;
    use std::mem::MaybeUninit;

    use super::x86::rows_after;
    use super::{less, more};

    pub(super) fn take_three_f32(rows: &[f32], [x, y, z]: [&mut [MaybeUninit<f32>]; 3]) -> ([(f32, f32); 3], bool) {
        let n = rows.len() / 3;
        let (x, y, z) = (&mut x[..n], &mut y[..n], &mut z[..n]);
        let whole = n - n % 4;
        // SAFETY: SSE2 is part of x86-64; every load reads 4 of the 3 * whole
        // values of `rows` and every store writes 4 of the first `whole` slots of a column.
        let (lo, hi, nonfinite) = unsafe {
            let mut lo_v = [_mm_set1_ps(f32::INFINITY); 3];
            let mut hi_v = [_mm_set1_ps(f32::NEG_INFINITY); 3];
            let exponent = _mm_set1_epi32(0x7f80_0000);
            let mut bad = _mm_setzero_si128();
            let (p, outs) =
                (rows.as_ptr(), [x.as_mut_ptr().cast::<f32>(), y.as_mut_ptr().cast(), z.as_mut_ptr().cast()]);
            for i in (0..whole).step_by(4) {
                // Four rows: a = x0 y0 z0 x1, b = y1 z1 x2 y2, c = z2 x3 y3 z3.
                let a = _mm_loadu_ps(p.add(3 * i));
                let b = _mm_loadu_ps(p.add(3 * i + 4));
                let c = _mm_loadu_ps(p.add(3 * i + 8));
                // x0 x1 | x2 x3, from (x0 x1 _ _) and (x2 _ _ x3).
                let xs = _mm_shuffle_ps(
                    _mm_shuffle_ps(a, b, 0b00_10_11_00),
                    _mm_shuffle_ps(b, c, 0b01_00_11_10),
                    0b11_00_01_00,
                );
                // y0 y1 | y2 y3, from (y0 y0 y1 y1) and (y2 y2 y3 y3).
                let ys = _mm_shuffle_ps(
                    _mm_shuffle_ps(a, b, 0b00_00_01_01),
                    _mm_shuffle_ps(b, c, 0b10_10_11_11),
                    0b10_00_10_00,
                );
                // z0 z1 | z2 z3, from (z0 z0 z1 z1) and (z2 z2 z3 z3).
                let zs = _mm_shuffle_ps(
                    _mm_shuffle_ps(a, b, 0b01_01_10_10),
                    _mm_shuffle_ps(c, c, 0b11_11_00_00),
                    0b10_00_10_00,
                );
                for (k, v) in [xs, ys, zs].into_iter().enumerate() {
                    _mm_storeu_ps(outs[k].add(i), v);
                    lo_v[k] = _mm_min_ps(v, lo_v[k]);
                    hi_v[k] = _mm_max_ps(v, hi_v[k]);
                    bad = _mm_or_si128(bad, _mm_cmpeq_epi32(_mm_and_si128(_mm_castps_si128(v), exponent), exponent));
                }
            }
            let lanes = |v: __m128| std::mem::transmute::<__m128, [f32; 4]>(v);
            (
                lo_v.map(|v| lanes(v).into_iter().fold(f32::INFINITY, less)),
                hi_v.map(|v| lanes(v).into_iter().fold(f32::NEG_INFINITY, more)),
                _mm_movemask_epi8(bad) != 0,
            )
        };
        rows_after(rows, [x, y, z], whole, (lo, hi, nonfinite))
    }

    pub(super) fn take_three_f64(rows: &[f64], [x, y, z]: [&mut [MaybeUninit<f64>]; 3]) -> ([(f64, f64); 3], bool) {
        let n = rows.len() / 3;
        let (x, y, z) = (&mut x[..n], &mut y[..n], &mut z[..n]);
        let whole = n - n % 2;
        // SAFETY: as for f32, two rows (three registers) at a time.
        let (lo, hi, nonfinite) = unsafe {
            let mut lo_v = [_mm_set1_pd(f64::INFINITY); 3];
            let mut hi_v = [_mm_set1_pd(f64::NEG_INFINITY); 3];
            let exponent = _mm_set1_epi64x(0x7ff0_0000_0000_0000);
            let mut bad = _mm_setzero_si128();
            let (p, outs) =
                (rows.as_ptr(), [x.as_mut_ptr().cast::<f64>(), y.as_mut_ptr().cast(), z.as_mut_ptr().cast()]);
            for i in (0..whole).step_by(2) {
                // Two rows: a = x0 y0, b = z0 x1, c = y1 z1.
                let a = _mm_loadu_pd(p.add(3 * i));
                let b = _mm_loadu_pd(p.add(3 * i + 2));
                let c = _mm_loadu_pd(p.add(3 * i + 4));
                let xs = _mm_shuffle_pd(a, b, 0b10);
                let ys = _mm_shuffle_pd(a, c, 0b01);
                let zs = _mm_shuffle_pd(b, c, 0b10);
                for (k, v) in [xs, ys, zs].into_iter().enumerate() {
                    _mm_storeu_pd(outs[k].add(i), v);
                    lo_v[k] = _mm_min_pd(v, lo_v[k]);
                    hi_v[k] = _mm_max_pd(v, hi_v[k]);
                    // Equal halves of the masked exponent (SSE2 compares 32 bits at a time).
                    let e = _mm_and_si128(_mm_castpd_si128(v), exponent);
                    let same = _mm_cmpeq_epi32(e, exponent);
                    bad = _mm_or_si128(bad, _mm_and_si128(same, _mm_shuffle_epi32(same, 0b10_11_00_01)));
                }
            }
            let lanes = |v: __m128d| std::mem::transmute::<__m128d, [f64; 2]>(v);
            (
                lo_v.map(|v| lanes(v).into_iter().fold(f64::INFINITY, less)),
                hi_v.map(|v| lanes(v).into_iter().fold(f64::NEG_INFINITY, more)),
                _mm_movemask_epi8(bad) != 0,
            )
        };
        rows_after(rows, [x, y, z], whole, (lo, hi, nonfinite))
    }
}

/// x86-64's floats: AVX2 where the processor has it (std asks once and
/// keeps the answer), else SSE2, which every x86-64 processor has.
#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::mem::MaybeUninit;

    use super::{RowValue, avx2, less, more, sse2};

    pub(super) fn take_three_f32(rows: &[f32], out: [&mut [MaybeUninit<f32>]; 3]) -> ([(f32, f32); 3], bool) {
        match std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the processor has AVX2.
            true => unsafe { avx2::take_three_f32(rows, out) },
            false => sse2::take_three_f32(rows, out),
        }
    }

    pub(super) fn take_three_f64(rows: &[f64], out: [&mut [MaybeUninit<f64>]; 3]) -> ([(f64, f64); 3], bool) {
        match std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the processor has AVX2.
            true => unsafe { avx2::take_three_f64(rows, out) },
            false => sse2::take_three_f64(rows, out),
        }
    }

    /// The rows from `whole` on (fewer than a block) a row at a time, their
    /// extremes merged with the blocks' (`lo`, `hi`, and whether any was not finite).
    pub(super) fn rows_after<T: RowValue>(
        rows: &[T],
        [x, y, z]: [&mut [MaybeUninit<T>]; 3],
        whole: usize,
        (lo, hi, nonfinite): ([T; 3], [T; 3], bool),
    ) -> ([(T, T); 3], bool) {
        let n = rows.len() / 3;
        let (mut extremes, finite) =
            super::take_three_rows(&rows[3 * whole..3 * n], [&mut x[whole..], &mut y[whole..], &mut z[whole..]]);
        for c in 0..3 {
            extremes[c] = (less(extremes[c].0, lo[c]), more(extremes[c].1, hi[c]));
        }
        (extremes, finite && !nonfinite)
    }
}

/// The same take in AVX2's 256-bit registers: eight f32 rows (four f64) in
/// three loads, each column gathered by two blends (any of three ports)
/// and one lane permute, where SSE2 needs nine shuffles for four rows, all
/// on one port of Intel's cores. 100k 3-D f32 rows on one thread of the
/// H200's host: 92-95 us warm against 86-158 for SSE2, 214-232 cold against
/// 231-277 (a memcpy of the rows 57-80 and 186-216; `git show 2c654b2:scripts/probe-take.rs`).
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;
    use std::mem::MaybeUninit;

    use super::x86::rows_after;
    use super::{less, more};

    /// # Safety
    /// The processor has AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn take_three_f32(
        rows: &[f32],
        [x, y, z]: [&mut [MaybeUninit<f32>]; 3],
    ) -> ([(f32, f32); 3], bool) {
        let n = rows.len() / 3;
        let (x, y, z) = (&mut x[..n], &mut y[..n], &mut z[..n]);
        let whole = n - n % 8;
        // Eight rows: m0 = x0 y0 z0 x1 y1 z1 x2 y2, m1 = z2 x3 y3 z3 x4 y4 z4 x5,
        // m2 = y5 z5 x6 y6 z6 x7 y7 z7. A column's values lie in lanes that
        // differ between the three (x: m0's 0 3 6, m1's 1 4 7, m2's 2 5), so
        // two blends put all eight in one register and a permute orders them.
        let order_x = _mm256_setr_epi32(0, 3, 6, 1, 4, 7, 2, 5);
        let order_y = _mm256_setr_epi32(1, 4, 7, 2, 5, 0, 3, 6);
        let order_z = _mm256_setr_epi32(2, 5, 0, 3, 6, 1, 4, 7);
        let mut lo = [_mm256_set1_ps(f32::INFINITY); 3];
        let mut hi = [_mm256_set1_ps(f32::NEG_INFINITY); 3];
        let exponent = _mm256_set1_epi32(0x7f80_0000);
        let mut bad = _mm256_setzero_si256();
        let (p, outs) = (rows.as_ptr(), [x.as_mut_ptr().cast::<f32>(), y.as_mut_ptr().cast(), z.as_mut_ptr().cast()]);
        for i in (0..whole).step_by(8) {
            // SAFETY: each load reads 8 of the 3 * whole values of `rows`,
            // each store 8 of the first `whole` slots of a column.
            let (m0, m1, m2) = unsafe {
                (_mm256_loadu_ps(p.add(3 * i)), _mm256_loadu_ps(p.add(3 * i + 8)), _mm256_loadu_ps(p.add(3 * i + 16)))
            };
            let xs = _mm256_permutevar8x32_ps(_mm256_blend_ps::<0x24>(_mm256_blend_ps::<0x92>(m0, m1), m2), order_x);
            let ys = _mm256_permutevar8x32_ps(_mm256_blend_ps::<0x49>(_mm256_blend_ps::<0x24>(m0, m1), m2), order_y);
            let zs = _mm256_permutevar8x32_ps(_mm256_blend_ps::<0x92>(_mm256_blend_ps::<0x49>(m0, m1), m2), order_z);
            for (k, v) in [xs, ys, zs].into_iter().enumerate() {
                unsafe { _mm256_storeu_ps(outs[k].add(i), v) };
                lo[k] = _mm256_min_ps(v, lo[k]);
                hi[k] = _mm256_max_ps(v, hi[k]);
                let e = _mm256_and_si256(_mm256_castps_si256(v), exponent);
                bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(e, exponent));
            }
        }
        // SAFETY: a register of eight f32 lanes is eight f32s.
        let lanes = |v: __m256| unsafe { std::mem::transmute::<__m256, [f32; 8]>(v) };
        let lo = lo.map(|v| lanes(v).into_iter().fold(f32::INFINITY, less));
        let hi = hi.map(|v| lanes(v).into_iter().fold(f32::NEG_INFINITY, more));
        rows_after(rows, [x, y, z], whole, (lo, hi, _mm256_movemask_epi8(bad) != 0))
    }

    /// # Safety
    /// The processor has AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn take_three_f64(
        rows: &[f64],
        [x, y, z]: [&mut [MaybeUninit<f64>]; 3],
    ) -> ([(f64, f64); 3], bool) {
        let n = rows.len() / 3;
        let (x, y, z) = (&mut x[..n], &mut y[..n], &mut z[..n]);
        let whole = n - n % 4;
        // Four rows: m0 = x0 y0 z0 x1, m1 = y1 z1 x2 y2, m2 = z2 x3 y3 z3;
        // blended as the f32 rows are, then put in order by a 64-bit permute.
        let mut lo = [_mm256_set1_pd(f64::INFINITY); 3];
        let mut hi = [_mm256_set1_pd(f64::NEG_INFINITY); 3];
        let exponent = _mm256_set1_epi64x(0x7ff0_0000_0000_0000);
        let mut bad = _mm256_setzero_si256();
        let (p, outs) = (rows.as_ptr(), [x.as_mut_ptr().cast::<f64>(), y.as_mut_ptr().cast(), z.as_mut_ptr().cast()]);
        for i in (0..whole).step_by(4) {
            // SAFETY: as for f32, four of the values and slots each.
            let (m0, m1, m2) = unsafe {
                (_mm256_loadu_pd(p.add(3 * i)), _mm256_loadu_pd(p.add(3 * i + 4)), _mm256_loadu_pd(p.add(3 * i + 8)))
            };
            // x0 x3 x2 x1, y1 y0 y3 y2, z2 z1 z0 z3.
            let xs = _mm256_permute4x64_pd::<0b01_10_11_00>(_mm256_blend_pd::<0b0010>(
                _mm256_blend_pd::<0b0100>(m0, m1),
                m2,
            ));
            let ys = _mm256_permute4x64_pd::<0b10_11_00_01>(_mm256_blend_pd::<0b0100>(
                _mm256_blend_pd::<0b1001>(m0, m1),
                m2,
            ));
            let zs = _mm256_permute4x64_pd::<0b11_00_01_10>(_mm256_blend_pd::<0b1001>(
                _mm256_blend_pd::<0b0010>(m0, m1),
                m2,
            ));
            for (k, v) in [xs, ys, zs].into_iter().enumerate() {
                unsafe { _mm256_storeu_pd(outs[k].add(i), v) };
                lo[k] = _mm256_min_pd(v, lo[k]);
                hi[k] = _mm256_max_pd(v, hi[k]);
                let e = _mm256_and_si256(_mm256_castpd_si256(v), exponent);
                bad = _mm256_or_si256(bad, _mm256_cmpeq_epi64(e, exponent));
            }
        }
        // SAFETY: a register of four f64 lanes is four f64s.
        let lanes = |v: __m256d| unsafe { std::mem::transmute::<__m256d, [f64; 4]>(v) };
        let lo = lo.map(|v| lanes(v).into_iter().fold(f64::INFINITY, less));
        let hi = hi.map(|v| lanes(v).into_iter().fold(f64::NEG_INFINITY, more));
        rows_after(rows, [x, y, z], whole, (lo, hi, _mm256_movemask_epi8(bad) != 0))
    }
}

/// A column's extremes as `Column::min_max` gives them: (inf, -inf) where
/// no value was taken (every one a NaN), else the values in f64 (a
/// monotone conversion, so the extremes of the converted values).
pub(crate) fn extreme_pair<T: RowValue>(lo: T, hi: T) -> (f64, f64) {
    // An integer column always takes a value; a float's extremes stay at
    // the infinities they started from only where every value is a NaN
    // (or where an infinity was taken, which is that extreme anyway).
    match lo > hi {
        true => (f64::INFINITY, f64::NEG_INFINITY),
        false => (lo.as_f64(), hi.as_f64()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Column::min_max` as its callers rely on it: NaN skipped, (inf, -inf)
    /// where no value is taken, infinities taken, integers exact, and the
    /// parallel fold of a long column equal to a plain one.
    #[test]
    fn min_max_skips_nan_and_takes_everything_else() {
        let f = |v: Vec<f32>| Column::F32(v).min_max();
        assert_eq!(f(vec![]), (f64::INFINITY, f64::NEG_INFINITY));
        assert_eq!(f(vec![f32::NAN; 40]), (f64::INFINITY, f64::NEG_INFINITY));
        assert_eq!(f(vec![f32::NAN, 2.5, f32::NAN, -1.25]), (-1.25, 2.5));
        assert_eq!(f(vec![f32::INFINITY, f32::NAN]), (f64::INFINITY, f64::INFINITY));
        assert_eq!(f(vec![3.0, f32::NEG_INFINITY]), (f64::NEG_INFINITY, 3.0));
        assert_eq!(Column::I64(vec![]).min_max(), (f64::INFINITY, f64::NEG_INFINITY));
        assert_eq!(Column::I64(vec![i64::MIN, 7, i64::MAX]).min_max(), (i64::MIN as f64, i64::MAX as f64));
        assert_eq!(Column::U32(vec![5, u32::MAX, 0]).min_max(), (0.0, u32::MAX as f64));
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let long: Vec<f64> = (0..(1 << 20) + 12_345)
            .map(|i| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                if i % 1001 == 0 { f64::NAN } else { (state >> 11) as f64 / (1u64 << 53) as f64 * 2e6 - 1e6 }
            })
            .collect();
        let plain = long
            .iter()
            .filter(|x| !x.is_nan())
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| (lo.min(x), hi.max(x)));
        assert_eq!(Column::F64(long).min_max(), plain);
    }

    /// Each x86-64 take (SSE2, and AVX2 where this processor has it) gives
    /// the row-at-a-time take's columns bit for bit, its extremes and its
    /// finiteness: on fresh random rows of every length around the
    /// registers' blocks, and with a NaN or an infinity at every place of
    /// 19 rows (two AVX2 blocks of f32 and three rows after them).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn vector_takes_equal_the_row_at_a_time_take() {
        use std::time::{SystemTime, UNIX_EPOCH};
        fn check<T: RowValue + std::fmt::Debug>(
            rows: &[T],
            takes: &[(&str, TakeThree<T>)],
            bits: fn(&MaybeUninit<T>) -> u64,
            at: &str,
        ) {
            let n = rows.len() / 3;
            let fresh = || -> [Vec<MaybeUninit<T>>; 3] { std::array::from_fn(|_| vec![MaybeUninit::uninit(); n]) };
            let [mut x, mut y, mut z] = fresh();
            let expected = take_three_rows(rows, [&mut x, &mut y, &mut z]);
            let expected_bits: Vec<Vec<u64>> = [&x, &y, &z].map(|c| c.iter().map(bits).collect()).to_vec();
            for (name, take) in takes {
                let [mut x, mut y, mut z] = fresh();
                let taken = take(rows, [&mut x, &mut y, &mut z]);
                let got: Vec<Vec<u64>> = [&x, &y, &z].map(|c| c.iter().map(bits).collect()).to_vec();
                assert!(got == expected_bits, "{name}, {at}: the columns differ");
                assert_eq!(format!("{taken:?}"), format!("{expected:?}"), "{name}, {at}: extremes or finiteness");
            }
        }
        type TakeThree<T> = fn(&[T], [&mut [MaybeUninit<T>]; 3]) -> ([(T, T); 3], bool);
        let mut f32_takes: Vec<(&str, TakeThree<f32>)> = vec![("sse2", sse2::take_three_f32)];
        let mut f64_takes: Vec<(&str, TakeThree<f64>)> = vec![("sse2", sse2::take_three_f64)];
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the processor has AVX2.
            f32_takes.push(("avx2", |r, o| unsafe { avx2::take_three_f32(r, o) }));
            f64_takes.push(("avx2", |r, o| unsafe { avx2::take_three_f64(r, o) }));
        } else {
            eprintln!("this processor has no AVX2: its take is not checked here");
        }
        // SAFETY (both): every slot was written by the take before it is read.
        let f32_bits: fn(&MaybeUninit<f32>) -> u64 = |v| u64::from(unsafe { v.assume_init() }.to_bits());
        let f64_bits: fn(&MaybeUninit<f64>) -> u64 = |v| unsafe { v.assume_init() }.to_bits();
        let seed = SystemTime::now().duration_since(UNIX_EPOCH).expect("a clock after 1970").as_nanos() as u64;
        let mut state = seed | 1;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64 * 2000.0 - 1000.0
        };
        for n in (0..=40).chain([1000, 4099]) {
            let rows: Vec<f64> = (0..3 * n).map(|_| next()).collect();
            let narrow: Vec<f32> = rows.iter().map(|&v| v as f32).collect();
            let at = format!("{n} rows, seed {seed}");
            check(&rows, &f64_takes, f64_bits, &at);
            check(&narrow, &f32_takes, f32_bits, &at);
        }
        for place in 0..57 {
            for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
                let mut rows: Vec<f64> = (0..57).map(|_| next()).collect();
                rows[place] = bad;
                let narrow: Vec<f32> = rows.iter().map(|&v| v as f32).collect();
                let at = format!("{bad} at {place}, seed {seed}");
                check(&rows, &f64_takes, f64_bits, &at);
                check(&narrow, &f32_takes, f32_bits, &at);
            }
        }
        for n in [3, 8, 19] {
            check(&vec![f64::NAN; 3 * n], &f64_takes, f64_bits, "all NaN");
            check(&vec![f32::NAN; 3 * n], &f32_takes, f32_bits, "all NaN");
        }
    }
}
