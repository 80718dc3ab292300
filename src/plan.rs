//! The planner: the decision tree of the paper's Fig. 9, extended with
//! per-query top-K, and the models that size the output stage.
//!
//! A [`Plan`] is plain data that explains itself: every choice carries the
//! reason and the numbers behind it.

use std::fmt;

use serde::Serialize;

use crate::device::Device;
use crate::model::{self, BlockNeeds, CopyProblem, CopyRow, Occupancy};
use crate::spec::{Output, Params, Problem, Sets};

/// alpha: the largest output a thread keeps in registers (a float4 / int4).
pub const ALPHA_BYTES: u64 = 16;
/// Private output elements are 64-bit counters.
pub const SLOT_BYTES: u32 = 8;
/// Pairs per page of the direct output buffer.
pub const PAGE_PAIRS: u32 = 512;

/// Where the "other" points of each pair are cached while a block works on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InputCache {
    /// Own point in registers, the other block's tile in shared memory.
    RegisterShm,
    /// Own point in registers, the tile read through the read-only cache.
    RegisterRoc,
    /// Tiles passed around a warp with __shfl_sync; no shared memory.
    Shuffle,
    /// No staging: every thread reads the other points from global memory.
    Naive,
}

/// How pair results reach the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputStage {
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

/// Which (i, j) pairs the kernel evaluates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Visit {
    /// Self problem with a symmetric function: each unordered pair once.
    LowerTriangle,
    /// Self problem, every ordered pair i != j.
    AllPairs,
    /// Two sets: every (a, b).
    Cross,
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

/// How a block pairs its own points with each other on the diagonal tile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IntraBlock {
    /// Thread t pairs with (t + s) % B for s = 1..B/2: equal work for every thread.
    Balanced,
    /// Every thread walks the tile and keeps j > t (shuffle tiles have no random access).
    Filtered,
    /// Not a lower-triangle visit.
    None,
}

/// Choices the user forced for an experiment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Forced {
    pub input_cache: Option<InputCache>,
    pub output: Option<OutputStage>,
    pub copies: Option<u32>,
    pub block_size: Option<u32>,
}

impl Forced {
    pub fn any(&self) -> bool {
        *self != Forced::default()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Points {
    pub a: u64,
    pub b: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    pub what: &'static str,
    pub choice: String,
    pub why: String,
}

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

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    pub problem: String,
    pub device: String,
    pub points: Points,
    pub pairs: u128,
    pub visit: Visit,
    pub class: OutputClass,
    /// Bytes of the whole output, where known before the run.
    pub output_bytes: Option<u64>,
    pub input_cache: InputCache,
    pub output: OutputStage,
    pub copies: u32,
    pub block_size: u32,
    pub grid: u64,
    pub intra_block: IntraBlock,
    /// Pairs per page of the direct output buffer (DOB only).
    pub page_size: Option<u32>,
    /// Dynamic shared memory per block: input tile plus output copies.
    pub shared_bytes: u32,
    pub tile_bytes: u32,
    pub output_shared_bytes: u32,
    pub registers_estimate: u32,
    pub occupancy: Occupancy,
    pub rounds: u64,
    pub copy_model: Option<CopyModel>,
    pub decisions: Vec<Decision>,
    /// Where a forced choice departs from the planner's, and what the model says of it.
    pub notes: Vec<String>,
}

impl InputCache {
    pub const ALL: [InputCache; 4] =
        [InputCache::RegisterShm, InputCache::RegisterRoc, InputCache::Shuffle, InputCache::Naive];
    pub fn name(self) -> &'static str {
        match self {
            InputCache::RegisterShm => "register_shm",
            InputCache::RegisterRoc => "register_roc",
            InputCache::Shuffle => "shuffle",
            InputCache::Naive => "naive",
        }
    }
}

