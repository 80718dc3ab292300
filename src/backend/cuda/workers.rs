//! The threads of a run: one per GPU, which runs one per stream; streams take
//! pieces of work from the run's queue, and launch, time and collect them.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use cudarc::driver::{CudaContext, CudaEvent, CudaFunction, CudaStream, sys};
use indicatif::ProgressBar;
use rand::{RngExt, SeedableRng};

use super::blocks::DeviceBlock;
use super::kernels::{KernelPair, Launcher};
use super::launch::{DeviceOutput, GridArgs, KernelArgs};
use super::outputs::dob::{self, DeviceDob, PairNames};
use super::outputs::download::Staging;
use super::outputs::topk::DeviceTopK;
use super::outputs::totals::DeviceTotals;
use super::{DeviceGrid, Doing, GpuError, GpuTimings, Located, Resident};
use crate::data::{Column, PointSet};
use crate::outcome::OnGpu;
use crate::ranks::{Carried, Counter};
use crate::schedule::GpuOptions;
use crate::schedule::pieces::{self, Piece};
use crate::spec::Scalar;
use crate::stage::output::dob::pool_for;
use crate::stage::output::{OutputStage, Partial};
use crate::stage::visit::{KernelKind, Unit};

/// What the whole run shares.
pub(super) struct Job<'a> {
    pub(super) inputs: Located<'a>,
    pub(super) a_blocks: Vec<(usize, usize)>,
    pub(super) b_blocks: Vec<(usize, usize)>,
    /// When the compute began: streams time their pieces from it.
    pub(super) start: Instant,
    pub(super) opts: &'a GpuOptions,
    pub(super) streams: usize,
    pub(super) progress: &'a ProgressBar,
    pub(super) block_points: usize,
    /// The pair function's value type, which per-query lists hold.
    pub(super) value: Scalar,
    /// Whether the run was asked to stop (between pieces).
    pub(super) watch: crate::stop::Watch,
}

/// Seconds covered by at least one of `intervals` (start, end).
pub(super) fn busy(mut intervals: Vec<(f64, f64)>) -> f64 {
    intervals.sort_by(|x, y| x.0.total_cmp(&y.0));
    let mut total = 0.0;
    let mut reach = f64::NEG_INFINITY;
    for (start, end) in intervals {
        let from = start.max(reach);
        if end > from {
            total += end - from;
        }
        reach = reach.max(end);
    }
    total
}

/// What one GPU returns: its partial results (totals merged on the GPU, so
/// one; pairs and lists one per stream), each stream's timings, and when its
/// streams were running pieces.
pub(super) struct GpuResult {
    pub(super) parts: Vec<Partial>,
    /// KNN lists left on the GPU (points taken there).
    pub(super) kept: Option<OnGpu>,
    pub(super) streams: Vec<GpuTimings>,
    pub(super) intervals: Vec<(f64, f64)>,
    /// When its kernels ran: seconds from an event recorded before the first.
    pub(super) kernels: Vec<(f64, f64)>,
    pub(super) pieces: u64,
    pub(super) pairs: u128,
}

/// What a GPU's threads share: its context, kernels, resident inputs and the
/// direct output buffer's drain.
#[derive(Clone, Copy)]
pub(super) struct Gpu<'a> {
    pub(super) ctx: &'a Arc<CudaContext>,
    pub(super) launchers: &'a KernelPair<Launcher>,
    pub(super) resident: Option<&'a Resident>,
    pub(super) drain: Option<&'a CudaFunction>,
    /// Its pinned buffers for downloads of pairs.
    pub(super) staging: Option<&'a Mutex<Staging>>,
    /// The groups of pieces it takes (a group runs in order on one stream):
    /// one queue that every GPU shares, or its own share of a grid.
    pub(super) queue: &'a Mutex<VecDeque<Vec<Piece>>>,
    /// Where MPI ranks share the queue: the counter that hands out its
    /// places, and its length at the start.
    pub(super) shared: Option<(&'a dyn Counter, usize)>,
}

