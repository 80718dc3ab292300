//! CPU/GPU parity over every plan variant: the GPU backend, forced to each
//! variant that applies, against the CPU backend on the same fresh random data
//! (seed printed; TWOBS_TEST_SEED repeats it). Counts, histograms, pair sets
//! and KNN lists must be identical, sums agree to 1e-6.
//!
//! Beyond the variants: streamed blocks, one and two points, the direct output
//! buffer overflowing into relaunches, one and four streams, and two GPUs.
//!
//! Without a GPU every case is reported as ignored, with the reason; none
//! passes without running. On a GPU machine without a Rust toolchain, build
//! here with `cargo test --release --test parity --no-run` and run the binary
//! there (scripts/gpu-suite.sh).

use std::path::Path;
use std::sync::Arc;

use indicatif::ProgressBar;
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use twobs::backend::cpu::CpuDriver;
use twobs::backend::cuda;
use twobs::backend::cuda::nvrtc;
use twobs::cache::Cache;
use twobs::data::{Generator, Inputs, synthesize};
use twobs::index::{IndexChoice, IndexKind};
use twobs::plan::{self, Forced, Shape};
use twobs::problems::{BUILT_IN, built_in};
use twobs::schedule::{GpuOptions, Hybrid};
use twobs::spec::{Disk, Problem, Sets};
use twobs::stage::contribution::EstimateError;

/// Points of a one-set case, and of the two sets of a two-set case: odd, and
/// not a multiple of any block size.
const N: u64 = 3001;
const NA: u64 = 2999;
const NB: u64 = 1777;

/// A problem with its parameters, under a name.
struct Subject {
    name: String,
    problem: Problem,
    params: Vec<String>,
}

