//! What a backend returns: the same types from the CPU and the GPU, with
//! indices into the sets as the backend saw them, and how two outcomes are
//! compared.

use crate::data::{Column, rows_moved};
use crate::spec::Scalar;

/// The result of one run.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// One total per slot: a count (one slot), a histogram's buckets, a sum (one slot).
    Totals(Totals),
    /// (i, j) index pairs: i < j for a symmetric one-set problem; (a, b) for two sets.
    Pairs(PairList),
    /// For each query, K neighbour indices and their values (of the pair
    /// function's type, as computed), best first; a query with fewer than K
    /// partners is padded with index u32::MAX and the type's worst value
    /// (+inf, or the largest integer).
    Knn { k: usize, ids: Vec<u32>, values: Column },
    /// KNN lists as [`Outcome::Knn`] holds them, left in a GPU's memory
    /// (points given on that GPU): only the Python package asks for them.
    KnnOnGpu(OnGpu),
}

/// KNN lists a run left on GPU `ordinal`: `queries` x `k` values of
/// `value` and as many u32 indices (u32::MAX where a query has fewer
/// partners), row-major, each a query's list best first; the memory is
/// freed when the last clone of `owner` is dropped.
#[derive(Clone)]
pub struct OnGpu {
    pub ordinal: usize,
    pub k: usize,
    pub queries: usize,
    pub value: Scalar,
    pub values: u64,
    pub ids: u64,
    pub owner: std::sync::Arc<dyn std::any::Any + Send + Sync>,
}

impl std::fmt::Debug for OnGpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "OnGpu {{ GPU {}, {} x {} {} at {:#x}, ids at {:#x} }}",
            self.ordinal,
            self.queries,
            self.k,
            self.value.name(),
            self.values,
            self.ids
        )
    }
}

/// Two lists on a GPU are equal where they are the same memory.
impl PartialEq for OnGpu {
    fn eq(&self, other: &OnGpu) -> bool {
        (self.ordinal, self.values, self.ids, self.k, self.queries)
            == (other.ordinal, other.values, other.ids, other.k, other.queries)
    }
}

/// Index pairs in the lists they were found in: a big join's streams and
/// GPUs return gigabytes of pairs, which are written and read where they
/// lie instead of being copied into one list (a copy into fresh memory that
/// cost a two-GPU join more than its kernels). Small lists are gathered
/// into one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PairList {
    parts: Vec<Vec<[u32; 2]>>,
}

/// Pairs a list must hold to be kept as it is, not gathered with the small ones.
const KEPT_LIST_PAIRS: usize = 1 << 20;

impl PairList {
    pub fn from_parts(lists: Vec<Vec<[u32; 2]>>) -> PairList {
        let (mut parts, small): (Vec<_>, Vec<_>) = lists.into_iter().partition(|l| l.len() >= KEPT_LIST_PAIRS);
        let gathered: Vec<[u32; 2]> = small.into_iter().flatten().collect();
        if !gathered.is_empty() {
            parts.push(gathered);
        }
        PairList { parts }
    }

    pub fn len(&self) -> usize {
        self.parts.iter().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every pair, list after list.
    pub fn iter(&self) -> impl Iterator<Item = &[u32; 2]> + '_ {
        self.parts.iter().flatten()
    }

    /// The lists, as found.
    pub fn parts(&self) -> &[Vec<[u32; 2]>] {
        &self.parts
    }

    /// The lists, as found, given away (no copy).
    pub fn into_parts(self) -> Vec<Vec<[u32; 2]>> {
        self.parts
    }

    /// Every pair in one list, in order (a copy).
    pub fn to_vec(&self) -> Vec<[u32; 2]> {
        self.iter().copied().collect()
    }
}

impl IntoIterator for PairList {
    type Item = [u32; 2];
    type IntoIter = std::iter::Flatten<std::vec::IntoIter<Vec<[u32; 2]>>>;

    fn into_iter(self) -> Self::IntoIter {
        self.parts.into_iter().flatten()
    }
}

impl From<Vec<[u32; 2]>> for PairList {
    fn from(pairs: Vec<[u32; 2]>) -> PairList {
        PairList { parts: if pairs.is_empty() { Vec::new() } else { vec![pairs] } }
    }
}

/// Totals per slot: 64-bit counts, or f64 sums.
#[derive(Debug, Clone, PartialEq)]
pub enum Totals {
    Counts(Vec<u64>),
    Sums(Vec<f64>),
}