/// Runs `streams` stream threads on one GPU. Totals live in one buffer that
/// every stream's kernels add to, so they are merged on the GPU and
/// downloaded once.
pub(super) fn gpu_worker(job: &Job, gpu: Gpu, stage: OutputStage, streams: usize) -> Result<GpuResult, GpuError> {
    let ctx = gpu.ctx;
    ctx.bind_to_thread().doing("binding the context")?;
    let alloc = "allocating GPU memory";
    let home = ctx.new_stream().doing("creating a stream")?;
    // Kernel times are placed on one clock per GPU: events after this one.
    let origin = ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)).doing("creating an event")?;
    origin.record(&home).doing("recording an event")?;
    home.synchronize().doing("recording an event")?;
    let totals = match stage {
        OutputStage::Totals { slots, total, .. } => {
            let t = DeviceTotals::new(&home, slots, total).doing(alloc)?;
            // Zeroed before any stream's kernel adds to it.
            home.synchronize().doing(alloc)?;
            Some(t)
        }
        _ => None,
    };
    // One stream runs on this thread (a thread spawned costs about 30 us on the H200's host).
    let ran: Vec<Result<StreamResult, GpuError>> = match streams {
        1 => vec![stream_worker(job, gpu, stage, totals.as_ref(), &origin)],
        _ => std::thread::scope(|s| {
            let handles: Vec<_> = (0..streams)
                .map(|_| {
                    let (totals, origin) = (totals.as_ref(), &origin);
                    s.spawn(move || stream_worker(job, gpu, stage, totals, origin))
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("GPU stream worker panicked")).collect()
        }),
    };
    let mut done = GpuResult {
        parts: Vec::new(),
        kept: None,
        streams: Vec::new(),
        intervals: Vec::new(),
        kernels: Vec::new(),
        pieces: 0,
        pairs: 0,
    };
    for r in ran {
        let r = r?;
        done.parts.extend(r.part);
        done.kept = done.kept.or(r.kept);
        done.streams.push(r.timings);
        done.pieces += r.intervals.len() as u64;
        done.intervals.extend(r.intervals);
        done.kernels.extend(r.kernels);
        done.pairs += r.pairs;
    }
    if let Some(t) = totals {
        let start = Instant::now();
        done.parts.push(Partial::Totals(t.download(&home).doing("downloading the totals")?));
        if let Some(first) = done.streams.first_mut() {
            first.download_s += start.elapsed().as_secs_f64();
        }
    }
    Ok(done)
}

/// The output buffers one stream keeps (totals are the GPU's, shared).
#[allow(clippy::large_enum_variant, reason = "one per stream thread, on its stack")]
pub(super) enum StreamOutput<'a> {
    Totals(&'a DeviceTotals),
    /// Allocated, and grown, by the first unit that needs it.
    Dob(Option<DeviceDob>, Vec<[u32; 2]>),
    TopK(DeviceTopK, Vec<(usize, Column, Vec<u32>)>),
}

/// What one stream found and how it spent its time; `intervals` holds one
/// (start, end) per piece, in seconds from the start of the compute.
pub(super) struct StreamResult {
    pub(super) part: Option<Partial>,
    /// KNN lists left on the GPU, where its points were taken there.
    pub(super) kept: Option<OnGpu>,
    pub(super) timings: GpuTimings,
    pub(super) intervals: Vec<(f64, f64)>,
    /// One (start, end) per launch, from the GPU's origin event (direct
    /// output buffer runs: per piece, from the start of the compute).
    pub(super) kernels: Vec<(f64, f64)>,
    pub(super) pairs: u128,
}

pub(super) fn stream_worker(
    job: &Job,
    gpu: Gpu,
    stage: OutputStage,
    totals: Option<&DeviceTotals>,
    origin: &CudaEvent,
) -> Result<StreamResult, GpuError> {
    let setup = Instant::now();
    let mut stream = Stream::open(job, gpu, stage, totals, origin)?;
    stream.timings.setup_s = setup.elapsed().as_secs_f64();
    loop {
        if job.watch.asked() {
            return Err(crate::stop::Stopped.into());
        }
        let taken = {
            let mut queue = gpu.queue.lock().expect("queue lock");
            let length = gpu.shared.map_or(queue.len(), |(_, l)| l);
            pieces::take(&mut queue, length, gpu.shared.map(|(c, _)| c))
        };
        let Some((group, carried)) = taken else { break };
        stream.run_group(&group, carried)?;
    }
    stream.finish()
}