impl OutputStage {
    pub const ALL: [OutputStage; 6] = [
        OutputStage::Register,
        OutputStage::Op,
        OutputStage::Aop,
        OutputStage::Global,
        OutputStage::Dob,
        OutputStage::Topk,
    ];
    pub fn name(self) -> &'static str {
        match self {
            OutputStage::Register => "register",
            OutputStage::Op => "op",
            OutputStage::Aop => "aop",
            OutputStage::Global => "global",
            OutputStage::Dob => "dob",
            OutputStage::Topk => "topk",
        }
    }

    /// The stages that can produce this output kind.
    pub fn applicable(output: &Output) -> &'static [OutputStage] {
        match output {
            Output::Count { .. } => &[OutputStage::Register, OutputStage::Op, OutputStage::Aop, OutputStage::Global],
            Output::Histogram { .. } => {
                &[OutputStage::Register, OutputStage::Op, OutputStage::Aop, OutputStage::Global]
            }
            Output::Sum => &[OutputStage::Register],
            Output::Pairs { .. } => &[OutputStage::Dob],
            Output::Knn { .. } => &[OutputStage::Topk],
        }
    }

    fn privatized(self) -> bool {
        matches!(self, OutputStage::Op | OutputStage::Aop)
    }
}

macro_rules! named_enum_parse {
    ($t:ty, $what:literal) => {
        impl std::str::FromStr for $t {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                <$t>::ALL.iter().copied().find(|v| v.name() == s).ok_or_else(|| {
                    let names: Vec<&str> = <$t>::ALL.iter().map(|v| v.name()).collect();
                    format!("unknown {} `{s}`; expected one of: {}", $what, names.join(", "))
                })
            }
        }
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}
named_enum_parse!(InputCache, "input cache");
named_enum_parse!(OutputStage, "output stage");

impl Visit {
    pub fn name(self) -> &'static str {
        match self {
            Visit::LowerTriangle => "lower_triangle",
            Visit::AllPairs => "all_pairs",
            Visit::Cross => "cross",
        }
    }
}

/// Everything the planner derives from the problem alone.
struct Shape {
    visit: Visit,
    class: OutputClass,
    output_bytes: Option<u64>,
    /// H_S for the privatized stages: histogram bins, or 1 for a count.
    slots: u32,
    query_points: u64,
    pairs: u128,
}

/// Which pairs a problem visits; every backend visits the same.
pub fn visit_of(problem: &Problem) -> Visit {
    match (problem.input.sets, problem.function.symmetric, &problem.output) {
        (Sets::Two, _, _) => Visit::Cross,
        (Sets::One, true, Output::Knn { .. }) | (Sets::One, false, _) => Visit::AllPairs,
        (Sets::One, true, _) => Visit::LowerTriangle,
    }
}

fn shape(problem: &Problem, params: &Params, points: Points, dev: &Device) -> Shape {
    let beta = dev.shared_per_block_optin as u64;
    let n = points.a;
    let visit = visit_of(problem);
    let pairs = match visit {
        Visit::LowerTriangle => n as u128 * n.saturating_sub(1) as u128 / 2,
        Visit::AllPairs => n as u128 * n.saturating_sub(1) as u128,
        Visit::Cross => n as u128 * points.b.unwrap_or(n) as u128,
    };
    let (class, output_bytes, slots) = match &problem.output {
        Output::Count { .. } | Output::Sum => (OutputClass::TypeI, Some(8), 1),
        Output::Histogram { bins, .. } => {
            let bins = params.eval(bins).as_f64() as u64;
            let bytes = bins * SLOT_BYTES as u64;
            let class = if bytes <= ALPHA_BYTES {
                OutputClass::TypeI
            } else if bytes <= beta {
                OutputClass::TypeII
            } else {
                OutputClass::TypeIII
            };
            (class, Some(bytes), bins as u32)
        }
        Output::Pairs { .. } => (OutputClass::TypeIII, None, 0),
        Output::Knn { k } => {
            let k = params.eval(k).as_f64() as u64;
            (OutputClass::PerQuery, Some(n * k * (problem.function.returns.bytes() as u64 + 4)), 0)
        }
    };
    Shape { visit, class, output_bytes, slots, query_points: n, pairs }
}

