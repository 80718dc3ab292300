//! Problem + Plan -> CUDA source (and the CPU driver's C++), through the Tera
//! templates in `templates/`.
//!
//! Rust decides: each stage family names its fragment with an enum and gives
//! the numbers it renders with. The templates hold the code: every fragment is
//! rendered on its own and the skeleton puts them together, so no template
//! tests a stage's name.

use std::sync::OnceLock;

use serde::Serialize;
use serde_json::{Value as Json, json};

use crate::device::Device;
use crate::index::IndexKind;
use crate::plan::{Forced, Plan, Shape};
use crate::spec::{Element, Input, Output, Params, Problem, Spacing, Value};
use crate::stage::contribution::{self, Test};
use crate::stage::output::totals::Tallying;
use crate::stage::visit::Visit;
use crate::stage::{Source, Template};

/// NVRTC options every kernel is compiled with. `--fmad=false` keeps a * b + c
/// as two roundings, the way the host compiler evaluates the snippet, so that
/// the CPU and GPU backends agree bit for bit; snippets may call fmaf explicitly.
pub const NVRTC_OPTIONS: [&str; 2] = ["--std=c++17", "--fmad=false"];

/// How every kernel twobs writes begins (the header's first line).
pub const KERNEL_FIRST_LINE: &str = "// twobs kernel: ";

/// A rendered kernel or driver.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// The `extern "C"` entry point.
    pub entry: String,
    /// `<problem>.cu`, the name the compiler reports errors against.
    pub file_name: String,
    pub source: String,
    /// How the generated code calls the snippet, for messages about it.
    pub snippet_calls: String,
    /// The source with where the spec and the snippet lie left out (see
    /// [`Kernel::cache_text`]); None where the source names no place.
    keyed: Option<String>,
}

/// Where the spec and its snippet lie, as rendered into a source before
/// [`finish`] writes them in: in comments and `#line` directives only,
/// which change the compiler's messages, never the code.
const SPEC_AT: &str = "\u{1}twobs-spec\u{1}";
const SNIPPET_AT: &str = "\u{1}twobs-snippet\u{1}";
/// The snippet's name as a `#line` directive writes it (`snippet_file`, escaped).
const SNIPPET_LINE_AT: &str = "\u{1}twobs-snippet-line\u{1}";

impl Kernel {
    /// What the compiled-code cache keys this kernel by: the source as
    /// compiled, bar the places of the spec and the snippet (their paths
    /// in the header and in `#line`), so that the same spec and snippet
    /// copied to another folder find what was compiled for the first.
    pub fn cache_text(&self) -> &str {
        self.keyed.as_deref().unwrap_or(&self.source)
    }

    /// The lines around each place in a compiler's `log` (`file(N)` from
    /// NVRTC, `file:N:` from gcc and clang), in the file the log names: the
    /// user's snippet or the generated code, as the `#line` directives say.
    pub fn excerpt(&self, log: &str) -> String {
        let files = self.lines_by_file();
        let mut places: Vec<(usize, &str, usize)> = Vec::new();
        for file in files.keys() {
            for (open, close) in [("(", ')'), (":", ':')] {
                let tag = format!("{file}{open}");
                for (at, _) in log.match_indices(&tag) {
                    let before = log[..at].chars().next_back();
                    if before.is_some_and(|c| !c.is_whitespace() && c != '"' && c != '\'') {
                        continue; // the tail of a longer name
                    }
                    let rest = &log[at + tag.len()..];
                    let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
                    if rest[digits..].starts_with(close)
                        && let Ok(n) = rest[..digits].parse()
                    {
                        places.push((at, file.as_str(), n));
                    }
                }
            }
        }
        places.sort();
        let mut shown: Vec<(&str, usize)> = Vec::new();
        let mut out = String::new();
        for (_, file, n) in places {
            if shown.contains(&(file, n)) || shown.len() == 3 {
                continue;
            }
            shown.push((file, n));
            let lines = &files[file];
            out.push_str(&format!("\n\n{file}, line {n}:\n"));
            for k in n.saturating_sub(2).max(1)..=(n + 1).min(lines.len()) {
                let mark = if k == n { '>' } else { ' ' };
                out.push_str(&format!("{mark}{k:>5} | {}\n", lines[k - 1]));
            }
        }
        if shown.iter().any(|(file, _)| *file != self.file_name) {
            out.push_str(&format!("\n{}\n", self.snippet_calls));
        }
        out
    }

