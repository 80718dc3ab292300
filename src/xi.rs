//! The two-point correlation function xi(r) of a catalogue, estimated from
//! pair counts against a catalogue of randoms, as Corrfunc and TreeCorr do:
//! DD(r) within the data, RR(r) within the randoms, and DR(r) between them
//! (for Landy-Szalay). Each count is a distance histogram run like any other
//! (the built-in `sdh`, or a spec of the same shape), so it is exact and
//! both backends agree; this module only adds the estimators.
//!
//! In a periodic box the randoms need not be drawn (Corrfunc's `theory.xi`):
//! DD is counted with minimum images, and RR is what a uniform catalogue of
//! the data's weights would have in each shell, its pair total times the
//! shell's share of the box's volume.
//!
//! Two-dimensional counts (a `histogram2d` spec, as the built-ins `ddrppi`
//! and `ddsmu`) give xi in each cell (rp, pi) or (s, mu), by the same
//! estimators cell by cell, and wp(rp) = 2 sum over pi of xi(rp, pi) dpi
//! (Corrfunc's `convert_rp_pi_counts_to_wp`); their analytic RR takes each
//! cell's volume: a cylindrical shell, or a shell's cone.

use crate::data::Inputs;
use crate::outcome::{Outcome, Totals};
use crate::request::{Options, Request, RequestError};
use crate::run::{self, Execution, RunError, Workers};
use crate::spec::{Output, Params, Problem, Sets};
use crate::stage::contribution;

/// How xi is estimated from the normalised counts dd, dr, rr (each count
/// over the number of pairs it could have had).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Estimator {
    /// (dd - 2 dr + rr) / rr: Landy & Szalay (1993), the least-variance one.
    LandySzalay,
    /// dd / rr - 1: the natural (Peebles-Hauser) estimator; needs no DR.
    Natural,
}

impl Estimator {
    pub fn name(self) -> &'static str {
        match self {
            Estimator::LandySzalay => "Landy-Szalay",
            Estimator::Natural => "natural",
        }
    }
}

/// What a catalogue's pair counts are divided by: the number of pairs the
/// catalogue could have had (pairs between two catalogues are always W_D W_R).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Norm {
    /// (W^2 - sum w^2) / 2, N(N - 1) / 2 unweighted: the number of distinct
    /// pairs, so that a uniform catalogue has xi = 0 in expectation at any N.
    /// Corrfunc's `theory.xi` divides so.
    Pairs,
    /// W^2 / 2, N^2 / 2 unweighted: Corrfunc's `convert_3d_counts_to_cf` and
    /// TreeCorr's `NNCorrelation` divide so; xi is then low by about 1 / N.
    Squared,
}

impl Norm {
    /// The pairs within one catalogue of weight sum `w` and squared-weight sum `s`.
    pub fn pairs_within(self, (w, s): (f64, f64)) -> f64 {
        match self {
            Norm::Pairs => (w * w - s) / 2.0,
            Norm::Squared => w * w / 2.0,
        }
    }
}

/// Points on the sky, RA and Dec in degrees (two columns), as the unit
/// vectors (cos d cos a, cos d sin a, sin d) in f64 that the built-in
/// `ddtheta` takes; a weight column after them is kept. Refuses a Dec
/// outside [-90, 90] or a value that is not finite, naming its row.
pub fn unit_vectors(set: &crate::data::PointSet) -> Result<crate::data::PointSet, NotOnTheSky> {
    use crate::data::Column;
    let n = set.len();
    let (mut x, mut y, mut z) = (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        let (ra, dec) = (set.columns[0].get_f64(i), set.columns[1].get_f64(i));
        if !(ra.is_finite() && dec.is_finite() && (-90.0..=90.0).contains(&dec)) {
            return Err(NotOnTheSky { origin: set.origin.clone(), row: set.original_row(i as u64) + 1, ra, dec });
        }
        let (a, d) = (ra.to_radians(), dec.to_radians());
        x.push(d.cos() * a.cos());
        y.push(d.cos() * a.sin());
        z.push(d.sin());
    }
    let mut columns = vec![Column::F64(x), Column::F64(y), Column::F64(z)];
    columns.extend(set.columns[2..].iter().cloned());
    Ok(crate::data::PointSet { columns, origin: set.origin.clone(), rows: set.rows.clone() })
}

/// A row of RA and Dec that is no point on the sky.
#[derive(Debug, thiserror::Error)]
#[error("{origin}: row {row}: RA {ra}, Dec {dec} is not a point on the sky (degrees, Dec from -90 to 90)")]
pub struct NotOnTheSky {
    pub origin: String,
    pub row: u64,
    pub ra: f64,
    pub dec: f64,
}

