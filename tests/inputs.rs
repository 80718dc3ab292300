//! Every class of bad input gets a clear error, and good inputs in every
//! format read the same points.

use std::path::{Path, PathBuf};
use std::process::Command;

use npyz::WriterBuilder;
use rand::{RngExt, SeedableRng};
use twobs::data::{Column, InputOptions, read_input};
use twobs::problems::built_in;
use twobs::spec::Component;

fn comps(name: &str) -> Vec<Component> {
    built_in(name).unwrap().input.element.components()
}

fn err(arg: &Path, name: &str, opts: InputOptions) -> String {
    format!("{:#}", read_input(arg.to_str().unwrap(), &comps(name), &opts).unwrap_err())
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn npy<T: npyz::AutoSerialize + Copy>(dir: &Path, name: &str, shape: &[u64], data: &[T]) -> PathBuf {
    let p = dir.join(name);
    let mut f = std::fs::File::create(&p).unwrap();
    let mut w = npyz::WriteOptions::new().default_dtype().shape(shape).writer(&mut f).begin_nd().unwrap();
    w.extend(data.iter().copied()).unwrap();
    w.finish().unwrap();
    p
}

#[test]
fn text_files_read_with_commas_spaces_comments_and_a_header() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "a.csv", "# comment\nx,y,z\n0.5,1,2\n3, 4 ,5\n");
    let s = read_input(p.to_str().unwrap(), &comps("sdh"), &InputOptions::default()).unwrap();
    assert_eq!(s.columns[0], Column::F32(vec![0.5, 3.0]));
    let p = write(dir.path(), "a.txt", "0.5 1 2\n3\t4 5\n\n");
    let t = read_input(p.to_str().unwrap(), &comps("sdh"), &InputOptions::default()).unwrap();
    assert_eq!(s.columns, t.columns);
}

#[test]
fn a_first_row_with_a_typo_is_an_error_not_a_header() {
    // Issue 30, item 6: `0.5,0.5,0.5O` on line 1 was taken as a header and
    // dropped; a header is a row none of whose fields is a number.
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(rand::rng().random());
    let row = |rng: &mut rand::rngs::StdRng| [0; 3].map(|_| rng.random::<f32>().to_string());
    let [x, y, z] = row(&mut rng);
    let rest: Vec<String> = (0..2).map(|_| row(&mut rng).join(",")).collect();
    let typo = format!("{x},{y},{z}O");
    for (text, line) in [(format!("{typo}\n{}\n", rest.join("\n")), 1), (format!("{}\n{typo}\n", rest[0]), 2)] {
        let p = write(dir.path(), "typo.csv", &text);
        let e = err(&p, "sdh", InputOptions::default());
        assert!(e.contains(&format!("typo.csv:{line}: field `z`: `{z}O` is not a number")), "{e}");
        assert_eq!(e.contains("a header line is skipped only when none of its fields is a number"), line == 1, "{e}");
    }
    // A row of names is still a header, with commas or spaces.
    for text in [format!("x,y,z\n{}\n", rest.join("\n")), format!("x y z\n{}\n", rest.join("\n").replace(',', " "))] {
        let p = write(dir.path(), "names.txt", &text);
        let s = read_input(p.to_str().unwrap(), &comps("sdh"), &InputOptions::default()).unwrap();
        assert_eq!(s.len(), 2, "{text}");
    }
}

#[test]
fn wrong_dimensions_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "a.csv", "1,2\n3,4\n");
    let e = err(&p, "sdh", InputOptions::default());
    assert!(e.contains("a.csv:1: 2 values on this line, expected 3 (x, y, z)"), "{e}");
    let p = npy(dir.path(), "a.npy", &[2, 2], &[1f32, 2., 3., 4.]);
    let e = err(&p, "sdh", InputOptions::default());
    assert!(e.contains("shape (2, 2), but the spec's element has 3 values (x, y, z)"), "{e}");
}

