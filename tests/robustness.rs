//! Random and mutated input for the spec reader and every input reader: no
//! panic, and every error names the file (and, for a spec, the line and
//! column). The seed is printed; TWOBS_TEST_SEED repeats a run.

use std::path::Path;

use rand::{RngExt, SeedableRng};
use twobs::data::{InputOptions, read_input};
use twobs::problems::built_in;
use twobs::spec::{Files, Problem};

fn seed() -> u64 {
    let s = std::env::var("TWOBS_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
    });
    println!("TWOBS_TEST_SEED={s}");
    s
}

/// A few random edits: bytes inserted, deleted or replaced, with a bias to
/// the characters that matter to the format.
fn mutate(rng: &mut rand::rngs::StdRng, text: &[u8], alphabet: &[u8]) -> Vec<u8> {
    let mut out = text.to_vec();
    for _ in 0..rng.random_range(1..6) {
        let at = rng.random_range(0..=out.len());
        let byte = if rng.random_bool(0.8) { alphabet[rng.random_range(0..alphabet.len())] } else { rng.random() };
        match rng.random_range(0..3) {
            0 => out.insert(at, byte),
            1 if at < out.len() => {
                out.remove(at);
            }
            _ if at < out.len() => out[at] = byte,
            _ => out.push(byte),
        }
    }
    out
}

struct Snippet;

impl Files for Snippet {
    fn read(&self, _: &Path) -> Option<String> {
        Some("__device__ float d(float3 a, float3 b) { return a.x - b.x; }\n".into())
    }
}

#[test]
fn mutated_specs_never_panic_and_errors_name_file_line_and_column() {
    let good = r#"<problem name="t">
  <summary>a test</summary>
  <input sets="1" type="f32" dims="3"/>
  <function file="f.cu" name="d" symmetric="true"/>
  <output kind="histogram" bins="n" min="0" max="x"/>
  <param name="n" type="u32" default="10">buckets</param>
  <param name="x" type="f32" default="2.0"/>
</problem>
"#;
    let origin = Path::new("dir/t.xml");
    assert!(Problem::parse(good, origin, &Snippet).is_ok());
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let (mut errors, mut parsed) = (0, 0);
    for _ in 0..5000 {
        let bytes = mutate(&mut rng, good.as_bytes(), b"<>/=\"' \nabcdefghijklmnopqrstuvwxyz0123456789-.&;!?");
        let text = String::from_utf8_lossy(&bytes);
        match Problem::parse(&text, origin, &Snippet) {
            Ok(_) => parsed += 1,
            Err(e) => {
                errors += 1;
                let shown = e.to_string();
                let position = shown.strip_prefix("dir/t.xml:").and_then(|rest| {
                    let mut parts = rest.splitn(3, ':');
                    Some((parts.next()?.parse::<usize>().ok()?, parts.next()?.parse::<usize>().ok()?))
                });
                let (line, col) = position.unwrap_or_else(|| panic!("no file:line:col in `{shown}` for:\n{text}"));
                assert!(line >= 1 && line <= text.lines().count().max(1) + 1 && col >= 1, "{shown}\n{text}");
            }
        }
    }
    println!("{parsed} mutated specs parsed, {errors} refused with a position");
    assert!(errors > 1000);
}

