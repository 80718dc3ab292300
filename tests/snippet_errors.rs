//! A mistake in a user's snippet is reported at the snippet's own file and
//! line, with its own text around it and how twobs calls it, by the CPU
//! backend's compiler and by NVRTC alike; and `gen --check` finds NVRTC
//! the way `run` does, without LD_LIBRARY_PATH.

use std::path::{Path, PathBuf};
use std::process::Command;

use twobs::backend::cpu::CpuDriver;
use twobs::backend::cuda::nvrtc;
use twobs::cache::Cache;
use twobs::codegen;
use twobs::device::Device;
use twobs::index::IndexKind;
use twobs::plan::{Forced, Plan, Points, Shape};
use twobs::spec::{Disk, Problem};

fn cache() -> Cache {
    Cache::at(concat!(env!("CARGO_TARGET_TMPDIR"), "/twobs-cache"))
}

const SPEC: &str = r#"<problem name="near">
  <summary>pairs closer than r</summary>
  <input sets="1" type="f32" dims="3"/>
  <function file="near.cu" name="dist" symmetric="true"/>
  <output kind="count" threshold="r" compare="lt"/>
  <param name="r" type="f32" default="0.25"/>
</problem>
"#;

/// A spec with this snippet in a fresh folder, parsed.
fn problem(spec: &str, snippet: &str) -> (Problem, PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("near.cu"), snippet).unwrap();
    let path = dir.path().join("near.xml");
    std::fs::write(&path, spec).unwrap();
    let problem = Problem::parse(spec, &path, &Disk).unwrap();
    (problem, dir.path().join("near.cu"), dir)
}

/// The CPU backend's and NVRTC's messages for this problem, both failing.
fn both_messages(problem: &Problem) -> [String; 2] {
    let params = problem.bind(&[]).unwrap();
    let points = Points { a: 1000, b: None };
    let shape = Shape::new(problem, &params, points);
    let cpu = match CpuDriver::compile(problem, &params, &shape, IndexKind::None, false, &cache()) {
        Ok(_) => panic!("the CPU driver compiled a broken snippet"),
        Err(e) => e.to_string(),
    };
    let dev = Device::profile("h100").unwrap();
    let plan = Plan::new(problem, &params, &dev, points, Forced::default()).unwrap();
    let kernel = codegen::render(problem, &params, &plan, &dev, "test");
    let gpu = match nvrtc::compile(&kernel, "sm_90") {
        Ok(_) => panic!("NVRTC compiled a broken snippet"),
        Err(e) => e.to_string(),
    };
    [cpu, gpu]
}

/// Each message names `snippet` at `line` (gcc `file:N:`, NVRTC `file(N)`)
/// and quotes the user's `text` of that line, marked.
fn points_at(messages: &[String; 2], snippet: &Path, line: usize, text: &str) {
    let file = snippet.display().to_string();
    for (message, place) in messages.iter().zip([format!("{file}:{line}:"), format!("{file}({line})")]) {
        assert!(message.contains(&place), "`{place}` missing from:\n{message}");
        assert!(message.contains(&format!("{file}, line {line}:")), "no excerpt of the snippet in:\n{message}");
        let marked = format!(">{line:>5} | {text}");
        assert!(message.contains(&marked), "`{marked}` missing from:\n{message}");
        assert!(message.contains("twobs calls dist(const Point& a, const Point& b) -> float, where Point is float3"));
    }
}

#[test]
fn a_wrong_parameter_type_is_reported_at_the_functions_own_line_on_both_backends() {
    let snippet = "// distance in the plane only\n\n__device__ float dist(const float2& a, const float2& b) {\n  \
                   float dx = a.x - b.x, dy = a.y - b.y;\n  return sqrtf(dx * dx + dy * dy);\n}\n";
    let (p, file, _dir) = problem(SPEC, snippet);
    points_at(&both_messages(&p), &file, 3, "__device__ float dist(const float2& a, const float2& b) {");
}

#[test]
fn an_error_inside_the_snippet_is_reported_at_its_line_with_its_text() {
    let snippet = "__device__ float dist(const float3& a, const float3& b) {\n  float dx = a.x - b.x;\n  \
                   return sqrtf(dx * dy);\n}\n";
    let (p, file, _dir) = problem(SPEC, snippet);
    points_at(&both_messages(&p), &file, 3, "  return sqrtf(dx * dy);");
}

