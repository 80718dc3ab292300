//! Totals per slot (counts, sums, histograms): kept in registers (Type-I), in
//! private copies in shared memory (Type-II: OP with one copy per block, AOP
//! with several chosen by lane id, sized by the paper's copy model), or with
//! atomics straight into global memory (Type-III). Every store ends in the same
//! device array of one 64-bit total per slot; partial totals merge by adding.
//!
//! Fragment contract, beyond [`super`]'s: the contribution fragment defines
//! `SLOTS`, `Tally` (a thread's own accumulator), `Total` (the 64-bit total)
//! and `Contribution contribute(a, b)` with a slot (SLOTS: nothing) and an amount.
//! Where a count is tallied by indicators ([`Tallying::Indicators`]), the
//! register output also defines `bool counts_fails()` (the same in every
//! thread) and `count<FAILS>(own, q, valid)`, and the kernel walks its pairs
//! with `count<counts_fails()>` (`templates/kernel.cu`'s `Count`).

use serde::Serialize;

use super::{OutputChoice, OutputStage, Template, Total};
use crate::device::Device;
use crate::model::{self, CopyProblem, CopyRow};
use crate::spec::{Output, Problem, Scalar};
use crate::stage::{KernelParam, Source, Test};

/// Every total is 8 bytes: a 64-bit count or an f64 sum.
pub const SLOT_BYTES: u32 = 8;

/// Where the totals accumulate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "store")]
pub enum Store {
    /// Each thread tallies every slot in registers; one block reduction at the end.
    Registers,
    /// `copies` private copies per block in shared memory (OP for one, AOP for
    /// more), lane l updating copy l % copies; summed into global memory once per block.
    Shared { copies: u32, counter: Counter },
    /// Atomics straight into the totals in global memory.
    Global,
}

impl Store {
    pub fn choice(self) -> OutputChoice {
        match self {
            Store::Registers => OutputChoice::Register,
            Store::Shared { copies: 1, .. } => OutputChoice::Op,
            Store::Shared { .. } => OutputChoice::Aop,
            Store::Global => OutputChoice::Global,
        }
    }

    pub fn shared_bytes(self, slots: u32) -> u32 {
        match self {
            // One more slot per copy: where pairs that add nothing go, without a branch.
            Store::Shared { copies, counter } => copies * (slots + 1) * counter.bytes(),
            _ => 0,
        }
    }

    pub fn fragment(self) -> (Template, serde_json::Value) {
        match self {
            Store::Registers => (Template::OutputRegister, serde_json::json!({})),
            Store::Shared { copies, counter } => {
                (Template::OutputShared, serde_json::json!({ "copies": copies, "counter": counter.c_type() }))
            }
            Store::Global => (Template::OutputGlobal, serde_json::json!({})),
        }
    }
}

/// How a thread tallies its pairs in registers (`templates/output/register.cu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tallying {
    /// Each pair's slot and amount from the contribution, made exact where a
    /// lane of the warp is unsure (`output/offer_totals.cu`).
    Slots,
    /// A count on f32 keys: each pair's indicator, 1 or 0 from one
    /// comparison of its key with an edge, summed in a float and moved into
    /// the integer tally each step (`output/offer_indicators.cu`,
    /// `contribution/count_key.cu`).
    Indicators,
}

impl Tallying {
    /// The rule: indicators wherever a count is tested on f32 keys in
    /// registers. A pair then costs one FSET and one FADD, and no NaN test
    /// (the comparison's NaN is 0, and the count counts failures where NaN
    /// keys pass). Before, a saturating multiply-add made the same 1 or 0
    /// (c11): it reads three registers to FSET's two, and on the H200 its
    /// loop read two registers of one bank in 71 of 267 instructions against
    /// 40, and ran 2% slower (`git show 2c654b2:docs/performance.md`, c15).
    pub fn choose(problem: &Problem, test: Test, output: OutputStage) -> Tallying {
        match (test, &problem.output, problem.function.returns, output) {
            (Test::Keys, Output::Count { .. }, Scalar::F32, OutputStage::Totals { store: Store::Registers, .. }) => {
                Tallying::Indicators
            }
            _ => Tallying::Slots,
        }
    }

    /// Runs of 4 tile points the pair loop unrolls (`input/register_shm.cu`):
    /// 4 where a count adds indicators, a loop without a branch (2PCF ran
    /// 0.1376 s against 0.1404 s at 2 on the H200), and 2 where pairs vote
    /// and may branch (SDH ran 6-12% slower at 4).
    pub fn tile_runs_unrolled(self) -> u32 {
        match self {
            Tallying::Indicators => 4,
            Tallying::Slots => 2,
        }
    }
}

/// The element of the private copies in shared memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Counter {
    /// 32-bit counts: one native shared-memory atomic per pair (a 64-bit add is
    /// a compare-and-swap loop on Hopper, and doubles the copies' shared memory).
    /// Each launch meets few enough partners that no copy can reach 2^32, and
    /// adds its copies to the 64-bit totals at the end of every block.
    U32,
    /// The output's own `Total` (64-bit counts, f64 sums).
    Total,
}

