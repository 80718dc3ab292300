//! The output stages' device buffers (`stage::output` plans them): totals,
//! the direct output buffer, per-query lists, and the pinned downloads of
//! large outputs.

pub mod dob;
pub mod download;
pub mod topk;
pub mod totals;
