//! The problem spec: XML text in, a validated [`Problem`] out.
//!
//! Everything after this module may assume the problem is well formed: names
//! are C identifiers, operands refer to declared parameters of the right type,
//! the snippet exists and defines the function.

mod value;
pub mod vocabulary;
pub mod xml;

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;
pub use value::{BoxTime, PeriodicBox, Scalar, Value};
use xml::{Attr, Node, Pos};

/// A spec that failed to parse or validate, with the place it failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}:{col}: {message}")]
pub struct SpecError {
    pub file: String,
    pub line: usize,
    pub col: usize,
    pub message: String,
}

/// A parameter value that does not fit its declaration or the output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParamError(pub String);

macro_rules! param_error {
    ($($t:tt)*) => { ParamError(format!($($t)*)) };
}

/// How many point sets the statistic runs over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Sets {
    /// Pairs within one set.
    One,
    /// Pairs of an A point and a B point.
    Two,
}

/// One named component of an element: a coordinate or a record field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Component {
    pub name: String,
    pub scalar: Scalar,
}

/// The layout of one input element.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "layout")]
pub enum Element {
    /// A point of `dims` coordinates of one scalar type.
    Vector { scalar: Scalar, dims: u32 },
    /// A record of named fields (a table row).
    Record { fields: Vec<Component> },
}

impl Element {
    /// Coordinates are named x, y, z, w up to four dimensions, c0, c1, ... beyond.
    pub fn components(&self) -> Vec<Component> {
        match self {
            Element::Vector { scalar, dims } => {
                (0..*dims).map(|d| Component { name: coordinate_name(*dims, d), scalar: *scalar }).collect()
            }
            Element::Record { fields } => fields.clone(),
        }
    }
}

pub fn coordinate_name(dims: u32, d: u32) -> String {
    if dims <= 4 { ["x", "y", "z", "w"][d as usize].to_owned() } else { format!("c{d}") }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Input {
    /// The sets a run takes when the user gives no input.
    pub sets: Sets,
    /// `sets="1,2"`: two sets are allowed too (`sets` is then One), and the
    /// number of inputs given picks ([`Problem::with_sets`]).
    pub either: bool,
    pub element: Element,
    /// `dims_from_input="true"`: `dims` is the default, and an input with
    /// another number of values per point sets it ([`Problem::with_dims`]);
    /// the snippet then reads coordinates through `DIMS` and `coord(p, i)`.
    pub dims_from_input: bool,
    /// Each point carries a weight (`--weights`, [`Problem::with_point_weights`]):
    /// an f64 member `twobs_w` after the element's, and a pair weighs the product.
    pub point_weights: bool,
    /// Integer ids each point carries (`<id name="..."/>`): i32 members of
    /// `Point` after the element's and the weight, named so, read from a
    /// column of the input (`type`, `molecule` of an MD file) or a file of
    /// their own (`--id NAME=FILE`).
    pub ids: Vec<String>,
}

/// The member of `Point` that holds a point's weight.
pub const WEIGHT_MEMBER: &str = "twobs_w";

impl Input {
    /// The arrays a point is read from: the element's, then its weight where
    /// points carry one.
    pub fn components(&self) -> Vec<Component> {
        let mut components = self.element.components();
        if self.point_weights {
            components.push(Component { name: WEIGHT_MEMBER.into(), scalar: Scalar::F64 });
        }
        components.extend(self.ids.iter().map(|name| Component { name: name.clone(), scalar: Scalar::I32 }));
        components
    }

    /// Whether `Point` carries more than its element (a weight, ids), and so
    /// is a struct even for a vector of up to four coordinates.
    pub fn has_extras(&self) -> bool {
        self.point_weights || !self.ids.is_empty()
    }

    /// Bytes one point occupies across its arrays.
    pub fn bytes(&self) -> u32 {
        self.components().iter().map(|c| c.scalar.bytes()).sum()
    }
}

/// The user's pairwise function and the snippet that defines it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Function {
    pub name: String,
    /// The snippet path as the user should see it in messages and `#line`.
    pub file: String,
    #[serde(skip)]
    pub source: String,
    /// f(a, b) == f(b, a): a self problem then visits each unordered pair once.
    pub symmetric: bool,
    /// Type of the value f returns.
    pub returns: Scalar,
    /// The value as a monotone map of a cheaper key, where the spec declares one.
    pub key: Option<KeyMap>,
}

/// The spec's promise that f(a, b) == map(key(a, b)) bit for bit, with `map`
/// non-decreasing: thresholds and bucket edges then become exact key edges,
/// and pairs are tested on the key, without evaluating `map`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyMap {
    /// `__device__ Value key(Point a, Point b)`: the key, of the value's type.
    pub key: String,
    /// `__device__ Value map(Value key)`: the value of a key, non-decreasing.
    pub map: String,
    /// `__device__ Value estimate(Value key)`: a fast approximation of `map`,
    /// within 2^-21 of it (or NaN), that brackets a histogram bucket.
    pub estimate: Option<String>,
    /// The estimate is proven on every float key by the key probes (the
    /// built-ins'), so the planner buckets on keys without being asked.
    pub estimate_proven: bool,
}

/// The spec's promise that a pair whose components differ by more than
/// `value` in any one of `over` (the coordinates, or the named fields of a
/// record) contributes nothing: no count, bucket, pair or sum term. With a
/// periodic box the difference is the minimum image's. A cut-off problem may
/// then visit only the pairs of neighbouring grid cells.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cutoff {
    /// The separation past which pairs add nothing; None on a KNN output,
    /// where the promise is that a pair's value is at least its separation
    /// in each component, so that a query's K-th value bounds its search.
    pub value: Option<Operand>,
    /// The components the promise is about: every coordinate of a point, or
    /// the fields named by `over` on a record.
    pub over: CutoffOver,
    /// How far apart a pair must be for the promise to hold.
    pub metric: Metric,
}

/// The separation a cutoff bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    /// Any one covered component's difference past the cutoff: the grid
    /// visits the cube of cells around a point's own.
    Component,
    /// The Euclidean norm of the covered components' differences (minimum
    /// images in a periodic box) past the cutoff, a stronger promise: the
    /// CPU's grid of finer cells also skips the cells of that cube whose
    /// nearest points lie farther apart than the cutoff.
    Euclidean,
}

impl Metric {
    pub fn parse(name: &str) -> Option<Metric> {
        vocabulary::METRIC.iter().position(|s| *s == name).map(|k| [Metric::Component, Metric::Euclidean][k])
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CutoffOver {
    Coordinates,
    Fields(Vec<String>),
}

/// How the pair value is compared with a threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Compare {
    /// value < threshold
    Lt,
    /// value <= threshold
    Le,
}

impl Compare {
    pub fn c_operator(self) -> &'static str {
        match self {
            Compare::Lt => "<",
            Compare::Le => "<=",
        }
    }
}

/// A number in the spec: a declared parameter or a literal.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Operand {
    Param(String),
    Literal(Value),
    /// The largest of several: a cutoff's `value="rp_max,pi_max"`, for a
    /// 2-D histogram whose axes end at different separations.
    Largest(Vec<Operand>),
}

/// What the statistic produces from the pair values.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum Output {
    /// Number of pairs whose value passes the comparison.
    Count { threshold: Operand, compare: Compare },
    /// Sum of all pair values (in f64).
    Sum,
    /// Pairs counted into `bins` equal buckets over [min, max); with a
    /// `weight` function, each pair adds weight(a, b) (in f64) instead of 1.
    Histogram { bins: Operand, min: Operand, max: Operand, weight: Option<String>, spacing: Spacing },
    /// Pairs counted into the cells of a grid of buckets over the two values
    /// the function returns (`Value2`, one member per axis): cell (i, j) holds
    /// the pairs whose first value is in the first axis's bucket i and whose
    /// second is in the second's bucket j, each bucketed as a 1-D histogram's;
    /// slot i * bins_2 + j. A pair outside either axis adds nothing. With a
    /// `weight`, the name of an axis, each pair adds that value of its own (in
    /// f64) instead of 1: the sums behind Corrfunc's `savg` and `rpavg`.
    Histogram2d { axes: Box<[Axis; 2]>, weight: Option<String> },
    /// The index pairs whose value passes the comparison.
    Pairs { threshold: Operand, compare: Compare, estimate: Option<f64> },
    /// The K pairs of smallest value for each query point.
    Knn { k: Operand },
}

