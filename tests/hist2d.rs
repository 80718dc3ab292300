//! Two-dimensional histograms (`kind="histogram2d"`): the built-ins ddrppi
//! and ddsmu against a direct count over every pair written here, which
//! repeats the snippet's f32 arithmetic operation by operation (Rust's f32
//! operations and `mul_add` round as IEEE's, as the CPU backend's do), so the
//! cells must be equal, not close; the spec's errors at their lines; xi, wp
//! and the analytic cell volumes; and `twobs xi --rp-pi` / `--s-mu`. Fresh
//! random inputs every run; the seed is printed (TWOBS_TEST_SEED repeats it).

mod support;

use std::path::Path;
use std::process::Command;

use rand::{RngExt, SeedableRng};
use support::RunOptions;
use twobs::cache::Cache;
use twobs::data::{Column, Inputs, PointSet};
use twobs::index::IndexChoice;
use twobs::outcome::{Outcome, Totals};
use twobs::problems::built_in;
use twobs::run::BackendChoice;
use twobs::schedule::GpuOptions;
use twobs::spec::{Disk, Output, Problem, Spacing};
use twobs::stage::contribution::axis_edges;
use twobs::xi::{Estimator, LineOfSight, Norm, PairCounts, Randoms, count_cells};

fn seed() -> u64 {
    let s = std::env::var("TWOBS_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    println!("TWOBS_TEST_SEED={s}");
    s
}

fn cpu(index: IndexChoice) -> RunOptions {
    RunOptions {
        backend: BackendChoice::Cpu,
        threads: 2,
        f64: false,
        quiet: true,
        gpu: GpuOptions { streams: 1, ..Default::default() },
        verify: false,
        index,
        cache: Cache::at(concat!(env!("CARGO_TARGET_TMPDIR"), "/twobs-cache")),
        ranks: None,
    }
}

fn points(rng: &mut rand::rngs::StdRng, n: usize, extent: [f32; 3]) -> Vec<[f32; 3]> {
    (0..n).map(|_| [0, 1, 2].map(|c| rng.random_range(0.0..extent[c]))).collect()
}

fn set(points: &[[f32; 3]], weights: Option<&[f64]>) -> PointSet {
    let mut columns: Vec<Column> = (0..3).map(|c| Column::F32(points.iter().map(|p| p[c]).collect())).collect();
    columns.extend(weights.map(|w| Column::F64(w.to_vec())));
    PointSet { columns, origin: "test".into(), rows: None }
}

/// `problems/los.cu`'s separation in f32, step by step: the minimum image in
/// an orthorhombic box (tilts 0, whose terms add a zero), rounding by the
/// sum with 1.5 x 2^23.
fn separation(a: &[f32; 3], b: &[f32; 3], lengths: Option<[f32; 3]>) -> [f32; 3] {
    let mut d = [a[0] - b[0], a[1] - b[1], a[2] - b[2]];
    if let Some(l) = lengths {
        let nearest = |x: f32| (x + 12582912.0f32) - 12582912.0f32;
        for c in [2, 1, 0] {
            let n = nearest(d[c] * (1.0f32 / l[c]));
            d[c] = (-l[c]).mul_add(n, d[c]);
        }
    }
    d
}

/// rp_pi's and s_mu's two values, as the snippet computes them.
fn values(los: LineOfSight, d: [f32; 3]) -> (f32, f32) {
    let across = d[1].mul_add(d[1], d[0] * d[0]);
    match los {
        LineOfSight::Pi => (across.sqrt(), d[2].abs()),
        LineOfSight::Mu => {
            let s = d[2].mul_add(d[2], across).sqrt();
            (s, if s > 0.0 { d[2].abs() / s } else { 0.0 })
        }
    }
}

/// An axis's bucket of `v` as a 1-D histogram's: floor((v - lo) * scale) in
/// f32 where linear, the first edge above it in the edge table where log-spaced.
fn bucket(v: f32, edges: &[f64], bins: usize, log: bool) -> Option<usize> {
    let (lo, hi) = (edges[0] as f32, edges[bins] as f32);
    if log {
        let v = v as f64;
        return (v >= edges[0] && v < edges[bins]).then(|| edges.partition_point(|e| *e <= v) - 1);
    }
    let scale = (bins as f64 / (hi as f64 - lo as f64)) as f32;
    let x = (v - lo) * scale;
    (v >= lo && x < bins as f32).then_some(x as usize)
}

/// The cells of every pair (within `a`, or of `a` x `b`), counted or summed
/// (each pair adding the product of its weights), over the problem's axes.
fn direct(
    problem: &Problem,
    params: &twobs::spec::Params,
    a: &[[f32; 3]],
    b: Option<&[[f32; 3]]>,
    weights: Option<(&[f64], &[f64])>,
    lengths: Option<[f32; 3]>,
    los: LineOfSight,
) -> Vec<f64> {
    let Output::Histogram2d { axes, .. } = &problem.output else { panic!("a 2-D histogram") };
    let edges: Vec<Vec<f64>> = axes
        .iter()
        .map(|x| axis_edges(x, problem.function.returns, params).iter().map(|v| v.as_f64()).collect())
        .collect();
    let bins: Vec<usize> = edges.iter().map(|e| e.len() - 1).collect();
    let log: Vec<bool> = axes.iter().map(|x| x.spacing == Spacing::Log).collect();
    let mut cells = vec![0.0; bins[0] * bins[1]];
    let mut add = |i: usize, j: usize, p: &[f32; 3], q: &[f32; 3]| {
        let (x, y) = values(los, separation(p, q, lengths));
        if let (Some(u), Some(v)) = (bucket(x, &edges[0], bins[0], log[0]), bucket(y, &edges[1], bins[1], log[1])) {
            cells[u * bins[1] + v] += weights.map_or(1.0, |(wa, wb)| wa[i] * wb[j]);
        }
    };
    match b {
        None => (0..a.len()).for_each(|i| (0..i).for_each(|j| add(i, j, &a[i], &a[j]))),
        Some(b) => (0..a.len()).for_each(|i| (0..b.len()).for_each(|j| add(i, j, &a[i], &b[j]))),
    }
    cells
}

fn totals(outcome: &Outcome) -> Vec<f64> {
    match outcome {
        Outcome::Totals(Totals::Counts(c)) => c.iter().map(|&x| x as f64).collect(),
        Outcome::Totals(Totals::Sums(s)) => s.clone(),
        other => panic!("a histogram, not {}", other.kind()),
    }
}

#[test]
fn rp_pi_and_s_mu_cells_equal_a_direct_count_of_every_pair() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    // (problem, sets, log-spaced first axis, box lengths, params, index)
    type Case = (&'static str, usize, bool, Option<[f32; 3]>, &'static [&'static str], IndexChoice);
    let cases: [Case; 5] = [
        (
            "ddrppi",
            1,
            false,
            None,
            &["rp_bins=7", "rp_min=0.01", "rp_max=0.2", "pi_bins=5", "pi_max=0.25"],
            IndexChoice::Grid,
        ),
        (
            "ddrppi",
            2,
            true,
            Some([1.0; 3]),
            &["rp_bins=9", "rp_min=0.02", "rp_max=0.45", "pi_bins=4", "pi_max=0.4"],
            IndexChoice::Auto,
        ),
        ("ddsmu", 1, true, None, &["s_bins=8", "s_min=0.01", "s_max=0.3", "mu_bins=6"], IndexChoice::None),
        (
            "ddsmu",
            1,
            false,
            Some([1.0, 1.25, 1.5]),
            &["s_bins=5", "s_max=0.4", "mu_bins=7", "mu_max=0.875"],
            IndexChoice::Grid,
        ),
        ("ddsmu", 2, false, None, &["s_bins=6", "s_min=0.05", "s_max=0.35", "mu_bins=3"], IndexChoice::Grid),
    ];
    for (name, sets, log, lengths, params, index) in cases {
        let mut problem = built_in(name).unwrap().with_sets(sets).unwrap();
        if log {
            problem = problem.with_spacing(Spacing::Log).unwrap();
        }
        let mut overrides: Vec<String> = params.iter().map(|s| s.to_string()).collect();
        if let Some(l) = lengths {
            overrides.push(format!("box={},{},{}", l[0], l[1], l[2]));
        }
        let params = problem.bind(&overrides).unwrap();
        let extent = lengths.unwrap_or([1.0; 3]);
        let a = points(&mut rng, 700, extent);
        let b = (sets == 2).then(|| points(&mut rng, 500, extent));
        let los = if name == "ddrppi" { LineOfSight::Pi } else { LineOfSight::Mu };
        let inputs = Inputs { a: set(&a, None), b: b.as_ref().map(|b| set(b, None)) };
        let run = support::execute(&problem, &params, &inputs, &cpu(index)).unwrap();
        let want = direct(&problem, &params, &a, b.as_deref(), None, lengths, los);
        let got = totals(&run.outcome);
        assert_eq!(got, want, "{name}, {sets} sets, log {log}, box {lengths:?}, index {}", run.index.index.name());
        assert!(want.iter().sum::<f64>() > 1000.0, "{name}: the cells hold pairs ({})", want.iter().sum::<f64>());
        // With a weight per point each cell is the sum of its pairs' weight products.
        if sets == 1 && !log {
            let w: Vec<f64> = (0..a.len()).map(|_| rng.random_range(0.5..2.0)).collect();
            let weighted = problem.with_point_weights().unwrap();
            let run =
                support::execute(&weighted, &params, &Inputs { a: set(&a, Some(&w)), b: None }, &cpu(index)).unwrap();
            let want = direct(&problem, &params, &a, None, Some((&w, &w)), lengths, los);
            for (k, (g, w)) in totals(&run.outcome).iter().zip(&want).enumerate() {
                assert!((g - w).abs() <= 1e-12 * w.abs().max(1.0), "{name} weighted, cell {k}: {g} against {w}");
            }
        }
    }
}

fn spec_error(spec: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("f.cu"),
        "__device__ Value2 f(float3 a, float3 b) { return {a.x - b.x, a.y - b.y}; }\n",
    )
    .unwrap();
    let path = dir.path().join("t.xml");
    match Problem::parse(spec, &path, &Disk) {
        Ok(_) => panic!("accepted: {spec}"),
        Err(e) => format!("{}:{}: {}", e.line, e.col, e.message),
    }
}

#[test]
fn a_wrong_two_dimensional_histogram_is_refused_at_its_line() {
    let head = r#"<problem name="t"><summary>s</summary><input sets="1" type="f32" dims="3"/>
<param name="n" type="u32" default="4"/>
"#;
    let function = r#"<function file="f.cu" name="f"/>
"#;
    let one_axis = format!(
        "{head}{function}<output kind=\"histogram2d\">\n  <axis name=\"x\" bins=\"n\" max=\"1\"/>\n</output></problem>"
    );
    let e = spec_error(&one_axis);
    assert!(e.starts_with("4:1:") && e.contains("two <axis> children") && e.contains("found 1"), "{e}");
    let same_names = format!(
        "{head}{function}<output kind=\"histogram2d\">\n  <axis name=\"x\" bins=\"n\" max=\"1\"/>\n  <axis name=\"x\" bins=\"2\" max=\"1\"/>\n</output></problem>"
    );
    let e = spec_error(&same_names);
    assert!(e.starts_with("6:3:") && e.contains("both axes are named `x`"), "{e}");
    let empty = format!(
        "{head}{function}<output kind=\"histogram2d\">\n  <axis name=\"x\" bins=\"n\" max=\"1\"/>\n  <axis name=\"y\" bins=\"2\" min=\"3\" max=\"1\"/>\n</output></problem>"
    );
    let e = spec_error(&empty);
    assert!(e.starts_with("6:27:") && e.contains("axis `y` range is empty: min (3) must be below max (1)"), "{e}");
    let unknown = format!("{head}{function}<output kind=\"histogram2d\">\n  <axes/>\n</output></problem>");
    let e = spec_error(&unknown);
    assert!(e.starts_with("5:3:") && e.contains("unknown element <axes>"), "{e}");
    let keyed = format!(
        "{head}<function file=\"f.cu\" name=\"f\" key=\"f\" map=\"f\"/>\n<output kind=\"histogram2d\">\n  <axis name=\"x\" bins=\"n\" max=\"1\"/>\n  <axis name=\"y\" bins=\"2\" max=\"1\"/>\n</output></problem>"
    );
    let e = spec_error(&keyed);
    assert!(e.starts_with("4:9:") && e.contains("leave key, map and estimate out"), "{e}");
    // A product of bins past 2^24 is named at the second axis's bins.
    let p = built_in("ddrppi").unwrap();
    let e = p.bind(&["rp_bins=65536".into(), "pi_bins=300".into()]).unwrap_err().to_string();
    assert!(e.contains("65536 x pi_bins=300 = 19660800 cells: at most 16777216"), "{e}");
}

#[test]
fn the_snippet_is_told_what_value2_is_when_its_function_does_not_fit() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f.cu"), "__device__ float f(float3 a, float3 b) { return a.x - b.x; }\n").unwrap();
    let text = r#"<problem name="t"><summary>s</summary><input sets="1" type="f32" dims="3"/>
<function file="f.cu" name="f"/>
<output kind="histogram2d"><axis name="u" bins="4" max="1"/><axis name="v" bins="2" max="1"/></output></problem>"#;
    let problem = Problem::parse(text, &dir.path().join("t.xml"), &Disk).unwrap();
    let params = problem.bind(&[]).unwrap();
    let inputs = Inputs { a: set(&[[0.0; 3], [0.5; 3]], None), b: None };
    let e = support::execute(&problem, &params, &inputs, &cpu(IndexChoice::None)).unwrap_err().to_string();
    assert!(e.contains("f.cu:1") && e.contains("Value2 is struct { float u, v; }"), "{e}");
}

