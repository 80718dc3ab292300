//! The command line as a new user meets it.

use std::path::Path;
use std::process::{Command, Output};

/// The command, with the tests' own cache instead of the user's.
fn command() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_twobs"));
    c.env("TWOBS_CACHE", concat!(env!("CARGO_TARGET_TMPDIR"), "/twobs-cache"));
    c
}

fn twobs(args: &[&str]) -> Output {
    command().args(args).current_dir(env!("CARGO_MANIFEST_DIR")).output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn list_shows_every_built_in_with_a_line() {
    let o = twobs(&["list"]);
    assert!(o.status.success());
    let text = stdout(&o);
    for name in twobs::problems::BUILT_IN {
        assert!(text.lines().any(|l| l.starts_with(name) && l.len() > name.len() + 20), "{name} missing: {text}");
    }
}

#[test]
fn generated_kernels_are_current() {
    let dir = tempfile::tempdir().unwrap();
    for name in twobs::problems::BUILT_IN {
        let spec = format!("problems/{name}.xml");
        let o = twobs(&["gen", &spec, "-o", dir.path().to_str().unwrap()]);
        assert!(o.status.success(), "{}", stderr(&o));
        let fresh = std::fs::read_to_string(dir.path().join(format!("{name}.cu"))).unwrap();
        let kept =
            std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("generated").join(format!("{name}.cu")))
                .unwrap_or_default();
        assert!(
            fresh == kept,
            "generated/{name}.cu is stale: run `for p in problems/*.xml; do twobs gen $p -o generated; done`"
        );
    }
}

