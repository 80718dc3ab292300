//! The output kind of the spec (count, sum, histogram, pairs, knn): what one
//! pair contributes, what the output collects, and how the kind is described.
//! Its fragment is shared by the GPU kernel and the CPU driver, so both
//! backends test, bucket and rank pairs with the very same arithmetic.
//!
//! Fragment contract (`templates/contribution/*.cu`), after the types, the
//! snippet and `Value twobs_pair(const Point&, const Point&)`:
//! - a totals kind ([`Collect::Totals`]: count, sum, histogram, weighted histogram) defines `SLOTS`, `Tally` (what a
//!   thread accumulates in registers), `Total` (`unsigned long long` for
//!   counts, `double` for sums, as [`Total`] says), `struct Contribution {
//!   unsigned slot; Tally amount; }` and `Contribution contribute(a, b)`, slot
//!   SLOTS when the pair adds nothing; `struct Setup` (what a thread reads once),
//!   `bool contribute_fast(a, b, setup, c)`, whether its fast answer c is sure,
//!   and `Contribution contribute_unsure(a, b)`, the exact one where it is not;
//! - a pairs kind defines `bool passes(a, b)`;
//! - a per-query kind defines `K` and `struct TopK` with `best[K]`,
//!   `index[K]` and `offer(value, index)`, ties to the smaller index.

use super::Template;
use super::bucket_table::{self, BucketTable};
use super::output::{Collect, Total};
use serde::Serialize;

use crate::spec::{Axis, KeyMap, Operand, Output, Params, Problem, Scalar, Spacing, Value};

/// What the output of `problem` collects with these parameter values.
pub fn collect(problem: &Problem, params: &Params) -> Collect {
    let whole = |op: &Operand| params.eval(op).as_f64() as u32;
    match &problem.output {
        Output::Count { .. } => Collect::Totals { slots: 1, total: Total::Count },
        Output::Sum => Collect::Totals { slots: 1, total: Total::Sum },
        Output::Histogram { bins, weight: None, .. } if !problem.input.point_weights => {
            Collect::Totals { slots: whole(bins), total: Total::Count }
        }
        Output::Histogram { bins, .. } => Collect::Totals { slots: whole(bins), total: Total::Sum },
        Output::Histogram2d { weight, .. } => Collect::Totals {
            slots: problem.output.histogram_slots(params).expect("a histogram") as u32,
            total: if weight.is_some() || problem.input.point_weights { Total::Sum } else { Total::Count },
        },
        Output::Pairs { .. } => Collect::Pairs,
        Output::Knn { k } => Collect::Knn { k: whole(k) },
    }
}

/// How a pair is tested (the enum is the families' shared word, in `stage`;
/// the rules that choose it are the contribution's).
pub use super::Test;

impl Test {
    /// Whether pairs may be tested on keys: a key map, and a count, pairs, or a
    /// plain f32 histogram from 0 whose value the spec can estimate.
    pub fn keys_possible(problem: &Problem, params: &Params) -> bool {
        let Some(key) = &problem.function.key else { return false };
        // An excluded pair's key is +infinity: right where map(+inf) is past
        // every edge, as the built-ins' root is; a user's map is not trusted so.
        if problem.exclude.is_some() && !problem.promises_proven {
            return false;
        }
        match &problem.output {
            Output::Count { .. } | Output::Pairs { .. } => true,
            // Log-spaced buckets from the key's bits and a table of key edges.
            Output::Histogram { spacing: Spacing::Log, .. } => key_table(problem, params).is_some(),
            Output::Histogram { weight: None, spacing: Spacing::Linear, bins, .. } if !problem.input.point_weights => {
                key.estimate.is_some()
                    && problem.function.returns == Scalar::F32
                    && histogram_scale(problem, params)
                        .is_some_and(|(lo, scale)| lo.as_f64() == 0.0 && scale.as_f64() < MAX_KEY_SCALE)
                    && params.eval(bins).as_f64() < MAX_KEY_BINS
            }
            _ => false,
        }
    }