fn subjects() -> Vec<Subject> {
    let mut out: Vec<Subject> = BUILT_IN
        .iter()
        .map(|n| {
            let params: &[&str] = match *n {
                "sdh" => &["bins=97"],
                "rdf" => &["bins=53"],
                "2pcf" => &["r=0.2"],
                "selfjoin" => &["eps=0.05"],
                "nlj" => &["d=2"],
                _ => &[],
            };
            Subject {
                name: n.to_string(),
                problem: built_in(n).unwrap(),
                params: params.iter().map(|s| s.to_string()).collect(),
            }
        })
        .collect();
    out.push(Subject {
        name: "rdf-open-box".into(),
        problem: built_in("rdf").unwrap(),
        params: vec!["box=0".into(), "r_max=1.0".into(), "bins=53".into()],
    });
    out.push(Subject {
        name: "sdh-log".into(),
        problem: built_in("sdh").unwrap().with_spacing(twobs::spec::Spacing::Log).unwrap(),
        params: vec!["r_min=0.01".into(), "bins=37".into()],
    });
    out.push(Subject {
        name: "sdh-two-sets".into(),
        problem: built_in("sdh").unwrap().with_sets(2).unwrap(),
        params: vec!["bins=97".into()],
    });
    out.push(Subject {
        name: "rdf-two-sets".into(),
        problem: built_in("rdf").unwrap().with_sets(2).unwrap(),
        params: vec!["bins=53".into()],
    });
    // A count whose edge (about 1e-40) is subnormal.
    out.push(Subject {
        name: "2pcf-subnormal-edge".into(),
        problem: built_in("2pcf").unwrap(),
        params: vec!["r=1e-20".into()],
    });
    // KNN of A's points among B's, and in 2-D: a search of rings of cells.
    out.push(Subject {
        name: "knn-two-sets".into(),
        problem: built_in("knn").unwrap().with_sets(2).unwrap(),
        params: vec!["k=7".into()],
    });
    out.push(Subject {
        name: "knn-2d".into(),
        problem: built_in("knn").unwrap().with_dims(2).unwrap(),
        params: vec!["k=16".into()],
    });
    out.push(Subject {
        name: "rdf-triclinic".into(),
        problem: built_in("rdf").unwrap(),
        params: vec!["box=1,1.5,2,0.25,0.125,-0.25".into(), "r_max=0.45".into(), "bins=53".into()],
    });
    // 2-D histograms: two sets in a periodic box, a log-spaced first axis
    // (its edges in shared memory), weights per point.
    out.push(Subject {
        name: "ddrppi-two-sets-box".into(),
        problem: built_in("ddrppi").unwrap().with_sets(2).unwrap(),
        params: vec!["box=1".into(), "rp_max=0.2".into(), "pi_max=0.3".into(), "pi_bins=7".into()],
    });
    out.push(Subject {
        name: "ddsmu-log-two-sets".into(),
        problem: built_in("ddsmu").unwrap().with_sets(2).unwrap().with_spacing(twobs::spec::Spacing::Log).unwrap(),
        params: vec!["s_min=0.005".into(), "s_max=0.3".into(), "s_bins=23".into(), "mu_bins=9".into()],
    });
    out.push(Subject {
        name: "ddrppi-point-weights".into(),
        problem: built_in("ddrppi").unwrap().with_point_weights().unwrap(),
        params: vec!["rp_bins=31".into(), "pi_bins=17".into()],
    });
    // A weight per point (--weights): histograms and sums, 3-D and 5-D.
    for (name, dims, params) in [("sdh", 3, "bins=97"), ("kde", 3, "h=0.05"), ("sdh", 5, "bins=41")] {
        out.push(Subject {
            name: format!("{name}-{dims}d-point-weights"),
            problem: built_in(name).unwrap().with_dims(dims).unwrap().with_point_weights().unwrap(),
            params: vec![params.into()],
        });
    }
    // The built-ins that take their dimension from the input, in others than their own.
    for (name, dims, params) in
        [("sdh", 1, "bins=61"), ("2pcf", 6, "r=0.5"), ("selfjoin", 5, "eps=0.3"), ("knn", 8, "k=5")]
    {
        out.push(Subject {
            name: format!("{name}-{dims}d"),
            problem: built_in(name).unwrap().with_dims(dims).unwrap(),
            params: vec![params.into()],
        });
    }
    for (name, example) in [
        ("manhattan", "manhattan/manhattan.xml"),
        ("weighted", "weighted/weighted.xml"),
        ("periodic_rdf", "periodic_rdf/periodic_rdf.xml"),
    ] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples").join(example);
        let text = std::fs::read_to_string(&path).unwrap();
        out.push(Subject { name: name.into(), problem: Problem::parse(&text, &path, &Disk).unwrap(), params: vec![] });
    }
    out.push(Subject { name: "count-where-nan-fails".into(), problem: count_where_nan_fails(), params: vec![] });
    // Pairs of one molecule left out (<exclude same="molecule"/>): a
    // histogram of one and two sets, a count and pairs.
    for (name, base, sets, params) in [
        ("rdf-exclude-molecule", "rdf", 1, "bins=53"),
        ("rdf-two-sets-exclude-molecule", "rdf", 2, "bins=53"),
        ("2pcf-exclude-molecule", "2pcf", 1, "r=0.2"),
        ("selfjoin-exclude-molecule", "selfjoin", 1, "eps=0.05"),
    ] {
        out.push(Subject {
            name: name.into(),
            problem: built_in(base).unwrap().with_sets(sets).unwrap().with_exclusion("molecule").unwrap(),
            params: vec![params.into()],
        });
    }
    out
}

/// Molecules for an input whose problem excludes pairs of one: set A's point
/// i in molecule i / 3, set B's in i / 2, so that both sets share molecules
/// (synthetic ids, uniform over [0, n), would rarely share one).
fn with_molecules(problem: &Problem, mut inputs: Inputs) -> Inputs {
    let Some(id) = &problem.exclude else { return inputs };
    let k = problem.input.components().iter().position(|c| &c.name == id).unwrap();
    for (set, per) in inputs.sets_mut().zip([3, 2]) {
        set.columns[k] = twobs::data::Column::I32((0..set.len() as i32).map(|i| i / per).collect());
    }
    inputs
}

