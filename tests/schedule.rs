//! The schedule's decisions on described machines, no GPU needed: the index,
//! the GPUs that take part and how units reach them, the CPU's share, for
//! none, one, two and eight GPUs, hybrid on, off and auto, and input
//! shapes from one point to 10^8 points described (not allocated).

use rand::{RngExt, SeedableRng};
use twobs::data::{Generator, Inputs, synthesize};
use twobs::data::{SetShape, Shapes};
use twobs::device::Device;
use twobs::index::{IndexChoice, IndexKind, Runs};
use twobs::plan::{Points, Shape};
use twobs::problems::built_in;
use twobs::schedule::{
    GpuOptions, Hybrid, Indexing, ROWS_PER_GPU, SEVERAL_GPUS_GRID_PAIRS, Schedule, Sharing, Workers,
};
use twobs::spec::{Params, Problem};

const H200_MEMORY: usize = 143_771_942_912;

fn h200s(count: usize, cores: usize) -> Workers {
    Workers::described(&Device::profile("h200").unwrap(), count, H200_MEMORY, 2, cores)
}

fn seed() -> u64 {
    std::env::var("TWOBS_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| rand::rng().random())
}

/// `n` points of `dims` coordinates drawn by `generator`, described by a
/// sample of at most 2^14 of them: nothing of size n is allocated.
fn described(problem: &Problem, n: usize, generator: Generator, seed: u64) -> SetShape {
    let components = problem.input.components();
    let sample = synthesize(generator, n.min(1 << 14) as u64, &components, seed).unwrap();
    SetShape::described(n, sample)
}

fn problem(name: &str, dims: u32, params: &[&str]) -> (Problem, Params) {
    let p = built_in(name).unwrap();
    let p = if p.input.dims_from_input { p.with_dims(dims).unwrap() } else { p };
    let params = p.bind(&params.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    (p, params)
}

fn schedule(p: &Problem, params: &Params, shapes: &Shapes, workers: &Workers, hybrid: Hybrid) -> Schedule {
    let opts = GpuOptions { streams: workers.streams, hybrid, ..Default::default() };
    Schedule::make(p, params, shapes, IndexChoice::Auto, &opts, workers).unwrap()
}

#[test]
fn the_crashing_histograms_are_scheduled_as_every_pair_with_the_reason() {
    // `twobs run sdh --input uniform:8000000` and the 10M of issue 36 on one
    // and two H200s beside 32 cores, and `sdh --input uniform:1000` on four
    // beside 64 cores: each sampled a grid with no axis and panicked.
    let (p, params) = problem("sdh", 3, &["bins=500"]);
    for (n, gpus, cores) in [(8_000_000, 1, 32), (10_000_000, 2, 32), (1000, 4, 64), (100_000_000, 8, 128)] {
        let shapes = Shapes { a: described(&p, n, Generator::Uniform, seed()), b: None };
        for hybrid in [Hybrid::Auto, Hybrid::On, Hybrid::Off] {
            let s = schedule(&p, &params, &shapes, &h200s(gpus, cores), hybrid);
            let Indexing::Brute(summary) = &s.indexing else { panic!("{n} points: a grid for SDH to r_max = 1.73") };
            assert!(summary.why.contains("fewer than 4 cells"), "{}", summary.why);
            assert_eq!(s.gpus, gpus, "brute force uses every GPU");
            assert!(!s.hybrid.cpu, "{}", s.hybrid.why);
        }
    }
    // The same with two sets (RDF 5M x 5M in an open box to r_max 0.5: a grid of cells 0.5 wide).
    let (p, params) = problem("rdf", 3, &["box=0", "r_max=0.5"]);
    let two = Shapes {
        a: described(&p, 5_000_000, Generator::Uniform, seed()),
        b: Some(described(&p, 5_000_000, Generator::Uniform, seed() + 1)),
    };
    for gpus in [1, 2, 8] {
        let s = schedule(&p, &params, &two, &h200s(gpus, 32), Hybrid::Auto);
        assert!(matches!(s.indexing, Indexing::Brute(_)), "{:?}", s.describe());
        assert_eq!(s.gpus, gpus);
    }
}

#[test]
fn a_big_cutoff_job_is_split_over_every_gpu_by_rows() {
    // The 2-D self-join of 10^8 points at ~32 neighbours a point.
    let (p, params) = problem("selfjoin", 2, &["eps=0.000319"]);
    let shapes = Shapes { a: described(&p, 100_000_000, Generator::Uniform, seed()), b: None };
    for gpus in [2, 8] {
        let s = schedule(&p, &params, &shapes, &h200s(gpus, 64), Hybrid::Auto);
        let Indexing::Device(layout) = &s.indexing else { panic!("{:?}", s.describe()) };
        assert_eq!((s.gpus, s.sharing), (gpus, Sharing::Rows), "{}", s.why_gpus);
        assert!(layout.rows() >= ROWS_PER_GPU * gpus as u64);
        let e = s.estimated_pairs.expect("several GPUs sample the grid");
        // ~16 partners a point in the lower triangle of 9 cells of ~10 points: ~4.5e9.
        assert!(e > SEVERAL_GPUS_GRID_PAIRS && e < 1 << 33, "{e}");
        assert!(!s.hybrid.cpu, "{}", s.hybrid.why);
    }
    // One GPU sorts its own grid; the CPU joins only when forced.
    let one = schedule(&p, &params, &shapes, &h200s(1, 64), Hybrid::Auto);
    assert!(matches!(one.indexing, Indexing::Device(_)) && one.gpus == 1 && !one.hybrid.cpu);
    let on = schedule(&p, &params, &shapes, &h200s(2, 64), Hybrid::On);
    let Indexing::Host { runs, .. } = on.indexing else { panic!("the CPU walks the host's grid") };
    assert!(runs.whole_rows && on.hybrid.cpu && on.sharing == Sharing::Queue && on.gpus == 2);
    let off = schedule(&p, &params, &shapes, &h200s(2, 64), Hybrid::Off);
    assert!(!off.hybrid.cpu && off.sharing == Sharing::Rows);
}

#[test]
fn small_grids_run_on_the_first_gpu_and_say_why() {
    let (p, params) = problem("selfjoin", 2, &["eps=0.001"]);
    let shapes = Shapes { a: described(&p, 200_000, Generator::Uniform, seed()), b: None };
    let s = schedule(&p, &params, &shapes, &h200s(2, 32), Hybrid::Off);
    assert_eq!(s.gpus, 1);
    assert!(s.why_gpus.contains("the first GPU alone") && s.why_gpus.contains("too few"), "{}", s.why_gpus);
    // Forced pieces share a small grid too (the parity suite's two-GPU cases).
    let opts = GpuOptions { gpus: Some(vec![0, 1]), piece_pairs: Some(20_000), streams: 2, ..Default::default() };
    let forced = Schedule::make(&p, &params, &shapes, IndexChoice::Grid, &opts, &h200s(2, 32)).unwrap();
    assert_eq!((forced.gpus, forced.sharing), (2, Sharing::Rows), "{}", forced.why_gpus);
}

#[test]
fn knn_searches_rings_on_the_first_gpu() {
    let (p, params) = problem("knn", 3, &["k=16"]);
    let shapes = Shapes { a: described(&p, 50_000_000, Generator::Uniform, seed()), b: None };
    for gpus in [1, 2, 8] {
        let s = schedule(&p, &params, &shapes, &h200s(gpus, 64), Hybrid::Off);
        let Indexing::Device(layout) = &s.indexing else { panic!("{:?}", s.describe()) };
        assert_eq!(layout.kind, IndexKind::Rings);
        assert_eq!(s.gpus, 1, "{}", s.why_gpus);
        // The CPU beside it walks the host's rings, still beside one GPU.
        let on = schedule(&p, &params, &shapes, &h200s(gpus, 64), Hybrid::On);
        assert!(matches!(on.indexing, Indexing::Host { .. }) && on.hybrid.cpu && on.gpus == 1, "{}", on.why_gpus);
    }
}

#[test]
fn a_one_row_grid_is_shared_from_the_hosts_queue() {
    // A 1-D grid is one row of cells: GPUs that sort their own grids cannot split it.
    let (p, params) = problem("2pcf", 1, &["r=0.000001"]);
    let shapes = Shapes { a: described(&p, 100_000_000, Generator::Uniform, seed()), b: None };
    let s = schedule(&p, &params, &shapes, &h200s(2, 32), Hybrid::Off);
    let Indexing::Host { layout, .. } = &s.indexing else { panic!("{:?}", s.describe()) };
    assert_eq!(layout.rows(), 1);
    assert_eq!((s.gpus, s.sharing), (2, Sharing::Queue), "{}", s.why_gpus);
    assert!(s.why_gpus.contains("too few to split"), "{}", s.why_gpus);
}

#[test]
fn without_a_gpu_the_cpu_takes_every_unit_of_a_host_grid() {
    let (p, params) = problem("2pcf", 3, &["r=0.01"]);
    let shapes = Shapes { a: described(&p, 1_000_000, Generator::Clustered, seed()), b: None };
    let s = schedule(&p, &params, &shapes, &Workers::cpu(2), Hybrid::Auto);
    let Indexing::Host { runs, .. } = s.indexing else { panic!("{:?}", s.describe()) };
    assert_eq!(runs, Runs { points: 256, whole_rows: false, cells: twobs::index::Cells::Finer });
    assert!(s.gpus == 0 && s.hybrid.cpu && s.hybrid.cpu_threads == 2, "{}", s.hybrid.why);
}

#[test]
fn edge_shapes_schedule_without_panicking() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    // One point; every point in one cell; a cutoff above the extent; lattices.
    let (p, params) = problem("2pcf", 3, &["r=0.1"]);
    let components = p.input.components();
    let one = synthesize(Generator::Uniform, 1, &components, rng.random()).unwrap();
    let same = one.subset(&vec![0; 5000], "one point 5000 times".into());
    for set in [one.clone(), same] {
        let shapes = Shapes::of(&Inputs { a: set, b: None });
        for gpus in [0, 1, 2, 8] {
            let workers = if gpus == 0 { Workers::cpu(2) } else { h200s(gpus, 16) };
            for hybrid in [Hybrid::Auto, Hybrid::On, Hybrid::Off] {
                let s = schedule(&p, &params, &shapes, &workers, hybrid);
                assert!(s.gpus <= gpus, "{:?}", s.describe());
            }
        }
    }
    // Random shapes: 1 to 8 dimensions, 1 to 10^8 points, cutoffs from far
    // below the spacing to far above the extent, 0 to 8 GPUs.
    for _ in 0..300 {
        let dims = rng.random_range(1..=8u32);
        let name = ["2pcf", "selfjoin", "sdh", "knn"][rng.random_range(0..4)];
        let cutoff = 10f64.powf(rng.random_range(-7.0..1.5));
        let param = match name {
            "2pcf" => format!("r={cutoff}"),
            "selfjoin" => format!("eps={cutoff}"),
            "sdh" => format!("r_max={cutoff}"),
            _ => format!("k={}", rng.random_range(1..64)),
        };
        let (p, params) = problem(name, dims, &[&param]);
        let n = 10f64.powf(rng.random_range(0.0..8.0)) as usize;
        let generator = [Generator::Uniform, Generator::Clustered, Generator::Exponential][rng.random_range(0..3)];
        let two = p.input.either && rng.random_bool(0.3);
        let p = if two { p.with_sets(2).unwrap() } else { p };
        let shapes = Shapes {
            a: described(&p, n, generator, rng.random()),
            b: two.then(|| described(&p, rng.random_range(1..n.max(2)), Generator::Uniform, rng.random())),
        };
        let gpus = [0, 1, 2, 8][rng.random_range(0..4)];
        let workers = if gpus == 0 { Workers::cpu(2) } else { h200s(gpus, [2, 16, 128][rng.random_range(0..3)]) };
        let hybrid = [Hybrid::Auto, Hybrid::On, Hybrid::Off][rng.random_range(0..3)];
        let what = format!("{name} {param} {dims}-D, {n} {generator:?} points, {gpus} GPUs, {hybrid:?}");
        let s = schedule(&p, &params, &shapes, &workers, hybrid);
        let points = Points { a: n as u64, b: shapes.b.as_ref().map(|b| b.len as u64) };
        let all_pairs = Shape::new(&p, &params, points).pairs;
        assert!(s.gpus <= gpus, "{what}");
        match &s.indexing {
            Indexing::Brute(summary) => assert_eq!(summary.all_pairs, all_pairs, "{what}"),
            Indexing::Host { layout, .. } | Indexing::Device(layout) => {
                assert!(layout.cells >= 1 && layout.axes.len() <= 3, "{what}");
                if let Some(e) = s.estimated_pairs {
                    assert!(e <= all_pairs + all_pairs / 50 + 16, "{what}: estimate {e} of {all_pairs}");
                }
            }
        }
        if s.sharing == Sharing::Rows {
            assert!(matches!(s.indexing, Indexing::Device(_)) && s.gpus == gpus && gpus > 1, "{what}");
        }
        if gpus == 0 {
            assert!(s.hybrid.cpu, "{what}");
        } else if hybrid == Hybrid::Off {
            assert!(!s.hybrid.cpu, "{what}");
        }
        assert!(!s.describe().is_empty());
    }
}

/// MPI ranks on GPUs (issue 34): two sets walked pair by pair cut A into
/// blocks that rank 0 sends with the pieces (`run::gpu_rows_block`), so that
/// another rank holds B and a few blocks of A; one set, a grid, and an A of
/// one block keep both sets whole on every rank.
#[test]
fn ranks_on_gpus_are_sent_a_in_blocks_only_where_pieces_read_one_block_of_a() {
    use twobs::run::{LEAST_ROWS_BLOCK, MOST_ROWS_BLOCK, ROWS_BLOCKS, gpu_rows_block};
    let opts = GpuOptions { streams: 2, ..Default::default() };
    let two_ranks = h200s(1, 16).repeated(2);
    let block = |p: &Problem, params: &Params, shapes: &Shapes| {
        gpu_rows_block(p, params, shapes, (IndexChoice::Auto, &opts), &two_ranks).unwrap()
    };
    // The bench's RDF 5M x 5M (open box, r_max = 0.5) and SDH of two sets: every pair, A in 5 blocks of 2^20.
    let two_sets = |(p, params): (Problem, Params)| (p.with_sets(2).unwrap(), params);
    let (rdf, rdf_params) = two_sets(problem("rdf", 3, &["box=0", "r_max=0.5", "bins=500"]));
    let (a, b) = (described(&rdf, 5_000_000, Generator::Uniform, 1), described(&rdf, 5_000_000, Generator::Uniform, 2));
    let shapes = Shapes { a, b: Some(b) };
    let s = schedule(&rdf, &rdf_params, &shapes, &two_ranks, Hybrid::Off);
    assert!(matches!(s.indexing, Indexing::Brute(_)) && s.gpus == 2, "{:?}", s.describe());
    assert_eq!(block(&rdf, &rdf_params, &shapes), Some(LEAST_ROWS_BLOCK));
    // 10^8 points of A: an eighth of A a block.
    let big = Shapes { a: described(&rdf, 100_000_000, Generator::Uniform, 3), b: shapes.b.clone() };
    assert_eq!(block(&rdf, &rdf_params, &big), Some(100_000_000usize.div_ceil(ROWS_BLOCKS)));
    // 10^9: blocks of 2^24 (a block travels in one message).
    let huge = Shapes { a: described(&rdf, 1_000_000_000, Generator::Uniform, 8), b: shapes.b.clone() };
    assert_eq!(block(&rdf, &rdf_params, &huge), Some(MOST_ROWS_BLOCK));
    // A of one block: nothing to bound.
    let small = Shapes { a: described(&rdf, LEAST_ROWS_BLOCK, Generator::Uniform, 4), b: shapes.b.clone() };
    assert_eq!(block(&rdf, &rdf_params, &small), None);
    // A short cutoff on clustered points: a grid, whose kernels read both sets whole.
    let (near, near_params) = two_sets(problem("rdf", 3, &["box=0", "r_max=0.002", "bins=20"]));
    let clustered = Shapes {
        a: described(&near, 5_000_000, Generator::Clustered, 5),
        b: Some(described(&near, 5_000_000, Generator::Clustered, 6)),
    };
    let s = schedule(&near, &near_params, &clustered, &two_ranks, Hybrid::Off);
    assert!(!matches!(s.indexing, Indexing::Brute(_)), "a grid for a short cutoff: {:?}", s.describe());
    assert_eq!(block(&near, &near_params, &clustered), None);
    // One set: a piece pairs its rows with every later row.
    let (sdh, sdh_params) = problem("sdh", 3, &["bins=500"]);
    let one = Shapes { a: described(&sdh, 10_000_000, Generator::Uniform, 7), b: None };
    assert_eq!(block(&sdh, &sdh_params, &one), None);
}
