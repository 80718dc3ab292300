//! xi(r): the pair counts against a brute-force reference written here, the
//! estimators against their textbook forms, and what they say about data
//! whose answer is known (uniform data: xi = 0; clustered data: xi > 0 at
//! small r). Fresh random inputs every run; the seed is printed.

use rand::{RngExt, SeedableRng};
use twobs::cache::Cache;
use twobs::data::{Column, Generator, Inputs, PointSet, synthesize};
use twobs::problems::built_in;
use twobs::request::Options;
use twobs::run::BackendChoice;
use twobs::run::Workers;
use twobs::schedule::GpuOptions;
use twobs::spec::{Problem, Spacing};
use twobs::stage::contribution::histogram_edges;
use twobs::xi::{Estimator, Norm, PairCounts, Randoms, count, jackknife};

fn seed() -> u64 {
    let s = std::env::var("TWOBS_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    println!("TWOBS_TEST_SEED={s}");
    s
}

fn cpu() -> Workers {
    Workers {
        backend: BackendChoice::Cpu,
        threads: 2,
        gpu: GpuOptions { streams: 1, ..Default::default() },
        progress: twobs::run::Progress::Off,
        cache: Cache::at(concat!(env!("CARGO_TARGET_TMPDIR"), "/twobs-cache")),
        ranks: None,
        root_sends_points: false,
    }
}

/// Points on a grid of 1/16: every distance is sqrt(k)/16, its f32 correctly rounded.
fn grid(rng: &mut rand::rngs::StdRng, n: usize) -> Vec<[f64; 3]> {
    (0..n).map(|_| [0, 1, 2].map(|_| rng.random_range(0..16u32) as f64 / 16.0)).collect()
}

fn set(points: &[[f64; 3]]) -> PointSet {
    PointSet {
        columns: (0..3).map(|c| Column::F32(points.iter().map(|p| p[c] as f32).collect())).collect(),
        origin: "test".into(),
        rows: None,
    }
}

/// The bucket of the f32 distance between a and b in the edge table, if any.
fn bucket(a: &[f64; 3], b: &[f64; 3], edges: &[f64]) -> Option<usize> {
    let d = (0..3).map(|c| (a[c] - b[c]).powi(2)).sum::<f64>().sqrt() as f32 as f64;
    (d >= edges[0] && d < edges[edges.len() - 1]).then(|| edges.partition_point(|e| *e <= d) - 1)
}

fn within(points: &[[f64; 3]], edges: &[f64]) -> Vec<u64> {
    let mut h = vec![0; edges.len() - 1];
    for i in 0..points.len() {
        for j in i + 1..points.len() {
            if let Some(k) = bucket(&points[i], &points[j], edges) {
                h[k] += 1;
            }
        }
    }
    h
}

fn between(a: &[[f64; 3]], b: &[[f64; 3]], edges: &[f64]) -> Vec<u64> {
    let mut h = vec![0; edges.len() - 1];
    for p in a {
        for q in b {
            if let Some(k) = bucket(p, q, edges) {
                h[k] += 1;
            }
        }
    }
    h
}

/// DD, DR and RR of counts against randoms.
fn counted(c: &PairCounts) -> (&Vec<f64>, Option<&Vec<f64>>, &Vec<f64>) {
    match &c.randoms {
        Randoms::Counted { dr, rr, .. } => (&c.dd, dr.as_ref(), rr),
        Randoms::Analytic { .. } => panic!("counted against randoms, not analytic"),
    }
}

fn log_sdh() -> Problem {
    built_in("sdh").unwrap().with_spacing(Spacing::Log).unwrap()
}

#[test]
fn pair_counts_and_both_estimators_match_a_brute_force_reference() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let problem = log_sdh();
    let params = problem.bind(&["bins=12".into(), "r_min=0.02".into(), "r_max=0.9".into()]).unwrap();
    let edges = histogram_edges(&problem, &params);
    for (nd, nr) in [(2, 3), (300, 500), (801, 1203)] {
        let (data, randoms) = (grid(&mut rng, nd), grid(&mut rng, nr));
        let inputs = |p: &[[f64; 3]]| Inputs { a: set(p), b: None };
        let (ls, _) = count(
            &problem,
            &params,
            &inputs(&data),
            Some(&inputs(&randoms)),
            Estimator::LandySzalay,
            (Options::default(), &cpu()),
        )
        .unwrap();
        let (dd, dr, rr) = (within(&data, &edges), between(&data, &randoms, &edges), within(&randoms, &edges));
        let f = |c: &[u64]| c.iter().map(|&x| x as f64).collect::<Vec<f64>>();
        assert_eq!(counted(&ls), (&f(&dd), Some(&f(&dr)), &f(&rr)), "{nd} data, {nr} randoms");
        assert_eq!(ls.edges, edges);
        // The textbook forms, with the pair totals written out.
        let (fd, fr) = (nd as f64, nr as f64);
        let xi = ls.xi(Estimator::LandySzalay, Norm::Pairs);
        let natural = ls.xi(Estimator::Natural, Norm::Pairs);
        for k in 0..edges.len() - 1 {
            if rr[k] == 0 {
                assert!(xi[k].is_nan() && natural[k].is_nan(), "bucket {k}: no random pair, xi undefined");
                continue;
            }
            let want_ls = (dd[k] as f64 * fr * (fr - 1.0) / (fd * (fd - 1.0)) - dr[k] as f64 * (fr - 1.0) / fd)
                / rr[k] as f64
                + 1.0;
            let want_natural = dd[k] as f64 * fr * (fr - 1.0) / (rr[k] as f64 * fd * (fd - 1.0)) - 1.0;
            assert!((xi[k] - want_ls).abs() <= 1e-12 * want_ls.abs().max(1.0), "LS bucket {k}: {} vs {want_ls}", xi[k]);
            assert!(
                (natural[k] - want_natural).abs() <= 1e-12 * want_natural.abs().max(1.0),
                "natural bucket {k}: {} vs {want_natural}",
                natural[k]
            );
        }
        // The natural estimator does not count DR.
        let (nat, runs) = count(
            &problem,
            &params,
            &inputs(&data),
            Some(&inputs(&randoms)),
            Estimator::Natural,
            (Options::default(), &cpu()),
        )
        .unwrap();
        assert_eq!((nat.dr(), runs.len()), (None, 2));
    }
}

