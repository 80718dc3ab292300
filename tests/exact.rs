//! The CPU backend against an independent brute-force reference written here
//! in Rust f64, on fresh random inputs every run (the seed is printed).
//!
//! Exactness across rounding: coordinates are multiples of 1/16 in [0, 1), so
//! every coordinate difference, square and sum of squares is exact in f32 and
//! f64 alike, and a distance is sqrt(k)/16 for a whole k, correctly rounded by
//! either. Thresholds are put halfway (in k) between two possible distances and
//! histogram edges are checked to lie at least 1e-5 (relative) away from every
//! possible distance, so that no rounding in f32 can move a pair across them.
//! Counts, histograms and pair sets must then be equal exactly; KNN ids equal
//! exactly (ties go to the smaller index on both sides); sums agree to 1e-5
//! (expf is not correctly rounded, and summation order differs).

mod support;

use std::collections::BTreeSet;

use rand::{RngExt, SeedableRng};
use twobs::backend::cpu::CpuDriver;
use twobs::cache::Cache;
use twobs::data::{Column, Inputs, PointSet};
use twobs::index::IndexKind;
use twobs::outcome::{Outcome, Totals};
use twobs::plan::{Points, Shape};
use twobs::problems::built_in;
use twobs::spec::{Params, Problem};

/// The tests' own cache, never the user's.
fn cache() -> Cache {
    Cache::at(concat!(env!("CARGO_TARGET_TMPDIR"), "/twobs-cache"))
}

fn points(inputs: &Inputs) -> Points {
    Points { a: inputs.a.len() as u64, b: inputs.b.as_ref().map(|b| b.len() as u64) }
}

const GRID: f64 = 16.0;

fn seed() -> u64 {
    let s = std::env::var("TWOBS_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    println!("TWOBS_TEST_SEED={s}");
    s
}

/// `n` points of `d` grid coordinates.
fn grid_points(rng: &mut rand::rngs::StdRng, n: usize, d: usize) -> Vec<Vec<f64>> {
    (0..n).map(|_| (0..d).map(|_| rng.random_range(0..GRID as u32) as f64 / GRID).collect()).collect()
}

fn set(points: &[Vec<f64>]) -> PointSet {
    let d = points.first().map_or(3, Vec::len);
    PointSet {
        columns: (0..d).map(|c| Column::F32(points.iter().map(|p| p[c] as f32).collect())).collect(),
        origin: "test".into(),
        rows: None,
    }
}

fn dist(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum::<f64>().sqrt()
}

/// The minimum-image distance in a periodic box, rounding half to even as rintf does.
fn min_image(a: &[f64], b: &[f64], bx: f64) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| {
            let d = x - y;
            let w = if bx > 0.0 { d - bx * (d / bx).round_ties_even() } else { d };
            w * w
        })
        .sum::<f64>()
        .sqrt()
}

/// Every distance the grid allows in `d` dimensions.
fn grid_distances(d: usize) -> Vec<f64> {
    (0..=(d as u64 * (GRID as u64) * (GRID as u64))).map(|k| (k as f64).sqrt() / GRID).collect()
}

/// A threshold halfway (in k) between grid distances, near `r`.
fn safe_threshold(r: f64) -> f64 {
    let k = (r * GRID).powi(2).round();
    (k + 0.5).sqrt() / GRID
}

/// Smallest relative gap between a bucket edge of (bins, lo, hi) and any possible distance.
fn edge_margin(bins: u32, lo: f64, hi: f64, distances: &[f64]) -> f64 {
    let w = (hi - lo) / bins as f64;
    distances
        .iter()
        .filter(|&&x| x >= lo && x < hi + w)
        .map(|&x| {
            let t = (x - lo) / w;
            let gap = (t - t.round()).abs() * w;
            if x == 0.0 { f64::INFINITY } else { gap / x }
        })
        .fold(f64::INFINITY, f64::min)
}

/// A bucket count near `bins` and an upper edge near `hi` (an f32, as the
/// parameter is) whose edges all keep a 2e-5 margin from the grid distances.
fn safe_bins(near: u32, hi: f32, distances: &[f64]) -> (u32, f32) {
    for step in 0..50 {
        let h = hi * (1.0 + 0.0137 * step as f32);
        if let Some(b) = (near..near + 40).find(|&b| edge_margin(b, 0.0, h as f64, distances) > 2e-5) {
            return (b, h);
        }
    }
    panic!("no buckets near {near} over [0, ~{hi}) keep their edges off the grid distances")
}

fn reference_histogram(values: impl Iterator<Item = f64>, bins: u32, lo: f64, hi: f64) -> Vec<u64> {
    let mut h = vec![0u64; bins as usize];
    for v in values {
        if v >= lo && v < hi {
            h[(((v - lo) / (hi - lo)) * bins as f64).floor() as usize] += 1;
        }
    }
    h
}

fn run_cpu(name: &str, params: &[String], inputs: &Inputs) -> Outcome {
    let p = built_in(name).unwrap().with_sets(1 + inputs.b.is_some() as usize).unwrap();
    let params = p.bind(params).unwrap();
    run_problem(&p, &params, inputs)
}

/// `p` on the CPU backend, every pair visited, in the spec's arithmetic.
fn run_problem(p: &Problem, params: &Params, inputs: &Inputs) -> Outcome {
    let shape = Shape::new(p, params, points(inputs));
    let driver = CpuDriver::compile(p, params, &shape, IndexKind::None, false, &cache()).unwrap();
    driver.run(inputs, None, 2, &indicatif::ProgressBar::hidden()).unwrap()
}

/// Self-problem sizes: one point, two points, odd sizes.
const SIZES: [usize; 5] = [1, 2, 37, 257, 1001];

#[test]
fn sdh_histogram_is_exact() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let (bins, r_max) = safe_bins(500, 1.8, &grid_distances(3));
    for n in SIZES {
        let pts = grid_points(&mut rng, n, 3);
        let inputs = Inputs { a: set(&pts), b: None };
        let got = run_cpu("sdh", &[format!("bins={bins}"), format!("r_max={r_max}")], &inputs);
        let want = reference_histogram(
            (0..n).flat_map(|i| ((i + 1)..n).map(move |j| (i, j))).map(|(i, j)| dist(&pts[i], &pts[j])),
            bins,
            0.0,
            r_max as f64,
        );
        assert_eq!(got, Outcome::Totals(Totals::Counts(want)), "n = {n}, bins = {bins}");
    }
}