#[test]
fn gen_prints_the_kernel_with_its_plan_in_the_header() {
    let o = twobs(&["gen", "problems/rdf.xml"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.starts_with("// twobs kernel: rdf (problems/rdf.xml)"));
    assert!(text.contains("// Regenerate: twobs gen problems/rdf.xml --device h100"));
    assert!(text.contains("extern \"C\" __global__ void __launch_bounds__(B) twobs_rdf("));
    assert!(text.contains("#line 1 \"problems/rdf.cu\""));
}

#[test]
fn plan_and_gen_show_the_grid_of_a_cut_off_problem() {
    // Without --grid the plan says that the data decide, and names the cutoff.
    let text = stdout(&twobs(&["plan", "selfjoin", "--param", "eps=0.25"]));
    assert!(text.contains("cutoff eps=0.25") && text.contains("`--grid` shows that kernel"), "{text}");
    let o = twobs(&["plan", "selfjoin", "--grid"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).lines().any(|l| l.trim_start().starts_with("index") && l.contains("grid")), "{}", stdout(&o));
    let o = twobs(&["gen", "selfjoin", "--grid"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let kernel = stdout(&o);
    assert!(kernel.contains("grid_units[unit_first + block]") && kernel.contains("--grid"), "{kernel}");
    // KNN's grid is a search of rings, without tiles.
    let o = twobs(&["plan", "knn", "--grid"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).lines().any(|l| l.trim_start().starts_with("index") && l.contains("rings")), "{}", stdout(&o));
    let kernel = stdout(&twobs(&["gen", "knn", "--grid"]));
    assert!(kernel.contains("grid_cell_start") && kernel.contains("out.kth(r)"), "{kernel}");
    // A spec without a cutoff has no grid.
    let o = twobs(&["plan", "kde", "--grid"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("`kde` declares no <cutoff>"), "{}", stderr(&o));
}

#[test]
fn plan_explains_each_decision() {
    let o = twobs(&["plan", "problems/rdf.xml"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    for key in
        ["visit", "output class", "output", "input_cache", "block_size", "copies", "occupancy", "copy model", "R x L"]
    {
        assert!(text.contains(key), "`{key}` missing:\n{text}");
    }
}

#[test]
fn plan_json_has_the_promised_keys() {
    let o = twobs(&["plan", "sdh", "--json", "--device", "titanxp", "--points", "512000", "--param", "bins=20"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let copies = v["copy_model"]["best"].as_u64().unwrap();
    assert!(copies > 1);
    let r = v["launch"]["points_per_thread"].as_u64().unwrap();
    assert_eq!(v["variant"], format!("register_roc-aop{copies}-b64-r{r}"));
    assert_eq!(v["input_cache"], "register_roc");
    assert_eq!(v["output"]["stage"], "totals");
    assert_eq!(v["output"]["store"], "shared");
    assert_eq!(v["output"]["counter"], "u32");
    assert_eq!(v["output"]["copies"], copies);
    assert_eq!(v["launch"]["block_size"], 64);
    assert_eq!(v["shape"]["visit"], "lower_triangle");
}

#[test]
fn forced_worse_choices_are_explained() {
    let o = twobs(&["plan", "sdh", "--device", "titanxp", "--points", "512000", "--param", "bins=20", "--copies", "1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("note: 1 copies: the model predicts"), "{}", stdout(&o));
    let o = twobs(&["plan", "sdh", "--output", "register"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("error: output stage register is impossible"), "{}", stderr(&o));
}

#[test]
fn device_auto_without_a_gpu_falls_back_with_a_note() {
    if twobs::backend::cuda::driver_available().is_ok() {
        return; // a machine with a GPU plans for it; nothing to fall back from
    }
    let o = twobs(&["plan", "2pcf", "--device", "auto"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("note: --device auto: no usable GPU"), "{}", stderr(&o));
    assert!(stdout(&o).contains("device: h100 (profile"));
}

#[test]
fn tune_times_totals_on_a_gpu_and_says_so_where_it_cannot() {
    let o = twobs(&["tune", "--points", "1000,1"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--points 1: each case needs at least 2 points"), "{}", stderr(&o));
    let o = twobs(&["tune", "selfjoin", "--points", "1000", "--dry-run"]);
    assert!(!o.status.success());
    let e = stderr(&o);
    if twobs::backend::cuda::driver_available().is_ok() {
        assert!(e.contains("`selfjoin` collects pairs: twobs tune measures the kernels that sum pairs"), "{e}");
    } else {
        assert!(e.contains("twobs tune times kernels on a GPU"), "{e}");
    }
}

#[test]
fn errors_are_clear_and_fail() {
    let o = twobs(&["plan", "nosuch"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("`nosuch` is neither a spec file nor a built-in problem"), "{}", stderr(&o));
    let o = twobs(&["plan", "sdh", "--device", "v100"]);
    assert!(
        stderr(&o).contains("unknown device `v100`; expected auto or one of: titanxp, a100, h100, h200"),
        "{}",
        stderr(&o)
    );
    let o = twobs(&["plan", "sdh", "--points", "0"]);
    assert!(stderr(&o).contains("--points 0: expected a positive whole number"), "{}", stderr(&o));
    let o = twobs(&["plan", "2pcf", "--points", "10x10"]);
    assert!(stderr(&o).contains("this problem has one set"), "{}", stderr(&o));
    let o = twobs(&["plan", "sdh", "--input-cache", "texture"]);
    assert!(stderr(&o).contains("unknown input cache `texture`"), "{}", stderr(&o));

    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("bad.xml");
    std::fs::write(&spec, "<problem name=\"bad\">\n  <sumary>x</sumary>\n</problem>\n").unwrap();
    let o = twobs(&["gen", spec.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains(&format!("{}:2:3: unknown element <sumary>", spec.display())), "{}", stderr(&o));
}

#[test]
fn a_snippet_error_points_at_the_users_line() {
    if twobs::backend::cuda::nvrtc::available().is_err() {
        panic!("NVRTC is missing: run the suite through scripts/test.sh");
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f.cu"), "__device__ float f(float2 a, float2 b) {\n  return a.x - b.q;\n}\n")
        .unwrap();
    let spec = dir.path().join("mine.xml");
    std::fs::write(
        &spec,
        r#"<problem name="mine"><summary>s</summary><input sets="1" type="f32" dims="2"/>
<function file="f.cu" name="f"/><output kind="sum"/></problem>"#,
    )
    .unwrap();
    let o = twobs(&["gen", spec.to_str().unwrap(), "--check"]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains(&format!("{}(2): error", dir.path().join("f.cu").display())), "{err}");
    assert!(err.contains("has no member \"q\""), "{err}");
}

#[test]
fn run_rdf_works_out_of_the_box_without_a_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let o = command().args(["run", "rdf", "--backend", "cpu"]).current_dir(dir.path()).output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(stderr(&o).contains("no --input: using the default dataset uniform:20000"), "{}", stderr(&o));
    assert!(stderr(&o).contains("rdf: histogram of bins = 500 buckets over [0, r_max = 0.5)"), "{}", stderr(&o));
    // stdout is the CSV alone.
    assert!(out.starts_with("bin_lo,bin_hi,count,g_r\n"), "{out}");
    assert_eq!(out.lines().count(), 501);
    // An ideal gas: g(r) near 1 away from the smallest shells.
    let g: Vec<f64> = out.lines().skip(1).take(500).map(|l| l.rsplit(',').next().unwrap().parse().unwrap()).collect();
    let far: f64 = g[250..].iter().sum::<f64>() / 250.0;
    assert!((far - 1.0).abs() < 0.01, "mean g(r) over the outer shells {far}");
    assert!(stderr(&o).contains("volume from the periodic box box=1, volume 1"), "{}", stderr(&o));
}

#[test]
fn rdf_takes_one_set_or_two_and_refuses_what_would_be_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let atoms = dir.path().join("atoms.csv");
    std::fs::write(&atoms, "x,y,z\n0.1,0.1,0.1\n0.2,0.2,0.2\n0.3,0.1,0.2\n1.25,0.25,0.25\n").unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "rdf", "--backend", "cpu", "--param", "bins=4", "--out", "-"];
        args.extend_from_slice(extra);
        command().args(&args).current_dir(dir.path()).output().unwrap()
    };
    let pairs = |o: &std::process::Output| -> u64 {
        assert!(o.status.success(), "{}", stderr(o));
        stdout(o).lines().skip(1).map(|l| l.split(',').nth(2).unwrap().parse::<u64>().unwrap()).sum()
    };
    // One input: the 6 pairs within it (row 3 wraps to x = 0.25; all are within r_max), each once.
    let one = run(&["--input", "atoms.csv"]);
    assert_eq!(pairs(&one), 6);
    assert!(stderr(&one).contains("atoms.csv: 1 points outside the box box=1 wrapped into it"), "{}", stderr(&one));
    // The same file twice is A x B, self pairs included, and the user is told.
    let twice = run(&["--input", "atoms.csv", "--input", "atoms.csv"]);
    assert_eq!(pairs(&twice), 16);
    assert!(stderr(&twice).contains("the same input twice is A x B"), "{}", stderr(&twice));
    let three = run(&["--input", "atoms.csv", "--input", "atoms.csv", "--input", "atoms.csv"]);
    assert!(stderr(&three).contains("give --input once or twice, not 3 times"), "{}", stderr(&three));
    // Shells past half the box would meet their own images.
    let far = run(&["--input", "atoms.csv", "--param", "r_max=0.6"]);
    assert!(!far.status.success());
    assert!(
        stderr(&far).contains("r_max=0.6 is above half the smallest width of the box (box=1, half width 0.5)"),
        "{}",
        stderr(&far)
    );
    let tilted = run(&["--input", "atoms.csv", "--param", "box=1,1,1,1,0,0", "--param", "r_max=0.4"]);
    assert!(stderr(&tilted).contains("half width 0.35355"), "{}", stderr(&tilted));
    let refused = run(&["--input", "atoms.csv", "--outside-box", "refuse"]);
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("atoms.csv: row 3 (counting from 0) = (1.25, 0.25, 0.25) lies outside the box box=1"),
        "{}",
        stderr(&refused)
    );
    let bad_box = run(&["--input", "atoms.csv", "--param", "box=1,2"]);
    assert!(stderr(&bad_box).contains("a box is L, Lx,Ly,Lz or Lx,Ly,Lz,xy,xz,yz"), "{}", stderr(&bad_box));
}

/// Issue 30, item 2: atoms in [0, 10) and no `box`: the default box of 1
/// wrapped 99.9% of them and g(r) came out ~1. A box most points fall outside
/// is an error naming the data's extent; wrapping is the user's choice; and
/// every g(r) says which volume it took.
#[test]
fn a_box_most_points_fall_outside_is_an_error_and_rdf_names_its_box() {
    use rand::{RngExt, SeedableRng};
    let dir = tempfile::tempdir().unwrap();
    let seed: u64 = rand::rng().random();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut text = String::new();
    for _ in 0..500 {
        let p = [0; 3].map(|_| rng.random_range(0.0..10.0f32));
        text.push_str(&format!("{},{},{}\n", p[0], p[1], p[2]));
    }
    std::fs::write(dir.path().join("atoms.csv"), text).unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "rdf", "--backend", "cpu", "--input", "atoms.csv", "--param", "r_max=0.45"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--param", "bins=9", "--out", "gr.csv", "--report", "report.json"]);
        command().args(&args).current_dir(dir.path()).output().unwrap()
    };
    let o = run(&[]);
    assert!(!o.status.success(), "seed {seed}: {}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("atoms.csv: ") && e.contains(" of 500 points lie outside the periodic box box=1"), "{e}");
    assert!(e.contains("the data spans [") && e.contains("(box=...)") && e.contains("(--outside-box wrap)"), "{e}");
    assert!(!dir.path().join("gr.csv").exists(), "nothing written");
    let notes = |o: &Output| -> Vec<String> {
        assert!(o.status.success(), "seed {seed}: {}", stderr(o));
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.path().join("report.json")).unwrap()).unwrap();
        report["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap().to_owned()).collect()
    };
    let wrapped = notes(&run(&["--outside-box", "wrap"]));
    assert!(wrapped.iter().any(|n| n.contains("points outside the box box=1 wrapped into it")), "{wrapped:?}");
    assert!(wrapped.iter().any(|n| n.starts_with("g(r) takes the periodic box box=1 (volume 1")), "{wrapped:?}");
    let ten = notes(&run(&["--param", "box=10"]));
    assert!(ten.iter().any(|n| n.starts_with("g(r) takes the periodic box box=10 (volume 1000")), "{ten:?}");
    let open = notes(&run(&["--param", "box=0"]));
    assert!(
        open.iter().any(|n| n.starts_with("g(r) with box=0, open boundaries: the volume is the bounding box of the points, [")),
        "{open:?}"
    );
    // A few points past the box's faces (as a frame of a simulation has) still wrap, with a note.
    let few = notes(
        &command()
            .args([
                "run",
                "rdf",
                "--backend",
                "cpu",
                "--input",
                "uniform:300",
                "--param",
                "box=0.9",
                "--param",
                "r_max=0.4",
            ])
            .args(["--out", "gr.csv", "--report", "report.json"])
            .current_dir(dir.path())
            .output()
            .unwrap(),
    );
    assert!(few.iter().any(|n| n.contains("points outside the box box=0.9 wrapped into it")), "{few:?}");
}

#[test]
fn the_cuda_backend_without_a_gpu_says_so() {
    if twobs::backend::cuda::usable().is_ok() {
        return; // a GPU machine runs the GPU suite instead
    }
    let o = twobs(&["run", "2pcf", "--backend", "cuda", "--input", "uniform:100"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("error: the CUDA driver"), "{}", stderr(&o));
}

/// A Lennard-Jones sum cut at rc in a periodic box, as a user writes it:
/// singular where a point meets itself.
const LJ: &str = r#"<problem name="lj">
  <summary>Lennard-Jones energy, cut at rc, in a periodic box</summary>
  <input sets="1" type="f32" dims="3"/>
  <function file="lj.cu" name="lj" symmetric="true"/>
  <output kind="sum"/>
  <cutoff value="rc"/>
  <param name="rc" type="f32" default="0.08"/>
  <param name="sigma" type="f32" default="0.01"/>
  <param name="box" type="box" default="1">periodic box</param>
</problem>
"#;
const LJ_CU: &str = "// 4 (s^12 - s^6), s = sigma / r, for r < rc (the minimum image's); NaN at r = 0.
__device__ float lj(float3 a, float3 b) {
  constexpr float lx = params::box.lx, ly = params::box.ly, lz = params::box.lz;
  float dx = a.x - b.x, dy = a.y - b.y, dz = a.z - b.z;
  dx -= lx * rintf(dx / lx);
  dy -= ly * rintf(dy / ly);
  dz -= lz * rintf(dz / lz);
  const float r2 = dx * dx + dy * dy + dz * dz;
  if (!(r2 < params::rc * params::rc)) return 0.0f;
  const float s2 = params::sigma * params::sigma / r2;
  const float s6 = s2 * s2 * s2;
  return 4.0f * (s6 * s6 - s6);
}
";

/// Issue 30, item 5: `--verify` refused without a GPU, and failed a right
/// Lennard-Jones sum as `NaN against NaN`: its sampled rows met themselves,
/// where the pair function is singular. Without a GPU it now checks the
/// CPU's grid against every pair, in full for a small run and on sampled
/// rows past that, and the sampled rows leave the other side.
#[test]
fn verify_works_without_a_gpu_and_never_pairs_a_point_with_itself() {
    use rand::RngExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("lj.xml"), LJ).unwrap();
    std::fs::write(dir.path().join("lj.cu"), LJ_CU).unwrap();
    let seed: u64 = rand::rng().random_range(1..1 << 40);
    let verify = |n: u32, backend: &str| {
        let o = command()
            .args(["run", "lj.xml", "--input", &format!("uniform:{n}"), "--seed", &seed.to_string(), "--verify"])
            .args(["--backend", backend])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(o.status.success(), "seed {seed}, {n} points: {}", stderr(&o));
        let line =
            stdout(&o).lines().chain(stderr(&o).lines()).find(|l| l.starts_with("verified: ")).map(str::to_owned);
        line.unwrap_or_else(|| panic!("no verified line:\n{}{}", stdout(&o), stderr(&o)))
    };
    let small = verify(3000, "cpu");
    assert!(
        small.contains("all 4498500 pairs re-computed on the CPU, every pair without the grid: identical"),
        "{small}"
    );
    // 72M pairs: sampled rows, which leave the other side (12000 points less the rows).
    let large = verify(12_000, "auto");
    let rows: usize = large["verified: ".len()..].split(' ').next().unwrap().parse().unwrap();
    assert!(
        large.ends_with(&format!(
            "sampled query rows against the {} other points (the sampled rows left out), on the grid and every pair, on the CPU: identical",
            12_000 - rows
        )),
        "{large}"
    );
}

#[test]
fn processes_sharing_a_fresh_cache_build_the_same_driver_safely() {
    let dir = tempfile::tempdir().unwrap();
    let children: Vec<_> = (0..4)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_twobs"))
                .env("TWOBS_CACHE", dir.path())
                .args(["run", "2pcf", "--backend", "cpu", "--input", "uniform:300", "--quiet"])
                .current_dir(dir.path())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outputs: Vec<Output> = children.into_iter().map(|c| c.wait_with_output().unwrap()).collect();
    for o in &outputs {
        assert!(o.status.success(), "{}", stderr(o));
    }
    // All found the same count, and the cache holds one driver, no partial files.
    // --quiet: stdout is the count alone.
    assert!(stdout(&outputs[0]).trim().parse::<u64>().is_ok(), "{}", stdout(&outputs[0]));
    assert!(outputs.iter().all(|o| o.stdout == outputs[0].stdout));
    let files: Vec<String> = std::fs::read_dir(dir.path().join("cpu"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files.iter().filter(|f| f.ends_with(".so")).count(), 1, "{files:?}");
    assert!(!files.iter().any(|f| f.contains("partial")), "{files:?}");
}

#[test]
fn gen_never_overwrites_a_file_it_did_not_write() {
    // The README's layout: spec and snippet side by side, the kernel asked for in the same folder.
    let dir = tempfile::tempdir().unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/manhattan");
    for f in ["manhattan.xml", "manhattan.cu"] {
        std::fs::copy(root.join(f), dir.path().join(f)).unwrap();
    }
    let snippet = std::fs::read_to_string(dir.path().join("manhattan.cu")).unwrap();
    let spec = dir.path().join("manhattan.xml");
    let o = twobs(&["gen", spec.to_str().unwrap(), "-o", dir.path().to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("manhattan.cu exists and twobs did not write it"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(dir.path().join("manhattan.cu")).unwrap(), snippet);
    // A kernel twobs wrote is regenerated in place.
    let out = dir.path().join("out");
    for _ in 0..2 {
        let o = twobs(&["gen", spec.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    assert!(std::fs::read_to_string(out.join("manhattan.cu")).unwrap().starts_with("// twobs kernel: manhattan"));
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 1, "no partial file is left");
}

#[test]
fn quiet_leaves_stdout_to_the_result() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| command().args(args).current_dir(dir.path()).output().unwrap();
    let o = run(&["run", "2pcf", "--backend", "cpu", "--input", "uniform:300", "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.trim().parse::<u64>().is_ok() && out.lines().count() == 1, "stdout: {out:?}");
    assert!(stderr(&o).is_empty(), "{}", stderr(&o));
    let o = run(&["run", "kde", "--backend", "cpu", "--input", "uniform:300", "--quiet"]);
    assert!(stdout(&o).trim().parse::<f64>().is_ok(), "{}", stdout(&o));
}

#[test]
fn knn_ids_are_int64_with_minus_one_for_missing_neighbours() {
    let dir = tempfile::tempdir().unwrap();
    let o = command()
        .args(["run", "knn", "--backend", "cpu", "--input", "uniform:3", "--param", "k=4", "--out", "k.npy"])
        .args(["--report", "r.json"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let npy = npyz::NpyFile::new(std::fs::File::open(dir.path().join("k.npy")).unwrap()).unwrap();
    assert_eq!(npy.shape(), &[3, 4]);
    assert_eq!(npy.dtype().descr(), "'<i8'");
    let ids: Vec<i64> = npy.into_vec().unwrap();
    for q in 0..3 {
        let row = &ids[q * 4..q * 4 + 4];
        assert!(row[..2].iter().all(|&j| (0..3).contains(&j) && j != q as i64), "{row:?}");
        assert_eq!(&row[2..], &[-1, -1], "two points are all the neighbours a query has");
    }
    // The values beside them in the pair function's type (f32), as computed:
    // each a distance of two points of the cube, padded with +inf.
    let npy = npyz::NpyFile::new(std::fs::File::open(dir.path().join("k_values.npy")).unwrap()).unwrap();
    assert_eq!(npy.shape(), &[3, 4]);
    assert_eq!(npy.dtype().descr(), "'<f4'");
    let values: Vec<f32> = npy.into_vec().unwrap();
    for q in 0..3 {
        let row = &values[q * 4..q * 4 + 4];
        assert!(row[0] <= row[1] && row[..2].iter().all(|&v| (0.0..=3f32.sqrt()).contains(&v)), "{row:?}");
        assert_eq!(&row[2..], &[f32::INFINITY, f32::INFINITY], "no third neighbour");
    }
    // Numbers in the report are numbers.
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(report["pairs"], 6);
}

#[test]
fn snippet_functions_named_like_generated_locals_work_on_both_backends() {
    // f, a, b, g: the names a snippet most likely uses, and names the driver and
    // kernel use for their own locals and parameters.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("n.cu"),
        "__device__ float a(float3 p, float3 r) { const float d = p.x - r.x; return d * d; }\n\
         __device__ float b(float k) { return sqrtf(fmaxf(k, 0.0f)); }\n\
         __device__ float g(float k) { return k * rsqrtf(k); }\n\
         __device__ float f(float3 x, float3 y) { return b(a(x, y)); }\n\
         // Names the generated code after the snippet uses, defined by the user\n\
         // (they live in twobs_generated, so they cannot clash).\n\
         constexpr int B = 3, R = 5, K = 7, SLOTS = 2, LO = 1, SCALE = 9, THRESHOLD = 4, TILE_BYTES = 0;\n\
         constexpr int FULL_WARP = 1, UNORDERED_PAIRS = 2;\n\
         struct Tally {}; struct Contribution {}; struct Total {}; struct Output {}; struct Tiles {};\n\
         struct Set {}; struct Here {}; struct Offer {}; struct TopK {}; struct Key {};\n\
         __device__ int umin(int x) { return x; }\n\
         __device__ int bucket_of(int x) { return x; }\n\
         __device__ int contribute(int x) { return x; }\n\
         __device__ int passes(int x) { return x; }\n\
         __device__ int load_point(int x) { return x; }\n\
         __device__ int prepare_contribution(int x) { return x; }\n\
         __device__ int prepare_buckets(int x) { return x; }\n\
         __device__ int key_rank(int x) { return x; }\n\
         __device__ int key_slot(int x) { return x; }\n\
         __device__ int value_slot(int x) { return x; }\n\
         __device__ int guess_index(int x) { return x; }\n\
         __device__ int smallest_key(int x) { return x; }\n",
    )
    .unwrap();
    for output in [
        r#"<output kind="count" threshold="0.25" compare="lt"/>"#,
        r#"<output kind="histogram" bins="7" max="1"/>"#,
        r#"<output kind="pairs" threshold="0.1" compare="le"/>"#,
        r#"<output kind="knn" k="3"/>"#,
        r#"<output kind="sum"/>"#,
    ] {
        let spec = dir.path().join("n.xml");
        std::fs::write(
            &spec,
            format!(
                r#"<problem name="n"><summary>s</summary><input sets="1" type="f32" dims="3"/>
<function file="n.cu" name="f" symmetric="true" key="a" map="b" estimate="g"/>{output}</problem>"#
            ),
        )
        .unwrap();
        let spec = spec.to_str().unwrap();
        let out = dir.path().join("out.npy");
        let _ = std::fs::remove_file(&out);
        let o = twobs(&[
            "run",
            spec,
            "--backend",
            "cpu",
            "--input",
            "uniform:200",
            "--quiet",
            "--out",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{output}: {}", stderr(&o));
        let tests: &[&str] =
            if output.contains("knn") || output.contains("sum") { &["values"] } else { &["values", "keys"] };
        for test in tests {
            let o = twobs(&["gen", spec, "--check", "--test", test]);
            assert!(o.status.success(), "{output} {test}: {}", stderr(&o));
        }
    }
}

#[test]
fn results_take_the_format_the_user_names() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| command().args(args).current_dir(dir.path()).output().unwrap();
    // A histogram as npy: float64 rows of bin_lo, bin_hi, count.
    let o = run(&["run", "sdh", "--backend", "cpu", "--input", "uniform:200", "--param", "bins=7", "--out", "h.npy"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let npy = npyz::NpyFile::new(std::fs::File::open(dir.path().join("h.npy")).unwrap()).unwrap();
    assert_eq!((npy.shape().to_vec(), npy.dtype().descr()), (vec![7, 3], "'<f8'".to_owned()));
    let h: Vec<f64> = npy.into_vec().unwrap();
    // Every pair of 200 points in the unit cube lies within the diagonal.
    assert_eq!(h.chunks(3).map(|r| r[2]).sum::<f64>(), 200.0 * 199.0 / 2.0);
    // JSON by --format, whatever the name.
    let o = run(&[
        "run",
        "sdh",
        "--backend",
        "cpu",
        "--input",
        "uniform:200",
        "--param",
        "bins=7",
        "--out",
        "h.dat",
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("h.dat")).unwrap()).unwrap();
    assert_eq!(v["count"].as_array().unwrap().len(), 7);
    // Pairs as CSV on standard output.
    let o =
        run(&["run", "selfjoin", "--backend", "cpu", "--input", "uniform:300", "--param", "eps=0.05", "--out", "-"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("i,j\n"), "{}", stdout(&o));
    assert!(stdout(&o).lines().skip(1).all(|l| l.split(',').count() == 2));
    // A count as JSON.
    let o = run(&["run", "2pcf", "--backend", "cpu", "--input", "uniform:300", "--out", "c.json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("c.json")).unwrap()).unwrap();
    assert!(v["count"].as_u64().is_some(), "{v}");
    // No partial file is left behind.
    let names: Vec<String> =
        std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(!names.iter().any(|n| n.contains("partial")), "{names:?}");
}

#[test]
fn a_bad_destination_fails_before_anything_is_computed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("blocker"), "a file, not a folder").unwrap();
    let run = |args: &[&str]| command().args(args).current_dir(dir.path()).output().unwrap();
    // Each would take minutes on the CPU: the error must come first.
    let big = ["run", "sdh", "--backend", "cpu", "--input", "uniform:3000000"];
    let start = std::time::Instant::now();
    let o = run(&[&big[..], &["--out", "h.txt"]].concat());
    assert!(stderr(&o).contains("--out h.txt: the extension names no result format"), "{}", stderr(&o));
    let o = run(&[&big[..], &["--out", "blocker/h.csv"]].concat());
    assert!(stderr(&o).contains("cannot write blocker/h.csv"), "{}", stderr(&o));
    let o = run(&[&big[..], &["--out", "-", "--report", "-"]].concat());
    assert!(stderr(&o).contains("both want standard output"), "{}", stderr(&o));
    let o = run(&[&big[..], &["--out", "h.csv", "--report", "blocker/r.json"]].concat());
    assert!(stderr(&o).contains("cannot write blocker/r.json"), "{}", stderr(&o));
    assert!(start.elapsed().as_secs() < 30, "the errors came after computing");
}

#[test]
fn a_run_killed_by_sigterm_or_sigint_leaves_no_partial_file() {
    // 4.5 million pairs as CSV (about 60 MB): killed at a spread of moments,
    // some of them while the file is being written.
    let dir = tempfile::tempdir().unwrap();
    let mut outcomes = Vec::new();
    for (k, signal) in ["-TERM", "-INT"].iter().cycle().take(14).enumerate() {
        let out = dir.path().join(format!("pairs{k}.csv"));
        let mut child = command()
            .args(["run", "selfjoin", "--backend", "cpu", "--input", "uniform:3000", "--param", "eps=2", "--quiet"])
            .args(["--out", out.to_str().unwrap()])
            .current_dir(dir.path())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100 + 50 * k as u64));
        let _ = Command::new("kill").arg(signal).arg(child.id().to_string()).status();
        let status = child.wait().unwrap();
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(!names.iter().any(|n| n.contains("partial")), "after {signal} at step {k}: {names:?}");
        if out.exists() {
            // Only a complete file is ever in place.
            let lines = std::fs::read_to_string(&out).unwrap().lines().count();
            assert_eq!(lines, 1 + 3000 * 2999 / 2, "a file in place is complete");
        }
        outcomes.push((*signal, status.code(), out.exists()));
    }
    println!("(signal, exit code, file in place) per kill: {outcomes:?}");
    // A run the signal stopped exits as a shell reports it: 128 + the signal's number.
    for (signal, code, _) in &outcomes {
        assert!(*code == Some(0) || *code == Some(if *signal == "-TERM" { 143 } else { 130 }), "{outcomes:?}");
    }
    for signal in ["-TERM", "-INT"] {
        assert!(outcomes.iter().any(|(s, c, _)| *s == signal && *c != Some(0)), "no {signal} landed: {outcomes:?}");
    }
}

#[test]
fn xi_writes_the_counts_and_the_estimate_the_user_asks_for() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let mut all = vec!["xi", "--data", "uniform:500", "--randoms", "uniform:900", "--backend", "cpu"];
        all.extend_from_slice(args);
        command().args(&all).current_dir(dir.path()).output().unwrap()
    };
    let o = run(&["--param", "bins=5", "--param", "r_min=0.05", "--param", "r_max=0.5", "--log-bins", "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.starts_with("r_lo,r_hi,dd,dr,rr,xi\n"), "{out}");
    assert_eq!(out.lines().count(), 6, "{out}");
    assert!(stderr(&o).is_empty(), "--quiet: {}", stderr(&o));
    let o = run(&["--estimator", "natural", "--param", "bins=3", "--out", "xi.json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("xi.json")).unwrap()).unwrap();
    assert!(json.get("dr").is_none() && json["xi"].as_array().unwrap().len() == 3, "{json}");
    assert!(stdout(&o).contains("xi(r) by the natural estimator: 500 data points, 900 randoms"), "{}", stdout(&o));
    let o = run(&["--problem", "2pcf"]);
    assert!(stderr(&o).contains("problem `2pcf` cannot count xi's pairs"), "{}", stderr(&o));
    let o = run(&["--log-bins"]);
    assert!(stderr(&o).contains("log-spaced buckets need a lower edge above 0, and it is r_min=0"), "{}", stderr(&o));
    // The report holds xi as written and how each count ran, the index with its reason.
    let o = run(&["--param", "bins=4", "--param", "r_max=0.2", "--out", "x.csv", "--report", "x-report.json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("DD: ") && stdout(&o).contains("; index grid: cutoff r_max=0.2"), "{}", stdout(&o));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("x-report.json")).unwrap()).unwrap();
    let csv = std::fs::read_to_string(dir.path().join("x.csv")).unwrap();
    let written: Vec<f64> = csv.lines().skip(1).map(|l| l.rsplit(',').next().unwrap().parse().unwrap()).collect();
    let reported: Vec<f64> = report["result"]["xi"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    // serde_json reads decimals to within an ulp (no float_roundtrip): equal to 1e-15.
    assert!(
        written.len() == 4 && written.iter().zip(&reported).all(|(w, r)| (w - r).abs() <= 1e-15 * w.abs()),
        "{csv}\n{report}"
    );
    for what in ["DD", "RR", "DR"] {
        let run = &report["runs"][what];
        assert!(run["backend"] == "cpu" && run["index"]["index"] == "grid", "{what}: {run}");
        assert!(run["index"]["why"].as_str().unwrap().contains("cells visit"), "{what}: {run}");
    }
    let o = run(&["--report", "-"]);
    assert!(stderr(&o).contains("--out - and --report - both want standard output"), "{}", stderr(&o));
}

#[test]
fn xi_with_patches_writes_its_jackknife_errors_and_covariance() {
    let dir = tempfile::tempdir().unwrap();
    // Patches 0, 1, 2 in turn, one number a line.
    let numbers = |n: usize| (0..n).map(|i| format!("{}\n", i % 3)).collect::<String>();
    std::fs::write(dir.path().join("pd.txt"), numbers(400)).unwrap();
    std::fs::write(dir.path().join("pr.txt"), numbers(700)).unwrap();
    std::fs::write(dir.path().join("short.txt"), numbers(5)).unwrap();
    let run = |args: &[&str]| {
        let mut all = vec!["xi", "--data", "uniform:400", "--randoms", "uniform:700", "--backend", "cpu"];
        all.extend_from_slice(&["--param", "bins=3", "--param", "r_min=0.1", "--param", "r_max=0.4"]);
        all.extend_from_slice(args);
        command().args(&all).current_dir(dir.path()).output().unwrap()
    };
    let o = run(&["--patches", "pd.txt", "--random-patches", "pr.txt", "--cov", "cov.csv", "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("r_lo,r_hi,dd,dr,rr,xi,xi_err\n"), "{}", stdout(&o));
    let cov = std::fs::read_to_string(dir.path().join("cov.csv")).unwrap();
    let rows: Vec<Vec<f64>> = cov.lines().skip(1).map(|l| l.split(',').map(|x| x.parse().unwrap()).collect()).collect();
    assert!(cov.starts_with("r_lo,r_hi,cov_0,cov_1,cov_2\n") && rows.len() == 3, "{cov}");
    // xi_err is the square root of the covariance's diagonal; the covariance is symmetric.
    let errors: Vec<f64> = stdout(&o).lines().skip(1).map(|l| l.rsplit(',').next().unwrap().parse().unwrap()).collect();
    for i in 0..3 {
        assert!((errors[i] - rows[i][2 + i].sqrt()).abs() <= 1e-12 * errors[i], "{cov}");
        assert!(rows[i][2 + i] > 0.0 && (0..3).all(|j| rows[i][2 + j] == rows[j][2 + i]), "{cov}");
    }
    let o = run(&["--patches", "short.txt", "--random-patches", "pr.txt"]);
    assert!(stderr(&o).contains("--patches: short.txt: 5 patch numbers for 400 points"), "{}", stderr(&o));
    let o = run(&["--patches", "pd.txt"]);
    assert!(!o.status.success() && stderr(&o).contains("--random-patches"), "{}", stderr(&o));
}

#[test]
fn xi_radec_reads_degrees_and_names_a_row_off_the_sky() {
    let dir = tempfile::tempdir().unwrap();
    let sky = |n: usize, bad: bool| -> String {
        (0..n)
            .map(|i| {
                format!(
                    "{},{}\n",
                    (i * 37 % 360) as f64 * 0.5,
                    if bad && i == 4 { 91.0 } else { (i % 60) as f64 - 30.0 }
                )
            })
            .collect()
    };
    std::fs::write(dir.path().join("d.csv"), sky(200, false)).unwrap();
    std::fs::write(dir.path().join("r.csv"), sky(300, false)).unwrap();
    std::fs::write(dir.path().join("bad.csv"), sky(10, true)).unwrap();
    let run = |data: &str| {
        let args = ["xi", "--radec", "--data", data, "--randoms", "r.csv", "--backend", "cpu", "--param", "bins=3"];
        command()
            .args(args)
            .args(["--param", "theta_min=1", "--param", "theta_max=31"])
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let o = run("d.csv");
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("theta_lo,theta_hi,dd,dr,rr,xi\n1,11,"), "{}", stdout(&o));
    let o = run("bad.csv");
    assert!(stderr(&o).contains("row 5: RA 74, Dec 91 is not a point on the sky"), "{}", stderr(&o));
}

#[test]
fn xi_in_a_periodic_box_needs_no_randoms_and_says_what_it_divides_by() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let mut all = vec!["xi", "--data", "uniform:600", "--backend", "cpu", "--param", "bins=4"];
        all.extend_from_slice(args);
        command().args(&all).current_dir(dir.path()).output().unwrap()
    };
    let o = run(&["--box", "1", "--param", "r_max=0.5", "--norm", "squared"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("r_lo,r_hi,dd,rr,xi\n"), "{}", stdout(&o));
    let e = stderr(&o);
    assert!(e.contains("natural estimator: 600 data points, analytic RR in a periodic box of volume 1"), "{e}");
    assert!(e.contains("counts over N^2/2"), "{e}");
    // RR is N^2/2 times the shell's share of the unit box.
    let rr: f64 = stdout(&o).lines().nth(1).unwrap().split(',').nth(3).unwrap().parse().unwrap();
    let want = 600.0 * 600.0 / 2.0 * 4.0 / 3.0 * std::f64::consts::PI * 0.125f64.powi(3);
    assert!((rr - want).abs() < 1e-9 * want, "{rr} vs {want}");
    let refusals: [(&[&str], &str); 4] = [
        (&["--box", "1", "--estimator", "landy-szalay"], "Landy-Szalay is the natural estimator"),
        (&["--box", "1", "--randoms", "uniform:10"], "cannot be used with"),
        (&["--box", "1", "--param", "r_max=0.6"], "above half the smallest width"),
        (&[], "--randoms"),
    ];
    for (args, want) in refusals {
        let o = run(args);
        assert!(!o.status.success() && stderr(&o).contains(want), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn plot_draws_g_of_r_and_xi_and_is_checked_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| command().args(args).current_dir(dir.path()).output().unwrap();
    let o = run(&[
        "run",
        "rdf",
        "--backend",
        "cpu",
        "--input",
        "uniform:3000",
        "--param",
        "bins=50",
        "--plot",
        "g.png",
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(dir.path().join("g.png")).unwrap()));
    let reader = decoder.read_info().unwrap();
    assert_eq!((reader.info().width, reader.info().height), (960, 600));
    let o = run(&[
        "xi",
        "--data",
        "uniform:400",
        "--randoms",
        "uniform:800",
        "--backend",
        "cpu",
        "--plot",
        "xi.svg",
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let svg = std::fs::read_to_string(dir.path().join("xi.svg")).unwrap();
    assert!(svg.contains("ξ(r), Landy-Szalay: 400 data points, 800 randoms"), "{svg:.300}");
    // Refused before three million points are counted.
    let start = std::time::Instant::now();
    let big = ["run", "sdh", "--backend", "cpu", "--input", "uniform:3000000"];
    let o = run(&[&big[..], &["--plot", "h.jpg"]].concat());
    assert!(stderr(&o).contains("h.jpg: the extension names no picture format; use .png or .svg"), "{}", stderr(&o));
    let o = run(&["run", "2pcf", "--backend", "cpu", "--input", "uniform:3000000", "--plot", "c.png"]);
    assert!(stderr(&o).contains("--plot draws histograms and g(r); problem `2pcf` makes count"), "{}", stderr(&o));
    let o = run(&[&big[..], &["--plot", "nowhere/h.png"]].concat());
    assert!(stderr(&o).contains("cannot write nowhere/h.png"), "{}", stderr(&o));
    assert!(start.elapsed().as_secs() < 30, "the errors came after computing");
}

#[test]
fn built_ins_take_the_dimension_of_their_input() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| command().args(args).current_dir(dir.path()).output().unwrap();
    // 4-D points: only the fourth coordinate separates them.
    std::fs::write(dir.path().join("p4.csv"), "0,0,0,0\n0,0,0,0.5\n0,0,0,2\n").unwrap();
    let o =
        run(&["run", "selfjoin", "--backend", "cpu", "--input", "p4.csv", "--param", "eps=1", "--out", "-", "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "i,j\n0,1\n");
    // 6-D npy for knn: each point's nearest is the next one along the sixth axis.
    {
        use npyz::WriterBuilder;
        let mut f = std::fs::File::create(dir.path().join("p6.npy")).unwrap();
        let mut w = npyz::WriteOptions::new().default_dtype().shape(&[4, 6]).writer(&mut f).begin_nd().unwrap();
        for i in 0..4 {
            for c in 0..6 {
                w.push(&if c == 5 { (i * i) as f32 } else { 0.5f32 }).unwrap();
            }
        }
        w.finish().unwrap();
    }
    let o = run(&["run", "knn", "--backend", "cpu", "--input", "p6.npy", "--param", "k=1", "--out", "-", "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let ids: Vec<&str> = text.lines().skip(1).map(|l| l.split(',').nth(2).unwrap()).collect();
    assert_eq!(ids, ["1", "0", "1", "2"], "{text}");
    // Synthetic points take --dims; gen and plan too.
    let o =
        run(&["run", "2pcf", "--backend", "cpu", "--input", "uniform:50", "--dims", "7", "--param", "r=9", "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), "1225");
    let o = run(&["gen", "sdh", "--dims", "5"]);
    assert!(stdout(&o).contains("constexpr unsigned DIMS = 5;") && stdout(&o).contains("--dims 5"), "{}", stderr(&o));
    // A problem of fixed dimension says so, naming the input.
    let o = run(&["run", "rdf", "--backend", "cpu", "--input", "p4.csv"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--input p4.csv: problem `rdf` takes points of 3 values, not 4"), "{}", stderr(&o));
}

#[test]
fn weights_per_point_weigh_each_pair_by_their_product() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| command().args(args).current_dir(dir.path()).output().unwrap();
    std::fs::write(dir.path().join("p.csv"), "0,0,0\n0,0,0.5\n0,0,1.5\n").unwrap();
    std::fs::write(dir.path().join("w.txt"), "1\n2\n0.5\n").unwrap();
    // Pairs: (0,1) at 0.5 weighs 2, (1,2) at 1 weighs 1, (0,2) at 1.5 weighs 0.5.
    let o = run(&[
        "run",
        "sdh",
        "--backend",
        "cpu",
        "--input",
        "p.csv",
        "--weights",
        "w.txt",
        "--param",
        "bins=2",
        "--param",
        "r_max=2",
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), "bin_lo,bin_hi,sum\n0,1,2\n1,2,1.5\n");
    std::fs::write(dir.path().join("short.txt"), "1\n2\n").unwrap();
    let o = run(&["run", "sdh", "--backend", "cpu", "--input", "p.csv", "--weights", "short.txt"]);
    assert!(stderr(&o).contains("--weights short.txt: 2 weights for a set of 3 points"), "{}", stderr(&o));
    let o = run(&["run", "2pcf", "--backend", "cpu", "--input", "p.csv", "--weights", "w.txt"]);
    assert!(stderr(&o).contains("problem `2pcf` makes a count output"), "{}", stderr(&o));
    let o = run(&["run", "sdh", "--backend", "cpu", "--input", "p.csv", "--weights", "w.txt", "--weights", "w.txt"]);
    assert!(stderr(&o).contains("2 files for 1 set of points"), "{}", stderr(&o));
}

#[test]
fn an_error_prints_each_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("blocker"), "a file, not a folder").unwrap();
    std::fs::create_dir(dir.path().join("folder.xml")).unwrap();
    let run = |args: &[&str]| command().args(args).current_dir(dir.path()).output().unwrap();
    for (args, cause) in [
        (&["run", "folder.xml"][..], "Is a directory"),
        (&["run", "sdh", "--input", "uniform:10", "--out", "blocker/h.csv"], "Not a directory"),
        (&["run", "sdh", "--input", "uniform:10", "--plot", "blocker/h.png"], "Not a directory"),
        (&["xi", "--data", "uniform:10", "--randoms", "uniform:10", "--out", "blocker/x.csv"], "Not a directory"),
    ] {
        let o = run(args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {e}");
        assert_eq!(e.matches(cause).count(), 1, "{args:?}: the cause twice: {e}");
    }
    // Where a message quotes its cause and the cause is also its source.
    #[derive(Debug, thiserror::Error)]
    #[error("cannot read x.csv: {source}")]
    struct Quoting {
        source: std::io::Error,
    }
    let e = anyhow::Error::from(Quoting { source: std::io::Error::other("disk on fire") }).context("set A");
    assert_eq!(twobs::cli::error_line(&e), "set A: cannot read x.csv: disk on fire");
}
