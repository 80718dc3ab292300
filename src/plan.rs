//! The planner: the decision tree of the paper's Fig. 9, extended with
//! per-query top-K, composed from the stage families' own rules.
//!
//! A [`Shape`] is what every backend computes (which pairs, what they add up
//! to); a [`Plan`] adds how one GPU computes it. Both are plain data that
//! explain themselves: every choice carries the reason and the numbers behind it.

use std::fmt;

use serde::Serialize;

use crate::device::{Device, KernelShape, Tuning};
use crate::index::IndexKind;
use crate::model::{self, BlockNeeds, Occupancy};
use crate::spec::{BoxTime, Params, Problem, Sets};
use crate::stage::KernelParam;
use crate::stage::contribution::{self, Test};
use crate::stage::input::{self, InputCache};
use crate::stage::output::totals::{CopyModel, Counter, Store, Tallying};
use crate::stage::output::{Collect, OutputChoice, OutputClass, OutputStage, Total, dob};
use crate::stage::visit::{Diagonal, Visit};

/// A choice the planner cannot honour or the device cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("{0} copies: the copy count must be one of 1, 2, 4, 8, 16, 32")]
    CopyCount(u32),
    #[error("{copies} copies with the {stage} output stage: {why}")]
    CopiesForStage { copies: u32, stage: OutputChoice, why: &'static str },
    #[error("output stage {stage} cannot produce a {kind} output; possible: {possible}")]
    StageForOutput { stage: OutputChoice, kind: &'static str, possible: String },
    #[error(
        "output stage register is impossible: the output is {bytes} B per thread and registers hold at most alpha = {alpha} B"
    )]
    RegistersTooSmall { bytes: u64, alpha: u64 },
    #[error("block size {0}: must be a power of two from 32 to 1024")]
    BlockSize(u32),
    #[error("{0} points per thread: must be 1, 2, 4 or 8")]
    PointsPerThread(u32),
    #[error(
        "`{problem}` cannot be tested on keys: its spec declares no key map, or its output has no test to make on one"
    )]
    NoKeys { problem: String },
    #[error(
        "this plan needs {needed} B of shared memory per block ({tile} B input tile + {output} B for {copies} output copies + {keys} B of key edges), but {device} allows at most {available} B"
    )]
    SharedMemory { needed: u32, tile: u32, output: u32, copies: u32, keys: u32, device: String, available: u32 },
    #[error(
        "a block of {threads} threads with {shared} B of shared memory and {registers} registers per thread does not fit on {device}"
    )]
    DoesNotFit { threads: u32, shared: u32, registers: u32, device: String },
}

/// Choices forced for an experiment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Forced {
    pub input_cache: Option<InputCache>,
    pub output: Option<OutputChoice>,
    pub copies: Option<u32>,
    pub block_size: Option<u32>,
    pub points_per_thread: Option<u32>,
    pub test: Option<Test>,
}

impl Forced {
    pub fn any(&self) -> bool {
        *self != Forced::default()
    }
}

/// Points of set A, and of set B for two sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Points {
    pub a: u64,
    pub b: Option<u64>,
}

/// What every backend computes, from the problem alone: which pairs, and what
/// the output collects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Shape {
    pub points: Points,
    pub pairs: u128,
    pub visit: Visit,
    pub collect: Collect,
}

impl Shape {
    pub fn new(problem: &Problem, params: &Params, points: Points) -> Shape {
        let visit = Visit::of(problem);
        Shape {
            points,
            pairs: visit.pairs(points.a, points.b.unwrap_or(points.a)),
            visit,
            collect: contribution::collect(problem, params),
        }
    }
}

/// The decisions a plan explains, in the order it makes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Choice {
    Visit,
    OutputClass,
    Test,
    Output,
    InputCache,
    BlockSize,
    PointsPerThread,
    Copies,
    Counter,
    Diagonal,
    Index,
    Box,
}