#[test]
fn rdf_histogram_is_exact_periodic_and_open() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let distances = grid_distances(3);
    for (bx, near) in [(1.0f32, 0.47f32), (0.0, 1.8)] {
        let (bins, r_max) = safe_bins(50, near, &distances);
        for (n_a, n_b) in [(1, 1), (2, 3), (37, 64), (300, 257)] {
            let (pa, pb) = (grid_points(&mut rng, n_a, 3), grid_points(&mut rng, n_b, 3));
            let inputs = Inputs { a: set(&pa), b: Some(set(&pb)) };
            let params = [format!("bins={bins}"), format!("box={bx}"), format!("r_max={r_max}")];
            let got = run_cpu("rdf", &params, &inputs);
            let want = reference_histogram(
                pa.iter().flat_map(|a| pb.iter().map(move |b| min_image(a, b, bx as f64))),
                bins,
                0.0,
                r_max as f64,
            );
            assert_eq!(got, Outcome::Totals(Totals::Counts(want)), "box {bx}, {n_a} x {n_b}");
        }
    }
}

#[test]
fn two_point_correlation_count_is_exact() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    for n in SIZES {
        let pts = grid_points(&mut rng, n, 3);
        let r = safe_threshold(rng.random_range(0.05..0.4));
        let got = run_cpu("2pcf", &[format!("r={r}")], &Inputs { a: set(&pts), b: None });
        let want =
            (0..n).flat_map(|i| ((i + 1)..n).map(move |j| (i, j))).filter(|&(i, j)| dist(&pts[i], &pts[j]) < r).count();
        assert_eq!(got, Outcome::Totals(Totals::Counts(vec![want as u64])), "n = {n}, r = {r}");
    }
}

#[test]
fn kernel_density_sum_agrees() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    for n in SIZES {
        let pts = grid_points(&mut rng, n, 3);
        let h = 0.05f32;
        let Outcome::Totals(Totals::Sums(got)) = run_cpu("kde", &[format!("h={h}")], &Inputs { a: set(&pts), b: None })
        else {
            panic!()
        };
        let got = got[0];
        let h = h as f64;
        let want: f64 = (0..n)
            .flat_map(|i| ((i + 1)..n).map(move |j| (i, j)))
            .map(|(i, j)| (-dist(&pts[i], &pts[j]).powi(2) / (2.0 * h * h)).exp())
            .sum();
        assert!((got - want).abs() <= 1e-5 * want.abs().max(1e-30), "n = {n}: {got} vs {want}");
    }
}

#[test]
fn selfjoin_pairs_are_the_same_set() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    for n in SIZES {
        let pts = grid_points(&mut rng, n, 2);
        let eps = safe_threshold(rng.random_range(0.05..0.3));
        let Outcome::Pairs(got) = run_cpu("selfjoin", &[format!("eps={eps}")], &Inputs { a: set(&pts), b: None })
        else {
            panic!()
        };
        let got: BTreeSet<[u32; 2]> = got.into_iter().collect();
        let want: BTreeSet<[u32; 2]> = (0..n)
            .flat_map(|i| ((i + 1)..n).map(move |j| (i, j)))
            .filter(|&(i, j)| dist(&pts[i], &pts[j]) <= eps)
            .map(|(i, j)| [i as u32, j as u32])
            .collect();
        assert_eq!(got, want, "n = {n}, eps = {eps}");
    }
}

#[test]
fn knn_finds_the_same_neighbours() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    for n in SIZES {
        let pts = grid_points(&mut rng, n, 3);
        let k = rng.random_range(1..12usize);
        let Outcome::Knn { k: got_k, ids, values } =
            run_cpu("knn", &[format!("k={k}")], &Inputs { a: set(&pts), b: None })
        else {
            panic!()
        };
        assert_eq!(got_k, k);
        for i in 0..n {
            let mut cands: Vec<(f64, u32)> =
                (0..n).filter(|&j| j != i).map(|j| (dist(&pts[i], &pts[j]), j as u32)).collect();
            cands.sort_by(|a, b| a.partial_cmp(b).unwrap());
            cands.resize(k, (f64::INFINITY, u32::MAX));
            for (slot, (d, j)) in cands.iter().enumerate() {
                assert_eq!(ids[i * k + slot], *j, "n = {n}, query {i}, rank {slot}");
                let v = values.get_f64(i * k + slot);
                assert!(v == *d || ((v - d) / d).abs() < 1e-6, "n = {n}, query {i}: {v} vs {d}");
            }
        }
    }
}

#[test]
fn band_join_pairs_are_the_same_set() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    for (n_a, n_b) in [(1, 1), (2, 5), (101, 37), (1000, 999)] {
        let keys = |rng: &mut rand::rngs::StdRng, n: usize| -> Vec<i32> {
            (0..n).map(|_| rng.random_range(-40..40)).collect()
        };
        let (ka, kb) = (keys(&mut rng, n_a), keys(&mut rng, n_b));
        let d = rng.random_range(0..4);
        let mk = |k: &[i32]| PointSet { columns: vec![Column::I32(k.to_vec())], origin: "test".into(), rows: None };
        let Outcome::Pairs(got) = run_cpu("nlj", &[format!("d={d}")], &Inputs { a: mk(&ka), b: Some(mk(&kb)) }) else {
            panic!()
        };
        let got: BTreeSet<[u32; 2]> = got.into_iter().collect();
        let want: BTreeSet<[u32; 2]> = (0..n_a)
            .flat_map(|i| (0..n_b).map(move |j| (i, j)))
            .filter(|&(i, j)| (ka[i] as i64 - kb[j] as i64).abs() <= d)
            .map(|(i, j)| [i as u32, j as u32])
            .collect();
        assert_eq!(got, want, "{n_a} x {n_b}, d = {d}");
    }
}

