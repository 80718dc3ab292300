//! Files lost or overwritten (issue 30, items 7 to 9): an output never
//! replaces an input or another output, the files of one result appear
//! together or not at all, and partial files are made exclusively and never
//! left behind.

use std::path::Path;
use std::process::Command;

mod common;

use common::{stderr, twobs};

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

fn no_partial_file(dir: &Path) {
    let names = names(dir);
    assert!(!names.iter().any(|n| n.contains("partial")), "left behind: {names:?}");
}

/// A 3-D point set as npy, in `dir/name`.
fn points_npy(dir: &Path, name: &str) -> Vec<u8> {
    let o = twobs(dir, &["run", "knn", "--backend", "cpu", "--input", "uniform:50", "--out", "seed.npy", "--quiet"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // The values file of a KNN run is a float32 N x K array: points of K values.
    std::fs::rename(dir.join("seed_values.npy"), dir.join(name)).unwrap();
    std::fs::remove_file(dir.join("seed.npy")).unwrap();
    std::fs::read(dir.join(name)).unwrap()
}

#[test]
fn an_output_never_replaces_an_input_and_the_error_comes_first() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pts = points_npy(d, "pts.npy");
    let start = std::time::Instant::now();
    // The result onto its own input, also through another spelling of the path.
    for out in ["pts.npy", "./pts.npy", "../{}/pts.npy"] {
        let out = out.replace("{}", &d.file_name().unwrap().to_string_lossy());
        let o = twobs(d, &["run", "sdh", "--backend", "cpu", "--input", "pts.npy", "--out", &out]);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains(&format!("--out {out}")) && e.contains("--input pts.npy"), "{e}");
        assert_eq!(std::fs::read(d.join("pts.npy")).unwrap(), pts, "the input was overwritten");
    }
    // KNN's values file is the input: refused before anything is computed.
    std::fs::rename(d.join("pts.npy"), d.join("q_values.npy")).unwrap();
    let o = twobs(d, &["run", "knn", "--backend", "cpu", "--input", "q_values.npy", "--out", "q.npy"]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("q_values.npy (beside q.npy)") && e.contains("--input q_values.npy"), "{e}");
    assert_eq!(std::fs::read(d.join("q_values.npy")).unwrap(), pts);
    assert!(!d.join("q.npy").exists());
    // Weights and the spec's own files are inputs too.
    std::fs::write(d.join("w.txt"), "1\n".repeat(50)).unwrap();
    let o = twobs(d, &["run", "sdh", "--backend", "cpu", "--input", "q_values.npy", "--weights", "w.txt"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = twobs(d, &["run", "sdh", "--input", "q_values.npy", "--weights", "w.txt", "--report", "w.txt"]);
    assert!(stderr(&o).contains("--report w.txt would replace --weights w.txt"), "{}", stderr(&o));
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/manhattan");
    for f in ["manhattan.xml", "manhattan.cu"] {
        std::fs::copy(spec.join(f), d.join(f)).unwrap();
    }
    let o = twobs(d, &["run", "manhattan.xml", "--input", "uniform:10", "--report", "manhattan.cu"]);
    assert!(stderr(&o).contains("--report manhattan.cu would replace its snippet manhattan.cu"), "{}", stderr(&o));
    assert_eq!(std::fs::read(d.join("manhattan.cu")).unwrap(), std::fs::read(spec.join("manhattan.cu")).unwrap());
    // xi's outputs and inputs likewise.
    let o = twobs(d, &["xi", "--data", "q_values.npy", "--randoms", "uniform:100", "--out", "q_values.npy"]);
    assert!(stderr(&o).contains("--out q_values.npy would replace --data q_values.npy"), "{}", stderr(&o));
    assert_eq!(std::fs::read(d.join("q_values.npy")).unwrap(), pts);
    assert!(start.elapsed().as_secs() < 60);
    no_partial_file(d);
}

#[test]
fn two_outputs_in_one_file_are_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Three million points would take minutes: the error must come first.
    let big = ["run", "sdh", "--backend", "cpu", "--input", "uniform:3000000"];
    let start = std::time::Instant::now();
    let o = twobs(d, &[&big[..], &["--out", "same.json", "--report", "same.json"]].concat());
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--report same.json would replace --out same.json"), "{}", stderr(&o));
    let o = twobs(
        d,
        &[&big[..], &["--out", "g.svg", "--format", "csv", "--report", "r.json", "--plot", "./g.svg"]].concat(),
    );
    assert!(stderr(&o).contains("--plot ./g.svg would replace --out g.svg"), "{}", stderr(&o));
    // The values file of KNN's result against the report.
    let o = twobs(d, &["run", "knn", "--input", "uniform:3000000", "--out", "k.npy", "--report", "k_values.npy"]);
    assert!(stderr(&o).contains("--report k_values.npy would replace its values file k_values.npy"), "{}", stderr(&o));
    assert!(start.elapsed().as_secs() < 30, "the errors came after computing");
    assert!(names(d).is_empty(), "{:?}", names(d));
}

#[test]
fn knn_values_path_is_checked_before_computing_and_neither_file_is_written_alone() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The values file cannot be made (a folder is in its place).
    std::fs::create_dir(d.join("q_values.npy")).unwrap();
    std::fs::write(d.join("q_values.npy/keep"), "a user's file").unwrap();
    let start = std::time::Instant::now();
    let o = twobs(d, &["run", "knn", "--backend", "cpu", "--input", "uniform:3000000", "--out", "q.npy"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("q_values.npy"), "{}", stderr(&o));
    assert!(start.elapsed().as_secs() < 30, "the values path was checked after computing");
    assert!(!d.join("q.npy").exists(), "the ids were written without their values");
    no_partial_file(d);
}

#[test]
fn the_files_of_one_result_are_put_in_place_together_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("ids.npy"), "old ids").unwrap();
    // A second file that cannot be put in place: a folder with a file in it.
    std::fs::create_dir(d.join("values.npy")).unwrap();
    std::fs::write(d.join("values.npy/keep"), "").unwrap();
    let ids = twobs::write::stage(&d.join("ids.npy"), |w| w.write_all(b"new ids")).unwrap();
    let values = twobs::write::stage(&d.join("values.npy"), |w| w.write_all(b"new values")).unwrap();
    let (path, _) = twobs::write::commit(vec![ids, values]).unwrap_err();
    assert_eq!(path, d.join("values.npy"));
    assert_eq!(std::fs::read_to_string(d.join("ids.npy")).unwrap(), "old ids", "one file of the result went alone");
    assert_eq!(names(d), ["ids.npy", "values.npy"]);
    // A first file that did not exist is removed again.
    std::fs::remove_file(d.join("ids.npy")).unwrap();
    let ids = twobs::write::stage(&d.join("ids.npy"), |w| w.write_all(b"new ids")).unwrap();
    let values = twobs::write::stage(&d.join("values.npy"), |w| w.write_all(b"new values")).unwrap();
    assert!(twobs::write::commit(vec![ids, values]).is_err());
    assert_eq!(names(d), ["values.npy"]);
    // Both in place when both can be.
    std::fs::remove_dir_all(d.join("values.npy")).unwrap();
    let ids = twobs::write::stage(&d.join("ids.npy"), |w| w.write_all(b"new ids")).unwrap();
    let values = twobs::write::stage(&d.join("values.npy"), |w| w.write_all(b"new values")).unwrap();
    twobs::write::commit(vec![ids, values]).unwrap();
    assert_eq!(std::fs::read_to_string(d.join("values.npy")).unwrap(), "new values");
    assert_eq!(names(d), ["ids.npy", "values.npy"]);
}

