//! Every class of bad spec fails with an error that names the file, the line
//! and column, and what was expected.

use std::path::{Path, PathBuf};

use twobs::spec::{Disk, Problem};

const SNIPPET: &str = "__device__ float distance(float3 a, float3 b) {\n  return a.x - b.x;\n}\n";

const GOOD: &str = r#"<problem name="t">
  <summary>test problem</summary>
  <input sets="1" type="f32" dims="3"/>
  <function file="f.cu" name="distance" symmetric="true"/>
  <output kind="histogram" bins="bins" min="0" max="r_max"/>
  <param name="bins" type="u32" default="10"/>
  <param name="r_max" type="f32" default="2.0"/>
</problem>
"#;

/// Writes the spec (and the snippet) into a fresh folder and parses it.
fn parse(spec: &str) -> (Result<Problem, twobs::spec::SpecError>, PathBuf, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("f.cu"), SNIPPET).unwrap();
    let path = dir.path().join("t.xml");
    std::fs::write(&path, spec).unwrap();
    (Problem::parse(spec, &path, &Disk), path, dir)
}

/// Asserts the spec fails at `line:col` with a message containing every piece of `expect`.
fn fails_at(spec: &str, line: usize, col: usize, expect: &[&str]) {
    let (result, path, _dir) = parse(spec);
    let err = result.expect_err("the spec should be rejected");
    let shown = err.to_string();
    assert!(shown.starts_with(&format!("{}:{line}:{col}: ", path.display())), "position: {shown}");
    for piece in expect {
        assert!(shown.contains(piece), "`{piece}` missing from: {shown}");
    }
}

fn with(from: &str, to: &str) -> String {
    assert!(GOOD.contains(from), "{from}");
    GOOD.replacen(from, to, 1)
}

#[test]
fn the_good_spec_parses() {
    let (p, _, _dir) = parse(GOOD);
    let p = p.unwrap();
    assert_eq!(p.name, "t");
    assert_eq!(p.params.len(), 2);
}

#[test]
fn malformed_xml_names_line_and_column() {
    fails_at(&with("</problem>", "</problme>"), 8, 1, &["malformed XML"]);
    fails_at(&with("<summary>test problem</summary>", "<summary>test problem"), 8, 1, &["malformed XML"]);
}

#[test]
fn unclosed_root_is_reported() {
    fails_at(&with("</problem>\n", ""), 1, 1, &["<problem> is never closed"]);
}

#[test]
fn wrong_root_element() {
    fails_at("<problems name=\"t\"/>", 1, 1, &["expected <problem>", "<problems>"]);
}