#[test]
fn f64_mode_agrees_with_the_reference_too() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let pts = grid_points(&mut rng, 300, 3);
    let p = built_in("2pcf").unwrap();
    let r = safe_threshold(0.2);
    let params = p.bind(&[format!("r={r}")]).unwrap();
    let inputs = Inputs { a: set(&pts), b: None };
    let driver =
        CpuDriver::compile(&p, &params, &Shape::new(&p, &params, points(&inputs)), IndexKind::None, true, &cache())
            .unwrap();
    let got = driver.run(&inputs, None, 2, &indicatif::ProgressBar::hidden()).unwrap();
    let r = r as f32 as f64; // the parameter keeps its f32 value in f64 mode
    let want =
        (0..300).flat_map(|i| ((i + 1)..300).map(move |j| (i, j))).filter(|&(i, j)| dist(&pts[i], &pts[j]) < r).count();
    assert_eq!(got, Outcome::Totals(Totals::Counts(vec![want as u64])));
}

/// The spec of `examples/<rel>`, read from disk as a user's is.
fn example(rel: &str) -> Problem {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples").join(rel);
    Problem::parse(&std::fs::read_to_string(&path).unwrap(), &path, &twobs::spec::Disk).unwrap()
}

#[test]
fn weighted_histogram_sums_are_exact() {
    // examples/weighted: points (x, y, z, w), each pair adds w_a * w_b to the
    // bucket of its distance. Weights are multiples of 1/16 in (0, 1], so every
    // product is exact in f32 and every sum exact in f64, in any order.
    let p = example("weighted/weighted.xml");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let (bins, r_max) = safe_bins(40, 1.8, &grid_distances(3));
    for n in SIZES {
        let mut pts = grid_points(&mut rng, n, 3);
        for q in &mut pts {
            q.push(rng.random_range(1..=16u32) as f64 / 16.0);
        }
        let inputs = Inputs { a: set(&pts), b: None };
        let params = p.bind(&[format!("bins={bins}"), format!("r_max={r_max}")]).unwrap();
        let shape = Shape::new(&p, &params, points(&inputs));
        let got = CpuDriver::compile(&p, &params, &shape, IndexKind::None, false, &cache())
            .unwrap()
            .run(&inputs, None, 2, &indicatif::ProgressBar::hidden())
            .unwrap();
        let mut want = vec![0f64; bins as usize];
        for i in 0..n {
            for j in i + 1..n {
                let d = dist(&pts[i][..3], &pts[j][..3]);
                if d < r_max as f64 {
                    want[(d / r_max as f64 * bins as f64).floor() as usize] += pts[i][3] * pts[j][3];
                }
            }
        }
        assert_eq!(got, Outcome::Totals(Totals::Sums(want)), "n = {n}, bins = {bins}");
    }
}

#[test]
fn periodic_rdf_example_is_exact() {
    // examples/periodic_rdf: the minimum image written by a user (rintf, a
    // plain sqrtf), no key map declared: its histogram is the exact one.
    let p = example("periodic_rdf/periodic_rdf.xml");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let (bins, r_max) = safe_bins(50, 0.47, &grid_distances(3));
    for n in SIZES {
        let pts = grid_points(&mut rng, n, 3);
        let inputs = Inputs { a: set(&pts), b: None };
        let params = p.bind(&[format!("bins={bins}"), format!("r_max={r_max}"), "L=1".into()]).unwrap();
        let got = run_problem(&p, &params, &inputs);
        let want = reference_histogram(
            (0..n).flat_map(|i| ((i + 1)..n).map(move |j| (i, j))).map(|(i, j)| min_image(&pts[i], &pts[j], 1.0)),
            bins,
            0.0,
            r_max as f64,
        );
        assert_eq!(got, Outcome::Totals(Totals::Counts(want)), "n = {n}, bins = {bins}");
    }
}

/// The 27 images a pair of points inside a box can be apart by: the minimum
/// image of a pair closer than half the box's smallest width is one of them.
fn min_image_triclinic(a: &[f64], b: &[f64], edges: &[[f64; 3]; 3]) -> f64 {
    let mut best = f64::INFINITY;
    for n in (0..27).map(|k| [k % 3, k / 3 % 3, k / 9].map(|x| x as f64 - 1.0)) {
        let d: Vec<f64> = (0..3).map(|c| a[c] - b[c] + (0..3).map(|e| n[e] * edges[e][c]).sum::<f64>()).collect();
        best = best.min(d.iter().map(|x| x * x).sum::<f64>().sqrt());
    }
    best
}

/// Points on a grid of fractional coordinates (multiples of 1/16) of a box:
/// with the lengths and tilts below, every coordinate, difference and square
/// is exact in f32.
fn box_points(rng: &mut rand::rngs::StdRng, n: usize, edges: &[[f64; 3]; 3]) -> Vec<Vec<f64>> {
    grid_points(rng, n, 3)
        .into_iter()
        .map(|s| (0..3).map(|c| (0..3).map(|e| s[e] * edges[e][c]).sum()).collect())
        .collect()
}

/// Buckets over [0, hi) whose edges keep a 2e-5 margin from every distance in `values`.
fn bins_clear_of(values: &[f64], near: u32, hi: f32) -> (u32, f32) {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.dedup();
    safe_bins(near, hi, &sorted)
}

#[test]
fn rdf_in_cubic_orthorhombic_and_triclinic_boxes_is_exact() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    // (box parameter, edge vectors): tilt products are exact in f32.
    let boxes: [(&str, [[f64; 3]; 3]); 3] = [
        ("1", [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]),
        ("2,1,1.5", [[2.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.5]]),
        ("1,1.5,2,0.25,0.125,-0.25", [[1.0, 0.0, 0.0], [0.375, 1.5, 0.0], [0.25, -0.5, 2.0]]),
    ];
    for (bx, edges) in boxes {
        let parsed = twobs::spec::PeriodicBox::parse(twobs::spec::Scalar::F32, bx).unwrap();
        assert_eq!(parsed.edges(), edges, "the test's edge vectors are the box's");
        let half_width = parsed.widths().into_iter().fold(f64::INFINITY, f64::min) / 2.0;
        for (n_a, n_b) in [(1, 0), (2, 0), (257, 0), (37, 64), (300, 257)] {
            let pa = box_points(&mut rng, n_a, &edges);
            let pb = box_points(&mut rng, n_b, &edges);
            let pairs: Vec<f64> = if n_b == 0 {
                (0..n_a)
                    .flat_map(|i| (i + 1..n_a).map(move |j| (i, j)))
                    .map(|(i, j)| min_image_triclinic(&pa[i], &pa[j], &edges))
                    .collect()
            } else {
                pa.iter().flat_map(|a| pb.iter().map(|b| min_image_triclinic(a, b, &edges))).collect()
            };
            let (bins, r_max) = bins_clear_of(&pairs, 40, (half_width * 0.97) as f32);
            assert!((r_max as f64) <= half_width, "r_max {r_max} within half the width {half_width}");
            let inputs = Inputs { a: set(&pa), b: (n_b > 0).then(|| set(&pb)) };
            let params = [format!("bins={bins}"), format!("box={bx}"), format!("r_max={r_max}")];
            let got = run_cpu("rdf", &params, &inputs);
            let want = reference_histogram(pairs.iter().copied(), bins, 0.0, r_max as f64);
            assert_eq!(got, Outcome::Totals(Totals::Counts(want)), "box {bx}, {n_a} x {n_b}");
        }
    }
}

