//! A run on the GPUs: the schedule's units cut into blocks and pieces, the
//! GPUs made ready in parallel (contexts, kernels, resident inputs), their
//! streams fed from one queue, and what they found merged.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use cudarc::driver::{CudaContext, CudaFunction};
use indicatif::ProgressBar;

use super::device::{context, context_made, free_memory, staging, total_memory};
use super::kernels::{self, Compiled, KernelPair, Launcher, dob_drain};
use super::outputs::download::{self, Staging};
use super::resident::Resident;
use super::workers::{Gpu, GpuResult, Job, busy, gpu_worker};
use super::{Doing, GpuError, GpuRun, GpuTimings, GpuWork, LiveGpus, Located, Results, blocks, gpus, grid};
use crate::backend::cpu::{CpuDriver, CpuError};
use crate::backend::hybrid::{self, CpuSide};
use crate::cache::{Cache, Key};
use crate::data::{Inputs, Shapes};
use crate::device::Device;
use crate::index::{self, Grid, IndexChoice, IndexKind, Layout, Summary};
use crate::outcome::Outcome;
use crate::plan::{Forced, Plan, Points, Shape};
use crate::schedule::hierarchy::{Walkers, Without, hierarchy};
use crate::schedule::pieces::{self, GridWork, Piece};
use crate::schedule::{self, GpuOptions, Hybrid, Indexing, Part, Schedule, Sharing, Split};
use crate::spec::{ParamKind, Params, Problem, Sets};
use crate::stage::output::{self, Collect, OutputStage, Partial};
use crate::stage::visit::{KernelKind, Unit};

/// What a run was asked: the problem on its inputs, with its options.
#[derive(Clone, Copy)]
pub struct Ask<'a> {
    pub problem: &'a Problem,
    pub params: &'a Params,
    pub inputs: Located<'a>,
    pub choice: IndexChoice,
    pub opts: &'a GpuOptions,
    pub cache: &'a Cache,
    pub progress: &'a ProgressBar,
    /// This process's part, where MPI ranks share the schedule.
    pub part: Part<'a>,
}

/// Runs `problem` on `inputs` on the GPUs of `opts`; `index` says whether a
/// cut-off problem's blocks may take the units of a grid. The schedule is
/// made here for this machine's GPUs, then run.
pub fn run(
    problem: &Problem,
    params: &Params,
    inputs: &Inputs,
    index: IndexChoice,
    opts: &GpuOptions,
    cache: &Cache,
    progress: &ProgressBar,
) -> Result<GpuRun, GpuError> {
    let gpus = gpus(opts)?;
    // The schedule's sample of the grid is made for these inputs: compute, not preparation.
    let start = Instant::now();
    let schedule = Schedule::make(problem, params, &Shapes::of(inputs), index, opts, &gpus.workers)?;
    let ask = Ask {
        problem,
        params,
        inputs: Located::Host(inputs),
        choice: index,
        opts,
        cache,
        progress,
        part: Part::default(),
    };
    run_scheduled(ask, &gpus, &schedule, start.elapsed().as_secs_f64())
}

/// Runs `schedule`, made for `gpus` in `schedule_s` seconds.
pub fn run_scheduled(ask: Ask, gpus: &LiveGpus, schedule: &Schedule, schedule_s: f64) -> Result<GpuRun, GpuError> {
    let mut run = run_schedule(ask, schedule, &gpus.ordinals, &gpus.workers.gpus, gpus.began, schedule_s)?;
    run.timings.context_s += gpus.driver_s;
    Ok(run)
}

/// How the GPUs find their pairs, once the host's grid (where the schedule
/// asks for one) is sorted: every pair, the host's grid, or a grid each GPU
/// sorts from the layout.
#[allow(clippy::large_enum_variant, reason = "one per run")]
pub(super) enum Found {
    Brute(Summary),
    Host(Grid, Summary),
    Device(Layout),
}

