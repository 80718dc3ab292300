//! `twobs list`: the built-in problems.

use crate::problems;

pub(super) fn list() {
    for name in problems::BUILT_IN {
        let p = problems::built_in(name).expect("built-in");
        println!("{name:<9} {}", p.summary);
    }
    println!("\nEach is problems/<name>.xml with its CUDA snippet; `twobs plan <name>` explains how it runs.");
}