#[test]
fn one_set_rdf_is_half_of_a_set_against_itself_without_the_self_pairs() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    for n in [1, 2, 37, 1001] {
        // Random floats, not a grid: the identity holds bit for bit, as the
        // function is symmetric to the bit.
        let pts: Vec<Vec<f64>> = (0..n).map(|_| (0..3).map(|_| rng.random::<f32>() as f64).collect()).collect();
        let params = ["bins=64".to_owned(), "r_max=0.5".to_owned()];
        let Outcome::Totals(Totals::Counts(one)) = run_cpu("rdf", &params, &Inputs { a: set(&pts), b: None }) else {
            panic!("counts")
        };
        let Outcome::Totals(Totals::Counts(two)) =
            run_cpu("rdf", &params, &Inputs { a: set(&pts), b: Some(set(&pts)) })
        else {
            panic!("counts")
        };
        let mut want: Vec<u64> = one.iter().map(|c| 2 * c).collect();
        want[0] += n as u64;
        assert_eq!(two, want, "n = {n}");
    }
}

#[test]
fn points_outside_the_box_are_wrapped_or_refused() {
    use twobs::data::Outside;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let b = twobs::spec::PeriodicBox::parse(twobs::spec::Scalar::F32, "2,1,0.5").unwrap();
    let inside = box_points(&mut rng, 500, &b.edges());
    // Whole box vectors added: the minimum images are those of the points inside.
    let outside: Vec<Vec<f64>> = inside
        .iter()
        .map(|p| {
            let n = [0, 1, 2].map(|_| rng.random_range(-3i32..4) as f64);
            (0..3).map(|c| p[c] + (0..3).map(|e| n[e] * b.edges()[e][c]).sum::<f64>()).collect()
        })
        .collect();
    let mut wrapped = set(&outside);
    let refused = wrapped.clone().into_box(("box", &b), Some(Outside::Refuse)).unwrap_err().to_string();
    assert!(refused.contains("outside the box box=2,1,0.5") && refused.contains("row "), "{refused}");
    let moved = wrapped.into_box(("box", &b), Some(Outside::Wrap)).unwrap();
    assert!(wrapped == set(&inside), "{moved} points moved, not all to where they were");
    assert_eq!(set(&inside).clone().into_box(("box", &b), Some(Outside::Refuse)).unwrap(), 0);
}

#[test]
fn log_spaced_histograms_are_exact_against_their_edge_table() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let sdh = built_in("sdh").unwrap();
    for (bins, r_min, r_max) in [(1u32, 0.05f32, 1.7f32), (7, 0.01, 1.0), (40, 0.003, 1.75), (200, 0.1, 1.2)] {
        let log = sdh.with_spacing(twobs::spec::Spacing::Log).unwrap();
        let params = log.bind(&[format!("bins={bins}"), format!("r_min={r_min}"), format!("r_max={r_max}")]).unwrap();
        // The edges are the documented table: min (max / min)^(k / bins) in
        // f64, rounded once to f32, the ends exact.
        let edges = twobs::stage::contribution::histogram_edges(&log, &params);
        assert_eq!(edges.len(), bins as usize + 1);
        assert_eq!((edges[0], edges[bins as usize]), (r_min as f64, r_max as f64));
        for (k, e) in edges.iter().enumerate() {
            let ideal = r_min as f64 * ((r_max as f64 / r_min as f64).ln() * k as f64 / bins as f64).exp();
            assert_eq!(*e, ideal as f32 as f64, "edge {k}");
        }
        for n in [2, 301, 1001] {
            let pts = grid_points(&mut rng, n, 3);
            let inputs = Inputs { a: set(&pts), b: None };
            let shape = Shape::new(&log, &params, points(&inputs));
            let driver = CpuDriver::compile(&log, &params, &shape, IndexKind::None, false, &cache()).unwrap();
            let got = driver.run(&inputs, None, 2, &indicatif::ProgressBar::hidden()).unwrap();
            // Grid distances are correctly rounded f32s; a pair's bucket is the
            // number of edges at or below its f32 distance, less one.
            let mut want = vec![0u64; bins as usize];
            for i in 0..n {
                for j in i + 1..n {
                    let d = dist(&pts[i], &pts[j]) as f32 as f64;
                    if d >= edges[0] && d < edges[bins as usize] {
                        want[edges.partition_point(|e| *e <= d) - 1] += 1;
                    }
                }
            }
            assert_eq!(got, Outcome::Totals(Totals::Counts(want)), "bins {bins}, n {n}");
        }
    }
}

fn run_cpu_in(name: &str, dims: u32, params: &[String], inputs: &Inputs) -> Outcome {
    let p = built_in(name).unwrap().with_dims(dims).unwrap();
    let params = p.bind(params).unwrap();
    let shape = Shape::new(&p, &params, points(inputs));
    CpuDriver::compile(&p, &params, &shape, IndexKind::None, false, &cache())
        .unwrap()
        .run(inputs, None, 2, &indicatif::ProgressBar::hidden())
        .unwrap()
}

