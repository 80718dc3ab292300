//! Key edges against values, on the CPU: for the built-ins that test pairs on
//! their keys, every key of a stride through all 2^32 float bit patterns
//! (NaNs and infinities included) and every key within 512 ranks of each edge
//! gets the same slot from the edges as from its value. The exhaustive check of
//! all 2^32 keys runs on the GPU (tests/parity.rs, `keys/...`).

use twobs::backend::cpu::check_keys;
use twobs::cache::Cache;
use twobs::problems::built_in;
use twobs::spec::{Disk, Problem, Spacing};
use twobs::stage::contribution::EstimateError;

fn cache() -> Cache {
    Cache::at(concat!(env!("CARGO_TARGET_TMPDIR"), "/twobs-cache"))
}

/// Every 4099th rank of the 2^32: about a million keys, all over the range.
const STRIDE: (u64, u64, u64) = (0, (1u64 << 32) / 4099, 4099);
const AROUND: u64 = 512;

/// Checks the keys of `problem` with `params` (a count's indicators too).
fn check(problem: &Problem, params: &[&str]) {
    let params = problem.bind(&params.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    let got = check_keys(problem, &params, &cache(), STRIDE, AROUND).unwrap().expect("tested on keys");
    println!("{} {params:?}: {} keys checked, {} mismatches", problem.name, got.checked, got.mismatches);
    assert!(got.checked > 1_000_000);
    assert_eq!(got.mismatches, 0, "{} {params:?}: first mismatch at rank {:?}", problem.name, got.first_bad);
    // On the host the built-ins' estimate is sqrtf, their map's own value.
    assert_eq!(got.estimate_error, 0.0, "{} {params:?}", problem.name);
}

#[test]
fn histogram_edges_give_every_key_its_values_bucket() {
    let sdh = built_in("sdh").unwrap();
    for bins in ["bins=1", "bins=50", "bins=97", "bins=500", "bins=4000"] {
        check(&sdh, &[bins]);
    }
    check(&sdh, &["bins=64", "r_max=0.25"]);
    let rdf = built_in("rdf").unwrap();
    check(&rdf, &["bins=53", "box=1"]);
    check(&rdf, &["bins=500", "box=0", "r_max=1.0"]);
}

#[test]
fn log_spaced_key_tables_give_every_key_its_values_bucket() {
    // The table of key edges (src/stage/bucket_table.rs): 20 buckets over
    // three decades (the cosmologists' DD(r)), one bucket, many narrow ones,
    // edges near 1 and far from it, and DD(r) in a periodic box.
    let sdh = built_in("sdh").unwrap().with_spacing(Spacing::Log).unwrap();
    for params in [
        &["bins=20", "r_min=0.001", "r_max=0.5"][..],
        &["bins=37", "r_min=0.01"],
        &["bins=1", "r_min=0.3", "r_max=0.31"],
        &["bins=300", "r_min=1e-5", "r_max=100"],
        &["bins=64", "r_min=1e-18", "r_max=1e18"],
        &["bins=7", "r_min=0.999", "r_max=1.001"],
    ] {
        check(&sdh, params);
    }
    let dd = built_in("dd_periodic").unwrap().with_spacing(Spacing::Log).unwrap();
    check(&dd, &["bins=53", "box=1", "r_min=0.01", "r_max=0.5"]);
}

#[test]
fn threshold_edges_give_every_key_its_values_test_and_indicator() {
    // The built-ins' NaN keys pass (root(NaN) is 0) where 0 passes, so those
    // counts count failures, from the first failing key on: subnormal
    // (r = 1e-20, the edge about 1e-40), or +inf where every finite key
    // passes (r = 3e38). At r = 0 nothing passes, NaN neither: that count
    // counts passes, up to a last passing key that is NaN.
    let tpcf = built_in("2pcf").unwrap();
    for r in ["r=0.1", "r=0.2", "r=0.0", "r=1e-20", "r=3e38"] {
        check(&tpcf, &[r]);
    }
    let join = built_in("selfjoin").unwrap();
    for eps in ["eps=0.05", "eps=0.2257", "eps=0"] {
        check(&join, &[eps]);
    }
}

/// A user's spec of 2-D points: `snippet` in f.cu beside t.xml, whose
/// `<function>` takes `function`'s attributes after `file="f.cu" name="f"`,
/// and whose output is `output`.
fn user_problem(snippet: &str, function: &str, output: &str) -> (tempfile::TempDir, Problem) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f.cu"), snippet).unwrap();
    let spec = dir.path().join("t.xml");
    std::fs::write(
        &spec,
        format!(
            r#"<problem name="user"><summary>s</summary><input sets="1" type="f32" dims="2"/>
<function file="f.cu" name="f" {function}/>
{output}</problem>"#
        ),
    )
    .unwrap();
    let p = Problem::parse(&std::fs::read_to_string(&spec).unwrap(), &spec, &Disk).unwrap();
    (dir, p)
}

