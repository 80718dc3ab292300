//! The value types of columns as one trait, and a column's extremes in
//! them: what `Column::min_max` reads and what `index::take_rows` measures
//! as it copies rows, by the same fold.

use super::Column;

/// A value a column holds (f32, f64, i32, i64 or u32), as the extremes' fold and the rows' take read it.
pub trait RowValue: Copy + Send + Sync + PartialOrd {
    /// The greatest and least values (infinities for floats), which any value replaces as an extreme.
    const HIGHEST: Self;
    const LOWEST: Self;
    fn as_f64(self) -> f64;
    fn finite(self) -> bool;
    fn column(values: Vec<Self>) -> Column;
}

macro_rules! row_value {
    ($t:ty, $variant:ident, $highest:expr, $lowest:expr, $finite:expr) => {
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
        }
    };
}
row_value!(f32, F32, f32::INFINITY, f32::NEG_INFINITY, f32::is_finite);
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
}
