//! The built-in problems of `problems/`, compiled into the binary so that
//! `twobs run sdh` works from any directory, and resolution of a command's
//! PROBLEM argument (a built-in name or a spec path).

use std::path::{Path, PathBuf};

use crate::spec::{Disk, Files, Function, KeyMap, Problem, SpecError};

/// PROBLEM named neither a readable spec nor a built-in, or a spec that is wrong.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read the spec `{path}`: {cause}")]
    Unreadable { path: String, cause: std::io::Error },
    #[error("`{0}` is neither a spec file nor a built-in problem; built-ins: {built_ins}", built_ins = BUILT_IN.join(", "))]
    Unknown(String),
    #[error(transparent)]
    Spec(#[from] SpecError),
}

/// (file name under problems/, contents)
const FILES: [(&str, &str); 17] = [
    ("sdh.xml", include_str!("../problems/sdh.xml")),
    ("rdf.xml", include_str!("../problems/rdf.xml")),
    ("2pcf.xml", include_str!("../problems/2pcf.xml")),
    ("kde.xml", include_str!("../problems/kde.xml")),
    ("selfjoin.xml", include_str!("../problems/selfjoin.xml")),
    ("knn.xml", include_str!("../problems/knn.xml")),
    ("nlj.xml", include_str!("../problems/nlj.xml")),
    ("dd_periodic.xml", include_str!("../problems/dd_periodic.xml")),
    ("ddtheta.xml", include_str!("../problems/ddtheta.xml")),
    ("ddrppi.xml", include_str!("../problems/ddrppi.xml")),
    ("ddsmu.xml", include_str!("../problems/ddsmu.xml")),
    ("angle.cu", include_str!("../problems/angle.cu")),
    ("distance.cu", include_str!("../problems/distance.cu")),
    ("rdf.cu", include_str!("../problems/rdf.cu")),
    ("kde.cu", include_str!("../problems/kde.cu")),
    ("nlj.cu", include_str!("../problems/nlj.cu")),
    ("los.cu", include_str!("../problems/los.cu")),
];

/// Built-in problem names, in the order `twobs list` shows them.
pub const BUILT_IN: [&str; 11] =
    ["sdh", "rdf", "2pcf", "kde", "selfjoin", "knn", "nlj", "dd_periodic", "ddtheta", "ddrppi", "ddsmu"];

/// A file of `problems/` as built in: a spec, or a snippet that specs of
/// one's own can reuse (the Python package's periodic pair counts take `rdf.cu`).
pub fn built_in_file(name: &str) -> Option<&'static str> {
    FILES.iter().find(|(file, _)| *file == name).map(|(_, text)| *text)
}

struct Embedded;

impl Files for Embedded {
    fn read(&self, path: &Path) -> Option<String> {
        let rel = path.strip_prefix("problems").ok()?;
        FILES.iter().find(|(name, _)| Path::new(name) == rel).map(|(_, text)| (*text).to_owned())
    }
}

/// Loads a built-in problem by name.
pub fn built_in(name: &str) -> Option<Problem> {
    let origin = PathBuf::from("problems").join(format!("{name}.xml"));
    let text = Embedded.read(&origin)?;
    let mut problem = Problem::parse(&text, &origin, &Embedded).expect("built-in specs are valid");
    problem.promises_proven = true;
    // The built-ins' estimates are checked against their maps on every float
    // key, on the GPU, by the parity suite's key probes (`keys/*`).
    if let Some(key) = problem.function.key.as_mut() {
        key.estimate_proven = key.estimate.is_some();
    }
    Some(problem)
}

/// Whether `problem`'s snippet is a built-in's, word for word: those are
/// checked in f64 mode against a float64 reference (`tests/exact.rs`), so
/// the runner may take them to f64 where f32 cannot hold the data.
pub fn snippet_is_built_in(problem: &Problem) -> bool {
    FILES.iter().any(|(name, text)| name.ends_with(".cu") && *text == problem.function.source)
}

/// Marks a spec's estimate proven where its snippet and key map are a
/// built-in's, word for word (`twobs run problems/sdh.xml` is `twobs run sdh`).
fn mark_proven_estimate(problem: &mut Problem) {
    let Some(key) = problem.function.key.as_mut() else { return };
    let source = &problem.function.source;
    let as_built_in = KeyMap { estimate_proven: key.estimate.is_some(), ..key.clone() };
    key.estimate_proven = key.estimate.is_some()
        && BUILT_IN
            .iter()
            .filter_map(|name| built_in(name))
            .any(|b| b.function.source == *source && b.function.key.as_ref() == Some(&as_built_in));
}

/// Marks a spec's promises proven where the whole spec is a built-in's, bar
/// where it and its snippet were read from (`twobs run problems/sdh.xml` is
/// `twobs run sdh`).
fn mark_proven_promises(problem: &mut Problem) {
    problem.promises_proven = BUILT_IN.iter().filter_map(|name| built_in(name)).any(|b| {
        // Where the files lie is no part of the promise: the spec's path, its
        // snippet's, and the places its defaults are named at.
        let function = Function { file: problem.function.file.clone(), ..b.function };
        let mut params = b.params;
        for (mine, theirs) in params.iter_mut().zip(&problem.params) {
            mine.default_at = theirs.default_at.clone();
        }
        Problem { origin: problem.origin.clone(), function, params, promises_proven: false, ..b } == *problem
    });
}

/// Resolves PROBLEM: an existing file (or anything ending in .xml) is a spec path,
/// otherwise a built-in name.
pub fn load(arg: &str) -> Result<Problem, LoadError> {
    let path = Path::new(arg);
    if path.exists() || arg.ends_with(".xml") {
        let text = crate::memory::read_text(path)
            .map_err(|source| LoadError::Unreadable { path: arg.to_owned(), cause: source })?;
        let mut problem = Problem::parse(&text, path, &Disk)?;
        mark_proven_estimate(&mut problem);
        mark_proven_promises(&mut problem);
        return Ok(problem);
    }
    built_in(arg).ok_or_else(|| LoadError::Unknown(arg.to_owned()))
}
