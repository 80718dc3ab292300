//! The output family: where the contributions of pairs accumulate, chosen by
//! the decision tree of the paper's Fig. 9 from the output's class.
//!
//! - [`totals`]: totals per slot (counts, sums, histograms) in registers, in
//!   private copies in shared memory (OP, AOP), or straight in global memory;
//! - [`dob`]: passing pairs appended to pages of the direct output buffer;
//! - [`topk`]: each query's K best partners in registers.
//!
//! Fragment contract (`templates/output/*.cu`): defines `struct Output` with
//! - `Output(<the stage's kernel parameters, in order>, const Here& here)`;
//! - `unsigned first_step(unsigned from)`: the first step this block runs,
//!   `from` (the launch's first step) or later (the DOB resumes);
//! - `void begin_step(unsigned s)`, `bool end_step(unsigned s)`: every thread of
//!   the block calls both around step `s`; `end_step` returns true, the same in
//!   every thread, when the block must stop because the output is full;
//! - `void add(unsigned r, unsigned i, const Point& own, unsigned j, const Point& q, bool valid)`:
//!   the pair (i, j) of the thread's own point r (of R); every thread of a
//!   warp calls it together, `valid` false for pairs outside the visit or past
//!   the end of a set;
//! - `void finish(const Here& here)`: every thread calls it once at the end.
//!
//! CPU fragment contract (`templates/cpu/output/*.cpp`): defines
//! `extern "C" twobs_rows(a, b, begin, end, ...)` over rows [begin, end)
//! with the arguments [`crate::backend::cpu`] passes for the result kind.

pub mod dob;
pub mod topk;
pub mod totals;

use serde::Serialize;

use super::{KernelParam, Template};
use crate::data::Column;
use crate::device::Device;
use crate::outcome::{Outcome, PairList, Totals};
use crate::spec::Scalar;

/// alpha: the largest output a thread keeps in registers (a float4 / int4).
pub const ALPHA_BYTES: u64 = 16;

/// What the output collects, from the spec's output kind; the same on every backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Collect {
    /// One total per slot: a count (one slot), a histogram (one slot per bucket), a sum.
    Totals { slots: u32, total: Total },
    /// The index pairs that pass.
    Pairs,
    /// The K best partners of every query point.
    Knn { k: u32 },
}

/// The type of a slot's total.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Total {
    /// Pairs counted in 64 bits.
    Count,
    /// Values added in f64.
    Sum,
}

impl Total {
    /// An empty total per slot.
    pub fn zeros(self, slots: usize) -> Totals {
        match self {
            Total::Count => Totals::Counts(vec![0; slots]),
            Total::Sum => Totals::Sums(vec![0.0; slots]),
        }
    }
}

/// The paper's output classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum OutputClass {
    #[serde(rename = "type_i")]
    TypeI,
    #[serde(rename = "type_ii")]
    TypeII,
    #[serde(rename = "type_iii")]
    TypeIII,
    /// A fixed-size result per query point (K nearest).
    #[serde(rename = "per_query")]
    PerQuery,
}

impl Collect {
    /// Bytes of the whole output where known before the run: 8 per slot, or K
    /// (value, index) entries per query.
    pub fn bytes(self, queries: u64, value: Scalar) -> Option<u64> {
        match self {
            Collect::Totals { slots, .. } => Some(slots as u64 * totals::SLOT_BYTES as u64),
            Collect::Pairs => None,
            Collect::Knn { k } => Some(queries * k as u64 * (value.bytes() as u64 + 4)),
        }
    }

    /// The class of the paper's taxonomy: Type-I within alpha, Type-II within
    /// beta (the shared memory one block may have), Type-III beyond or unknown.
    pub fn class(self, bytes: Option<u64>, dev: &Device) -> OutputClass {
        match (self, bytes) {
            (Collect::Knn { .. }, _) => OutputClass::PerQuery,
            (_, Some(b)) if b <= ALPHA_BYTES => OutputClass::TypeI,
            (_, Some(b)) if b <= dev.shared_per_block_optin as u64 => OutputClass::TypeII,
            _ => OutputClass::TypeIII,
        }
    }

    /// The output stages that can collect this, by the names `--output` takes.
    pub fn stages(self) -> &'static [OutputChoice] {
        match self {
            Collect::Totals { .. } => {
                &[OutputChoice::Register, OutputChoice::Op, OutputChoice::Aop, OutputChoice::Global]
            }
            Collect::Pairs => &[OutputChoice::Dob],
            Collect::Knn { .. } => &[OutputChoice::Topk],
        }
    }

    pub fn cpu_fragment(self) -> Template {
        match self {
            Collect::Totals { .. } => Template::CpuTotals,
            Collect::Pairs => Template::CpuPairs,
            Collect::Knn { .. } => Template::CpuTopK,
        }
    }
}