/// A user's count on keys: a signed key (a.x - b.x) under `map`, counted
/// below `threshold`.
fn signed_count(map: &str, threshold: &str) -> (tempfile::TempDir, Problem) {
    user_problem(
        &format!(
            "__device__ float dx(float2 a, float2 b) {{ return a.x - b.x; }}\n\
             __device__ float m(float k) {{ return {map}; }}\n\
             __device__ float f(float2 a, float2 b) {{ return m(dx(a, b)); }}\n"
        ),
        r#"key="dx" map="m""#,
        &format!(r#"<output kind="count" threshold="{threshold}" compare="lt"/>"#),
    )
}

#[test]
fn a_count_counts_passes_where_nan_fails_and_any_edge() {
    // Maps that keep NaN a NaN, which fails: the count counts passes, up to
    // the last passing key. Edges below zero, near zero, subnormal, at binade
    // bounds, large, and -inf (only -inf passes).
    for map in ["k", "k * 3.0f + 1.0f"] {
        for threshold in ["-0.3", "-2.0", "-1e-30", "0.5", "4.0", "1e30", "1e-40", "-1e-40", "-3.4028235e38"] {
            println!("map {map}, threshold {threshold}");
            let (_dir, p) = signed_count(map, threshold);
            check(&p, &[]);
        }
    }
}

#[test]
fn a_counts_edges_may_be_nan_or_infinite() {
    // Below 0.5 passes. Where NaN passes the count counts failures, from the
    // first failing key: -inf where every other key fails, NaN where none
    // does. Where NaN fails it counts passes, up to the last passing key: NaN
    // where none passes, +inf where every other key does.
    for map in ["k != k ? 0.0f : 1.0f", "k != k ? 0.0f : 0.0f", "k != k ? k : 1.0f", "k != k ? k : 0.0f"] {
        println!("map {map}");
        let (_dir, p) = signed_count(map, "0.5");
        check(&p, &[]);
    }
}

#[test]
fn a_broken_promise_is_caught() {
    // A map that decreases: the edges cannot describe it, and the probe says so.
    let (_dir, p) = user_problem(
        "__device__ float sq(float2 a, float2 b) { const float d = a.x - b.x; return d * d; }\n\
         __device__ float flip(float k) { return 1.0f - k; }\n\
         __device__ float f(float2 a, float2 b) { return flip(sq(a, b)); }\n",
        r#"symmetric="true" key="sq" map="flip""#,
        r#"<output kind="count" threshold="0.5" compare="lt"/>"#,
    );
    let params = p.bind(&[]).unwrap();
    let got = check_keys(&p, &params, &cache(), STRIDE, AROUND).unwrap().unwrap();
    assert!(got.mismatches > 0, "{got:?}");
}

#[test]
fn a_value_below_the_histogram_has_no_bucket_even_where_its_product_is_minus_zero() {
    // Buckets wider than 1 (scale < 1) over a signed key: a tiny negative
    // value times the scale rounds to -0, which is not in bucket 0 (the value
    // is below min), on the value's path as on the bracket's.
    for (bins, max) in [("1", "4"), ("10", "1000")] {
        let (_dir, p) = user_problem(
            "__device__ float dx(float2 a, float2 b) { return a.x - b.x; }\n\
             __device__ float same(float k) { return k; }\n\
             __device__ float f(float2 a, float2 b) { return same(dx(a, b)); }\n",
            r#"key="dx" map="same" estimate="same""#,
            &format!(r#"<output kind="histogram" bins="{bins}" min="0" max="{max}"/>"#),
        );
        let params = p.bind(&[]).unwrap();
        let got = check_keys(&p, &params, &cache(), STRIDE, AROUND).unwrap().unwrap();
        assert_eq!(got.mismatches, 0, "bins {bins}, max {max}: {got:?}");
    }
}

#[test]
fn the_brackets_scales_reach_the_error_below_and_the_error_and_a_rounding_above() {
    // S = 250 on sm_90 (p = 2^-23): S / (1 + p) rounded down, 2 floats under
    // S; S (1 + 2^-24) / (1 - p) rounded up, 3 floats over S, where without
    // the value's own rounding (2^-24) it would be 2, and with 2p, 4.
    let (below, above) = EstimateError::SqrtApproxOnSm90.bracket_scales(250.0);
    assert_eq!((below.to_bits(), above.to_bits()), (0x4379fffe, 0x437a0003), "{below} {above}");
}

#[test]
fn the_bracket_holds_estimates_at_the_edge_of_the_promise() {
    // Estimates up to 2^-21 above and below the value, the spec's promise
    // (the f32 rounding keeps them within it: 2^-21 - 1.02 x 2^-24 in f64,
    // then at most 2^-24 more): every key still gets its value's bucket, where
    // the bracket reaches about 2^-21 + 2^-24 each side.
    for (name, sign) in [("above", "+"), ("below", "-")] {
        let (_dir, p) = user_problem(
            &format!(
                "__device__ float sq(float2 a, float2 b) {{ const float d = a.x - b.x; return d * d; }}\n\
                 __device__ float root(float k) {{ return sqrtf(k > 0.0f ? k : 0.0f); }}\n\
                 __device__ float off(float k) {{ return (float)((double)sqrtf(k) * (1.0 {sign} (0x1p-21 - 0x1.02p-24))); }}\n\
                 __device__ float f(float2 a, float2 b) {{ return root(sq(a, b)); }}\n"
            ),
            r#"symmetric="true" key="sq" map="root" estimate="off""#,
            r#"<output kind="histogram" bins="97" min="0" max="2"/>"#,
        );
        let params = p.bind(&[]).unwrap();
        let got = check_keys(&p, &params, &cache(), STRIDE, AROUND).unwrap().unwrap();
        println!("{name}: {got:?}");
        assert_eq!(got.mismatches, 0, "{name}: {got:?}");
        let in_units = got.estimate_error * (1u64 << 21) as f64;
        assert!((0.75..=1.0).contains(&in_units), "{name}: {in_units} x 2^-21: {got:?}");
    }
}

#[test]
fn the_probe_measures_a_histograms_estimate() {
    // An estimate 2^-22 above the value, within the spec's promise of 2^-21:
    // every key still gets its value's bucket, and the probe measures 2^-22
    // (the product's rounding aside).
    let (_dir, p) = user_problem(
        "__device__ float sq(float2 a, float2 b) { const float d = a.x - b.x; return d * d; }\n\
         __device__ float root(float k) { return sqrtf(k > 0.0f ? k : 0.0f); }\n\
         __device__ float high(float k) { return sqrtf(k) * 1.0000002384185791f; }\n\
         __device__ float f(float2 a, float2 b) { return root(sq(a, b)); }\n",
        r#"symmetric="true" key="sq" map="root" estimate="high""#,
        r#"<output kind="histogram" bins="97" min="0" max="2"/>"#,
    );
    let params = p.bind(&[]).unwrap();
    let got = check_keys(&p, &params, &cache(), STRIDE, AROUND).unwrap().unwrap();
    assert_eq!(got.mismatches, 0, "{got:?}");
    let in_units = got.estimate_error * (1u64 << 22) as f64;
    assert!((0.75..1.25).contains(&in_units), "{} x 2^-22: {got:?}", in_units);
}