/// Runs `schedule` on the GPUs `ordinals` (described by `devices`), from
/// `wall`, the start of the run; making the schedule took `schedule_s`.
pub(super) fn run_schedule(
    ask: Ask,
    schedule: &Schedule,
    ordinals: &[usize],
    devices: &[Device],
    wall: Instant,
    schedule_s: f64,
) -> Result<GpuRun, GpuError> {
    let Ask { problem, params, inputs, choice, .. } = ask;
    let given = ordinals.len();
    // Every rank's GPUs taking part (rank after rank, each rank's alike), and this process's.
    let all: Vec<Device> = (0..schedule.gpus).map(|g| devices[g % devices.len()].clone()).collect();
    let mine = ask.part.gpus(given, schedule.gpus);
    assert!(mine > 0, "a process whose GPUs take no part in the schedule does not run it");
    let (ordinals, devices) = (&ordinals[..mine], &devices[..mine]);
    let shape = Shape::new(problem, params, plan_points(inputs));
    let index_start = Instant::now();
    let mut split = schedule.hybrid.clone();
    let cells = cells_on_gpus(ask, schedule, &shape, &all)?;
    let (cells_found, resolved, hierarchy) = match cells {
        Some(c) => (Some(Found::Host(c.grid, c.summary)), Some(c.counts), Some(c.steps)),
        None => (None, None, None),
    };
    let found = match (cells_found, &schedule.indexing) {
        (Some(found), _) => found,
        (None, indexing) => match indexing {
            Indexing::Brute(summary) => Found::Brute(summary.clone()),
            Indexing::Device(layout) => Found::Device(layout.clone()),
            Indexing::Host { layout, runs } => {
                let inputs = inputs.host("a grid the host sorts")?;
                match index::sort_and_decide(layout, inputs, shape.visit, shape.pairs, choice, *runs) {
                    (Some(grid), summary) => Found::Host(grid, summary),
                    (None, summary) => {
                        split = Split::gpus_alone(format!("the GPUs alone: the grid was not taken ({})", summary.why));
                        Found::Brute(summary)
                    }
                }
            }
        },
    };
    let host_index_s = index_start.elapsed().as_secs_f64();
    let mut ready = prepare(ask, &found, &split, schedule.block_points, ordinals, devices, wall)?;
    ready.timings.index_s = schedule_s + host_index_s;
    ready.timings.hierarchy = hierarchy;
    if let Some(e) = ready.cpu_driver_error.take() {
        split = Split::gpus_alone(format!("the GPUs alone: the CPU's driver did not build ({e})"));
    }
    // The GPUs' own grids: sorted where the inputs lie, then taken where
    // they skip enough, else every pair with brute force's kernels.
    let (grid_work, summary) = match &found {
        Found::Brute(summary) => (None, summary.clone()),
        Found::Host(grid, summary) => {
            let tile = ready.grid_tile();
            let work = grid
                .units
                .iter()
                .map(|u| GridWork::new(u.pairs, grid.partners(u), u.ranges[1] - u.ranges[0], tile))
                .collect();
            (Some(vec![(work, grid.pairs)]), summary.clone())
        }
        Found::Device(layout) => sort_on_gpus(ask, &mut ready, layout, schedule.sharing, devices, &all)?,
    };
    if let Some(work) = &grid_work
        && !ask.progress.is_hidden()
    {
        let pairs: u128 = work.iter().map(|(_, p)| p).sum();
        ask.progress.set_length(pairs.min(u64::MAX as u128) as u64);
    }
    let host_grid = match &found {
        Found::Host(grid, _) => Some(grid),
        _ => None,
    };
    let mut run = compute(ask, ready, grid_work, summary, host_grid, &mut split, ordinals, devices, wall, schedule)?;
    run.timings.hybrid = split;
    if let (Some(counts), Results::Merged(outcome)) = (&resolved, &mut run.results) {
        *outcome = crate::index::cells::add_resolved(
            std::mem::replace(outcome, Outcome::Pairs(Default::default())),
            Some(counts),
        );
    }
    run.schedule = Some(schedule.clone());
    // Fewer GPUs than the run was given: the report says why.
    run.notes.splice(0..0, (schedule.gpus < given).then(|| schedule.why_gpus.clone()));
    Ok(run)
}

/// The cell hierarchy in place of the schedule's index where the schedule's
/// rule tries it (`schedule::hierarchy`) and it costs less: leaves of the grid
/// kernel's B x R own points, so that a unit is one block's.
pub(super) fn cells_on_gpus(
    ask: Ask,
    schedule: &Schedule,
    shape: &Shape,
    all: &[Device],
) -> Result<Option<crate::index::cells::Cells>, GpuError> {
    let Ask { problem, params, inputs, choice, opts, .. } = ask;
    if all.is_empty() || !matches!(choice, IndexChoice::Auto | IndexChoice::Cells) {
        return Ok(None);
    }
    // The hierarchy's trees are built on the host.
    let inputs = match inputs {
        Located::Host(inputs) => inputs,
        Located::Device(_) | Located::RowsOfA { .. } if choice == IndexChoice::Cells => {
            return Err(GpuError::NeedsHost("the cell hierarchy (index=cells)".into()));
        }
        Located::Device(_) | Located::RowsOfA { .. } => return Ok(None),
    };
    let plan = Plan::grid(problem, params, &all[0], plan_points(inputs), opts.forced)?;
    let walkers = Walkers::Gpus {
        count: all.len(),
        leaf: plan.launch.block_size * plan.launch.points_per_thread,
        // The grid kernel reads both sets whole.
        streamed: schedule.block_points < inputs.a.len().max(inputs.other().len()),
        ranks_share: ask.part.counter.is_some(),
    };
    let without = match &schedule.indexing {
        Indexing::Brute(_) => Without::EveryPair(shape.pairs),
        Indexing::Host { layout, .. } | Indexing::Device(layout) => Without::Grid(
            schedule.estimated_pairs.unwrap_or_else(|| layout.estimated_pairs(&Shapes::of(inputs), shape.visit)),
        ),
    };
    let tried = hierarchy(problem, params, inputs, shape.visit, choice, false, walkers, without)?;
    Ok(tried.and_then(|t| t.build(inputs, shape.visit).ok()))
}

pub(super) fn plan_points<'a>(sets: impl Into<Located<'a>>) -> Points {
    let sets = sets.into();
    let (a, b) = sets.lens();
    Points { a: a as u64, b: sets.two_sets().then_some(b as u64) }
}

impl<'a> From<&'a Inputs> for Located<'a> {
    fn from(inputs: &'a Inputs) -> Located<'a> {
        Located::Host(inputs)
    }
}