#[test]
fn uniform_data_is_uncorrelated_and_clustered_data_is_not() {
    let s = seed();
    let problem = log_sdh();
    let params = problem.bind(&["bins=8".into(), "r_min=0.02".into(), "r_max=0.3".into()]).unwrap();
    let comps = problem.input.element.components();
    let make = |g, n, seed| Inputs { a: synthesize(g, n, &comps, seed).unwrap(), b: None };
    let randoms = make(Generator::Uniform, 6000, s);
    let uniform = make(Generator::Uniform, 3000, s + 1);
    let (c, _) =
        count(&problem, &params, &uniform, Some(&randoms), Estimator::LandySzalay, (Options::default(), &cpu()))
            .unwrap();
    let xi = c.xi(Estimator::LandySzalay, Norm::Pairs);
    // Pairs per bucket run from ~10^2 to ~10^5: the largest buckets are
    // within a few per cent of 0; all within 0.5.
    assert!(xi.iter().all(|x| x.abs() < 0.5), "uniform data: xi = {xi:?}");
    assert!(xi[5..].iter().all(|x| x.abs() < 0.05), "uniform data: xi = {xi:?}");
    let clustered = make(Generator::Clustered, 3000, s + 2);
    let (c, _) =
        count(&problem, &params, &clustered, Some(&randoms), Estimator::LandySzalay, (Options::default(), &cpu()))
            .unwrap();
    let xi = c.xi(Estimator::LandySzalay, Norm::Pairs);
    assert!(xi[0] > 5.0 && xi[0] > xi[7], "clustered data: xi = {xi:?}");
}