/// One stream of a GPU and what it keeps between pieces: its own blocks of
/// the inputs (where the GPU holds none whole), its output buffers, events
/// and timings.
struct Stream<'a> {
    job: &'a Job<'a>,
    gpu: Gpu<'a>,
    origin: &'a CudaEvent,
    stream: Arc<CudaStream>,
    own_blocks: Option<(DeviceBlock, DeviceBlock)>,
    /// Where A's rows come with the pieces: the rows of the group's block
    /// (kept while the next group reads the same rows).
    rows: Option<Arc<Carried>>,
    out: StreamOutput<'a>,
    /// Events around each piece's upload and kernel.
    events: [CudaEvent; 3],
    /// Pairs (8 B each) the direct output buffer's pool may take.
    pool_cap: u64,
    /// The share of visited pairs that pass, once sampled (pairs problems).
    selectivity: Option<f64>,
    /// A search of rings writes each query's whole list in one launch, to
    /// its input row: every launch starts fresh, and the lists come back
    /// once, after the stream's last piece (the CPU may have taken other queries).
    searches_rings: bool,
    timings: GpuTimings,
    intervals: Vec<(f64, f64)>,
    kernels: Vec<(f64, f64)>,
    pairs: u128,
}

impl<'a> Stream<'a> {
    fn open(
        job: &'a Job<'a>,
        gpu: Gpu<'a>,
        stage: OutputStage,
        totals: Option<&'a DeviceTotals>,
        origin: &'a CudaEvent,
    ) -> Result<Stream<'a>, GpuError> {
        let ctx = gpu.ctx;
        ctx.bind_to_thread().doing("binding the context")?;
        let stream = ctx.new_stream().doing("creating a stream")?;
        let alloc = "allocating GPU memory";
        // Blocks of its own where the GPU holds no resident copy: pinned staging
        // only for buffers that take block after block; the other set's buffer
        // only where a kernel between two blocks runs.
        let own_blocks = match gpu.resident {
            Some(_) => None,
            None => {
                let sets = job.inputs.streamed()?;
                let a_dev = DeviceBlock::new(ctx, &stream, sets.a_like, job.block_points, job.a_blocks.len() > 1);
                let b_points = if gpu.launchers.1.is_some() { job.block_points } else { 1 };
                let b_dev = DeviceBlock::new(ctx, &stream, sets.other, b_points, job.b_blocks.len() > 1);
                Some((a_dev.doing(alloc)?, b_dev.doing(alloc)?))
            }
        };
        let searches_rings = gpu.resident.is_some_and(|r| r.grid.as_ref().is_some_and(|g| g.rings.is_some()));
        let out = match (stage, totals) {
            (OutputStage::Totals { .. }, Some(t)) => StreamOutput::Totals(t),
            (OutputStage::Totals { .. }, None) => unreachable!("the GPU worker makes the totals"),
            (OutputStage::Dob { .. }, _) => StreamOutput::Dob(None, Vec::new()),
            (OutputStage::TopK { k }, _) => StreamOutput::TopK(
                DeviceTopK::new(&stream, job.block_points, k, job.value, searches_rings).doing(alloc)?,
                Vec::new(),
            ),
        };
        let event = || ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)).doing("creating an event");
        // Pairs (8 B each) one stream's pool may take: a quarter of free memory shared by the streams.
        let pool_cap = super::free_memory(ctx).map_or(1 << 26, |free| (free / 4 / 8 / job.streams) as u64);
        Ok(Stream {
            job,
            gpu,
            origin,
            stream,
            own_blocks,
            rows: None,
            out,
            events: [event()?, event()?, event()?],
            pool_cap,
            selectivity: None,
            searches_rings,
            timings: GpuTimings::default(),
            intervals: Vec::new(),
            kernels: Vec::new(),
            pairs: 0,
        })
    }

    /// Runs a group's pieces in order; per-query lists of a query block
    /// come back after its last. `carried`: the rows of A's block that
    /// the group reads, where rank 0 sent them with its place.
    fn run_group(&mut self, group: &[Piece], carried: Option<Arc<Carried>>) -> Result<(), GpuError> {
        let (q_start, q_end) = self.job.a_blocks[group[0].unit.a_block];
        if let Some(bytes) = carried {
            self.take_rows(bytes, (q_start, q_end))?;
        }
        if let StreamOutput::TopK(lists, _) = &mut self.out {
            lists.begin_query_block();
        }
        for piece in group {
            self.run_piece(piece)?;
        }
        if let StreamOutput::TopK(lists, rows) = &mut self.out
            && !self.searches_rings
        {
            let t = Instant::now();
            let (values, ids) =
                lists.download(&self.stream, q_end - q_start, self.gpu.staging).doing("downloading the lists")?;
            self.timings.download_s += t.elapsed().as_secs_f64();
            rows.push((q_start, values, ids));
        }
        Ok(())
    }

    /// The rows [lo, hi) of A that rank 0 sent with a group, unless they
    /// are the rows the stream holds already (rank 0 named them again: the
    /// same block's next piece). (The stream's buffer keeps its tag: a
    /// block's rows are the same whichever answer brought them.)
    fn take_rows(&mut self, carried: Arc<Carried>, (lo, hi): (usize, usize)) -> Result<(), GpuError> {
        if self.rows.as_ref().is_some_and(|held| Arc::ptr_eq(held, &carried)) {
            return Ok(());
        }
        match &carried.rows {
            Ok(rows) if rows.len() == hi - lo => {}
            Ok(rows) => {
                let what = format!("{} rows of A came with a piece of rows {lo}..{hi}", rows.len());
                return Err(GpuError::Rows(crate::ranks::WireError { at: 0, len: 0, what }));
            }
            Err(why) => return Err(GpuError::Rows(why.clone())),
        }
        self.rows = Some(carried);
        Ok(())
    }

    /// Uploads a piece's blocks (where none are resident), launches its
    /// kernel into the stream's output, and times both.
    fn run_piece(&mut self, piece: &Piece) -> Result<(), GpuError> {
        let job = self.job;
        let began = job.start.elapsed().as_secs_f64();
        let unit = &piece.unit;
        let launchers = self.gpu.launchers;
        let launcher = match unit.kernel {
            KernelKind::Own => launchers.0.as_ref(),
            KernelKind::Between => launchers.1.as_ref(),
        }
        .expect("a kernel is compiled for every kind of unit in the queue");
        let between = unit.kernel == KernelKind::Between;
        let (a0, a1) = job.a_blocks[unit.a_block];
        let (b0, b1) = if between { job.b_blocks[unit.b_block] } else { (a0, a1) };
        let upload = "uploading points";
        let [e0, e1, e2] = &self.events;
        e0.record(&self.stream).doing(upload)?;
        let (a_dev, b_dev) = match (self.gpu.resident, &mut self.own_blocks) {
            (Some(r), _) => (&r.a, r.b.as_ref().unwrap_or(&r.a)),
            (None, Some((a_dev, b_dev))) => {
                let sets = job.inputs.streamed()?;
                match (self.rows.as_ref().and_then(|c| c.rows.as_ref().ok()), sets.a) {
                    // Rows that came with the piece: row 0 is row a0 of A.
                    (Some(rows), _) => a_dev.load(&self.stream, rows, (0, unit.a_block), (0, a1 - a0)),
                    (None, Some(a)) => a_dev.load(&self.stream, a, (0, unit.a_block), (a0, a1)),
                    (None, None) => unreachable!("rows of A come with every piece where the host holds none"),
                }
                .doing(upload)?;
                if between {
                    b_dev.load(&self.stream, sets.other, (1, unit.b_block), (b0, b1)).doing(upload)?;
                }
                (&*a_dev, &*b_dev)
            }
            (None, None) => unreachable!("a stream has blocks of its own where none are resident"),
        };
        e1.record(&self.stream).doing(upload)?;
        let grid = piece.blocks(|| launcher.plan.launch.grid_for(a1 - a0));
        // The kernel reads B's columns where it pairs two sets.
        let b_block = launcher.plan.shape.points.b.is_some().then_some(b_dev);
        let device_grid = self.gpu.resident.and_then(|r| r.grid.as_ref());
        let counts = [(a1 - a0) as u32, (b1 - b0) as u32];
        let offsets = [a0 as u32, b0 as u32];
        let steps = [piece.steps.0, piece.steps.1];
        let cells = piece.grid_units.map(|[first, _]| {
            let g = device_grid.expect("a run on a grid holds it on every GPU");
            g.args(&g.units, first)
        });
        let stream = &self.stream;
        match &mut self.out {
            StreamOutput::Dob(dob, sink) => {
                let OutputStage::Dob { page_pairs } = launcher.plan.output else { unreachable!("a DOB plan") };
                let drain = self.gpu.drain.expect("a GPU running the direct output buffer has its drain");
                let wanted = match job.opts.pool_pairs {
                    Some(p) => p,
                    None => {
                        let sel = match self.selectivity {
                            Some(s) => s,
                            None => {
                                let s = match device_grid {
                                    Some(g) => {
                                        sample_grid_selectivity(stream, launcher, (a_dev, b_block), counts, g, drain)?
                                    }
                                    None => match job.inputs {
                                        Located::Host(_) | Located::RowsOfA { .. } => {
                                            let rows = self.rows.as_ref().and_then(|c| c.rows.as_ref().ok());
                                            sample_selectivity(job, self.gpu.ctx, stream, launcher, unit, rows, drain)?
                                        }
                                        // Points taken on the GPU: their first rows, where they lie.
                                        Located::Device(_) => {
                                            leading_selectivity(stream, launcher, (a_dev, b_block), counts, drain)?
                                        }
                                    },
                                };
                                *self.selectivity.insert(s)
                            }
                        };
                        let block_size = launcher.plan.launch.block_size;
                        pool_for(sel, piece.pairs, grid, block_size, page_pairs, self.pool_cap)
                    }
                };
                let names = pair_names(device_grid, launcher);
                let launch = &mut |d: &DeviceDob| {
                    let output = DeviceOutput::Dob(d);
                    let args = KernelArgs { a: a_dev, b: b_block, counts, offsets, steps, output, grid: cells };
                    launcher.launch(stream, grid, &args)
                };
                let run =
                    dob::run(stream, page_pairs, grid, wanted, dob, launch, drain, names, self.gpu.staging, sink)?;
                self.timings.launches += run.launches;
                self.timings.overflow_relaunches += run.launches - 1;
                self.timings.download_s += run.drain_s;
                // Launches and drains alternate on the host: its clock places them.
                let end = job.start.elapsed().as_secs_f64() - run.drain_s;
                self.kernels.push((end - run.kernel_s, end));
            }
            StreamOutput::Totals(t) => {
                let output = DeviceOutput::Totals(t);
                let args = KernelArgs { a: a_dev, b: b_block, counts, offsets, steps, output, grid: cells };
                launcher.launch(stream, grid, &args)?;
                self.timings.launches += 1;
            }
            StreamOutput::TopK(lists, _) => {
                let output = DeviceOutput::TopK(lists);
                let args = KernelArgs { a: a_dev, b: b_block, counts, offsets, steps, output, grid: cells };
                launcher.launch(stream, grid, &args)?;
                if !self.searches_rings {
                    lists.launched();
                }
                self.timings.launches += 1;
            }
        }
        e2.record(stream).doing("running the kernel")?;
        stream.synchronize().doing("running the kernel")?;
        self.timings.upload_s += e0.elapsed_ms(e1).doing("timing")? as f64 / 1e3;
        if !matches!(self.out, StreamOutput::Dob(..)) {
            let at = |e: &CudaEvent| self.origin.elapsed_ms(e).map(|ms| ms as f64 / 1e3).doing("timing");
            self.kernels.push((at(e1)?, at(e2)?));
        }
        self.intervals.push((began, job.start.elapsed().as_secs_f64()));
        self.pairs += piece.pairs;
        job.progress.inc(piece.pairs.min(u64::MAX as u128) as u64);
        Ok(())
    }

    /// A search's lists come back once; the stream's buffers are freed.
    fn finish(mut self) -> Result<StreamResult, GpuError> {
        // Points taken on the GPU: a search's lists stay there.
        let keep = self.searches_rings && !self.intervals.is_empty() && matches!(self.job.inputs, Located::Device(_));
        if keep {
            let Stream { job, out: StreamOutput::TopK(lists, _), stream, timings, intervals, kernels, pairs, .. } =
                self
            else {
                unreachable!("a search of rings writes top-K lists")
            };
            let kept = lists.keep(&stream, job.inputs.lens().0);
            return Ok(StreamResult { part: None, kept: Some(kept), timings, intervals, kernels, pairs });
        }
        if let StreamOutput::TopK(lists, rows) = &mut self.out
            && self.searches_rings
            && !self.intervals.is_empty()
        {
            let t = Instant::now();
            let queries = self.job.inputs.lens().0;
            let (values, ids) =
                lists.download(&self.stream, queries, self.gpu.staging).doing("downloading the lists")?;
            self.timings.download_s += t.elapsed().as_secs_f64();
            rows.push((0, values, ids));
        }
        let Stream { out, own_blocks, stream, mut timings, intervals, kernels, pairs, .. } = self;
        let part = match out {
            StreamOutput::Totals(_) => None,
            StreamOutput::Dob(_, pairs) => Some(Partial::Pairs(pairs)),
            StreamOutput::TopK(_, rows) => Some(Partial::Knn(rows)),
        };
        let t = Instant::now();
        drop((own_blocks, stream));
        timings.teardown_s = t.elapsed().as_secs_f64();
        Ok(StreamResult { part, kept: None, timings, intervals, kernels, pairs })
    }
}