/// The GPUs made ready: contexts, kernels loaded, inputs resident where
/// they fit, and the CPU's driver where it takes part.
pub(super) struct Ready {
    /// The problem's key as printed (`Key::of_printed`).
    printed: Key,
    contexts: Vec<Arc<CudaContext>>,
    stagings: Vec<Option<Arc<Mutex<Staging>>>>,
    residents: Vec<Option<Resident>>,
    /// Each GPU's kernels (brute force's where a grid fell back to every pair).
    compiled: Vec<KernelPair<Compiled>>,
    /// Brute force's kernels, where a grid the GPUs sort may be found not worth it.
    compiled_brute: Option<Result<Vec<KernelPair<Compiled>>, GpuError>>,
    cpu_driver: Option<CpuDriver>,
    cpu_driver_error: Option<CpuError>,
    block_points: usize,
    timings: GpuTimings,
    /// Seconds of the resident uploads that ran after the kernels were ready.
    upload_after_compile: f64,
}

impl Ready {
    /// Each GPU's context, staging and resident upload, in order; returns
    /// the least free memory among them. Uploads hide behind the compilation
    /// (done at `compiled_at`) and the slowest context: what ran after both is compute time.
    fn take_made(&mut self, made: Vec<Result<Made, GpuError>>, compiled_at: f64) -> Result<usize, GpuError> {
        let mut free = usize::MAX;
        let mut ready_at = compiled_at;
        let mut uploaded_at: f64 = 0.0;
        for m in made {
            let m = m?;
            ready_at = ready_at.max(m.made_at);
            uploaded_at = uploaded_at.max(m.uploaded_at);
            self.contexts.push(m.ctx);
            self.stagings.push(m.staging);
            self.residents.push(m.resident);
            self.timings.context_s = self.timings.context_s.max(m.context_s);
            free = free.min(m.free);
        }
        self.upload_after_compile = (uploaded_at - ready_at).max(0.0);
        Ok(free)
    }

    /// The grid kernel's tile (its block size).
    fn grid_tile(&self) -> u64 {
        self.compiled[0].0.as_ref().expect("the grid's kernel").plan.launch.block_size as u64
    }
}