impl Choice {
    pub fn name(self) -> &'static str {
        match self {
            Choice::Visit => "visit",
            Choice::OutputClass => "output class",
            Choice::Test => "test",
            Choice::Output => "output",
            Choice::InputCache => "input_cache",
            Choice::BlockSize => "block_size",
            Choice::PointsPerThread => "points/thread",
            Choice::Copies => "copies",
            Choice::Counter => "counter",
            Choice::Diagonal => "diagonal",
            Choice::Index => "index",
            Choice::Box => "box",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    pub what: Choice,
    pub choice: String,
    pub why: String,
}

/// The launch and the resources it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Launch {
    pub block_size: u32,
    /// R: own points per thread; a block owns B x R points.
    pub points_per_thread: u32,
    pub grid: u64,
    /// Dynamic shared memory per block: the input tile, then the output's.
    pub shared_bytes: u32,
    /// Static shared memory of the contribution: the key edges.
    pub contribution_shared_bytes: u32,
    pub tile_bytes: u32,
    pub output_shared_bytes: u32,
    pub registers_estimate: u32,
    pub occupancy: Occupancy,
    pub rounds: u64,
    /// The most partners an own point may meet in one launch, where 32-bit
    /// shared counters must not overflow: the backend cuts launches to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partners_per_launch: Option<u64>,
}

/// How one GPU computes a [`Shape`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    pub problem: String,
    pub device: String,
    /// A short name of the kernel: `register_roc-aop32-b64`.
    pub variant: String,
    pub shape: Shape,
    pub class: OutputClass,
    /// Bytes of the whole output, where known before the run.
    pub output_bytes: Option<u64>,
    pub input_cache: InputCache,
    /// How each pair is tested: on its value or on the spec's key.
    pub test: Test,
    pub output: OutputStage,
    /// The diagonal tile's pattern of a lower-triangle visit.
    pub diagonal: Option<Diagonal>,
    /// Whether blocks take the grid's units (`Plan::on_grid`) or spans of the input.
    #[serde(skip_serializing_if = "IndexKind::is_none")]
    pub index: IndexKind,
    /// Whether the periodic box is folded into the code or read at run time
    /// (the runner's choice, `Params::box_time`).
    #[serde(skip_serializing_if = "BoxTime::is_compile")]
    pub box_time: BoxTime,
    pub launch: Launch,
    /// The kernel's parameters, in order: its signature and its launch arguments.
    pub params: Vec<KernelParam>,
    pub copy_model: Option<CopyModel>,
    pub decisions: Vec<Decision>,
    /// Where a forced choice departs from the planner's, and what the model says of it.
    pub notes: Vec<String>,
}

fn largest_power_of_two_at_most(x: u64) -> u32 {
    if x <= 1 { 1 } else { 1u32 << (63 - x.leading_zeros()).min(10) }
}

/// The stage's preferred block size, capped so that every multiprocessor gets a block.
fn block_size(choice: OutputChoice, query_points: u64, dev: &Device, tuned: Option<&Tuning>) -> (u32, String) {
    let (preferred, why) = match tuned_shape(choice, tuned) {
        Some((shape, source)) => (shape.block_size, format!("{} threads a block: {source}", shape.block_size)),
        None => choice.block_size(dev),
    };
    let cap = largest_power_of_two_at_most(query_points.div_ceil(dev.multiprocessors as u64)).max(32);
    if cap < preferred {
        (
            cap,
            format!(
                "{why}; capped at {cap} so that {query_points} points still give every one of the {} multiprocessors a block",
                dev.multiprocessors
            ),
        )
    } else {
        (preferred, why)
    }
}

/// Registers per thread the kernel is expected to need (no GPU to ask at plan
/// time): a base for indices and loop state, the R own elements and the other
/// one, the output stage's state.
fn registers_estimate(problem: &Problem, output: OutputStage, points_per_thread: u32) -> u32 {
    let words = problem.input.bytes().div_ceil(4);
    let state = output.registers(problem.function.returns, points_per_thread);
    (22 + (points_per_thread + 1) * words + state).next_multiple_of(8).clamp(32, 255)
}

/// Own points per thread that may be chosen.
pub const POINTS_PER_THREAD: [u32; 4] = [1, 2, 4, 8];

/// The measured shape for totals kept as `choice` keeps them (shared copies
/// or registers), with where it was measured, where the GPU was.
fn tuned_shape(choice: OutputChoice, tuned: Option<&Tuning>) -> Option<(KernelShape, &str)> {
    let t = tuned?;
    match choice {
        OutputChoice::Op | OutputChoice::Aop => Some((t.shared, &t.source)),
        OutputChoice::Register => Some((t.registers, &t.source)),
        _ => None,
    }
}