#[test]
fn xi_refuses_a_problem_that_is_not_a_distance_histogram() {
    let params_2pcf = built_in("2pcf").unwrap();
    let p = params_2pcf.bind(&[]).unwrap();
    let one = Inputs { a: set(&[[0.0; 3], [0.5; 3]]), b: None };
    let e = count(&params_2pcf, &p, &one, Some(&one), Estimator::Natural, (Options::default(), &cpu()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("problem `2pcf` cannot count xi's pairs"), "{e}");
}

/// The weighted bucket sums: each pair adds the product of its weights.
fn weighted(a: &[[f64; 3]], wa: &[f64], b: Option<(&[[f64; 3]], &[f64])>, edges: &[f64]) -> Vec<f64> {
    let mut h = vec![0.0; edges.len() - 1];
    for i in 0..a.len() {
        let others: Vec<([f64; 3], f64)> = match b {
            Some((b, wb)) => b.iter().copied().zip(wb.iter().copied()).collect(),
            None => a[i + 1..].iter().copied().zip(wa[i + 1..].iter().copied()).collect(),
        };
        for (q, wq) in others {
            if let Some(k) = bucket(&a[i], &q, edges) {
                h[k] += wa[i] * wq;
            }
        }
    }
    h
}

#[test]
fn weighted_pair_counts_and_xi_match_a_brute_force_reference() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let problem = log_sdh();
    let params = problem.bind(&["bins=10".into(), "r_min=0.02".into(), "r_max=0.9".into()]).unwrap();
    let edges = histogram_edges(&problem, &params);
    for (nd, nr) in [(3, 4), (250, 400)] {
        let (data, randoms) = (grid(&mut rng, nd), grid(&mut rng, nr));
        // Multiples of 1/4 in [0.25, 4): every product and sum is exact in f64.
        let mut weights = |n: usize| (0..n).map(|_| rng.random_range(1..16) as f64 / 4.0).collect::<Vec<f64>>();
        let (wd, wr) = (weights(nd), weights(nr));
        let with = |p: &[[f64; 3]], w: &[f64]| {
            let mut s = set(p);
            s.columns.push(Column::F64(w.to_vec()));
            Inputs { a: s, b: None }
        };
        let (c, _) = count(
            &problem,
            &params,
            &with(&data, &wd),
            Some(&with(&randoms, &wr)),
            Estimator::LandySzalay,
            (Options::default(), &cpu()),
        )
        .unwrap();
        let (dd, dr, rr) = (
            weighted(&data, &wd, None, &edges),
            weighted(&data, &wd, Some((&randoms, &wr)), &edges),
            weighted(&randoms, &wr, None, &edges),
        );
        assert_eq!(counted(&c), (&dd, Some(&dr), &rr), "{nd} data, {nr} randoms");
        // Pair totals from the weights: (W^2 - sum w^2) / 2 within a set, W_D W_R between.
        let total = |w: &[f64]| (w.iter().sum::<f64>(), w.iter().map(|x| x * x).sum::<f64>());
        let Randoms::Counted { weights: random_weights, .. } = c.randoms else { unreachable!() };
        assert_eq!((c.data_weights, random_weights), (total(&wd), total(&wr)));
        let (sd, qd) = total(&wd);
        let (sr, qr) = total(&wr);
        let xi = c.xi(Estimator::LandySzalay, Norm::Pairs);
        for k in 0..edges.len() - 1 {
            if rr[k] == 0.0 {
                assert!(xi[k].is_nan());
                continue;
            }
            let (ndd, nrr, ndr) = (dd[k] / ((sd * sd - qd) / 2.0), rr[k] / ((sr * sr - qr) / 2.0), dr[k] / (sd * sr));
            let want = (ndd - 2.0 * ndr + nrr) / nrr;
            assert!((xi[k] - want).abs() <= 1e-12 * want.abs().max(1.0), "bucket {k}: {} vs {want}", xi[k]);
        }
    }
}