/// Makes the contexts on their own threads (which also upload inputs that
/// fit a GPU whole) while NVRTC compiles here, and the host compiler the
/// CPU's driver where the CPU takes part.
pub(super) fn prepare(
    ask: Ask,
    found: &Found,
    split: &Split,
    scheduled_block_points: usize,
    ordinals: &[usize],
    devices: &[Device],
    wall: Instant,
) -> Result<Ready, GpuError> {
    let Ask { problem, params, inputs, choice, opts, cache, .. } = ask;
    let (n_a, n_b) = inputs.lens();
    let streams = opts.streams.max(1);
    // Points taken on their GPU are resident there already, whatever a block would hold.
    let whole = |points: usize| points >= n_a.max(n_b) || matches!(inputs, Located::Device(_));
    let point_bytes = inputs.point_bytes();
    let block_points_for = |memory: usize| schedule::block_points(point_bytes, n_a.max(n_b), opts, memory, streams);
    // Pairs, and KNN lists too large to copy into pageable memory fast, come
    // back through pinned buffers.
    let collect = crate::stage::contribution::collect(problem, params);
    let downloads_staged = collect.bytes(n_a as u64, problem.function.returns).is_none_or(download::is_staged);
    // The grid kernel where a grid may be walked, and brute force's where every
    // pair may be (where a GPU's own grid is found not worth it).
    let grid_kernel = !matches!(found, Found::Brute(_));
    let brute_kernels = match found {
        Found::Brute(_) => true,
        Found::Host(..) => false,
        Found::Device(..) => choice != IndexChoice::Grid,
    };
    // The problem printed and hashed once for every kernel this run looks up.
    let printed = Key::of_printed(problem);
    let compile = |block_points: usize, on_grid: bool| compile_kernels(ask, printed, devices, block_points, on_grid);
    // A grid's kernel reads both sets whole, and so does every kernel on points taken on their GPU.
    let mut block_points = match (grid_kernel, inputs) {
        (false, Located::Host(_) | Located::RowsOfA { .. }) => scheduled_block_points,
        _ => n_a.max(n_b).max(1),
    };
    let mut compiled_at = 0.0;
    let make = |g: usize| -> Result<Made, GpuError> {
        let start = Instant::now();
        let ctx = context(g)?;
        let staging = if downloads_staged { Some(staging(&ctx)?) } else { None };
        let context_s = start.elapsed().as_secs_f64();
        // Asked only where the inputs could fill half the GPU's memory.
        let free = match schedule::whole_in_half(point_bytes, n_a.max(n_b), opts, total_memory(g)?, streams) {
            true => usize::MAX,
            false => free_memory(&ctx).doing("reading free GPU memory")?,
        };
        let made_at = wall.elapsed().as_secs_f64();
        let fits = block_points_for(free);
        let resident = match found {
            // The grid's kernel reads both sets whole, in cell order.
            Found::Host(..) | Found::Device(..) if !whole(fits) => {
                return Err(GpuError::GridDoesNotFit { ordinal: g, fits, points: n_a.max(n_b) });
            }
            Found::Host(grid, summary) => Some(Resident::upload_grid(&ctx, grid, summary.index == IndexKind::Rings)?),
            // The GPU sorts the inputs it holds.
            Found::Device(..) => Some(Resident::of(&ctx, inputs)?),
            // Where the upload fails (the GPU filled up meanwhile), the streams load blocks of their own.
            Found::Brute(_) if matches!(inputs, Located::Device(_)) => Some(Resident::of(&ctx, inputs)?),
            Found::Brute(_) if whole(fits) => Resident::of(&ctx, inputs).and_then(|mut r| r.wait().map(|()| r)).ok(),
            Found::Brute(_) => None,
        };
        Ok(Made { ctx, staging, context_s, free, resident, made_at, uploaded_at: wall.elapsed().as_secs_f64() })
    };
    let (made, compiled, compiled_brute, cpu_driver, mut compile_s) = std::thread::scope(|s| {
        // The CPU's driver over the host's grid, where the CPU takes part,
        // built by the host compiler while NVRTC compiles.
        let cpu_driver = match (found, split.cpu) {
            (Found::Host(_, summary), true) => {
                let shape = Shape::new(problem, params, plan_points(inputs));
                Some(s.spawn(move || CpuDriver::compile(problem, params, &shape, summary.index, false, cache)))
            }
            _ => None,
        };
        // One GPU whose context a run made before (a session's next call)
        // is made ready on this thread, its upload queued before the kernels
        // are found and waited for after them: a thread spawned to overlap
        // them cost 70-120 us on the H200's host, more than finding kernels
        // already compiled.
        let here = matches!(ordinals, [g] if context_made(*g));
        let (queued, making): (Vec<_>, Vec<_>) = match here {
            true => (ordinals.iter().map(|&g| make(g)).collect(), Vec::new()),
            false => (
                Vec::new(),
                ordinals
                    .iter()
                    .map(|&g| {
                        let make = &make;
                        s.spawn(move || make(g).and_then(|m| m.finish(wall)))
                    })
                    .collect(),
            ),
        };
        let start = Instant::now();
        let compiled = compile(block_points, grid_kernel);
        let compiled_brute = (grid_kernel && brute_kernels).then(|| compile(block_points, false));
        let compile_s = start.elapsed().as_secs_f64();
        compiled_at = wall.elapsed().as_secs_f64();
        let made: Vec<Result<Made, GpuError>> = match here {
            true => queued.into_iter().map(|m| m.and_then(|m| m.finish(wall))).collect(),
            false => making.into_iter().map(|h| h.join().expect("context thread panicked")).collect(),
        };
        let cpu_driver = cpu_driver.map(|h| h.join().expect("CPU driver's build panicked"));
        (made, compiled, compiled_brute, cpu_driver, compile_s)
    });
    let (cpu_driver, cpu_driver_error) = match cpu_driver {
        Some(Ok(driver)) => {
            compile_s = compile_s.max(driver.compile_seconds);
            (Some(driver), None)
        }
        Some(Err(e)) if opts.hybrid == Hybrid::On => return Err(e.into()),
        Some(Err(e)) => (None, Some(e)),
        None => (None, None),
    };
    let mut ready = Ready {
        printed,
        contexts: Vec::new(),
        stagings: Vec::new(),
        residents: Vec::new(),
        compiled: Vec::new(),
        compiled_brute,
        cpu_driver,
        cpu_driver_error,
        block_points,
        timings: GpuTimings::default(),
        upload_after_compile: 0.0,
    };
    let free = ready.take_made(made, compiled_at)?;
    ready.compiled = compiled?;
    if !grid_kernel && block_points_for(free) < block_points && matches!(inputs, Located::Host(_)) {
        block_points = block_points_for(free);
        let start = Instant::now();
        ready.compiled = compile(block_points, false)?;
        compile_s += start.elapsed().as_secs_f64();
    }
    ready.block_points = block_points;
    ready.timings.compile_s = compile_s;
    Ok(ready)
}