impl Counter {
    /// The planning rule: counts in 32 bits, with a bound on the partners each
    /// of a block's `own_points` may meet in one launch, so that even one copy
    /// they all share stays below 2^32 (the backend cuts launches to it);
    /// sums in f64. Returns the counter, why, and the bound.
    pub fn choose(total: Total, own_points: u32, partners: u64) -> (Counter, String, Option<u64>) {
        match total {
            Total::Sum => (Counter::Total, "sums are added in f64".into(), None),
            Total::Count => {
                let bound = u64::from(u32::MAX) / u64::from(own_points.max(1));
                let why = if partners <= bound {
                    format!(
                        "32-bit counters, native shared atomics: a copy counts at most {own_points} own points x {partners} partners = {} < 2^32 pairs",
                        own_points as u64 * partners
                    )
                } else {
                    format!(
                        "32-bit counters, native shared atomics: launches meet at most {bound} partners per own point, so a copy counts at most {own_points} x {bound} < 2^32 pairs before it is added to the 64-bit totals"
                    )
                };
                (Counter::U32, why, Some(bound))
            }
        }
    }

    pub fn bytes(self) -> u32 {
        match self {
            Counter::U32 => 4,
            Counter::Total => SLOT_BYTES,
        }
    }

    pub fn c_type(self) -> &'static str {
        match self {
            Counter::U32 => "unsigned",
            Counter::Total => "Total",
        }
    }
}

/// Shared copies want the smallest block that still fills a multiprocessor.
pub fn shared_block_size(dev: &Device) -> (u32, String) {
    (
        dev.threads_per_sm / dev.blocks_per_sm,
        format!(
            "the smallest block that still fills a multiprocessor ({} threads / {} blocks): the most blocks, so the most private output copies, per multiprocessor",
            dev.threads_per_sm, dev.blocks_per_sm
        ),
    )
}

/// The paper's copy-count model (section 3.3.2) for one output: R x L for
/// every copy count, the least, and gamma.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CopyModel {
    pub c_l: f64,
    pub c_lp: f64,
    pub constants_source: &'static str,
    /// H_S: elements of one output copy.
    pub slots: u32,
    pub rows: Vec<CopyRow>,
    /// The copy count of least modelled cost.
    pub best: u32,
    /// gamma: the smallest output size from which one copy (OP) is best.
    pub gamma: Option<u32>,
}

impl CopyModel {
    /// The model for `slots` slots of `bytes_per_slot` beside `tile_bytes` of
    /// input tile, or None when even one copy would not fit a block's shared memory.
    pub fn new(
        dev: &Device,
        slots: u32,
        bytes_per_slot: u32,
        tile_bytes: u32,
        block_size: u32,
        registers: u32,
        total_threads: u64,
    ) -> Option<CopyModel> {
        let beta = dev.shared_per_block_optin;
        if slots as u64 * bytes_per_slot as u64 > beta as u64 {
            return None;
        }
        let problem = |slots: u32| CopyProblem {
            slots,
            bytes_per_slot,
            other_shared_bytes: tile_bytes,
            block_size,
            registers_per_thread: registers,
            total_threads,
        };
        let rows = model::copy_table(dev, problem(slots), dev.model);
        let best = model::best_copies(&rows).map_or(1, |r| r.copies);
        let gamma = (1..=beta / bytes_per_slot).find(|&s| {
            let rows = model::copy_table(dev, problem(s), dev.model);
            model::best_copies(&rows).is_some_and(|r| r.copies == 1)
        });
        Some(CopyModel {
            c_l: dev.model.c_l,
            c_lp: dev.model.c_lp,
            constants_source: dev.model.source,
            slots,
            rows,
            best,
            gamma,
        })
    }

    /// R x L of `copies` copies, where they fit.
    pub fn cost(&self, copies: u32) -> Option<f64> {
        self.rows.iter().find(|r| r.copies == copies).and_then(|r| r.cost)
    }

    /// Why the model's copy count, for a Type-II output.
    pub fn why(&self, copies: u32) -> String {
        match self.gamma {
            Some(g) if copies == 1 => {
                format!("output of {} elements >= gamma = {g}: one private copy per block (OP) costs least", self.slots)
            }
            Some(g) => {
                format!(
                    "output of {} elements < gamma = {g}: {copies} copies per block by lane id (AOP) cost least",
                    self.slots
                )
            }
            None => format!("{copies} copies per block cost least"),
        }
    }
}

/// The stage's kernel argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Arg {
    /// One `Total` per slot.
    Totals,
}

pub fn params() -> Vec<KernelParam> {
    vec![KernelParam {
        name: "totals".into(),
        ctype: "Total*".into(),
        source: Source::Output(super::Arg::Totals(Arg::Totals)),
    }]
}