fn counts(edges: Vec<f64>, los: LineOfSight, second: Vec<f64>, dd: Vec<f64>, randoms: Randoms) -> PairCounts {
    PairCounts { edges, cells: Some((los, second)), dd, randoms, data_points: 1000, data_weights: (1000.0, 1000.0) }
}

#[test]
fn cell_volumes_fill_the_cylinder_and_the_sphere_and_wp_sums_xi_over_pi() {
    let rp = vec![0.0, 0.5, 1.0, 2.0];
    let pi = vec![0.0, 1.0, 2.0, 3.0, 4.0];
    let c = counts(rp.clone(), LineOfSight::Pi, pi.clone(), vec![0.0; 12], Randoms::Analytic { volume: 1000.0 });
    let total: f64 = c.volumes().iter().sum();
    let cylinder = std::f64::consts::PI * 4.0 * 2.0 * 4.0;
    assert!((total - cylinder).abs() < 1e-12 * cylinder, "{total} against {cylinder}");
    let s = counts(
        vec![0.5, 1.0, 3.0],
        LineOfSight::Mu,
        vec![0.0, 0.25, 0.5, 1.0],
        vec![0.0; 6],
        Randoms::Analytic { volume: 1e3 },
    );
    let shell = 4.0 / 3.0 * std::f64::consts::PI * (27.0 - 0.125);
    assert!((s.volumes().iter().sum::<f64>() - shell).abs() < 1e-12 * shell);
    // Each (rp, pi) cell with RR twice its share of DD: xi = 1 / 2 - 1 by the
    // natural estimator wherever RR is not 0, and wp = 2 x (-1/2) x 4.
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let dd: Vec<f64> = (0..12).map(|_| rng.random_range(1..1000) as f64).collect();
    let rr: Vec<f64> = dd.iter().map(|x| 2.0 * x).collect();
    let c =
        counts(rp, LineOfSight::Pi, pi, dd, Randoms::Counted { dr: None, rr, points: 1000, weights: (1000.0, 1000.0) });
    let xi = c.xi(Estimator::Natural, Norm::Pairs);
    assert!(xi.iter().all(|x| (x + 0.5).abs() < 1e-15), "{xi:?}");
    assert_eq!(c.wp(&xi).unwrap(), vec![-4.0; 3]);
}