#[test]
fn random_and_mutated_inputs_never_panic_and_errors_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed());
    let components = built_in("sdh").unwrap().input.element.components();
    let keys = built_in("nlj").unwrap().input.element.components();
    // Good files of every format, to mutate.
    let csv = b"x,y,z\n0.5,1,2\n3,4,5\n-1e3,2.5e-3,7\n".to_vec();
    let mut npy = Vec::new();
    {
        use npyz::WriterBuilder;
        let mut w = npyz::WriteOptions::new().default_dtype().shape(&[3, 3]).writer(&mut npy).begin_nd().unwrap();
        w.extend([1f32, 2., 3., 4., 5., 6., 7., 8., 9.]).unwrap();
        w.finish().unwrap();
    }
    let raw: Vec<u8> = [1f32, 2., 3., 4., 5., 6.].iter().flat_map(|x| x.to_le_bytes()).collect();
    let mut refused = 0;
    for round in 0..3000 {
        let (name, base, alphabet): (&str, &[u8], &[u8]) = match round % 3 {
            0 => ("in.csv", &csv, b"0123456789.,-+e \n\tnaif#x"),
            1 => ("in.npy", &npy, b"\x00\x01\x7f\xff{}'():,<f4u8i TrueFalse"),
            _ => ("in.bin", &raw, b"\x00\x01\x7f\x80\xff"),
        };
        let bytes = if rng.random_bool(0.1) {
            (0..rng.random_range(0..200)).map(|_| rng.random::<u8>()).collect()
        } else {
            mutate(&mut rng, base, alphabet)
        };
        let path = dir.path().join(name);
        std::fs::write(&path, &bytes).unwrap();
        let opts = InputOptions { dims: Some(3), ..Default::default() };
        for comps in [&components, &keys] {
            let opts = InputOptions { dims: Some(comps.len() as u32), ..opts.clone() };
            if let Err(e) = read_input(path.to_str().unwrap(), comps, &opts) {
                refused += 1;
                let shown = e.to_string();
                assert!(shown.contains(name), "`{shown}` does not name {name}");
            }
        }
    }
    println!("{refused} inputs refused, each naming its file");
    assert!(refused > 1000);
}

/// The first failure the mutations found: a multi-byte character before an
/// attribute put a byte offset inside it, and slicing there panicked.
#[test]
fn multibyte_characters_near_tags_give_positions_not_panics() {
    for text in [
        "<problem name=\"t\">\n  <summary>a\u{fffd} test</summary>\n  <input sets=\"1\" type=\"f32\" dims=\"é\"/>\n</problem>\n",
        "<problem näme=\"t\" ünit=\"1\"><input é=\"1\"/></problem>",
        "<problem name=\"ü\"><output kind=\"histogram\" bins=\"€\"/>",
        "<problem name=\"t\">\n<output kind=\"histogram\" bins=\"n\"\u{fffd}min=\"0\" max=\"x\"/>\n<param ype=\"u32\"/>\n</problem>",
    ] {
        let err = Problem::parse(text, Path::new("m.xml"), &Snippet).expect_err(text).to_string();
        assert!(err.starts_with("m.xml:"), "{err}");
    }
}