#[test]
fn partial_files_are_made_exclusively_and_follow_no_link() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let victim = d.join("victim");
    std::fs::write(&victim, "another user's file").unwrap();
    // Links planted at the names this process would have used before.
    let pid = std::process::id();
    for n in 0..2000 {
        std::os::unix::fs::symlink(&victim, d.join(format!(".r.csv.twobs-{pid}-{n}.partial"))).unwrap();
    }
    twobs::write::file_atomically(&d.join("r.csv"), |w| w.write_all(b"a result\n")).unwrap();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "another user's file");
    assert_eq!(std::fs::read_to_string(d.join("r.csv")).unwrap(), "a result\n");
    // A name that exists, as a file or a link, is never opened.
    let planted = d.join("planted");
    std::os::unix::fs::symlink(&victim, &planted).unwrap();
    let e = twobs::write::create_exclusive(&planted).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
    std::os::unix::fs::symlink(d.join("nowhere"), d.join("dangling")).unwrap();
    assert!(twobs::write::create_exclusive(&d.join("dangling")).is_err());
    assert!(!d.join("nowhere").exists(), "a dangling link was followed");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "another user's file");
}

#[test]
fn a_file_past_ulimit_f_is_an_error_that_leaves_no_partial_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The driver compiled first: the compiler must not meet the limit.
    let run = ["run", "selfjoin", "--backend", "cpu", "--input", "uniform:2000", "--param", "eps=2", "--quiet"];
    let o = twobs(d, &[&run[..], &["--out", "warm.csv"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    std::fs::remove_file(d.join("warm.csv")).unwrap();
    // About 20 MB of pairs against a limit of 64 KiB.
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -f 64; exec {} {} --out big.csv", env!("CARGO_BIN_EXE_twobs"), run.join(" ")))
        .env("TWOBS_CACHE", concat!(env!("CARGO_TARGET_TMPDIR"), "/twobs-cache"))
        .current_dir(d)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "killed rather than an error: {:?} {}", o.status, stderr(&o));
    // The cause once, though the message quotes it.
    assert!(stderr(&o).contains("cannot write big.csv: File too large"), "{}", stderr(&o));
    assert_eq!(stderr(&o).matches("File too large").count(), 1, "{}", stderr(&o));
    assert!(names(d).is_empty(), "{:?}", names(d));
}

#[test]
fn gen_cubin_is_never_written_through_a_link() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::os::unix::fs::symlink(d.join("elsewhere.cubin"), d.join("k.cubin")).unwrap();
    let o = twobs(d, &["gen", "2pcf", "--check", "--cubin", "k.cubin"]);
    let e = stderr(&o);
    if e.contains("libnvrtc") && e.contains("was found neither") {
        panic!("NVRTC is needed (LD_LIBRARY_PATH, scripts/test.sh): {e}");
    }
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(e.contains("k.cubin exists; twobs does not overwrite a file it did not write"), "{e}");
    assert!(!d.join("elsewhere.cubin").exists(), "the link was followed");
}
