//! Backends that execute plans.

pub mod cpu;
pub mod cuda;
pub mod nvrtc;