#[test]
fn weights_on_one_catalogue_only_are_refused() {
    let problem = log_sdh();
    let params = problem.bind(&["bins=4".into(), "r_min=0.02".into(), "r_max=0.9".into()]).unwrap();
    let plain = Inputs { a: set(&[[0.0; 3], [0.5; 3]]), b: None };
    let mut w = set(&[[0.0; 3], [0.5; 3]]);
    w.columns.push(Column::F64(vec![1.0, 2.0]));
    let weighted = Inputs { a: w, b: None };
    let e = count(&problem, &params, &weighted, Some(&plain), Estimator::Natural, (Options::default(), &cpu()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("weights per point are given for the data only"), "{e}");
}

#[test]
fn squared_norm_divides_each_catalogue_by_its_weight_total_squared_over_two() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let problem = log_sdh();
    let params = problem.bind(&["bins=10".into(), "r_min=0.05".into(), "r_max=0.9".into()]).unwrap();
    let (nd, nr) = (211, 317);
    let (data, randoms) = (grid(&mut rng, nd), grid(&mut rng, nr));
    let inputs = |p: &[[f64; 3]]| Inputs { a: set(p), b: None };
    let (c, _) = count(
        &problem,
        &params,
        &inputs(&data),
        Some(&inputs(&randoms)),
        Estimator::LandySzalay,
        (Options::default(), &cpu()),
    )
    .unwrap();
    let (dd, dr, rr) = counted(&c);
    let dr = dr.unwrap();
    let (fd, fr) = (nd as f64, nr as f64);
    let (ls, natural) = (c.xi(Estimator::LandySzalay, Norm::Squared), c.xi(Estimator::Natural, Norm::Squared));
    for k in 0..dd.len() {
        if rr[k] == 0.0 {
            continue;
        }
        // Corrfunc's convert_3d_counts_to_cf with ordered counts (2 DD, 2 RR) and TreeCorr's 0.5 W^2.
        let (f1, f2) = (fr / fd, fr / fd);
        let want_ls = (f1 * f2 * 2.0 * dd[k] - f1 * dr[k] - f2 * dr[k] + 2.0 * rr[k]) / (2.0 * rr[k]);
        let want_natural = f1 * f2 * dd[k] / rr[k] - 1.0;
        assert!((ls[k] - want_ls).abs() <= 1e-12 * want_ls.abs().max(1.0), "LS bucket {k}: {} vs {want_ls}", ls[k]);
        assert!((natural[k] - want_natural).abs() <= 1e-12 * want_natural.abs().max(1.0), "natural bucket {k}");
    }
    // The two norms differ by the factors N / (N - 1) of each catalogue.
    let pairs = c.xi(Estimator::Natural, Norm::Pairs);
    for k in 0..dd.len() {
        if rr[k] > 0.0 {
            let want = (1.0 + natural[k]) * (fd / (fd - 1.0)) / (fr / (fr - 1.0)) - 1.0;
            assert!((pairs[k] - want).abs() <= 1e-12 * want.abs().max(1.0), "bucket {k}: {} vs {want}", pairs[k]);
        }
    }
}

/// The bucket of the f32 minimum-image distance between a and b in a cube of side l.
fn periodic_bucket(a: &[f64; 3], b: &[f64; 3], l: f64, edges: &[f64]) -> Option<usize> {
    let d = (0..3)
        .map(|c| {
            let x = a[c] - b[c];
            (x - (x / l).round() * l).powi(2)
        })
        .sum::<f64>()
        .sqrt() as f32 as f64;
    (d >= edges[0] && d < edges[edges.len() - 1]).then(|| edges.partition_point(|e| *e <= d) - 1)
}

#[test]
fn periodic_xi_counts_minimum_images_against_analytic_randoms() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let problem = built_in("dd_periodic").unwrap();
    // Points on a grid of 1/16 in the unit box: every minimum image is exact.
    for (n, spacing) in [(3, Spacing::Linear), (700, Spacing::Linear), (900, Spacing::Log)] {
        let problem = problem.with_spacing(spacing).unwrap();
        let r_min = if spacing == Spacing::Log { "r_min=0.05" } else { "r_min=0" };
        let params = problem.bind(&["bins=9".into(), r_min.into(), "r_max=0.5".into(), "box=1".into()]).unwrap();
        let edges = histogram_edges(&problem, &params);
        let data = grid(&mut rng, n);
        let (c, runs) = count(
            &problem,
            &params,
            &Inputs { a: set(&data), b: None },
            None,
            Estimator::Natural,
            (Options::default(), &cpu()),
        )
        .unwrap();
        assert_eq!(runs.len(), 1, "DD alone is counted");
        let mut dd = vec![0.0; edges.len() - 1];
        for i in 0..n {
            for j in i + 1..n {
                if let Some(k) = periodic_bucket(&data[i], &data[j], 1.0, &edges) {
                    dd[k] += 1.0;
                }
            }
        }
        assert_eq!(c.dd, dd, "{n} points");
        assert_eq!(c.randoms, Randoms::Analytic { volume: 1.0 });
        for norm in [Norm::Pairs, Norm::Squared] {
            let total = match norm {
                Norm::Pairs => (n * (n - 1)) as f64 / 2.0,
                Norm::Squared => (n * n) as f64 / 2.0,
            };
            let (rr, xi) = (c.rr(norm), c.xi(Estimator::Natural, norm));
            assert_eq!(xi, c.xi(Estimator::LandySzalay, norm), "LS is the natural estimator with analytic randoms");
            for k in 0..dd.len() {
                let shell = 4.0 / 3.0 * std::f64::consts::PI * (edges[k + 1].powi(3) - edges[k].powi(3));
                assert!((rr[k] - total * shell).abs() <= 1e-12 * rr[k], "{norm:?} RR bucket {k}");
                let want = dd[k] / (total * shell) - 1.0;
                assert!((xi[k] - want).abs() <= 1e-12 * want.abs().max(1.0), "{norm:?} xi bucket {k}");
            }
        }
    }
}