#[test]
fn wp_in_a_periodic_box_is_the_sum_of_its_cells_xi() {
    // Uniform points in a box: DD counted exactly, RR analytic; wp from the
    // same cells by the formula, and xi near 0 where cells hold many pairs.
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let a = points(&mut rng, 3000, [2.0; 3]);
    let problem = built_in("ddrppi").unwrap();
    let params = problem
        .bind(&[
            "rp_bins=4".into(),
            "rp_min=0.25".into(),
            "rp_max=0.75".into(),
            "pi_bins=3".into(),
            "pi_max=0.75".into(),
            "box=2".into(),
        ])
        .unwrap();
    let data = Inputs { a: set(&a, None), b: None };
    let (c, runs) = count_cells(
        &problem,
        &params,
        &data,
        None,
        Estimator::Natural,
        Some(LineOfSight::Pi),
        (cpu(IndexChoice::Auto).options(), &cpu(IndexChoice::Auto).workers()),
    )
    .unwrap();
    assert_eq!(runs.len(), 1, "DD alone: RR is analytic");
    assert_eq!(c.dd, direct(&problem, &params, &a, None, None, Some([2.0; 3]), LineOfSight::Pi));
    let xi = c.xi(Estimator::Natural, Norm::Pairs);
    let pairs = 3000.0 * 2999.0 / 2.0;
    let (_, pi) = c.cells.as_ref().unwrap();
    for (k, x) in xi.iter().enumerate() {
        let (i, j) = (k / 3, k % 3);
        let volume = std::f64::consts::PI * (c.edges[i + 1].powi(2) - c.edges[i].powi(2)) * 2.0 * (pi[j + 1] - pi[j]);
        let want = c.dd[k] / (pairs * volume / 8.0) - 1.0;
        assert!((x - want).abs() < 1e-12, "cell {k}: {x} against {want}");
        assert!(x.abs() < 0.2, "uniform points: xi near 0 in cell {k}, {x}");
    }
    let wp = c.wp(&xi).unwrap();
    for (i, w) in wp.iter().enumerate() {
        let want: f64 = 2.0 * (0..3).map(|j| xi[i * 3 + j] * (pi[j + 1] - pi[j])).sum::<f64>();
        assert!((w - want).abs() < 1e-15, "wp[{i}] {w} against {want}");
    }
    // Cells past half the box would meet their own images: refused, naming them.
    let wide = problem.bind(&["pi_max=1.5".into(), "box=2".into()]).unwrap();
    let e = count_cells(
        &problem,
        &wide,
        &data,
        None,
        Estimator::Natural,
        Some(LineOfSight::Pi),
        (cpu(IndexChoice::Auto).options(), &cpu(IndexChoice::Auto).workers()),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("cells (rp_max, pi_max) reach 1.5, above half the smallest width of the box (1)"), "{e}");
}