#[test]
fn unknown_element_is_a_typo_not_ignored() {
    fails_at(
        &with(r#"<output kind"#, r#"<ouput kind"#),
        5,
        3,
        &["unknown element <ouput>", "expected one of: summary, input, function, output, cutoff, param"],
    );
}

#[test]
fn unknown_attribute_is_a_typo_not_ignored() {
    fails_at(
        &with(r#"bins="bins" min"#, r#"bin="bins" min"#),
        5,
        28,
        &["unknown attribute `bin` on <output>", "bins, min, max"],
    );
}

#[test]
fn missing_required_element_and_attribute() {
    fails_at(&with("  <summary>test problem</summary>\n", ""), 1, 1, &["needs a <summary>"]);
    fails_at(&with(r#" sets="1""#, ""), 3, 3, &["<input> needs attribute `sets`"]);
    fails_at(&with(r#" max="r_max""#, ""), 5, 3, &["needs attribute `max`"]);
}

#[test]
fn bad_values_say_what_was_expected() {
    fails_at(&with(r#"sets="1""#, r#"sets="3""#), 3, 10, &["sets must be 1, 2, or 1,2", "`3`"]);
    fails_at(&with(r#"sets="1""#, r#"sets="2,1""#), 3, 10, &["sets must be 1, 2, or 1,2", "`2,1`"]);
    fails_at(&with(r#"dims="3""#, r#"dims="0""#), 3, 30, &["dims must be a whole number from 1 to 64"]);
    fails_at(
        &with(r#"type="f32" dims"#, r#"type="float" dims"#),
        3,
        19,
        &["unknown type `float`", "f32, f64, i32, i64, u32"],
    );
    fails_at(
        &with(r#"kind="histogram""#, r#"kind="hist""#),
        5,
        11,
        &["unknown output kind `hist`", "count, sum, histogram, histogram2d, pairs, knn"],
    );
    fails_at(&with(r#"symmetric="true""#, r#"symmetric="yes""#), 4, 41, &["true or false", "`yes`"]);
    fails_at(
        &with(r#"default="10""#, r#"default="ten""#),
        6,
        33,
        &["default of `bins`", "whole number (u32)", "`ten`"],
    );
}

#[test]
fn a_box_parameter_is_checked_where_it_is_declared() {
    let boxed = |b: &str| with(r#"<param name="r_max""#, &format!("{b}\n  <param name=\"r_max\""));
    let (ok, _, _dir) = parse(&boxed(r#"<param name="box" type="box" default="1,2,3,0.5,0,0"/>"#));
    assert!(ok.is_ok(), "{:?}", ok.err());
    fails_at(
        &boxed(r#"<param name="box" type="box" default="1,2"/>"#),
        7,
        32,
        &["default of `box`", "Lx,Ly,Lz,xy,xz,yz", "`1,2` has 2 numbers"],
    );
    fails_at(
        &boxed(r#"<param name="box" type="box" default="1,-2,3"/>"#),
        7,
        32,
        &["box lengths must all be positive"],
    );
    fails_at(&boxed(r#"<param name="box" type="box" default="0,0,0,0.5,0,0"/>"#), 7, 32, &["an open box", "no tilt"]);
    fails_at(
        &boxed(r#"<param name="a" type="box" default="1"/><param name="b" type="box" default="2"/>"#),
        7,
        43,
        &["at most one box"],
    );
    fails_at(
        &with(r#"dims="3""#, r#"dims="2""#).replace(
            r#"<param name="r_max""#,
            "<param name=\"box\" type=\"box\" default=\"1\"/>\n  <param name=\"r_max\"",
        ),
        7,
        3,
        &["a box parameter needs 3-D float points"],
    );
    fails_at(
        &boxed(r#"<param name="box" type="box" default="1"/>"#).replace(r#"max="r_max""#, r#"max="box""#),
        5,
        48,
        &["`max` needs a number, but parameter `box` is a box"],
    );
}

#[test]
fn comparison_is_spelled_out() {
    let spec = with(
        r#"<output kind="histogram" bins="bins" min="0" max="r_max"/>"#,
        r#"<output kind="count" threshold="r_max" compare="<="/>"#,
    );
    // Words, or the operator escaped as XML requires.
    let (result, _, _dir) = parse(&spec.replace("compare=\"<=\"", "compare=\"&lt;=\""));
    assert_eq!(
        result.unwrap().output,
        twobs::spec::Output::Count {
            threshold: twobs::spec::Operand::Param("r_max".into()),
            compare: twobs::spec::Compare::Le
        }
    );
    let spec = with(
        r#"<output kind="histogram" bins="bins" min="0" max="r_max"/>"#,
        r#"<output kind="count" threshold="r_max" compare="less"/>"#,
    );
    fails_at(&spec, 5, 42, &["compare must be lt (<) or le (<=)", "`less`"]);
}

#[test]
fn operands_must_name_declared_parameters_of_the_right_kind() {
    fails_at(
        &with(r#"max="r_max""#, r#"max="rmax""#),
        5,
        48,
        &["`max` = `rmax`", "neither a f32 literal nor a declared parameter", "bins, r_max"],
    );
    fails_at(&with(r#"bins="bins""#, r#"bins="r_max""#), 5, 28, &["needs a whole number", "`r_max` is f32"]);
}

#[test]
fn missing_snippet_file_is_named() {
    fails_at(&with(r#"file="f.cu""#, r#"file="missing.cu""#), 4, 13, &["cannot read the snippet file", "missing.cu"]);
}

#[test]
fn missing_function_is_named() {
    fails_at(&with(r#"name="distance""#, r#"name="dist""#), 4, 25, &["does not define a function `dist`", "f.cu"]);
}

#[test]
fn a_weight_names_a_function_of_the_snippet() {
    let spec = with(r#"max="r_max"/>"#, r#"max="r_max" weight="w"/>"#);
    fails_at(&spec, 5, 60, &["does not define the weight function `w`", "f.cu"]);
    let spec = with(r#"max="r_max"/>"#, r#"max="r_max" weight="distance" normalize="rdf"/>"#);
    fails_at(&spec, 5, 78, &["does not go with a weight"]);
    let (p, _, _dir) = parse(&with(r#"max="r_max"/>"#, r#"max="r_max" weight="distance"/>"#));
    assert!(matches!(p.unwrap().output, twobs::spec::Output::Histogram { weight: Some(w), .. } if w == "distance"));
}

#[test]
fn duplicates_are_rejected() {
    fails_at(
        &with(
            "  <param name=\"r_max\"",
            "  <param name=\"bins\" type=\"u32\" default=\"1\"/>\n  <param name=\"r_max\"",
        ),
        7,
        3,
        &["parameter `bins` is declared twice"],
    );
    fails_at(
        &with("<summary>test problem</summary>", "<summary>a</summary><summary>b</summary>"),
        2,
        23,
        &["<summary> appears twice"],
    );
    fails_at(&with(r#"<input sets="1""#, r#"<input sets="1" sets="2""#), 3, 19, &["attribute `sets` appears twice"]);
}

#[test]
fn names_must_be_c_identifiers() {
    fails_at(&with(r#"name="bins" type"#, r#"name="2bins" type"#), 6, 10, &["`2bins` is not a usable name"]);
    fails_at(&with(r#"name="r_max" type"#, r#"name="float" type"#), 7, 10, &["`float` is not a usable name"]);
}

#[test]
fn stray_text_and_children_are_rejected() {
    fails_at(
        &with(r#"<input sets="1" type="f32" dims="3"/>"#, r#"<input sets="1" type="f32" dims="3">oops</input>"#),
        3,
        39,
        &["<input> takes no text"],
    );
    fails_at(
        &with(
            r#"<output kind="histogram" bins="bins" min="0" max="r_max"/>"#,
            r#"<output kind="histogram" bins="bins" min="0" max="r_max"><x/></output>"#,
        ),
        5,
        60,
        &["<output> takes no child elements"],
    );
}

#[test]
fn records_take_fields_only() {
    let spec = with(
        r#"<input sets="1" type="f32" dims="3"/>"#,
        "<input sets=\"2\" type=\"i32\">\n    <field name=\"key\" type=\"i32\"/>\n  </input>",
    );
    fails_at(&spec, 3, 19, &["`type` does not go with <field> children"]);
    let spec = with(
        r#"<input sets="1" type="f32" dims="3"/>"#,
        "<input sets=\"2\">\n    <column name=\"key\" type=\"i32\"/>\n  </input>",
    );
    fails_at(&spec, 4, 5, &["unknown element <column> in <input>; expected <field>"]);
}

#[test]
fn histogram_needs_a_float_function() {
    let spec = with(r#"symmetric="true""#, r#"symmetric="true" returns="i32""#);
    fails_at(&spec, 5, 11, &["a histogram needs a function that returns f32 or f64"]);
}

#[test]
fn parameter_overrides_are_checked() {
    let (p, _, _dir) = parse(GOOD);
    let p = p.unwrap();
    let msg = |o: &[&str]| format!("{:#}", p.bind(&o.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap_err());
    assert!(msg(&["bins"]).contains("expected NAME=VALUE"));
    assert!(msg(&["bin=3"]).contains("no parameter `bin`; its parameters are: bins, r_max"));
    assert!(msg(&["bins=-1"]).contains("bins=-1: expected a whole number (u32)"));
    assert!(msg(&["bins=0"]).contains("histogram bins (bins=0) must be between 1"));
    assert!(msg(&["r_max=0"]).contains("histogram range is empty: min (0) must be below max (r_max=0)"));
    assert!(msg(&["r_max=inf"]).contains("not a finite number"));
    assert!(p.bind(&["bins=7".into(), "r_max=3.5".into()]).is_ok());
}

#[test]
fn a_spec_path_that_does_not_exist_is_named() {
    let err = twobs::problems::load("no/such/spec.xml").unwrap_err();
    assert!(format!("{err:#}").contains("cannot read the spec `no/such/spec.xml`"), "{err:#}");
    let err = twobs::problems::load("sdhh").unwrap_err();
    assert!(format!("{err:#}").contains("neither a spec file nor a built-in problem; built-ins: sdh, rdf"), "{err:#}");
}

#[test]
fn built_ins_match_the_files_in_problems() {
    for name in twobs::problems::BUILT_IN {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("problems").join(format!("{name}.xml"));
        let mut on_disk = Problem::parse(
            &std::fs::read_to_string(&path).unwrap(),
            Path::new(&format!("problems/{name}.xml")),
            &RelativeTo(env!("CARGO_MANIFEST_DIR")),
        )
        .unwrap();
        let built_in = twobs::problems::built_in(name).unwrap();
        // Loaded as a file, a built-in's spec keeps its proven estimate (same snippet, same key map).
        let loaded = twobs::problems::load(path.to_str().unwrap()).unwrap();
        assert_eq!(loaded.function.key, built_in.function.key, "{name}");
        // And its promises (cutoff, key map), proven by the suite.
        assert!(loaded.promises_proven && built_in.promises_proven, "{name}");
        on_disk.function.key = built_in.function.key.clone();
        on_disk.promises_proven = true;
        assert_eq!(on_disk, built_in, "{name}");
    }
}

struct RelativeTo(&'static str);
impl twobs::spec::Files for RelativeTo {
    fn read(&self, path: &Path) -> Option<String> {
        std::fs::read_to_string(Path::new(self.0).join(path)).ok()
    }
}

#[test]
fn a_cutoff_is_checked_where_it_is_written() {
    let cut = |line: &str| with("  <param name=\"bins\"", &format!("  {line}\n  <param name=\"bins\""));
    let (p, _, _dir) = parse(&cut(r#"<cutoff value="r_max"/>"#));
    assert!(p.unwrap().cutoff.is_some());
    fails_at(&cut(r#"<cutoff value="radius"/>"#), 6, 11, &["`value` = `radius`", "declared: bins, r_max"]);
    fails_at(&cut(r#"<cutoff/>"#), 6, 3, &["<cutoff> needs attribute `value`"]);
    fails_at(&cut(r#"<cutoff value="1" over="x"/>"#), 6, 21, &["`over` names record fields"]);
    fails_at(&cut(r#"<cutoff value="1" cut="x"/>"#), 6, 21, &["unknown attribute `cut` on <cutoff>"]);
    fails_at(&cut("<cutoff value=\"1\"/>\n  <cutoff value=\"2\"/>"), 7, 3, &["<cutoff> appears twice"]);
    let knn = with(r#"<output kind="histogram" bins="bins" min="0" max="r_max"/>"#, r#"<output kind="knn" k="bins"/>"#);
    let knn = knn.replace("  <param name=\"bins\"", "  <cutoff value=\"1\"/>\n  <param name=\"bins\"");
    fails_at(&knn, 6, 11, &["KNN query's cutoff is its own K-th value", "takes no `value`"]);
}

#[test]
fn a_cutoff_on_records_names_its_fields() {
    let table = |cutoff: &str| {
        format!(
            r#"<problem name="t">
  <summary>test problem</summary>
  <input sets="2"><field name="key" type="i32"/><field name="v" type="f32"/></input>
  <function file="f.cu" name="distance" returns="i64"/>
  <output kind="count" threshold="d" compare="le"/>
  {cutoff}
  <param name="d" type="i32" default="3"/>
  <param name="w" type="f32" default="3"/>
</problem>
"#
        )
    };
    let (p, _, _dir) = parse(&table(r#"<cutoff value="d" over="key"/>"#));
    assert!(p.unwrap().cutoff.is_some());
    fails_at(&table(r#"<cutoff value="d"/>"#), 6, 3, &["needs `over`"]);
    fails_at(&table(r#"<cutoff value="d" over="key,k"/>"#), 6, 21, &["`over` names `k`", "fields: key, v"]);
    fails_at(&table(r#"<cutoff value="d" over="key,key"/>"#), 6, 21, &["names `key` twice"]);
    fails_at(&table(r#"<cutoff value="w" over="key"/>"#), 6, 11, &["needs a whole number", "`w` is f32"]);
}