#[test]
fn periodic_xi_refuses_shells_past_half_the_box_and_problems_without_a_box() {
    let problem = built_in("dd_periodic").unwrap();
    let one = Inputs { a: set(&[[0.1; 3], [0.5; 3]]), b: None };
    let params = problem.bind(&["r_max=0.6".into(), "box=1.1".into()]).unwrap();
    let e =
        count(&problem, &params, &one, None, Estimator::Natural, (Options::default(), &cpu())).unwrap_err().to_string();
    assert!(e.contains("last bucket edge 0.6") && e.contains("half the smallest width"), "{e}");
    let open = problem.bind(&["box=0".into()]).unwrap();
    let e =
        count(&problem, &open, &one, None, Estimator::Natural, (Options::default(), &cpu())).unwrap_err().to_string();
    assert!(e.contains("cannot count xi's pairs in a periodic box"), "{e}");
    let sdh = built_in("sdh").unwrap();
    let e = count(&sdh, &sdh.bind(&[]).unwrap(), &one, None, Estimator::Natural, (Options::default(), &cpu()))
        .unwrap_err()
        .to_string();
    assert!(e.contains("problem `sdh` cannot count xi's pairs in a periodic box"), "{e}");
}

/// One run of bench/xi-peers.py, kept in tests/peers/xi: points and the
/// numbers Corrfunc 2.5.3 and TreeCorr 5.1.4 made of them. A recording, not a
/// live peer: Corrfunc builds against libgsl-dev, which CI lacks. The script
/// itself runs the peers on fresh points.
fn peers() -> (serde_json::Value, impl Fn(&str) -> Inputs) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/xi");
    let json = std::fs::read_to_string(dir.join("peers.json")).unwrap();
    let read = move |name: &str| {
        let comps = built_in("sdh").unwrap().input.element.components();
        let path = dir.join(format!("{name}.npy"));
        let a = twobs::data::read_input(path.to_str().unwrap(), &comps, &Default::default()).unwrap();
        Inputs { a, b: None }
    };
    (serde_json::from_str(&json).unwrap(), read)
}

fn numbers(v: &serde_json::Value) -> Vec<f64> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
}

/// Relative differences within 1e-12.
fn assert_close(ours: &[f64], theirs: &[f64], what: &str) {
    for (k, (a, b)) in ours.iter().zip(theirs).enumerate() {
        assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0), "{what} bucket {k}: {a} against {b}");
    }
}

#[test]
fn catalogue_counts_equal_corrfunc_and_squared_xi_equals_corrfunc_and_treecorr() {
    let (rec, read) = peers();
    let c = &rec["catalogue"];
    let edges = numbers(&c["edges"]);
    let problem = built_in("sdh").unwrap();
    let (lo, hi) = (edges[0], edges[edges.len() - 1]);
    let params =
        problem.bind(&[format!("bins={}", edges.len() - 1), format!("r_min={lo}"), format!("r_max={hi}")]).unwrap();
    assert_eq!(histogram_edges(&problem, &params), edges, "dyadic edges, the same on both sides");
    let (data, randoms) = (read("catalogue-data"), read("catalogue-randoms"));
    let (got, _) =
        count(&problem, &params, &data, Some(&randoms), Estimator::LandySzalay, (Options::default(), &cpu())).unwrap();
    // The recording's pairs near an edge (f64 distance within 2^-20 of it) might
    // have fallen either side in f32; in this recording none did, so counts are equal.
    println!("pairs near an edge: {}", c["near_edges"]);
    let (dd, dr, rr) = counted(&got);
    assert_eq!((dd, dr.unwrap(), rr), (&numbers(&c["dd"]), &numbers(&c["dr"]), &numbers(&c["rr"])));
    let xi = got.xi(Estimator::LandySzalay, Norm::Squared);
    assert_close(&xi, &numbers(&c["xi_corrfunc"]), "xi against Corrfunc's convert_3d_counts_to_cf");
    assert_close(&xi, &numbers(&c["xi_treecorr"]), "xi against TreeCorr's calculateXi");
    // The default divides by N(N - 1) / 2: about 1 / N away from the peers.
    let pairs = got.xi(Estimator::LandySzalay, Norm::Pairs);
    assert!(pairs.iter().zip(&xi).all(|(p, s)| (p - s).abs() > 1e-6), "{pairs:?} vs {xi:?}");
}