impl Output {
    pub fn kind(&self) -> &'static str {
        match self {
            Output::Count { .. } => "count",
            Output::Sum => "sum",
            Output::Histogram { .. } => "histogram",
            Output::Histogram2d { .. } => "histogram2d",
            Output::Pairs { .. } => "pairs",
            Output::Knn { .. } => "knn",
        }
    }
}

/// One axis of a two-dimensional histogram: the member of `Value2` it
/// buckets, and its buckets, as a 1-D histogram's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Axis {
    /// The member of `Value2` (a C identifier), and the axis's name in results.
    pub name: String,
    pub bins: Operand,
    pub min: Operand,
    pub max: Operand,
    pub spacing: Spacing,
}

impl Output {
    /// The buckets' slots: a histogram's bins, a 2-D histogram's cells.
    pub fn histogram_slots(&self, params: &Params) -> Option<u64> {
        let whole = |op: &Operand| params.eval(op).as_f64() as u64;
        match self {
            Output::Histogram { bins, .. } => Some(whole(bins)),
            Output::Histogram2d { axes, .. } => Some(whole(&axes[0].bins) * whole(&axes[1].bins)),
            _ => None,
        }
    }
}

/// How a histogram's bucket edges are spaced between min and max.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Spacing {
    /// Equal widths: edge k is min + k (max - min) / bins.
    Linear,
    /// Equal ratios: edge k is min (max / min)^(k / bins), min > 0.
    Log,
}

impl Spacing {
    pub fn parse(name: &str) -> Option<Spacing> {
        vocabulary::SPACING.iter().position(|s| *s == name).map(|k| [Spacing::Linear, Spacing::Log][k])
    }

    /// The buckets that `edges` (as Corrfunc's and numpy's users give them)
    /// are: (bins, min, max, spacing), where they are evenly or log-evenly
    /// spaced to a relative 1e-6; else why not.
    pub fn of_edges(edges: &[f64]) -> Result<(u32, f64, f64, Spacing), String> {
        let increasing = edges.windows(2).all(|e| e[0] < e[1]);
        if edges.len() < 2 || !increasing || edges[0] < 0.0 || !edges.iter().all(|e| e.is_finite()) {
            return Err("bins: expected increasing finite edges r_0 < r_1 < ... (at least two), none negative".into());
        }
        let bins = edges.len() - 1;
        let (lo, hi) = (edges[0], edges[bins]);
        let near = |want: &dyn Fn(usize) -> f64| {
            edges.iter().enumerate().all(|(k, &e)| (e - want(k)).abs() <= 1e-6 * want(k).abs())
        };
        let spacing = if near(&|k| lo + (hi - lo) * k as f64 / bins as f64) {
            Spacing::Linear
        } else if lo > 0.0 && near(&|k| lo * (hi / lo).powf(k as f64 / bins as f64)) {
            Spacing::Log
        } else {
            return Err(
                "bins: twobs's buckets are evenly spaced or log-evenly spaced from the first edge to the last; these edges are neither".into(),
            );
        };
        let bins = u32::try_from(bins).map_err(|_| format!("bins: {bins} buckets; at most {} ", u32::MAX))?;
        Ok((bins, lo, hi, spacing))
    }
}

/// The most buckets a log-spaced histogram has: its edges are a table in
/// shared memory (16 KiB of f32).
pub const MAX_LOG_BINS: u32 = 4095;

/// A normalization of the raw histogram written beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Normalization {
    /// g(r): counts over the counts of an ideal gas of the same density in each 3-D shell.
    Rdf,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Param {
    pub name: String,
    pub kind: ParamKind,
    /// The number type (of each of a box's numbers).
    pub scalar: Scalar,
    pub default: Value,
    pub doc: String,
    /// `positive="true"`: the value must be above 0 (a bandwidth, a length).
    pub positive: bool,
    /// Where the default is written (`spec.xml:7:31`), for an error about it.
    #[serde(skip)]
    pub default_at: String,
}

/// What a parameter holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ParamKind {
    Number,
    /// A periodic simulation box (`type="box"`): `params::name` is a `PeriodicBox<float>`.
    Box,
}

impl Param {
    /// Reads a value of this parameter from `text` (a default or a `--param`).
    pub fn parse_value(&self, text: &str) -> Result<Value, String> {
        match self.kind {
            ParamKind::Number => Value::parse(self.scalar, text),
            ParamKind::Box => PeriodicBox::parse(self.scalar, text).map(Value::Box),
        }
    }
}

/// A validated problem spec.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Problem {
    pub name: String,
    pub summary: String,
    /// Where the spec came from, as shown to the user.
    pub origin: String,
    pub input: Input,
    pub function: Function,
    pub output: Output,
    /// Set by `normalize` on a histogram output.
    pub normalize: Option<Normalization>,
    /// Declared by `<cutoff>`: far pairs contribute nothing.
    pub cutoff: Option<Cutoff>,
    pub params: Vec<Param>,
    /// `<exclude same="ID"/>`: a pair whose points carry the same value of
    /// this id (one of `input.ids`) adds nothing, as if it were not there
    /// (MDAnalysis's `exclusion_block`, for molecules of any size).
    pub exclude: Option<String>,
    /// The cutoff and key map are a built-in's, which the suite checks
    /// (`tests/grid.rs`, `tests/keys.rs`): a run need not sample them.
    #[serde(skip)]
    pub promises_proven: bool,
}

/// Reads the files a spec refers to. Built-in problems read from the binary,
/// user specs from disk.
pub trait Files {
    fn read(&self, path: &Path) -> Option<String>;

    /// The file's text, or why it cannot be read (for the spec's message).
    fn read_why(&self, path: &Path) -> Result<String, String> {
        self.read(path).ok_or_else(String::new)
    }
}

pub struct Disk;

impl Files for Disk {
    fn read(&self, path: &Path) -> Option<String> {
        self.read_why(path).ok()
    }

    /// Read within bounds (`memory::read_text`): a snippet larger than the
    /// memory available, or no text (`file="/dev/zero"`), is refused, not read whole.
    fn read_why(&self, path: &Path) -> Result<String, String> {
        crate::memory::read_text(path).map_err(|e| e.to_string())
    }
}

impl Problem {
    /// Parses and validates the spec text found at `origin`.
    pub fn parse(text: &str, origin: &Path, files: &dyn Files) -> Result<Problem, SpecError> {
        let cx = Cx { src: text, file: origin.display().to_string() };
        let root = xml::parse(text).map_err(|(pos, msg)| cx.err(pos, msg))?;
        cx.problem(&root, origin, files)
    }

    pub fn param(&self, name: &str) -> Option<&Param> {
        self.params.iter().find(|p| p.name == name)
    }

    /// The parameter values: defaults, then `NAME=VALUE` overrides in order.
    pub fn bind(&self, overrides: &[String]) -> Result<Params, ParamError> {
        let mut values: Vec<(String, Value)> = self.params.iter().map(|p| (p.name.clone(), p.default)).collect();
        for item in overrides {
            let (name, text) =
                item.split_once('=').ok_or_else(|| param_error!("parameter `{item}`: expected NAME=VALUE"))?;
            let (name, text) = (name.trim(), text.trim());
            let Some(param) = self.param(name) else {
                let known: Vec<&str> = self.params.iter().map(|p| p.name.as_str()).collect();
                return Err(param_error!(
                    "problem `{}` has no parameter `{name}`; its parameters are: {}",
                    self.name,
                    if known.is_empty() { "(none)".to_owned() } else { known.join(", ") }
                ));
            };
            let value = param.parse_value(text).map_err(|why| param_error!("parameter {name}={text}: {why}"))?;
            values.iter_mut().find(|(n, _)| n == name).expect("declared").1 = value;
        }
        let params = Params { values, box_time: BoxTime::Compile };
        params.check(self).map_err(|(e, blame)| {
            // A default the user kept is named where the spec writes it.
            match self.blamed_param(&blame) {
                Some(p) if !overrides.iter().any(|o| o.split_once('=').is_some_and(|(n, _)| n.trim() == p.name)) => {
                    param_error!(
                        "{}: {} (the default of `{}`; {}=VALUE sets another)",
                        p.default_at,
                        e.0,
                        p.name,
                        p.name
                    )
                }
                _ => e,
            }
        })?;
        Ok(params)
    }
}

