//! Backends that execute plans: the CPU (the host compiler; the oracle) and
//! CUDA (NVRTC and cudarc; one or many GPUs).

pub mod cpu;
pub mod cuda;
pub mod hybrid;
pub mod nvrtc;

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