    /// The planning rule: keys wherever possible. A threshold is one
    /// comparison instead of the map (a sqrt for the built-ins); a bucket is
    /// the spec's estimate and two multiply-adds, the map only near an edge.
    /// `gpu` is the compute capability the kernel is for, which the
    /// bracket's width depends on.
    pub fn choose(problem: &Problem, params: &Params, gpu: (u32, u32)) -> (Test, String) {
        let Some(k) = problem.function.key.as_ref().filter(|_| Test::keys_possible(problem, params)) else {
            let why = match (&problem.function.key, &problem.output) {
                (None, _) => "the spec declares no key map: each pair's value is tested".into(),
                (Some(_), _) if problem.exclude.is_some() && !problem.promises_proven => {
                    "an excluded pair's key is +infinity, which only the built-ins' maps are known to send past every edge: each pair's value is tested".into()
                }
                (Some(k), Output::Histogram { .. }) if k.estimate.is_none() => {
                    "the spec declares no estimate of the map to bracket a bucket with: each pair's value is tested"
                        .into()
                }
                (Some(_), Output::Histogram2d { .. }) => {
                    "a 2-D histogram's two values are each tested: no key map".into()
                }
                (Some(_), Output::Histogram { spacing: Spacing::Log, .. }) => {
                    "log-spaced buckets from keys need the built-ins' map, f32 values, no weights, and edges a table of at most 2047 cells can hold: each pair's value is tested"
                        .into()
                }
                (Some(_), Output::Histogram { .. }) => {
                    "buckets from keys need f32 values, fewer than 2^23 linear buckets from 0, each wider than 2^-62, and no weights: each pair's value is tested"
                        .into()
                }
                (Some(_), _) => format!("a {} output is tested on values", problem.output.kind()),
            };
            return (Test::Values, why);
        };
        match (&problem.output, &k.estimate) {
            (Output::Histogram { spacing: Spacing::Log, .. }, _) => {
                let table = key_table(problem, params).expect("keys are possible");
                (
                    Test::Keys,
                    format!(
                        "{}(a, b) is {}({}(a, b)): each pair's log-spaced bucket comes from its key's bits, a table of {} cells ({} mantissa bits) that hold one key edge at most, and one comparison on the bits; the key edges are found with {}'s arithmetic and checked by each kernel with its own when it starts",
                        problem.function.name,
                        k.map,
                        k.key,
                        table.cells,
                        23 - table.shift,
                        k.map
                    ),
                )
            }
            (Output::Histogram { .. }, Some(estimate)) if !k.estimate_proven => (
                Test::Values,
                format!(
                    "buckets from keys trust {estimate} to be within 2^-21 of {} on every key, which is proven for the built-ins only: each pair's value is tested (--test keys trusts it)",
                    k.map
                ),
            ),
            (Output::Histogram { .. }, Some(estimate)) => {
                let error = EstimateError::of(k, Some(gpu));
                let within = match error {
                    EstimateError::Promised => "as its spec promises".to_owned(),
                    EstimateError::SqrtApproxOnSm90 => format!("as measured on every key on sm_{}{}", gpu.0, gpu.1),
                };
                let (name, map, key, p) = (&problem.function.name, &k.map, &k.key, error.log2());
                (
                    Test::Keys,
                    format!(
                        "{name}(a, b) is {map}({key}(a, b)): each pair's bucket comes from {estimate}(key), within 2^-{p} of the value ({within}), scaled by 1 / (1 + 2^-{p}) and (1 + 2^-24) / (1 - 2^-{p}), which brackets the value; {map} only where the bracket spans a bucket edge"
                    ),
                )
            }
            _ => (
                Test::Keys,
                format!(
                    "{}(a, b) is {}({}(a, b)): each pair is tested on the key, one comparison against an edge found by bisection at start with {}'s own arithmetic",
                    problem.function.name, k.map, k.key, k.map
                ),
            ),
        }
    }

    /// Static shared memory the test takes per block: the threshold's key
    /// edge (a count's two edges and its flag), or a log-spaced histogram's value edges.
    pub fn shared_bytes(self, problem: &Problem, params: &Params) -> u32 {
        let value = problem.function.returns.bytes();
        let table_bytes = |t: Option<BucketTable>| t.map_or(0, |t| t.shared_bytes());
        match (self, &problem.output) {
            // The edges, and their table where the values are f32.
            (Test::Values, Output::Histogram { bins, spacing: Spacing::Log, .. }) => {
                (params.eval(bins).as_f64() as u32 + 1) * value + table_bytes(value_table(&log_edges(problem, params)))
            }
            // Each log-spaced axis's table of edges, or the edges (`contribution/histogram2d.cu`).
            (Test::Values, Output::Histogram2d { axes, .. }) => axes
                .iter()
                .filter(|a| a.spacing == Spacing::Log)
                .map(|a| match value_table(&axis_edges(a, problem.function.returns, params)) {
                    Some(t) => t.shared_bytes(),
                    None => (params.eval(&a.bins).as_f64() as u32 + 1) * value,
                })
                .sum(),
            (Test::Values, _) => 0,
            // The value edges (for NaN's, and the key probe's), and the key edges' table.
            (Test::Keys, Output::Histogram { bins, spacing: Spacing::Log, .. }) => {
                (params.eval(bins).as_f64() as u32 + 1) * value + table_bytes(key_table(problem, params))
            }
            (Test::Keys, Output::Histogram { .. }) => 0,
            // The two edges and a flag (`contribution/count_key.cu`).
            (Test::Keys, Output::Count { .. }) => 3 * value,
            (Test::Keys, _) => value,
        }
    }
}

