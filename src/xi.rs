//! The two-point correlation function xi(r) of a catalogue, estimated from
//! pair counts against a catalogue of randoms, as Corrfunc and TreeCorr do:
//! DD(r) within the data, RR(r) within the randoms, and DR(r) between them
//! (for Landy-Szalay). Each count is a distance histogram run like any other
//! (the built-in `sdh`, or a spec of the same shape), so it is exact and
//! both backends agree; this module only adds the estimators.

use crate::data::Inputs;
use crate::outcome::{Outcome, Totals};
use crate::run::{self, Execution, RunError, RunOptions};
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

/// A problem xi cannot be estimated with.
#[derive(Debug, thiserror::Error)]
pub enum XiError {
    #[error(
        "problem `{0}` cannot count xi's pairs: it needs a histogram of pair distances without a weight, over one set or two (sets=\"1,2\"), as the built-in sdh"
    )]
    NotADistanceHistogram(String),
    #[error(
        "weights per point are given for the {0} only: give them for both catalogues (ones for unweighted randoms)"
    )]
    WeightsOnOneSide(&'static str),
    #[error(transparent)]
    Run(#[from] RunError),
}

/// The pair counts behind xi, bucket by bucket: numbers of pairs, or with
/// weights per point the sums of the pairs' weight products (whole numbers
/// without weights, exact in f64 below 2^53).
#[derive(Debug, Clone, PartialEq)]
pub struct PairCounts {
    pub edges: Vec<f64>,
    pub dd: Vec<f64>,
    /// Only Landy-Szalay needs the cross counts.
    pub dr: Option<Vec<f64>>,
    pub rr: Vec<f64>,
    pub data_points: u64,
    pub random_points: u64,
    /// Each catalogue's sum of weights and sum of squared weights (N and N
    /// without weights): the pair totals are (W^2 - S) / 2 within a set and
    /// W_D W_R between them, as Corrfunc and TreeCorr normalise.
    pub data_weights: (f64, f64),
    pub random_weights: (f64, f64),
}

impl PairCounts {
    /// xi in each bucket; NaN where the randoms have no pair (xi is undefined there).
    pub fn xi(&self, estimator: Estimator) -> Vec<f64> {
        let ((wd, sd), (wr, sr)) = (self.data_weights, self.random_weights);
        let dd_pairs = (wd * wd - sd) / 2.0;
        let rr_pairs = (wr * wr - sr) / 2.0;
        (0..self.dd.len())
            .map(|k| {
                let dd = self.dd[k] / dd_pairs;
                let rr = self.rr[k] / rr_pairs;
                if self.rr[k] == 0.0 {
                    return f64::NAN;
                }
                match (estimator, &self.dr) {
                    (Estimator::LandySzalay, Some(dr)) => {
                        let dr = dr[k] / (wd * wr);
                        (dd - 2.0 * dr + rr) / rr
                    }
                    (Estimator::LandySzalay, None) => unreachable!("Landy-Szalay counts DR"),
                    (Estimator::Natural, _) => dd / rr - 1.0,
                }
            })
            .collect()
    }
}

/// Counts DD, RR, and DR where the estimator needs it, with `problem` (a
/// distance histogram of one or two sets). Returns the counts and the runs
/// (DD, RR, then DR) for the report.
#[allow(clippy::result_large_err, reason = "returned once per command, not in a loop")]
pub fn count(
    problem: &Problem,
    params: &Params,
    data: &Inputs,
    randoms: &Inputs,
    estimator: Estimator,
    opts: &RunOptions,
) -> Result<(PairCounts, Vec<Execution>), XiError> {
    let usable = matches!(problem.output, Output::Histogram { weight: None, .. })
        && problem.normalize.is_none()
        && problem.input.either
        && problem.input.sets == Sets::One;
    if !usable {
        return Err(XiError::NotADistanceHistogram(problem.name.clone()));
    }
    // Weights per point ride as the last column of both catalogues, or of neither.
    let carries_weights = |set: &crate::data::PointSet| set.columns.len() > problem.input.element.components().len();
    let weighted = carries_weights(&data.a);
    if weighted != carries_weights(&randoms.a) {
        return Err(XiError::WeightsOnOneSide(if weighted { "data" } else { "randoms" }));
    }
    let problem = &if weighted {
        problem.with_point_weights().expect("a distance histogram takes weights")
    } else {
        problem.clone()
    };
    let one_set = problem.with_sets(1).expect("sets=\"1,2\" takes one set");
    let counts = |exec: &Execution| match &exec.outcome {
        Outcome::Totals(Totals::Counts(c)) => c.iter().map(|&x| x as f64).collect::<Vec<f64>>(),
        Outcome::Totals(Totals::Sums(s)) => s.clone(),
        other => unreachable!("a distance histogram counts or sums, not {}", other.kind()),
    };
    let weight_sums = |set: &crate::data::PointSet| match (weighted, set.columns.last()) {
        (true, Some(w)) => (0..set.len()).fold((0.0, 0.0), |(s, q), i| (s + w.get_f64(i), q + w.get_f64(i).powi(2))),
        _ => (set.len() as f64, set.len() as f64),
    };
    let dd_run = run::execute(&one_set, params, data, opts)?;
    let rr_run = run::execute(&one_set, params, randoms, opts)?;
    let mut runs = vec![dd_run, rr_run];
    let dr = match estimator {
        Estimator::Natural => None,
        Estimator::LandySzalay => {
            let two_sets = problem.with_sets(2).expect("sets=\"1,2\" takes two sets");
            let cross = Inputs { a: data.a.clone(), b: Some(randoms.a.clone()) };
            let dr_run = run::execute(&two_sets, params, &cross, opts)?;
            let dr = counts(&dr_run);
            runs.push(dr_run);
            Some(dr)
        }
    };
    let pair_counts = PairCounts {
        edges: contribution::histogram_edges(problem, params),
        dd: counts(&runs[0]),
        dr,
        rr: counts(&runs[1]),
        data_points: data.a.len() as u64,
        random_points: randoms.a.len() as u64,
        data_weights: weight_sums(&data.a),
        random_weights: weight_sums(&randoms.a),
    };
    Ok((pair_counts, runs))
}