/// What the second axis of a 2-D count is, which the cells' volumes and wp
/// depend on: pi = |dz| along the line of sight, or mu = |dz| / s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineOfSight {
    /// Cells (rp, pi): rp across the line of sight, pi = |dz| along it.
    Pi,
    /// Cells (s, mu): s the separation, mu = |dz| / s.
    Mu,
}

impl LineOfSight {
    pub fn axes(self) -> [&'static str; 2] {
        match self {
            LineOfSight::Pi => ["rp", "pi"],
            LineOfSight::Mu => ["s", "mu"],
        }
    }
}

/// A problem xi cannot be estimated with.
#[derive(Debug, thiserror::Error)]
pub enum XiError {
    #[error(
        "problem `{0}` cannot count xi's pairs: it needs a histogram of pair distances without a weight, over one set or two (sets=\"1,2\"), as the built-in sdh"
    )]
    NotADistanceHistogram(String),
    #[error(
        "problem `{0}` cannot count xi's pairs in ({1}, {2}) cells: it needs a 2-D histogram (kind=\"histogram2d\") without a weight, over one set or two (sets=\"1,2\"), as the built-ins ddrppi and ddsmu"
    )]
    NotATwoDimensionalHistogram(String, &'static str, &'static str),
    #[error(
        "the {what} reach {reach}, above half the smallest width of the box ({half}): cells that large meet their own periodic images, so their analytic RR would be wrong"
    )]
    CellsPastHalfTheBox { what: &'static str, reach: f64, half: f64 },
    #[error(
        "weights per point are given for the {0} only: give them for both catalogues (ones for unweighted randoms)"
    )]
    WeightsOnOneSide(&'static str),
    #[error(
        "problem `{0}` cannot count xi's pairs in a periodic box: it needs a histogram of minimum-image distances with a periodic box parameter (as the built-in dd_periodic), and a box that is not open (box=0)"
    )]
    NotPeriodic(String),
    #[error(
        "the last bucket edge {r_max} is above half the smallest width of the box ({half}): a shell that large meets its own periodic images, so its analytic RR would be wrong"
    )]
    ShellsPastHalfTheBox { r_max: f64, half: f64 },
    #[error("{origin}: {found} columns, where problem's points have {values} values (and a weight column or none)")]
    Columns { origin: String, found: usize, values: usize },
    #[error(transparent)]
    Patches(#[from] PatchError),
    #[error(transparent)]
    Run(#[from] RunError),
    #[error(transparent)]
    Request(#[from] RequestError),
}

/// What DD is compared with: RR (and DR) counted against a catalogue of
/// randoms, or the analytic RR of a periodic box.
#[derive(Debug, Clone, PartialEq)]
pub enum Randoms {
    Counted {
        /// Only Landy-Szalay needs the cross counts.
        dr: Option<Vec<f64>>,
        rr: Vec<f64>,
        points: u64,
        /// The randoms' sum of weights and sum of squared weights.
        weights: (f64, f64),
    },
    /// No randoms: a uniform catalogue in a periodic box of this volume, with
    /// the data's weights, has in each 3-D shell its share of the box's pairs.
    Analytic { volume: f64 },
}

/// The pair counts behind xi, bucket by bucket: numbers of pairs, or with
/// weights per point the sums of the pairs' weight products (whole numbers
/// without weights, exact in f64 below 2^53).
#[derive(Debug, Clone, PartialEq)]
pub struct PairCounts {
    /// The buckets' edges: of the separation, or of the first axis of 2-D
    /// cells (rp, s), whose bucket is the outer index.
    pub edges: Vec<f64>,
    /// 2-D cells: the second axis (pi or mu) and its edges.
    pub cells: Option<(LineOfSight, Vec<f64>)>,
    pub dd: Vec<f64>,
    pub randoms: Randoms,
    pub data_points: u64,
    /// The data's sum of weights and sum of squared weights (N and N without
    /// weights): [`Norm`] makes the pair totals of them.
    pub data_weights: (f64, f64),
}

impl PairCounts {
    /// RR in each bucket: counted among the randoms, or the analytic
    /// expectation (the data's pair total under `norm` times the shell's
    /// share of the box).
    pub fn rr(&self, norm: Norm) -> Vec<f64> {
        match &self.randoms {
            Randoms::Counted { rr, .. } => rr.clone(),
            Randoms::Analytic { volume } => {
                let total = norm.pairs_within(self.data_weights);
                self.volumes().iter().map(|v| total * v / volume).collect()
            }
        }
    }

    /// The volume of each bucket: 3-D shells, or the 2-D cells'. An (rp, pi)
    /// cell is the cylindrical shell pi (rp_1^2 - rp_0^2) times its height
    /// along the line of sight on both sides, 2 (pi_1 - pi_0); an (s, mu) cell
    /// the shell 4/3 pi (s_1^3 - s_0^3) times its share of the sphere on both
    /// sides, mu_1 - mu_0.
    pub fn volumes(&self) -> Vec<f64> {
        let pi = std::f64::consts::PI;
        let cells = |los: &[f64], f: &dyn Fn(&[f64], &[f64]) -> f64| -> Vec<f64> {
            self.edges.windows(2).flat_map(|a| los.windows(2).map(move |b| f(a, b)).collect::<Vec<_>>()).collect()
        };
        match &self.cells {
            None => shell_volumes(&self.edges),
            Some((LineOfSight::Pi, los)) => {
                cells(los, &|rp, z| pi * (rp[1] * rp[1] - rp[0] * rp[0]) * 2.0 * (z[1] - z[0]))
            }
            Some((LineOfSight::Mu, los)) => {
                cells(los, &|s, mu| 4.0 / 3.0 * pi * (s[1].powi(3) - s[0].powi(3)) * (mu[1] - mu[0]))
            }
        }
    }

    /// wp(rp) = 2 sum_j xi(rp, pi_j) (pi_{j+1} - pi_j) of (rp, pi) cells, as
    /// Corrfunc's `convert_rp_pi_counts_to_wp`; None for other buckets. NaN
    /// where a cell's xi is (the randoms have no pair there).
    pub fn wp(&self, xi: &[f64]) -> Option<Vec<f64>> {
        let Some((LineOfSight::Pi, pi)) = &self.cells else { return None };
        let n = pi.len() - 1;
        Some(
            xi.chunks(n)
                .map(|row| 2.0 * row.iter().zip(pi.windows(2)).map(|(x, e)| x * (e[1] - e[0])).sum::<f64>())
                .collect(),
        )
    }

    /// The multipoles xi_l(s) of (s, mu) cells for each l of `ells`: (2l + 1)
    /// times the sum over a row's cells of xi times the integral of the
    /// Legendre polynomial L_l over the cell's mu range (exact, from L_l's
    /// antiderivative). mu = |dz| / s lies in [0, 1], and xi is even in mu, so
    /// this is (2l + 1) / 2 times the integral over [-1, 1]. None for other
    /// buckets; NaN where a cell's xi is.
    pub fn multipoles(&self, xi: &[f64], ells: &[u32]) -> Option<Vec<Vec<f64>>> {
        let Some((LineOfSight::Mu, mu)) = &self.cells else { return None };
        let n = mu.len() - 1;
        let multipole = |l: u32| -> Vec<f64> {
            let weights: Vec<f64> = mu.windows(2).map(|e| legendre_integral(l, e[0], e[1])).collect();
            let scale = f64::from(2 * l + 1);
            xi.chunks(n).map(|row| scale * row.iter().zip(&weights).map(|(x, w)| x * w).sum::<f64>()).collect()
        };
        Some(ells.iter().map(|&l| multipole(l)).collect())
    }

    /// DR, where it was counted.
    pub fn dr(&self) -> Option<&[f64]> {
        match &self.randoms {
            Randoms::Counted { dr, .. } => dr.as_deref(),
            Randoms::Analytic { .. } => None,
        }
    }

    /// xi in each bucket; NaN where the randoms have no pair (xi is undefined there).
    /// With analytic randoms DR would be W_D times the shell's share and
    /// Landy-Szalay equals the natural estimator, which is what is computed.
    pub fn xi(&self, estimator: Estimator, norm: Norm) -> Vec<f64> {
        let dd_pairs = norm.pairs_within(self.data_weights);
        let rr = self.rr(norm);
        let (rr_pairs, dr) = match &self.randoms {
            Randoms::Counted { dr, weights, .. } => {
                (norm.pairs_within(*weights), dr.as_ref().map(|dr| (dr, self.data_weights.0 * weights.0)))
            }
            Randoms::Analytic { .. } => (dd_pairs, None),
        };
        (0..self.dd.len())
            .map(|k| {
                if rr[k] == 0.0 {
                    return f64::NAN;
                }
                let (dd, rr) = (self.dd[k] / dd_pairs, rr[k] / rr_pairs);
                match (estimator, dr, &self.randoms) {
                    (Estimator::LandySzalay, Some((dr, dr_pairs)), _) => (dd - 2.0 * dr[k] / dr_pairs + rr) / rr,
                    (Estimator::LandySzalay, None, Randoms::Counted { .. }) => {
                        unreachable!("Landy-Szalay counts DR")
                    }
                    (Estimator::LandySzalay, None, Randoms::Analytic { .. }) | (Estimator::Natural, _, _) => {
                        dd / rr - 1.0
                    }
                }
            })
            .collect()
    }
}

/// The Legendre polynomial L_l at x (Bonnet's recursion).
pub fn legendre(l: u32, x: f64) -> f64 {
    let (mut below, mut p) = (1.0, x);
    if l == 0 {
        return below;
    }
    for k in 1..l {
        let k = f64::from(k);
        (below, p) = (p, ((2.0 * k + 1.0) * x * p - k * below) / (k + 1.0));
    }
    p
}

/// The integral of L_l from a to b: b - a for l = 0, else the difference of
/// its antiderivative (L_{l+1} - L_{l-1}) / (2l + 1) at the ends.
pub fn legendre_integral(l: u32, a: f64, b: f64) -> f64 {
    if l == 0 {
        return b - a;
    }
    let antiderivative = |x: f64| (legendre(l + 1, x) - legendre(l - 1, x)) / f64::from(2 * l + 1);
    antiderivative(b) - antiderivative(a)
}

/// The jackknife covariance of `samples` (one vector per patch left out):
/// (P - 1) / P sum_k (x_k - mean)(x_k - mean)^T over P samples; row i, column j.
pub fn jackknife_covariance(samples: &[Vec<f64>]) -> Vec<Vec<f64>> {
    let p = samples.len() as f64;
    let n = samples.first().map_or(0, Vec::len);
    let mean: Vec<f64> = (0..n).map(|i| samples.iter().map(|x| x[i]).sum::<f64>() / p).collect();
    (0..n)
        .map(|i| {
            (0..n)
                .map(|j| (p - 1.0) / p * samples.iter().map(|x| (x[i] - mean[i]) * (x[j] - mean[j])).sum::<f64>())
                .collect()
        })
        .collect()
}

/// The volume of each 3-D shell between consecutive edges.
pub fn shell_volumes(edges: &[f64]) -> Vec<f64> {
    edges.windows(2).map(|e| 4.0 / 3.0 * std::f64::consts::PI * (e[1].powi(3) - e[0].powi(3))).collect()
}

/// Counts DD, RR, and DR where the estimator needs it, with `problem` (a
/// distance histogram of one or two sets); without `randoms`, DD alone with a
/// periodic problem (minimum images) and RR analytic. Returns the counts and
/// the runs (DD, RR, then DR) for the report.
#[allow(clippy::result_large_err, reason = "returned once per command, not in a loop")]
pub fn count(
    problem: &Problem,
    params: &Params,
    data: &Inputs,
    randoms: Option<&Inputs>,
    estimator: Estimator,
    on: (Options, &Workers),
) -> Result<(PairCounts, Vec<Execution>), XiError> {
    count_cells(problem, params, data, randoms, estimator, None, on)
}

/// [`count`] into buckets of a distance (`los` None), or into 2-D cells
/// (rp, pi) or (s, mu) with a `histogram2d` problem (`los` its second axis).
#[allow(clippy::result_large_err, reason = "returned once per command, not in a loop")]
pub fn count_cells(
    problem: &Problem,
    params: &Params,
    data: &Inputs,
    randoms: Option<&Inputs>,
    estimator: Estimator,
    los: Option<LineOfSight>,
    on: (Options, &Workers),
) -> Result<(PairCounts, Vec<Execution>), XiError> {
    let sets = problem.normalize.is_none() && problem.input.either && problem.input.sets == Sets::One;
    let (edges, cells) = match los {
        None if sets && matches!(problem.output, Output::Histogram { weight: None, .. }) => {
            (contribution::histogram_edges(problem, params), None)
        }
        None => return Err(XiError::NotADistanceHistogram(problem.name.clone())),
        Some(los) if sets && matches!(problem.output, Output::Histogram2d { weight: None, .. }) => {
            let mut axes = contribution::histogram2d_axes(problem, params);
            let (_, second) = axes.pop().expect("two axes");
            let (_, first) = axes.pop().expect("two axes");
            (first, Some((los, second)))
        }
        Some(los) => {
            let [a, b] = los.axes();
            return Err(XiError::NotATwoDimensionalHistogram(problem.name.clone(), a, b));
        }
    };
    let volume = match (randoms, problem.periodic_box(params)) {
        (Some(_), _) => None,
        (None, None) => return Err(XiError::NotPeriodic(problem.name.clone())),
        (None, Some((_, b))) => {
            // Minimum images are unique, and shells (cylinders) whole, below half the smallest width.
            let half = b.widths().into_iter().fold(f64::INFINITY, f64::min) / 2.0;
            let last = |e: &[f64]| e[e.len() - 1];
            match &cells {
                None if last(&edges) > half => {
                    return Err(XiError::ShellsPastHalfTheBox { r_max: last(&edges), half });
                }
                Some((LineOfSight::Pi, pi)) if last(&edges).max(last(pi)) > half => {
                    let reach = last(&edges).max(last(pi));
                    return Err(XiError::CellsPastHalfTheBox { what: "cells (rp_max, pi_max)", reach, half });
                }
                Some((LineOfSight::Mu, _)) if last(&edges) > half => {
                    return Err(XiError::CellsPastHalfTheBox { what: "cells (s_max)", reach: last(&edges), half });
                }
                _ => {}
            }
            Some(b.volume())
        }
    };
    // Weights per point ride as the last column of both catalogues, or of neither.
    let values = problem.input.element.components().len();
    for set in std::iter::once(data).chain(randoms) {
        if !(values..=values + 1).contains(&set.a.columns.len()) {
            return Err(XiError::Columns { origin: set.a.origin.clone(), found: set.a.columns.len(), values });
        }
    }
    let carries_weights = |set: &crate::data::PointSet| set.columns.len() > values;
    let weighted = carries_weights(&data.a);
    if let Some(randoms) = randoms
        && weighted != carries_weights(&randoms.a)
    {
        return Err(XiError::WeightsOnOneSide(if weighted { "data" } else { "randoms" }));
    }
    let problem =
        &if weighted { problem.with_point_weights().expect("a histogram takes weights") } else { problem.clone() };
    let one_set = problem.with_sets(1).expect("sets=\"1,2\" takes one set");
    let counts = |exec: &Execution| match &exec.outcome {
        Outcome::Totals(Totals::Counts(c)) => c.iter().map(|&x| x as f64).collect::<Vec<f64>>(),
        Outcome::Totals(Totals::Sums(s)) => s.clone(),
        other => unreachable!("a histogram counts or sums, not {}", other.kind()),
    };
    let weight_sums = |set: &crate::data::PointSet| weight_sums(set, weighted);
    let mut runs = vec![histogram_run(&one_set, params, data.clone(), on)?];
    let randoms = match (randoms, volume) {
        (None, Some(volume)) => Randoms::Analytic { volume },
        (None, None) => unreachable!("refused above: no randoms and no box"),
        (Some(randoms), _) => {
            let rr_run = histogram_run(&one_set, params, randoms.clone(), on)?;
            let rr = counts(&rr_run);
            runs.push(rr_run);
            let dr = match estimator {
                Estimator::Natural => None,
                Estimator::LandySzalay => {
                    let two_sets = problem.with_sets(2).expect("sets=\"1,2\" takes two sets");
                    let cross = Inputs { a: data.a.clone(), b: Some(randoms.a.clone()) };
                    let dr_run = histogram_run(&two_sets, params, cross, on)?;
                    let dr = counts(&dr_run);
                    runs.push(dr_run);
                    Some(dr)
                }
            };
            Randoms::Counted { dr, rr, points: randoms.a.len() as u64, weights: weight_sums(&randoms.a) }
        }
    };
    let pair_counts = PairCounts {
        edges,
        cells,
        dd: counts(&runs[0]),
        randoms,
        data_points: data.a.len() as u64,
        data_weights: weight_sums(&data.a),
    };
    Ok((pair_counts, runs))
}

/// xi with each spatial patch left out in turn, and the jackknife covariance
/// of xi between buckets: TreeCorr's `var_method="jackknife"` (with its
/// `cross_patch_weight="simple"`: a pair with a point in the patch left out
/// is left out, whichever catalogue the point is in).
#[derive(Debug, Clone, PartialEq)]
pub struct Jackknife {
    /// xi without patch k, for each patch k.
    pub xi: Vec<Vec<f64>>,
    /// (P - 1) / P sum_k (xi_k - mean)(xi_k - mean)^T, P patches; row i, column j.
    pub covariance: Vec<Vec<f64>>,
}

/// A patch number per point was wrong for the catalogue.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    #[error("{what}: {found} patch numbers for {points} points")]
    Length { what: &'static str, found: usize, points: usize },
    #[error("the patches number 0 to {0}: a jackknife needs at least 2")]
    TooFew(u32),
    #[error("{npatch} k-means patches of {points} points: at least 2, and at most one a point")]
    Kmeans { npatch: u32, points: usize },
    #[error(
        "a jackknife in a periodic box with analytic RR is not defined (leaving a patch out leaves a region that is not the box): give randoms"
    )]
    Analytic,
}