/// The kind's fragment, testing pairs by `test`, and what it renders with,
/// for a GPU of compute capability `gpu` (None: the host's key probe).
pub fn fragment(
    problem: &Problem,
    params: &Params,
    test: Test,
    gpu: Option<(u32, u32)>,
) -> (Template, serde_json::Value) {
    let returns = problem.function.returns;
    // The snippet's key, map and estimate are called through `twobs_key`,
    // `twobs_map` and `twobs_estimate` (`templates/common/snippet.cu`).
    if let (Test::Keys, Some(key)) = (test, &problem.function.key) {
        return match &problem.output {
            Output::Count { threshold, compare } => (
                Template::ContributionCountKey,
                serde_json::json!({ "threshold": operand_expr(threshold, returns), "compare": compare.c_operator() }),
            ),
            Output::Pairs { threshold, compare, .. } => (
                Template::ContributionPairsKey,
                serde_json::json!({ "threshold": operand_expr(threshold, returns), "compare": compare.c_operator() }),
            ),
            Output::Histogram { bins, spacing: Spacing::Log, .. } => {
                let (lo, scale) = histogram_scale(problem, params).expect("a histogram");
                let table = key_table(problem, params).expect("keys are possible");
                (
                    Template::ContributionHistogramTableKey,
                    serde_json::json!({
                        "bins": whole_expr(bins), "lo": lo.c_literal(), "scale": scale.c_literal(),
                        // The value's bucket by its edges (the definition, which the probe checks keys against).
                        "log": log_context(&log_edges(problem, params), false),
                        "map": key.map, "table": table.context(),
                    }),
                )
            }
            Output::Histogram { bins, .. } => {
                let (lo, scale) = histogram_scale(problem, params).expect("a histogram");
                let error = EstimateError::of(key, gpu);
                let (below, above) = error.bracket_scales(scale.as_f64());
                (
                    Template::ContributionHistogramKey,
                    serde_json::json!({
                        "bins": whole_expr(bins), "lo": lo.c_literal(), "scale": scale.c_literal(),
                        "scale_below": Value::F32(below).c_literal(), "scale_above": Value::F32(above).c_literal(),
                        "estimate_error": error.log2(),
                    }),
                )
            }
            _ => unreachable!("keys are tested only where Test::keys_possible"),
        };
    }
    let whole = whole_expr;
    match &problem.output {
        Output::Count { threshold, compare } => (
            Template::ContributionCount,
            serde_json::json!({ "threshold": operand_expr(threshold, returns), "compare": compare.c_operator() }),
        ),
        Output::Pairs { threshold, compare, .. } => (
            Template::ContributionPairs,
            serde_json::json!({ "threshold": operand_expr(threshold, returns), "compare": compare.c_operator() }),
        ),
        Output::Sum => {
            let amount = match problem.input.point_weights {
                false => "static_cast<double>(twobs_pair(twobs_a, twobs_b))",
                true => "static_cast<double>(twobs_pair(twobs_a, twobs_b)) * twobs_point_weights(twobs_a, twobs_b)",
            };
            (Template::ContributionSum, serde_json::json!({ "amount": amount }))
        }
        Output::Histogram { bins, weight, spacing, .. } => {
            let (lo, scale) = histogram_scale(problem, params).expect("a histogram");
            // What a pair adds to its bucket where that is not 1.
            let amount = match (weight, problem.input.point_weights) {
                (None, false) => None,
                (Some(_), false) => Some("twobs_weight(twobs_a, twobs_b)"),
                (None, true) => Some("twobs_point_weights(twobs_a, twobs_b)"),
                (Some(_), true) => Some("twobs_weight(twobs_a, twobs_b) * twobs_point_weights(twobs_a, twobs_b)"),
            };
            let template = match amount {
                None => Template::ContributionHistogram,
                Some(_) => Template::ContributionWeightedHistogram,
            };
            let log = (*spacing == Spacing::Log).then(|| log_context(&log_edges(problem, params), true));
            (
                template,
                serde_json::json!({
                    "bins": whole(bins), "lo": lo.c_literal(), "scale": scale.c_literal(), "amount": amount,
                    "log": log,
                }),
            )
        }
        Output::Histogram2d { axes, weight } => {
            let axes: Vec<serde_json::Value> = axes
                .iter()
                .map(|a| {
                    let edges = axis_edges(a, returns, params);
                    let (lo, hi) = (edges[0].as_f64(), edges[edges.len() - 1].as_f64());
                    let scale = Value::F64(params.eval(&a.bins).as_f64() / (hi - lo)).cast(returns);
                    let log = (a.spacing == Spacing::Log).then(|| log_context(&edges, true));
                    serde_json::json!({
                        "name": a.name, "bins": whole(&a.bins), "lo": edges[0].c_literal(), "scale": scale.c_literal(),
                        "log": log,
                    })
                })
                .collect();
            // What a pair adds to its cell where that is not 1: an axis's value (`twobs_v` is the pair's).
            let axis = weight.as_ref().map(|name| format!("static_cast<double>(twobs_v.{name})"));
            let amount = match (axis, problem.input.point_weights) {
                (None, false) => None,
                (Some(v), false) => Some(v),
                (None, true) => Some("twobs_point_weights(twobs_a, twobs_b)".to_owned()),
                (Some(v), true) => Some(format!("{v} * twobs_point_weights(twobs_a, twobs_b)")),
            };
            (Template::ContributionHistogram2d, serde_json::json!({ "axes": axes, "amount": amount }))
        }
        Output::Knn { k } => {
            (Template::ContributionKnn, serde_json::json!({ "k": whole(k), "worst": worst_value(returns) }))
        }
    }
}