fn twobs(dir: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_twobs")).args(args).current_dir(dir).output().unwrap()
}

#[test]
fn xi_rp_pi_writes_the_cells_and_wp_and_s_mu_its_cells() {
    let dir = tempfile::tempdir().unwrap();
    let o = twobs(
        dir.path(),
        &[
            "xi",
            "--data",
            "uniform:400",
            "--randoms",
            "uniform:800",
            "--rp-pi",
            "2",
            "--param",
            "rp_bins=3",
            "--param",
            "rp_max=0.3",
            "--param",
            "pi_max=0.25",
            "--backend",
            "cpu",
            "--out",
            "cells.csv",
            "--wp",
            "wp.csv",
            "--quiet",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let cells = std::fs::read_to_string(dir.path().join("cells.csv")).unwrap();
    let rows: Vec<&str> = cells.lines().collect();
    assert_eq!(rows[0], "rp_lo,rp_hi,pi_lo,pi_hi,dd,dr,rr,xi");
    assert_eq!(rows.len(), 1 + 3 * 2, "3 rp buckets x 2 pi buckets (--rp-pi 2, pi_max 0.25 from --param)");
    assert!(rows[1].starts_with("0,0.1,0,0.125,") && rows[6].starts_with("0.2,0.3,0.125,0.25,"), "{cells}");
    let wp = std::fs::read_to_string(dir.path().join("wp.csv")).unwrap();
    let wp_rows: Vec<&str> = wp.lines().collect();
    assert_eq!(wp_rows[0], "rp_lo,rp_hi,wp");
    assert_eq!(wp_rows.len(), 4, "{wp}");
    // wp = 2 sum over pi of xi dpi, from the cells file.
    let xi: Vec<f64> = rows[1..].iter().map(|r| r.rsplit(',').next().unwrap().parse().unwrap()).collect();
    for (i, row) in wp_rows[1..].iter().enumerate() {
        let got: f64 = row.rsplit(',').next().unwrap().parse().unwrap();
        let want = 2.0 * 0.125 * (xi[2 * i] + xi[2 * i + 1]);
        assert!((got - want).abs() <= 1e-12 * want.abs().max(1.0), "wp row {i}: {got} against {want}");
    }
    let o = twobs(
        dir.path(),
        &[
            "xi",
            "--data",
            "uniform:300",
            "--box",
            "1",
            "--s-mu",
            "4",
            "--param",
            "s_max=0.2",
            "--backend",
            "cpu",
            "--quiet",
        ],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.starts_with("s_lo,s_hi,mu_lo,mu_hi,dd,rr,xi\n0,0.01,0,0.25,"), "{out}");
    assert_eq!(out.lines().count(), 1 + 20 * 4);
    // --rp-pi with a PIMAX that is not whole needs the number of pi buckets.
    let o = twobs(dir.path(), &["xi", "--data", "uniform:50", "--box", "1", "--rp-pi", "0.25", "--backend", "cpu"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("give their number with --param pi_bins=N"));
}

#[test]
fn xi_s_mu_writes_the_multipoles_of_its_cells() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["xi", "--data", "uniform:500", "--randoms", "uniform:900", "--s-mu", "5", "--param", "s_bins=4"];
    let more = ["--param", "s_min=0.02", "--param", "s_max=0.22", "--backend", "cpu", "--quiet", "--out", "cells.csv"];
    let o = twobs(dir.path(), &[&args[..], &more[..], &["--multipoles", "m.csv"]].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let cells = std::fs::read_to_string(dir.path().join("cells.csv")).unwrap();
    // s_lo, s_hi, mu_lo, mu_hi, dd, dr, rr, xi; the edges are f32 values, written shortest.
    let cell_rows: Vec<Vec<f64>> = cells
        .lines()
        .skip(1)
        .map(|r| {
            r.split(',')
                .enumerate()
                .map(|(k, v)| if k < 4 { f64::from(v.parse::<f32>().unwrap()) } else { v.parse().unwrap() })
                .collect()
        })
        .collect();
    let m = std::fs::read_to_string(dir.path().join("m.csv")).unwrap();
    let rows: Vec<Vec<f64>> = m.lines().skip(1).map(|r| r.split(',').map(|v| v.parse().unwrap()).collect()).collect();
    assert_eq!(m.lines().next(), Some("s_lo,s_hi,xi0,xi2,xi4"));
    assert_eq!(rows.len(), 4);
    // Five mu cells over [0, 1): xi0 = sum of xi dmu; xi2 = 5 sum of xi times L_2's integral over the cell.
    let l2 = |x: f64| (x * x * x - x) / 2.0;
    for (i, row) in rows.iter().enumerate() {
        let cells = &cell_rows[5 * i..5 * i + 5];
        let xi0: f64 = cells.iter().map(|c| c[7] * (c[3] - c[2])).sum();
        let xi2: f64 = 5.0 * cells.iter().map(|c| c[7] * (l2(c[3]) - l2(c[2]))).sum::<f64>();
        assert!((row[2] - xi0).abs() <= 1e-12 * xi0.abs().max(1.0), "row {i}: xi0 {} against {xi0}", row[2]);
        assert!((row[3] - xi2).abs() <= 1e-12 * xi2.abs().max(1.0), "row {i}: xi2 {} against {xi2}", row[3]);
    }
    // Multipoles are of (s, mu) cells only.
    let o = twobs(dir.path(), &["xi", "--data", "uniform:50", "--randoms", "uniform:50", "--multipoles", "x.csv"]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("--s-mu"));
}

/// One run of `bench/xi-peers.py --cases rppi,smu --record tests/peers/xi`:
/// points and the numbers Corrfunc 2.5.3 made of them (a recording: Corrfunc
/// builds against libgsl-dev, which CI lacks; the script runs it live).
fn peers() -> (serde_json::Value, impl Fn(&str) -> Inputs) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/xi");
    let json = std::fs::read_to_string(dir.join("peers-2d.json")).unwrap();
    let read = move |name: &str| {
        let comps = built_in("ddrppi").unwrap().input.element.components();
        let path = dir.join(format!("{name}.npy"));
        Inputs { a: twobs::data::read_input(path.to_str().unwrap(), &comps, &Default::default()).unwrap(), b: None }
    };
    (serde_json::from_str(&json).unwrap(), read)
}

fn numbers(v: &serde_json::Value) -> Vec<f64> {
    v.as_array().unwrap_or_else(|| panic!("an array: {v}")).iter().map(|x| x.as_f64().unwrap()).collect()
}

/// The peer's counts, cell for cell. Pairs whose f64 separation lies within
/// 2^-14 of an edge (the recording counts them) may fall either side in
/// f32; in this recording none did (the script found 0 pairs in another
/// cell in every count), so the counts are equal.
fn moved_at_most_near(what: &str, ours: &[f64], theirs: &[f64], near: &serde_json::Value) {
    let moved = (ours.iter().zip(theirs).map(|(a, b)| (a - b).abs()).sum::<f64>() / 2.0).ceil();
    println!(
        "{what}: {} pairs, {moved} in another cell than Corrfunc's, {near} near an edge",
        ours.iter().sum::<f64>()
    );
    assert_eq!(ours, theirs, "{what}: the recorded Corrfunc counts");
    assert!(ours.iter().sum::<f64>() > 10_000.0, "{what}: the cells hold pairs");
}

/// wp within 1e-12 of the peer's in every rp bucket whose cells' counts are
/// the peer's (a pair that moved across an f32 edge changes its row's wp);
/// most rows must be such.
fn rows_close(ours: &[f64], theirs: &[f64], per_row: usize, same: &dyn Fn(usize) -> bool, what: &str) {
    let rows: Vec<usize> = (0..ours.len()).filter(|&i| (i * per_row..(i + 1) * per_row).all(same)).collect();
    println!("{what}: {} of {} rp buckets hold the peer's counts", rows.len(), ours.len());
    assert!(2 * rows.len() > ours.len(), "{what}: most rp buckets hold the peer's counts");
    for i in rows {
        let (a, b) = (ours[i], theirs[i]);
        assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0), "{what}, rp bucket {i}: {a} against {b}");
    }
}