    /// Each file's lines as the compiler numbers them: the generated file's
    /// own, and those a `#line N "file"` directive gives another name.
    fn lines_by_file(&self) -> std::collections::BTreeMap<String, Vec<String>> {
        // The first text a line gets is its own: the calls into the snippet
        // are rendered later at its lines (`templates/common/snippet.cu`).
        let mut files: std::collections::BTreeMap<String, Vec<Option<String>>> = Default::default();
        let (mut file, mut next) = (self.file_name.clone(), 1usize);
        for line in self.source.lines() {
            if let Some((n, name)) = line.strip_prefix("#line ").and_then(|d| d.split_once(' '))
                && let Ok(n) = n.parse::<usize>()
            {
                file = name.trim().trim_matches('"').replace("\\\"", "\"").replace("\\\\", "\\");
                next = n;
                continue;
            }
            let lines = files.entry(file.clone()).or_default();
            if lines.len() < next {
                lines.resize(next, None);
            }
            lines[next - 1].get_or_insert_with(|| line.to_owned());
            next += 1;
        }
        files
            .into_iter()
            .map(|(file, lines)| (file, lines.into_iter().map(Option::unwrap_or_default).collect()))
            .collect()
    }
}

fn tera() -> &'static tera::Tera {
    static TERA: OnceLock<tera::Tera> = OnceLock::new();
    TERA.get_or_init(|| {
        let mut t = tera::Tera::new();
        t.autoescape_on(Vec::<&str>::new());
        t.add_raw_templates(Template::ALL.iter().map(|t| (t.path(), t.text()))).expect("the built-in templates parse");
        t
    })
}

#[derive(Serialize)]
struct ComponentCx {
    name: String,
    ctype: &'static str,
    /// How Point reaches it: `.x`, `.v[5]`, `.key`.
    member: String,
    /// The two-wide vector type for paired read-only loads.
    vec2: String,
    /// Byte offset of its array in the shared-memory tile.
    tile_offset: u32,
}

/// Math functions whose f-suffixed float spelling f64 mode maps to the double
/// one: every one of the C library that the host has in both, so that no
/// call of the snippet's computes in f32 in f64 mode.
const F64_FUNCTIONS: [&str; 56] = [
    "sqrt",
    "cbrt",
    "exp",
    "exp2",
    "expm1",
    "log",
    "log2",
    "log10",
    "log1p",
    "pow",
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "atan2",
    "sinh",
    "cosh",
    "tanh",
    "asinh",
    "acosh",
    "atanh",
    "fabs",
    "fmin",
    "fmax",
    "fdim",
    "floor",
    "ceil",
    "rint",
    "nearbyint",
    "round",
    "trunc",
    "lrint",
    "llrint",
    "lround",
    "llround",
    "fma",
    "hypot",
    "fmod",
    "remainder",
    "remquo",
    "modf",
    "frexp",
    "ldexp",
    "scalbn",
    "scalbln",
    "ilogb",
    "logb",
    "nextafter",
    "copysign",
    "erf",
    "erfc",
    "lgamma",
    "tgamma",
    "nan",
];