/// Plans and kernels, per GPU (GPUs may differ): the problem's own kernel
/// on one block, and the two-set kernel between blocks, where units need them.
pub(super) fn compile_kernels(
    ask: Ask,
    printed: Key,
    devices: &[Device],
    block_points: usize,
    on_grid: bool,
) -> Result<Vec<KernelPair<Compiled>>, GpuError> {
    let Ask { problem, params, inputs, opts, cache, .. } = ask;
    let (n_a, n_b) = inputs.lens();
    let (_, _, groups) = units_of(problem, inputs, block_points, on_grid.then_some(0));
    let needs = |kind| groups.iter().flatten().any(|u| u.kernel == kind);
    let own_points = Points {
        a: block_points.min(n_a) as u64,
        b: (problem.input.sets == Sets::Two).then_some(block_points.min(n_b) as u64),
    };
    let between_points = Points { a: block_points.min(n_a) as u64, b: Some(block_points.min(n_b) as u64) };
    // A whole problem's clone, made only where a unit needs the kernel between two blocks.
    let between_problem = std::cell::OnceCell::new();
    // GPUs share pieces of the same units, ranges of steps: every GPU's
    // kernel walks as the first GPU's (its block size and points per thread).
    let walk_as = |first: Option<&Compiled>| match first {
        Some(c) => Forced {
            block_size: Some(c.plan.launch.block_size),
            points_per_thread: Some(c.plan.launch.points_per_thread),
            ..opts.forced
        },
        None => opts.forced,
    };
    let mut kernels: Vec<KernelPair<Compiled>> = Vec::new();
    for (i, dev) in devices.iter().enumerate() {
        // One plan and one compilation serve every GPU of the same model.
        let same = |d: &Device| Device { origin: dev.origin.clone(), ..d.clone() } == *dev;
        if let Some(k) = devices[..i].iter().position(same) {
            kernels.push(kernels[k].clone());
            continue;
        }
        let (own_first, between_first) =
            kernels.first().map_or((None, None), |(own, between)| (own.as_ref(), between.as_ref()));
        let (own_forced, between_forced) = (walk_as(own_first), walk_as(between_first));
        let make = |p, points, forced| Compiled::new(p, params, dev, points, forced, on_grid, cache);
        let own = if needs(KernelKind::Own) { Some(make((problem, printed), own_points, own_forced)?) } else { None };
        let between = if needs(KernelKind::Between) {
            let between_problem = between_problem.get_or_init(|| problem.as_cross());
            Some(make((between_problem, kernels::printed_cross(printed)), between_points, between_forced)?)
        } else {
            None
        };
        kernels.push((own, between));
    }
    Ok(kernels)
}

/// Points [lo, hi) of each block of a set.
pub(super) type Blocks = Vec<(usize, usize)>;

use crate::schedule::pieces::GridShares;

/// Each set's blocks, and the units of work over them. With a grid
/// (`grid_pairs`), each set is one block, and the problem's own kernel
/// walks the grid's units.
pub(super) fn units_of(
    problem: &Problem,
    inputs: Located,
    block_points: usize,
    grid_pairs: Option<u128>,
) -> (Blocks, Blocks, Vec<Vec<Unit>>) {
    let (n_a, n_b) = inputs.lens();
    let a_blocks = blocks(n_a, block_points);
    let b_blocks = if inputs.two_sets() { blocks(n_b, block_points) } else { a_blocks.clone() };
    let groups = match grid_pairs {
        Some(pairs) => vec![vec![Unit { kernel: KernelKind::Own, a_block: 0, b_block: 0, pairs }]],
        None => crate::stage::visit::Visit::of(problem).units(&a_blocks, &b_blocks),
    };
    (a_blocks, b_blocks, groups)
}

