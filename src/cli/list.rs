//! `twobs list`: the built-in problems.

use std::fmt::Write as _;

use crate::problems;

pub(super) fn list() -> anyhow::Result<()> {
    let mut text = String::new();
    for name in problems::BUILT_IN {
        let p = problems::built_in(name).expect("built-in");
        writeln!(text, "{name:<9} {}", p.summary)?;
    }
    writeln!(text, "\nEach is problems/<name>.xml with its CUDA snippet; `twobs plan <name>` explains how it runs.")?;
    Ok(crate::write::print(&text)?)
}