/// Registers per thread the kernel is expected to need (no GPU to ask at plan time):
/// a base for indices and loop state, the own and the other element, the output state.
fn registers_estimate(problem: &Problem, params: &Params, output: OutputStage) -> u32 {
    let words = problem.input.element.bytes().div_ceil(4);
    let output_regs = match output {
        OutputStage::Topk => {
            let k = match &problem.output {
                Output::Knn { k } => params.eval(k).as_f64() as u32,
                _ => 0,
            };
            k * (problem.function.returns.bytes() / 4 + 1)
        }
        OutputStage::Dob => 8,
        _ => 2,
    };
    (22 + 2 * words + output_regs).next_multiple_of(8).clamp(32, 255)
}

fn largest_power_of_two_at_most(x: u64) -> u32 {
    if x <= 1 { 1 } else { 1u32 << (63 - x.leading_zeros()).min(10) }
}

fn planner_block_size(output: OutputStage, query_points: u64, dev: &Device) -> (u32, String) {
    let (preferred, why) = match output {
        OutputStage::Op | OutputStage::Aop => (
            dev.threads_per_sm / dev.blocks_per_sm,
            format!(
                "the smallest block that still fills a multiprocessor ({} threads / {} blocks): the most blocks, so the most private output copies, per multiprocessor",
                dev.threads_per_sm, dev.blocks_per_sm
            ),
        ),
        OutputStage::Register => {
            (512, "each shared tile feeds 512 threads, the paper's choice for Type-I (section 5.2)".to_owned())
        }
        _ => (256, "a tile of 256 points amortizes each barrier without large per-block output state".to_owned()),
    };
    // Every multiprocessor should get at least one block.
    let cap = largest_power_of_two_at_most(query_points.div_ceil(dev.multiprocessors as u64)).max(32);
    if cap < preferred {
        (
            cap,
            format!(
                "{why}; capped at {cap} so that {} points still give every one of the {} multiprocessors a block",
                query_points, dev.multiprocessors
            ),
        )
    } else {
        (preferred, why)
    }
}

impl Plan {
    /// Plans `problem` for `dev`, honouring forced choices; errors name what is impossible.
    pub fn new(
        problem: &Problem,
        params: &Params,
        dev: &Device,
        points: Points,
        forced: Forced,
    ) -> anyhow::Result<Plan> {
        let planned = Plan::decide(problem, params, dev, points, Forced::default())?;
        if !forced.any() {
            return Ok(planned);
        }
        let mut plan = Plan::decide(problem, params, dev, points, forced)?;
        plan.compare_with(&planned);
        Ok(plan)
    }