/// Rows sampled from a block to estimate the selectivity of a pairs problem.
pub(super) const SELECTIVITY_SAMPLE_ROWS: usize = 2048;

/// The fraction of pairs that pass, measured on the kernel itself over up to
/// SELECTIVITY_SAMPLE_ROWS rows of each side of `unit` (the self-join seed
/// sizes its result buffer from such a sample).
pub(super) fn sample_selectivity(
    job: &Job,
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    launcher: &Launcher,
    unit: &Unit,
    a_rows: Option<&PointSet>,
    drain: &CudaFunction,
) -> Result<f64, GpuError> {
    let pick = |set: &PointSet, (lo, hi): (usize, usize), salt: u64| -> PointSet {
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed ^ salt ^ lo as u64);
        let mut rows: Vec<usize> = if hi - lo <= SELECTIVITY_SAMPLE_ROWS {
            (lo..hi).collect()
        } else {
            (0..SELECTIVITY_SAMPLE_ROWS).map(|_| rng.random_range(lo..hi)).collect()
        };
        rows.sort_unstable();
        rows.dedup();
        set.subset(&rows, "sample".into())
    };
    let between = unit.kernel == KernelKind::Between;
    let sets = job.inputs.streamed()?;
    let sa = match (a_rows, sets.a) {
        // The rows that came with the piece (row 0 is the block's first).
        (Some(rows), _) => pick(rows, (0, rows.len()), 1 ^ job.a_blocks[unit.a_block].0 as u64),
        (None, Some(a)) => pick(a, job.a_blocks[unit.a_block], 1),
        (None, None) => unreachable!("rows of A come with every piece where the host holds none"),
    };
    let sb = if between { pick(sets.other, job.b_blocks[unit.b_block], 2) } else { sa.clone() };
    // Blocks of its own: the stream's may be the GPU's resident input.
    let upload = "uploading a sample";
    let block = |set: &PointSet| -> Result<DeviceBlock, GpuError> {
        let mut dev = DeviceBlock::new(ctx, stream, set, set.len(), false).doing(upload)?;
        dev.load(stream, set, (0, 0), (0, set.len())).doing(upload)?;
        Ok(dev)
    };
    let (a_dev, b_dev) = (block(&sa)?, if between { Some(block(&sb)?) } else { None });
    let pairs = launcher.plan.shape.visit.pairs(sa.len() as u64, sb.len() as u64) as u64;
    let blocks = launcher.plan.launch.grid_for(sa.len());
    let counts = [sa.len() as u32, sb.len() as u32];
    passing_share(stream, launcher, drain, (blocks, pairs), (&a_dev, b_dev.as_ref()), counts, None)
}