/// An axis's bucket edges in the value type, each computed in f64 and
/// rounded once: min + k (max - min) / bins where linear (the kernel buckets
/// by its scale, as a 1-D histogram's; these are the edges results are
/// written with, `0.1`, not `0.10000000397364299`), the kernel's own table,
/// min (max / min)^(k / bins), where log-spaced.
pub fn axis_edges(axis: &Axis, returns: Scalar, params: &Params) -> Vec<Value> {
    let (lo, hi) = (params.eval(&axis.min).cast(returns), params.eval(&axis.max).cast(returns));
    let bins = params.eval(&axis.bins).as_f64() as usize;
    let ratio = (hi.as_f64() / lo.as_f64()).ln();
    (0..=bins)
        .map(|k| match k {
            0 => lo,
            k if k == bins => hi,
            k if axis.spacing == Spacing::Log => {
                Value::F64(lo.as_f64() * (ratio * k as f64 / bins as f64).exp()).cast(returns)
            }
            k => Value::F64(lo.as_f64() + (hi.as_f64() - lo.as_f64()) * k as f64 / bins as f64).cast(returns),
        })
        .collect()
}

/// What a log-spaced histogram's (or axis's) buckets render with: its edges,
/// the guess's scale, and where `table` and the edges are f32, the table that
/// finds a value's bucket from its bits (`contribution/bucket_table.cu`).
fn log_context(edges: &[Value], table: bool) -> serde_json::Value {
    let (lo, hi) = (edges[0].as_f64(), edges[edges.len() - 1].as_f64());
    serde_json::json!({
        "edges": edges.iter().map(|e| e.c_literal()).collect::<Vec<_>>(),
        // Buckets per e-fold, for the guess the edges then correct.
        "scale": format!("{:?}f", ((edges.len() - 1) as f64 / (hi / lo).ln()) as f32),
        "table": if table { value_table(edges).map(|t| t.context()) } else { None },
    })
}

/// The table of f32 edges that gives a value its bucket from its bits: None
/// for f64 values, or edges no table holds (`BucketTable::new`).
pub fn value_table(edges: &[Value]) -> Option<BucketTable> {
    let edges: Option<Vec<f32>> = edges.iter().map(|e| if let Value::F32(v) = e { Some(*v) } else { None }).collect();
    BucketTable::new(&edges?)
}