impl OutputClass {
    /// The decision tree's leaf for this class.
    pub fn stage(self, collect: Collect) -> (OutputChoice, String) {
        match (self, collect) {
            (OutputClass::TypeI, _) => {
                (OutputChoice::Register, "Type-I: accumulate in registers, reduce once per block".into())
            }
            (OutputClass::TypeII, _) => (OutputChoice::Aop, "Type-II: privatized copies in shared memory".into()),
            (OutputClass::TypeIII, Collect::Pairs) => (
                OutputChoice::Dob,
                format!("Type-III: pages of {} pairs taken with one atomicAdd each", dob::PAGE_PAIRS),
            ),
            (OutputClass::TypeIII, _) => (
                OutputChoice::Global,
                "Type-III histogram: too large for a private copy, atomics in global memory".into(),
            ),
            (OutputClass::PerQuery, _) => {
                (OutputChoice::Topk, "per query: the K best so far in registers, written once".into())
            }
        }
    }

    pub fn why(self, bytes: Option<u64>, dev: &Device) -> String {
        let size = bytes.map_or("unknown in advance".to_owned(), |b| format!("{b} B"));
        let beta = dev.shared_per_block_optin;
        match self {
            OutputClass::TypeI => format!("output {size} fits in registers (alpha = {ALPHA_BYTES} B)"),
            OutputClass::TypeII => {
                format!(
                    "output {size}: above alpha = {ALPHA_BYTES} B, within beta = {beta} B of shared memory per block"
                )
            }
            OutputClass::TypeIII => format!("output {size}: above beta = {beta} B or unknown"),
            OutputClass::PerQuery => format!("K results per query point ({size} in all)"),
        }
    }
}

/// The output stages by the names of the paper and of `--output`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputChoice {
    /// Each thread accumulates in registers; one block reduction at the end.
    Register,
    /// One private copy of the output per block in shared memory.
    Op,
    /// Several private copies per block, chosen by lane id.
    Aop,
    /// Atomics straight into the output in global memory.
    Global,
    /// Pairs appended to pages of a global pool.
    Dob,
    /// Each query thread keeps its K best in registers.
    Topk,
}

impl OutputChoice {
    pub const ALL: [OutputChoice; 6] = [
        OutputChoice::Register,
        OutputChoice::Op,
        OutputChoice::Aop,
        OutputChoice::Global,
        OutputChoice::Dob,
        OutputChoice::Topk,
    ];

    pub fn name(self) -> &'static str {
        match self {
            OutputChoice::Register => "register",
            OutputChoice::Op => "op",
            OutputChoice::Aop => "aop",
            OutputChoice::Global => "global",
            OutputChoice::Dob => "dob",
            OutputChoice::Topk => "topk",
        }
    }

    /// The block size this stage prefers, and why.
    pub fn block_size(self, dev: &Device) -> (u32, String) {
        match self {
            OutputChoice::Op | OutputChoice::Aop => totals::shared_block_size(dev),
            OutputChoice::Register => {
                (512, "each shared tile feeds 512 threads, the paper's choice for Type-I (section 5.2)".into())
            }
            _ => (256, "a tile of 256 points amortizes each barrier without large per-block output state".into()),
        }
    }
}

/// The output stage of a plan, with what it needs to know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "stage")]
pub enum OutputStage {
    /// Totals per slot, kept where `store` says.
    Totals {
        slots: u32,
        total: Total,
        #[serde(flatten)]
        store: totals::Store,
    },
    /// The direct output buffer: pages of `page_pairs` pairs.
    Dob { page_pairs: u32 },
    /// Each query's K best in registers.
    TopK { k: u32 },
}

impl OutputStage {
    /// The name of the paper and of `--output`.
    pub fn choice(self) -> OutputChoice {
        match self {
            OutputStage::Totals { store, .. } => store.choice(),
            OutputStage::Dob { .. } => OutputChoice::Dob,
            OutputStage::TopK { .. } => OutputChoice::Topk,
        }
    }

    /// A short name: `aop32`, `op`, `dob`.
    pub fn label(self) -> String {
        match self {
            OutputStage::Totals { store: totals::Store::Shared { copies, .. }, .. } if copies > 1 => {
                format!("aop{copies}")
            }
            other => other.choice().name().to_owned(),
        }
    }

    pub fn collect(self) -> Collect {
        match self {
            OutputStage::Totals { slots, total, .. } => Collect::Totals { slots, total },
            OutputStage::Dob { .. } => Collect::Pairs,
            OutputStage::TopK { k } => Collect::Knn { k },
        }
    }

    /// Shared memory the stage takes after the input tile.
    pub fn shared_bytes(self) -> u32 {
        match self {
            OutputStage::Totals { slots, store, .. } => store.shared_bytes(slots),
            _ => 0,
        }
    }

    /// Registers the stage's per-thread state takes with R own points (an
    /// estimate: no GPU to ask at plan time).
    pub fn registers(self, value: Scalar, points_per_thread: u32) -> u32 {
        match self {
            OutputStage::TopK { k } => points_per_thread * k * (value.bytes() / 4 + 1),
            OutputStage::Dob { .. } => 8,
            OutputStage::Totals { .. } => 2,
        }
    }