/// The planning rule for R, the own points per thread: the measured one for
/// totals (each tile point read serves R pairs, at the cost of registers and
/// so of resident warps). Elsewhere one: the pair outputs (pages, top-K
/// lists) keep state per own point, and R > 1 measured no faster there.
fn points_per_thread(
    problem: &Problem,
    choice: OutputChoice,
    output: OutputStage,
    tuned: Option<&Tuning>,
) -> (u32, String) {
    // Totals in global memory read their tiles as the shared copies' kernels do.
    let shape = match (choice, tuned) {
        (OutputChoice::Global, Some(t)) => Some((t.shared, t.source.as_str())),
        _ => tuned_shape(choice, tuned),
    };
    if let Some((shape, source)) = shape {
        let r = shape.points_per_thread;
        let registers = registers_estimate(problem, output, r);
        return (r, format!("{r} own points per thread (~{registers} registers): {source}"));
    }
    let registers = registers_estimate(problem, output, 1);
    (
        1,
        format!(
            "one own point per thread (~{registers} registers): more measured no faster while the pair arithmetic, not the loads, bounds the loop"
        ),
    )
}

/// R halved until the blocks of B x R own points cover at least half the
/// multiprocessors: on the H200, SDH at 262,144 points ran 2x slower at
/// B = 1024, R = 4 (64 blocks) than at R = 2 (128), where 1M points ran
/// fastest at R = 8.
fn fill_half_the_sms(r: u32, why: String, query_points: u64, block_size: u32, dev: &Device) -> (u32, String) {
    let blocks = |r: u32| query_points.div_ceil(block_size as u64 * r as u64);
    let mut fitted = r;
    while fitted > 1 && 2 * blocks(fitted) < dev.multiprocessors as u64 {
        fitted /= 2;
    }
    if fitted == r {
        return (r, why);
    }
    (
        fitted,
        format!(
            "{why}; {fitted}, not {r}, so that {query_points} points make {} blocks of {block_size} threads, at least half the {} multiprocessors",
            blocks(fitted),
            dev.multiprocessors
        ),
    )
}

/// The output stage named `choice` for `collect`, with `copies` shared copies of `counter`s.
fn stage(choice: OutputChoice, collect: Collect, copies: u32, counter: Counter) -> OutputStage {
    match (choice, collect) {
        (OutputChoice::Dob, _) => OutputStage::Dob { page_pairs: dob::PAGE_PAIRS },
        (OutputChoice::Topk, Collect::Knn { k }) => OutputStage::TopK { k },
        (choice, Collect::Totals { slots, total }) => {
            let store = match choice {
                OutputChoice::Register => Store::Registers,
                OutputChoice::Global => Store::Global,
                _ => Store::Shared { copies, counter },
            };
            OutputStage::Totals { slots, total, store }
        }
        _ => unreachable!("the planner checks that the stage applies"),
    }
}

/// The output stage and why: the output class's own, unless forced by name or
/// by a copy count; an error where it cannot collect the output.
fn output_stage(
    problem: &Problem,
    collect: Collect,
    output_bytes: Option<u64>,
    class: OutputClass,
    forced: Forced,
) -> Result<(OutputChoice, String), PlanError> {
    let (mut choice, mut why) = class.stage(collect);
    if let Some(f) = forced.output {
        choice = f;
        why = "forced".into();
    }
    if let Some(c) = forced.copies {
        choice = stage_for_copies(c, forced.output)?;
        why = "forced".into();
    }
    let possible = collect.stages();
    if !possible.contains(&choice) {
        return Err(PlanError::StageForOutput {
            stage: choice,
            kind: problem.output.kind(),
            possible: possible.iter().map(|o| o.name()).collect::<Vec<_>>().join(", "),
        });
    }
    if choice == OutputChoice::Register
        && let Some(bytes) = output_bytes.filter(|b| *b > crate::stage::output::ALPHA_BYTES)
    {
        return Err(PlanError::RegistersTooSmall { bytes, alpha: crate::stage::output::ALPHA_BYTES });
    }
    Ok((choice, why))
}