/// The table of a log-spaced histogram's key edges, where pairs may be
/// bucketed from their keys' bits: the built-ins' map (`root`, which the host
/// computes as the kernels do), f32 values, each pair adding 1.
pub fn key_table(problem: &Problem, params: &Params) -> Option<BucketTable> {
    let Output::Histogram { weight: None, spacing: Spacing::Log, .. } = &problem.output else { return None };
    let key = problem.function.key.as_ref()?;
    if problem.input.point_weights
        || problem.function.returns != Scalar::F32
        || !(key.estimate_proven && key.map == "root")
    {
        return None;
    }
    let edges: Option<Vec<f32>> =
        log_edges(problem, params).iter().map(|e| if let Value::F32(v) = e { Some(*v) } else { None }).collect();
    BucketTable::new(&bucket_table::key_thresholds(&edges?, bucket_table::root)?)
}

/// A 2-D histogram's axes, each with its name and edges (f64), in order.
pub fn histogram2d_axes(problem: &Problem, params: &Params) -> Vec<(String, Vec<f64>)> {
    let Output::Histogram2d { axes, .. } = &problem.output else { return vec![] };
    axes.iter()
        .map(|a| {
            let edges = axis_edges(a, problem.function.returns, params).iter().map(|v| v.as_f64()).collect();
            (a.name.clone(), edges)
        })
        .collect()
}

/// The C expression for a whole-number operand (buckets, K).
fn whole_expr(op: &Operand) -> String {
    match op {
        Operand::Param(name) => format!("static_cast<unsigned>(params::{name})"),
        Operand::Literal(v) => v.cast(Scalar::U32).c_literal(),
        Operand::Largest(ops) => largest_expr(ops, &whole_expr),
    }
}

/// The C expression for an operand: `params::name` or a literal of `scalar`.
fn operand_expr(op: &Operand, scalar: Scalar) -> String {
    match op {
        Operand::Param(name) => format!("params::{name}"),
        Operand::Literal(v) => v.cast(scalar).c_literal(),
        Operand::Largest(ops) => largest_expr(ops, &|op| operand_expr(op, scalar)),
    }
}

/// The C expression for the largest of `ops`, each made by `expr`.
fn largest_expr(ops: &[Operand], expr: &dyn Fn(&Operand) -> String) -> String {
    ops.iter().map(expr).reduce(|a, b| format!("((({a}) > ({b})) ? ({a}) : ({b}))")).expect("a list of at least one")
}

/// A value that ranks after every real one.
fn worst_value(scalar: Scalar) -> &'static str {
    match scalar {
        Scalar::F32 => "__int_as_float(0x7f800000)",
        Scalar::F64 => "__longlong_as_double(0x7ff0000000000000LL)",
        Scalar::I32 => "2147483647",
        Scalar::I64 => "9223372036854775807LL",
        Scalar::U32 => "4294967295u",
    }
}

/// How far a histogram's estimate may lie from its map's value v,
/// relatively, on every key (or be NaN): what the bracket of a bucket from
/// keys is built on. An estimate may flush subnormal keys to 0 (the
/// built-ins' does), whose values, under 2^-63, fall in bucket 0 wherever the
/// scale is below MAX_KEY_SCALE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EstimateError {
    /// What a spec's `estimate` promises (docs/spec.md): 2^-21. NVIDIA's
    /// tests give `sqrtf` without `-prec-sqrt` (one `sqrt.approx`) 3 units
    /// in the last place at most (6 x 2^-24) on any GPU.
    Promised,
    /// The built-ins' estimate, one `sqrt.approx.ftz.f32`, on sm_90: within
    /// 1.9995 x 2^-24 of `sqrtf` on every normal key, measured over all 2^32
    /// keys on the H200 (`bench/estimate-error.py`); H100 and H200 are
    /// one chip. Bounded here by 2^-23, and checked on the GPU the suite
    /// runs on (tests/parity.rs, `keys/*`). Kernels built on it refuse to
    /// compile for another GPU.
    SqrtApproxOnSm90,
}

impl EstimateError {
    /// The error the bracket of `key`'s estimate is built on, in kernels
    /// for a GPU of compute capability `gpu` (None: the host's key probe).
    pub fn of(key: &KeyMap, gpu: Option<(u32, u32)>) -> EstimateError {
        match gpu {
            Some((9, 0)) if key.estimate_proven => EstimateError::SqrtApproxOnSm90,
            _ => EstimateError::Promised,
        }
    }