    fn decide(
        problem: &Problem,
        params: &Params,
        dev: &Device,
        points: Points,
        forced: Forced,
    ) -> anyhow::Result<Plan> {
        let shape = shape(problem, params, points, dev);
        let mut decisions = Vec::new();
        let beta = dev.shared_per_block_optin;

        decisions.push(Decision {
            what: "visit",
            choice: shape.visit.name().into(),
            why: match shape.visit {
                Visit::LowerTriangle => "one set and a symmetric function: each unordered pair i < j once".into(),
                Visit::AllPairs if matches!(problem.output, Output::Knn { .. }) => {
                    "per-query output: each query thread sees every other point (j != i)".into()
                }
                Visit::AllPairs => "one set and a function that is not symmetric: every ordered pair i != j".into(),
                Visit::Cross => "two sets: every (a, b)".into(),
            },
        });

        let size_text = match shape.output_bytes {
            Some(b) => format!("{b} B"),
            None => "unknown in advance".into(),
        };
        decisions.push(Decision {
            what: "output class",
            choice: format!("{:?}", shape.class),
            why: match shape.class {
                OutputClass::TypeI => format!("output {size_text} fits in registers (alpha = {ALPHA_BYTES} B)"),
                OutputClass::TypeII => format!("output {size_text}: above alpha = {ALPHA_BYTES} B, within beta = {beta} B of shared memory per block"),
                OutputClass::TypeIII => format!("output {size_text}: above beta = {beta} B or unknown"),
                OutputClass::PerQuery => format!("K results per query point ({size_text} in all)"),
            },
        });

        // Output stage (the tree's leaves), before the input cache: the RoC check needs the block size.
        let (mut output, output_why) = match shape.class {
            OutputClass::TypeI => {
                (OutputStage::Register, "Type-I: accumulate in registers, reduce once per block".to_owned())
            }
            OutputClass::TypeII => (OutputStage::Aop, "Type-II: privatized copies in shared memory".to_owned()),
            OutputClass::TypeIII if matches!(problem.output, Output::Pairs { .. }) => {
                (OutputStage::Dob, format!("Type-III: pages of {PAGE_PAIRS} pairs taken with one atomicAdd each"))
            }
            OutputClass::TypeIII => (
                OutputStage::Global,
                "Type-III histogram: too large for a private copy, atomics in global memory".to_owned(),
            ),
            OutputClass::PerQuery => {
                (OutputStage::Topk, "per query: the K best so far in registers, written once".to_owned())
            }
        };
        let mut output_why = output_why;
        if let Some(f) = forced.output {
            output = f;
            output_why = "forced".into();
        }
        if let Some(c) = forced.copies {
            if !model::COPY_CHOICES.contains(&c) {
                anyhow::bail!("--copies {c}: the copy count must be one of 1, 2, 4, 8, 16, 32");
            }
            match (forced.output, c) {
                (None, 1) => output = OutputStage::Op,
                (None, _) => output = OutputStage::Aop,
                (Some(OutputStage::Op), 1) | (Some(OutputStage::Aop), 2..) => {}
                (Some(OutputStage::Aop), 1) => {
                    anyhow::bail!("--copies 1 with --output aop: one copy is op")
                }
                (Some(OutputStage::Op), _) => {
                    anyhow::bail!("--copies {c} with --output op: op keeps one copy; use aop")
                }
                (Some(o), _) => {
                    anyhow::bail!("--copies applies to the op and aop output stages, not {o}")
                }
            }
            output_why = "forced".into();
        }
        let applicable = OutputStage::applicable(&problem.output);
        if !applicable.contains(&output) {
            let names: Vec<&str> = applicable.iter().map(|o| o.name()).collect();
            anyhow::bail!(
                "output stage {output} cannot produce a {} output; possible: {}",
                problem.output.kind(),
                names.join(", ")
            );
        }
        if output == OutputStage::Register {
            if let Some(bytes) = shape.output_bytes.filter(|b| *b > ALPHA_BYTES) {
                anyhow::bail!(
                    "output stage register is impossible: the output is {bytes} B per thread and registers hold at most alpha = {ALPHA_BYTES} B"
                );
            }
        }

        let (block_size, block_why) = match forced.block_size {
            Some(b) if b.is_power_of_two() && (32..=1024).contains(&b) => (b, "forced".to_owned()),
            Some(b) => anyhow::bail!("--block-size {b}: must be a power of two from 32 to 1024"),
            None => planner_block_size(output, shape.query_points, dev),
        };
        let grid = shape.query_points.div_ceil(block_size as u64).max(1);
        let total_threads = grid * block_size as u64;
        let registers = registers_estimate(problem, params, output);
        let element_bytes = problem.input.element.bytes();

        // Input cache.
        let (input_cache, input_why) = if let Some(f) = forced.input_cache {
            (f, "forced".to_owned())
        } else if shape.class == OutputClass::TypeII {
            // Every resident block streams its own tile through the read-only cache.
            let blocks = model::occupancy(
                dev,
                BlockNeeds { threads: block_size, shared_bytes: 0, registers_per_thread: registers },
            )
            .map_or(1, |o| o.blocks_per_sm);
            let working_set = blocks * block_size * element_bytes;
            // Where L1 and shared memory are one array, count on what is left at the largest shared carve-out.
            let capacity = if dev.unified_l1 {
                dev.readonly_cache_per_sm.saturating_sub(dev.shared_per_sm)
            } else {
                dev.readonly_cache_per_sm
            };
            if working_set <= capacity {
                (
                    InputCache::RegisterRoc,
                    format!(
                        "Type-II: the tiles of {blocks} resident blocks ({blocks} x {block_size} x {element_bytes} B = {working_set} B) fit the read-only cache ({capacity} B), leaving shared memory to the output"
                    ),
                )
            } else {
                (
                    InputCache::Shuffle,
                    format!(
                        "Type-II: the tiles of {blocks} resident blocks ({working_set} B) overflow the read-only cache ({capacity} B); warp shuffles need no cache"
                    ),
                )
            }
        } else {
            (
                InputCache::RegisterShm,
                "tiles in shared memory: the lowest-latency cache, free for input since the output is not there"
                    .to_owned(),
            )
        };

        let tile_bytes = if input_cache == InputCache::RegisterShm { block_size * element_bytes } else { 0 };

        // Copy count (paper section 3.3.2), for the privatized stages.
        let copy_problem = |slots: u32| CopyProblem {
            slots,
            bytes_per_slot: SLOT_BYTES,
            other_shared_bytes: tile_bytes,
            block_size,
            registers_per_thread: registers,
            total_threads,
        };
        // Shown for every output that can be privatized, so that forced choices can be judged.
        let privatizable = matches!(problem.output, Output::Count { .. } | Output::Histogram { .. });
        let copy_model = (privatizable && shape.slots * SLOT_BYTES <= beta).then(|| {
            let rows = model::copy_table(dev, copy_problem(shape.slots), dev.model);
            let best = model::best_copies(&rows).map_or(1, |r| r.copies);
            let gamma = (1..=beta / SLOT_BYTES).find(|&s| {
                let rows = model::copy_table(dev, copy_problem(s), dev.model);
                model::best_copies(&rows).is_some_and(|r| r.copies == 1)
            });
            CopyModel {
                c_l: dev.model.c_l,
                c_lp: dev.model.c_lp,
                constants_source: dev.model.source,
                slots: shape.slots,
                rows,
                best,
                gamma,
            }
        });

        let copies = match output {
            OutputStage::Op => 1,
            OutputStage::Aop => {
                let model = copy_model.as_ref().expect("privatized output has a copy model");
                match forced.copies {
                    Some(c) => c,
                    None if forced.output == Some(OutputStage::Aop) && model.best == 1 => 2,
                    None => model.best,
                }
            }
            _ => 1,
        };
        if output == OutputStage::Aop && copies == 1 {
            output = OutputStage::Op;
        }
        if shape.class == OutputClass::TypeII && forced.output.is_none() && forced.copies.is_none() {
            let m = copy_model.as_ref().expect("Type-II has a copy model");
            output_why = match m.gamma {
                Some(g) if copies == 1 => format!(
                    "output of {} elements >= gamma = {g}: one private copy per block (OP) costs least",
                    shape.slots
                ),
                Some(g) => format!(
                    "output of {} elements < gamma = {g}: {copies} copies per block by lane id (AOP) cost least",
                    shape.slots
                ),
                None => format!("{copies} copies per block cost least"),
            };
        }

        let output_shared_bytes = if output.privatized() { copies * shape.slots * SLOT_BYTES } else { 0 };
        let shared_bytes = tile_bytes + output_shared_bytes;
        if shared_bytes > dev.shared_per_block_optin {
            anyhow::bail!(
                "this plan needs {shared_bytes} B of shared memory per block ({tile_bytes} B input tile + {output_shared_bytes} B for {copies} output copies), but {} allows at most {} B",
                dev.name,
                dev.shared_per_block_optin
            );
        }
        let occupancy = model::occupancy(dev, BlockNeeds { threads: block_size, shared_bytes, registers_per_thread: registers })
            .ok_or_else(|| anyhow::anyhow!("a block of {block_size} threads with {shared_bytes} B of shared memory and {registers} registers per thread does not fit on {}", dev.name))?;
        let rounds = model::rounds(total_threads, occupancy, dev);

        decisions.push(Decision { what: "output", choice: output.name().into(), why: output_why });
        decisions.push(Decision { what: "input_cache", choice: input_cache.name().into(), why: input_why });
        decisions.push(Decision { what: "block_size", choice: block_size.to_string(), why: block_why });
        if output.privatized() {
            decisions.push(Decision {
                what: "copies",
                choice: copies.to_string(),
                why: if forced.copies.is_some() {
                    "forced".into()
                } else {
                    "least R x L in the copy model below".into()
                },
            });
        }
        let intra_block = match (shape.visit, input_cache) {
            (Visit::LowerTriangle, InputCache::Shuffle) => IntraBlock::Filtered,
            (Visit::LowerTriangle, _) => IntraBlock::Balanced,
            _ => IntraBlock::None,
        };
        if intra_block != IntraBlock::None {
            decisions.push(Decision {
                what: "intra_block",
                choice: format!("{intra_block:?}").to_lowercase(),
                why: match intra_block {
                    IntraBlock::Balanced => "thread t pairs with (t + s) % B for s = 1..B/2: no divergence on the diagonal tile (section 3.4.1)".into(),
                    _ => "shuffled tiles allow no random access: walk the tile and keep j > t".into(),
                },
            });
        }
        let page_size = (output == OutputStage::Dob).then_some(PAGE_PAIRS);

        Ok(Plan {
            problem: problem.name.clone(),
            device: dev.name.clone(),
            points,
            pairs: shape.pairs,
            visit: shape.visit,
            class: shape.class,
            output_bytes: shape.output_bytes,
            input_cache,
            output,
            copies,
            block_size,
            grid,
            intra_block,
            page_size,
            shared_bytes,
            tile_bytes,
            output_shared_bytes,
            registers_estimate: registers,
            occupancy,
            rounds,
            copy_model,
            decisions,
            notes: Vec::new(),
        })
    }

