//! The built-in problems of `problems/`, compiled into the binary so that
//! `twobs run sdh` works from any directory, and resolution of a command's
//! PROBLEM argument (a built-in name or a spec path).

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use crate::spec::{Disk, Files, Problem};

/// (file name under problems/, contents)
const FILES: [(&str, &str); 12] = [
    ("sdh.xml", include_str!("../problems/sdh.xml")),
    ("rdf.xml", include_str!("../problems/rdf.xml")),
    ("2pcf.xml", include_str!("../problems/2pcf.xml")),
    ("kde.xml", include_str!("../problems/kde.xml")),
    ("selfjoin.xml", include_str!("../problems/selfjoin.xml")),
    ("knn.xml", include_str!("../problems/knn.xml")),
    ("nlj.xml", include_str!("../problems/nlj.xml")),
    ("distance2.cu", include_str!("../problems/distance2.cu")),
    ("distance3.cu", include_str!("../problems/distance3.cu")),
    ("rdf.cu", include_str!("../problems/rdf.cu")),
    ("kde.cu", include_str!("../problems/kde.cu")),
    ("nlj.cu", include_str!("../problems/nlj.cu")),
];

/// Built-in problem names, in the order `twobs list` shows them.
pub const BUILT_IN: [&str; 7] = ["sdh", "rdf", "2pcf", "kde", "selfjoin", "knn", "nlj"];

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
    Some(Problem::parse(&text, &origin, &Embedded).expect("built-in specs are valid"))
}

/// Resolves PROBLEM: an existing file (or anything ending in .xml) is a spec path,
/// otherwise a built-in name.
pub fn load(arg: &str) -> anyhow::Result<Problem> {
    let path = Path::new(arg);
    if path.exists() || arg.ends_with(".xml") {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read the spec `{arg}`"))?;
        return Ok(Problem::parse(&text, path, &Disk)?);
    }
    built_in(arg).ok_or_else(|| {
        anyhow::anyhow!("`{arg}` is neither a spec file nor a built-in problem; built-ins: {}", BUILT_IN.join(", "))
    })
}