#[test]
fn built_ins_take_any_dimension_from_their_input_and_stay_exact() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    for dims in [1u32, 2, 4, 5, 8] {
        let d = dims as usize;
        let scale = (dims as f64).sqrt();
        let n = 301;
        let pts = grid_points(&mut rng, n, d);
        let inputs = Inputs { a: set(&pts), b: None };
        let pairs = || (0..n).flat_map(|i| ((i + 1)..n).map(move |j| (i, j)));

        let r = safe_threshold(rng.random_range(0.1..0.4) * scale);
        let want = pairs().filter(|&(i, j)| dist(&pts[i], &pts[j]) < r).count() as u64;
        assert_eq!(run_cpu_in("2pcf", dims, &[format!("r={r}")], &inputs), Outcome::Totals(Totals::Counts(vec![want])));

        let Outcome::Pairs(got) = run_cpu_in("selfjoin", dims, &[format!("eps={r}")], &inputs) else { panic!() };
        let got: BTreeSet<[u32; 2]> = got.into_iter().collect();
        let want: BTreeSet<[u32; 2]> =
            pairs().filter(|&(i, j)| dist(&pts[i], &pts[j]) <= r).map(|(i, j)| [i as u32, j as u32]).collect();
        assert_eq!(got, want, "selfjoin, {dims}-D, eps = {r}");

        let (bins, r_max) = safe_bins(40, (1.05 * scale) as f32, &grid_distances(d));
        let got = run_cpu_in("sdh", dims, &[format!("bins={bins}"), format!("r_max={r_max}")], &inputs);
        let want = reference_histogram(pairs().map(|(i, j)| dist(&pts[i], &pts[j])), bins, 0.0, r_max as f64);
        assert_eq!(got, Outcome::Totals(Totals::Counts(want)), "sdh, {dims}-D");

        let k = 5;
        let Outcome::Knn { ids, .. } = run_cpu_in("knn", dims, &[format!("k={k}")], &inputs) else { panic!() };
        for i in 0..n {
            let mut cands: Vec<(f64, u32)> =
                (0..n).filter(|&j| j != i).map(|j| (dist(&pts[i], &pts[j]), j as u32)).collect();
            cands.sort_by(|a, b| a.partial_cmp(b).unwrap());
            let want: Vec<u32> = cands[..k].iter().map(|c| c.1).collect();
            assert_eq!(&ids[i * k..(i + 1) * k], &want[..], "knn, {dims}-D, query {i}");
        }
    }
}

#[test]
fn a_problem_of_fixed_dimension_refuses_other_points() {
    let rdf = built_in("rdf").unwrap();
    let err = rdf.with_dims(2).unwrap_err().to_string();
    assert!(err.contains("takes points of 3 values, not 2"), "{err}");
    let err = built_in("sdh").unwrap().with_dims(65).unwrap_err().to_string();
    assert!(err.contains("1 to 64"), "{err}");
}

/// `pts` with a weight per point appended, as `--weights` does.
fn weighted_set(pts: &[Vec<f64>], weights: &[f64]) -> PointSet {
    let mut s = set(pts);
    s.columns.push(Column::F64(weights.to_vec()));
    s
}

#[test]
fn weights_per_point_are_exact_in_histograms_and_agree_in_sums() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    for (dims, n) in [(3usize, 257usize), (2, 301), (5, 150)] {
        let pts = grid_points(&mut rng, n, dims);
        // Multiples of 1/8 below 8: every product and every sum is exact in f64.
        let weights: Vec<f64> = (0..n).map(|_| rng.random_range(-16..64) as f64 / 8.0).collect();
        let inputs = Inputs { a: weighted_set(&pts, &weights), b: None };
        let pairs = || (0..n).flat_map(|i| ((i + 1)..n).map(move |j| (i, j)));
        let scale = (dims as f64).sqrt();
        let (bins, r_max) = safe_bins(40, (1.05 * scale) as f32, &grid_distances(dims));
        let p = built_in("sdh").unwrap().with_dims(dims as u32).unwrap().with_point_weights().unwrap();
        let params = p.bind(&[format!("bins={bins}"), format!("r_max={r_max}")]).unwrap();
        let got = run_problem(&p, &params, &inputs);
        let mut want = vec![0f64; bins as usize];
        let w = r_max as f64 / bins as f64;
        for (i, j) in pairs() {
            let d = dist(&pts[i], &pts[j]);
            if d < r_max as f64 {
                want[(d / w).floor() as usize] += weights[i] * weights[j];
            }
        }
        assert_eq!(got, Outcome::Totals(Totals::Sums(want)), "sdh, {dims}-D, {n} weighted points");

        let h = 0.25f32;
        let p = built_in("kde").unwrap().with_dims(dims as u32).unwrap().with_point_weights().unwrap();
        let params = p.bind(&[format!("h={h}")]).unwrap();
        let Outcome::Totals(Totals::Sums(got)) = run_problem(&p, &params, &inputs) else { panic!() };
        let h = h as f64;
        let want: f64 = pairs()
            .map(|(i, j)| weights[i] * weights[j] * (-dist(&pts[i], &pts[j]).powi(2) / (2.0 * h * h)).exp())
            .sum();
        assert!((got[0] - want).abs() <= 1e-5 * want.abs().max(1.0), "kde, {dims}-D: {} vs {want}", got[0]);
    }
}

#[test]
fn weights_per_point_are_refused_where_they_have_no_meaning() {
    for (name, why) in [
        ("2pcf", "makes a count output"),
        ("selfjoin", "makes a pairs output"),
        ("knn", "makes a knn output"),
        ("rdf", "normalizes its histogram to g(r)"),
    ] {
        let err = built_in(name).unwrap().with_point_weights().unwrap_err().to_string();
        assert!(err.contains(why), "{name}: {err}");
    }
}

/// `name` run as `twobs run NAME --backend cpu --f64` runs it: the CPU
/// backend in f64 mode, on a grid where the runner picks one.
fn run_f64(name: &str, params: &[String], inputs: &Inputs) -> Outcome {
    let mut p = built_in(name).unwrap().with_sets(1 + inputs.b.is_some() as usize).unwrap();
    if p.input.dims_from_input {
        p = p.with_dims(inputs.a.columns.len() as u32).unwrap();
    }
    execute(&p, params, inputs, twobs::run::BackendChoice::Cpu, true).unwrap().outcome
}