    /// The relative error p, a power of two: 2^-log2.
    pub fn log2(self) -> u32 {
        match self {
            EstimateError::Promised => 21,
            EstimateError::SqrtApproxOnSm90 => 23,
        }
    }

    /// The relative error p, exactly: a power of two.
    pub fn relative(self) -> f64 {
        1.0 / (1u64 << self.log2()) as f64
    }

    /// The f32 scales of the bracket of a bucket from keys, below and above
    /// the bucket scale S: S / (1 + p) rounded down and S (1 + u) / (1 - p)
    /// rounded up, with p the estimate's error and u = 2^-24. The bucket is
    /// floor(fl(w)), w = v S rounded once (within u of w, or under 2^-126 and
    /// so in bucket 0), and v lies within [e / (1 + p), e / (1 - p)] of the
    /// estimate e. Below: e S / (1 + p) <= w, and floor(fl(w)) >= floor(w),
    /// a whole number under 2^24 being a float (above 2^24 the bucket is past
    /// the last anyway). Above: fl(w) <= w (1 + u) <= e S (1 + u) / (1 - p).
    /// So the ends reach about p and p + u past e S. The rest of the chain:
    /// a NaN estimate is never sure; a negative one, whose value is negative
    /// too (p < 1), is sure only past the last bucket, like the value; the
    /// bucket's own f32 SCALE is S; and each floor takes e x scale exactly and
    /// rounds once. The f64 quotients are moved out by 2^-50 before their
    /// rounding, more than their own rounding can move them.
    pub fn bracket_scales(self, scale: f64) -> (f32, f32) {
        let (p, u, slack) = (self.relative(), f64::from(f32::EPSILON) / 2.0, 1.0 / (1u64 << 50) as f64);
        let below = scale / (1.0 + p) * (1.0 - slack);
        let above = scale * (1.0 + u) / (1.0 - p) * (1.0 + slack);
        let down = |x: f64| {
            let f = x as f32;
            if f as f64 > x { f.next_down() } else { f }
        };
        let up = |x: f64| {
            let f = x as f32;
            if (f as f64) < x { f.next_up() } else { f }
        };
        (down(below), up(above))
    }
}

/// Buckets from keys need a scale below 2^62 (see EstimateError) and fewer
/// than 2^23 buckets, where the bracket's floors are exact
/// (`floor_scaled`, templates/contribution/histogram_key.cu).
const MAX_KEY_SCALE: f64 = (1u64 << 62) as f64;
const MAX_KEY_BINS: f64 = (1u32 << 23) as f64;

/// The histogram's lower edge and bucket scale bins / (max - min), computed in
/// f64 and rounded once to the value type.
pub fn histogram_scale(problem: &Problem, params: &Params) -> Option<(Value, Value)> {
    let Output::Histogram { bins, min, max, .. } = &problem.output else {
        return None;
    };
    let returns = problem.function.returns;
    let lo = params.eval(min).cast(returns);
    let hi = params.eval(max).cast(returns);
    let scale = params.eval(bins).as_f64() / (hi.as_f64() - lo.as_f64());
    Some((lo, Value::F64(scale).cast(returns)))
}

/// The bucket edges of a histogram output: as the user gave them for linear
/// spacing, the kernel's own table for log spacing.
pub fn histogram_edges(problem: &Problem, params: &Params) -> Vec<f64> {
    let Output::Histogram { bins, min, max, spacing, .. } = &problem.output else { return vec![] };
    if *spacing == Spacing::Log {
        return log_edges(problem, params).iter().map(|v| v.as_f64()).collect();
    }
    let (bins, lo, hi) = (params.eval(bins).as_f64() as usize, params.eval(min).as_f64(), params.eval(max).as_f64());
    (0..=bins).map(|k| lo + (hi - lo) * k as f64 / bins as f64).collect()
}

/// A log-spaced histogram's edges: min (max / min)^(k / bins) in f64, each
/// rounded once to the value type; the first is min and the last max exactly.
/// Bucket k holds `edges[k] <= value < edges[k + 1]`, on both backends.
pub fn log_edges(problem: &Problem, params: &Params) -> Vec<Value> {
    let Output::Histogram { bins, min, max, .. } = &problem.output else { return vec![] };
    let returns = problem.function.returns;
    let (lo, hi) = (params.eval(min).cast(returns), params.eval(max).cast(returns));
    let bins = params.eval(bins).as_f64() as usize;
    let ratio = (hi.as_f64() / lo.as_f64()).ln();
    (0..=bins)
        .map(|k| match k {
            0 => lo,
            k if k == bins => hi,
            k => Value::F64(lo.as_f64() * (ratio * k as f64 / bins as f64).exp()).cast(returns),
        })
        .collect()
}