#[test]
fn a_ragged_line_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "a.csv", "1,2,3\n4,5,6\n7,8\n");
    let e = err(&p, "sdh", InputOptions::default());
    assert!(e.contains("a.csv:3: 2 values on this line, expected 3"), "{e}");
    let p = write(dir.path(), "b.csv", "1,2,3\n4,five,6\n");
    let e = err(&p, "sdh", InputOptions::default());
    assert!(e.contains("b.csv:2: field `y`: `five` is not a number"), "{e}");
}

#[test]
fn nan_and_infinity_are_refused_or_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "a.csv", "1,2,3\nnan,5,6\n7,8,inf\n0,0,0\n");
    let e = err(&p, "sdh", InputOptions::default());
    assert!(
        e.contains("row 1 (counting from 0) holds NaN or infinity, and 2 rows in all")
            && e.contains("--drop-nonfinite"),
        "{e}"
    );
    let s =
        read_input(p.to_str().unwrap(), &comps("sdh"), &InputOptions { drop_nonfinite: true, ..Default::default() })
            .unwrap();
    assert_eq!(s.len(), 2);
    assert_eq!((s.original_row(0), s.original_row(1)), (0, 3));
}

#[test]
fn empty_inputs_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "a.csv", "");
    assert!(err(&p, "sdh", InputOptions::default()).contains("a.csv: no points"));
    let p = write(dir.path(), "h.csv", "x,y,z\n");
    assert!(err(&p, "sdh", InputOptions::default()).contains("h.csv: no points"));
    let p = npy::<f32>(dir.path(), "e.npy", &[0, 3], &[]);
    assert!(err(&p, "sdh", InputOptions::default()).contains("the array is empty"));
    let p = write(dir.path(), "e.bin", "");
    assert!(err(&p, "sdh", InputOptions { dims: Some(3), ..Default::default() }).contains("the file is empty"));
}

#[test]
fn raw_binary_needs_dims_and_whole_records() {
    let dir = tempfile::tempdir().unwrap();
    let bytes: Vec<u8> = [1f32, 2., 3., 4., 5., 6.].iter().flat_map(|x| x.to_le_bytes()).collect();
    let p = dir.path().join("a.bin");
    std::fs::write(&p, &bytes).unwrap();
    assert!(err(&p, "sdh", InputOptions::default()).contains("needs --dims"));
    assert!(
        err(&p, "sdh", InputOptions { dims: Some(2), ..Default::default() })
            .contains("--dims 2, but the spec's element has 3")
    );
    let s =
        read_input(p.to_str().unwrap(), &comps("sdh"), &InputOptions { dims: Some(3), ..Default::default() }).unwrap();
    assert_eq!(s.columns[2], Column::F32(vec![3.0, 6.0]));
    std::fs::write(&p, &bytes[..10]).unwrap();
    assert!(
        err(&p, "sdh", InputOptions { dims: Some(3), ..Default::default() })
            .contains("10 bytes is not a whole number of 12-byte points")
    );
}

#[test]
fn npy_files_in_c_and_fortran_order_and_other_types() {
    let dir = tempfile::tempdir().unwrap();
    let p = npy(dir.path(), "a.npy", &[2, 3], &[1f64, 2., 3., 4., 5., 6.]);
    let s = read_input(p.to_str().unwrap(), &comps("sdh"), &InputOptions::default()).unwrap();
    assert_eq!(s.columns[0], Column::F32(vec![1.0, 4.0]));
    // Fortran order: columns are contiguous.
    let p = dir.path().join("f.npy");
    let mut f = std::fs::File::create(&p).unwrap();
    let mut w = npyz::WriteOptions::new()
        .default_dtype()
        .shape(&[2, 3])
        .order(npyz::Order::Fortran)
        .writer(&mut f)
        .begin_nd()
        .unwrap();
    w.extend([1f32, 4., 2., 5., 3., 6.]).unwrap();
    w.finish().unwrap();
    let t = read_input(p.to_str().unwrap(), &comps("sdh"), &InputOptions::default()).unwrap();
    assert_eq!(s.columns, t.columns);
    let p = npy(dir.path(), "u.npy", &[2, 3], &[1u8, 2, 3, 4, 5, 6]);
    assert!(err(&p, "sdh", InputOptions::default()).contains("element type `|u1` is not supported"));
}