impl Problem {
    /// The parameter whose value [`Params::check`] blames, where a parameter set it.
    fn blamed_param(&self, blame: &Blame) -> Option<&Param> {
        let operand = match (blame, &self.output) {
            (Blame::Param(name), _) => return self.param(name),
            (Blame::Cutoff, _) => self.cutoff.as_ref()?.value.as_ref()?,
            (Blame::Output("bins"), Output::Histogram { bins, .. }) => bins,
            (Blame::Output("min"), Output::Histogram { min, .. }) => min,
            (Blame::Output("max"), Output::Histogram { max, .. }) => max,
            (Blame::Output("k"), Output::Knn { k }) => k,
            (Blame::Axis(a, "bins"), Output::Histogram2d { axes, .. }) => &axes[*a].bins,
            (Blame::Axis(a, "min"), Output::Histogram2d { axes, .. }) => &axes[*a].min,
            (Blame::Axis(a, "max"), Output::Histogram2d { axes, .. }) => &axes[*a].max,
            _ => return None,
        };
        match operand {
            Operand::Param(name) => self.param(name),
            Operand::Literal(_) | Operand::Largest(_) => None,
        }
    }

    /// The periodic box the points live in: the value of the problem's box
    /// parameter, unless it is open (0).
    pub fn periodic_box(&self, params: &Params) -> Option<(String, PeriodicBox)> {
        let p = self.params.iter().find(|p| p.kind == ParamKind::Box)?;
        match params.get(&p.name) {
            Some(Value::Box(b)) if !b.is_open() => Some((p.name.clone(), b)),
            _ => None,
        }
    }

    /// The problem over `n` sets, the number of inputs the user gave: refused
    /// where the spec does not allow that number.
    pub fn with_sets(&self, n: usize) -> Result<Problem, ParamError> {
        let sets = match n {
            1 => Some(Sets::One),
            2 => Some(Sets::Two),
            _ => None,
        };
        let Some(sets) = sets.filter(|s| *s == self.input.sets || self.input.either) else {
            let times = match n {
                1 => "once".to_owned(),
                2 => "twice".to_owned(),
                n => format!("{n} times"),
            };
            return Err(param_error!(
                "problem `{}` takes {}: give {} {}, not {times}",
                self.name,
                self.input.describe_counts(),
                crate::remedy::Remedy::Inputs,
                self.input.describe_counts_as_inputs()
            ));
        };
        let mut p = self.clone();
        p.input.sets = sets;
        p.input.either = false;
        Ok(p)
    }

    /// The problem for points of `dims` values: the spec's own dims, or any
    /// from 1 to the most a spec allows where it says `dims_from_input`.
    pub fn with_dims(&self, dims: u32) -> Result<Problem, ParamError> {
        let Element::Vector { scalar, dims: declared } = self.input.element else {
            return Err(param_error!(
                "problem `{}` takes records of {} fields, not points of {dims} values",
                self.name,
                self.input.element.components().len()
            ));
        };
        if dims == declared {
            return Ok(self.clone());
        }
        if !self.input.dims_from_input {
            return Err(param_error!(
                "problem `{}` takes points of {declared} values, not {dims} (its spec fixes dims=\"{declared}\")",
                self.name
            ));
        }
        if !(1..=MAX_DIMS).contains(&dims) {
            return Err(param_error!("problem `{}` takes points of 1 to {MAX_DIMS} values, not {dims}", self.name));
        }
        let mut p = self.clone();
        p.input.element = Element::Vector { scalar, dims };
        Ok(p)
    }

    /// The problem with a weight per point (`--weights`): a pair weighs the
    /// product of its points' weights, in f64, which a histogram adds to its
    /// bucket (times the spec's `weight` where it has one) and a sum
    /// multiplies its value by. Counts, pairs, neighbours and g(r) have no
    /// weighted form here and are refused.
    pub fn with_point_weights(&self) -> Result<Problem, ParamError> {
        let refuse = |what: &str| {
            Err(param_error!(
                "{}: problem `{}` {what}; weights per point go with histograms and sums",
                crate::remedy::Remedy::Weights,
                self.name
            ))
        };
        match (&self.output, self.normalize) {
            (_, Some(_)) => return refuse("normalizes its histogram to g(r), which counts pairs"),
            (Output::Histogram { .. } | Output::Histogram2d { .. } | Output::Sum, None) => {}
            (other, None) => return refuse(&format!("makes a {} output", other.kind())),
        }
        let mut p = self.clone();
        p.input.point_weights = true;
        Ok(p)
    }

    /// The histogram with each pair adding its separation in place of 1: the
    /// sum of a bucket's separations, whose mean is Corrfunc's `ravg` (or
    /// `savg`, `rpavg`). `of` names it: in a histogram a function of the
    /// snippet, which each pair adds as `function(a, b)`; in a 2-D histogram
    /// one of its axes, whose value each pair adds. Refused for other
    /// outputs, g(r), weighted histograms or a name that is neither.
    pub fn with_pair_weight(&self, of: &str) -> Result<Problem, ParamError> {
        let refuse = || {
            param_error!(
                "a sum of `{of}` per bucket: problem `{}` makes {}; it goes with a histogram that counts pairs",
                self.name,
                self.output.kind()
            )
        };
        let mut p = self.clone();
        match &mut p.output {
            _ if self.normalize.is_some() => return Err(refuse()),
            Output::Histogram { weight: weight @ None, .. } => {
                if !defines_function(&self.function.source, of) {
                    return Err(param_error!("the snippet `{}` does not define `{of}`", self.function.file));
                }
                *weight = Some(of.to_owned());
            }
            Output::Histogram2d { axes, weight: weight @ None } => {
                if !axes.iter().any(|a| a.name == of) {
                    return Err(param_error!(
                        "problem `{}`'s axes are `{}` and `{}`, not `{of}`",
                        self.name,
                        axes[0].name,
                        axes[1].name
                    ));
                }
                *weight = Some(of.to_owned());
            }
            _ => return Err(refuse()),
        }
        Ok(p)
    }

    /// The problem with an integer id `name` on every point (declared where
    /// the spec has not): the snippet reads it as `a.NAME`.
    pub fn with_id(&self, name: &str) -> Result<Problem, ParamError> {
        if self.input.ids.iter().any(|i| i == name) {
            return Ok(self.clone());
        }
        let ok = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !RESERVED.contains(&name);
        if !ok || name == "v" || self.input.components().iter().any(|c| c.name == name) {
            return Err(param_error!(
                "id `{name}`: an id is a C identifier that is not a coordinate or field of problem `{}` ({})",
                self.name,
                self.input.components().iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ")
            ));
        }
        let mut p = self.clone();
        p.input.ids.push(name.to_owned());
        Ok(p)
    }

    /// The problem where a pair of points with the same id `name` adds
    /// nothing (`<exclude same="NAME"/>`, `--exclude-same NAME`). Such a
    /// pair's value (and key) is +infinity inside the kernel, which no
    /// bucket, threshold or pair test takes: so counts, histograms and pairs
    /// of a function returning f32 or f64; sums and neighbour lists are refused.
    pub fn with_exclusion(&self, name: &str) -> Result<Problem, ParamError> {
        match &self.output {
            Output::Count { .. } | Output::Histogram { .. } | Output::Pairs { .. } => {}
            other => {
                return Err(param_error!(
                    "excluding pairs of the same `{name}`: problem `{}` makes {}; exclusion goes with counts, histograms and pairs",
                    self.name,
                    other.kind()
                ));
            }
        }
        if !matches!(self.function.returns, Scalar::F32 | Scalar::F64) {
            return Err(param_error!(
                "excluding pairs of the same `{name}`: problem `{}`'s function returns {}; an excluded pair's value is +infinity, which needs f32 or f64",
                self.name,
                self.function.returns
            ));
        }
        let mut p = self.with_id(name)?;
        p.exclude = Some(name.to_owned());
        Ok(p)
    }