#[test]
fn periodic_counts_equal_corrfunc_periodic_dd_and_xi_equals_corrfunc_theory_xi() {
    let (rec, read) = peers();
    let b = &rec["box"];
    let edges = numbers(&b["edges"]);
    let problem = built_in("dd_periodic").unwrap();
    let (lo, hi) = (edges[0], edges[edges.len() - 1]);
    let args = [
        format!("bins={}", edges.len() - 1),
        format!("r_min={lo}"),
        format!("r_max={hi}"),
        format!("box={}", b["side"]),
    ];
    let params = problem.bind(&args).unwrap();
    let (got, _) =
        count(&problem, &params, &read("box-data"), None, Estimator::Natural, (Options::default(), &cpu())).unwrap();
    println!("pairs near an edge: {}", b["near_edges"]);
    assert_eq!(got.dd, numbers(&b["dd"]), "DD against Corrfunc's theory.DD, periodic=True (each pair once)");
    assert_close(&got.xi(Estimator::Natural, Norm::Pairs), &numbers(&b["xi_corrfunc"]), "xi against theory.xi");
}

fn patches_of(name: &str) -> Vec<u32> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/peers/xi/{name}.npy"));
    let comps = [twobs::spec::Component { name: "patch".into(), scalar: twobs::spec::Scalar::F64 }];
    let set = twobs::data::read_input(path.to_str().unwrap(), &comps, &Default::default()).unwrap();
    (0..set.len()).map(|i| set.columns[0].get_f64(i) as u32).collect()
}

#[test]
fn jackknife_covariance_equals_treecorrs() {
    let (rec, read) = peers();
    let c = &rec["catalogue"];
    let edges = numbers(&c["edges"]);
    let problem = built_in("sdh").unwrap();
    let params = problem
        .bind(&[format!("bins={}", edges.len() - 1), format!("r_min={}", edges[0]), format!("r_max={}", edges[12])])
        .unwrap();
    let (data, randoms) = (read("catalogue-data"), read("catalogue-randoms"));
    let (pd, pr) = (patches_of("catalogue-data-patches"), patches_of("catalogue-random-patches"));
    let (full, _) =
        count(&problem, &params, &data, Some(&randoms), Estimator::LandySzalay, (Options::default(), &cpu())).unwrap();
    let j = jackknife(
        &problem,
        &params,
        (&data, &pd),
        Some((&randoms, &pr)),
        Estimator::LandySzalay,
        Norm::Squared,
        &full,
        (Options::default(), &cpu()),
    )
    .unwrap();
    assert_eq!(j.xi.len(), 4);
    let theirs: Vec<Vec<f64>> = c["cov_treecorr"].as_array().unwrap().iter().map(numbers).collect();
    let largest = theirs.iter().flatten().fold(0.0f64, |m, x| m.max(x.abs()));
    for (i, (ours, theirs)) in j.covariance.iter().zip(&theirs).enumerate() {
        for (k, (a, b)) in ours.iter().zip(theirs).enumerate() {
            assert!((a - b).abs() <= 1e-10 * largest, "covariance ({i}, {k}): {a} against TreeCorr's {b}");
        }
    }
}

