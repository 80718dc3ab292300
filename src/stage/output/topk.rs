//! Per-query top-K: each query thread keeps its K best (value, index) pairs in
//! registers, starting from the lists already in the output so that launches
//! over further blocks of the other set refine them, and writes them back
//! once. A query block's first launch starts from empty lists (`fresh`: the
//! value type's worst value, no index) instead of reading them, so lists are
//! never reset from the host; they are downloaded when all its units have
//! run, and each query's list comes from the one stream that ran its block.
//!
//! Fragment contract, beyond [`super`]'s: the contribution fragment defines
//! `K` and `struct TopK` with `offer(value, index)`.

use serde::Serialize;

use crate::stage::{KernelParam, Source};

/// The stage's kernel arguments, in the order of the kernel's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Arg {
    /// K values per query, best first.
    Values,
    /// K whole-input indices per query.
    Indices,
    /// 1 where the launch is the query block's first: the lists start empty.
    Fresh,
}

pub fn params() -> Vec<KernelParam> {
    vec![
        KernelParam {
            name: "values".into(),
            ctype: "Value*".into(),
            source: Source::Output(super::Arg::TopK(Arg::Values)),
        },
        KernelParam {
            name: "indices".into(),
            ctype: "unsigned*".into(),
            source: Source::Output(super::Arg::TopK(Arg::Indices)),
        },
        KernelParam {
            name: "fresh".into(),
            ctype: "unsigned".into(),
            source: Source::Output(super::Arg::TopK(Arg::Fresh)),
        },
    ]
}