    /// The problem with its histogram's buckets spaced so (`--log-bins`).
    pub fn with_spacing(&self, spacing: Spacing) -> Result<Problem, ParamError> {
        let mut p = self.clone();
        match &mut p.output {
            Output::Histogram { spacing: s, .. } => *s = spacing,
            // The first axis: rp or s, as correlation functions are binned (pi and mu stay linear).
            Output::Histogram2d { axes, .. } => axes[0].spacing = spacing,
            other => {
                return Err(param_error!(
                    "log-spaced buckets are for histograms; problem `{}` makes {}",
                    self.name,
                    other.kind()
                ));
            }
        }
        Ok(p)
    }

    /// The same problem between two sets: what runs on a pair of different
    /// blocks of a one-set problem's input.
    pub fn as_cross(&self) -> Problem {
        let mut p = self.clone();
        p.input.sets = Sets::Two;
        p
    }

    /// The same problem with every f32 made f64 (the CPU backend's f64 mode):
    /// coordinates, the function's value and float parameters. Values keep their
    /// f32 numbers, so only the arithmetic changes.
    pub fn in_f64(&self) -> Problem {
        let widen = |s: Scalar| if s == Scalar::F32 { Scalar::F64 } else { s };
        let widen_op = |op: &Operand| match op {
            Operand::Literal(v) if v.scalar() == Scalar::F32 => Operand::Literal(v.cast(Scalar::F64)),
            other => other.clone(),
        };
        let mut p = self.clone();
        p.input.element = match &self.input.element {
            Element::Vector { scalar, dims } => Element::Vector { scalar: widen(*scalar), dims: *dims },
            Element::Record { fields } => Element::Record {
                fields: fields.iter().map(|f| Component { name: f.name.clone(), scalar: widen(f.scalar) }).collect(),
            },
        };
        p.function.returns = widen(self.function.returns);
        for param in &mut p.params {
            param.scalar = widen(param.scalar);
            param.default = param.default.cast(param.scalar);
        }
        p.output = match &self.output {
            Output::Count { threshold, compare } => Output::Count { threshold: widen_op(threshold), compare: *compare },
            Output::Histogram { bins, min, max, weight, spacing } => Output::Histogram {
                bins: bins.clone(),
                min: widen_op(min),
                max: widen_op(max),
                weight: weight.clone(),
                spacing: *spacing,
            },
            Output::Pairs { threshold, compare, estimate } => {
                Output::Pairs { threshold: widen_op(threshold), compare: *compare, estimate: *estimate }
            }
            Output::Histogram2d { axes, weight } => Output::Histogram2d {
                axes: Box::new((**axes).clone().map(|a| Axis { min: widen_op(&a.min), max: widen_op(&a.max), ..a })),
                weight: weight.clone(),
            },
            other => other.clone(),
        };
        p
    }
}

/// Parameter values bound for one use of a problem.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Params {
    pub values: Vec<(String, Value)>,
    /// When the box parameter's numbers reach the code ([`BoxTime`]); the
    /// value above is the run's box either way.
    pub box_time: BoxTime,
}

impl Params {
    /// Float parameters as f64, with the same numbers (see [`Problem::in_f64`]).
    pub fn in_f64(&self) -> Params {
        Params {
            values: self
                .values
                .iter()
                .map(|(n, v)| (n.clone(), if v.scalar() == Scalar::F32 { v.cast(Scalar::F64) } else { *v }))
                .collect(),
            box_time: self.box_time,
        }
    }

    /// These values with the periodic box read at run time (`BoxTime::Run`),
    /// where there is a periodic box; an open one (or none) stays as it is.
    pub fn with_box_at_run_time(&self) -> Params {
        let periodic = self.values.iter().any(|(_, v)| matches!(v, Value::Box(b) if !b.is_open()));
        Params { box_time: if periodic { BoxTime::Run } else { self.box_time }, ..self.clone() }
    }

    /// The box read at run time, where there is one: what the runner sets
    /// before the code runs.
    pub fn run_time_box(&self) -> Option<PeriodicBox> {
        match self.box_time {
            BoxTime::Compile => None,
            BoxTime::Run => self.values.iter().find_map(|(_, v)| match v {
                Value::Box(b) if !b.is_open() => Some(*b),
                _ => None,
            }),
        }
    }

    /// What the generated code depends on, as text to key memos with: every
    /// value, but a box read at run time by its type alone (one kernel serves
    /// every box).
    pub fn code_key(&self) -> String {
        let run_time = self.run_time_box().is_some();
        let values: Vec<String> = self
            .values
            .iter()
            .map(|(n, v)| match v {
                Value::Box(b) if run_time => format!("{n}: box of {} read at run time", b.scalar),
                v => format!("{n}: {v:?}"),
            })
            .collect();
        values.join("\n")
    }

    pub fn get(&self, name: &str) -> Option<Value> {
        self.values.iter().find(|(n, _)| n == name).map(|(_, v)| *v)
    }

    pub fn eval(&self, operand: &Operand) -> Value {
        match operand {
            Operand::Literal(v) => *v,
            Operand::Param(name) => self.get(name).expect("validated operand names a parameter"),
            Operand::Largest(ops) => ops
                .iter()
                .map(|o| self.eval(o))
                .reduce(|a, b| if b.as_f64() > a.as_f64() { b } else { a })
                .expect("a list of at least one"),
        }
    }

    pub fn describe(&self, operand: &Operand) -> String {
        match operand {
            Operand::Literal(v) => v.to_string(),
            Operand::Param(name) => format!("{name}={}", self.eval(operand)),
            Operand::Largest(ops) => {
                format!("the largest of {}", ops.iter().map(|o| self.describe(o)).collect::<Vec<_>>().join(", "))
            }
        }
    }

    /// Checks one histogram axis's buckets (`what` names it in messages):
    /// bins from 1 to 2^24 (4095 log-spaced), min < max (min > 0 log-spaced);
    /// an error names the attribute that set the value.
    fn check_buckets(
        &self,
        what: &str,
        bins: &Operand,
        min: &Operand,
        max: &Operand,
        spacing: Spacing,
    ) -> Result<(), (ParamError, &'static str)> {
        let n = self.eval(bins).as_f64();
        if spacing == Spacing::Log && n > MAX_LOG_BINS as f64 {
            return Err((
                param_error!("log-spaced {what} bins ({}) must be at most {MAX_LOG_BINS}", self.describe(bins)),
                "bins",
            ));
        }
        if spacing == Spacing::Log && self.eval(min).as_f64() <= 0.0 {
            return Err((
                param_error!("log-spaced buckets need a lower edge above 0, and it is {}", self.describe(min)),
                "min",
            ));
        }
        if !(1.0..=(1u64 << 24) as f64).contains(&n) {
            return Err((param_error!("{what} bins ({}) must be between 1 and 16777216", self.describe(bins)), "bins"));
        }
        if self.eval(min).as_f64() >= self.eval(max).as_f64() {
            return Err((
                param_error!(
                    "{what} range is empty: min ({}) must be below max ({})",
                    self.describe(min),
                    self.describe(max)
                ),
                "min",
            ));
        }
        Ok(())
    }