/// A user's count on keys whose map keeps a NaN key NaN, so that it fails:
/// the kernel counts passes (the built-ins' NaN keys pass, and theirs count
/// failures). Pairs closer than 0.2, tested on the squared distance itself.
fn count_where_nan_fails() -> Problem {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("f.cu"),
        "__device__ float sq(float3 a, float3 b) {\n\
           const float x = a.x - b.x, y = a.y - b.y, z = a.z - b.z;\n\
           return fmaf(z, z, fmaf(y, y, x * x));\n\
         }\n\
         __device__ float same(float k) { return k; }\n\
         __device__ float f(float3 a, float3 b) { return same(sq(a, b)); }\n",
    )
    .unwrap();
    let spec = dir.path().join("t.xml");
    let text = r#"<problem name="close"><summary>pairs closer than 0.2</summary><input sets="1" type="f32" dims="3"/>
<function file="f.cu" name="f" symmetric="true" key="sq" map="same"/>
<output kind="count" threshold="0.04" compare="lt"/></problem>"#;
    Problem::parse(text, &spec, &Disk).unwrap()
}

/// The tests' own cache: $TWOBS_CACHE where the binary runs away from its build, else under target/.
fn cache() -> Cache {
    match std::env::var_os("TWOBS_CACHE") {
        Some(dir) => Cache::at(dir),
        None => Cache::at(concat!(env!("CARGO_TARGET_TMPDIR"), "/twobs-cache")),
    }
}