/// `n` points of `d` random f32 coordinates in [0, 1): no grid, so that
/// only f64 arithmetic matches the reference to the last bits.
fn float_points(rng: &mut rand::rngs::StdRng, n: usize, d: usize) -> Vec<Vec<f64>> {
    (0..n).map(|_| (0..d).map(|_| rng.random::<f32>() as f64).collect()).collect()
}

/// A threshold in the middle of the widest gap between sorted `values`
/// near `near`, as an f32 (the parameter's type), with the values on
/// either side at least 1e-9 (relative) from it.
fn threshold_clear_of(values: &[f64], near: f64) -> f32 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let at = sorted.partition_point(|&v| v < near).clamp(1, sorted.len() - 1);
    let (lo, hi) = (at.saturating_sub(20).max(1)..(at + 20).min(sorted.len()))
        .map(|k| (sorted[k - 1], sorted[k]))
        .max_by(|x, y| (x.1 - x.0).total_cmp(&(y.1 - y.0)))
        .unwrap();
    let t = ((lo + hi) / 2.0) as f32;
    let margin = ((t as f64 - lo).min(hi - t as f64)) / t as f64;
    assert!(margin > 1e-9, "a threshold {t} clear of the values near {near} (margin {margin})");
    t
}

/// Buckets near `near` over [0, ~hi) whose edges keep 1e-9 (relative) from every value.
fn bins_clear_by_1e9(values: &[f64], near: u32, hi: f32) -> (u32, f32) {
    for step in 0..50 {
        let h = hi * (1.0 + 0.0137 * step as f32);
        if let Some(b) = (near..near + 40).find(|&b| edge_margin(b, 0.0, h as f64, values) > 1e-9) {
            return (b, h);
        }
    }
    panic!("no buckets near {near} over [0, ~{hi}) keep their edges 1e-9 off the values")
}

/// Issue 30, item 1: every built-in under `--f64` against the float64
/// reference, periodic boxes included (rdf's minimum image rounded with
/// float's 1.5 x 2^23, which rounds no double: every pair fell in bucket 0).
/// Random float coordinates; thresholds and bucket edges clear of every
/// value by 1e-9 (relative), far above f64's rounding.
#[test]
fn every_built_in_in_f64_mode_agrees_with_a_float64_reference() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let n = 211;
    let pts = float_points(&mut rng, n, 3);
    let one = Inputs { a: set(&pts), b: None };
    let pairs = || (0..n).flat_map(|i| ((i + 1)..n).map(move |j| (i, j)));
    let distances: Vec<f64> = pairs().map(|(i, j)| dist(&pts[i], &pts[j])).collect();

    let (bins, r_max) = bins_clear_by_1e9(&distances, 30, 1.5);
    let got = run_f64("sdh", &[format!("bins={bins}"), format!("r_max={r_max}")], &one);
    let want = reference_histogram(distances.iter().copied(), bins, 0.0, r_max as f64);
    assert_eq!(got, Outcome::Totals(Totals::Counts(want)), "sdh");

    let r = threshold_clear_of(&distances, 0.2) as f64;
    let want = distances.iter().filter(|&&d| d < r).count() as u64;
    assert_eq!(run_f64("2pcf", &[format!("r={r}")], &one), Outcome::Totals(Totals::Counts(vec![want])), "2pcf");

    let eps = threshold_clear_of(&distances, 0.15) as f64;
    let Outcome::Pairs(got) = run_f64("selfjoin", &[format!("eps={eps}")], &one) else { panic!("pairs") };
    let got: BTreeSet<[u32; 2]> = got.into_iter().collect();
    let want: BTreeSet<[u32; 2]> =
        pairs().filter(|&(i, j)| dist(&pts[i], &pts[j]) <= eps).map(|(i, j)| [i as u32, j as u32]).collect();
    assert_eq!(got, want, "selfjoin, eps = {eps}");

    let h = 0.07f32;
    let Outcome::Totals(Totals::Sums(got)) = run_f64("kde", &[format!("h={h}")], &one) else { panic!("a sum") };
    let h = h as f64;
    let want: f64 = distances.iter().map(|d| (-(d * d) * (0.5 / (h * h))).exp()).sum();
    assert!((got[0] - want).abs() <= 1e-12 * want, "kde: {} against {want}", got[0]);

    let k = 7;
    let Outcome::Knn { ids, values, .. } = run_f64("knn", &[format!("k={k}")], &one) else { panic!("lists") };
    for i in 0..n {
        let mut cands: Vec<(f64, u32)> =
            (0..n).filter(|&j| j != i).map(|j| (dist(&pts[i], &pts[j]), j as u32)).collect();
        cands.sort_by(|a, b| a.partial_cmp(b).unwrap());
        for (slot, (d, j)) in cands[..k].iter().enumerate() {
            assert_eq!(ids[i * k + slot], *j, "knn: query {i}, rank {slot}");
            let v = values.get_f64(i * k + slot);
            assert!((v - d).abs() <= 1e-14 * d, "knn: query {i}, rank {slot}: {v} against {d}");
        }
    }

    // rdf: open, unit and other cubes, orthorhombic and triclinic boxes; one set and A x B.
    let boxes: [(&str, [[f64; 3]; 3]); 5] = [
        ("0", [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]),
        ("1", [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]),
        ("2.5", [[2.5, 0.0, 0.0], [0.0, 2.5, 0.0], [0.0, 0.0, 2.5]]),
        ("2,1,1.5", [[2.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.5]]),
        ("1,1.5,2,0.25,0.125,-0.25", [[1.0, 0.0, 0.0], [0.375, 1.5, 0.0], [0.25, -0.5, 2.0]]),
    ];
    for (bx, edges) in boxes {
        let periodic = bx != "0";
        let in_box = |rng: &mut rand::rngs::StdRng, m: usize| -> Vec<Vec<f64>> {
            float_points(rng, m, 3)
                .into_iter()
                .map(|s| (0..3).map(|c| (0..3).map(|e| s[e] * edges[e][c]).sum::<f64>() as f32 as f64).collect())
                .collect()
        };
        let (pa, pb) = (in_box(&mut rng, 230), in_box(&mut rng, 190));
        let d = |a: &[f64], b: &[f64]| if periodic { min_image_triclinic(a, b, &edges) } else { dist(a, b) };
        let within: Vec<f64> = (0..pa.len())
            .flat_map(|i| (i + 1..pa.len()).map(move |j| (i, j)))
            .map(|(i, j)| d(&pa[i], &pa[j]))
            .collect();
        let across: Vec<f64> = pa.iter().flat_map(|a| pb.iter().map(move |b| (a, b))).map(|(a, b)| d(a, b)).collect();
        let half_width = if periodic {
            twobs::spec::PeriodicBox::parse(twobs::spec::Scalar::F32, bx)
                .unwrap()
                .widths()
                .into_iter()
                .fold(f64::INFINITY, f64::min)
                / 2.0
        } else {
            1.5
        };
        let all: Vec<f64> = within.iter().chain(&across).copied().collect();
        let (bins, r_max) = bins_clear_by_1e9(&all, 25, (half_width * 0.97) as f32);
        let params = [format!("bins={bins}"), format!("box={bx}"), format!("r_max={r_max}")];
        for (inputs, values, what) in [
            (Inputs { a: set(&pa), b: None }, &within, "one set"),
            (Inputs { a: set(&pa), b: Some(set(&pb)) }, &across, "A x B"),
        ] {
            let want = reference_histogram(values.iter().copied(), bins, 0.0, r_max as f64);
            assert_eq!(
                run_f64("rdf", &params, &inputs),
                Outcome::Totals(Totals::Counts(want)),
                "rdf, box {bx}, {what}"
            );
        }
    }

    // nlj's keys are integers: f64 mode leaves them so.
    let keys =
        |rng: &mut rand::rngs::StdRng, m: usize| -> Vec<i32> { (0..m).map(|_| rng.random_range(-60..60)).collect() };
    let (ka, kb) = (keys(&mut rng, 301), keys(&mut rng, 177));
    let gap = rng.random_range(0..4);
    let mk = |k: &[i32]| PointSet { columns: vec![Column::I32(k.to_vec())], origin: "test".into(), rows: None };
    let Outcome::Pairs(got) = run_f64("nlj", &[format!("d={gap}")], &Inputs { a: mk(&ka), b: Some(mk(&kb)) }) else {
        panic!("pairs")
    };
    let got: BTreeSet<[u32; 2]> = got.into_iter().collect();
    let want: BTreeSet<[u32; 2]> = (0..ka.len())
        .flat_map(|i| (0..kb.len()).map(move |j| (i, j)))
        .filter(|&(i, j)| (ka[i] as i64 - kb[j] as i64).abs() <= gap)
        .map(|(i, j)| [i as u32, j as u32])
        .collect();
    assert_eq!(got, want, "nlj, d = {gap}");
}