/// Leaves out each patch in turn: the counts of the pairs that touch patch k
/// are counted (within the patch, and between it and the rest) and taken
/// from `full`'s; the weight totals shrink to the rest's. `full` is
/// [`count`]'s result on the same problem, catalogues and estimator.
#[allow(clippy::too_many_arguments, clippy::result_large_err, reason = "once per command")]
pub fn jackknife(
    problem: &Problem,
    params: &Params,
    data: (&Inputs, &[u32]),
    randoms: Option<(&Inputs, &[u32])>,
    estimator: Estimator,
    norm: Norm,
    full: &PairCounts,
    on: (Options, &Workers),
) -> Result<Jackknife, XiError> {
    let Some(randoms) = randoms else { return Err(PatchError::Analytic.into()) };
    for (what, (set, patches)) in [("data patches", data), ("random patches", randoms)] {
        if patches.len() != set.a.len() {
            return Err(PatchError::Length { what, found: patches.len(), points: set.a.len() }.into());
        }
    }
    let last = data.1.iter().chain(randoms.1).copied().max().unwrap_or(0);
    if last < 1 {
        return Err(PatchError::TooFew(last).into());
    }
    let Randoms::Counted { dr: full_dr, rr: full_rr, .. } = &full.randoms else {
        unreachable!("counted against randoms, as checked above")
    };
    let weighted = data.0.a.columns.len() > problem.input.element.components().len();
    let problem = &if weighted { problem.with_point_weights().expect("checked by count") } else { problem.clone() };
    let bins = full.dd.len();
    // The pairs within `a`, or between `a` and `b`; none where a set is empty.
    let histogram = |a: &crate::data::PointSet, b: Option<&crate::data::PointSet>| -> Result<Vec<f64>, XiError> {
        if a.is_empty() || b.is_some_and(|b| b.is_empty()) {
            return Ok(vec![0.0; bins]);
        }
        let p = problem.with_sets(if b.is_some() { 2 } else { 1 }).expect("sets=\"1,2\"");
        let exec = histogram_run(&p, params, Inputs { a: a.clone(), b: b.cloned() }, on)?;
        Ok(match exec.outcome {
            Outcome::Totals(Totals::Counts(c)) => c.iter().map(|&x| x as f64).collect(),
            Outcome::Totals(Totals::Sums(s)) => s,
            other => unreachable!("a distance histogram counts or sums, not {}", other.kind()),
        })
    };
    let split = |set: &Inputs, patches: &[u32], k: u32| {
        let (inside, outside): (Vec<usize>, Vec<usize>) = (0..patches.len()).partition(|&i| patches[i] == k);
        (set.a.subset(&inside, format!("patch {k}")), set.a.subset(&outside, format!("all but patch {k}")))
    };
    let minus = |all: &[f64], touching: Vec<f64>| all.iter().zip(touching).map(|(a, t)| a - t).collect::<Vec<f64>>();
    let plus = |a: Vec<f64>, b: Vec<f64>| a.into_iter().zip(b).map(|(x, y)| x + y).collect::<Vec<f64>>();
    let mut xi = Vec::new();
    for k in 0..=last {
        let (dk, dn) = split(data.0, data.1, k);
        let (rk, rn) = split(randoms.0, randoms.1, k);
        let dd = minus(&full.dd, plus(histogram(&dk, None)?, histogram(&dk, Some(&dn))?));
        let rr = minus(full_rr, plus(histogram(&rk, None)?, histogram(&rk, Some(&rn))?));
        let dr = match full_dr {
            None => None,
            Some(all) => Some(minus(all, plus(histogram(&dk, Some(&randoms.0.a))?, histogram(&dn, Some(&rk))?))),
        };
        let without = PairCounts {
            edges: full.edges.clone(),
            cells: full.cells.clone(),
            dd,
            randoms: Randoms::Counted { dr, rr, points: rn.len() as u64, weights: weight_sums(&rn, weighted) },
            data_points: dn.len() as u64,
            data_weights: weight_sums(&dn, weighted),
        };
        xi.push(without.xi(estimator, norm));
    }
    let covariance = jackknife_covariance(&xi);
    Ok(Jackknife { xi, covariance })
}

