//! Backends that execute plans: the CPU (the host compiler; the oracle) and
//! CUDA (NVRTC and cudarc; one or many GPUs).

pub mod cpu;
pub mod cuda;
pub mod hybrid;
pub mod nvrtc;

use std::sync::{Mutex, MutexGuard};

use crate::spec::Params;

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