#[test]
fn records_come_from_structured_arrays_csv_or_integers() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "k.csv", "key\n5\n-3\n");
    let s = read_input(p.to_str().unwrap(), &comps("nlj"), &InputOptions::default()).unwrap();
    assert_eq!(s.columns[0], Column::I32(vec![5, -3]));
    let p = write(dir.path(), "f.csv", "5\n2.5\n");
    assert!(err(&p, "nlj", InputOptions::default()).contains("f.csv:2: field `key`: 2.5 is not a whole number"));
    let p = write(dir.path(), "big.csv", "5\n3000000000\n");
    assert!(err(&p, "nlj", InputOptions::default()).contains("3000000000 does not fit i32"));
    // A structured array with the key among other fields.
    let p = dir.path().join("r.npy");
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    let mut header = "{'descr': [('id', '<i8'), ('key', '<i4')], 'fortran_order': False, 'shape': (2,), }".to_owned();
    while !(10 + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    bytes.extend((header.len() as u16).to_le_bytes());
    bytes.extend(header.as_bytes());
    for (id, key) in [(10i64, 7i32), (11, -2)] {
        bytes.extend(id.to_le_bytes());
        bytes.extend(key.to_le_bytes());
    }
    std::fs::write(&p, &bytes).unwrap();
    let s = read_input(p.to_str().unwrap(), &comps("nlj"), &InputOptions::default()).unwrap();
    assert_eq!(s.columns[0], Column::I32(vec![7, -2]));
    let e = err(&p, "sdh", InputOptions::default());
    assert!(e.contains("no field `x`; the file has id: i64, key: i32"), "{e}");
}

#[test]
fn generators_and_their_limits() {
    let s = read_input("clustered:1000", &comps("sdh"), &InputOptions { seed: 7, ..Default::default() }).unwrap();
    assert_eq!(s.len(), 1000);
    assert_eq!(
        s,
        read_input("clustered:1000", &comps("sdh"), &InputOptions { seed: 7, ..Default::default() }).unwrap()
    );
    assert_ne!(
        s,
        read_input("clustered:1000", &comps("sdh"), &InputOptions { seed: 8, ..Default::default() }).unwrap()
    );
    for (lo, hi) in s.bounds() {
        assert!(lo >= 0.0 && hi < 1.0);
    }
    let e = format!("{:#}", read_input("uniform:5000000000", &comps("sdh"), &InputOptions::default()).unwrap_err());
    assert!(e.contains("at most 4294967295 points per set"), "{e}");
    let e = format!("{:#}", read_input("gaussian:10", &comps("sdh"), &InputOptions::default()).unwrap_err());
    assert!(e.contains("no such file (a synthetic input is written uniform:N"), "{e}");
}

fn twobs(args: &[&str], dir: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_twobs")).args(args).current_dir(dir).output().unwrap()
}

#[test]
fn run_refuses_mismatched_sets_and_counts_of_inputs() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.csv", "1,2,3\n");
    write(dir.path(), "b.csv", "1,2\n");
    let o = twobs(&["run", "rdf", "--backend", "cpu", "--input", "a.csv", "--input", "b.csv"], dir.path());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("set B: b.csv:1: 2 values on this line, expected 3"), "{e}");
    let o = twobs(&["run", "nlj", "--backend", "cpu", "--input", "a.csv"], dir.path());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && e.contains("takes two sets (A x B): give --input twice, not once"), "{e}");
}

