//! Problem + Plan -> CUDA source, through the Tera templates in `templates/`.
//!
//! Rust decides and computes every constant; the templates hold the CUDA.

use std::sync::OnceLock;

use anyhow::Context as _;
use serde::Serialize;

use crate::device::Device;
use crate::plan::{Forced, OutputStage, Plan};
use crate::spec::{Element, Operand, Output, Params, Problem, Scalar, Value};

/// NVRTC options every kernel is compiled with. `--fmad=false` keeps a * b + c
/// as two roundings, the way the host compiler evaluates the snippet, so that
/// the CPU and GPU backends agree bit for bit; snippets may call fmaf explicitly.
pub const NVRTC_OPTIONS: [&str; 2] = ["--std=c++17", "--fmad=false"];

/// Rows of each component array are padded to a multiple of this many elements.
pub const PAD_ELEMENTS: u64 = 1024;

/// A rendered kernel.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// The `extern "C"` entry point.
    pub entry: String,
    /// `<problem>.cu`, the name NVRTC reports errors against.
    pub file_name: String,
    pub source: String,
}

const TEMPLATES: [(&str, &str); 18] = [
    ("kernel.cu", include_str!("../templates/kernel.cu")),
    ("probe.cu", include_str!("../templates/probe.cu")),
    ("common/types.cu", include_str!("../templates/common/types.cu")),
    ("common/contribution.cu", include_str!("../templates/common/contribution.cu")),
    ("cpu/driver.cpp", include_str!("../templates/cpu/driver.cpp")),
    ("cpu/prelude.h", include_str!("../templates/cpu/prelude.h")),
    ("cpu/f64_begin.h", include_str!("../templates/cpu/f64_begin.h")),
    ("cpu/f64_end.h", include_str!("../templates/cpu/f64_end.h")),
    ("input/register_shm.cu", include_str!("../templates/input/register_shm.cu")),
    ("input/register_roc.cu", include_str!("../templates/input/register_roc.cu")),
    ("input/shuffle.cu", include_str!("../templates/input/shuffle.cu")),
    ("input/naive.cu", include_str!("../templates/input/naive.cu")),
    ("output/register.cu", include_str!("../templates/output/register.cu")),
    ("output/register_sum.cu", include_str!("../templates/output/register_sum.cu")),
    ("output/privatized.cu", include_str!("../templates/output/privatized.cu")),
    ("output/global.cu", include_str!("../templates/output/global.cu")),
    ("output/dob.cu", include_str!("../templates/output/dob.cu")),
    ("output/topk.cu", include_str!("../templates/output/topk.cu")),
];

