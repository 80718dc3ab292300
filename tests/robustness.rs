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