/// The stage that a forced number of copies makes: OP for one, AOP for more;
/// an error where the stage is also forced and disagrees.
fn stage_for_copies(copies: u32, forced: Option<OutputChoice>) -> Result<OutputChoice, PlanError> {
    if !model::COPY_CHOICES.contains(&copies) {
        return Err(PlanError::CopyCount(copies));
    }
    match (forced, copies) {
        (None, 1) => Ok(OutputChoice::Op),
        (None, _) => Ok(OutputChoice::Aop),
        (Some(OutputChoice::Op), 1) => Ok(OutputChoice::Op),
        (Some(OutputChoice::Aop), 2..) => Ok(OutputChoice::Aop),
        (Some(stage @ OutputChoice::Aop), 1) => Err(PlanError::CopiesForStage { copies, stage, why: "one copy is op" }),
        (Some(stage @ OutputChoice::Op), _) => {
            Err(PlanError::CopiesForStage { copies, stage, why: "op keeps one copy; aop keeps several" })
        }
        (Some(stage), _) => Err(PlanError::CopiesForStage { copies, stage, why: "copies apply to op and aop only" }),
    }
}

/// The registers per thread a block of `block_size` threads may use:
/// __launch_bounds__(B) holds the compiler to what lets one block of B threads
/// fit on an SM (spilling if it must), so no estimate exceeds that.
fn launch_bound(dev: &Device, block_size: u32) -> u32 {
    (dev.registers_per_sm / block_size.max(1) / 8 * 8).max(8)
}

/// The counter of a totals output's shared copies, why, and the partners an
/// own point may meet in one launch; other outputs keep no shared copies.
fn shared_counter(collect: Collect, own_points: u32, partners: u64) -> (Counter, String, Option<u64>) {
    match collect {
        Collect::Totals { total, .. } => Counter::choose(total, own_points, partners),
        _ => (Counter::Total, String::new(), None),
    }
}

/// The copy model (section 3.3.2), for every output that can be privatized,
/// so that forced choices can be judged against it.
fn copy_model(
    collect: Collect,
    dev: &Device,
    counter: Counter,
    tile_bytes: u32,
    block_size: u32,
    registers: u32,
    total_threads: u64,
) -> Option<CopyModel> {
    match collect {
        Collect::Totals { slots, .. } => {
            CopyModel::new(dev, slots, counter.bytes(), tile_bytes, block_size, registers, total_threads)
        }
        _ => None,
    }
}

/// The lane copies measured for shared totals on this kind of GPU, where
/// they fit beside the tile in half a block's shared memory.
fn measured_copies(
    collect: Collect,
    choice: OutputChoice,
    tuned: Option<&Tuning>,
    counter: Counter,
    tile_bytes: u32,
    dev: &Device,
) -> Option<u32> {
    match (collect, tuned_shape(choice, tuned)) {
        (Collect::Totals { slots, .. }, Some((KernelShape { copies, .. }, _)))
            if matches!(choice, OutputChoice::Op | OutputChoice::Aop) =>
        {
            let bytes = (slots as u64 + 1) * counter.bytes() as u64 * copies as u64 + tile_bytes as u64;
            (bytes <= dev.shared_per_block_optin as u64 / 2).then_some(copies)
        }
        _ => None,
    }
}

/// The output's shared copies, the stage they make and why: the measured
/// copies, else the copy model's choice, unless forced; one copy is OP.
fn copies(
    mut choice: OutputChoice,
    why: String,
    class: OutputClass,
    forced: Forced,
    tuned: Option<&Tuning>,
    measured: Option<u32>,
    model: Option<&CopyModel>,
) -> (OutputChoice, u32, String) {
    let planned = forced.output.is_none() && forced.copies.is_none();
    if let Some(c) = measured
        && planned
    {
        choice = if c > 1 { OutputChoice::Aop } else { OutputChoice::Op };
    }
    let mut copies = match choice {
        OutputChoice::Aop => {
            let best = measured.or(model.map(|m| m.best)).unwrap_or(1);
            match forced.copies {
                Some(c) => c,
                // AOP forced where the model prefers one copy: the fewest copies that are AOP.
                None if forced.output == Some(OutputChoice::Aop) && best == 1 => 2,
                None => best,
            }
        }
        _ => 1,
    };
    if choice == OutputChoice::Aop && copies == 1 {
        choice = OutputChoice::Op;
    }
    if choice == OutputChoice::Op {
        copies = 1;
    }
    // A Type-II output's copies are the reason for its stage.
    let why = if class != OutputClass::TypeII || !planned {
        why
    } else if let (Some(t), true) = (tuned, measured == Some(copies)) {
        format!(
            "{copies} {} per block (the copy model's choice is shown below): {}",
            if copies > 1 { "copies by lane id (AOP)" } else { "copy (OP)" },
            t.source
        )
    } else if let Some(m) = model {
        m.why(copies)
    } else {
        why
    };
    (choice, copies, why)
}