fn seed() -> u64 {
    std::env::var("TWOBS_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    })
}

/// Fresh inputs for `problem`: clustered set A (dense pairs), uniform set B.
fn inputs(problem: &Problem, a: u64, b: u64, seed: u64) -> Inputs {
    let components = problem.input.components();
    let set = |g, n, s| synthesize(g, n, &components, s).unwrap().validate(&components, false).unwrap();
    with_molecules(
        problem,
        Inputs {
            a: set(Generator::Clustered, a, seed),
            b: (problem.input.sets == Sets::Two).then(|| set(Generator::Uniform, b, seed + 1)),
        },
    )
}

/// One case: the GPU with `opts` against the CPU's brute force, on inputs of
/// `a` (and `b`) points; with `IndexChoice::Grid` the GPU must walk a grid.
fn case(
    subject: &Subject,
    opts: GpuOptions,
    index: IndexChoice,
    a: u64,
    b: u64,
    seed: u64,
    gpu: &Result<(), String>,
) -> Result<Completion, Failed> {
    if let Err(why) = gpu {
        return Ok(Completion::ignored_with(format!("no GPU here: {why}")));
    }
    let problem = &subject.problem;
    let params = problem.bind(&subject.params).map_err(|e| e.to_string())?;
    let inputs = inputs(problem, a, b, seed);
    let cache = cache();
    let hidden = ProgressBar::hidden();
    let run = cuda::run(problem, &params, &inputs, index, &opts, &cache, &hidden).map_err(|e| format!("GPU: {e}"))?;
    if index == IndexChoice::Grid && run.index.index == IndexKind::None {
        return Err(format!("the GPU did not walk a grid: {}", run.index.why).into());
    }
    // Where the CPU is made to take part, it takes units (its first claim is
    // made before any stream starts), and the CPU's and the GPUs' pairs
    // together are the grid's, each unit once.
    if opts.hybrid == Hybrid::On && run.index.index != IndexKind::None {
        let split = &run.timings.hybrid;
        if !split.cpu || split.cpu_units == 0 {
            return Err(format!("--hybrid on, yet the CPU took no units: {}", split.why).into());
        }
        let gpus: u128 = run.timings.per_gpu.iter().map(|g| g.pairs).sum();
        if gpus + split.cpu_pairs != run.index.pairs {
            let cpu = split.cpu_pairs;
            return Err(
                format!("the GPUs' {gpus} and the CPU's {cpu} pairs are not the grid's {}", run.index.pairs).into()
            );
        }
    }
    let shape = Shape::new(problem, &params, plan::points_of(problem.input.sets, a, b));
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let cpu = CpuDriver::compile(problem, &params, &shape, IndexKind::None, false, &cache)
        .map_err(|e| format!("CPU: {e}"))?;
    let reference = cpu.run(&inputs, None, threads, &hidden).map_err(|e| format!("CPU: {e}"))?;
    if let Some(d) = run.results.outcome().difference(&reference) {
        return Err(format!("seed {seed}, plan {}: the GPU differs from the CPU: {d}", run.plans[0].variant).into());
    }
    gpus_took_their_share(&run, &opts)
}

/// Of several GPUs, the run used those its schedule named (a KNN search of
/// rings, or a grid too small to share without forced pieces, the first
/// alone, with a note saying why), and with the CPU's they took the grid's
/// pairs, each once.
fn gpus_took_their_share(run: &cuda::GpuRun, opts: &GpuOptions) -> Result<Completion, Failed> {
    let asked = opts.gpus.as_ref().map_or(1, Vec::len);
    let schedule = run.schedule.as_ref().ok_or("the run has no schedule")?;
    if run.devices.len() != schedule.gpus {
        let why = &schedule.why_gpus;
        return Err(format!("{} GPUs ran; the schedule named {}: {why}", run.devices.len(), schedule.gpus).into());
    }
    let rings = run.index.index == IndexKind::Rings;
    let forced = opts.piece_pairs.is_some() || opts.hybrid == Hybrid::On;
    if asked > 1 && (rings || forced) && schedule.gpus != if rings { 1 } else { asked } {
        return Err(format!("{} of {asked} GPUs ran: {}", schedule.gpus, schedule.why_gpus).into());
    }
    if schedule.gpus < asked && !run.notes.iter().any(|n| n == &schedule.why_gpus) {
        return Err(format!("{} of {asked} GPUs ran, and no note says why: {:?}", schedule.gpus, run.notes).into());
    }
    let per_gpu: Vec<u128> = run.timings.per_gpu.iter().map(|g| g.pairs).collect();
    let cpu = run.timings.hybrid.cpu_pairs;
    if run.index.index == IndexKind::Grid && per_gpu.iter().sum::<u128>() + cpu != run.index.pairs {
        return Err(format!("the GPUs took {per_gpu:?} pairs (the CPU {cpu}), the grid {}", run.index.pairs).into());
    }
    Ok(Completion::Completed)
}

/// A variant's name: its forced choices, "planned" for the rest.
fn label(f: &Forced) -> String {
    match (f.input_cache, f.output, f.copies, f.points_per_thread, f.test) {
        (None, None, None, None, None) => "planned".to_owned(),
        (i, o, c, r, t) => format!(
            "{}-{}{}{}{}",
            i.map_or("planned".into(), |i| i.to_string()),
            o.map_or("planned".into(), |o| o.to_string()),
            c.map_or(String::new(), |c| c.to_string()),
            r.map_or(String::new(), |r| format!("-r{r}")),
            t.map_or(String::new(), |t| format!("-{t}"))
        ),
    }
}

fn main() {
    let args = Arguments::from_args();
    let seed = seed();
    println!("TWOBS_TEST_SEED={seed}");
    let gpu: Arc<Result<(), String>> = Arc::new(
        cuda::usable().map_err(|e| e.to_string()).and_then(|()| nvrtc::available().map_err(|e| e.to_string())),
    );
    let two_gpus: Arc<Result<(), String>> = Arc::new(match gpu.as_ref() {
        Ok(()) => match cudarc::driver::CudaContext::device_count() {
            Ok(n) if n >= 2 => Ok(()),
            Ok(n) => Err(format!("{n} GPU visible; these cases need two")),
            Err(e) => Err(e.to_string()),
        },
        Err(why) => Err(why.clone()),
    });
    let subjects: Vec<Arc<Subject>> = subjects().into_iter().map(Arc::new).collect();
    let mut trials = Vec::new();
    let mut add = |index: IndexChoice,
                   name: String,
                   subject: &Arc<Subject>,
                   opts: GpuOptions,
                   a: u64,
                   b: u64,
                   gpus: &Arc<Result<(), String>>| {
        let (subject, gpus) = (subject.clone(), gpus.clone());
        let case_seed = seed ^ (trials.len() as u64).wrapping_mul(0x9e3779b97f4a7c15);
        trials.push(Trial::ignorable_test(name, move || case(&subject, opts, index, a, b, case_seed, &gpus)));
    };
    let base = GpuOptions { streams: 2, ..Default::default() };
    for s in &subjects {
        let params = s.problem.bind(&s.params).unwrap();
        let points = plan::points_of(s.problem.input.sets, N, NB);
        let (a, b) = if s.problem.input.sets == Sets::Two { (NA, NB) } else { (N, N) };
        let mut forced = vec![Forced::default()];
        forced.extend(plan::variants(&s.problem, &params, points));
        for &f in &forced {
            let opts = GpuOptions { forced: f, ..base.clone() };
            add(IndexChoice::None, format!("{}/{}", s.name, label(&f)), s, opts, a, b, &gpu);
        }
        // The grid, where the spec declares a cutoff (a triclinic box refuses it).
        if s.problem.cutoff.is_some() && s.name != "rdf-triclinic" {
            // Every variant for the built-ins themselves (each input stage's
            // tile alignment, each output); the planner's for the rest.
            let all_variants =
                ["selfjoin", "2pcf", "rdf", "nlj", "sdh-two-sets", "ddrppi", "ddsmu"].contains(&s.name.as_str());
            for &f in forced.iter().take(if all_variants { forced.len() } else { 1 }) {
                let opts = GpuOptions { forced: f, ..base.clone() };
                add(IndexChoice::Grid, format!("{}/grid-{}", s.name, label(&f)), s, opts, a, b, &gpu);
            }
            for (block, r) in [(32, 8), (1024, 2)] {
                let f = Forced { block_size: Some(block), points_per_thread: Some(r), ..Default::default() };
                let opts = GpuOptions { forced: f, ..base.clone() };
                add(IndexChoice::Grid, format!("{}/grid-block-{block}-r{r}", s.name), s, opts, a, b, &gpu);
            }
            for n in [1, 2] {
                add(IndexChoice::Grid, format!("{}/grid-{n}-points", s.name), s, base.clone(), n, n, &gpu);
            }
            // Enough points that tiles fill and units come in many sizes.
            let (big_a, big_b) = (60_000, 40_000);
            add(IndexChoice::Grid, format!("{}/grid-{big_a}-points", s.name), s, base.clone(), big_a, big_b, &gpu);
            let small = Forced { block_size: Some(32), points_per_thread: Some(8), ..Default::default() };
            let opts = GpuOptions { forced: small, streams: 3, piece_pairs: Some(5000), ..base.clone() };
            add(IndexChoice::Grid, format!("{}/grid-pieces-block-32-r8", s.name), s, opts, a, b, &gpu);
            let opts = GpuOptions { streams: 4, piece_pairs: Some(20000), ..base.clone() };
            add(IndexChoice::Grid, format!("{}/grid-four-streams", s.name), s, opts, big_a, big_b, &gpu);
            // The CPU beside the GPU, from one queue: small and large inputs,
            // one point, small pieces, and beside two GPUs.
            let with_cpu = GpuOptions { hybrid: Hybrid::On, ..base.clone() };
            add(IndexChoice::Grid, format!("{}/grid-with-cpu", s.name), s, with_cpu.clone(), a, b, &gpu);
            let (na, nb) = (big_a, big_b);
            add(IndexChoice::Grid, format!("{}/grid-with-cpu-{na}-points", s.name), s, with_cpu.clone(), na, nb, &gpu);
            add(IndexChoice::Grid, format!("{}/grid-with-cpu-1-point", s.name), s, with_cpu.clone(), 1, 1, &gpu);
            let opts = GpuOptions { piece_pairs: Some(5000), streams: 3, ..with_cpu.clone() };
            add(IndexChoice::Grid, format!("{}/grid-with-cpu-pieces", s.name), s, opts, a, b, &gpu);
            let opts = GpuOptions { gpus: Some(vec![0, 1]), ..with_cpu };
            add(IndexChoice::Grid, format!("{}/grid-with-cpu-two-gpus", s.name), s, opts, big_a, big_b, &two_gpus);
            let opts = GpuOptions { gpus: Some(vec![0, 1]), piece_pairs: Some(20000), ..base.clone() };
            add(IndexChoice::Grid, format!("{}/grid-two-gpus", s.name), s, opts, big_a, big_b, &two_gpus);
            let opts = GpuOptions { gpus: Some(vec![0, 1]), ..base.clone() };
            add(IndexChoice::Grid, format!("{}/grid-two-gpus-planned", s.name), s, opts, big_a, big_b, &two_gpus);
        }
        for (block, rs) in [(32, [1, 8]), (1024, [1, 2])] {
            for r in rs {
                let f = Forced { block_size: Some(block), points_per_thread: Some(r), ..Default::default() };
                add(
                    IndexChoice::None,
                    format!("{}/block-{block}-r{r}", s.name),
                    s,
                    GpuOptions { forced: f, ..base.clone() },
                    a,
                    b,
                    &gpu,
                );
            }
        }
        for n in [1, 2] {
            add(IndexChoice::None, format!("{}/{n}-points", s.name), s, base.clone(), n, n, &gpu);
        }
        let r4 = Forced { points_per_thread: Some(4), ..Default::default() };
        for n in [1, 2] {
            add(
                IndexChoice::None,
                format!("{}/{n}-points-r4", s.name),
                s,
                GpuOptions { forced: r4, ..base.clone() },
                n,
                n,
                &gpu,
            );
        }
        let streamed = GpuOptions { block_points: Some(700), ..base.clone() };
        add(IndexChoice::None, format!("{}/streamed-blocks-of-700", s.name), s, streamed, a, b, &gpu);
        let one = GpuOptions { block_points: Some(1000), streams: 1, ..base.clone() };
        add(IndexChoice::None, format!("{}/streamed-one-stream", s.name), s, one, a, b, &gpu);
        let four = GpuOptions { block_points: Some(512), streams: 4, forced: r4, ..base.clone() };
        add(IndexChoice::None, format!("{}/streamed-four-streams", s.name), s, four, a, b, &gpu);
        let two = GpuOptions { gpus: Some(vec![0, 1]), block_points: Some(800), ..base.clone() };
        add(IndexChoice::None, format!("{}/two-gpus", s.name), s, two, a, b, &two_gpus);
        // Units cut into pieces of a few steps that streams and GPUs share.
        let pieces = GpuOptions { piece_pairs: Some(5000), ..base.clone() };
        add(IndexChoice::None, format!("{}/pieces-of-5000-pairs", s.name), s, pieces.clone(), a, b, &gpu);
        let small = Forced { block_size: Some(32), points_per_thread: Some(8), ..Default::default() };
        let opts = GpuOptions { forced: small, streams: 3, ..pieces.clone() };
        add(IndexChoice::None, format!("{}/pieces-block-32-r8", s.name), s, opts, a, b, &gpu);
        let opts = GpuOptions { block_points: Some(700), ..pieces.clone() };
        add(IndexChoice::None, format!("{}/pieces-streamed", s.name), s, opts, a, b, &gpu);
        let opts = GpuOptions { gpus: Some(vec![0, 1]), ..pieces.clone() };
        add(IndexChoice::None, format!("{}/two-gpus-pieces", s.name), s, opts, a, b, &two_gpus);
    }
    // The direct output buffer overflows: resume points, relaunches, pool growth.
    for s in subjects.iter().filter(|s| matches!(s.name.as_str(), "selfjoin" | "nlj")) {
        let (a, b) = if s.problem.input.sets == Sets::Two { (NA, NB) } else { (N, N) };
        for pool in [1024, 4096, 20000] {
            let opts = GpuOptions { pool_pairs: Some(pool), ..base.clone() };
            add(IndexChoice::None, format!("{}/pool-of-{pool}-pairs", s.name), s, opts, a, b, &gpu);
        }
        let opts = GpuOptions { pool_pairs: Some(20000), block_points: Some(1000), ..base.clone() };
        add(IndexChoice::None, format!("{}/pool-of-20000-streamed", s.name), s, opts, a, b, &gpu);
        let r8 = Forced { points_per_thread: Some(8), ..Default::default() };
        let opts = GpuOptions { pool_pairs: Some(4096), forced: r8, ..base.clone() };
        add(IndexChoice::None, format!("{}/pool-of-4096-r8", s.name), s, opts, a, b, &gpu);
        let opts = GpuOptions { pool_pairs: Some(1024), piece_pairs: Some(20000), ..base.clone() };
        add(IndexChoice::None, format!("{}/pool-of-1024-pieces", s.name), s, opts.clone(), a, b, &gpu);
        add(IndexChoice::Grid, format!("{}/grid-pool-of-1024-pieces", s.name), s, opts, a, b, &gpu);
        for pool in [1024, 4096] {
            let opts = GpuOptions { pool_pairs: Some(pool), ..base.clone() };
            add(IndexChoice::Grid, format!("{}/grid-pool-of-{pool}-pairs", s.name), s, opts, a, b, &gpu);
        }
    }
    // Key edges against values for every one of the 2^32 float keys, on the
    // GPU; and a count's indicators.
    let key_cases: [(&str, &[&str]); 12] = [
        ("sdh", &["bins=1"]),
        ("sdh", &["bins=50"]),
        ("sdh", &["bins=97"]),
        ("sdh", &["bins=500"]),
        ("sdh", &["bins=4000"]),
        ("rdf", &["bins=53", "box=1"]),
        ("rdf", &["bins=500", "box=0", "r_max=1.0"]),
        ("2pcf", &["r=0.1"]),
        ("2pcf", &["r=0.2"]),
        ("2pcf", &["r=1e-20"]),
        ("selfjoin", &["eps=0.05"]),
        ("selfjoin", &["eps=0.2257"]),
    ];
    let key_cases = key_cases
        .iter()
        .map(|(name, params)| {
            let params: Vec<String> = params.iter().map(|s| s.to_string()).collect();
            (format!("{name}-{}", params.join("-")), built_in(name).unwrap(), params)
        })
        // A user's count whose NaN keys fail: its kernel counts passes.
        .chain([("count-where-nan-fails".to_owned(), count_where_nan_fails(), vec![])])
        // Log-spaced buckets from the key edges' table (src/stage/bucket_table.rs).
        .chain(
            [
                &["bins=20", "r_min=0.001", "r_max=0.5"][..],
                &["bins=37", "r_min=0.01"],
                &["bins=300", "r_min=1e-5", "r_max=100"],
                &["bins=64", "r_min=1e-18", "r_max=1e18"],
            ]
            .map(|params| {
                let params: Vec<String> = params.iter().map(|s| s.to_string()).collect();
                let problem = built_in("sdh").unwrap().with_spacing(twobs::spec::Spacing::Log).unwrap();
                (format!("sdh-log-{}", params.join("-")), problem, params)
            }),
        );
    for (name, problem, params) in key_cases {
        let gpu = gpu.clone();
        trials.push(Trial::ignorable_test(format!("keys/{name}"), move || {
            if let Err(why) = gpu.as_ref() {
                return Ok(Completion::ignored_with(format!("no GPU here: {why}")));
            }
            let bound = problem.bind(&params).map_err(|e| e.to_string())?;
            let got = cuda::check_keys(&problem, &bound, &cache(), 0, (0, 1 << 32))
                .map_err(|e| e.to_string())?
                .ok_or("not tested on keys")?;
            if got.mismatches > 0 {
                return Err(format!(
                    "{} of {} keys differ; the first at rank {:?}",
                    got.mismatches, got.checked, got.first_bad
                )
                .into());
            }
            // The bracket's premise on this GPU: its estimate within the error
            // the kernels' brackets are built on, on every positive normal key.
            let gpu = cuda::live_device(0).map_err(|e| e.to_string())?.compute_capability;
            let premise = EstimateError::of(problem.function.key.as_ref().unwrap(), Some(gpu));
            // Log-spaced buckets come from a table of key edges, without an estimate.
            let estimates = matches!(
                problem.output,
                twobs::spec::Output::Histogram { spacing: twobs::spec::Spacing::Linear, .. }
            );
            if got.estimate_error > premise.relative() || estimates != (got.estimate_error > 0.0) {
                return Err(format!(
                    "the estimate is within {:.4} x 2^-24 of the value on sm_{}{}; the bracket assumes an error of 2^-{}",
                    got.estimate_error * (1u64 << 24) as f64,
                    gpu.0,
                    gpu.1,
                    premise.log2()
                )
                .into());
            }
            Ok(Completion::Completed)
        }));
    }
    // Without a GPU every case is ignored: one line says how many and why,
    // instead of a line for each of them.
    if let Err(why) = gpu.as_ref() {
        let count = trials.len();
        let summary = format!("{count} CPU/GPU parity cases, ignored: no GPU here ({why})");
        trials = vec![Trial::test(summary, || Ok(())).with_ignored_flag(true)];
    }
    libtest_mimic::run(&args, trials).exit();
}
