//! The kernel's stage families, one module each. A family owns its planning
//! rule and the explanation that goes with it, its template fragment and the
//! contract the fragment keeps, the kernel parameters it adds, how partial
//! results merge, and its CPU driver fragment:
//!
//! - [`visit`]: which pairs, and how blocks meet tiles;
//! - [`input`]: where the other point of each pair is cached;
//! - [`contribution`]: what one pair contributes, from the spec's output kind;
//! - [`output`]: where contributions accumulate (registers, shared copies,
//!   global memory, the direct output buffer, per-query top-K).
//!
//! [`crate::plan`] composes the families' choices into a Plan,
//! [`crate::codegen`] renders their fragments into one kernel (and one CPU
//! driver), and [`crate::backend`] allocates their buffers and launches
//! (`backend::cuda::launch` resolves each [`Source`] to a device value).

pub mod bucket_table;
pub mod contribution;
pub mod input;
pub mod output;
pub mod visit;

use serde::Serialize;

/// How a pair is tested. Its rules live with the contribution
/// (`Test::choose`); the output family reads it too (a count on keys adds
/// indicators), so it stands here, where neither family reaches into the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Test {
    /// On its value, the definition: what the CPU backend, the oracle, does.
    Values,
    /// On the spec's key: a threshold against the edge key found by
    /// bisection at start, a bucket from the spec's estimate of the value.
    Keys,
}

impl Test {
    pub const ALL: [Test; 2] = [Test::Values, Test::Keys];

    pub fn name(self) -> &'static str {
        match self {
            Test::Values => "values",
            Test::Keys => "keys",
        }
    }
}

/// One side of a pair: set A (the points each thread owns), or the other set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    A,
    B,
}

impl Side {
    pub fn prefix(self) -> &'static str {
        match self {
            Side::A => "a",
            Side::B => "b",
        }
    }
}

/// One parameter of the kernel. The plan holds the whole list: the kernel's
/// signature is rendered from it, and the launcher pushes one argument per
/// entry, resolved from `source`, so the two cannot disagree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct KernelParam {
    pub name: String,
    pub ctype: String,
    pub source: Source,
}

impl KernelParam {
    pub fn new(name: &str, ctype: &str, source: Source) -> KernelParam {
        KernelParam { name: name.into(), ctype: ctype.into(), source }
    }
}

/// Where the launcher takes a parameter's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Component array `c` of a side's block (`const T*`).
    Column(Side, usize),
    /// Points in a side's block.
    Count(Side),
    /// Index of a side's first point in the whole input.
    Offset(Side),
    /// The first step of every block that the launch runs.
    StepFirst,
    /// The step at which every block of the launch stops.
    StepEnd,
    /// The grid's units (`const uint4*`: own points [x, y), ranges [z, w)).
    GridUnits,
    /// The grid's ranges of the other set's points (`const uint2*`: [x, y)).
    GridRanges,
    /// The unit the launch's first block takes.
    UnitFirst,
    /// A search of rings: the other set's cell starts (`cell_start[c]..cell_start[c + 1]`).
    RingCellStart,
    /// A search of rings: the cell of each of A's points, in cell order.
    RingCellA,
    /// A search of rings: the other set's input index of each sorted point.
    RingPermB,
    /// A search of rings: A's input index of each sorted point, the row its list goes to.
    RingPermA,
    /// A search of rings: cells per axis, which wrap, and the reach of a ring.
    RingShape,
    /// A buffer or count of the output stage.
    Output(output::Arg),
}

/// `struct RingShape` of `kernel.cu`, field for field: cells per axis (1
/// past the grid's axes), a bit per wrapping axis, and the reach of a ring
/// (`index::ring_shape`). The CPU driver's `TwobsGrid` holds one too.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct RingShape {
    pub cells: [u32; 3],
    pub periodic: u32,
    pub reach: f64,
}

/// `FromStr` and `Display` by the names of `ALL` and `name()`: the names a
/// plan shows and `--input-cache`, `--output` take.
macro_rules! named {
    ($t:ty, $what:literal) => {
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl std::str::FromStr for $t {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                <$t>::ALL.iter().copied().find(|v| v.name() == s).ok_or_else(|| {
                    let names: Vec<&str> = <$t>::ALL.iter().map(|v| v.name()).collect();
                    format!("unknown {} `{s}`; expected one of: {}", $what, names.join(", "))
                })
            }
        }
    };
}
named!(input::InputCache, "input cache");
named!(output::OutputChoice, "output stage");
named!(contribution::Test, "test");