/// How each pair is tested and why: forced where the spec allows it, else
/// the planner's rule; a count of indicators in registers says so.
fn pair_test(
    problem: &Problem,
    params: &Params,
    dev: &Device,
    forced: Option<Test>,
    output: OutputStage,
) -> Result<(Test, String), PlanError> {
    let (test, why) = match forced {
        Some(Test::Keys) if !Test::keys_possible(problem, params) => {
            return Err(PlanError::NoKeys { problem: problem.name.clone() });
        }
        Some(t) => (t, "forced".to_owned()),
        None => Test::choose(problem, params, dev.compute_capability),
    };
    let why = match Tallying::choose(problem, test, output) {
        Tallying::Indicators => format!(
            "{why}; the count in registers adds each pair's indicator, 1 or 0 from that one comparison, counting failures where a NaN key passes"
        ),
        Tallying::Slots => why,
    };
    Ok((test, why))
}

/// The occupancy of a block, where it fits: its shared memory (input tile,
/// output copies, key edges) within a block's limit, then its threads, shared
/// memory and registers on a multiprocessor.
fn fit_block(
    dev: &Device,
    block_size: u32,
    registers: u32,
    tile_bytes: u32,
    output_bytes: u32,
    key_bytes: u32,
    copies: u32,
) -> Result<Occupancy, PlanError> {
    let shared = tile_bytes + output_bytes + key_bytes;
    if shared > dev.shared_per_block_optin {
        return Err(PlanError::SharedMemory {
            needed: shared,
            tile: tile_bytes,
            output: output_bytes,
            copies,
            keys: key_bytes,
            device: dev.name.clone(),
            available: dev.shared_per_block_optin,
        });
    }
    let needs = BlockNeeds { threads: block_size, shared_bytes: shared, registers_per_thread: registers };
    model::occupancy(dev, needs).ok_or_else(|| PlanError::DoesNotFit {
        threads: block_size,
        shared,
        registers,
        device: dev.name.clone(),
    })
}

/// The copies and counter decisions of an output kept in shared copies; other stages make none.
fn copies_decisions(output: OutputStage, forced: Forced, measured: Option<u32>, counter_why: String) -> Vec<Decision> {
    let OutputStage::Totals { store: Store::Shared { copies, counter }, .. } = output else {
        return Vec::new();
    };
    let why = if forced.copies.is_some() {
        "forced"
    } else if measured == Some(copies) {
        "measured on this kind of GPU (the copy model below is shown for comparison)"
    } else {
        "least R x L in the copy model below"
    };
    vec![
        Decision { what: Choice::Copies, choice: copies.to_string(), why: why.into() },
        Decision { what: Choice::Counter, choice: counter.c_type().into(), why: counter_why },
    ]
}

/// 32-bit shared copies, and 32-bit register tallies with their block sums,
/// hold at most B x R own points' pairs of a launch: the bound on partners is theirs.
fn partners_per_launch(output: OutputStage, bound: Option<u64>) -> Option<u64> {
    match output {
        OutputStage::Totals { store: Store::Shared { counter: Counter::U32, .. }, .. }
        | OutputStage::Totals { store: Store::Registers, total: Total::Count, .. } => bound,
        _ => None,
    }
}

impl Launch {
    /// Blocks for `points` own points.
    pub fn grid_for(&self, points: usize) -> u32 {
        points.div_ceil(self.block_size as usize * self.points_per_thread as usize).max(1) as u32
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
    ) -> Result<Plan, PlanError> {
        let planned = Plan::decide(problem, params, dev, points, Forced::default())?;
        if !forced.any() {
            return Ok(planned);
        }
        let mut plan = Plan::decide(problem, params, dev, points, forced)?;
        plan.compare_with(&planned);
        Ok(plan)
    }