    /// The stage's fragment and what it renders with.
    pub fn fragment(self) -> (Template, serde_json::Value) {
        match self {
            OutputStage::Totals { store, .. } => store.fragment(),
            OutputStage::Dob { page_pairs } => (Template::OutputDob, serde_json::json!({ "page_pairs": page_pairs })),
            OutputStage::TopK { .. } => (Template::OutputTopK, serde_json::json!({})),
        }
    }

    /// The kernel parameters the stage adds, after the input's.
    pub fn params(self) -> Vec<KernelParam> {
        match self {
            OutputStage::Totals { .. } => totals::params(),
            OutputStage::Dob { .. } => dob::params(),
            OutputStage::TopK { .. } => topk::params(),
        }
    }

    /// Whether the units of one query block must run in order on one stream:
    /// per-query lists are refined block after block.
    pub fn refines_per_query(self) -> bool {
        matches!(self, OutputStage::TopK { .. })
    }
}

/// An output argument of the kernel, named by the family that owns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Arg {
    Totals(totals::Arg),
    Dob(dob::Arg),
    TopK(topk::Arg),
}

/// What one worker (a CPU chunk of rows, a GPU stream) found.
#[derive(Debug, Clone, PartialEq)]
pub enum Partial {
    Totals(Totals),
    Pairs(Vec<[u32; 2]>),
    /// (first query, K values and ids per query) of each query block finished.
    Knn(Vec<(usize, Column, Vec<u32>)>),
}

/// Merges the workers' partial results into the outcome of `queries` query
/// points: totals add slot by slot, pairs concatenate in order, each query's
/// list (of `value`s) comes from the worker that finished it.
pub fn merge(collect: Collect, value: Scalar, queries: usize, parts: Vec<Partial>) -> Outcome {
    match collect {
        Collect::Totals { slots, total } => {
            let mut sum = total.zeros(slots as usize);
            for p in &parts {
                let Partial::Totals(t) = p else { unreachable!("partials of one collect") };
                sum.add(t);
            }
            Outcome::Totals(sum)
        }
        Collect::Pairs => {
            let lists: Vec<Vec<[u32; 2]>> = parts
                .into_iter()
                .map(|p| match p {
                    Partial::Pairs(v) => v,
                    _ => unreachable!("partials of one collect"),
                })
                .collect();
            Outcome::Pairs(PairList::from_parts(lists))
        }
        Collect::Knn { k } => {
            let k = k as usize;
            // One part with every row (a search of rings, one query block): taken as it is.
            if let [Partial::Knn(rows)] = &parts[..]
                && let [(0, v, i)] = &rows[..]
                && v.len() == queries * k
                && i.len() == queries * k
            {
                let Some(Partial::Knn(mut rows)) = parts.into_iter().next() else { unreachable!("matched above") };
                let (_, values, ids) = rows.pop().expect("one row block");
                return Outcome::Knn { k, ids, values };
            }
            let mut values = Column::zeros(value, queries * k);
            let mut ids = vec![u32::MAX; queries * k];
            let mut written = 0;
            for p in parts {
                let Partial::Knn(rows) = p else { unreachable!("partials of one collect") };
                for (first, v, i) in rows {
                    values.copy_in(first * k, &v);
                    ids[first * k..first * k + i.len()].copy_from_slice(&i);
                    written += i.len();
                }
            }
            // Query blocks do not overlap: every list was written once.
            assert_eq!(written, queries * k, "each query's list comes from one worker");
            Outcome::Knn { k, ids, values }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pair_lists_merge_whole_whatever_their_sizes() {
        let parts = vec![
            Partial::Pairs(vec![[1, 2]]),
            Partial::Pairs(vec![]),
            Partial::Pairs(vec![[3, 4], [5, 6], [7, 8]]),
            Partial::Pairs(vec![[9, 10], [11, 12]]),
        ];
        let Outcome::Pairs(all) = merge(Collect::Pairs, Scalar::F32, 0, parts) else {
            panic!("pairs merge into pairs")
        };
        let mut all = all.to_vec();
        all.sort_unstable();
        assert_eq!(all, vec![[1, 2], [3, 4], [5, 6], [7, 8], [9, 10], [11, 12]]);
        let Outcome::Pairs(none) = merge(Collect::Pairs, Scalar::F32, 0, vec![]) else {
            panic!("pairs merge into pairs")
        };
        assert!(none.is_empty());
        // Long lists are kept as found (no copy), short ones gathered: every pair once.
        let lists: Vec<Vec<[u32; 2]>> =
            [1_500_000u32, 0, 1, 2_000_000, 70_000].iter().map(|&n| (0..n).map(|i| [n, i]).collect()).collect();
        let want: Vec<[u32; 2]> = lists.iter().flatten().copied().collect();
        let parts = lists.into_iter().map(Partial::Pairs).collect();
        let Outcome::Pairs(all) = merge(Collect::Pairs, Scalar::F32, 0, parts) else { panic!("pairs") };
        assert_eq!(all.parts().len(), 3, "two long lists kept, the short ones gathered");
        assert_eq!(all.len(), want.len());
        // In order by counting passes: a comparison sort of 3.6M pairs took a minute unoptimised.
        assert_eq!(crate::outcome::sorted(all.to_vec()), crate::outcome::sorted(want));
    }
}