/// The share of pairs that pass among the first [`SELECTIVITY_SAMPLE_ROWS`]
/// rows of each of the resident sets `a`, `b` (of `counts` points): points
/// taken on the GPU, which no host sample reaches. Only the pool's size
/// depends on it (a pool too small is drained and relaunched).
fn leading_selectivity(
    stream: &Arc<CudaStream>,
    launcher: &Launcher,
    (a, b): (&DeviceBlock, Option<&DeviceBlock>),
    counts: [u32; 2],
    drain: &CudaFunction,
) -> Result<f64, GpuError> {
    let rows = SELECTIVITY_SAMPLE_ROWS as u32;
    let counts = [counts[0].min(rows), counts[1].min(rows)];
    let pairs = launcher.plan.shape.visit.pairs(counts[0] as u64, counts[1] as u64) as u64;
    let blocks = launcher.plan.launch.grid_for(counts[0] as usize);
    passing_share(stream, launcher, drain, (blocks, pairs), (a, b), counts, None)
}

/// The share of `pairs` visited pairs that pass in one run of `blocks`
/// blocks of `launcher`'s kernel on the sets `a`, `b` (with `counts` points)
/// and, for a grid's kernel, its units `grid`: the pairs are found with a
/// pool of their number (within 2^16 and 2^25, 256 MB).
fn passing_share(
    stream: &Arc<CudaStream>,
    launcher: &Launcher,
    drain: &CudaFunction,
    (blocks, pairs): (u32, u64),
    (a, b): (&DeviceBlock, Option<&DeviceBlock>),
    counts: [u32; 2],
    grid: Option<GridArgs>,
) -> Result<f64, GpuError> {
    let OutputStage::Dob { page_pairs } = launcher.plan.output else { unreachable!("a DOB plan") };
    let mut found = Vec::new();
    let mut scratch = None;
    dob::run(
        stream,
        page_pairs,
        blocks,
        pairs.clamp(1 << 16, 1 << 25),
        &mut scratch,
        &mut |d: &DeviceDob| {
            let output = DeviceOutput::Dob(d);
            let args = KernelArgs { a, b, counts, offsets: [0, 0], steps: [0, u32::MAX], output, grid };
            launcher.launch(stream, blocks, &args)
        },
        drain,
        PairNames::AsWritten,
        None,
        &mut found,
    )?;
    Ok(if pairs > 0 { found.len() as f64 / pairs as f64 } else { 0.0 })
}