#[test]
fn run_selfjoin_on_a_csv_writes_pairs_and_a_report() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "points.csv", "0,0\n0.5,0\n3,4\n3,4.75\n10,10\n");
    let o = twobs(
        &[
            "run",
            "selfjoin",
            "--backend",
            "cpu",
            "--input",
            "points.csv",
            "--param",
            "eps=1.0",
            "--report",
            "r.json",
            "--sorted",
        ],
        dir.path(),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("2 pairs -> selfjoin_pairs.npy"));
    let pairs: Vec<u32> = npyz::NpyFile::new(std::fs::File::open(dir.path().join("selfjoin_pairs.npy")).unwrap())
        .unwrap()
        .into_vec()
        .unwrap();
    assert_eq!(pairs, vec![0, 1, 2, 3]);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(report["result"]["pairs"], 2);
    assert_eq!(report["backend"], "cpu");
    let o = twobs(
        &[
            "run",
            "selfjoin",
            "--backend",
            "cpu",
            "--input",
            "points.csv",
            "--param",
            "eps=1.0",
            "--symmetric",
            "--out",
            "s.csv",
            "--sorted",
        ],
        dir.path(),
    );
    assert!(o.status.success());
    let text = std::fs::read_to_string(dir.path().join("s.csv")).unwrap();
    assert_eq!(text.lines().count(), 1 + 2 * 2 + 5);
}

/// The CSV a histogram run wrote: (count, g) per bucket.
fn histogram_rows(path: &Path) -> Vec<(u64, f64)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[2].parse().unwrap(), f[3].parse().unwrap())
        })
        .collect()
}