    /// Checks the values the output needs: bins and K at least 1, a range
    /// with min < max; an error comes with what in the spec set the value.
    fn check(&self, problem: &Problem) -> Result<(), (ParamError, Blame)> {
        for (name, v) in &self.values {
            if !v.is_finite() {
                return Err((
                    param_error!("parameter {name} = {v} is not a finite number"),
                    Blame::Param(name.clone()),
                ));
            }
            if let Some(p) = problem.param(name).filter(|p| p.positive)
                && v.as_f64() <= 0.0
            {
                let doc = if p.doc.is_empty() { String::new() } else { format!(" ({})", p.doc) };
                return Err((
                    param_error!("parameter {name} = {v}: expected a value above 0{doc}"),
                    Blame::Param(name.clone()),
                ));
            }
        }
        match &problem.output {
            Output::Histogram { bins, min, max, spacing, .. } => self
                .check_buckets("histogram", bins, min, max, *spacing)
                .map_err(|(e, attr)| (e, Blame::Output(attr)))?,
            Output::Histogram2d { axes, .. } => {
                for (k, a) in axes.iter().enumerate() {
                    self.check_buckets(&format!("axis `{}`", a.name), &a.bins, &a.min, &a.max, a.spacing)
                        .map_err(|(e, attr)| (e, Blame::Axis(k, attr)))?;
                }
                let cells = problem.output.histogram_slots(self).expect("a histogram");
                if cells > 1 << 24 {
                    return Err((
                        param_error!(
                            "a 2-D histogram of {} x {} = {cells} cells: at most 16777216",
                            self.describe(&axes[0].bins),
                            self.describe(&axes[1].bins)
                        ),
                        Blame::Axis(1, "bins"),
                    ));
                }
            }
            Output::Knn { k } => {
                let n = self.eval(k).as_f64();
                if !(1.0..=1024.0).contains(&n) {
                    return Err((
                        param_error!("K ({}) must be between 1 and 1024", self.describe(k)),
                        Blame::Output("k"),
                    ));
                }
            }
            Output::Count { .. } | Output::Sum | Output::Pairs { .. } => {}
        }
        if let Some(value) = problem.cutoff.as_ref().and_then(|c| c.value.as_ref())
            && self.eval(value).as_f64() < 0.0
        {
            return Err((param_error!("the cutoff ({}) must not be negative", self.describe(value)), Blame::Cutoff));
        }
        if let (Some(Normalization::Rdf), Output::Histogram { max, .. }, Some((name, b))) =
            (problem.normalize, &problem.output, problem.periodic_box(self))
        {
            let half = b.widths().into_iter().fold(f64::INFINITY, f64::min) / 2.0;
            if self.eval(max).as_f64() > half {
                return Err((
                    param_error!(
                        "{} is above half the smallest width of the box ({name}={b}, half width {half}): \
                     a shell that large meets its own periodic images, so g(r) past {half} would be wrong; \
                     lower it or use a larger box",
                        self.describe(max)
                    ),
                    Blame::Output("max"),
                ));
            }
        }
        Ok(())
    }
}

/// What in a spec set a value [`Params::check`] finds wrong: an attribute
/// of <output> or of its k-th <axis> (or the default of the parameter it
/// names), <cutoff>'s value, or a parameter's default.
enum Blame {
    Output(&'static str),
    Axis(usize, &'static str),
    Cutoff,
    Param(String),
}

/// The spec text being validated, for turning offsets into positions.
struct Cx<'a> {
    src: &'a str,
    file: String,
}

impl Cx<'_> {
    fn err(&self, pos: Pos, message: impl Into<String>) -> SpecError {
        let (line, col) = xml::line_col(self.src, pos);
        SpecError { file: self.file.clone(), line, col, message: message.into() }
    }

    fn only_attrs(&self, node: &Node, allowed: &[&str]) -> Result<(), SpecError> {
        for a in &node.attrs {
            if !allowed.contains(&a.name.as_str()) {
                return Err(self.err(
                    a.pos,
                    format!(
                        "unknown attribute `{}` on <{}>; expected one of: {}",
                        a.name,
                        node.name,
                        allowed.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    fn no_children(&self, node: &Node) -> Result<(), SpecError> {
        if let Some(c) = node.children.first() {
            return Err(self.err(c.pos, format!("<{}> takes no child elements, found <{}>", node.name, c.name)));
        }
        Ok(())
    }

    fn no_text(&self, node: &Node) -> Result<(), SpecError> {
        if !node.text.trim().is_empty() {
            return Err(self.err(node.text_pos, format!("<{}> takes no text", node.name)));
        }
        Ok(())
    }

    fn attr<'n>(&self, node: &'n Node, name: &str) -> Option<&'n Attr> {
        node.attrs.iter().find(|a| a.name == name)
    }

    fn required<'n>(&self, node: &'n Node, name: &str, what: &str) -> Result<&'n Attr, SpecError> {
        self.attr(node, name)
            .ok_or_else(|| self.err(node.pos, format!("<{}> needs attribute `{name}` ({what})", node.name)))
    }

    fn identifier(&self, a: &Attr) -> Result<String, SpecError> {
        let ok = a.value.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && a.value.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ok || RESERVED.contains(&a.value.as_str()) {
            return Err(self.err(
                a.pos,
                format!("`{}` is not a usable name: expected a C identifier (letters, digits, _) that is not a reserved word", a.value),
            ));
        }
        Ok(a.value.clone())
    }

    fn boolean(&self, a: &Attr) -> Result<bool, SpecError> {
        match a.value.as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            other => Err(self.err(a.pos, format!("`{}` must be true or false, found `{other}`", a.name))),
        }
    }

    fn scalar(&self, a: &Attr) -> Result<Scalar, SpecError> {
        Scalar::parse(&a.value).ok_or_else(|| {
            self.err(a.pos, format!("unknown type `{}`; expected one of: {}", a.value, Scalar::NAMES.join(", ")))
        })
    }

    fn problem(&self, root: &Node, origin: &Path, files: &dyn Files) -> Result<Problem, SpecError> {
        if root.name != "problem" {
            return Err(self.err(root.pos, format!("expected <problem> as the top element, found <{}>", root.name)));
        }
        self.only_attrs(root, vocabulary::PROBLEM)?;
        self.no_text(root)?;
        let name_attr = self.required(root, "name", "the problem's name")?;
        let name = name_attr.value.clone();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            return Err(self.err(name_attr.pos, format!("problem name `{name}` must be letters, digits, - and _")));
        }

        const CHILDREN: &[&str] = vocabulary::PROBLEM_CHILDREN;
        for c in &root.children {
            if !CHILDREN.contains(&c.name.as_str()) {
                return Err(self.err(
                    c.pos,
                    format!("unknown element <{}> in <problem>; expected one of: {}", c.name, CHILDREN.join(", ")),
                ));
            }
        }
        let one = |tag: &str| -> Result<&Node, SpecError> {
            let mut found = root.children.iter().filter(|c| c.name == tag);
            let first = found.next().ok_or_else(|| self.err(root.pos, format!("<problem> needs a <{tag}> element")))?;
            if let Some(second) = found.next() {
                return Err(self.err(second.pos, format!("<{tag}> appears twice; a problem has one")));
            }
            Ok(first)
        };

        let summary_node = one("summary")?;
        self.only_attrs(summary_node, vocabulary::SUMMARY)?;
        self.no_children(summary_node)?;
        let summary = summary_node.text.split_whitespace().collect::<Vec<_>>().join(" ");
        if summary.is_empty() {
            return Err(self.err(summary_node.pos, "<summary> is empty; say in one line what the problem computes"));
        }

        let params = self.params(root)?;

        let input = self.input(one("input")?)?;
        let three_floats = matches!(input.element, Element::Vector { dims: 3, scalar: Scalar::F32 | Scalar::F64 });
        if let Some(node) = root
            .children
            .iter()
            .filter(|c| c.name == "param")
            .find(|n| self.attr(n, "type").is_some_and(|t| t.value == vocabulary::BOX_TYPE))
            && !three_floats
        {
            return Err(self.err(node.pos, "a box parameter needs 3-D float points: <input type=\"f32\" dims=\"3\">"));
        }
        let function = self.function(one("function")?, origin, files)?;
        let output_node = one("output")?;
        let output = self.output(output_node, &params, &function)?;
        let normalize = match self.attr(output_node, "normalize") {
            None => None,
            Some(a) if a.value == "rdf" => {
                if !matches!(input.element, Element::Vector { dims: 3, .. }) {
                    return Err(self.err(a.pos, "normalize=\"rdf\" needs 3-D points (shell volumes are 3-D)"));
                }
                if matches!(output, Output::Histogram { weight: Some(_), .. }) {
                    return Err(self.err(a.pos, "normalize=\"rdf\" counts pairs; it does not go with a weight"));
                }
                Some(Normalization::Rdf)
            }
            Some(a) => return Err(self.err(a.pos, format!("normalize must be rdf, found `{}`", a.value))),
        };
        let cutoff = match root.children.iter().filter(|c| c.name == "cutoff").collect::<Vec<_>>()[..] {
            [] => None,
            [node] => Some(self.cutoff(node, &input, &output, &params)?),
            [_, second, ..] => return Err(self.err(second.pos, "<cutoff> appears twice; a problem has one")),
        };
        let problem = Problem {
            name,
            summary,
            origin: origin.display().to_string(),
            input,
            function,
            output,
            normalize,
            cutoff,
            params,
            exclude: None,
            promises_proven: false,
        };
        let problem = self.ids_and_exclusion(root, problem)?;
        self.literals_hold(root, output_node, &problem)?;
        Ok(problem)
    }

