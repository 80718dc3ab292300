//! The options of the caller's that a message names: a way out ("pass
//! --drop-nonfinite" on the command line, `drop_nonfinite=True` in Python) or
//! the option a refusal is about. The library says which option (an enum,
//! never the spelling); the front door the process runs through spells it,
//! set once at its start (`cli::main`, the Python extension's import).

use std::fmt;
use std::sync::atomic::{AtomicU8, Ordering};

/// The front door a process's messages are spelled for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Door {
    CommandLine = 0,
    Python = 1,
}

static DOOR: AtomicU8 = AtomicU8::new(Door::CommandLine as u8);

/// Spells every later message for `door`.
pub fn enter_through(door: Door) {
    DOOR.store(door as u8, Ordering::Relaxed);
}

fn door() -> Door {
    if DOOR.load(Ordering::Relaxed) == Door::Python as u8 { Door::Python } else { Door::CommandLine }
}

/// An option of the caller's, as a message names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Remedy {
    /// Leave out the rows that hold NaN or infinity.
    DropNonfinite,
    /// Move points outside the periodic box into it.
    WrapIntoBox,
    /// Visit every pair, without an index.
    EveryPair,
    /// Run on the CPU backend.
    CpuBackend,
    /// Run on the CPU backend in f64 arithmetic.
    CpuF64,
    /// A weight per point.
    Weights,
    /// The sets of points given.
    Inputs,
}

impl fmt::Display for Remedy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let said = match (door(), self) {
            (Door::CommandLine, Remedy::DropNonfinite) => "--drop-nonfinite",
            (Door::Python, Remedy::DropNonfinite) => "drop_nonfinite=True",
            (Door::CommandLine, Remedy::WrapIntoBox) => "--outside-box wrap",
            (Door::Python, Remedy::WrapIntoBox) => "outside_box=\"wrap\"",
            (Door::CommandLine, Remedy::EveryPair) => "--index none",
            (Door::Python, Remedy::EveryPair) => "index=\"none\" (Session(index=\"none\"))",
            (Door::CommandLine, Remedy::CpuBackend) => "--backend cpu",
            (Door::Python, Remedy::CpuBackend) => "Session(backend=\"cpu\")",
            (Door::CommandLine, Remedy::CpuF64) => "--backend cpu --f64",
            (Door::Python, Remedy::CpuF64) => "f64=True",
            (Door::CommandLine, Remedy::Weights) => "--weights",
            (Door::Python, Remedy::Weights) => "weights=",
            (Door::CommandLine, Remedy::Inputs) => "--input",
            (Door::Python, Remedy::Inputs) => "the sets of points",
        };
        f.write_str(said)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_door_spells_its_own_option() {
        assert_eq!(Remedy::DropNonfinite.to_string(), "--drop-nonfinite");
        enter_through(Door::Python);
        assert_eq!(Remedy::DropNonfinite.to_string(), "drop_nonfinite=True");
        enter_through(Door::CommandLine);
    }
}