    /// Notes where this (forced) plan departs from the planner's and what the model says.
    fn compare_with(&mut self, planned: &Plan) {
        if self.input_cache != planned.input_cache {
            self.notes.push(format!(
                "input_cache {} is forced; the planner chooses {}: {}",
                self.input_cache,
                planned.input_cache,
                planned.why("input_cache")
            ));
        }
        if self.output != planned.output {
            self.notes.push(format!(
                "output {} is forced; the planner chooses {}: {}",
                self.output,
                planned.output,
                planned.why("output")
            ));
        }
        if self.block_size != planned.block_size {
            self.notes
                .push(format!("block_size {} is forced; the planner chooses {}", self.block_size, planned.block_size));
        }
        if let (Some(model), true) = (&self.copy_model, self.output.privatized()) {
            let cost = |c: u32| model.rows.iter().find(|r| r.copies == c).and_then(|r| r.cost);
            if let (Some(mine), Some(best)) = (cost(self.copies), cost(model.best)) {
                if self.copies != model.best && mine > best {
                    self.notes.push(format!(
                        "{} copies: the model predicts {:.2}x the cost of {} copies (R x L = {:.1} vs {:.1})",
                        self.copies,
                        mine / best,
                        model.best,
                        mine,
                        best
                    ));
                }
            }
        }
    }

