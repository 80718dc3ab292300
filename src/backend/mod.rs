//! Backends that execute plans.

pub mod cuda;
pub mod nvrtc;