    /// The `<param>`s, each once, at most one of them a box.
    fn params(&self, root: &Node) -> Result<Vec<Param>, SpecError> {
        let mut params: Vec<Param> = Vec::new();
        for node in root.children.iter().filter(|c| c.name == "param") {
            let param = self.param(node)?;
            if params.iter().any(|p| p.name == param.name) {
                return Err(self.err(node.pos, format!("parameter `{}` is declared twice", param.name)));
            }
            if param.kind == ParamKind::Box && params.iter().any(|p| p.kind == ParamKind::Box) {
                return Err(self.err(node.pos, "a problem has at most one box: the points live in one space"));
            }

            params.push(param);
        }
        Ok(params)
    }

    /// The problem with its `<id>`s, and the `<exclude>` of one of them.
    fn ids_and_exclusion(&self, root: &Node, problem: Problem) -> Result<Problem, SpecError> {
        let mut problem = problem;
        for node in root.children.iter().filter(|c| c.name == "id") {
            self.only_attrs(node, vocabulary::ID)?;
            self.no_children(node)?;
            self.no_text(node)?;
            let name = self.identifier(self.required(node, "name", "the id's name, a member of Point")?)?;
            let taken = problem.input.components().iter().any(|c| c.name == name) || name == "v";
            if taken {
                return Err(
                    self.err(node.pos, format!("id `{name}` is already a member of Point (a coordinate, field or id)"))
                );
            }
            problem.input.ids.push(name);
        }
        match root.children.iter().filter(|c| c.name == "exclude").collect::<Vec<_>>()[..] {
            [] => {}
            [node] => {
                self.only_attrs(node, vocabulary::EXCLUDE)?;
                self.no_children(node)?;
                self.no_text(node)?;
                let same = self.required(node, "same", "the id whose sharers pair to nothing")?;
                if !problem.input.ids.contains(&same.value) {
                    return Err(self.err(
                        same.pos,
                        format!(
                            "`same` names `{}`, which no <id> declares (ids: {})",
                            same.value,
                            problem.input.ids.join(", ")
                        ),
                    ));
                }
                problem = problem.with_exclusion(&same.value).map_err(|ParamError(m)| self.err(node.pos, m))?;
            }
            [_, second, ..] => return Err(self.err(second.pos, "<exclude> appears twice; a problem has one")),
        }
        Ok(problem)
    }

    /// A literal the spec fixes (k="1025", min="5" max="1") is wrong in
    /// every run: named at its line now. A default the user can override
    /// with --param is checked when bound (Problem::bind names its line).
    fn literals_hold(&self, root: &Node, output_node: &Node, problem: &Problem) -> Result<(), SpecError> {
        let defaults = Params {
            values: problem.params.iter().map(|p| (p.name.clone(), p.default)).collect(),
            box_time: BoxTime::Compile,
        };
        if let Err((ParamError(message), blame)) = defaults.check(problem)
            && problem.blamed_param(&blame).is_none()
        {
            let at = |node: &Node, attr: &str| self.attr(node, attr).map_or(node.pos, |a| a.pos);
            let pos = match blame {
                Blame::Output(attr) => at(output_node, attr),
                Blame::Axis(k, attr) => output_node
                    .children
                    .iter()
                    .filter(|c| c.name == "axis")
                    .nth(k)
                    .map_or(output_node.pos, |n| at(n, attr)),
                Blame::Cutoff => root.children.iter().find(|c| c.name == "cutoff").map_or(root.pos, |c| at(c, "value")),
                Blame::Param(_) => root.pos,
            };
            return Err(self.err(pos, message));
        }
        Ok(())
    }

    fn cutoff(&self, node: &Node, input: &Input, output: &Output, params: &[Param]) -> Result<Cutoff, SpecError> {
        self.only_attrs(node, vocabulary::CUTOFF)?;
        self.no_children(node)?;
        self.no_text(node)?;
        let knn = matches!(output, Output::Knn { .. });
        let (over, scalar) = match (&input.element, self.attr(node, "over")) {
            (Element::Vector { .. }, Some(a)) => {
                return Err(self.err(a.pos, "`over` names record fields; a cutoff on points covers every coordinate"));
            }
            (Element::Vector { scalar, .. }, None) => (CutoffOver::Coordinates, *scalar),
            (Element::Record { .. }, None) => {
                return Err(self.err(node.pos, "<cutoff> on a record needs `over`: the fields it bounds, as a,b"));
            }
            (Element::Record { fields }, Some(a)) => {
                let mut names: Vec<String> = Vec::new();
                let mut scalars = Vec::new();
                for name in a.value.split(',').map(str::trim) {
                    let Some(field) = fields.iter().find(|f| f.name == name) else {
                        let known: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
                        return Err(self.err(
                            a.pos,
                            format!("`over` names `{name}`, which is not a field (fields: {})", known.join(", ")),
                        ));
                    };
                    if names.iter().any(|n| n == name) {
                        return Err(self.err(a.pos, format!("`over` names `{name}` twice")));
                    }
                    names.push(name.to_owned());
                    scalars.push(field.scalar);
                }
                // A literal or parameter in the fields' unit: whole numbers where any field is.
                let scalar = scalars.iter().copied().find(|s| s.is_integer()).unwrap_or(scalars[0]);
                (CutoffOver::Fields(names), scalar)
            }
        };
        // A KNN query's neighbours may lie at any distance: its cutoff is its
        // own K-th value, found as the search goes.
        let value = match (knn, self.attr(node, "value")) {
            (true, Some(a)) => {
                return Err(self.err(
                    a.pos,
                    "a KNN query's cutoff is its own K-th value: <cutoff> with kind=\"knn\" takes no `value` \
                     (it promises that a pair's value is at least its separation in each component)",
                ));
            }
            (true, None) => None,
            (false, _) => {
                let a = self.required(node, "value", "the separation beyond which pairs add nothing")?;
                match a.value.contains(',') {
                    false => Some(self.operand(a, params, scalar)?),
                    // The largest of several: each a literal or a parameter.
                    true => Some(Operand::Largest(
                        a.value
                            .split(',')
                            .map(|v| {
                                let one = Attr { name: a.name.clone(), value: v.trim().to_owned(), pos: a.pos };
                                self.operand(&one, params, scalar)
                            })
                            .collect::<Result<_, _>>()?,
                    )),
                }
            }
        };
        let metric = match self.attr(node, "metric") {
            None => Metric::Component,
            Some(a) => Metric::parse(&a.value).ok_or_else(|| {
                self.err(a.pos, format!("metric must be component or euclidean, found `{}`", a.value))
            })?,
        };
        Ok(Cutoff { value, over, metric })
    }