#[test]
fn a_trajectory_adds_its_frames_and_averages_g_of_r() {
    use rand::{RngExt, SeedableRng};
    let dir = tempfile::tempdir().unwrap();
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    println!("seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let (frames, n) = (3usize, 400usize);
    let coords: Vec<f32> = (0..frames * n * 3).map(|_| rng.random::<f32>()).collect();
    npy(dir.path(), "traj.npy", &[frames as u64, n as u64, 3], &coords);
    for f in 0..frames {
        npy(dir.path(), &format!("f{f}.npy"), &[n as u64, 3], &coords[f * n * 3..(f + 1) * n * 3]);
    }
    let run = |args: &[&str], out: &str| {
        let mut all = vec!["run", "rdf", "--backend", "cpu", "--param", "bins=20", "--out", out];
        all.extend_from_slice(args);
        let o = twobs(&all, dir.path());
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let said = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
        (histogram_rows(&dir.path().join(out)), said)
    };
    let (whole, said) = run(&["--input", "traj.npy"], "whole.csv");
    assert!(said.contains("3 frames, totals summed over them"), "{said}");
    assert!(said.contains("summed over 3 frames"), "{said}");
    let singles: Vec<Vec<(u64, f64)>> =
        (0..frames).map(|f| run(&["--input", &format!("f{f}.npy")], &format!("s{f}.csv")).0).collect();
    for (k, &(count, g)) in whole.iter().enumerate() {
        assert_eq!(count, singles.iter().map(|s| s[k].0).sum::<u64>(), "bucket {k}");
        // Same atoms and box in every frame: the frames' g(r) averaged.
        let mean = singles.iter().map(|s| s[k].1).sum::<f64>() / frames as f64;
        assert!((g - mean).abs() <= 1e-12 * mean.abs().max(1.0), "bucket {k}: {g} against {mean}");
    }
    // --frames: the same frames as separate files give the same file.
    let (listed, _) = run(&["--frames", "--input", "f0.npy", "--input", "f1.npy", "--input", "f2.npy"], "listed.csv");
    assert_eq!(listed, whole);
    // A x B where A moves and B stays put.
    let (moving, _) = run(&["--input", "traj.npy", "--input", "f0.npy"], "moving.csv");
    let pairs: Vec<u64> = (0..frames)
        .map(|f| run(&["--input", &format!("f{f}.npy"), "--input", "f0.npy"], "ab.csv").0.iter().map(|r| r.0).sum())
        .collect();
    assert_eq!(moving.iter().map(|r| r.0).sum::<u64>(), pairs.iter().sum::<u64>());
}

#[test]
fn trajectories_are_refused_where_frames_do_not_add_up() {
    let dir = tempfile::tempdir().unwrap();
    let coords: Vec<f32> = (0..2 * 5 * 3).map(|i| i as f32 / 30.0).collect();
    npy(dir.path(), "two.npy", &[2, 5, 3], &coords);
    npy(dir.path(), "three.npy", &[3, 5, 3], &(0..45).map(|i| i as f32 / 45.0).collect::<Vec<_>>());
    let fail = |args: &[&str], expect: &str| {
        let o = twobs(args, dir.path());
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && e.contains(expect), "{args:?}: {e}");
    };
    fail(
        &["run", "rdf", "--backend", "cpu", "--input", "two.npy", "--input", "three.npy"],
        "set A has 2 frames and set B 3",
    );
    let planar: Vec<f32> = (0..2 * 5 * 2).map(|i| i as f32 / 20.0).collect();
    npy(dir.path(), "planar.npy", &[2, 5, 2], &planar);
    fail(
        &["run", "selfjoin", "--backend", "cpu", "--input", "planar.npy"],
        "2 frames: frames add up for counts, sums and histograms, but problem `selfjoin` makes pairs",
    );
    let e = err(&dir.path().join("two.npy"), "sdh", InputOptions::default());
    assert!(e.contains("a 3-D array of 2 frames, where one set of points was expected"), "{e}");
    // A header promising more than the file holds is refused before anything is allocated.
    let mut header = "{'descr': '<f4', 'fortran_order': False, 'shape': (4000000000000, 3), }".to_owned();
    while !(10 + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    let mut forged = b"\x93NUMPY\x01\x00".to_vec();
    forged.extend_from_slice(&(header.len() as u16).to_le_bytes());
    forged.extend_from_slice(header.as_bytes());
    forged.extend_from_slice(&[0u8; 16]);
    let p = dir.path().join("short.npy");
    std::fs::write(&p, forged).unwrap();
    let e = err(&p, "sdh", InputOptions::default());
    assert!(e.contains("its header promises 4000000000000 points of 12 bytes"), "{e}");
}

#[test]
fn pairs_written_as_they_lie_read_back_as_the_csvs_pairs() {
    // Unsorted npy pairs go out as the run holds them (header, then the
    // bytes); they must read back, through an npy reader, as the same set
    // the CSV writer gives.
    let dir = tempfile::tempdir().unwrap();
    let args = |out: &str| {
        ["run", "selfjoin", "--backend", "cpu", "--input", "uniform:2000", "--seed", "11", "--param", "eps=0.05"]
            .iter()
            .map(|s| s.to_string())
            .chain(["--out".to_string(), out.to_string(), "--quiet".to_string()])
            .collect::<Vec<_>>()
    };
    for out in ["p.npy", "p.csv"] {
        let a = args(out);
        let o = twobs(&a.iter().map(String::as_str).collect::<Vec<_>>(), dir.path());
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let npy = npyz::NpyFile::new(std::fs::File::open(dir.path().join("p.npy")).unwrap()).unwrap();
    assert_eq!(npy.shape().len(), 2);
    assert_eq!(npy.shape()[1], 2);
    let flat: Vec<u32> = npy.into_vec().unwrap();
    let mut from_npy: Vec<[u32; 2]> = flat.chunks(2).map(|p| [p[0], p[1]]).collect();
    let csv = std::fs::read_to_string(dir.path().join("p.csv")).unwrap();
    let mut from_csv: Vec<[u32; 2]> = csv
        .lines()
        .skip(1)
        .map(|l| {
            let (i, j) = l.split_once(',').unwrap();
            [i.parse().unwrap(), j.parse().unwrap()]
        })
        .collect();
    assert!(from_csv.len() > 100, "{} pairs prove little", from_csv.len());
    from_npy.sort_unstable();
    from_csv.sort_unstable();
    assert_eq!(from_npy, from_csv);
}