impl Totals {
    pub fn len(&self) -> usize {
        match self {
            Totals::Counts(v) => v.len(),
            Totals::Sums(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Adds `other` slot by slot (the merge of partial totals).
    pub fn add(&mut self, other: &Totals) {
        match (self, other) {
            (Totals::Counts(a), Totals::Counts(b)) => a.iter_mut().zip(b).for_each(|(x, y)| *x += y),
            (Totals::Sums(a), Totals::Sums(b)) => a.iter_mut().zip(b).for_each(|(x, y)| *x += y),
            _ => panic!("partial totals of one run have one type"),
        }
    }

    /// The slots as f64, for reports.
    pub fn as_f64(&self) -> Vec<f64> {
        match self {
            Totals::Counts(v) => v.iter().map(|&c| c as f64).collect(),
            Totals::Sums(v) => v.clone(),
        }
    }
}

impl Outcome {
    /// KNN lists found for queries in cell order, in the input's order:
    /// sorted query s is input query `perm[s]`.
    pub fn rows_from_cell_order(self, perm: &[u32]) -> Outcome {
        match self {
            Outcome::Knn { k, ids, values } => {
                Outcome::Knn { k, ids: rows_moved(&ids, k, perm), values: values.rows_moved(k, perm) }
            }
            other => other,
        }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Outcome::Totals(Totals::Counts(_)) => "counts",
            Outcome::Totals(Totals::Sums(_)) => "sums",
            Outcome::Pairs(_) => "pairs",
            Outcome::Knn { .. } | Outcome::KnnOnGpu(_) => "knn",
        }
    }

    /// The first difference between `self` (the result under test) and
    /// `reference`, if any. Counts, pairs (as sets) and KNN lists must be equal;
    /// sums agree to a relative 1e-6 (or 1e-30 absolute), since the GPU adds in
    /// another order and CUDA's expf and friends are not correctly rounded. A
    /// NaN agrees with a NaN (a sum that met a singular pair on both sides),
    /// an infinity with the same infinity.
    pub fn difference(&self, reference: &Outcome) -> Option<String> {
        match (self, reference) {
            (Outcome::Totals(Totals::Counts(g)), Outcome::Totals(Totals::Counts(c))) => {
                let k = (0..g.len().max(c.len())).find(|&k| g.get(k) != c.get(k))?;
                Some(format!(
                    "slot {k}: {:?} against {:?} ({} slots differ; totals {} against {})",
                    g.get(k),
                    c.get(k),
                    (0..g.len().max(c.len())).filter(|&k| g.get(k) != c.get(k)).count(),
                    g.iter().sum::<u64>(),
                    c.iter().sum::<u64>()
                ))
            }
            (Outcome::Totals(Totals::Sums(g)), Outcome::Totals(Totals::Sums(c))) => {
                if g.len() != c.len() {
                    return Some(format!("{} slots against {}", g.len(), c.len()));
                }
                // Relative 1e-6, or 1e-30 absolute: near f32's subnormals CUDA's
                // expf loses relative precision (kde of two far-apart points).
                let close = |x: f64, y: f64| {
                    x == y
                        || (x.is_nan() && y.is_nan())
                        || (x.is_finite() && y.is_finite() && (x - y).abs() <= (1e-6 * y.abs()).max(1e-30))
                };
                let k = (0..g.len()).find(|&k| !close(g[k], c[k]))?;
                Some(format!(
                    "slot {k}: sum {} against {} (relative difference {:e})",
                    g[k],
                    c[k],
                    (g[k] - c[k]).abs() / c[k].abs()
                ))
            }
            (Outcome::Pairs(g), Outcome::Pairs(c)) => {
                let (g, c) = (sorted(g.to_vec()), sorted(c.to_vec()));
                if g == c {
                    return None;
                }
                let missing = c.iter().find(|p| g.binary_search(p).is_err());
                let extra = g.iter().find(|p| c.binary_search(p).is_err());
                let duplicate = g.windows(2).find(|w| w[0] == w[1]).map(|w| w[0]);
                let mut distinct = g.clone();
                distinct.dedup();
                Some(format!(
                    "{} pairs ({} distinct) against {}; first missing {missing:?}, first extra {extra:?}, first duplicate {duplicate:?}",
                    g.len(),
                    distinct.len(),
                    c.len()
                ))
            }
            (Outcome::Knn { k, ids: gi, values: gv }, Outcome::Knn { ids: ci, values: cv, .. }) => {
                if gv.scalar() != cv.scalar() {
                    return Some(format!("values of {} against {}", gv.scalar().name(), cv.scalar().name()));
                }
                let value = |v: &Column, x: usize| (x < v.len()).then(|| (v.bits(x), v.show(x)));
                // Bits: NaNs of any payload are one value.
                let bits =
                    |v: &Column, x: usize| value(v, x).map(|b| if v.get_f64(x).is_nan() { u64::MAX } else { b.0 });
                let at = (0..gi.len().max(ci.len()).max(gv.len()).max(cv.len()))
                    .find(|&x| gi.get(x) != ci.get(x) || bits(gv, x) != bits(cv, x))?;
                let k = (*k).max(1);
                Some(format!(
                    "query {}, rank {}: ({:?}, {:?}) against ({:?}, {:?})",
                    at / k,
                    at % k,
                    gi.get(at),
                    value(gv, at).map(|v| v.1),
                    ci.get(at),
                    value(cv, at).map(|v| v.1)
                ))
            }
            (g, c) => Some(format!("a result of {} against one of {}", g.kind(), c.kind())),
        }
    }
}

/// Pairs in order, by two stable counting passes (the second index, then the
/// first): linear in the pairs and the points, where a comparison sort of
/// millions of pairs took most of a test's minutes in unoptimised builds.
/// Indices far beyond the list's length (a damaged list) take the comparison sort.
pub(crate) fn sorted(mut pairs: Vec<[u32; 2]>) -> Vec<[u32; 2]> {
    let most = pairs.iter().flatten().copied().max().unwrap_or(0) as usize;
    if most > 4 * pairs.len() + (1 << 20) {
        pairs.sort_unstable();
        return pairs;
    }
    let mut from = pairs;
    let mut to = vec![[0u32; 2]; from.len()];
    for c in [1, 0] {
        let mut start = vec![0usize; most + 2];
        for p in &from {
            start[p[c] as usize + 1] += 1;
        }
        for i in 1..start.len() {
            start[i] += start[i - 1];
        }
        for p in &from {
            let slot = &mut start[p[c] as usize];
            to[*slot] = *p;
            *slot += 1;
        }
        std::mem::swap(&mut from, &mut to);
    }
    from
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_sorted_as_a_comparison_sort_sorts_them() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(rand::rng().random());
        for (len, most) in [(0, 1), (1, 5), (5_000, 40), (5_000, 3_000), (100, u32::MAX)] {
            let pairs: Vec<[u32; 2]> =
                (0..len).map(|_| [rng.random_range(0..most), rng.random_range(0..most)]).collect();
            let mut want = pairs.clone();
            want.sort_unstable();
            assert_eq!(sorted(pairs), want, "{len} pairs of indices below {most}");
        }
    }

    #[test]
    fn sums_agree_to_a_millionth_or_below_f32_subnormals() {
        let sums = |x: f64| Outcome::Totals(Totals::Sums(vec![x]));
        assert!(sums(1.000_000_5).difference(&sums(1.0)).is_none());
        assert!(sums(1.000_002).difference(&sums(1.0)).is_some());
        // kde of two far-apart points: 3.6520220e-40 against 3.6520360e-40 (seen on the H200).
        assert!(sums(3.652_022_0e-40).difference(&sums(3.652_036_0e-40)).is_none());
        assert!(sums(f64::NAN).difference(&sums(1.0)).is_some());
        assert!(sums(1.0).difference(&sums(f64::NAN)).is_some());
    }

    /// Issue 30, item 5: a sum that met a singular pair is NaN on both
    /// sides, and `--verify` failed the right answer as `NaN against NaN`.
    #[test]
    fn nan_agrees_with_nan_and_an_infinity_with_itself() {
        let sums = |x: f64| Outcome::Totals(Totals::Sums(vec![2.5, x]));
        let other_nan = f64::from_bits(f64::NAN.to_bits() ^ 1);
        assert!(sums(f64::NAN).difference(&sums(other_nan)).is_none());
        assert!(sums(f64::INFINITY).difference(&sums(f64::INFINITY)).is_none());
        assert!(sums(f64::INFINITY).difference(&sums(f64::NEG_INFINITY)).is_some());
        assert!(sums(1e300).difference(&sums(f64::INFINITY)).is_some());
        let knn = |v: f32| Outcome::Knn { k: 2, ids: vec![3, 4], values: Column::F32(vec![0.5, v]) };
        assert!(knn(f32::NAN).difference(&knn(f32::from_bits(f32::NAN.to_bits() ^ 1))).is_none());
        assert!(knn(f32::NAN).difference(&knn(1.0)).is_some());
    }

    #[test]
    fn counts_and_pairs_must_be_equal() {
        let counts = |x: u64| Outcome::Totals(Totals::Counts(vec![x, 1]));
        assert!(counts(5).difference(&counts(5)).is_none());
        assert!(counts(5).difference(&counts(6)).is_some());
        let pairs = |v: Vec<[u32; 2]>| Outcome::Pairs(v.into());
        assert!(pairs(vec![[1, 2], [0, 3]]).difference(&pairs(vec![[0, 3], [1, 2]])).is_none());
        assert!(pairs(vec![[1, 2], [1, 2]]).difference(&pairs(vec![[1, 2], [0, 3]])).is_some());
    }
}