    fn param(&self, node: &Node) -> Result<Param, SpecError> {
        self.only_attrs(node, vocabulary::PARAM)?;
        self.no_children(node)?;
        let name = self.identifier(self.required(node, "name", "the parameter's name")?)?;
        let type_attr = self.required(node, "type", "f32, f64, i32, i64, u32 or box")?;
        let (kind, scalar) = match type_attr.value.as_str() {
            t if t == vocabulary::BOX_TYPE => (ParamKind::Box, Scalar::F32),
            _ => (ParamKind::Number, self.scalar(type_attr)?),
        };
        let default_attr = self.required(node, "default", "the value used when --param does not set it")?;
        let (line, col) = xml::line_col(self.src, default_attr.pos);
        let default_at = format!("{}:{line}:{col}", self.file);
        let positive = match self.attr(node, "positive") {
            Some(a) if kind == ParamKind::Box => {
                return Err(self.err(a.pos, "a box is positive by its own rule (lengths above 0, or 0 for open)"));
            }
            Some(a) => self.boolean(a)?,
            None => false,
        };
        let mut param = Param { name, kind, scalar, default: Value::U32(0), doc: String::new(), positive, default_at };
        param.default = param
            .parse_value(&default_attr.value)
            .map_err(|why| self.err(default_attr.pos, format!("default of `{}`: {why}", param.name)))?;
        let (name, default) = (param.name.clone(), param.default);
        if !default.is_finite() {
            return Err(self.err(default_attr.pos, format!("default of `{name}` must be finite")));
        }
        if param.positive && default.as_f64() <= 0.0 {
            return Err(self.err(default_attr.pos, format!("default of `{name}` must be above 0 (positive=\"true\")")));
        }
        let doc = node.text.split_whitespace().collect::<Vec<_>>().join(" ");
        Ok(Param { doc, ..param })
    }

    fn input(&self, node: &Node) -> Result<Input, SpecError> {
        self.only_attrs(node, vocabulary::INPUT)?;
        self.no_text(node)?;
        let sets_attr = self.required(node, "sets", "1 for pairs within one set, 2 for A x B")?;
        let (sets, either) = match sets_attr.value.as_str() {
            "1" => (Sets::One, false),
            "2" => (Sets::Two, false),
            "1,2" => (Sets::One, true),
            other => {
                return Err(self.err(
                    sets_attr.pos,
                    format!("sets must be 1, 2, or 1,2 for either (one set when no input is given), found `{other}`"),
                ));
            }
        };
        let element = if node.children.is_empty() {
            let scalar = self.scalar(self.required(node, "type", "the coordinate type, or <field> children")?)?;
            let dims_attr = self.required(node, "dims", "the number of coordinates")?;
            let dims = dims_attr.value.parse::<u32>().ok().filter(|d| (1..=MAX_DIMS).contains(d)).ok_or_else(|| {
                self.err(
                    dims_attr.pos,
                    format!("dims must be a whole number from 1 to {MAX_DIMS}, found `{}`", dims_attr.value),
                )
            })?;
            Element::Vector { scalar, dims }
        } else {
            for a in ["type", "dims", "dims_from_input"] {
                if let Some(attr) = self.attr(node, a) {
                    return Err(self.err(
                        attr.pos,
                        format!("`{a}` does not go with <field> children: each field has its own type"),
                    ));
                }
            }
            let mut fields: Vec<Component> = Vec::new();
            for f in &node.children {
                if !vocabulary::INPUT_CHILDREN.contains(&f.name.as_str()) {
                    return Err(self.err(f.pos, format!("unknown element <{}> in <input>; expected <field>", f.name)));
                }
                self.only_attrs(f, vocabulary::FIELD)?;
                self.no_children(f)?;
                self.no_text(f)?;
                let name = self.identifier(self.required(f, "name", "the field's name")?)?;
                let scalar = self.scalar(self.required(f, "type", "f32, f64, i32, i64 or u32")?)?;
                if fields.iter().any(|c| c.name == name) {
                    return Err(self.err(f.pos, format!("field `{name}` is declared twice")));
                }
                fields.push(Component { name, scalar });
            }
            if fields.len() > MAX_DIMS as usize {
                return Err(self.err(node.pos, format!("a record holds at most {MAX_DIMS} fields")));
            }
            Element::Record { fields }
        };
        let dims_from_input = match self.attr(node, "dims_from_input") {
            Some(a) => self.boolean(a)?,
            None => false,
        };
        Ok(Input { sets, either, element, dims_from_input, point_weights: false, ids: Vec::new() })
    }

    fn function(&self, node: &Node, origin: &Path, files: &dyn Files) -> Result<Function, SpecError> {
        self.only_attrs(node, vocabulary::FUNCTION)?;
        self.no_children(node)?;
        self.no_text(node)?;
        let file_attr = self.required(node, "file", "the CUDA snippet, relative to this spec")?;
        let name_attr = self.required(node, "name", "the __device__ function to call for each pair")?;
        let name = self.identifier(name_attr)?;
        let symmetric = match self.attr(node, "symmetric") {
            Some(a) => self.boolean(a)?,
            None => false,
        };
        let returns = match self.attr(node, "returns") {
            Some(a) => self.scalar(a)?,
            None => Scalar::F32,
        };
        let path: PathBuf = origin.parent().unwrap_or(Path::new("")).join(&file_attr.value);
        let shown = path.display().to_string();
        let source = files.read_why(&path).map_err(|why| {
            let why = if why.is_empty() { why } else { format!(": {why}") };
            self.err(file_attr.pos, format!("cannot read the snippet file `{shown}`{why}"))
        })?;
        if !defines_function(&source, &name) {
            return Err(self.err(name_attr.pos, format!("the snippet `{shown}` does not define a function `{name}`")));
        }
        let named = |attr: &str| -> Result<Option<(String, Pos)>, SpecError> {
            let Some(a) = self.attr(node, attr) else { return Ok(None) };
            let f = self.identifier(a)?;
            if !defines_function(&source, &f) {
                return Err(self.err(a.pos, format!("the snippet `{shown}` does not define the {attr} function `{f}`")));
            }
            Ok(Some((f, a.pos)))
        };
        let key = match (named("key")?, named("map")?, named("estimate")?) {
            (None, None, None) => None,
            (Some((key, pos)), Some((map, _)), estimate) => {
                if returns.is_integer() {
                    return Err(self.err(pos, "a key map needs a function that returns f32 or f64"));
                }
                Some(KeyMap { key, map, estimate: estimate.map(|(e, _)| e), estimate_proven: false })
            }
            (Some((_, pos)), None, _) | (None, _, Some((_, pos))) => {
                return Err(self.err(pos, "a key goes with a map (the value of a key), and an estimate with both"));
            }
            (None, Some((_, pos)), None) => return Err(self.err(pos, "a map goes with a key (key=\"...\")")),
        };
        Ok(Function { name, file: shown, source, symmetric, returns, key })
    }

