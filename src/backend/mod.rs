//! Backends that execute plans: the CPU (the host compiler; the oracle) and
//! CUDA (one or many GPUs; everything that touches the driver lives under `cuda`).

pub mod cpu;
pub mod cuda;
pub mod hybrid;

use std::sync::{Mutex, MutexGuard};

use serde::Serialize;

use crate::spec::Params;

/// Which backend to run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendChoice {
    /// The GPU when one is usable, else the CPU.
    Auto,
    Cuda,
    Cpu,
}

/// The backend a run used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    Cuda,
    Cpu,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Cuda => "cuda",
            Backend::Cpu => "cpu",
        }
    }
}

impl BackendChoice {
    /// The backend this choice resolves to on this machine, with a note when `auto` falls back.
    pub fn resolve(self, notes: &mut Vec<String>) -> Backend {
        match self {
            BackendChoice::Cpu => Backend::Cpu,
            BackendChoice::Cuda => Backend::Cuda,
            BackendChoice::Auto => {
                match cuda::usable()
                    .map_err(|e| e.to_string())
                    .and_then(|()| cuda::nvrtc::available().map_err(|e| e.to_string()))
                {
                    Ok(()) => Backend::Cuda,
                    Err(why) => {
                        notes.push(format!("no usable GPU ({why}): running on the CPU backend"));
                        Backend::Cpu
                    }
                }
            }
        }
    }
}

/// A kernel or driver that reads its box at run time holds one box, set
/// before each run (`__constant__` memory per loaded module, a global per
/// loaded driver), and the process loads each once: runs of a run-time box
/// take turns, so that one never reads another's. The runner holds this
/// for a run whose `params` read the box at run time; None for any other.
pub fn one_box_at_a_time(params: &Params) -> Option<MutexGuard<'static, ()>> {
    static RUN_TIME_BOX: Mutex<()> = Mutex::new(());
    params.run_time_box().map(|_| RUN_TIME_BOX.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
}

/// What a key probe found: keys whose slot from the key edges differs from
/// their value's (`cpu::check_keys`, `cuda::check_keys`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KeyCheck {
    pub checked: u64,
    pub mismatches: u64,
    /// The lowest rank of a mismatching key.
    pub first_bad: Option<u64>,
    /// A histogram's estimate's largest error relative to the map's value,
    /// over the positive normal keys checked (0 where there is no estimate):
    /// what the bracket is built on (`EstimateError`).
    pub estimate_error: f64,
}