#[test]
fn rp_pi_counts_and_wp_equal_corrfunc_ddrppi_and_its_wp() {
    let (rec, read) = peers();
    let r = &rec["rppi"];
    let rp = numbers(&r["rp_edges"]);
    let pimax = r["pimax"].as_f64().unwrap();
    let problem = built_in("ddrppi").unwrap();
    let binning = vec![
        format!("rp_bins={}", rp.len() - 1),
        format!("rp_min={}", rp[0]),
        format!("rp_max={}", rp[rp.len() - 1]),
        format!("pi_bins={pimax}"),
        format!("pi_max={pimax}"),
    ];
    let params = problem.bind(&binning).unwrap();
    let (data, randoms) = (read("rppi-data"), read("rppi-randoms"));
    let los = Some(LineOfSight::Pi);
    let (c, _) = count_cells(
        &problem,
        &params,
        &data,
        Some(&randoms),
        Estimator::LandySzalay,
        los,
        (cpu(IndexChoice::Auto).options(), &cpu(IndexChoice::Auto).workers()),
    )
    .unwrap();
    let Randoms::Counted { dr: Some(dr), rr, .. } = &c.randoms else { panic!("counted against randoms") };
    moved_at_most_near("DD(rp, pi)", &c.dd, &numbers(&r["dd"]), &r["near_edges"]["dd"]);
    moved_at_most_near("DR(rp, pi)", dr, &numbers(&r["dr"]), &r["near_edges"]["dr"]);
    moved_at_most_near("RR(rp, pi)", rr, &numbers(&r["rr"]), &r["near_edges"]["rr"]);
    let same =
        |k: usize| c.dd[k] == numbers(&r["dd"])[k] && dr[k] == numbers(&r["dr"])[k] && rr[k] == numbers(&r["rr"])[k];
    let wp = c.wp(&c.xi(Estimator::LandySzalay, Norm::Squared)).unwrap();
    rows_close(&wp, &numbers(&r["wp_corrfunc"]), pimax as usize, &same, "wp against convert_rp_pi_counts_to_wp");
    // The periodic cube: DD with minimum images, and wp with analytic RR against theory.wp.
    let b = &r["box"];
    let mut args = binning.clone();
    args.push(format!("box={}", r["side"]));
    let params = problem.bind(&args).unwrap();
    let (c, _) = count_cells(
        &problem,
        &params,
        &read("rppi-box"),
        None,
        Estimator::Natural,
        los,
        (cpu(IndexChoice::Auto).options(), &cpu(IndexChoice::Auto).workers()),
    )
    .unwrap();
    moved_at_most_near("DD(rp, pi), periodic", &c.dd, &numbers(&b["dd"]), &b["near_edges"]);
    let theirs = numbers(&b["dd"]);
    let wp = c.wp(&c.xi(Estimator::Natural, Norm::Pairs)).unwrap();
    rows_close(&wp, &numbers(&b["wp_corrfunc"]), pimax as usize, &|k| c.dd[k] == theirs[k], "wp against theory.wp");
}