/// One line saying what the output is, with its parameter values.
pub fn describe(problem: &Problem, params: &Params) -> String {
    let show = |op: &Operand| match op {
        Operand::Param(n) => format!("{n} = {}", params.eval(op)),
        Operand::Literal(v) => v.to_string(),
        Operand::Largest(_) => params.describe(op),
    };
    match &problem.output {
        Output::Count { threshold, compare } => {
            format!("count of pairs with value {} {}", compare.c_operator(), show(threshold))
        }
        Output::Sum if problem.input.point_weights => {
            "sum of pair values times the product of the points' weights (f64)".to_owned()
        }
        Output::Sum => "sum of pair values (f64)".to_owned(),
        Output::Histogram { bins, min, max, weight, spacing } => format!(
            "histogram of {} {}buckets over [{}, {}){}",
            show(bins),
            if *spacing == Spacing::Log { "log-spaced " } else { "" },
            show(min),
            show(max),
            match (weight, problem.input.point_weights) {
                (None, false) => String::new(),
                (Some(w), false) => format!(", each pair adding {w}(a, b)"),
                (None, true) => ", each pair adding the product of its points' weights".to_owned(),
                (Some(w), true) => format!(", each pair adding {w}(a, b) times the product of its points' weights"),
            }
        ),
        Output::Histogram2d { axes, weight } => {
            let axis = |a: &Axis| {
                format!(
                    "{} in {} {}buckets over [{}, {})",
                    a.name,
                    show(&a.bins),
                    if a.spacing == Spacing::Log { "log-spaced " } else { "" },
                    show(&a.min),
                    show(&a.max)
                )
            };
            format!(
                "2-D histogram of {} x {}{}",
                axis(&axes[0]),
                axis(&axes[1]),
                match (weight, problem.input.point_weights) {
                    (None, false) => String::new(),
                    (Some(w), false) => format!(", each pair adding its {w}"),
                    (None, true) => ", each pair adding the product of its points' weights".to_owned(),
                    (Some(w), true) => format!(", each pair adding its {w} times the product of its points' weights"),
                }
            )
        }
        Output::Pairs { threshold, compare, .. } => {
            format!("pairs with value {} {}", compare.c_operator(), show(threshold))
        }
        Output::Knn { k } => format!("{} nearest per query (smallest values, ties to the smaller index)", show(k)),
    }
}

/// How the CPU driver finds a histogram pair's bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CpuBuckets {
    /// From the pair's value, the definition.
    Values,
    /// From the key: compared with the first and last key edges (most pairs
    /// a grid visits lie past the last bucket), and for those within, the
    /// count of edges the key reaches. Each edge is the smallest key whose value
    /// reaches the bucket, found with the driver's own map, so that every
    /// key lands where its value does (`templates/cpu/output/totals.cpp`).
    KeyEdges,
}

impl CpuBuckets {
    /// Key edges where the spec declares a key map and each pair adds 1 to
    /// one bucket; else values. With the reason, for the report.
    pub fn choose(problem: &Problem) -> (CpuBuckets, String) {
        let Output::Histogram { weight, .. } = &problem.output else {
            return (CpuBuckets::Values, format!("a {} output: each pair's value is tested", problem.output.kind()));
        };
        match (&problem.function.key, weight.is_some() || problem.input.point_weights) {
            (None, _) => (CpuBuckets::Values, "the spec declares no key map: each pair's bucket is its value's".into()),
            (Some(_), true) => (CpuBuckets::Values, "weighted pairs: each pair's bucket is its value's".into()),
            (Some(k), false) => (
                CpuBuckets::KeyEdges,
                format!(
                    "{}(a, b) is {}({}(a, b)): each pair's key is compared with the first and last bucket edges, and its bucket is the count of edges it reaches where it falls within; the edges are the smallest keys whose {} reaches each bucket, bisected at start with the driver's own arithmetic",
                    problem.function.name, k.map, k.key, k.map
                ),
            ),
        }
    }
}