/// CUDA's float intrinsics and the double functions f64 mode maps them to
/// (the prelude defines those CUDA has no host spelling of).
const F64_INTRINSICS: [(&str, &str); 14] = [
    ("rsqrtf", "rsqrt"),
    ("__fsqrt_rn", "__dsqrt_rn"),
    ("__fadd_rn", "__dadd_rn"),
    ("__fsub_rn", "__dsub_rn"),
    ("__fmul_rn", "__dmul_rn"),
    ("__fdiv_rn", "__ddiv_rn"),
    ("__fdividef", "__ddiv_rn"),
    ("__fmaf_rn", "__fma_rn"),
    ("__expf", "exp"),
    ("__logf", "log"),
    ("__sinf", "sin"),
    ("__cosf", "cos"),
    ("__powf", "pow"),
    ("__saturatef", "twobs_saturate"),
];

fn components(input: &Input, block_size: u32) -> Vec<ComponentCx> {
    let mut offset = 0;
    let mut out = Vec::new();
    for (k, c) in input.components().iter().enumerate() {
        let member = match &input.element {
            _ if c.name == crate::spec::WEIGHT_MEMBER || input.ids.contains(&c.name) => format!(".{}", c.name),
            Element::Vector { dims, .. } if *dims <= 4 => format!(".{}", c.name),
            Element::Vector { .. } => format!(".v[{k}]"),
            Element::Record { .. } => format!(".{}", c.name),
        };
        out.push(ComponentCx {
            name: c.name.clone(),
            ctype: c.scalar.c_type(),
            member,
            vec2: format!("{}2", c.scalar.c_vector_prefix()),
            tile_offset: offset,
        });
        offset += block_size * c.scalar.bytes();
    }
    out
}

/// The typed functions through which generated code calls the snippet's
/// (`templates/common/snippet.cu`): each is rendered at the line of the
/// function it calls, so that a wrong parameter or return type is reported at
/// the user's own line, on both backends.
fn snippet_calls(problem: &Problem) -> Vec<Json> {
    let f = &problem.function;
    let call = |name: &str, returns: &str, params: &str, args: &str, function: &str| {
        json!({ "name": name, "returns": returns, "params": params, "args": args, "function": function,
                "line": f.line_of(function), "excludes": false })
    };
    let pair = ("const Point& twobs_a, const Point& twobs_b", "twobs_a, twobs_b");
    // An excluded pair's value and key are +infinity (Problem::with_exclusion).
    let excluding = |mut c: Json| {
        c["excludes"] = problem.exclude.is_some().into();
        c
    };
    let value = if value2(problem).is_some() { "Value2" } else { "Value" };
    let mut calls = vec![excluding(call("twobs_pair", value, pair.0, pair.1, &f.name))];
    if let Some(k) = &f.key {
        calls.push(excluding(call("twobs_key", "Value", pair.0, pair.1, &k.key)));
        calls.push(call("twobs_map", "Value", "Value twobs_k", "twobs_k", &k.map));
        calls.push(call(
            "twobs_estimate",
            "Value",
            "Value twobs_k",
            "twobs_k",
            k.estimate.as_deref().unwrap_or(&k.map),
        ));
    }
    if let Output::Histogram { weight: Some(w), .. } = &problem.output {
        calls.push(call("twobs_weight", "double", pair.0, pair.1, w));
    }
    calls
}

/// A 2-D histogram's axis names, the members of `Value2`, which its function returns.
fn value2(problem: &Problem) -> Option<[&str; 2]> {
    match &problem.output {
        Output::Histogram2d { axes, .. } => Some([&axes[0].name, &axes[1].name]),
        _ => None,
    }
}

/// The snippet's name in `#line`: with a folder, as generated files have none.
fn snippet_file(file: &str) -> String {
    if file.contains('/') { file.to_owned() } else { format!("./{file}") }
}