/// Spatial patches for a jackknife, as TreeCorr's `npatch`: k-means
/// centres of the data (k-means++ seeds drawn with `seed`, then Lloyd's
/// steps until no point changes patch, 100 at most), and each point of the
/// data and of the randoms in the patch of its nearest centre (the lower
/// patch on a tie). Points are rows of 3 values.
pub fn kmeans_patches(data: &[[f64; 3]], randoms: &[[f64; 3]], npatch: u32, seed: u64) -> Result<Patches, PatchError> {
    use rand::{RngExt, SeedableRng};
    let k = npatch as usize;
    if npatch < 2 || k > data.len() {
        return Err(PatchError::Kmeans { npatch, points: data.len() });
    }
    let distance = |a: &[f64; 3], b: &[f64; 3]| (0..3).map(|d| (a[d] - b[d]).powi(2)).sum::<f64>();
    let nearest = |p: &[f64; 3], centres: &[[f64; 3]]| -> (u32, f64) {
        centres.iter().enumerate().fold((0, f64::INFINITY), |best, (c, centre)| {
            let d = distance(p, centre);
            if d < best.1 { (c as u32, d) } else { best }
        })
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    // k-means++: each next seed drawn with probability proportional to its squared distance.
    let mut centres = vec![data[rng.random_range(0..data.len())]];
    let mut closest: Vec<f64> = data.iter().map(|p| distance(p, &centres[0])).collect();
    while centres.len() < k {
        let total: f64 = closest.iter().sum();
        let mut pick = rng.random::<f64>() * total;
        let next = closest.iter().position(|&d| {
            pick -= d;
            pick < 0.0
        });
        let chosen = data[next.unwrap_or(data.len() - 1)];
        centres.push(chosen);
        closest.iter_mut().zip(data).for_each(|(c, p)| *c = c.min(distance(p, &chosen)));
    }
    let mut labels: Vec<u32> = data.iter().map(|p| nearest(p, &centres).0).collect();
    for _ in 0..100 {
        let mut sums = vec![([0.0; 3], 0usize); k];
        for (p, &l) in data.iter().zip(&labels) {
            let (sum, n) = &mut sums[l as usize];
            (0..3).for_each(|d| sum[d] += p[d]);
            *n += 1;
        }
        // An emptied patch keeps its centre.
        for (centre, (sum, n)) in centres.iter_mut().zip(&sums) {
            if *n > 0 {
                *centre = sum.map(|x| x / *n as f64);
            }
        }
        let next: Vec<u32> = data.iter().map(|p| nearest(p, &centres).0).collect();
        if next == labels {
            break;
        }
        labels = next;
    }
    let randoms = randoms.iter().map(|p| nearest(p, &centres).0).collect();
    Ok(Patches { centres, data: labels, randoms })
}

/// Each catalogue's patch numbers, and the patches' centres.
#[derive(Debug, Clone, PartialEq)]
pub struct Patches {
    pub centres: Vec<[f64; 3]>,
    pub data: Vec<u32>,
    pub randoms: Vec<u32>,
}

/// One run of a distance histogram on `inputs`, whose sets carry their
/// weights as their last column where `problem` is weighted; its totals on
/// every MPI rank.
#[allow(clippy::result_large_err, reason = "once per count")]
fn histogram_run(
    problem: &Problem,
    params: &Params,
    inputs: Inputs,
    (options, workers): (Options, &Workers),
) -> Result<Execution, XiError> {
    let request = Request::of_columns(problem.clone(), params.clone(), inputs, options)?;
    let mut exec = run::execute(&request, workers)?;
    // Under MPI ranks rank 0 merged the totals: every rank estimates xi from them.
    if let Some(h) = workers.ranks.as_ref().filter(|h| h.0.size() > 1) {
        let outcome = std::mem::replace(&mut exec.outcome, Outcome::Totals(Totals::Counts(Vec::new())));
        exec.outcome = crate::ranks::share_totals(&*h.0, outcome).map_err(RunError::from)?;
    }
    Ok(exec)
}

/// A set's sum of weights and of squared weights (its size twice without weights).
fn weight_sums(set: &crate::data::PointSet, weighted: bool) -> (f64, f64) {
    match (weighted, set.columns.last()) {
        (true, Some(w)) => (0..set.len()).fold((0.0, 0.0), |(s, q), i| (s + w.get_f64(i), q + w.get_f64(i).powi(2))),
        _ => (set.len() as f64, set.len() as f64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legendre_polynomials_and_their_integrals_are_the_closed_forms() {
        for x in [-1.0, -0.7, 0.0, 0.3, 0.55, 1.0] {
            assert_eq!(legendre(0, x), 1.0);
            assert_eq!(legendre(1, x), x);
            assert!((legendre(2, x) - (3.0 * x * x - 1.0) / 2.0).abs() < 1e-15);
            assert!((legendre(4, x) - (35.0 * x.powi(4) - 30.0 * x * x + 3.0) / 8.0).abs() < 1e-15);
        }
        // The integral of L_2 is (x^3 - x) / 2; of L_4, (7x^5 - 10x^3 + 3x) / 8.
        let (a, b) = (0.2, 0.9);
        assert!((legendre_integral(2, a, b) - ((b * b * b - b) - (a * a * a - a)) / 2.0).abs() < 1e-15);
        let f4 = |x: f64| (7.0 * x.powi(5) - 10.0 * x.powi(3) + 3.0 * x) / 8.0;
        assert!((legendre_integral(4, a, b) - (f4(b) - f4(a))).abs() < 1e-15);
    }

    #[test]
    fn multipoles_take_each_legendre_term_of_cells_averaged_over_mu() {
        // xi(s, mu) = c_s + q_s L_2(mu) + h_s L_4(mu), each cell holding its mean over the cell's mu.
        let mu: Vec<f64> = (0..=400).map(|k| f64::from(k) / 400.0).collect();
        let rows = [(0.3, -1.2, 0.25), (2.0, 0.5, -0.75)];
        let xi: Vec<f64> = rows
            .iter()
            .flat_map(|&(c, q, h)| {
                mu.windows(2)
                    .map(move |e| {
                        let width = e[1] - e[0];
                        c + (q * legendre_integral(2, e[0], e[1]) + h * legendre_integral(4, e[0], e[1])) / width
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        let counts = PairCounts {
            edges: vec![0.1, 0.2, 0.3],
            cells: Some((LineOfSight::Mu, mu.clone())),
            dd: vec![0.0; xi.len()],
            randoms: Randoms::Analytic { volume: 1.0 },
            data_points: 0,
            data_weights: (0.0, 0.0),
        };
        let m = counts.multipoles(&xi, &[0, 2, 4]).expect("(s, mu) cells");
        for (row, &(c, _, _)) in rows.iter().enumerate() {
            assert!(
                (m[0][row] - c).abs() < 1e-12,
                "L_2 and L_4 integrate to 0: the monopole is c: {} vs {c}",
                m[0][row]
            );
        }
        // Narrow cells: the quadrupole and hexadecapole come back within the cells' O(width^2).
        for (row, &(_, q, h)) in rows.iter().enumerate() {
            assert!((m[1][row] - q).abs() < 1e-4, "quadrupole {} vs {q}", m[1][row]);
            assert!((m[2][row] - h).abs() < 1e-4, "hexadecapole {} vs {h}", m[2][row]);
        }
        let radial = PairCounts { cells: None, ..counts };
        assert_eq!(radial.multipoles(&[1.0, 2.0], &[0]), None, "multipoles are of (s, mu) cells");
    }

    #[test]
    fn the_jackknife_covariance_is_treecorrs() {
        let samples = vec![vec![1.0, 2.0], vec![3.0, 2.5], vec![2.0, 0.5]];
        let cov = jackknife_covariance(&samples);
        // means 2 and 5/3; (P - 1) / P = 2/3.
        let d = [[-1.0, 1.0 / 3.0], [1.0, 5.0 / 6.0], [0.0, -7.0 / 6.0]];
        for i in 0..2 {
            for j in 0..2 {
                let expected = 2.0 / 3.0 * d.iter().map(|r| r[i] * r[j]).sum::<f64>();
                assert!((cov[i][j] - expected).abs() < 1e-15);
            }
        }
    }

    #[test]
    fn kmeans_patches_find_separated_clumps_and_give_randoms_the_nearest() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let corners = [[0.1, 0.1, 0.1], [0.9, 0.1, 0.5], [0.5, 0.9, 0.9], [0.1, 0.8, 0.2]];
        let data: Vec<[f64; 3]> =
            (0..400).map(|i| corners[i % 4].map(|c| c + 0.05 * (rng.random::<f64>() - 0.5))).collect();
        let randoms: Vec<[f64; 3]> = (0..300).map(|_| [rng.random(), rng.random(), rng.random()]).collect();
        let p = kmeans_patches(&data, &randoms, 4, 3).expect("4 patches of 400 points");
        // Every clump is one patch, and the four patches differ.
        let of_clump: Vec<u32> = (0..4).map(|c| p.data[c]).collect();
        assert!((0..400).all(|i| p.data[i] == of_clump[i % 4]), "a clump split");
        assert_eq!(of_clump.iter().collect::<std::collections::BTreeSet<_>>().len(), 4);
        let d2 = |a: &[f64; 3], b: &[f64; 3]| (0..3).map(|d| (a[d] - b[d]).powi(2)).sum::<f64>();
        for (r, &l) in randoms.iter().zip(&p.randoms) {
            let mine = d2(r, &p.centres[l as usize]);
            assert!(p.centres.iter().all(|c| mine <= d2(r, c)), "a random not in its nearest patch");
        }
        assert_eq!(kmeans_patches(&data, &randoms, 4, 3).unwrap(), p, "the same seed, the same patches");
        assert!(kmeans_patches(&data, &randoms, 1, 3).is_err() && kmeans_patches(&data[..3], &[], 4, 3).is_err());
    }
}