#[test]
fn s_mu_counts_equal_corrfunc_ddsmu() {
    let (rec, read) = peers();
    let m = &rec["smu"];
    let s = numbers(&m["s_edges"]);
    let problem = built_in("ddsmu").unwrap();
    let binning = vec![
        format!("s_bins={}", s.len() - 1),
        format!("s_min={}", s[0]),
        format!("s_max={}", s[s.len() - 1]),
        format!("mu_bins={}", m["nmu"]),
    ];
    let mut args = binning.clone();
    args.push(format!("box={}", m["side"]));
    let los = Some(LineOfSight::Mu);
    let params = problem.bind(&args).unwrap();
    let (c, _) = count_cells(
        &problem,
        &params,
        &read("smu-box"),
        None,
        Estimator::Natural,
        los,
        (cpu(IndexChoice::Auto).options(), &cpu(IndexChoice::Auto).workers()),
    )
    .unwrap();
    moved_at_most_near("DD(s, mu), periodic", &c.dd, &numbers(&m["dd"]), &m["near_edges"]);
    let params = problem.bind(&binning).unwrap();
    let (data, randoms) = (read("smu-data"), read("smu-randoms"));
    let (c, _) = count_cells(
        &problem,
        &params,
        &data,
        Some(&randoms),
        Estimator::LandySzalay,
        los,
        (cpu(IndexChoice::Auto).options(), &cpu(IndexChoice::Auto).workers()),
    )
    .unwrap();
    let o = &m["open"];
    moved_at_most_near("DD(s, mu)", &c.dd, &numbers(&o["dd"]), &o["near_edges"]["dd"]);
    moved_at_most_near("DR(s, mu)", c.dr().unwrap(), &numbers(&o["dr"]), &o["near_edges"]["dr"]);
}
