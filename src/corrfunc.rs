//! Pair counts as Corrfunc's `theory.DD`, `DDrppi` and `DDsmu` report them,
//! from the engine's exact histograms: with `autocorr` each pair counted in
//! both orders and each point with itself (separation 0) in the first
//! bucket where the first axis starts at 0; `weightavg` the mean weight
//! product of a bucket's pairs.

/// One bucket (or cell) per entry, in the engine's order (the first axis outer).
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pub npairs: Vec<u64>,
    /// The mean pair weight (0 in an empty bucket), where weights were given.
    pub weightavg: Option<Vec<f64>>,
    /// The mean separation of a bucket's pairs, unweighted (Corrfunc's `ravg`,
    /// `savg`, `rpavg`; 0 in an empty bucket), where its sums were counted.
    pub avg: Option<Vec<f64>>,
}

/// A set's self pairs, which Corrfunc counts at separation 0: how many,
/// and their weights' sum (each point's weight squared).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SelfPairs {
    pub points: u64,
    pub squared_weights: f64,
}

/// Corrfunc's table from the engine's `counts` (each pair once within one
/// set) and, with weights, the weight products' `sums`; `own` where the
/// catalogue is paired with itself (autocorr) and the first bucket starts
/// at separation 0.
pub fn table(
    counts: &[u64],
    (sums, separations): (Option<&[f64]>, Option<&[f64]>),
    autocorr: bool,
    own: Option<SelfPairs>,
) -> Table {
    let ends = if autocorr { 2 } else { 1 };
    let mut npairs: Vec<u64> = counts.iter().map(|&c| ends * c).collect();
    let mut sums: Option<Vec<f64>> = sums.map(|s| s.iter().map(|&x| ends as f64 * x).collect());
    if let (true, Some(own), false) = (autocorr, own, npairs.is_empty()) {
        npairs[0] += own.points;
        if let Some(s) = sums.as_mut() {
            s[0] += own.squared_weights;
        }
    }
    let mean = |s: Vec<f64>| s.iter().zip(&npairs).map(|(&w, &n)| if n > 0 { w / n as f64 } else { 0.0 }).collect();
    let weightavg = sums.map(mean);
    // A point with itself adds separation 0 (and a pair to the count, above).
    let avg = separations.map(|s| mean(s.iter().map(|&x| ends as f64 * x).collect()));
    Table { npairs, weightavg, avg }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn autocorr_counts_both_orders_and_each_point_with_itself_at_zero() {
        let own = SelfPairs { points: 10, squared_weights: 2.5 };
        let t = table(&[3, 0, 5], (Some(&[1.5, 0.0, 2.0]), Some(&[0.3, 0.0, 5.5])), true, Some(own));
        assert_eq!(t.npairs, vec![16, 0, 10]);
        assert_eq!(t.weightavg, Some(vec![(3.0 + 2.5) / 16.0, 0.0, 4.0 / 10.0]));
        assert_eq!(t.avg, Some(vec![0.6 / 16.0, 0.0, 11.0 / 10.0]), "self pairs add 0 to the sum, 1 to the count");
        let cross = table(&[3, 0, 5], (None, None), false, Some(own));
        assert_eq!(cross.npairs, vec![3, 0, 5], "two catalogues: each pair once, no self pairs");
        assert_eq!(cross.weightavg, None);
    }
}