/// In words, how generated code calls the snippet's functions.
fn describe_snippet_calls(problem: &Problem) -> String {
    let point = point_type(&problem.input);
    let point = match point["struct_fields"].as_array() {
        Some(fields) => format!(
            "struct {{ {} }}",
            fields
                .iter()
                .filter_map(Json::as_str)
                .filter(|f| !f.starts_with("__host__"))
                .map(|f| f.split("  //").next().unwrap_or(f))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        None => point["ctype"].as_str().unwrap_or("").to_owned(),
    };
    let value = problem.function.returns.c_type();
    let named: Vec<String> = snippet_calls(problem)
        .iter()
        .map(|c| {
            let text = |key: &str| c[key].as_str().unwrap_or("").to_owned();
            format!("{}({}) -> {}", text("function"), text("params"), text("returns"))
                .replace("twobs_a", "a")
                .replace("twobs_b", "b")
                .replace("Value twobs_k", "Value key")
                .replace("Value2", "\u{0}")
                .replace("Value", value)
                .replace('\u{0}', "Value2")
        })
        .collect();
    let value2 =
        value2(problem).map_or(String::new(), |[x, y]| format!(" and Value2 is struct {{ {value} {x}, {y}; }}"));
    format!("twobs calls {}, where Point is {point}{value2}", named.join(", "))
}

/// The `Point` of `input` as `common/types.cu` renders it: a CUDA vector type,
/// or a struct's fields; and how its coordinates are reached by number.
fn point_type(input: &Input) -> Json {
    let members: Vec<String> = input.element.components().into_iter().map(|c| c.name).collect();
    let mut point = match &input.element {
        Element::Vector { scalar, dims } if *dims <= 4 && input.has_extras() => {
            // The vector's members, then the weight and ids; a snippet that takes the
            // vector type (float3) gets it by the conversion.
            let vector = format!("{}{dims}", scalar.c_vector_prefix());
            json!({
                "is_struct": true,
                "struct_fields": [
                    format!("{} {};", scalar.c_type(), members.join(", ")),
                    format!("__host__ __device__ operator {vector}() const {{ return {{{}}}; }}", members.join(", ")),
                ],
                "coords": { "dims": dims, "scalar": scalar.c_type(), "members": members },
            })
        }
        Element::Vector { scalar, dims } if *dims <= 4 => json!({
            "is_struct": false,
            "ctype": format!("{}{dims}", scalar.c_vector_prefix()),
            "coords": { "dims": dims, "scalar": scalar.c_type(), "members": members },
        }),
        Element::Vector { scalar, dims } => json!({
            "is_struct": true,
            "struct_fields": [format!("{} v[{dims}];", scalar.c_type())],
            "coords": { "dims": dims, "scalar": scalar.c_type() },
        }),
        Element::Record { fields } => json!({
            "is_struct": true,
            "struct_fields": fields.iter().map(|f| format!("{} {};", f.scalar.c_type(), f.name)).collect::<Vec<_>>(),
        }),
    };
    if input.point_weights {
        let fields = point["struct_fields"].as_array_mut().expect("a weighted point is a struct");
        fields.push(format!("double {};  // the point's weight (--weights)", crate::spec::WEIGHT_MEMBER).into());
    }
    for id in &input.ids {
        let fields = point["struct_fields"].as_array_mut().expect("a point with ids is a struct");
        fields.push(format!("int {id};  // an integer id of the point (<id>)").into());
    }
    point
}

/// What every template sees: the problem's types, parameters and snippet.
fn common(problem: &Problem, params: &Params, block_size: u32) -> serde_json::Map<String, Json> {
    let point = point_type(&problem.input);
    let vector_types: Vec<Json> =
        [("float", "float"), ("double", "double"), ("int", "int"), ("uint", "unsigned"), ("longlong", "long long")]
            .iter()
            .map(|(prefix, c)| json!({ "prefix": prefix, "c": c }))
            .collect();
    let params: Vec<Json> = problem
        .params
        .iter()
        .map(|p| match params.get(&p.name).expect("bound") {
            // Read at run time: the code holds its type, never its numbers.
            Value::Box(b) if params.run_time_box().is_some() => {
                json!({ "name": p.name, "ctype": format!("RunTimeBox<{}>", b.scalar.c_type()), "run_time": true })
            }
            v => json!({ "name": p.name, "ctype": v.c_type(), "literal": v.c_literal(), "run_time": false }),
        })
        .collect();
    let cx = json!({
        "kernel_name": format!("twobs_{}", problem.name.replace('-', "_")),
        "problem_name": problem.name,
        "origin": SPEC_AT,
        "f64_mode": false,
        "vector_types": vector_types,
        "f64_functions": F64_FUNCTIONS.as_slice(),
        "f64_intrinsics": F64_INTRINSICS.iter().map(|(f, d)| json!({ "float": f, "double": d })).collect::<Vec<_>>(),
        "point": point,
        "components": components(&problem.input, block_size.max(1)),
        "value_ctype": problem.function.returns.c_type(),
        "value2": value2(problem),
        "params": params,
        "snippet": {
            // Never the bare name of a generated file, so that messages cannot mix them up.
            "file": SNIPPET_LINE_AT,
            "text": problem.function.source.trim_end(),
            "calls": snippet_calls(problem),
            "probe": if problem.function.key.is_some() { "twobs_key" } else { "twobs_pair" },
            "key_map": problem.function.key.is_some(),
            "point_weights": problem.input.point_weights,
            "exclude": problem.exclude,
        },
    });
    let Json::Object(map) = cx else { unreachable!("an object") };
    map
}

/// Renders `template` with the common context and `stage` (the family's own numbers).
fn render_fragment(common: &serde_json::Map<String, Json>, template: Template, stage: Json) -> String {
    let mut cx = common.clone();
    cx.insert("stage".into(), stage);
    render_template(template, cx)
}

fn render_template(template: Template, cx: serde_json::Map<String, Json>) -> String {
    let context = tera::Context::from_serialize(&Json::Object(cx)).expect("an object is a context");
    // The templates are built in and every value they use is given: a failure is a bug.
    tera().render(template.path(), &context).unwrap_or_else(|e| panic!("rendering {}: {e:?}", template.path()))
}

/// After the snippet, compiler messages point back at the generated file.
fn finish(problem: &Problem, rendered: String, entry: String, file_name: String) -> Kernel {
    let source =
        rendered
            .lines()
            .enumerate()
            .map(|(n, line)| {
                if line == "//@@twobs-line-reset" {
                    format!("#line {} \"{file_name}\"", n + 2)
                } else {
                    line.to_owned()
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
            + "\n";
    // The places written in: the key text keeps their marks.
    let snippet_line = snippet_file(&problem.function.file).replace('\\', "\\\\").replace('"', "\\\"");
    let placed = source
        .replace(SPEC_AT, &problem.origin)
        .replace(SNIPPET_LINE_AT, &snippet_line)
        .replace(SNIPPET_AT, &problem.function.file);
    Kernel { entry, file_name, source: placed, snippet_calls: describe_snippet_calls(problem), keyed: Some(source) }
}

/// Renders the kernel for `plan`. `regenerate` is the command shown in the header.
pub fn render(problem: &Problem, params: &Params, plan: &Plan, dev: &Device, regenerate: &str) -> Kernel {
    let block_size = plan.launch.block_size;
    let mut cx = common(problem, params, block_size);
    let (kind, kind_cx) = contribution::fragment(problem, params, plan.test, Some(dev.compute_capability));
    // A count by indicators walks its pairs one of two ways (output/offer_indicators.cu):
    // the kernel and the register output both read it, and the input's tile loop its unrolling.
    let tallying = Tallying::choose(problem, plan.test, plan.output);
    cx.insert("tallying".into(), json!(tallying));
    cx.insert("tile_runs_unrolled".into(), tallying.tile_runs_unrolled().into());
    let (output, output_cx) = plan.output.fragment();
    let diagonal = plan.diagonal.map(|d| render_fragment(&cx, d.fragment(), json!({}))).unwrap_or_default();
    let visit = plan.shape.visit;
    let (own, walk) = match plan.index {
        IndexKind::None => (
            render_fragment(&cx, Template::OwnBlock, json!({})),
            render_fragment(&cx, visit.fragment(), json!({ "diagonal": diagonal })),
        ),
        IndexKind::Grid => (
            render_fragment(&cx, Template::OwnUnit, json!({})),
            render_fragment(
                &cx,
                Template::VisitGrid,
                json!({ "diagonal": visit == Visit::LowerTriangle, "skip_self": visit == Visit::AllPairs }),
            ),
        ),
        IndexKind::Rings => (
            render_fragment(&cx, Template::OwnUnit, json!({})),
            render_fragment(&cx, Template::VisitRings, json!({ "skip_self": visit == Visit::AllPairs })),
        ),
    };
    let fragments = json!({
        "contribution": render_fragment(&cx, kind, kind_cx),
        "input": render_fragment(&cx, plan.input_cache.fragment(), plan.input_cache.fragment_context(&problem.input)),
        "output": render_fragment(&cx, output, output_cx),
        "own": own,
        "visit": walk,
    });
    cx.insert("fragments".into(), fragments);
    cx.insert("header".into(), header(problem, params, plan, dev, regenerate).into());
    cx.insert(
        "names".into(),
        json!({
            "input": plan.input_cache.name(),
            "output": plan.output.label(),
            "visit": match plan.index {
                IndexKind::None => plan.shape.visit.name().to_owned(),
                IndexKind::Grid => format!("{} over the grid's units", plan.shape.visit.name()),
                IndexKind::Rings => format!("{} over rings of the grid's cells", plan.shape.visit.name()),
            },
            "kind": problem.output.kind(),
        }),
    );
    cx.insert("block_size".into(), block_size.into());
    cx.insert("points_per_thread".into(), plan.launch.points_per_thread.into());
    cx.insert("tile_bytes".into(), plan.launch.tile_bytes.into());
    // A grid's kernel names points in cell order; the drain maps them back
    // to the input's and orders one set's pairs.
    cx.insert("unordered".into(), (plan.shape.visit.unordered() && plan.index == IndexKind::None).into());
    cx.insert("two_sets".into(), (problem.input.sets == crate::spec::Sets::Two).into());
    cx.insert(
        "kernel_params".into(),
        plan.params.iter().map(|p| json!({ "name": p.name, "ctype": p.ctype })).collect::<Vec<_>>().into(),
    );
    cx.insert(
        "output_args".into(),
        plan.params
            .iter()
            .filter(|p| matches!(p.source, Source::Output(_)))
            .map(|p| p.name.clone())
            .collect::<Vec<_>>()
            .into(),
    );
    let entry = cx["kernel_name"].as_str().expect("a name").to_owned();
    finish(problem, render_template(Template::Kernel, cx), entry, format!("{}.cu", problem.name))
}

/// Renders the CPU driver: the same types, parameters, snippet and pair
/// arithmetic as the kernel, with a host loop over the pairs of `shape`.
/// In `f64_mode` the problem must already be widened ([`Problem::in_f64`]).
pub fn render_cpu(problem: &Problem, params: &Params, shape: &Shape, index: IndexKind, f64_mode: bool) -> Kernel {
    let mut cx = common(problem, params, 1);
    cx.insert("f64_mode".into(), f64_mode.into());
    // The oracle tests values, the definition.
    let (kind, kind_cx) = contribution::fragment(problem, params, Test::Values, None);
    let fragments = json!({
        "contribution": render_fragment(&cx, kind, kind_cx),
        "visit": match index {
            IndexKind::None => render_fragment(&cx, shape.visit.cpu_fragment(), json!({})),
            IndexKind::Grid => render_fragment(
                &cx,
                Template::CpuVisitGrid,
                json!({ "diagonal": shape.visit == Visit::LowerTriangle, "skip_self": shape.visit == Visit::AllPairs }),
            ),
            IndexKind::Rings => {
                render_fragment(&cx, Template::CpuVisitRings, json!({ "skip_self": shape.visit == Visit::AllPairs }))
            }
        },
        "output": render_fragment(
            &cx,
            shape.collect.cpu_fragment(),
            json!({
                "rings": index == IndexKind::Rings,
                "key_edges": contribution::CpuBuckets::choose(problem).0 == contribution::CpuBuckets::KeyEdges,
                "log": matches!(&problem.output, crate::spec::Output::Histogram { spacing: crate::spec::Spacing::Log, .. }),
            }),
        ),
    });
    cx.insert("fragments".into(), fragments);
    cx.insert("names".into(), json!({ "visit": shape.visit.name(), "kind": problem.output.kind() }));
    cx.insert("unordered".into(), shape.visit.unordered().into());
    finish(problem, render_template(Template::CpuDriver, cx), "twobs_rows".into(), format!("{}.cpp", problem.name))
}

/// What a pair evaluates alone in a one-line kernel, for counting its
/// floating-point instructions (`backend::cuda::nvrtc::fp_instructions`): the key
/// where `test` is on keys, else the pair function.
pub fn render_probe(problem: &Problem, params: &Params, test: Test) -> Kernel {
    let mut cx = common(problem, params, 1);
    if test == Test::Values {
        cx["snippet"]["probe"] = "twobs_pair".into();
    }
    finish(problem, render_template(Template::Probe, cx), "twobs_probe".into(), format!("{}-probe.cu", problem.name))
}

/// The key probe of a problem tested on keys, for a GPU of compute
/// capability `gpu` (None: the host): every key's slot from the edges
/// against its value's (`backend::cuda::check_keys`,
/// `backend::cpu::check_keys`). None where pairs are tested on values.
pub fn render_key_probe(problem: &Problem, params: &Params, gpu: Option<(u32, u32)>) -> Option<Kernel> {
    if !Test::keys_possible(problem, params) {
        return None;
    }
    let mut cx = common(problem, params, 1);
    let (kind, kind_cx) = contribution::fragment(problem, params, Test::Keys, gpu);
    cx.insert("fragments".into(), json!({ "contribution": render_fragment(&cx, kind, kind_cx) }));
    let (template, file) = match gpu {
        None => (Template::CpuKeysProbe, format!("{}-keys.cpp", problem.name)),
        Some(_) => (Template::KeysProbe, format!("{}-keys.cu", problem.name)),
    };
    Some(finish(problem, render_template(template, cx), "twobs_check_keys".into(), file))
}

/// The direct output buffer's drain: one kernel for every problem, which
/// packs the kept pages' pairs so that only they cross the bus.
pub fn render_dob_drain() -> Kernel {
    Kernel {
        entry: "twobs_dob_drain".into(),
        file_name: "dob_drain.cu".into(),
        source: Template::OutputDobDrain.text().to_owned(),
        snippet_calls: String::new(),
        keyed: None,
    }
}

/// The grid builder (`templates/index/grid.cu`): one module of kernels for
/// every problem, which sort a set into cells and list the units on the GPU.
pub fn render_grid_builder() -> Kernel {
    Kernel {
        entry: "twobs_grid_units".into(),
        file_name: "grid.cu".into(),
        source: Template::IndexGrid.text().to_owned(),
        snippet_calls: String::new(),
        keyed: None,
    }
}

/// The taker of points already on a GPU (`templates/input/take.cu`): one
/// module for every problem, which converts a given array into twobs's
/// columns and measures what the planner reads of a set, on the GPU.
pub fn render_take() -> Kernel {
    Kernel {
        entry: "twobs_take_columns".into(),
        file_name: "take.cu".into(),
        source: Template::InputTake.text().to_owned(),
        snippet_calls: String::new(),
        keyed: None,
    }
}

/// The comment block every kernel starts with: what it computes, the plan and how it was derived.
fn header(problem: &Problem, params: &Params, plan: &Plan, dev: &Device, regenerate: &str) -> String {
    let mut lines = vec![
        format!("{}{} ({SPEC_AT})", KERNEL_FIRST_LINE.trim_start_matches("// "), problem.name),
        problem.summary.clone(),
        String::new(),
        format!(
            "Input: {}, element {}; pair function `{}` from {}{}",
            problem.input.sets,
            element_text(&problem.input.element)
                + if problem.input.point_weights { ", a weight per point" } else { "" },
            problem.function.name,
            SNIPPET_AT,
            if problem.function.symmetric { " (symmetric)" } else { "" }
        ),
        format!("Output: {}", contribution::describe(problem, params)),
        format!(
            "Parameters: {}",
            if params.values.is_empty() {
                "none".to_owned()
            } else {
                let run_time = params.run_time_box().is_some();
                let shown = |(n, v): &(String, Value)| match v {
                    Value::Box(_) if run_time => format!("{n} read at run time (__constant__ params::{n})"),
                    v => format!("{n} = {v}"),
                };
                params.values.iter().map(shown).collect::<Vec<_>>().join(", ")
            }
        ),
        format!(
            "Device: {} ({}, {}): {} SMs, {} B shared/SM, {} B shared/block (opt-in), {} threads and {} blocks per SM",
            dev.name,
            dev.origin,
            dev.arch(),
            dev.multiprocessors,
            dev.shared_per_sm,
            dev.shared_per_block_optin,
            dev.threads_per_sm,
            dev.blocks_per_sm
        ),
        String::new(),
    ];
    lines.extend(plan.to_string().lines().map(str::to_owned));
    lines.push(String::new());
    lines.push(format!(
        "Launch: {} blocks of {} threads, {} B dynamic shared memory.",
        plan.launch.grid, plan.launch.block_size, plan.launch.shared_bytes
    ));
    lines.push(format!("Compile: NVRTC {} --gpu-architecture={}", NVRTC_OPTIONS.join(" "), dev.arch()));
    let regenerate = match problem.origin.as_str() {
        "" => regenerate.to_owned(),
        origin => regenerate.replace(origin, SPEC_AT),
    };
    lines.push(format!("Regenerate: {regenerate}"));
    lines.iter().map(|l| if l.is_empty() { "//".to_owned() } else { format!("// {l}") }).collect::<Vec<_>>().join("\n")
}

pub fn element_text(e: &Element) -> String {
    match e {
        Element::Vector { scalar, dims } => format!("{scalar} x {dims}"),
        Element::Record { fields } => {
            format!(
                "record {{ {} }}",
                fields.iter().map(|f| format!("{}: {}", f.name, f.scalar)).collect::<Vec<_>>().join(", ")
            )
        }
    }
}

/// The `twobs gen` command that reproduces a kernel, for its header.
pub fn regenerate_command(
    problem: &Problem,
    dev: &Device,
    points: Option<&str>,
    params: &[String],
    forced: Forced,
) -> String {
    let mut cmd = format!("twobs gen {} --device {}", problem.origin, dev.name);
    let log = match &problem.output {
        Output::Histogram { spacing, .. } => *spacing == Spacing::Log,
        Output::Histogram2d { axes, .. } => axes[0].spacing == Spacing::Log,
        _ => false,
    };
    if log {
        cmd += " --log-bins";
    }
    if let (true, Element::Vector { dims, .. }) = (problem.input.dims_from_input, &problem.input.element) {
        cmd += &format!(" --dims {dims}");
    }
    if let Some(p) = points {
        cmd += &format!(" --points {p}");
    }
    for p in params {
        cmd += &format!(" --param {p}");
    }
    if let Some(v) = forced.input_cache {
        cmd += &format!(" --input-cache {}", v.name());
    }
    if let Some(v) = forced.output {
        cmd += &format!(" --output {v}");
    }
    if let Some(v) = forced.copies {
        cmd += &format!(" --copies {v}");
    }
    if let Some(v) = forced.block_size {
        cmd += &format!(" --block-size {v}");
    }
    if let Some(v) = forced.points_per_thread {
        cmd += &format!(" --points-per-thread {v}");
    }
    if let Some(v) = forced.test {
        cmd += &format!(" --test {v}");
    }
    cmd
}