/// Runs `p` as `twobs run` does with `backend` and `f64`, returning the run or its error.
fn execute(
    p: &Problem,
    params: &[String],
    inputs: &Inputs,
    backend: twobs::run::BackendChoice,
    f64: bool,
) -> Result<twobs::run::Execution, String> {
    let opts = support::RunOptions {
        backend,
        threads: 2,
        f64,
        quiet: true,
        gpu: Default::default(),
        verify: false,
        index: twobs::index::IndexChoice::Auto,
        cache: cache(),
        ranks: None,
    };
    support::execute(p, &p.bind(params).unwrap(), inputs, &opts).map_err(|e| e.to_string())
}

/// Issue 30, item 3: coordinates whose squared separations overflow or
/// underflow f32 gave wrong answers with nothing said: 50 points scaled by
/// 1e-30 (2pcf, r = 1e-31), points at 3e19 (a join, KNN), SDH of 1e20 data.
/// The CPU backend now runs a built-in in f64 there, with a note, and
/// agrees with the float64 reference; the GPU (which has no f64 mode) and a
/// user's snippet (not checked in f64 mode) are refused with the reason.
#[test]
fn separations_past_f32s_range_run_in_f64_or_are_refused() {
    use twobs::run::BackendChoice::{Cpu, Cuda};
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let scaled = |rng: &mut rand::rngs::StdRng, n: usize, s: f64| -> Vec<Vec<f64>> {
        float_points(rng, n, 3).into_iter().map(|p| p.iter().map(|x| (x * s) as f32 as f64).collect()).collect()
    };
    let pairs = |n: usize| (0..n).flat_map(move |i| ((i + 1)..n).map(move |j| (i, j)));

    let tiny = scaled(&mut rng, 50, 1e-30);
    let d: Vec<f64> = pairs(50).map(|(i, j)| dist(&tiny[i], &tiny[j])).collect();
    let r = threshold_clear_of(&d, 1e-31) as f64;
    let want = d.iter().filter(|&&x| x < r).count() as u64;
    assert!(want > 0 && want < d.len() as u64, "a threshold that splits the pairs");
    let run = execute(&built_in("2pcf").unwrap(), &[format!("r={r}")], &Inputs { a: set(&tiny), b: None }, Cpu, false)
        .unwrap();
    assert_eq!(run.outcome, Outcome::Totals(Totals::Counts(vec![want])), "2pcf of points 1e-30 apart, r = {r}");
    assert!(
        run.notes.iter().any(|n| n.contains("below f32's smallest normal number") && n.contains("runs in f64")),
        "{:?}",
        run.notes
    );

    let huge = scaled(&mut rng, 300, 3e20);
    let inputs = Inputs { a: set(&huge), b: None };
    let d: Vec<f64> = pairs(300).map(|(i, j)| dist(&huge[i], &huge[j])).collect();
    let eps = threshold_clear_of(&d, 5e19) as f64;
    let Outcome::Pairs(got) =
        execute(&built_in("selfjoin").unwrap().with_dims(3).unwrap(), &[format!("eps={eps}")], &inputs, Cpu, false)
            .unwrap()
            .outcome
    else {
        panic!("pairs")
    };
    let got: BTreeSet<[u32; 2]> = got.into_iter().collect();
    let want: BTreeSet<[u32; 2]> =
        pairs(300).filter(|&(i, j)| dist(&huge[i], &huge[j]) <= eps).map(|(i, j)| [i as u32, j as u32]).collect();
    assert!(!want.is_empty());
    assert_eq!(got, want, "selfjoin of points at 3e20, eps = {eps}");

    let k = 3;
    let run = execute(&built_in("knn").unwrap(), &[format!("k={k}")], &inputs, Cpu, false).unwrap();
    let Outcome::Knn { ids, values, .. } = run.outcome else { panic!("lists") };
    for i in 0..300 {
        let mut cands: Vec<(f64, u32)> =
            (0..300).filter(|&j| j != i).map(|j| (dist(&huge[i], &huge[j]), j as u32)).collect();
        cands.sort_by(|a, b| a.partial_cmp(b).unwrap());
        for (slot, (dv, j)) in cands[..k].iter().enumerate() {
            assert_eq!(ids[i * k + slot], *j, "knn at 3e20: query {i}, rank {slot}");
            let v = values.get_f64(i * k + slot);
            assert!(v.is_finite() && (v - dv).abs() <= 1e-12 * dv, "knn at 3e20: query {i}: {v} against {dv}");
        }
    }

    let (bins, r_max) = bins_clear_by_1e9(&d, 8, 6e20);
    let got =
        execute(&built_in("sdh").unwrap(), &[format!("bins={bins}"), format!("r_max={r_max}")], &inputs, Cpu, false)
            .unwrap();
    assert_eq!(
        got.outcome,
        Outcome::Totals(Totals::Counts(reference_histogram(d.iter().copied(), bins, 0.0, r_max as f64))),
        "sdh of 3e20 data"
    );

    // Far pairs past the cutoff may overflow: r_max well below f32's reach keeps f32.
    let near =
        execute(&built_in("sdh").unwrap(), &["bins=4".into(), "r_max=1e18".into()], &inputs, Cpu, false).unwrap();
    assert!(near.device.contains("the spec's arithmetic"), "{}", near.device);

    // No f64 mode on the GPU: refused with the reason, before any GPU is looked for.
    let e = execute(&built_in("knn").unwrap(), &[format!("k={k}")], &inputs, Cuda, false).unwrap_err();
    assert!(
        e.contains("past f32's largest number") && e.contains("the CPU backend runs `knn` in f64 (--backend cpu)"),
        "{e}"
    );
    // A user's snippet: refused, unless asked to run in f64.
    let manhattan = example("manhattan/manhattan.xml");
    let four = Inputs {
        a: set(&scaled(&mut rng, 100, 1e-30)
            .into_iter()
            .map(|mut p| {
                p.push(p[0]);
                p
            })
            .collect::<Vec<_>>()),
        b: None,
    };
    let e = execute(&manhattan, &[], &four, Cpu, false).unwrap_err();
    assert!(e.contains("the closest two points of a sample are") && e.contains("(--backend cpu --f64)"), "{e}");
    execute(&manhattan, &[], &four, Cpu, true).unwrap();
}

