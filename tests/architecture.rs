//! The shape of the house: data flows one way through the modules, and no
//! module reaches back up. Read from the source: every `crate::` and `super::`
//! path in `src/` is an import of the module it names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The top-level modules in the order data flows through them. A module may
/// use the ones before it, never one after it. `outcome` (the results' types)
/// and `data` (the points' types) are the vocabulary the stages produce and
/// consume; `stage` holds the families the planner composes; `cache` serves
/// the backends; `stop` (requests to stop a run) is read by the backends.
const FLOW: [&str; 28] = [
    "remedy", "memory", "spec", "problems", "stop", "data", "outcome", "write", "device", "model", "stage", "index",
    "plan", "codegen", "cache", "ranks", "request", "schedule", "backend", "verify", "run", "tune", "xi", "corrfunc",
    "rdf", "plot", "report", "cli",
];

/// Module path of each source file: `src/stage/output/mod.rs` -> `stage::output`.
fn modules() -> BTreeMap<String, String> {
    fn walk(dir: &Path, prefix: &[String], out: &mut BTreeMap<String, String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
            if path.is_dir() {
                let mut p = prefix.to_vec();
                p.push(name);
                walk(&path, &p, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let mut p = prefix.to_vec();
                if !matches!(name.as_str(), "mod" | "lib" | "main") {
                    p.push(name);
                }
                out.insert(p.join("::"), std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &[], &mut out);
    out
}

/// The modules `source` (the module `at`) names through `crate::` and `super::` paths.
fn imports(at: &str, source: &str, known: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in source.lines().map(str::trim).filter(|l| !l.starts_with("//")) {
        for (anchor, base) in [("crate::", Vec::<&str>::new()), ("super::", at.split("::").collect::<Vec<_>>())] {
            for (i, _) in line.match_indices(anchor) {
                if i > 0 && line.as_bytes()[i - 1].is_ascii_alphanumeric() {
                    continue; // `$crate::` in a macro, or part of a longer name
                }
                let rest = &line[i + anchor.len()..];
                let run: String =
                    rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':').collect();
                let mut path: Vec<String> = if anchor == "super::" {
                    base[..base.len() - 1].iter().map(|s| s.to_string()).collect()
                } else {
                    vec![]
                };
                path.extend(run.split("::").filter(|s| !s.is_empty()).map(str::to_owned));
                // The longest prefix that is a module.
                while !path.is_empty() && !known.contains(&path.join("::")) {
                    path.pop();
                }
                if !path.is_empty() {
                    out.insert(path.join("::"));
                }
            }
        }
    }
    out
}

fn top(module: &str) -> &str {
    module.split("::").next().unwrap()
}

/// Whether one module contains the other (a family and its parts are one room).
fn related(a: &str, b: &str) -> bool {
    a == b || a.starts_with(&format!("{b}::")) || b.starts_with(&format!("{a}::"))
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let modules = modules();
    let known: BTreeSet<String> = modules.keys().cloned().collect();
    modules.iter().map(|(m, src)| (m.clone(), imports(m, src, &known))).collect()
}

#[test]
fn every_module_is_in_the_flow() {
    for m in graph().keys().filter(|m| !m.is_empty()) {
        assert!(FLOW.contains(&top(m)), "module `{m}` is not placed in FLOW (tests/architecture.rs)");
    }
}

#[test]
fn no_module_uses_one_later_in_the_flow() {
    let rank = |m: &str| FLOW.iter().position(|f| *f == top(m));
    let mut wrong = Vec::new();
    for (m, uses) in graph() {
        let Some(r) = rank(&m) else { continue }; // the crate root declares the modules
        for u in uses.iter().filter(|u| top(u) != top(&m)) {
            if rank(u).is_none_or(|ru| ru > r) {
                wrong.push(format!("{m} uses {u}, which comes later in the flow"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn no_circle_of_imports() {
    // Edges between modules that do not contain each other: a family's parts
    // may use their parent and the parent its parts.
    let g: BTreeMap<String, BTreeSet<String>> = graph()
        .into_iter()
        .map(|(m, uses)| {
            let uses = uses.into_iter().filter(|u| !related(&m, u)).collect();
            (m, uses)
        })
        .collect();
    // Depth-first search for a back edge, with the path that closes the circle.
    fn visit(
        m: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(m) {
            Some(1) => {
                let at = path.iter().position(|p| p == m).unwrap();
                let mut circle = path[at..].to_vec();
                circle.push(m.to_owned());
                return Some(circle);
            }
            Some(2) => return None,
            _ => {}
        }
        state.insert(m.to_owned(), 1);
        path.push(m.to_owned());
        for u in g.get(m).into_iter().flatten() {
            if let Some(c) = visit(u, g, state, path) {
                return Some(c);
            }
        }
        path.pop();
        state.insert(m.to_owned(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for m in g.keys() {
        if let Some(circle) = visit(m, &g, &mut state, &mut Vec::new()) {
            panic!("a circle of imports: {}", circle.join(" -> "));
        }
    }
}

#[test]
fn the_reader_sees_real_imports() {
    // Guards the parser above: a few imports this codebase is known to have.
    let g = graph();
    assert!(g["plan"].contains("stage::output"), "{:?}", g["plan"]);
    assert!(g["backend::cuda::blocks"].contains("stage::input"), "{:?}", g["backend::cuda::blocks"]);
    assert!(g["stage::output::totals"].contains("stage::output"), "{:?}", g["stage::output::totals"]);
    assert!(g["run"].contains("verify") && !g["verify"].contains("run"));
}

/// Every index lives under `index/`: every pair, the grid, and the cell
/// hierarchy (`index::cells`); the choice among them is the schedule's.
#[test]
fn the_indexes_live_in_one_room() {
    let modules = modules();
    assert!(modules.contains_key("index::cells"), "the cell hierarchy is `index::cells`");
    let tops: BTreeSet<&str> = modules.keys().map(|m| top(m)).collect();
    assert!(!tops.contains("cells"), "no top-level `cells` beside `index`");
    // The hierarchy is tried where the schedule says, and nowhere else.
    for (m, src) in &modules {
        if m != "schedule::hierarchy" && !m.starts_with("index") {
            assert!(
                !src.contains("cells::applies("),
                "`{m}` decides whether the hierarchy applies; `schedule::hierarchy` does"
            );
        }
    }
}

/// The driver and device buffers stay behind one door: no file outside
/// `backend/cuda/` names cudarc.
#[test]
fn only_the_cuda_backend_names_cudarc() {
    let mut named = Vec::new();
    for (m, src) in modules() {
        if !related(&m, "backend::cuda") && src.contains("cudarc") {
            named.push(m);
        }
    }
    assert!(named.is_empty(), "modules outside backend::cuda name cudarc: {named:?}");
}
