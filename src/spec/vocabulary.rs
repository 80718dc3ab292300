//! Every name the spec reader accepts: the elements, their attributes, and
//! the values of attributes that take a fixed set. The reader checks specs
//! against these lists, and `docs/spec.md` documents each one
//! (`tests/spec_doc.rs` fails on a name the document does not mention).

/// `<problem>`: its attributes and child elements.
pub const PROBLEM: &[&str] = &["name"];
pub const PROBLEM_CHILDREN: &[&str] = &["summary", "input", "function", "output", "cutoff", "param", "id", "exclude"];
pub const SUMMARY: &[&str] = &[];
pub const PARAM: &[&str] = &["name", "type", "default", "positive"];
pub const INPUT: &[&str] = &["sets", "type", "dims", "dims_from_input"];
pub const INPUT_CHILDREN: &[&str] = &["field"];
pub const FIELD: &[&str] = &["name", "type"];
pub const CUTOFF: &[&str] = &["value", "over", "metric"];
pub const ID: &[&str] = &["name"];
pub const EXCLUDE: &[&str] = &["same"];
pub const FUNCTION: &[&str] = &["file", "name", "symmetric", "returns", "key", "map", "estimate"];

/// `<output kind="...">`: each kind with the attributes it takes.
pub const OUTPUT_KINDS: &[(&str, &[&str])] = &[
    ("count", &["kind", "threshold", "compare"]),
    ("sum", &["kind"]),
    ("histogram", &["kind", "bins", "min", "max", "normalize", "weight", "spacing"]),
    ("histogram2d", &["kind"]),
    ("pairs", &["kind", "threshold", "compare", "estimate"]),
    ("knn", &["kind", "k"]),
];

/// `<output kind="histogram2d">`'s children, and their attributes.
pub const OUTPUT_CHILDREN: &[&str] = &["axis"];
pub const AXIS: &[&str] = &["name", "bins", "min", "max", "spacing"];

/// The values of attributes with a fixed set (`type` and `returns` take the
/// scalar types, [`super::Scalar::NAMES`]).
pub const SETS: &[&str] = &["1", "2", "1,2"];
/// The parameter type beyond the scalar types: a periodic box.
pub const BOX_TYPE: &str = "box";
pub const BOOLEAN: &[&str] = &["true", "false"];
pub const COMPARE: &[&str] = &["lt", "<", "le", "<="];
pub const NORMALIZE: &[&str] = &["rdf"];
/// `spacing`, in the order of [`super::Spacing`]'s variants.
pub const SPACING: &[&str] = &["linear", "log"];
/// `<cutoff metric>`, in the order of [`super::Metric`]'s variants.
pub const METRIC: &[&str] = &["component", "euclidean"];

/// The attributes of an output of `kind`, if it is one.
pub fn output_attributes(kind: &str) -> Option<&'static [&'static str]> {
    OUTPUT_KINDS.iter().find(|(k, _)| *k == kind).map(|(_, a)| *a)
}