    fn output(&self, node: &Node, params: &[Param], function: &Function) -> Result<Output, SpecError> {
        let returns = function.returns;
        self.no_text(node)?;
        let kind_attr = self.required(node, "kind", "count, sum, histogram, histogram2d, pairs or knn")?;
        if kind_attr.value != "histogram2d" {
            self.no_children(node)?;
        }
        let operand = |attr: &str, what: &str, scalar: Scalar| -> Result<Operand, SpecError> {
            let a = self.required(node, attr, what)?;
            self.operand(a, params, scalar)
        };
        let compare = |_: ()| -> Result<Compare, SpecError> {
            let a = self.required(node, "compare", "lt for value < threshold, le for value <= threshold")?;
            match a.value.as_str() {
                "lt" | "<" => Ok(Compare::Lt),
                "le" | "<=" => Ok(Compare::Le),
                other => Err(self.err(a.pos, format!("compare must be lt (<) or le (<=), found `{other}`"))),
            }
        };
        let output = match kind_attr.value.as_str() {
            "count" => {
                self.only_attrs(node, vocabulary::output_attributes("count").expect("a kind"))?;
                Output::Count {
                    threshold: operand("threshold", "the value pairs are compared with", returns)?,
                    compare: compare(())?,
                }
            }
            "sum" => {
                self.only_attrs(node, vocabulary::output_attributes("sum").expect("a kind"))?;
                Output::Sum
            }
            "histogram" => {
                self.only_attrs(node, vocabulary::output_attributes("histogram").expect("a kind"))?;
                if returns.is_integer() {
                    return Err(self.err(kind_attr.pos, "a histogram needs a function that returns f32 or f64"));
                }
                Output::Histogram {
                    bins: operand("bins", "the number of buckets", Scalar::U32)?,
                    min: match self.attr(node, "min") {
                        Some(a) => self.operand(a, params, returns)?,
                        None => Operand::Literal(Value::parse(returns, "0").expect("zero parses")),
                    },
                    max: operand("max", "the upper edge of the last bucket", returns)?,
                    weight: match self.attr(node, "weight") {
                        None => None,
                        Some(a) => {
                            let name = self.identifier(a)?;
                            if !defines_function(&function.source, &name) {
                                return Err(self.err(
                                    a.pos,
                                    format!(
                                        "the snippet `{}` does not define the weight function `{name}`",
                                        function.file
                                    ),
                                ));
                            }
                            Some(name)
                        }
                    },
                    spacing: match self.attr(node, "spacing") {
                        None => Spacing::Linear,
                        Some(a) => Spacing::parse(&a.value).ok_or_else(|| {
                            self.err(a.pos, format!("spacing must be linear or log, found `{}`", a.value))
                        })?,
                    },
                }
            }
            "histogram2d" => {
                self.only_attrs(node, vocabulary::output_attributes("histogram2d").expect("a kind"))?;
                if returns.is_integer() {
                    return Err(self.err(kind_attr.pos, "a 2-D histogram needs a function that returns f32 or f64"));
                }
                if let Some(key) = &function.key {
                    return Err(self.err(
                        kind_attr.pos,
                        format!(
                            "a 2-D histogram tests each pair's two values; the key map of `{}` (key=\"{}\") is for a function of one value: leave key, map and estimate out",
                            function.name, key.key
                        ),
                    ));
                }
                let mut axes = Vec::new();
                for c in &node.children {
                    if !vocabulary::OUTPUT_CHILDREN.contains(&c.name.as_str()) {
                        return Err(
                            self.err(c.pos, format!("unknown element <{}> in <output>; expected <axis>", c.name))
                        );
                    }
                    axes.push(self.axis(c, params, returns)?);
                }
                let [first, second]: [Axis; 2] = axes.try_into().map_err(|axes: Vec<Axis>| {
                    let at = node.children.get(2).map_or(node.pos, |c| c.pos);
                    self.err(
                        at,
                        format!(
                            "a 2-D histogram has two <axis> children, one for each value its function returns; found {}",
                            axes.len()
                        ),
                    )
                })?;
                if first.name == second.name {
                    return Err(self.err(node.children[1].pos, format!("both axes are named `{}`", first.name)));
                }
                Output::Histogram2d { axes: Box::new([first, second]), weight: None }
            }
            "pairs" => {
                self.only_attrs(node, vocabulary::output_attributes("pairs").expect("a kind"))?;
                let estimate = match self.attr(node, "estimate") {
                    Some(a) => {
                        Some(a.value.parse::<f64>().ok().filter(|e| e.is_finite() && *e >= 0.0).ok_or_else(|| {
                            self.err(
                                a.pos,
                                format!("estimate must be a non-negative number of pairs, found `{}`", a.value),
                            )
                        })?)
                    }
                    None => None,
                };
                Output::Pairs {
                    threshold: operand("threshold", "the value pairs are compared with", returns)?,
                    compare: compare(())?,
                    estimate,
                }
            }
            "knn" => {
                self.only_attrs(node, vocabulary::output_attributes("knn").expect("a kind"))?;
                Output::Knn { k: operand("k", "how many neighbours per query", Scalar::U32)? }
            }
            other => {
                return Err(self.err(
                    kind_attr.pos,
                    format!(
                        "unknown output kind `{other}`; expected one of: count, sum, histogram, histogram2d, pairs, knn"
                    ),
                ));
            }
        };
        Ok(output)
    }

    /// One `<axis>` of a 2-D histogram: a name (the member of `Value2`), bins,
    /// min (default 0), max and spacing, as a histogram's attributes.
    fn axis(&self, node: &Node, params: &[Param], returns: Scalar) -> Result<Axis, SpecError> {
        self.only_attrs(node, vocabulary::AXIS)?;
        self.no_children(node)?;
        self.no_text(node)?;
        let name = self.identifier(self.required(node, "name", "the member of Value2 this axis buckets")?)?;
        let operand = |attr: &str, what: &str, scalar: Scalar| -> Result<Operand, SpecError> {
            self.operand(self.required(node, attr, what)?, params, scalar)
        };
        Ok(Axis {
            name,
            bins: operand("bins", "the number of buckets", Scalar::U32)?,
            min: match self.attr(node, "min") {
                Some(a) => self.operand(a, params, returns)?,
                None => Operand::Literal(Value::parse(returns, "0").expect("zero parses")),
            },
            max: operand("max", "the upper edge of the last bucket", returns)?,
            spacing: match self.attr(node, "spacing") {
                None => Spacing::Linear,
                Some(a) => Spacing::parse(&a.value)
                    .ok_or_else(|| self.err(a.pos, format!("spacing must be linear or log, found `{}`", a.value)))?,
            },
        })
    }

    /// A literal of type `scalar`, or the name of a parameter whose type converts to it.
    fn operand(&self, a: &Attr, params: &[Param], scalar: Scalar) -> Result<Operand, SpecError> {
        if let Some(p) = params.iter().find(|p| p.name == a.value) {
            if p.kind == ParamKind::Box {
                return Err(
                    self.err(a.pos, format!("`{}` needs a number, but parameter `{}` is a box", a.name, p.name))
                );
            }
            if scalar.is_integer() && !p.scalar.is_integer() {
                return Err(self.err(
                    a.pos,
                    format!("`{}` needs a whole number, but parameter `{}` is {}", a.name, p.name, p.scalar),
                ));
            }
            return Ok(Operand::Param(p.name.clone()));
        }
        match Value::parse(scalar, &a.value) {
            Ok(v) => Ok(Operand::Literal(v)),
            Err(_) => {
                let known: Vec<&str> = params.iter().map(|p| p.name.as_str()).collect();
                Err(self.err(
                    a.pos,
                    format!(
                        "`{}` = `{}` is neither a {} literal nor a declared parameter (declared: {})",
                        a.name,
                        a.value,
                        scalar,
                        if known.is_empty() { "none".to_owned() } else { known.join(", ") }
                    ),
                ))
            }
        }
    }
}

const MAX_DIMS: u32 = 64;

/// C++ keywords: a parameter or field named so would not compile.
const RESERVED: &[&str] = &[
    "auto",
    "bool",
    "break",
    "case",
    "char",
    "const",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "extern",
    "float",
    "for",
    "if",
    "int",
    "long",
    "namespace",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "template",
    "typedef",
    "union",
    "unsigned",
    "void",
    "while",
];

/// True when `source` has `name` as a whole word followed by `(`.
fn defines_function(source: &str, name: &str) -> bool {
    function_at(source, name).is_some()
}

/// Where `name` first appears as a function (the name followed by `(`): the
/// byte offset, for pointing compiler messages at the user's own line.
fn function_at(source: &str, name: &str) -> Option<usize> {
    let bytes = source.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut from = 0;
    while let Some(off) = source[from..].find(name) {
        let at = from + off;
        let end = at + name.len();
        let whole = (at == 0 || !ident(bytes[at - 1])) && (end == bytes.len() || !ident(bytes[end]));
        if whole && source[end..].trim_start().starts_with('(') {
            return Some(at);
        }
        from = end;
    }
    None
}

impl Function {
    /// The 1-based line of the snippet where its function `name` is defined
    /// (first named), 1 when it is not found.
    pub fn line_of(&self, name: &str) -> usize {
        function_at(&self.source, name).map_or(1, |at| self.source[..at].matches('\n').count() + 1)
    }
}

impl Input {
    /// "one set (self)", "two sets (A x B)", or both joined by "or".
    pub fn describe_counts(&self) -> String {
        match self.either {
            false => self.sets.to_string(),
            true => format!("{} or {}", Sets::One, Sets::Two),
        }
    }

    fn describe_counts_as_inputs(&self) -> &'static str {
        match (self.either, self.sets) {
            (true, _) => "once or twice",
            (false, Sets::One) => "once",
            (false, Sets::Two) => "twice",
        }
    }
}

impl fmt::Display for Sets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Sets::One => "one set (self)",
            Sets::Two => "two sets (A x B)",
        })
    }
}