/// The command line, fed mutated specs, snippets, .npy and CSV inputs and
/// random options, for about 40 seconds on two threads (about 360 runs on the
/// development VM): no panic (status 70),
/// no abort or signal, no partial file left, an error names the file that was
/// mutated and prints each cause once. The seed is printed; TWOBS_TEST_SEED
/// repeats a run (the same rounds, as many as the time allows).
#[test]
fn the_command_line_never_panics_on_mutated_files_and_options() {
    use std::process::Command;
    use std::time::{Duration, Instant};

    let seed = seed();
    let deadline = Instant::now() + Duration::from_secs(40);
    let spec = "<problem name=\"fz\">\n  <summary>a fuzzed problem</summary>\n  <input sets=\"1\" type=\"f32\" dims=\"3\"/>\n  <function file=\"f.cu\" name=\"d\" symmetric=\"true\"/>\n  <output kind=\"histogram\" bins=\"n\" min=\"0\" max=\"x\"/>\n  <cutoff value=\"x\"/>\n  <param name=\"n\" type=\"u32\" default=\"10\">buckets</param>\n  <param name=\"x\" type=\"f32\" default=\"0.5\"/>\n</problem>\n";
    let snippet = "__device__ float d(float3 a, float3 b) {\n  float dx = a.x - b.x, dy = a.y - b.y, dz = a.z - b.z;\n  return sqrtf(dx * dx + dy * dy + dz * dz);\n}\n";
    let csv = "x,y,z\n0.5,0.25,0.125\n0.75,0.5,0.25\n0.1,0.2,0.3\n0.9,0.8,0.7\n";
    let mut npy = Vec::new();
    {
        use npyz::WriterBuilder;
        let mut w = npyz::WriteOptions::new().default_dtype().shape(&[4, 3]).writer(&mut npy).begin_nd().unwrap();
        w.extend([0.5f32, 0.25, 0.125, 0.75, 0.5, 0.25, 0.1, 0.2, 0.3, 0.9, 0.8, 0.7]).unwrap();
        w.finish().unwrap();
    }
    let rounds = std::sync::atomic::AtomicUsize::new(0);
    let worker = |w: u64| {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ (w << 56));
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let mut kinds = [0usize; 5];
        while Instant::now() < deadline {
            for (name, text) in
                [("spec.xml", spec.as_bytes()), ("f.cu", snippet.as_bytes()), ("pts.csv", csv.as_bytes())]
            {
                std::fs::write(d.join(name), text).unwrap();
            }
            std::fs::write(d.join("pts.npy"), &npy).unwrap();
            std::fs::write(d.join("w.txt"), "1\n2\n3\n4\n").unwrap();
            let kind = rng.random_range(0..5);
            kinds[kind] += 1;
            // The file mutated, and the command run on it.
            let (file, args): (Option<&str>, Vec<String>) = match kind {
                0 => {
                    let m = mutate(&mut rng, spec.as_bytes(), b"<>/=\"' \nabcdefghijklmnopqrstuvwxyz0123456789-.&;!?");
                    std::fs::write(d.join("spec.xml"), m).unwrap();
                    (Some("spec.xml"), words("run spec.xml --input pts.csv"))
                }
                1 => {
                    let m = mutate(&mut rng, snippet.as_bytes(), b"(){};,.+-*/=<>#\"' \nabdfxyzrt0123456789");
                    std::fs::write(d.join("f.cu"), m).unwrap();
                    (Some("f.cu"), words("run spec.xml --input pts.npy"))
                }
                2 => {
                    let m = mutate(&mut rng, &npy, b"\x00\x01\x7f\xff{}'():,<f4u8i TrueFalse");
                    std::fs::write(d.join("pts.npy"), m).unwrap();
                    (
                        Some("pts.npy"),
                        words(["run sdh --input pts.npy", "run knn --input pts.npy --param k=2"][w as usize]),
                    )
                }
                3 => {
                    let m = mutate(&mut rng, csv.as_bytes(), b"0123456789.,-+e \n\tnaif#x");
                    std::fs::write(d.join("pts.csv"), m).unwrap();
                    (Some("pts.csv"), words("run selfjoin --input pts.csv --param eps=0.5"))
                }
                _ => (None, random_options(&mut rng)),
            };
            let o = Command::new(env!("CARGO_BIN_EXE_twobs"))
                .env("TWOBS_CACHE", concat!(env!("CARGO_TARGET_TMPDIR"), "/twobs-cache"))
                .args(&args)
                .args(["--backend", "cpu", "--threads", "1"])
                .current_dir(d)
                .output()
                .unwrap();
            let e = String::from_utf8_lossy(&o.stderr);
            let shown = || format!("seed {seed}, worker {w}: twobs {}\n{e}", args.join(" "));
            let code = o.status.code().unwrap_or_else(|| panic!("killed by a signal ({:?}): {}", o.status, shown()));
            assert!(code != 70 && !e.contains("internal error"), "a panic: {}", shown());
            assert!(matches!(code, 0..=2), "status {code}: {}", shown());
            if code == 1 {
                let line = e.lines().find(|l| l.starts_with("error: ")).unwrap_or_else(|| panic!("{}", shown()));
                if let Some(file) = file {
                    assert!(e.contains(file), "the error does not name {file}: {}", shown());
                }
                let parts: Vec<&str> = line.split(": ").collect();
                assert!(parts.windows(2).all(|p| p[0] != p[1] || p[0].len() < 8), "a cause twice: {}", shown());
            }
            let left: Vec<String> = std::fs::read_dir(d)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains("partial"))
                .collect();
            assert!(left.is_empty(), "{left:?} left behind: {}", shown());
            rounds.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        kinds
    };
    let kinds: Vec<[usize; 5]> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2).map(|w| s.spawn(move || worker(w))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let rounds = rounds.into_inner();
    println!("{rounds} runs (spec, snippet, npy, csv, options per worker: {kinds:?})");
    assert!(rounds >= 40, "only {rounds} runs in the time");
}