/// Where rank 0 sends a rank the rows of A with each piece (MPI ranks, two
/// sets, every pair), that rank walks them against B alone: the partial
/// result must be the one a walk of the same rows over the whole of A gives
/// (counts, f64 sums, pairs and KNN lists named by their rows of A), in the
/// spec's arithmetic and in f64 mode, for pieces that start anywhere.
#[test]
fn rows_of_a_sent_with_a_piece_walk_as_the_whole_of_a_does() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let (na, nb) = (rng.random_range(300..700), rng.random_range(40..90));
    let points = |rng: &mut rand::rngs::StdRng, n| set(&grid_points(rng, n, 3));
    let keys = |rng: &mut rand::rngs::StdRng, n| PointSet {
        columns: vec![Column::I32((0..n).map(|_| rng.random_range(0..50)).collect())],
        origin: "keys".into(),
        rows: None,
    };
    // Weights that no order of their f64 sum adds alike.
    let weighted = |rng: &mut rand::rngs::StdRng, n| {
        let weights: Vec<f64> = (0..n).map(|_| rng.random_range(1..1000) as f64 / 7.0).collect();
        weighted_set(&grid_points(rng, n, 3), &weights)
    };
    let two = |name: &str| built_in(name).unwrap().with_sets(2).unwrap();
    let cases: Vec<(Problem, Vec<String>, Inputs, bool)> = vec![
        (two("sdh"), vec!["bins=37".into()], Inputs { a: points(&mut rng, na), b: Some(points(&mut rng, nb)) }, false),
        (two("sdh"), vec!["bins=37".into()], Inputs { a: points(&mut rng, na), b: Some(points(&mut rng, nb)) }, true),
        (
            two("sdh").with_point_weights().unwrap(),
            vec![],
            Inputs { a: weighted(&mut rng, na), b: Some(weighted(&mut rng, nb)) },
            false,
        ),
        (two("knn"), vec!["k=4".into()], Inputs { a: points(&mut rng, na), b: Some(points(&mut rng, nb)) }, false),
        (two("nlj"), vec!["d=1".into()], Inputs { a: keys(&mut rng, na), b: Some(keys(&mut rng, nb)) }, false),
    ];
    for (p, params, inputs, f64_mode) in cases {
        let name = p.name.clone();
        let params = p.bind(&params).unwrap();
        let shape = Shape::new(&p, &params, self::points(&inputs));
        let driver = CpuDriver::compile(&p, &params, &shape, IndexKind::None, f64_mode, &cache()).unwrap();
        let whole = driver.walker(&inputs, None);
        let b = inputs.b.as_ref().unwrap();
        let alone = driver.walker_without_a(na, b);
        let (mut buffer, mut other) = (whole.buffer(), alone.buffer());
        let cuts = [0, 1, rng.random_range(2..na / 2), na / 2, na - 1, na];
        for w in cuts.windows(2) {
            let (lo, hi) = (w[0], w[1]);
            let sent = twobs::ranks::decode_rows(&twobs::ranks::encode_rows(&inputs.a, lo, hi)).unwrap();
            let want = twobs::ranks::encode(&[(0, whole.walk(lo, hi, &mut buffer))]);
            let got = twobs::ranks::encode(&[(0, alone.walk_rows(&sent, lo, &mut other))]);
            assert!(got == want, "{name} (f64 {f64_mode}): rows {lo}..{hi} of {na} against {nb}");
        }
    }
}