#[test]
fn jackknife_leaves_each_patch_out_as_counting_without_it_would() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let problem = log_sdh();
    let params = problem.bind(&["bins=6".into(), "r_min=0.1".into(), "r_max=0.8".into()]).unwrap();
    let (nd, nr) = (240, 330);
    let (data, randoms) = (grid(&mut rng, nd), grid(&mut rng, nr));
    // Three patches by x, and one (3) that holds randoms only.
    let patch = |p: &[f64; 3]| {
        if p[0] < 0.3 {
            0
        } else if p[0] < 0.6 {
            1
        } else {
            2
        }
    };
    let pd: Vec<u32> = data.iter().map(patch).collect();
    let pr: Vec<u32> = randoms.iter().enumerate().map(|(i, p)| if i % 50 == 0 { 3 } else { patch(p) }).collect();
    let inputs = |p: &[[f64; 3]]| Inputs { a: set(p), b: None };
    for (estimator, norm) in [(Estimator::LandySzalay, Norm::Squared), (Estimator::Natural, Norm::Pairs)] {
        let (full, _) =
            count(&problem, &params, &inputs(&data), Some(&inputs(&randoms)), estimator, (Options::default(), &cpu()))
                .unwrap();
        let j = jackknife(
            &problem,
            &params,
            (&inputs(&data), &pd),
            Some((&inputs(&randoms), &pr)),
            estimator,
            norm,
            &full,
            (Options::default(), &cpu()),
        )
        .unwrap();
        let mut xs = Vec::new();
        for k in 0..4 {
            let keep = |points: &[[f64; 3]], patches: &[u32]| -> Vec<[f64; 3]> {
                points.iter().zip(patches).filter(|(_, p)| **p != k).map(|(x, _)| *x).collect()
            };
            let (d, r) = (keep(&data, &pd), keep(&randoms, &pr));
            let (without, _) =
                count(&problem, &params, &inputs(&d), Some(&inputs(&r)), estimator, (Options::default(), &cpu()))
                    .unwrap();
            let want = without.xi(estimator, norm);
            assert_close(&j.xi[k as usize], &want, &format!("{estimator:?} {norm:?} without patch {k}"));
            xs.push(want);
        }
        let mean: Vec<f64> = (0..6).map(|i| xs.iter().map(|x| x[i]).sum::<f64>() / 4.0).collect();
        for i in 0..6 {
            let want = 0.75 * xs.iter().map(|x| (x[i] - mean[i]).powi(2)).sum::<f64>();
            assert!((j.covariance[i][i] - want).abs() <= 1e-12 * want.max(1e-12), "variance {i}");
        }
    }
}

#[test]
fn jackknife_refuses_analytic_randoms_too_few_patches_and_miscounted_ones() {
    let problem = built_in("sdh").unwrap();
    let params = problem.bind(&["bins=2".into(), "r_max=1".into()]).unwrap();
    let one = Inputs { a: set(&[[0.0; 3], [0.5; 3]]), b: None };
    let (full, _) =
        count(&problem, &params, &one, Some(&one), Estimator::Natural, (Options::default(), &cpu())).unwrap();
    let jk = |d: &[u32], r: Option<&[u32]>| {
        jackknife(
            &problem,
            &params,
            (&one, d),
            r.map(|r| (&one, r)),
            Estimator::Natural,
            Norm::Pairs,
            &full,
            (Options::default(), &cpu()),
        )
        .unwrap_err()
        .to_string()
    };
    assert!(jk(&[0, 1], None).contains("give randoms"));
    assert!(jk(&[0, 0], Some(&[0, 0])).contains("at least 2"));
    assert!(jk(&[0, 1, 1], Some(&[0, 1])).contains("data patches: 3 patch numbers for 2 points"));
}

/// Points on the sky as `twobs xi --radec` reads them: RA, Dec in degrees.
fn sky_set(points: &[[f64; 2]]) -> PointSet {
    PointSet {
        columns: (0..2).map(|c| Column::F64(points.iter().map(|p| p[c]).collect())).collect(),
        origin: "sky".into(),
        rows: None,
    }
}

/// The angle in degrees between two points of the sky, in the f64 arithmetic of problems/angle.cu.
fn angle(a: [f64; 2], b: [f64; 2]) -> f64 {
    let unit = |[ra, dec]: [f64; 2]| {
        let (a, d) = (ra.to_radians(), dec.to_radians());
        [d.cos() * a.cos(), d.cos() * a.sin(), d.sin()]
    };
    let (u, v) = (unit(a), unit(b));
    let (dx, dy, dz) = (u[0] - v[0], u[1] - v[1], u[2] - v[2]);
    let half_chord = 0.5 * (dx * dx + dy * dy + dz * dz).sqrt();
    2.0 * half_chord.min(1.0).asin() * 57.29577951308232
}