    pub fn why(&self, what: &str) -> &str {
        self.decisions.iter().find(|d| d.what == what).map_or("", |d| d.why.as_str())
    }

    /// A short name of the variant: `register_roc-aop32`, used for files and snapshots.
    pub fn variant(&self) -> String {
        let out = match self.output {
            OutputStage::Aop => format!("aop{}", self.copies),
            o => o.name().to_owned(),
        };
        format!("{}-{}-b{}", self.input_cache, out, self.block_size)
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let points = match self.points.b {
            Some(b) => format!("{} x {}", self.points.a, b),
            None => self.points.a.to_string(),
        };
        writeln!(
            f,
            "plan for {} on {}: {} points, {} pairs ({})",
            self.problem,
            self.device,
            points,
            self.pairs,
            self.visit.name()
        )?;
        for d in &self.decisions {
            writeln!(f, "  {:<13} {:<15} {}", d.what, d.choice, d.why)?;
        }
        writeln!(
            f,
            "  {:<13} {:<15} grid {} blocks; {} B shared per block ({} B tile + {} B output); ~{} registers per thread (estimate)",
            "resources",
            "",
            self.grid,
            self.shared_bytes,
            self.tile_bytes,
            self.output_shared_bytes,
            self.registers_estimate
        )?;
        writeln!(
            f,
            "  {:<13} {:<15} {} blocks = {} threads per multiprocessor (limited by {:?}); R = {} rounds",
            "occupancy",
            "",
            self.occupancy.blocks_per_sm,
            self.occupancy.threads_per_sm,
            self.occupancy.limiter,
            self.rounds
        )?;
        if let Some(page) = self.page_size {
            writeln!(
                f,
                "  {:<13} {:<15} {} pairs of 2 x u32 per page; the runner sizes the pool",
                "page_size", page, page
            )?;
        }
        if let Some(m) = &self.copy_model {
            writeln!(
                f,
                "\n  copy model (eq. 1-5): H_S = {} elements, C_L = {}, C_LP = {} ({}){}",
                m.slots,
                m.c_l,
                m.c_lp,
                m.constants_source,
                m.gamma.map_or(String::new(), |g| format!(", gamma = {g}"))
            )?;
            writeln!(f, "    copies   k  shared/block  blocks/SM  threads/SM  rounds R  L(k)/C_L     R x L")?;
            for r in &m.rows {
                let mark = if r.copies == m.best { "  <- least" } else { "" };
                match (r.occupancy, r.rounds, r.cost) {
                    (Some(o), Some(rounds), Some(cost)) => writeln!(
                        f,
                        "    {:>6} {:>3} {:>13} {:>10} {:>11} {:>9} {:>8.3} {:>9.1}{mark}",
                        r.copies, r.k, r.shared_bytes, o.blocks_per_sm, o.threads_per_sm, rounds, r.latency, cost
                    )?,
                    _ => writeln!(
                        f,
                        "    {:>6} {:>3} {:>13}  does not fit in shared memory",
                        r.copies, r.k, r.shared_bytes
                    )?,
                }
            }
        }
        for n in &self.notes {
            writeln!(f, "\n  note: {n}")?;
        }
        Ok(())
    }
}

/// Every forced variant that applies to a problem: each input cache with each
/// output stage that can produce its output (register only where the output
/// fits alpha), and for AOP each copy count from 2 to 32.
pub fn variants(problem: &Problem, params: &Params, dev: &Device, points: Points) -> Vec<Forced> {
    let output_bytes = shape(problem, params, points, dev).output_bytes;
    let mut out = Vec::new();
    for input in InputCache::ALL {
        for &stage in OutputStage::applicable(&problem.output) {
            if stage == OutputStage::Register && output_bytes.is_some_and(|b| b > ALPHA_BYTES) {
                continue;
            }
            let copies: &[u32] = match stage {
                OutputStage::Aop => &[2, 4, 8, 16, 32],
                _ => &[0],
            };
            for &c in copies {
                out.push(Forced {
                    input_cache: Some(input),
                    output: Some(stage),
                    copies: (c > 0).then_some(c),
                    block_size: None,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn powers_of_two() {
        assert_eq!(largest_power_of_two_at_most(1), 1);
        assert_eq!(largest_power_of_two_at_most(100), 64);
        assert_eq!(largest_power_of_two_at_most(1 << 40), 1024);
    }
}
