//! docs/spec.md documents every name the spec reader accepts: each element
//! in its own section, each attribute in its element's (or output kind's)
//! section, each fixed value somewhere; and the reader accepts exactly the
//! vocabulary the document is checked against.

use std::path::Path;

use twobs::spec::{Problem, Scalar, SpecError, vocabulary as v};

fn doc() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/spec.md")).unwrap()
}

/// The text from the heading that contains `title` to the next heading of the same or a higher level.
fn section<'a>(doc: &'a str, title: &str) -> &'a str {
    let lines: Vec<&str> = doc.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.starts_with('#') && l.contains(title))
        .unwrap_or_else(|| panic!("docs/spec.md has no heading with {title}"));
    let level = lines[start].chars().take_while(|&c| c == '#').count();
    let end = (start + 1..lines.len())
        .find(|&k| lines[k].starts_with('#') && lines[k].chars().take_while(|&c| c == '#').count() <= level)
        .unwrap_or(lines.len());
    let from = lines[..start].iter().map(|l| l.len() + 1).sum::<usize>();
    let to = lines[..end].iter().map(|l| l.len() + 1).sum::<usize>().min(doc.len());
    &doc[from..to]
}

#[test]
fn the_document_names_every_element_attribute_and_value() {
    let doc = doc();
    let mut missing = Vec::new();
    let elements: [(&str, &[&str]); 8] = [
        ("problem", v::PROBLEM),
        ("summary", v::SUMMARY),
        ("param", v::PARAM),
        ("input", v::INPUT),
        ("field", v::FIELD),
        ("function", v::FUNCTION),
        ("cutoff", v::CUTOFF),
        ("output", &["kind"]),
    ];
    for (element, attributes) in elements {
        let s = section(&doc, &format!("`<{element}>`"));
        for a in attributes {
            if !s.contains(&format!("`{a}`")) {
                missing.push(format!("attribute `{a}` of <{element}>"));
            }
        }
    }
    for child in v::PROBLEM_CHILDREN.iter().chain(v::INPUT_CHILDREN) {
        if !doc.contains(&format!("`<{child}>`")) {
            missing.push(format!("element <{child}>"));
        }
    }
    for (kind, attributes) in v::OUTPUT_KINDS {
        let s = section(&doc, &format!("`kind=\"{kind}\"`"));
        for a in attributes.iter().filter(|a| **a != "kind") {
            if !s.contains(&format!("`{a}`")) {
                missing.push(format!("attribute `{a}` of output kind {kind}"));
            }
        }
    }
    let values = v::SETS.iter().chain(v::BOOLEAN).chain(v::COMPARE).chain(v::NORMALIZE).chain(v::SPACING);
    let values = values.chain(Scalar::NAMES.iter());
    for value in values.chain([&v::BOX_TYPE]) {
        if !doc.contains(&format!("`{value}`")) && !doc.contains(&format!("`{value}` ")) {
            missing.push(format!("value `{value}`"));
        }
    }
    assert!(missing.is_empty(), "docs/spec.md does not document:\n{}", missing.join("\n"));
}

fn parse(output: &str, function: &str) -> Result<Problem, SpecError> {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("f.cu"),
        "__device__ float d(float3 a, float3 b) { return a.x - b.x; }\n\
         __device__ float sq(float3 a, float3 b) { return a.x * b.x; }\n\
         __device__ float m(float k) { return k; }\n",
    )
    .unwrap();
    let spec = dir.path().join("t.xml");
    let text = format!(
        "<problem name=\"t\"><summary>s</summary><input sets=\"1\" type=\"f32\" dims=\"3\"/>\n\
         <function file=\"f.cu\" name=\"d\" {function}/>\n{output}\n\
         <param name=\"n\" type=\"u32\" default=\"4\"/><param name=\"x\" type=\"f32\" default=\"1.5\"/></problem>"
    );
    std::fs::write(&spec, &text).unwrap();
    Problem::parse(&text, &spec, &twobs::spec::Disk)
}

#[test]
fn the_reader_accepts_every_listed_attribute_and_value() {
    let full: [(&str, &str); 5] = [
        ("count", r#"<output kind="count" threshold="x" compare="lt"/>"#),
        ("sum", r#"<output kind="sum"/>"#),
        (
            "histogram",
            r#"<output kind="histogram" bins="n" min="0" max="x" normalize="rdf" weight="sq" spacing="linear"/>"#,
        ),
        ("pairs", r#"<output kind="pairs" threshold="x" compare="le" estimate="10"/>"#),
        ("knn", r#"<output kind="knn" k="n"/>"#),
    ];
    for (kind, output) in full {
        let attributes = v::output_attributes(kind).unwrap();
        for a in attributes {
            assert!(output.contains(&format!(" {a}=")), "{kind}: the test spec lacks `{a}`");
        }
        let got = parse(output, "symmetric=\"true\" returns=\"f32\" key=\"sq\" map=\"m\" estimate=\"m\"");
        // normalize="rdf" with a weight is refused on purpose; both are accepted alone.
        if kind == "histogram" {
            let e = got.unwrap_err();
            assert!(e.message.contains("does not go with a weight"), "{e}");
            for alone in [r#"normalize="rdf""#, r#"weight="sq""#] {
                let o = format!(r#"<output kind="histogram" bins="n" min="0" max="x" {alone}/>"#);
                parse(&o, "").unwrap_or_else(|e| panic!("{o}: {e}"));
            }
        } else {
            got.unwrap_or_else(|e| panic!("{kind}: {e}"));
        }
    }
    for c in v::COMPARE {
        let c = c.replace('<', "&lt;");
        parse(&format!(r#"<output kind="count" threshold="x" compare="{c}"/>"#), "").unwrap();
    }
    assert!(parse(r#"<output kind="count" threshold="x" compare="gt"/>"#, "").is_err());
    for s in v::SPACING {
        parse(&format!(r#"<output kind="histogram" bins="n" min="0.5" max="x" spacing="{s}"/>"#), "").unwrap();
    }
    for b in v::BOOLEAN {
        parse(r#"<output kind="sum"/>"#, &format!("symmetric=\"{b}\"")).unwrap();
    }
    for t in Scalar::NAMES.iter().filter(|t| t.starts_with('f')) {
        parse(r#"<output kind="sum"/>"#, &format!("returns=\"{t}\"")).unwrap();
    }
    for sets in v::SETS {
        let text = format!(
            "<problem name=\"t\"><summary>s</summary><input sets=\"{sets}\" type=\"f32\" dims=\"3\"/>\n\
             <function file=\"f.cu\" name=\"d\"/><output kind=\"sum\"/>\n\
             <param name=\"b\" type=\"{}\" default=\"1,2,3,0.5,0,0\"/></problem>",
            v::BOX_TYPE
        );
        Problem::parse(&text, std::path::Path::new("t.xml"), &Snippet).unwrap_or_else(|e| panic!("{text}: {e}"));
    }
}

struct Snippet;

impl twobs::spec::Files for Snippet {
    fn read(&self, _: &std::path::Path) -> Option<String> {
        Some("__device__ float d(float3 a, float3 b) { return a.x - b.x; }\n".into())
    }
}