/// Each GPU's grid, sorted on the GPU from the inputs it holds, with the
/// units of its share; where the grid does not skip enough (auto), every
/// GPU falls back to every pair with brute force's kernels. Returns each
/// GPU's units (None for brute force) and the index's summary.
pub(super) fn sort_on_gpus(
    ask: Ask,
    ready: &mut Ready,
    layout: &Layout,
    sharing: Sharing,
    devices: &[Device],
    all: &[Device],
) -> Result<(Option<GridShares>, Summary), GpuError> {
    let Ask { problem, params, inputs, choice, cache, .. } = ask;
    let start = Instant::now();
    let builders: Vec<Arc<grid::Builder>> = ready
        .contexts
        .iter()
        .zip(devices)
        .map(|(ctx, dev)| grid::Builder::new(ctx, dev, cache))
        .collect::<Result<_, _>>()?;
    ready.timings.compile_s += start.elapsed().as_secs_f64();
    let start = Instant::now();
    let plan = ready.compiled[0].0.as_ref().expect("the grid's kernel").plan.clone();
    let run = (plan.launch.block_size * plan.launch.points_per_thread, plan.launch.block_size);
    // GPUs split by rows in proportion to their FP32 issue rates: every
    // rank's GPUs, of which this process's take their own places.
    let weights: Vec<f64> = all.iter().map(Device::fp32_issue_rate).collect();
    let first = ask.part.first_gpu;
    let raws: Vec<Resident> =
        ready.residents.iter_mut().map(|r| r.take().expect("the GPU holds the inputs it sorts")).collect();
    let build = |part: usize, ctx: &Arc<CudaContext>, builder: &grid::Builder, raw: &Resident| {
        ctx.bind_to_thread().doing("binding the context")?;
        let stream = ctx.new_stream().doing("creating a stream")?;
        let share = match sharing {
            Sharing::Rows => grid::Share::Rows { part: first + part, weights: &weights },
            Sharing::Queue => grid::Share::All,
        };
        let (n_a, n_b) = inputs.lens();
        grid::build(
            builder,
            &stream,
            layout,
            &inputs.scalars(),
            (n_a, &raw.a),
            inputs.two_sets().then(|| (n_b, raw.b.as_ref().expect("the other set, uploaded"))),
            plan.shape.visit,
            run,
            share,
        )
    };
    // One GPU's grid is built on this thread (a thread spawned costs about 30 us on the H200's host).
    let built: Vec<Result<grid::Built, GpuError>> = match (&ready.contexts[..], &builders[..], &raws[..]) {
        ([ctx], [builder], [raw]) => vec![build(0, ctx, builder, raw)],
        _ => std::thread::scope(|s| {
            let handles: Vec<_> = ready
                .contexts
                .iter()
                .zip(&builders)
                .zip(&raws)
                .enumerate()
                .map(|(part, ((ctx, builder), raw))| {
                    let build = &build;
                    s.spawn(move || build(part, ctx, builder, raw))
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("a GPU's grid build panicked")).collect()
        }),
    };
    let built: Vec<grid::Built> = built.into_iter().collect::<Result<_, _>>()?;
    let all_pairs = Shape::new(problem, params, plan.shape.points).pairs;
    let summary = index::decide(layout, built[0].pairs, all_pairs, choice);
    ready.timings.grid_s = start.elapsed().as_secs_f64();
    ready.timings.index_s += ready.timings.grid_s;
    if summary.index == IndexKind::None {
        ready.residents = raws.into_iter().map(Some).collect();
        ready.compiled = ready.compiled_brute.take().expect("brute force's kernels, where auto may fall back")?;
        return Ok((None, summary));
    }
    let mut work = Vec::new();
    for (resident, (built, raw)) in ready.residents.iter_mut().zip(built.into_iter().zip(raws)) {
        work.push((built.work, built.share_pairs));
        *resident =
            Some(Resident { a: built.a, b: built.b, upload_s: raw.upload_s, queued: None, grid: Some(built.grid) });
    }
    Ok((Some(work), summary))
}

/// Loads the kernels, cuts the work into pieces, runs every GPU's streams
/// (and the CPU's threads, where they take part) until the queues are
/// empty, and merges what they found.
#[allow(clippy::too_many_arguments, reason = "the run's parts, each once")]
pub(super) fn compute(
    ask: Ask,
    ready: Ready,
    grid_work: Option<GridShares>,
    index: Summary,
    host_grid: Option<&Grid>,
    split: &mut Split,
    ordinals: &[usize],
    devices: &[Device],
    wall: Instant,
    schedule: &Schedule,
) -> Result<GpuRun, GpuError> {
    let Ask { problem, inputs, opts, progress, .. } = ask;
    let Ready {
        printed,
        contexts,
        stagings,
        mut residents,
        compiled,
        cpu_driver,
        block_points,
        mut timings,
        upload_after_compile,
        ..
    } = ready;
    let streams = opts.streams.max(1);
    // Every GPU holds the inputs whole, or every stream streams its blocks.
    let whole = block_points >= inputs.most() || matches!(inputs, Located::Device(_));
    if !whole || residents.iter().any(Option::is_none) {
        residents.iter_mut().for_each(|r| *r = None);
    }
    let mut notes = Vec::new();
    if opts.block_points.is_none() && !whole {
        notes.push(format!("inputs do not fit the GPU at once: blocks of {block_points} points"));
    }
    let grid_pairs = grid_work.as_ref().map(|w| w.iter().map(|(_, p)| p).sum());
    let (a_blocks, b_blocks, groups) = units_of(problem, inputs, block_points, grid_pairs);
    let (launchers, drains) = load(ask, compiled, &contexts, devices, &mut timings)?;
    let plans: Vec<Plan> = launchers[0].0.iter().chain(launchers[0].1.iter()).map(|l| l.plan.clone()).collect();
    let stage = plans[0].output;
    // Everything before the first upload that a second run in this process
    // would not repeat, and the part of the resident upload it hid.
    timings.prepare_s = wall.elapsed().as_secs_f64() - upload_after_compile - timings.index_s;
    let rings = index.index == IndexKind::Rings;
    // Each GPU's kernels (own, between), as the pieces' cut reads them.
    let kernel_plans: Vec<[Option<&Plan>; 2]> = launchers
        .iter()
        .map(|(own, between)| [own.as_ref().map(|l| &l.plan), between.as_ref().map(|l| &l.plan)])
        .collect();
    // A split by rows gives each GPU a queue of its own; every other queue is
    // shared by every GPU taking part, every rank's.
    let own_rows = grid_work.is_some() && schedule.sharing == Sharing::Rows;
    let cut = pieces::Cut {
        streams,
        gpus: schedule.gpus,
        own_rows,
        piece_pairs: opts.piece_pairs,
        with_cpu: cpu_driver.is_some(),
        rings,
    };
    let queues = pieces::queues(&kernel_plans, groups, grid_work, [&a_blocks, &b_blocks], cut);
    // Where A's rows travel with the pieces: each place's block of A (a
    // group's pieces are of one block), which rank 0's counter sends.
    if let Some(spans) = ask.part.spans {
        assert!(queues.len() == 1, "rows of A travel with pieces of one shared queue");
        let of = |group: &Vec<Piece>| {
            let block = group[0].unit.a_block;
            assert!(group.iter().all(|p| p.unit.a_block == block), "a group's pieces read one block of A");
            a_blocks[block]
        };
        let _ = spans.set(queues[0].iter().map(of).collect());
    }
    timings.pieces = queues.iter().map(|q| q.iter().map(Vec::len).sum::<usize>()).sum::<usize>() as u64;
    // No more streams than groups to share: an idle stream would only allocate
    // and free its buffers. A search of rings keeps every list of a GPU in one
    // stream's buffer.
    let streams_used = match index.index {
        IndexKind::Rings => 1,
        _ => {
            let most = queues.iter().map(VecDeque::len).max().unwrap_or(0);
            let per_gpu = if queues.len() == 1 { most.div_ceil(contexts.len()) } else { most };
            streams.min(per_gpu).max(1)
        }
    };
    let job = Job {
        inputs,
        a_blocks,
        b_blocks,
        start: Instant::now(),
        opts,
        streams,
        progress,
        block_points,
        value: problem.function.returns,
        watch: crate::stop::Watch::start(),
    };
    // Where ranks share one queue, each takes the places a counter hands out.
    let shared = ask.part.counter.filter(|_| !own_rows).map(|c| (c, queues[0].len()));
    assert!(shared.is_none() || queues.len() == 1, "ranks share one queue");
    assert!(
        shared.is_none() || cpu_driver.is_none(),
        "the CPU beside the GPUs takes from the back of this process's queue alone"
    );
    let queues: Vec<Mutex<VecDeque<Vec<Piece>>>> = queues.into_iter().map(Mutex::new).collect();
    // The CPU's threads, where it takes part, walk the host's grid.
    let cpu_side = cpu_driver
        .as_ref()
        .zip(host_grid)
        .map(|(d, g)| -> Result<CpuSide, GpuError> {
            let inputs = inputs.host("the CPU beside the GPUs")?;
            Ok(CpuSide::new(d.walker(inputs, Some(g)), g, split, progress, job.start))
        })
        .transpose()?;
    let gpus: Vec<Gpu> = (0..contexts.len())
        .map(|g| Gpu {
            ctx: &contexts[g],
            launchers: &launchers[g],
            resident: residents[g].as_ref(),
            drain: drains[g].as_ref(),
            staging: stagings[g].as_deref(),
            // One queue for all, or each GPU its own (a split by rows).
            queue: &queues[g.min(queues.len() - 1)],
            shared,
        })
        .collect();
    let (results, cpu_results) = run_threads(&job, &gpus, cpu_side.as_ref(), &queues[0], stage, streams_used);
    timings.upload_s += residents.iter().flatten().map(|r| r.upload_s).sum::<f64>();
    let (parts, cpu_rows, kept) =
        gather(results, cpu_results, ordinals, job.start.elapsed().as_secs_f64(), &mut timings, split)?;
    let combine = Instant::now();
    // A rank's part: rank 0 merges every rank's partials.
    let results = match (ask.part.counter, kept) {
        (_, Some(lists)) => Results::Merged(Outcome::KnnOnGpu(lists)),
        (Some(_), None) => Results::Parts(parts),
        (None, None) => Results::Merged(merge(ask, stage, (parts, cpu_rows))),
    };
    timings.combine_s += combine.elapsed().as_secs_f64();
    timings.wall_s = wall.elapsed().as_secs_f64();
    Ok(GpuRun {
        results,
        printed,
        devices: devices.to_vec(),
        plans,
        timings,
        notes,
        block_points,
        index,
        schedule: None,
    })
}

/// The GPUs' partial results merged, with the CPU's KNN rows where it took part.
pub(super) fn merge(ask: Ask, stage: OutputStage, parts: (Vec<Partial>, Option<Vec<hybrid::CpuRows>>)) -> Outcome {
    let Ask { problem, inputs, .. } = ask;
    match (stage.collect(), parts) {
        // A search of rings wrote each list to its query's input row itself;
        // the CPU's lists go over the rows it took.
        (Collect::Knn { k }, (parts, Some(cpu_rows))) => {
            let gpu = parts.into_iter().find_map(|p| match p {
                Partial::Knn(mut rows) => rows.pop().map(|(_, values, ids)| (values, ids)),
                _ => None,
            });
            hybrid::lists_with_cpu_rows(k as usize, problem.function.returns, inputs.lens().0, gpu, cpu_rows)
        }
        (collect, (parts, _)) => output::merge(collect, problem.function.returns, inputs.lens().0, parts),
    }
}

/// Each GPU's drain of the direct output buffer, where the output is pairs.
pub(super) type Drains = Vec<Option<CudaFunction>>;

/// Each GPU's compiled kernels loaded into its context, and the direct
/// output buffer's drain where the output is pairs.
pub(super) fn load(
    ask: Ask,
    compiled: Vec<KernelPair<Compiled>>,
    contexts: &[Arc<CudaContext>],
    devices: &[Device],
    timings: &mut GpuTimings,
) -> Result<(Vec<KernelPair<Launcher>>, Drains), GpuError> {
    let mut launchers: Vec<KernelPair<Launcher>> = Vec::new();
    for ((own, between), (ctx, dev)) in compiled.into_iter().zip(contexts.iter().zip(devices)) {
        let own = own.map(|c| c.load(dev, ctx)).transpose()?;
        let between = between.map(|c| c.load(dev, ctx)).transpose()?;
        // A box read at run time is set in each module before any stream launches it.
        if let Some(b) = ask.params.run_time_box() {
            let name = &ask.problem.params.iter().find(|p| p.kind == ParamKind::Box).expect("a box parameter").name;
            let stream = ctx.default_stream();
            for launcher in own.iter().chain(&between) {
                launcher.use_box(&stream, name, b.scalar, &b.run_time_numbers())?;
            }
        }
        launchers.push((own, between));
    }
    let stage = launchers[0].0.as_ref().or(launchers[0].1.as_ref()).expect("a kernel").plan.output;
    let drains = match stage {
        OutputStage::Dob { .. } => {
            let start = Instant::now();
            let drains = contexts
                .iter()
                .zip(devices)
                .map(|(ctx, dev)| dob_drain(ctx, dev, ask.cache).map(Some))
                .collect::<Result<_, _>>()?;
            timings.compile_s += start.elapsed().as_secs_f64();
            drains
        }
        _ => vec![None; contexts.len()],
    };
    Ok((launchers, drains))
}

/// One host thread per GPU (which runs one per stream), and the CPU's
/// threads where it takes part; the CPU's first claim is made before any
/// stream starts, so that a forced split shows.
pub(super) fn run_threads(
    job: &Job,
    gpus: &[Gpu],
    cpu_side: Option<&CpuSide>,
    shared_queue: &Mutex<VecDeque<Vec<Piece>>>,
    stage: OutputStage,
    streams_used: usize,
) -> (Vec<Result<GpuResult, GpuError>>, Vec<hybrid::CpuResult>) {
    let first_claim = cpu_side.and_then(|c| c.claim(shared_queue));
    // One GPU alone runs on this thread (a thread spawned costs about 30 us on the H200's host).
    if let ([gpu], None) = (gpus, cpu_side) {
        return (vec![gpu_worker(job, *gpu, stage, streams_used)], Vec::new());
    }
    std::thread::scope(|s| {
        let cpu_handles: Vec<_> = cpu_side
            .iter()
            .flat_map(|&side| {
                (0..side.threads).map(move |t| {
                    s.spawn(move || hybrid::cpu_worker(side, shared_queue, first_claim.filter(|_| t == 0)))
                })
            })
            .collect();
        let handles: Vec<_> =
            gpus.iter().map(|&gpu| s.spawn(move || gpu_worker(job, gpu, stage, streams_used))).collect();
        let results = handles.into_iter().map(|h| h.join().expect("GPU worker panicked")).collect();
        let cpu_results = cpu_handles.into_iter().map(|h| h.join().expect("CPU worker panicked")).collect();
        (results, cpu_results)
    })
}

/// The partial results, the CPU's KNN rows where it took part, and KNN lists left on a GPU.
pub(super) type Gathered = (Vec<Partial>, Option<Vec<hybrid::CpuRows>>, Option<crate::outcome::OnGpu>);

/// What the GPUs and the CPU's threads found, with each one's timings and
/// share added to the run's: the partial results, the CPU's KNN rows
/// where it took part (None where it did not), and KNN lists left on a GPU.
pub(super) fn gather(
    results: Vec<Result<GpuResult, GpuError>>,
    cpu_results: Vec<hybrid::CpuResult>,
    ordinals: &[usize],
    compute_end: f64,
    timings: &mut GpuTimings,
    split: &mut Split,
) -> Result<Gathered, GpuError> {
    let mut parts = Vec::new();
    let mut kept = None;
    for (r, &ordinal) in results.into_iter().zip(ordinals) {
        let done = r?;
        for t in &done.streams {
            timings.add(t);
        }
        parts.extend(done.parts);
        kept = kept.or(done.kept);
        let busy_s = busy(done.intervals);
        let kernel_s = busy(done.kernels);
        timings.kernel_s += kernel_s;
        timings.per_gpu.push(GpuWork {
            ordinal,
            pieces: done.pieces,
            pairs: done.pairs,
            share: 0.0,
            busy_s,
            kernel_s,
            idle_s: (compute_end - busy_s).max(0.0),
        });
    }
    let cpu_took_part = !cpu_results.is_empty();
    let mut cpu_rows = Vec::new();
    let mut cpu_intervals = Vec::new();
    for r in cpu_results {
        parts.extend(r.parts);
        cpu_rows.extend(r.rows);
        split.cpu_units += r.units;
        split.cpu_pairs += r.pairs;
        cpu_intervals.extend(r.intervals);
    }
    split.cpu_busy_s = busy(cpu_intervals);
    let all_pairs: u128 = timings.per_gpu.iter().map(|g| g.pairs).sum::<u128>() + split.cpu_pairs;
    for g in &mut timings.per_gpu {
        g.share = g.pairs as f64 / all_pairs.max(1) as f64;
    }
    split.cpu_share = split.cpu_pairs as f64 / all_pairs.max(1) as f64;
    Ok((parts, cpu_took_part.then_some(cpu_rows), kept))
}

/// A GPU's context, made on its own thread, and what that thread found and uploaded.
pub(super) struct Made {
    ctx: Arc<CudaContext>,
    /// Its pinned buffers for downloads, where the problem collects pairs.
    staging: Option<Arc<Mutex<Staging>>>,
    context_s: f64,
    /// Free memory before any upload.
    free: usize,
    resident: Option<Resident>,
    /// Seconds from the start of the run to the context made, and to the upload done.
    made_at: f64,
    uploaded_at: f64,
}

impl Made {
    /// Waits for the resident upload queued by `make` (`Resident::wait`):
    /// `uploaded_at` is when it finished, from the run's start `wall`.
    fn finish(mut self, wall: Instant) -> Result<Made, GpuError> {
        if let Some(r) = self.resident.as_mut() {
            r.wait()?;
        }
        self.uploaded_at = wall.elapsed().as_secs_f64();
        Ok(self)
    }
}
