//! Backends that execute plans: the CPU (the host compiler; the oracle) and
//! CUDA (NVRTC and cudarc; one or many GPUs).

pub mod cpu;
pub mod cuda;
pub mod nvrtc;