/// How the drain names the pairs of `launcher`'s kernel: through the grid's
/// permutations where it walks one.
fn pair_names<'a>(grid: Option<&'a DeviceGrid>, launcher: &Launcher) -> PairNames<'a> {
    match grid {
        Some(g) => PairNames::Sorted {
            perm_a: &g.perm_a,
            perm_b: g.perm_b.as_ref().unwrap_or(&g.perm_a),
            unordered: launcher.plan.shape.visit.unordered(),
        },
        None => PairNames::AsWritten,
    }
}

/// The fraction of a grid's visited pairs that pass, measured on the
/// kernel itself over the grid's sample of units.
fn sample_grid_selectivity(
    stream: &Arc<CudaStream>,
    launcher: &Launcher,
    (a, b): (&DeviceBlock, Option<&DeviceBlock>),
    counts: [u32; 2],
    grid: &DeviceGrid,
    drain: &CudaFunction,
) -> Result<f64, GpuError> {
    let sample = grid.args(&grid.sample, 0);
    passing_share(stream, launcher, drain, (grid.sample_units, grid.sample_pairs), (a, b), counts, Some(sample))
}

#[cfg(test)]
mod tests {
    use super::busy;

    #[test]
    fn busy_time_counts_overlapping_pieces_once() {
        // Two streams: [0, 2) and [1, 3) overlap; [5, 6) stands alone; an empty interval adds nothing.
        let t = busy(vec![(5.0, 6.0), (1.0, 3.0), (0.0, 2.0), (4.0, 4.0)]);
        assert!((t - 4.0).abs() < 1e-12, "{t}");
        // One interval inside another.
        assert!((busy(vec![(0.0, 10.0), (2.0, 3.0)]) - 10.0).abs() < 1e-12);
        assert_eq!(busy(vec![]), 0.0);
    }
}