#[test]
fn a_key_maps_function_of_the_wrong_type_is_reported_at_its_line() {
    let spec = SPEC.replace(r#"symmetric="true""#, r#"symmetric="true" key="squared" map="root""#);
    let snippet = "__device__ float squared(const float3& a, const float3& b) {\n  \
                   float dx = a.x - b.x, dy = a.y - b.y, dz = a.z - b.z;\n  return dx * dx + dy * dy + dz * dz;\n}\n\
                   __device__ float dist(const float3& a, const float3& b) { return sqrtf(squared(a, b)); }\n\
                   // the map takes the key, a float, not a point\n__device__ float root(const float3& k) { return sqrtf(k.x); }\n";
    let (p, file, _dir) = problem(&spec, snippet);
    let messages = both_messages(&p);
    let text = "__device__ float root(const float3& k) { return sqrtf(k.x); }";
    let file = file.display().to_string();
    for (message, place) in messages.iter().zip([format!("{file}:7:"), format!("{file}(7)")]) {
        assert!(message.contains(&place), "`{place}` missing from:\n{message}");
        assert!(message.contains(&format!(">    7 | {text}")), "the map's line missing from:\n{message}");
        assert!(message.contains("root(float key) -> float"), "the map's call missing from:\n{message}");
    }
}

/// The folder of the libnvrtc.so.13 this test process loaded (scripts/test.sh
/// puts it on LD_LIBRARY_PATH), or a toolkit's.
fn nvrtc_folder() -> PathBuf {
    let on_path = std::env::var("LD_LIBRARY_PATH").unwrap_or_default();
    let mut candidates: Vec<PathBuf> = on_path.split(':').filter(|d| !d.is_empty()).map(PathBuf::from).collect();
    candidates.extend(nvrtc::search_folders());
    candidates
        .into_iter()
        .find(|d| d.join("libnvrtc.so.13").is_file())
        .expect("libnvrtc.so.13 on LD_LIBRARY_PATH or in a known folder (run the tests with scripts/test.sh)")
}

#[test]
fn gen_check_finds_nvrtc_without_the_library_path() {
    let (_, _, dir) = problem(SPEC, "__device__ float dist(const float3& a, const float3& b) { return a.x - b.x; }\n");
    let cuda = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(nvrtc_folder(), cuda.path().join("lib64")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_twobs"))
        .args(["gen", "near.xml", "--check", "--device", "h100"])
        .current_dir(dir.path())
        .env_remove("LD_LIBRARY_PATH")
        .env("CUDA_PATH", cuda.path())
        .env("TWOBS_CACHE", cache().dir())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "gen --check failed:\n{stderr}");
    assert!(stderr.contains("compiled near.cu for sm_90"), "{stderr}");
}

/// The sum of a snippet's values over every pair, on the CPU backend.
fn cpu_sum(problem: &Problem, f64_mode: bool, inputs: &twobs::data::Inputs) -> f64 {
    let params = problem.bind(&[]).unwrap();
    let shape = Shape::new(problem, &params, Points { a: inputs.a.len() as u64, b: None });
    let driver = CpuDriver::compile(problem, &params, &shape, IndexKind::None, f64_mode, &cache()).unwrap();
    match driver.run(inputs, None, 2, &indicatif::ProgressBar::hidden()).unwrap() {
        twobs::outcome::Outcome::Totals(twobs::outcome::Totals::Sums(s)) => s[0],
        other => panic!("a sum, not {other:?}"),
    }
}

/// `--f64` computes every float operation of the snippet in double: CUDA's
/// float intrinsics too, which the prelude defines for float only (issue 30,
/// item 1's class: arithmetic left in f32 in f64 mode).
#[test]
fn f64_mode_computes_cuda_float_intrinsics_in_double() {
    use rand::{RngExt, SeedableRng};
    let spec = SPEC
        .replace(r#"kind="count" threshold="r" compare="lt""#, r#"kind="sum""#)
        .replace(r#"<param name="r" type="f32" default="0.25"/>"#, "");
    let snippet = "__device__ float dist(const float3& a, const float3& b) {\n  \
                   const float dx = __fsub_rn(a.x, b.x), dy = a.y - b.y;\n  \
                   const float s = __fadd_rn(__fmul_rn(dx, dx), __fmaf_rn(dy, dy, __fdiv_rn(1.0f, 3.0f)));\n  \
                   return __fsqrt_rn(s) + rsqrtf(s) + __fdividef(__expf(-s), 7.0f);\n}\n";
    let (p, _, _dir) = problem(&spec, snippet);
    let mut rng = rand::rngs::StdRng::seed_from_u64(rand::rng().random());
    let pts: Vec<[f32; 3]> = (0..300).map(|_| [0; 3].map(|_| rng.random::<f32>())).collect();
    let set = twobs::data::PointSet {
        columns: (0..3).map(|c| twobs::data::Column::F32(pts.iter().map(|p| p[c]).collect())).collect(),
        origin: "test".into(),
        rows: None,
    };
    let inputs = twobs::data::Inputs { a: set, b: None };
    let want: f64 = (0..pts.len())
        .flat_map(|i| (i + 1..pts.len()).map(move |j| (i, j)))
        .map(|(i, j)| {
            let (dx, dy) = (pts[i][0] as f64 - pts[j][0] as f64, pts[i][1] as f64 - pts[j][1] as f64);
            let s = dx * dx + dy.mul_add(dy, 1.0 / 3.0);
            s.sqrt() + 1.0 / s.sqrt() + (-s).exp() / 7.0
        })
        .sum();
    let got = cpu_sum(&p, true, &inputs);
    assert!(((got - want) / want).abs() < 1e-13, "f64 mode: {got} against {want}");
    // The spec's arithmetic is f32, about 1e-7 away: the test tells them apart.
    let f32_sum = cpu_sum(&p, false, &inputs);
    assert!(((f32_sum - want) / want).abs() > 1e-11, "f32: {f32_sum} against {want}");
}

/// In f64 mode a snippet that narrows a value back to float (here to take its
/// bits) is refused at its line, not computed partly in f32.
#[test]
fn f64_mode_refuses_a_snippet_that_narrows_to_float() {
    let snippet = "__device__ float dist(const float3& a, const float3& b) {\n  const float dx = a.x - b.x;\n  \
                   return static_cast<float>(__float_as_uint(dx * dx) >> 20);\n}\n";
    let (p, file, _dir) = problem(SPEC, snippet);
    let params = p.bind(&[]).unwrap();
    let shape = Shape::new(&p, &params, Points { a: 100, b: None });
    let Err(e) = CpuDriver::compile(&p, &params, &shape, IndexKind::None, true, &cache()) else {
        panic!("f64 mode compiled a snippet that narrows to float")
    };
    let e = e.to_string();
    assert!(e.contains(&format!("{}:3:", file.display())), "{e}");
    assert!(e.contains("float-conversion") && e.contains("a conversion back to float is an error there"), "{e}");
    // The spec's own arithmetic takes it as it is.
    CpuDriver::compile(&p, &params, &shape, IndexKind::None, false, &cache()).unwrap();
}