fn words(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_owned).collect()
}

/// A `twobs run` (or `xi`) with random problems, inputs and options, valid or not.
fn random_options(rng: &mut rand::rngs::StdRng) -> Vec<String> {
    let pick = |rng: &mut rand::rngs::StdRng, xs: &[&str]| xs[rng.random_range(0..xs.len())].to_owned();
    let mut args = vec!["run".to_owned()];
    args.push(pick(
        rng,
        &["sdh", "2pcf", "knn", "selfjoin", "kde", "nlj", "rdf", "spec.xml", "nothing", "problems/x.xml"],
    ));
    for _ in 0..rng.random_range(0..3) {
        args.push("--input".into());
        let n = rng.random_range(0..1500).to_string();
        let input = pick(rng, &["uniform:N", "clustered:N", "exponential:N", "pts.npy", "pts.csv", "missing.npy"]);
        args.push(match rng.random_range(0..8) {
            0 => pick(rng, &["uniform:", "uniform:-3", "uniform:1e3", "uniform:99999999999999999999", "bad:5", ""]),
            _ => input.replace('N', &n),
        });
    }
    let values = ["0", "1", "2", "-1", "0.5", "1e30", "nan", "inf", "3000", "x", "", "1,2,3", "0.25,0.25,0.25"];
    for _ in 0..rng.random_range(0..4) {
        let value = pick(rng, &values);
        let option: Vec<String> = match rng.random_range(0..16) {
            0 => vec![
                "--param".into(),
                format!("{}={value}", pick(rng, &["bins", "r_max", "r", "eps", "k", "box", "h", "n", "x", "zz"])),
            ],
            1 => vec![
                "--out".into(),
                pick(rng, &["o.csv", "o.npy", "o.json", "o.txt", "-", "pts.npy", "dir/o.csv", "w.txt"]),
            ],
            2 => vec!["--format".into(), pick(rng, &["csv", "npy", "json", "xml"])],
            3 => vec!["--report".into(), pick(rng, &["r.json", "-", "o.csv", "pts.csv"])],
            4 => vec!["--plot".into(), pick(rng, &["p.png", "p.svg", "p.txt", "o.csv"])],
            5 => vec!["--index".into(), pick(rng, &["auto", "grid", "none", "rings"])],
            6 => vec!["--dims".into(), value],
            7 => vec!["--weights".into(), pick(rng, &["w.txt", "pts.npy", "missing.txt"])],
            8 => vec!["--outside-box".into(), pick(rng, &["wrap", "refuse", "fold"])],
            9 => vec![pick(rng, &["--symmetric", "--sorted", "--log-bins", "--frames", "--drop-nonfinite", "--f64"])],
            10 => vec!["--seed".into(), value],
            11 => vec!["--block-points".into(), value],
            12 => vec!["--copies".into(), value],
            13 => vec!["--verify".into()],
            14 => vec![pick(rng, &["--bogus", "-x", "--", "--input"])],
            _ => vec!["--threads".into(), pick(rng, &["1", "2", "x"])],
        };
        args.extend(option);
    }
    args
}