    /// The decision tree: the output stage (its leaves) first, then the block
    /// size and own points per thread, the input cache, the output's copies and
    /// the test; then whether such a block fits the device.
    fn decide(
        problem: &Problem,
        params: &Params,
        dev: &Device,
        points: Points,
        forced: Forced,
    ) -> Result<Plan, PlanError> {
        let shape = Shape::new(problem, params, points);
        let tuned = dev.tuning_for(&problem.name);
        let query_points = points.a;
        let output_bytes = shape.collect.bytes(query_points, problem.function.returns);
        let class = shape.collect.class(output_bytes, dev);

        // Output stage (the tree's leaves), before the input cache: the read-only cache check needs the block size.
        let (choice, output_why) = output_stage(problem, shape.collect, output_bytes, class, forced)?;
        let (block_size, block_why) = match forced.block_size {
            Some(b) if b.is_power_of_two() && (32..=1024).contains(&b) => (b, "forced".to_owned()),
            Some(b) => return Err(PlanError::BlockSize(b)),
            None => block_size(choice, query_points, dev, tuned),
        };
        let provisional = stage(choice, shape.collect, 1, Counter::Total);
        let (points_per_thread, points_why) = match forced.points_per_thread {
            Some(r) if POINTS_PER_THREAD.contains(&r) => (r, "forced".to_owned()),
            Some(r) => return Err(PlanError::PointsPerThread(r)),
            None => {
                let (r, why) = points_per_thread(problem, choice, provisional, tuned);
                fill_half_the_sms(r, why, query_points, block_size, dev)
            }
        };
        let grid = query_points.div_ceil(block_size as u64 * points_per_thread as u64).max(1);
        let total_threads = grid * block_size as u64;
        let registers = registers_estimate(problem, provisional, points_per_thread).min(launch_bound(dev, block_size));

        let element = &problem.input;
        let (input_cache, input_why) = match forced.input_cache {
            Some(f) => (f, "forced".to_owned()),
            None => match tuned_shape(choice, tuned) {
                Some((shape, source)) => (shape.input_cache, format!("{}: {source}", shape.input_cache.name())),
                None => InputCache::choose(class, block_size, registers, element, dev),
            },
        };
        let tile_bytes = input_cache.tile_bytes(block_size, element);

        // Shared copies count in 32 bits; launches are cut so that no copy can overflow them.
        let partners = points.b.unwrap_or(points.a);
        let counter = shared_counter(shape.collect, block_size * points_per_thread, partners);
        let copy_model = copy_model(shape.collect, dev, counter.0, tile_bytes, block_size, registers, total_threads);
        let measured_copies = measured_copies(shape.collect, choice, tuned, counter.0, tile_bytes, dev);
        let (choice, copies, output_why) =
            copies(choice, output_why, class, forced, tuned, measured_copies, copy_model.as_ref());
        let output = stage(choice, shape.collect, copies, counter.0);

        let (test, test_why) = pair_test(problem, params, dev, forced.test, output)?;
        let output_shared_bytes = output.shared_bytes();
        let contribution_shared_bytes = test.shared_bytes(problem, params);
        let occupancy =
            fit_block(dev, block_size, registers, tile_bytes, output_shared_bytes, contribution_shared_bytes, copies)?;
        let diagonal = shape.visit.diagonal(input_cache.random_access());

        let mut decisions = vec![
            Decision { what: Choice::Visit, choice: shape.visit.name().into(), why: shape.visit.why(problem).into() },
            Decision { what: Choice::OutputClass, choice: format!("{class:?}"), why: class.why(output_bytes, dev) },
            Decision { what: Choice::Test, choice: test.name().into(), why: test_why },
            Decision { what: Choice::Output, choice: choice.name().into(), why: output_why },
            Decision { what: Choice::InputCache, choice: input_cache.name().into(), why: input_why },
            Decision { what: Choice::BlockSize, choice: block_size.to_string(), why: block_why },
            Decision { what: Choice::PointsPerThread, choice: points_per_thread.to_string(), why: points_why },
        ];
        decisions.extend(copies_decisions(output, forced, measured_copies, counter.1));
        if let Some(d) = diagonal {
            decisions.push(Decision { what: Choice::Diagonal, choice: d.name().into(), why: d.why().into() });
        }
        if params.run_time_box().is_some() {
            decisions.push(Decision {
                what: Choice::Box,
                choice: BoxTime::Run.name().into(),
                why: "the run has several boxes (an NPT trajectory, or a session's new box): read from \
                      __constant__ memory set before the launches, one kernel for every box"
                    .into(),
            });
        }

        let mut kernel_params = input::params(element, problem.input.sets);
        kernel_params.extend(crate::stage::visit::params());
        kernel_params.extend(output.params());
        Ok(Plan {
            problem: problem.name.clone(),
            device: dev.name.clone(),
            variant: format!("{}-{}-b{block_size}-r{points_per_thread}", input_cache.name(), output.label()),
            shape,
            class,
            output_bytes,
            input_cache,
            test,
            output,
            diagonal,
            index: IndexKind::None,
            box_time: if params.run_time_box().is_some() { BoxTime::Run } else { BoxTime::Compile },
            launch: Launch {
                block_size,
                points_per_thread,
                grid,
                shared_bytes: tile_bytes + output_shared_bytes,
                contribution_shared_bytes,
                tile_bytes,
                output_shared_bytes,
                registers_estimate: registers,
                occupancy,
                rounds: model::rounds(total_threads, occupancy, dev),
                partners_per_launch: partners_per_launch(output, counter.2),
            },
            params: kernel_params,
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
                self.input_cache.name(),
                planned.input_cache.name(),
                planned.why(Choice::InputCache)
            ));
        }
        if self.output.choice() != planned.output.choice() {
            self.notes.push(format!(
                "output {} is forced; the planner chooses {}: {}",
                self.output.choice(),
                planned.output.choice(),
                planned.why(Choice::Output)
            ));
        }
        if self.test != planned.test {
            self.notes.push(format!(
                "test {} is forced; the planner chooses {}: {}",
                self.test.name(),
                planned.test.name(),
                planned.why(Choice::Test)
            ));
        }
        if self.launch.points_per_thread != planned.launch.points_per_thread {
            self.notes.push(format!(
                "{} points per thread are forced; the planner chooses {}",
                self.launch.points_per_thread, planned.launch.points_per_thread
            ));
        }
        if self.launch.block_size != planned.launch.block_size {
            self.notes.push(format!(
                "block_size {} is forced; the planner chooses {}",
                self.launch.block_size, planned.launch.block_size
            ));
        }
        if let (Some(model), OutputStage::Totals { store: Store::Shared { copies, .. }, .. }) =
            (&self.copy_model, self.output)
            && let (Some(mine), Some(best)) = (model.cost(copies), model.cost(model.best))
            && copies != model.best
            && mine > best
        {
            self.notes.push(format!(
                "{copies} copies: the model predicts {:.2}x the cost of {} copies (R x L = {mine:.1} vs {best:.1})",
                mine / best,
                model.best,
            ));
        }
    }

    /// The plan of a kernel whose blocks walk a grid's units. `twobs tune`
    /// times brute force's tiles, so the grid's kernels take the shapes
    /// measured for grids on the device's kind (`Device::grid_tuning`).
    pub fn grid(
        problem: &Problem,
        params: &Params,
        dev: &Device,
        points: Points,
        forced: Forced,
    ) -> Result<Plan, PlanError> {
        let kind = Device { tuning: dev.grid_tuning.clone(), tuned_problems: Default::default(), ..dev.clone() };
        Ok(Plan::new(problem, params, &kind, points, forced)?.on_grid())
    }

    /// This plan with its blocks on a grid's units: each block takes one
    /// unit's own points (at most B x R of one row of cells) and walks the
    /// tiles of its ranges, so the diagonal tile's pattern gives way to the
    /// grid's own-row order. (The data decide whether a run takes it: the
    /// report's index line says what the grid skipped.) A KNN (whose cutoff
    /// is each query's own K-th value) searches rings of cells, each thread
    /// alone, reading the other set through the cache: no tiles, so no
    /// shared memory for them.
    fn on_grid(mut self) -> Plan {
        self.diagonal = None;
        self.decisions.retain(|d| d.what != Choice::Diagonal);
        if matches!(self.shape.collect, Collect::Knn { .. }) {
            self.index = IndexKind::Rings;
            self.input_cache = InputCache::Naive;
            self.launch.shared_bytes -= self.launch.tile_bytes;
            self.launch.tile_bytes = 0;
            self.decisions.retain(|d| d.what != Choice::InputCache);
            self.decisions.push(Decision {
                what: Choice::InputCache,
                choice: InputCache::Naive.name().into(),
                why: "each query searches its own cells: there is no tile a block shares".into(),
            });
            self.decisions.push(Decision {
                what: Choice::Index,
                choice: "rings".into(),
                why: "KNN over a grid: a block takes B x R queries in cell order, and each searches rings of cells around its own until its K-th value is within the ring's reach".into(),
            });
            self.params.extend(crate::stage::visit::ring_params());
            self.variant = format!("naive-{}-rings", self.output.label());
            return self;
        }
        self.index = IndexKind::Grid;
        self.decisions.push(Decision {
            what: Choice::Index,
            choice: "grid".into(),
            why: "the spec's cutoff: a block takes a run of at most B x R own points along a row of cells, and meets the other set's points of the neighbouring cells".into(),
        });
        self.params.extend(crate::stage::visit::grid_params());
        self.variant.push_str("-grid");
        self
    }

    pub fn why(&self, what: Choice) -> &str {
        self.decisions.iter().find(|d| d.what == what).map_or("", |d| d.why.as_str())
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let points = match self.shape.points.b {
            Some(b) => format!("{} x {}", self.shape.points.a, b),
            None => self.shape.points.a.to_string(),
        };
        writeln!(
            f,
            "plan for {} on {}: {} points, {} pairs ({})",
            self.problem,
            self.device,
            points,
            self.shape.pairs,
            self.shape.visit.name()
        )?;
        for d in &self.decisions {
            writeln!(f, "  {:<13} {:<15} {}", d.what.name(), d.choice, d.why)?;
        }
        let l = &self.launch;
        writeln!(
            f,
            "  {:<13} {:<15} grid {} blocks; {} B shared per block ({} B tile + {} B output + {} B key test); ~{} registers per thread (estimate)",
            "resources",
            "",
            l.grid,
            l.shared_bytes + l.contribution_shared_bytes,
            l.tile_bytes,
            l.output_shared_bytes,
            l.contribution_shared_bytes,
            l.registers_estimate
        )?;
        writeln!(
            f,
            "  {:<13} {:<15} {} blocks = {} threads per multiprocessor (limited by {:?}); R = {} rounds",
            "occupancy", "", l.occupancy.blocks_per_sm, l.occupancy.threads_per_sm, l.occupancy.limiter, l.rounds
        )?;
        if let OutputStage::Dob { page_pairs } = self.output {
            writeln!(
                f,
                "  {:<13} {:<15} {page_pairs} pairs of 2 x u32 per page; the runner sizes the pool",
                "page_size", page_pairs
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
/// output stage that can collect its output (register only where the output
/// fits alpha), for AOP each copy count from 2 to 32; and each input cache
/// with each number of own points per thread, and with each test that applies.
pub fn variants(problem: &Problem, params: &Params, points: Points) -> Vec<Forced> {
    let shape = Shape::new(problem, params, points);
    let output_bytes = shape.collect.bytes(points.a, problem.function.returns);
    let mut out = Vec::new();
    for input in InputCache::ALL {
        for &stage in shape.collect.stages() {
            if stage == OutputChoice::Register && output_bytes.is_some_and(|b| b > crate::stage::output::ALPHA_BYTES) {
                continue;
            }
            let copies: &[u32] = if stage == OutputChoice::Aop { &[2, 4, 8, 16, 32] } else { &[0] };
            for &c in copies {
                out.push(Forced {
                    input_cache: Some(input),
                    output: Some(stage),
                    copies: (c > 0).then_some(c),
                    ..Default::default()
                });
            }
        }
        for r in POINTS_PER_THREAD {
            out.push(Forced { input_cache: Some(input), points_per_thread: Some(r), ..Default::default() });
        }
        for test in Test::ALL.into_iter().filter(|&t| t == Test::Values || Test::keys_possible(problem, params)) {
            out.push(Forced { input_cache: Some(input), test: Some(test), ..Default::default() });
        }
    }
    out
}

/// Points of a problem whose sets hold `a` and `b` points.
pub fn points_of(sets: Sets, a: u64, b: u64) -> Points {
    Points { a, b: (sets == Sets::Two).then_some(b) }
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