#[test]
fn angular_counts_match_a_brute_force_reference_in_degrees() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let problem = built_in("ddtheta").unwrap();
    let params = problem.bind(&["bins=7".into(), "theta_min=0.5".into(), "theta_max=25".into()]).unwrap();
    let edges = histogram_edges(&problem, &params);
    let sky = |rng: &mut rand::rngs::StdRng, n: usize| -> Vec<[f64; 2]> {
        (0..n).map(|_| [rng.random_range(0.0..360.0), rng.random_range(-1.0f64..1.0).asin().to_degrees()]).collect()
    };
    let bucket = |t: f64| (t >= edges[0] && t < edges[7]).then(|| edges.partition_point(|e| *e <= t) - 1);
    for (nd, nr) in [(2, 3), (400, 650)] {
        let (data, randoms) = (sky(&mut rng, nd), sky(&mut rng, nr));
        let inputs = |p: &[[f64; 2]]| Inputs { a: twobs::xi::unit_vectors(&sky_set(p)).unwrap(), b: None };
        let (c, _) = count(
            &problem,
            &params,
            &inputs(&data),
            Some(&inputs(&randoms)),
            Estimator::LandySzalay,
            (Options::default(), &cpu()),
        )
        .unwrap();
        let (mut dd, mut dr, mut rr) = (vec![0.0; 7], vec![0.0; 7], vec![0.0; 7]);
        for (i, p) in data.iter().enumerate() {
            data[i + 1..].iter().filter_map(|q| bucket(angle(*p, *q))).for_each(|k| dd[k] += 1.0);
            randoms.iter().filter_map(|q| bucket(angle(*p, *q))).for_each(|k| dr[k] += 1.0);
        }
        for (i, p) in randoms.iter().enumerate() {
            randoms[i + 1..].iter().filter_map(|q| bucket(angle(*p, *q))).for_each(|k| rr[k] += 1.0);
        }
        assert_eq!(counted(&c), (&dd, Some(&dr), &rr), "{nd} data, {nr} randoms");
    }
}

#[test]
fn sky_outside_the_sphere_is_refused_with_its_row() {
    let e = twobs::xi::unit_vectors(&sky_set(&[[10.0, 5.0], [370.0, -90.0], [1.0, 90.5]])).unwrap_err().to_string();
    assert!(e.contains("sky: row 3: RA 1, Dec 90.5 is not a point on the sky"), "{e}");
    let e = twobs::xi::unit_vectors(&sky_set(&[[f64::NAN, 5.0]])).unwrap_err().to_string();
    assert!(e.contains("row 1: RA NaN"), "{e}");
}

#[test]
fn angular_counts_equal_corrfunc_ddtheta_mocks_and_w_theta_equals_corrfunc_and_treecorr() {
    let (rec, _) = peers();
    let s = &rec["sky"];
    let edges = numbers(&s["edges"]);
    let problem = built_in("ddtheta").unwrap();
    let params = problem
        .bind(&[
            format!("bins={}", edges.len() - 1),
            format!("theta_min={}", edges[0]),
            format!("theta_max={}", edges[16]),
        ])
        .unwrap();
    assert_eq!(histogram_edges(&problem, &params), edges);
    let sky = |name: &str| {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/xi");
        let comps = ["ra", "dec"].map(|n| twobs::spec::Component { name: n.into(), scalar: twobs::spec::Scalar::F64 });
        let path = dir.join(format!("{name}.npy"));
        let set = twobs::data::read_input(path.to_str().unwrap(), &comps, &Default::default()).unwrap();
        Inputs { a: twobs::xi::unit_vectors(&set).unwrap(), b: None }
    };
    let (got, _) = count(
        &problem,
        &params,
        &sky("sky-data"),
        Some(&sky("sky-randoms")),
        Estimator::LandySzalay,
        (Options::default(), &cpu()),
    )
    .unwrap();
    println!("pairs within 1e-9 degrees of an edge: {}", s["near_edges"]);
    let (dd, dr, rr) = counted(&got);
    assert_eq!((dd, dr.unwrap(), rr), (&numbers(&s["dd"]), &numbers(&s["dr"]), &numbers(&s["rr"])));
    let w = got.xi(Estimator::LandySzalay, Norm::Squared);
    assert_close(&w, &numbers(&s["xi_corrfunc"]), "w(theta) against Corrfunc's convert_3d_counts_to_cf");
    assert_close(&w, &numbers(&s["xi_treecorr"]), "w(theta) against TreeCorr's (metric Arc)");
}
