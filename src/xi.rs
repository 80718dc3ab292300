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
    #[error(transparent)]
    Run(#[from] RunError),
}

/// The pair counts behind xi, bucket by bucket.
#[derive(Debug, Clone, PartialEq)]
pub struct PairCounts {
    pub edges: Vec<f64>,
    pub dd: Vec<u64>,
    /// Only Landy-Szalay needs the cross counts.
    pub dr: Option<Vec<u64>>,
    pub rr: Vec<u64>,
    pub data_points: u64,
    pub random_points: u64,
}

impl PairCounts {
    /// xi in each bucket; NaN where the randoms have no pair (xi is undefined there).
    pub fn xi(&self, estimator: Estimator) -> Vec<f64> {
        let (nd, nr) = (self.data_points as f64, self.random_points as f64);
        let dd_pairs = nd * (nd - 1.0) / 2.0;
        let rr_pairs = nr * (nr - 1.0) / 2.0;
        (0..self.dd.len())
            .map(|k| {
                let dd = self.dd[k] as f64 / dd_pairs;
                let rr = self.rr[k] as f64 / rr_pairs;
                if self.rr[k] == 0 {
                    return f64::NAN;
                }
                match (estimator, &self.dr) {
                    (Estimator::LandySzalay, Some(dr)) => {
                        let dr = dr[k] as f64 / (nd * nr);
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
        && problem.input.either
        && problem.input.sets == Sets::One;
    if !usable {
        return Err(XiError::NotADistanceHistogram(problem.name.clone()));
    }
    let one_set = problem.with_sets(1).expect("sets=\"1,2\" takes one set");
    let counts = |exec: &Execution| match &exec.outcome {
        Outcome::Totals(Totals::Counts(c)) => c.clone(),
        other => unreachable!("a histogram without a weight counts, not {}", other.kind()),
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
    };
    Ok((pair_counts, runs))
}
