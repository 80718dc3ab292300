//! Resources (issue 30, items 11 and 12): what cannot fit the machine's
//! memory is refused early, naming what was asked and what the machine has;
//! the CPU's histogram copies are bounded; the spec reader has a depth
//! limit; a value the spec itself gets wrong is named at its line.

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{command, stderr, twobs};

/// An error (status 1, not an abort), quickly, that says what was asked and what the machine has.
fn refused_early(o: &Output, started: Instant, asked: &str) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(1), "{:?}: {e}", o.status);
    assert!(started.elapsed() < Duration::from_secs(60), "the error came late: {e}");
    assert!(e.contains(asked) && e.contains("of memory, and this machine has") && e.contains("available"), "{e}");
}

#[test]
fn a_set_larger_than_the_memory_is_refused_before_it_is_drawn() {
    let dir = tempfile::tempdir().unwrap();
    // 4e9 points of 3 values: 144 GB while they are drawn.
    let start = Instant::now();
    let o = twobs(dir.path(), &["run", "sdh", "--backend", "cpu", "--input", "uniform:4000000000"]);
    refused_early(&o, start, "uniform:4000000000: 4000000000 points of 3 values need");
    let o = twobs(dir.path(), &["xi", "--data", "uniform:10", "--randoms", "uniform:4000000000"]);
    refused_early(&o, start, "--randoms: uniform:4000000000");
}

#[test]
fn a_self_join_whose_pairs_cannot_fit_is_refused_early() {
    let dir = tempfile::tempdir().unwrap();
    // eps=10 over the unit cube: every one of 45e9 pairs passes, 360 GB of them.
    let start = Instant::now();
    let o =
        twobs(dir.path(), &["run", "selfjoin", "--backend", "cpu", "--input", "uniform:300000", "--param", "eps=10"]);
    refused_early(&o, start, "`selfjoin`: about 4499985");
    assert!(stderr(&o).contains("pairs pass (estimated from 64 rows"), "{}", stderr(&o));
}

#[test]
fn the_cpu_keeps_a_bounded_number_of_histogram_copies() {
    let dir = tempfile::tempdir().unwrap();
    // 4M buckets of 32 MB each; 2,000 points took 2.26 GB as 134 copies.
    #[allow(clippy::zombie_processes, reason = "reaped by wait4, which also gives its peak memory")]
    let child = command(dir.path())
        .args(["run", "sdh", "--backend", "cpu", "--input", "uniform:2000", "--param", "bins=4000000"])
        .args(["--out", "h.npy", "--quiet"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // wait4 gives this child's own peak resident memory.
    let (mut status, mut usage) = (0, unsafe { std::mem::zeroed::<libc::rusage>() });
    // SAFETY: waits for our own child, once; the rusage is plain data.
    let waited = unsafe { libc::wait4(child.id() as i32, &mut status, 0, &mut usage) };
    assert_eq!(waited, child.id() as i32);
    // Reaped by wait4 above: the Child has nothing left to wait for.
    drop(child);
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "status {status}");
    let peak_mib = usage.ru_maxrss / 1024;
    println!("peak resident memory: {peak_mib} MiB");
    assert!(peak_mib < 1024, "{peak_mib} MiB for 4M buckets");
    assert_eq!(std::fs::metadata(dir.path().join("h.npy")).unwrap().len(), 128 + 4_000_000 * 3 * 8);
}

#[test]
fn a_spec_nested_deep_is_an_error_at_its_line_not_a_stack_overflow() {
    let dir = tempfile::tempdir().unwrap();
    let n = 131_250;
    let spec = format!("<problem name=\"t\">\n{}{}</problem>\n", "<a>".repeat(n), "</a>".repeat(n));
    std::fs::write(dir.path().join("deep.xml"), spec).unwrap();
    let o = twobs(dir.path(), &["run", "deep.xml"]);
    assert_eq!(o.status.code(), Some(1), "{:?}", o.status);
    assert!(stderr(&o).contains("deep.xml:2:"), "{}", stderr(&o));
    assert!(stderr(&o).contains("is nested more than 64 elements deep"), "{}", stderr(&o));
}

/// A KNN spec with `k` (and a histogram spec with `min` and `max`) as given.
fn spec(dir: &Path, name: &str, output: &str, params: &str) {
    let text = format!(
        "<problem name=\"t\">\n  <summary>a test</summary>\n  <input sets=\"1\" type=\"f32\" dims=\"3\"/>\n  <function file=\"f.cu\" name=\"d\" symmetric=\"true\"/>\n  {output}\n{params}</problem>\n"
    );
    std::fs::write(dir.join(name), text).unwrap();
    std::fs::write(dir.join("f.cu"), "__device__ float d(float3 a, float3 b) { return fabsf(a.x - b.x); }\n").unwrap();
}

#[test]
fn a_value_the_spec_gets_wrong_is_named_at_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let run = |args: &[&str]| {
        let o = twobs(d, &[&["run"][..], args, &["--input", "uniform:10", "--backend", "cpu"]].concat());
        (o.status.code(), stderr(&o))
    };
    spec(d, "k.xml", "<output kind=\"knn\" k=\"1025\"/>", "");
    assert_eq!(run(&["k.xml"]), (Some(1), "error: k.xml:5:22: K (1025) must be between 1 and 1024\n".into()));
    spec(d, "h.xml", "<output kind=\"histogram\" bins=\"10\" min=\"5\" max=\"1\"/>", "");
    let (code, e) = run(&["h.xml"]);
    assert_eq!(code, Some(1));
    assert!(e.starts_with("error: h.xml:5:") && e.contains("min (5) must be below max (1)"), "{e}");
    // A default is named where the spec writes it, and --param can set another.
    let param = "  <param name=\"kk\" type=\"u32\" default=\"2000\"/>\n";
    spec(d, "kp.xml", "<output kind=\"knn\" k=\"kk\"/>", param);
    let (code, e) = run(&["kp.xml"]);
    assert_eq!(code, Some(1));
    assert!(e.contains("kp.xml:6:31: K (kk=2000) must be between 1 and 1024 (the default of `kk`"), "{e}");
    assert_eq!(run(&["kp.xml", "--param", "kk=3", "--quiet", "--out", "k.csv"]).0, Some(0));
    let (_, e) = run(&["kp.xml", "--param", "kk=3000"]);
    assert!(e.contains("K (kk=3000) must be between 1 and 1024") && !e.contains("kp.xml"), "{e}");
}