fn tera() -> &'static tera::Tera {
    static TERA: OnceLock<tera::Tera> = OnceLock::new();
    TERA.get_or_init(|| {
        let mut t = tera::Tera::new();
        t.autoescape_on(Vec::<&str>::new());
        t.add_raw_templates(TEMPLATES).expect("the built-in templates parse");
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

#[derive(Serialize)]
struct PointCx {
    is_struct: bool,
    ctype: String,
    struct_fields: Vec<String>,
}

#[derive(Serialize)]
struct ParamCx {
    name: String,
    ctype: &'static str,
    literal: String,
}

#[derive(Serialize)]
struct SnippetCx {
    file: String,
    text: String,
    function: String,
}

#[derive(Serialize, Default)]
struct OutputCx {
    kind: &'static str,
    stage: &'static str,
    compare: &'static str,
    threshold: String,
    bins: String,
    lo: String,
    scale: String,
    k: String,
    worst: String,
}

#[derive(Serialize, Default)]
struct PlanCx {
    input_cache: &'static str,
    output: &'static str,
    visit: &'static str,
    intra_block: String,
    block_size: u32,
    copies: u32,
    tile_bytes: u32,
    page_size: u32,
}

#[derive(Serialize)]
struct VectorTypeCx {
    prefix: &'static str,
    c: &'static str,
}

#[derive(Serialize)]
struct KernelCx {
    header: String,
    kernel_name: String,
    problem_name: String,
    origin: String,
    f64_mode: bool,
    vector_types: Vec<VectorTypeCx>,
    f64_functions: Vec<&'static str>,
    sets: u32,
    point: PointCx,
    components: Vec<ComponentCx>,
    value_ctype: &'static str,
    params: Vec<ParamCx>,
    snippet: SnippetCx,
    output: OutputCx,
    plan: PlanCx,
}

/// The C expression for an operand: `params::name` or a literal of `scalar`.
fn operand_expr(op: &Operand, scalar: Scalar) -> String {
    match op {
        Operand::Param(name) => format!("params::{name}"),
        Operand::Literal(v) => v.cast(scalar).c_literal(),
    }
}

fn worst_value(scalar: Scalar) -> &'static str {
    match scalar {
        Scalar::F32 => "__int_as_float(0x7f800000)",
        Scalar::F64 => "__longlong_as_double(0x7ff0000000000000LL)",
        Scalar::I32 => "2147483647",
        Scalar::I64 => "9223372036854775807LL",
        Scalar::U32 => "4294967295u",
    }
}

/// The histogram's bucket scale bins / (max - min), computed in f64 and rounded once to the value type.
pub fn histogram_scale(problem: &Problem, params: &Params) -> Option<(Value, Value)> {
    let Output::Histogram { bins, min, max } = &problem.output else {
        return None;
    };
    let returns = problem.function.returns;
    let lo = params.eval(min).cast(returns);
    let hi = params.eval(max).cast(returns);
    let scale = params.eval(bins).as_f64() / (hi.as_f64() - lo.as_f64());
    Some((lo, Value::F64(scale).cast(returns)))
}

fn output_cx(problem: &Problem, params: &Params, plan: &Plan) -> OutputCx {
    let stage = match (plan.output, &problem.output) {
        (OutputStage::Register, Output::Sum) => "register_sum",
        (OutputStage::Register, _) => "register",
        (OutputStage::Op | OutputStage::Aop, _) => "privatized",
        (OutputStage::Global, _) => "global",
        (OutputStage::Dob, _) => "dob",
        (OutputStage::Topk, _) => "topk",
    };
    output_cx_for(problem, params, stage)
}

fn output_cx_for(problem: &Problem, params: &Params, stage: &'static str) -> OutputCx {
    let returns = problem.function.returns;
    let mut cx = OutputCx { kind: problem.output.kind(), stage, ..Default::default() };
    match &problem.output {
        Output::Count { threshold, compare } | Output::Pairs { threshold, compare, .. } => {
            cx.compare = compare.c_operator();
            cx.threshold = operand_expr(threshold, returns);
        }
        Output::Histogram { bins, .. } => {
            let (lo, scale) = histogram_scale(problem, params).expect("a histogram");
            cx.bins = match bins {
                Operand::Param(name) => format!("static_cast<unsigned>(params::{name})"),
                Operand::Literal(v) => v.cast(Scalar::U32).c_literal(),
            };
            cx.lo = lo.c_literal();
            cx.scale = scale.c_literal();
        }
        Output::Knn { k } => {
            cx.k = match k {
                Operand::Param(name) => format!("static_cast<unsigned>(params::{name})"),
                Operand::Literal(v) => v.cast(Scalar::U32).c_literal(),
            };
            cx.worst = worst_value(returns).to_owned();
        }
        Output::Sum => {}
    }
    cx
}

fn point_cx(element: &Element, block_size: u32) -> (PointCx, Vec<ComponentCx>) {
    let comps = element.components();
    let mut offset = 0;
    let mut out = Vec::new();
    for (k, c) in comps.iter().enumerate() {
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
    let point = match element {
        Element::Vector { scalar, dims } if *dims <= 4 => {
            PointCx { is_struct: false, ctype: format!("{}{dims}", scalar.c_vector_prefix()), struct_fields: vec![] }
        }
        Element::Vector { scalar, dims } => PointCx {
            is_struct: true,
            ctype: String::new(),
            struct_fields: vec![format!("{} v[{dims}];", scalar.c_type())],
        },
        Element::Record { fields } => PointCx {
            is_struct: true,
            ctype: String::new(),
            struct_fields: fields.iter().map(|f| format!("{} {};", f.scalar.c_type(), f.name)).collect(),
        },
    };
    (point, out)
}

/// The comment block every kernel starts with: what it computes, the plan and how it was derived.
fn header(problem: &Problem, params: &Params, plan: &Plan, dev: &Device, regenerate: &str) -> String {
    let mut lines = vec![
        format!("twobs kernel: {} ({})", problem.name, problem.origin),
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
        format!("Output: {}", output_text(problem, params)),
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
        plan.grid, plan.block_size, plan.shared_bytes
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

pub fn output_text(problem: &Problem, params: &Params) -> String {
    let show = |op: &Operand| match op {
        Operand::Param(n) => format!("{n} = {}", params.eval(op)),
        Operand::Literal(v) => v.to_string(),
    };
    match &problem.output {
        Output::Count { threshold, compare } => {
            format!("count of pairs with value {} {}", compare.c_operator(), show(threshold))
        }
        Output::Sum => "sum of pair values (f64)".to_owned(),
        Output::Histogram { bins, min, max } => {
            format!("histogram of {} buckets over [{}, {})", show(bins), show(min), show(max))
        }
        Output::Pairs { threshold, compare, .. } => {
            format!("pairs with value {} {}", compare.c_operator(), show(threshold))
        }
        Output::Knn { k } => format!("{} nearest per query (smallest values, ties to the smaller index)", show(k)),
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
    if let Some(p) = points {
        cmd += &format!(" --points {p}");
    }
    for p in params {
        cmd += &format!(" --param {p}");
    }
    if let Some(v) = forced.input_cache {
        cmd += &format!(" --input-cache {v}");
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
    cmd
}

/// Renders the kernel for `plan`. `regenerate` is the command shown in the header.
pub fn render(
    problem: &Problem,
    params: &Params,
    plan: &Plan,
    dev: &Device,
    regenerate: &str,
) -> anyhow::Result<Kernel> {
    let plan_cx = PlanCx {
        input_cache: plan.input_cache.name(),
        output: plan.output.name(),
        visit: plan.visit.name(),
        intra_block: format!("{:?}", plan.intra_block).to_lowercase(),
        block_size: plan.block_size,
        copies: plan.copies,
        tile_bytes: plan.tile_bytes,
        page_size: plan.page_size.unwrap_or(0),
    };
    let mut cx = context(problem, params, plan_cx, Some(plan));
    cx.header = header(problem, params, plan, dev, regenerate);
    finish(cx, "kernel.cu", format!("{}.cu", problem.name))
}

/// Math functions whose f-suffixed float spelling f64 mode maps to the double one.
const F64_FUNCTIONS: [&str; 30] = [
    "sqrt", "cbrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "pow", "sin", "cos", "tan", "asin",
    "acos", "atan", "atan2", "sinh", "cosh", "tanh", "fabs", "fmin", "fmax", "floor", "ceil", "rint", "round", "trunc",
    "fma", "hypot",
];

/// Renders the CPU driver: the same types, parameters, snippet and pair
/// arithmetic as the kernel, with a host loop over the pairs of `visit`.
/// In `f64_mode` the problem must already be widened ([`Problem::in_f64`]).
pub fn render_cpu(
    problem: &Problem,
    params: &Params,
    visit: crate::plan::Visit,
    f64_mode: bool,
) -> anyhow::Result<Kernel> {
    let mut cx = context(problem, params, PlanCx { visit: visit.name(), ..Default::default() }, None);
    cx.f64_mode = f64_mode;
    finish(cx, "cpu/driver.cpp", format!("{}.cpp", problem.name))
}

/// The pair function alone in a one-line kernel, for counting its
/// floating-point instructions (`backend::nvrtc::fp_instructions`).
pub fn render_probe(problem: &Problem, params: &Params) -> anyhow::Result<Kernel> {
    let cx = context(problem, params, PlanCx::default(), None);
    finish(cx, "probe.cu", format!("{}-probe.cu", problem.name))
}

fn context(problem: &Problem, params: &Params, plan: PlanCx, full_plan: Option<&Plan>) -> KernelCx {
    let (point, components) = point_cx(&problem.input.element, plan.block_size.max(1));
    let output = match full_plan {
        Some(p) => output_cx(problem, params, p),
        None => output_cx_for(problem, params, ""),
    };
    KernelCx {
        header: String::new(),
        kernel_name: format!("twobs_{}", problem.name.replace('-', "_")),
        problem_name: problem.name.clone(),
        origin: problem.origin.clone(),
        f64_mode: false,
        vector_types: [
            ("float", "float"),
            ("double", "double"),
            ("int", "int"),
            ("uint", "unsigned"),
            ("longlong", "long long"),
        ]
        .into_iter()
        .map(|(prefix, c)| VectorTypeCx { prefix, c })
        .collect(),
        f64_functions: F64_FUNCTIONS.to_vec(),
        sets: match problem.input.sets {
            crate::spec::Sets::One => 1,
            crate::spec::Sets::Two => 2,
        },
        point,
        components,
        value_ctype: problem.function.returns.c_type(),
        params: problem
            .params
            .iter()
            .map(|p| ParamCx {
                name: p.name.clone(),
                ctype: p.scalar.c_type(),
                literal: params.get(&p.name).expect("bound").c_literal(),
            })
            .collect(),
        snippet: SnippetCx {
            file: problem.function.file.clone(),
            text: problem.function.source.trim_end().to_owned(),
            function: problem.function.name.clone(),
        },
        output,
        plan,
    }
}

fn finish(cx: KernelCx, template: &str, file_name: String) -> anyhow::Result<Kernel> {
    let entry = cx.kernel_name.clone();
    let context = tera::Context::from_serialize(&cx).context("building the template context")?;
    let rendered = tera().render(template, &context).map_err(|e| anyhow::anyhow!("rendering {template}: {e:#}"))?;
    // After the snippet, point compiler messages back at the generated file.
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
    Ok(Kernel { entry, file_name, source })
}