/// Every template, named by the family that owns it; the enum, not a string,
/// picks the code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Template {
    Kernel,
    Probe,
    KeysProbe,
    Types,
    Snippet,
    ContributionCount,
    ContributionBucket,
    ContributionBucketTable,
    ContributionHistogram,
    ContributionWeightedHistogram,
    ContributionHistogram2d,
    ContributionSum,
    ContributionPairs,
    ContributionKnn,
    ContributionKeys,
    ContributionThresholdKey,
    ContributionCountKey,
    ContributionHistogramKey,
    ContributionHistogramTableKey,
    ContributionPairsKey,
    ContributionExact,
    InputRegisterShm,
    InputRegisterRoc,
    InputShuffle,
    InputNaive,
    OutputRegister,
    OutputShared,
    OutputGlobal,
    OutputDob,
    OutputTopK,
    OutputOfferTotals,
    OutputOfferIndicators,
    OutputOfferPairs,
    OutputDobDrain,
    IndexGrid,
    InputTake,
    VisitLowerTriangle,
    VisitAllPairs,
    VisitCross,
    VisitGrid,
    VisitRings,
    OwnBlock,
    OwnUnit,
    DiagonalBalanced,
    DiagonalFiltered,
    CpuDriver,
    CpuPrelude,
    CpuF64Begin,
    CpuF64End,
    CpuVisitLowerTriangle,
    CpuVisitAllPairs,
    CpuVisitCross,
    CpuVisitRows,
    CpuVisitGrid,
    CpuVisitRings,
    CpuTotals,
    CpuPairs,
    CpuTopK,
    CpuKeysProbe,
}

macro_rules! templates {
    ($($variant:ident => $path:literal),* $(,)?) => {
        impl Template {
            pub const ALL: &[Template] = &[$(Template::$variant),*];

            /// The file under `templates/`, the name other templates include it by.
            pub fn path(self) -> &'static str {
                match self {
                    $(Template::$variant => $path),*
                }
            }

            pub fn text(self) -> &'static str {
                match self {
                    $(Template::$variant => include_str!(concat!("../../templates/", $path))),*
                }
            }
        }
    };
}

templates! {
    Kernel => "kernel.cu",
    Probe => "probe.cu",
    KeysProbe => "keys_probe.cu",
    Types => "common/types.cu",
    Snippet => "common/snippet.cu",
    ContributionCount => "contribution/count.cu",
    ContributionBucket => "contribution/bucket.cu",
    ContributionHistogram => "contribution/histogram.cu",
    ContributionWeightedHistogram => "contribution/weighted_histogram.cu",
    ContributionHistogram2d => "contribution/histogram2d.cu",
    ContributionSum => "contribution/sum.cu",
    ContributionPairs => "contribution/pairs.cu",
    ContributionKnn => "contribution/knn.cu",
    ContributionKeys => "contribution/keys.cu",
    ContributionThresholdKey => "contribution/threshold_key.cu",
    ContributionCountKey => "contribution/count_key.cu",
    ContributionHistogramKey => "contribution/histogram_key.cu",
    ContributionHistogramTableKey => "contribution/histogram_table_key.cu",
    ContributionBucketTable => "contribution/bucket_table.cu",
    ContributionPairsKey => "contribution/pairs_key.cu",
    ContributionExact => "contribution/exact.cu",
    InputRegisterShm => "input/register_shm.cu",
    InputRegisterRoc => "input/register_roc.cu",
    InputShuffle => "input/shuffle.cu",
    InputNaive => "input/naive.cu",
    OutputRegister => "output/register.cu",
    OutputShared => "output/shared.cu",
    OutputGlobal => "output/global.cu",
    OutputDob => "output/dob.cu",
    OutputTopK => "output/topk.cu",
    OutputOfferTotals => "output/offer_totals.cu",
    OutputOfferIndicators => "output/offer_indicators.cu",
    OutputOfferPairs => "output/offer_pairs.cu",
    OutputDobDrain => "output/dob_drain.cu",
    IndexGrid => "index/grid.cu",
    InputTake => "input/take.cu",
    VisitLowerTriangle => "visit/lower_triangle.cu",
    VisitAllPairs => "visit/all_pairs.cu",
    VisitCross => "visit/cross.cu",
    VisitGrid => "visit/grid.cu",
    VisitRings => "visit/rings.cu",
    OwnBlock => "visit/own_block.cu",
    OwnUnit => "visit/own_unit.cu",
    DiagonalBalanced => "visit/diagonal_balanced.cu",
    DiagonalFiltered => "visit/diagonal_filtered.cu",
    CpuDriver => "cpu/driver.cpp",
    CpuPrelude => "cpu/prelude.h",
    CpuF64Begin => "cpu/f64_begin.h",
    CpuF64End => "cpu/f64_end.h",
    CpuVisitLowerTriangle => "cpu/visit/lower_triangle.cpp",
    CpuVisitAllPairs => "cpu/visit/all_pairs.cpp",
    CpuVisitCross => "cpu/visit/cross.cpp",
    CpuVisitRows => "cpu/visit/rows.cpp",
    CpuVisitGrid => "cpu/visit/grid.cpp",
    CpuVisitRings => "cpu/visit/rings.cpp",
    CpuTotals => "cpu/output/totals.cpp",
    CpuPairs => "cpu/output/pairs.cpp",
    CpuTopK => "cpu/output/topk.cpp",
    CpuKeysProbe => "cpu/keys_probe.cpp",
}
