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
use crate::plan::{Forced, Plan, Shape};
use crate::spec::{Element, Output, Params, Problem, Spacing};
use crate::stage::contribution::{self, Test};
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

/// Math functions whose f-suffixed float spelling f64 mode maps to the double one.
const F64_FUNCTIONS: [&str; 30] = [
    "sqrt", "cbrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "pow", "sin", "cos", "tan", "asin",
    "acos", "atan", "atan2", "sinh", "cosh", "tanh", "fabs", "fmin", "fmax", "floor", "ceil", "rint", "round", "trunc",
    "fma", "hypot",
];

fn components(element: &Element, block_size: u32) -> Vec<ComponentCx> {
    let mut offset = 0;
    let mut out = Vec::new();
    for (k, c) in element.components().iter().enumerate() {
        let member = match element {
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

/// What every template sees: the problem's types, parameters and snippet.
fn common(problem: &Problem, params: &Params, block_size: u32) -> serde_json::Map<String, Json> {
    let element = &problem.input.element;
    let point = match element {
        Element::Vector { scalar, dims } if *dims <= 4 => {
            json!({ "is_struct": false, "ctype": format!("{}{dims}", scalar.c_vector_prefix()) })
        }
        Element::Vector { scalar, dims } => {
            json!({ "is_struct": true, "struct_fields": [format!("{} v[{dims}];", scalar.c_type())] })
        }
        Element::Record { fields } => json!({
            "is_struct": true,
            "struct_fields": fields.iter().map(|f| format!("{} {};", f.scalar.c_type(), f.name)).collect::<Vec<_>>(),
        }),
    };
    let vector_types: Vec<Json> =
        [("float", "float"), ("double", "double"), ("int", "int"), ("uint", "unsigned"), ("longlong", "long long")]
            .iter()
            .map(|(prefix, c)| json!({ "prefix": prefix, "c": c }))
            .collect();
    let params: Vec<Json> = problem
        .params
        .iter()
        .map(|p| {
            json!({
                "name": p.name,
                "ctype": params.get(&p.name).expect("bound").c_type(),
                "literal": params.get(&p.name).expect("bound").c_literal(),
            })
        })
        .collect();
    let cx = json!({
        "kernel_name": format!("twobs_{}", problem.name.replace('-', "_")),
        "problem_name": problem.name,
        "origin": problem.origin,
        "f64_mode": false,
        "vector_types": vector_types,
        "f64_functions": F64_FUNCTIONS,
        "point": point,
        "components": components(element, block_size.max(1)),
        "value_ctype": problem.function.returns.c_type(),
        "params": params,
        "snippet": {
            "file": problem.function.file,
            "text": problem.function.source.trim_end(),
            "function": problem.function.name,
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
fn finish(rendered: String, entry: String, file_name: String) -> Kernel {
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
    Kernel { entry, file_name, source }
}

/// Renders the kernel for `plan`. `regenerate` is the command shown in the header.
pub fn render(problem: &Problem, params: &Params, plan: &Plan, dev: &Device, regenerate: &str) -> Kernel {
    let block_size = plan.launch.block_size;
    let mut cx = common(problem, params, block_size);
    let (kind, kind_cx) = contribution::fragment(problem, params, plan.test);
    let (output, output_cx) = plan.output.fragment();
    let diagonal = plan.diagonal.map(|d| render_fragment(&cx, d.fragment(), json!({}))).unwrap_or_default();
    let fragments = json!({
        "contribution": render_fragment(&cx, kind, kind_cx),
        "input": render_fragment(&cx, plan.input_cache.fragment(), json!({})),
        "output": render_fragment(&cx, output, output_cx),
        "visit": render_fragment(&cx, plan.shape.visit.fragment(), json!({ "diagonal": diagonal })),
    });
    cx.insert("fragments".into(), fragments);
    cx.insert("header".into(), header(problem, params, plan, dev, regenerate).into());
    cx.insert(
        "names".into(),
        json!({
            "input": plan.input_cache.name(),
            "output": plan.output.label(),
            "visit": plan.shape.visit.name(),
            "kind": problem.output.kind(),
        }),
    );
    cx.insert("block_size".into(), block_size.into());
    cx.insert("points_per_thread".into(), plan.launch.points_per_thread.into());
    cx.insert("tile_bytes".into(), plan.launch.tile_bytes.into());
    cx.insert("unordered".into(), plan.shape.visit.unordered().into());
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
    finish(render_template(Template::Kernel, cx), entry, format!("{}.cu", problem.name))
}

/// Renders the CPU driver: the same types, parameters, snippet and pair
/// arithmetic as the kernel, with a host loop over the pairs of `shape`.
/// In `f64_mode` the problem must already be widened ([`Problem::in_f64`]).
pub fn render_cpu(problem: &Problem, params: &Params, shape: &Shape, f64_mode: bool) -> Kernel {
    let mut cx = common(problem, params, 1);
    cx.insert("f64_mode".into(), f64_mode.into());
    // The oracle tests values, the definition.
    let (kind, kind_cx) = contribution::fragment(problem, params, Test::Values);
    let fragments = json!({
        "contribution": render_fragment(&cx, kind, kind_cx),
        "visit": render_fragment(&cx, shape.visit.cpu_fragment(), json!({})),
        "output": render_fragment(&cx, shape.collect.cpu_fragment(), json!({})),
    });
    cx.insert("fragments".into(), fragments);
    cx.insert("names".into(), json!({ "visit": shape.visit.name(), "kind": problem.output.kind() }));
    finish(render_template(Template::CpuDriver, cx), "twobs_rows".into(), format!("{}.cpp", problem.name))
}

/// What a pair evaluates alone in a one-line kernel, for counting its
/// floating-point instructions (`backend::nvrtc::fp_instructions`): the key
/// where `test` is on keys, else the pair function.
pub fn render_probe(problem: &Problem, params: &Params, test: Test) -> Kernel {
    let mut cx = common(problem, params, 1);
    if let (Test::Keys, Some(k)) = (test, &problem.function.key) {
        cx["snippet"]["function"] = k.key.clone().into();
    }
    finish(render_template(Template::Probe, cx), "twobs_probe".into(), format!("{}-probe.cu", problem.name))
}

/// The key probe of a problem tested on keys, for the GPU (`cpu` false) or the
/// host: every key's slot from the edges against its value's
/// (`backend::cuda::check_keys`, `backend::cpu::check_keys`). None where pairs
/// are tested on values.
pub fn render_key_probe(problem: &Problem, params: &Params, cpu: bool) -> Option<Kernel> {
    if !Test::keys_possible(problem, params) {
        return None;
    }
    let mut cx = common(problem, params, 1);
    let (kind, kind_cx) = contribution::fragment(problem, params, Test::Keys);
    cx.insert("fragments".into(), json!({ "contribution": render_fragment(&cx, kind, kind_cx) }));
    let (template, file) = if cpu {
        (Template::CpuKeysProbe, format!("{}-keys.cpp", problem.name))
    } else {
        (Template::KeysProbe, format!("{}-keys.cu", problem.name))
    };
    Some(finish(render_template(template, cx), "twobs_check_keys".into(), file))
}

/// The comment block every kernel starts with: what it computes, the plan and how it was derived.
fn header(problem: &Problem, params: &Params, plan: &Plan, dev: &Device, regenerate: &str) -> String {
    let mut lines = vec![
        format!("{}{} ({})", KERNEL_FIRST_LINE.trim_start_matches("// "), problem.name, problem.origin),
        problem.summary.clone(),
        String::new(),
        format!(
            "Input: {}, element {}; pair function `{}` from {}{}",
            problem.input.sets,
            element_text(&problem.input.element),
            problem.function.name,
            problem.function.file,
            if problem.function.symmetric { " (symmetric)" } else { "" }
        ),
        format!("Output: {}", contribution::describe(problem, params)),
        format!(
            "Parameters: {}",
            if params.values.is_empty() {
                "none".to_owned()
            } else {
                params.values.iter().map(|(n, v)| format!("{n} = {v}")).collect::<Vec<_>>().join(", ")
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
    if matches!(problem.output, Output::Histogram { spacing: Spacing::Log, .. }) {
        cmd += " --log-bins";
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
