//! The direct output buffer (section 3.3.3): passing pairs appended to pages
//! of a global pool, one page per warp at a time, a new page taken with one
//! atomicAdd on the global page pointer.
//!
//! The pool may run out. Every pair belongs to a step (one tile) of its block
//! and a block's steps run in order, so a block that cannot get a page stops
//! at the end of that step: it truncates the page it began the step with back
//! to where the step began, records the step as its resume point and raises
//! the overflow flag. Pages record the (block, step) that took them; the host
//! keeps a page only when its step precedes its block's resume point, drains
//! the pool and relaunches, and blocks start at their resume point. No pair is
//! lost or written twice. Partial results merge by concatenation.
//!
//! The drain packs the kept pages' pairs on the device
//! (`templates/output/dob_drain.cu`, one kernel for every problem), so that
//! only the pairs cross the bus, not a page per warp that found one.
//!
//! Fragment contract, beyond [`super`]'s: the contribution fragment defines
//! `bool passes(a, b)`; the visit defines `UNORDERED_PAIRS`.

use serde::Serialize;

use crate::stage::{KernelParam, Source};

/// Pairs per page: a warp's 32 pairs of one step always fit one fresh page.
pub const PAGE_PAIRS: u32 = 512;

/// The stage's kernel arguments, in the order of the kernel's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Arg {
    /// num_pages x PAGE pairs (i, j).
    Pool,
    /// (block, step) that took each page.
    PageOwner,
    /// Pairs used in each page.
    PageFill,
    /// The first free page: the global page pointer.
    NextPage,
    /// Pages in the pool.
    NumPages,
    /// Per block: the first step to run, DONE when finished.
    Resume,
    /// Set when any block stopped early.
    Overflow,
}

pub fn params() -> Vec<KernelParam> {
    let p = |name: &str, ctype: &str, arg: Arg| KernelParam {
        name: name.into(),
        ctype: ctype.into(),
        source: Source::Output(super::Arg::Dob(arg)),
    };
    vec![
        p("pool", "uint2*", Arg::Pool),
        p("page_owner", "uint2*", Arg::PageOwner),
        p("page_fill", "unsigned*", Arg::PageFill),
        p("next_page", "unsigned*", Arg::NextPage),
        p("num_pages", "unsigned", Arg::NumPages),
        p("resume", "unsigned*", Arg::Resume),
        p("overflow", "unsigned*", Arg::Overflow),
    ]
}

/// The pool for `pairs` pairs at the sampled `selectivity`: the estimate with
/// a quarter to spare, plus the partly filled page each warp may leave, at
/// least 64 Ki pairs and at most `cap`. A short pool only costs relaunches.
pub fn pool_for(selectivity: f64, pairs: u128, grid: u32, block_size: u32, page_pairs: u32, cap: u64) -> u64 {
    let warps = grid as u64 * (block_size as u64 / 32).max(1);
    let estimate = (selectivity * pairs as f64 * 1.25) as u64;
    (estimate + warps * page_pairs as u64).clamp(1 << 16, cap.max(1 << 16))
}
