//! What the command-line tests share: the binary, run in a folder with the
//! tests' own cache.

use std::path::Path;
use std::process::{Command, Output};

/// `twobs` run in `dir`, with the tests' cache.
pub fn command(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_twobs"));
    c.env("TWOBS_CACHE", concat!(env!("CARGO_TARGET_TMPDIR"), "/twobs-cache")).current_dir(dir);
    c
}

pub fn twobs(dir: &Path, args: &[&str]) -> Output {
    command(dir).args(args).output().unwrap()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}
