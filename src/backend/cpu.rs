//! The CPU backend: the problem's own snippet, compiled by the host C++
//! compiler into a driver that loops over the same pairs as the GPU kernel
//! with the same arithmetic. It runs where no GPU is, and it is the oracle
//! every GPU result is checked against.

use std::borrow::Cow;
use std::ffi::c_void;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use indicatif::ProgressBar;

use super::KeyCheck;
use crate::cache::{Cache, CacheError, Damage, Key, Memo};
use crate::codegen;
use crate::data::{Column, Inputs, PointSet};
use crate::index::{Grid, IndexKind};
use crate::memory::{Host, TooLarge};
use crate::outcome::Outcome;
use crate::plan::Shape;
use crate::ranks::{Counter, Keyed, Local, WireError};
use crate::spec::{Params, Problem, Scalar};
use crate::stage::RingShape;
use crate::stage::output::{self, Collect, Partial, Total};
use crate::stage::visit::Visit;
use crate::write;

/// Flags of every driver build. -ffp-contract=off: no fused multiply-add the
/// snippet did not ask for, as on the GPU (--fmad=false).
/// -fno-semantic-interposition: the snippet's functions are inlined into the
/// pair loops (a shared library's global functions are otherwise calls that
/// stop the loop over a run of partners from vectorising).
const CXX_FLAGS: [&str; 7] =
    ["-std=c++17", "-O3", "-fPIC", "-shared", "-ffp-contract=off", "-fno-math-errno", "-fno-semantic-interposition"];

/// The host's own instruction set, where the compiler takes it: fmaf becomes
/// one instruction (a library call otherwise, which no loop vectorises around)
/// and the pair loops run 8 or 16 lanes wide. Results are unchanged: every
/// operation is IEEE-rounded in any width, fmaf is exact either way, and
/// -ffp-contract=off keeps the compiler from fusing what the snippet did not.
const NATIVE: &str = "-march=native";

/// What -march=native means on this host for `cxx` (its expanded command
/// line), for the cache key: a driver built for one CPU is never loaded on
/// another that shares the cache. None where the compiler refuses it.
fn native_target(cxx: &str) -> Option<String> {
    let out = Command::new(cxx)
        .args([NATIVE, "-###", "-x", "c++", "-c", "/dev/null", "-o", "/dev/null"])
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let text = String::from_utf8_lossy(&out.stderr);
    // GCC's cc1plus line names -march=<cpu> and each -m flag; clang's -cc1 line names -target-cpu.
    text.lines().find(|l| l.contains("-march=") || l.contains("-target-cpu")).map(str::to_owned)
}

/// Why the CPU backend could not run.
#[derive(Debug, thiserror::Error)]
pub enum CpuError {
    #[error("the CPU backend needs a C++ compiler and found none of {0}; install g++ or set CXX")]
    NoCompiler(String),
    #[error("cannot run {compiler}: {cause}")]
    Spawn { compiler: String, cause: std::io::Error },
    /// `of`: the problem, and the user's file its pair function is in.
    #[error("{compiler} could not compile the CPU driver of {of}:\n{log}{excerpt}\n(the generated driver is {})", path.display())]
    Compile { compiler: String, of: String, log: String, excerpt: String, path: PathBuf },
    #[error("cannot load the CPU driver {}: {cause}", path.display())]
    Load { path: PathBuf, cause: libloading::Error },
    #[error(transparent)]
    Cache(#[from] CacheError),
    #[error(transparent)]
    Memory(#[from] TooLarge),
    #[error(transparent)]
    Stopped(#[from] crate::stop::Stopped),
    #[error("the rows of set A sent with piece {piece} (rows {lo}..{hi}): {why}")]
    Rows { piece: u64, lo: usize, hi: usize, why: WireError },
}

/// The most bytes of histogram copies a CPU run keeps until their merge
/// (more where each thread needs one).
const COPY_BYTES: u64 = 256 << 20;

/// What [`CpuDriver::run_walker`]'s threads did on this process.
pub struct Ran {
    /// Each chunk's partial result, keyed by its place in the list.
    pub parts: Vec<Keyed>,
    /// Pairs the chunks taken here visited.
    pub pairs: u128,
    /// Where A's rows came with the chunks: the most bytes of them held at
    /// once (the chunks walked, and at most as many more asked ahead, a
    /// bound: the sum of the two's most), and the bytes received in all.
    pub rows_held_bytes: u64,
    pub rows_received_bytes: u64,
}

/// A compiled driver, loaded.
pub struct CpuDriver {
    lib: Arc<libloading::Library>,
    visit: Visit,
    index: IndexKind,
    collect: Collect,
    /// The problem's name, for messages.
    problem: String,
    /// The pair function's type (f64 in f64 mode): KNN lists hold values of it.
    value: Scalar,
    f64_mode: bool,
    /// The box read at run time (`RunTimeBox`'s numbers), set in the driver
    /// before each walk or evaluation; None where the code folds it.
    run_time_box: Option<[f64; 12]>,
    /// Where the driver's source is kept, for reading and for compiler messages.
    pub source_path: PathBuf,
    pub compile_seconds: f64,
    pub cached: bool,
    /// Why the driver in the cache was built again (it was not what twobs had built).
    pub rebuilt: Option<String>,
}

#[repr(C)]
struct RawSet {
    columns: *const *const c_void,
    n: u64,
}

/// The grid as the driver reads it (`cpu/visit/grid.cpp` reads the first
/// four fields, `cpu/visit/rings.cpp` all of them).
#[repr(C)]
struct RawGrid {
    units: *const [u32; 4],
    ranges: *const [u32; 2],
    perm_a: *const u32,
    perm_b: *const u32,
    cell_start: *const u32,
    cell_a: *const u32,
    shape: RingShape,
}

type TotalsFn<T> = unsafe extern "C" fn(*const RawSet, *const RawSet, *const RawGrid, u64, u64, *mut T);
type PairsFn = unsafe extern "C" fn(*const RawSet, *const RawSet, *const RawGrid, u64, u64, *mut u32, u64) -> u64;
type KnnFn = unsafe extern "C" fn(*const RawSet, *const RawSet, *const RawGrid, u64, u64, *mut c_void, *mut u32);
type AloneFn =
    unsafe extern "C" fn(*const RawSet, *const RawSet, *const u32, u64, *mut f64, *mut u8, *mut f64, *mut f64, *mut u8);

/// Pairs evaluated one at a time ([`CpuDriver::pairs_alone`]), as doubles.
#[derive(Debug, Clone, Default)]
pub struct Alone {
    pub value: Vec<f64>,
    /// Whether the pair adds to the output (counts, buckets, sums, pairs).
    pub adds: Vec<bool>,
    /// The key and map(key) where the spec declares a key map (else the value).
    pub key: Vec<f64>,
    pub mapped: Vec<f64>,
    /// map(key) is the value bit for bit, or both are NaN.
    pub same: Vec<bool>,
}

/// The C++ compiler: $CXX, else c++, else g++, else clang++; with its version line.
fn compiler() -> Result<(String, String), CpuError> {
    let candidates: Vec<String> = match std::env::var("CXX") {
        Ok(cxx) if !cxx.trim().is_empty() => vec![cxx],
        _ => vec!["c++".into(), "g++".into(), "clang++".into()],
    };
    for cxx in &candidates {
        if let Ok(out) = Command::new(cxx).arg("--version").output()
            && out.status.success()
        {
            let version = String::from_utf8_lossy(&out.stdout).lines().next().unwrap_or("").to_owned();
            return Ok((cxx.clone(), version));
        }
    }
    Err(CpuError::NoCompiler(candidates.join(", ")))
}

static DRIVERS: Memo<libloading::Library> = Memo::new();

/// A compiled and loaded library of generated C++.
struct Library {
    lib: Arc<libloading::Library>,
    source_path: PathBuf,
    cached: bool,
    /// Why the cached library was not loaded as it was, where it was damaged.
    rebuilt: Option<String>,
}

/// Compiles `code` with the host compiler (or finds it in the cache) and loads it.
/// `snippet` is the user's file the code holds, for the compiler's errors.
fn library(code: &codegen::Kernel, name: &str, snippet: &str, cache: &Cache) -> Result<Library, CpuError> {
    let (cxx, version) = compiler()?;
    let native = native_target(&cxx);
    let mut flags: Vec<&str> = CXX_FLAGS.to_vec();
    if native.is_some() {
        flags.push(NATIVE);
    }
    let key = Key::of(&[
        code.cache_text().as_bytes(),
        cxx.as_bytes(),
        version.as_bytes(),
        flags.join(" ").as_bytes(),
        native.as_deref().unwrap_or("").as_bytes(),
    ]);
    let entry = cache.entry("cpu", name, key, "so")?;
    let source_path = entry.path.with_extension("cpp");
    let mut cached = true;
    let mut rebuilt = None;
    let lib = DRIVERS.get_or_try(key, || -> Result<libloading::Library, CpuError> {
        crate::cache::count_program();
        // Only what twobs built is loaded: a driver whose bytes are not those
        // recorded (truncated, emptied, changed) is built again.
        if let Err(damage) = entry.verify() {
            cached = false;
            if let Damage::Changed(why) = damage {
                rebuilt = Some(why);
            }
            // Another process may be making the same library: each writes and
            // compiles its own partial files, and the renames are atomic.
            write::file_atomically(&source_path, |w| w.write_all(code.source.as_bytes()))
                .map_err(|cause| CacheError::Io { path: source_path.clone(), cause })?;
            let partial = entry.partial()?;
            let out = Command::new(&cxx)
                .args(&flags)
                .arg("-o")
                .arg(partial.partial())
                .arg(&source_path)
                .output()
                .map_err(|source| CpuError::Spawn { compiler: cxx.clone(), cause: source })?;
            if !out.status.success() {
                let log = String::from_utf8_lossy(&out.stderr);
                return Err(CpuError::Compile {
                    compiler: cxx.clone(),
                    of: format!("`{name}` (its pair function is in {snippet})"),
                    log: log.lines().take(40).collect::<Vec<_>>().join("\n"),
                    excerpt: code.excerpt(&log),
                    path: source_path.clone(),
                });
            }
            let bytes = std::fs::read(partial.partial())
                .map_err(|cause| CacheError::Io { path: partial.partial().to_owned(), cause })?;
            entry.commit(partial, &bytes)?;
        }
        // SAFETY: a library twobs generated and compiled, its digest checked
        // just above; its initializers do nothing.
        unsafe { libloading::Library::new(&entry.path) }
            .map_err(|source| CpuError::Load { path: entry.path.clone(), cause: source })
    })?;
    Ok(Library { lib, source_path, cached, rebuilt })
}

/// Checks the key edges of `problem` on the host: `count` keys of ranks
/// `first`, `first + stride`, ..., and every key within `around` ranks of an
/// edge. None where pairs are tested on values.
pub fn check_keys(
    problem: &Problem,
    params: &Params,
    cache: &Cache,
    (first, count, stride): (u64, u64, u64),
    around: u64,
) -> Result<Option<KeyCheck>, CpuError> {
    let Some(probe) = codegen::render_key_probe(problem, params, None) else { return Ok(None) };
    let Library { lib, .. } = library(&probe, &format!("{}-keys", problem.name), &problem.function.file, cache)?;
    type CheckFn = unsafe extern "C" fn(u64, u64, u64, u64, *mut u64, *mut u64, *mut f64) -> u64;
    let (mut mismatches, mut first_bad, mut estimate_error) = (0u64, u64::MAX, 0f64);
    // SAFETY: the probe template gives twobs_check_keys this signature; it
    // writes only the three results it is given.
    let checked = unsafe {
        let f: CheckFn = *lib.get(b"twobs_check_keys").expect("the probe defines twobs_check_keys");
        f(first, count, stride, around, &mut mismatches, &mut first_bad, &mut estimate_error)
    };
    Ok(Some(KeyCheck { checked, mismatches, first_bad: (mismatches > 0).then_some(first_bad), estimate_error }))
}

impl CpuDriver {
    /// Sets the box read at run time in the driver (`twobs_use_box`), where
    /// the code reads one. The driver holds one box: a process runs one
    /// run-time box at a time (`backend::one_box_at_a_time`, held by the runner).
    fn use_box(&self) {
        let Some(numbers) = &self.run_time_box else { return };
        // SAFETY: a driver rendered with a run-time box defines twobs_use_box
        // (templates/cpu/driver.cpp), which reads twelve doubles.
        unsafe {
            let f: unsafe extern "C" fn(*const f64) =
                *self.lib.get(b"twobs_use_box").expect("a driver with a run-time box defines twobs_use_box");
            f(numbers.as_ptr());
        }
    }

    /// Renders, compiles (or finds in the cache) and loads the driver for `problem`.
    pub fn compile(
        problem: &Problem,
        params: &Params,
        shape: &Shape,
        index: IndexKind,
        f64_mode: bool,
        cache: &Cache,
    ) -> Result<CpuDriver, CpuError> {
        let (p, v) = if f64_mode { (problem.in_f64(), params.in_f64()) } else { (problem.clone(), params.clone()) };
        let driver = codegen::render_cpu(&p, &v, shape, index, f64_mode);
        let start = Instant::now();
        let Library { lib, source_path, cached, rebuilt } =
            library(&driver, &problem.name, &problem.function.file, cache).map_err(|e| match e {
                CpuError::Compile { compiler, of, log, excerpt, path } if f64_mode => CpuError::Compile {
                    compiler,
                    of,
                    log,
                    excerpt: format!(
                        "{excerpt}\n--f64 reads the snippet's float as double; a conversion back to float is an error there, as it would compute in f32"
                    ),
                    path,
                },
                other => other,
            })?;
        Ok(CpuDriver {
            lib,
            problem: problem.name.clone(),
            visit: shape.visit,
            index,
            collect: shape.collect,
            value: p.function.returns,
            f64_mode,
            run_time_box: v.run_time_box().map(|b| b.run_time_numbers()),
            source_path,
            compile_seconds: start.elapsed().as_secs_f64(),
            cached,
            rebuilt,
        })
    }

    /// Pair k of `pairs` (point [0] of `a` with point [1] of `b`) evaluated
    /// alone, in the driver's arithmetic: the promise check's evidence.
    pub fn pairs_alone(&self, a: &PointSet, b: &PointSet, pairs: &[[u32; 2]]) -> Alone {
        assert!(pairs.iter().all(|p| (p[0] as usize) < a.len() && (p[1] as usize) < b.len()), "pairs of the sets");
        let widen = |s: &PointSet| -> Vec<Column> {
            s.columns.iter().map(|c| if self.f64_mode { c.widened() } else { c.clone() }).collect()
        };
        let (a_cols, b_cols) = (widen(a), widen(b));
        let (a_ptrs, b_ptrs): (Vec<*const c_void>, Vec<*const c_void>) =
            (a_cols.iter().map(Column::as_ptr).collect(), b_cols.iter().map(Column::as_ptr).collect());
        let raw_a = RawSet { columns: a_ptrs.as_ptr(), n: a.len() as u64 };
        let raw_b = RawSet { columns: b_ptrs.as_ptr(), n: b.len() as u64 };
        let n = pairs.len();
        let flat: Vec<u32> = pairs.iter().flatten().copied().collect();
        let (mut value, mut key, mut mapped) = (vec![0f64; n], vec![0f64; n], vec![0f64; n]);
        let (mut adds, mut same) = (vec![0u8; n], vec![0u8; n]);
        self.use_box();
        // SAFETY: every driver defines twobs_pairs_alone with this signature
        // (templates/cpu/driver.cpp); it reads the sets and the n pairs, whose
        // indices are within them (checked above), and writes n of each output.
        unsafe {
            let f: AloneFn = *self.lib.get(b"twobs_pairs_alone").expect("every driver defines twobs_pairs_alone");
            f(
                &raw_a,
                &raw_b,
                flat.as_ptr(),
                n as u64,
                value.as_mut_ptr(),
                adds.as_mut_ptr(),
                key.as_mut_ptr(),
                mapped.as_mut_ptr(),
                same.as_mut_ptr(),
            );
        }
        let bools = |v: Vec<u8>| v.into_iter().map(|x| x != 0).collect();
        Alone { value, adds: bools(adds), key, mapped, same: bools(same) }
    }

    /// Runs every pair of `inputs` (those of `grid`'s units where the driver
    /// walks a grid) on `threads` threads. What cannot fit the host's memory
    /// is refused before the run (histogram copies; pairs, where a sample
    /// says they are more than twice what is available), and a run whose
    /// pairs outgrow it stops with the error.
    pub fn run(
        &self,
        inputs: &Inputs,
        grid: Option<&Grid>,
        threads: usize,
        progress: &ProgressBar,
    ) -> Result<Outcome, CpuError> {
        let (parts, _) = self.run_parts(inputs, grid, threads, progress, &Local::default())?;
        Ok(self.finish(inputs, grid, parts.into_iter().map(|(_, p)| p).collect()))
    }

    /// The outcome of every chunk's partial result, in chunk order.
    pub fn finish(&self, inputs: &Inputs, grid: Option<&Grid>, parts: Vec<Partial>) -> Outcome {
        let outcome = self.merge(inputs.a.len(), parts);
        match grid {
            Some(g) if self.index == IndexKind::Rings => outcome.rows_from_cell_order(&g.a.perm),
            _ => outcome,
        }
    }

    /// The outcome of chunks' partial results over a set A of `a_points`
    /// points walked row by row (no grid), in chunk order.
    pub fn merge(&self, a_points: usize, parts: Vec<Partial>) -> Outcome {
        output::merge(self.collect, self.value, a_points, parts)
    }

    /// [`CpuDriver::run`]'s chunks, each keyed by its place: the chunks
    /// this process's threads took from `counter`, which hands out chunk
    /// numbers (to this process alone, or to every rank of an MPI run). The
    /// chunks depend on the work and on `threads`, not on who takes them,
    /// so merged in key order they add up alike on any number of ranks.
    /// Also returns the pairs the chunks taken here visited.
    pub fn run_parts(
        &self,
        inputs: &Inputs,
        grid: Option<&Grid>,
        threads: usize,
        progress: &ProgressBar,
        counter: &dyn Counter,
    ) -> Result<(Vec<Keyed>, u128), CpuError> {
        let ran = self.run_walker(&self.walker(inputs, grid), threads, progress, counter)?;
        Ok((ran.parts, ran.pairs))
    }

    /// Work items of `walker` a chunk takes on `threads` threads: the same
    /// on every rank that walks the same work (rank 0 sends the rows of a
    /// chunk with its number, [`Walker::walk_rows`]).
    pub fn chunk(&self, walker: &Walker, threads: usize) -> usize {
        let items = walker.items();
        let threads = threads.max(1);
        // Chunks of at most 2^26 pairs (a fraction of a second): a stop asked
        // (Ctrl-C in Python) is seen between chunks.
        let per_item = (walker.pairs_of(0, items) / items.max(1) as u64).max(1);
        let chunk = (items / (threads * 64)).clamp(1, 4096).min(((1u64 << 26) / per_item).max(1) as usize);
        match self.collect {
            // Each chunk's totals are kept until the merge, in chunk order (so
            // that sums add up the same whatever thread ran which): at most
            // COPY_BYTES of copies, or one a thread (4M buckets of 2,000
            // points took 2.26 GB as 134 copies).
            Collect::Totals { slots, .. } => {
                let most = (COPY_BYTES / (slots as u64 * 8)).max(threads as u64) as usize;
                chunk.max(items.div_ceil(most))
            }
            _ => chunk,
        }
    }

    /// [`CpuDriver::run_parts`] on a walker made ready: of the inputs a
    /// process holds ([`CpuDriver::walker`]), or of set B alone where rank 0
    /// sends A's rows with each chunk ([`CpuDriver::walker_without_a`]; the
    /// counter carries them).
    pub fn run_walker(
        &self,
        walker: &Walker,
        threads: usize,
        progress: &ProgressBar,
        counter: &dyn Counter,
    ) -> Result<Ran, CpuError> {
        let items = walker.items();
        let threads = threads.max(1);
        let chunk = self.chunk(walker, threads);
        let host = Host::now();
        if let (Collect::Totals { slots, .. }, Some(host)) = (self.collect, host) {
            let copies = (items.div_ceil(chunk) + threads) as u64;
            host.check(
                || format!("{copies} copies of the {slots} histogram buckets ({threads} threads)"),
                copies * slots as u64 * 8,
            )?;
        }
        if let (Collect::Knn { k }, Some(host)) = (self.collect, host) {
            // The lists, and their ids widened to int64 for the result file.
            let each = k as u64 * (4 + 8 + self.value.bytes() as u64);
            let n = walker.a.n;
            host.check(|| format!("`{}`: {n} lists of K = {k} neighbours", self.problem), n * each)?;
        }
        if let (Collect::Pairs, Some(host)) = (self.collect, host)
            && walker.holds_a
        {
            self.check_pairs_fit(walker, &host)?;
        }
        let chunks = items.div_ceil(chunk);
        // Pairs found so far, and whether they outgrew the memory available.
        let found = AtomicU64::new(0);
        let most_pairs = host.map_or(u64::MAX, |h| h.available / 8);
        let (stop, done) = (AtomicBool::new(false), AtomicUsize::new(0));
        let watch = crate::stop::Watch::start();
        let visited = AtomicU64::new(0);
        let failed = std::sync::Mutex::new(None);

        // Workers take chunks of work items in turn; results are kept per
        // chunk, so that their merge does not depend on which thread ran which.
        let work = || -> Vec<(usize, Partial)> {
            let mut out = Vec::new();
            let mut buffer = walker.buffer();
            loop {
                if stop.load(Ordering::Relaxed) || watch.asked() {
                    break;
                }
                let (c, rows) = counter.next_carried();
                let c = usize::try_from(c).unwrap_or(usize::MAX);
                if c >= chunks {
                    break;
                }
                let (lo, hi) = (c * chunk, ((c + 1) * chunk).min(items));
                let part = match rows {
                    None => walker.walk(lo, hi, &mut buffer),
                    // Rows of A that rank 0 sent (read by the asker; held, and counted, until dropped).
                    Some(carried) => match &carried.rows {
                        Ok(rows) if rows.len() == hi - lo => walker.walk_rows(rows, lo, &mut buffer),
                        Ok(rows) => {
                            let what = format!("{} rows came, {} were expected", rows.len(), hi - lo);
                            self.failed(&failed, &stop, c, lo, hi, WireError { at: 0, len: 0, what });
                            break;
                        }
                        Err(why) => {
                            self.failed(&failed, &stop, c, lo, hi, why.clone());
                            break;
                        }
                    },
                };
                if let Partial::Pairs(p) = &part
                    && found.fetch_add(p.len() as u64, Ordering::Relaxed) + p.len() as u64 > most_pairs
                {
                    stop.store(true, Ordering::Relaxed);
                }
                out.push((c, part));
                done.fetch_add(hi - lo, Ordering::Relaxed);
                let pairs = walker.pairs_of(lo, hi);
                visited.fetch_add(pairs, Ordering::Relaxed);
                progress.inc(pairs);
            }
            out
        };
        let mut parts: Vec<(usize, Partial)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads).map(|_| s.spawn(work)).collect();
            handles.into_iter().flat_map(|h| h.join().expect("CPU worker panicked")).collect()
        });
        if let Some(e) = failed.into_inner().expect("no worker panicked holding it") {
            return Err(e);
        }
        if watch.asked() {
            return Err(crate::stop::Stopped.into());
        }
        if stop.load(Ordering::Relaxed) {
            let (found, done) = (found.load(Ordering::Relaxed), done.load(Ordering::Relaxed).max(1));
            drop(parts);
            let share = 100.0 * done as f64 / items as f64;
            let all = (found as u128 * items as u128 / done as u128).min(u64::MAX as u128 / 8) as u64;
            return Err(TooLarge {
                what: format!(
                    "`{}` stopped after {share:.1}% of its work: it had found {found} pairs, and all of them (about {all} at that rate)",
                    self.problem
                ),
                needed: all * 8,
                host: host.expect("a limit comes from the host"),
            }
            .into());
        }
        parts.sort_by_key(|(c, _)| *c);
        Ok(Ran {
            parts: parts.into_iter().map(|(c, p)| (c as u64, p)).collect(),
            pairs: u128::from(visited.into_inner()),
            // Rows walked, and those the counter received ahead of the walk.
            rows_held_bytes: counter.most_bytes_ahead(),
            rows_received_bytes: counter.received_bytes(),
        })
    }

    /// Records why the rows sent with chunk `c` could not be read, and stops the run.
    fn failed(
        &self,
        failed: &std::sync::Mutex<Option<CpuError>>,
        stop: &AtomicBool,
        c: usize,
        lo: usize,
        hi: usize,
        why: WireError,
    ) {
        stop.store(true, Ordering::Relaxed);
        failed.lock().expect("no worker panicked holding it").get_or_insert(CpuError::Rows {
            piece: c as u64,
            lo,
            hi,
            why,
        });
    }

    /// Refuses, before the run, pairs that cannot fit `host`'s memory. Where
    /// every pair visited passing would fit, nothing is checked; otherwise up
    /// to 64 work items spread over the run (at most a sixteenth of its
    /// pairs) estimate how many pass, and an estimate over twice what is
    /// available is refused (one closer is left to the run, which stops where
    /// its pairs outgrow the memory).
    fn check_pairs_fit(&self, walker: &Walker, host: &Host) -> Result<(), TooLarge> {
        let items = walker.items();
        let visited = walker.pairs_of(0, items);
        if visited.saturating_mul(8) <= host.available || items == 0 {
            return Ok(());
        }
        let mut buffer = walker.buffer();
        let (mut passed, mut seen, mut sampled) = (0u64, 0u64, 0);
        for item in (0..items).step_by(items.div_ceil(64)) {
            if let Partial::Pairs(p) = walker.walk(item, item + 1, &mut buffer) {
                passed += p.len() as u64;
            }
            seen += walker.pairs_of(item, item + 1);
            sampled += 1;
            if seen > visited / 16 {
                break;
            }
        }
        let estimate = (visited as u128 * passed as u128 / seen.max(1) as u128).min(u64::MAX as u128 / 8) as u64;
        if estimate * 8 <= 2 * host.available {
            return Ok(());
        }
        let what = if walker.grid.is_some() && !walker.rings { "units of the grid" } else { "rows" };
        Err(TooLarge {
            what: format!(
                "`{}`: about {estimate} pairs pass (estimated from {sampled} {what} spread over the run, where {passed} of {seen} pairs passed); they",
                self.problem
            ),
            needed: estimate * 8,
            host: *host,
        })
    }

    /// What walks work items of `inputs` (and `grid`, where the driver walks
    /// one) on any thread: [`CpuDriver::run`]'s workers, and the CPU's part
    /// of a GPU run (`backend::hybrid`).
    pub fn walker<'a>(&'a self, inputs: &'a Inputs, grid: Option<&'a Grid>) -> Walker<'a> {
        assert_eq!(grid.is_some(), self.index != IndexKind::None, "a grid driver runs on a grid, and only it");
        self.use_box();
        // A grid's driver reads both sets in cell order, and names the points by
        // their input indices itself.
        let (set_a, set_b) = match grid {
            Some(g) => (&g.a.set, g.b.as_ref().map(|b| &b.set)),
            None => (&inputs.a, inputs.b.as_ref()),
        };
        let a_cols = self.widen(set_a);
        let b_cols = set_b.map(|b| self.widen(b));
        let a_ptrs = pointers(&a_cols);
        let b_ptrs = b_cols.as_deref().map(pointers).unwrap_or_else(|| a_ptrs.clone());
        let units: Vec<[u32; 4]> = grid
            .map(|g| g.units.iter().map(|u| [u.own[0], u.own[1], u.ranges[0], u.ranges[1]]).collect())
            .unwrap_or_default();
        let raw_grid = grid.map(|g| RawGrid {
            units: units.as_ptr(),
            ranges: g.ranges.as_ptr(),
            perm_a: g.a.perm.as_ptr(),
            perm_b: g.other().perm.as_ptr(),
            cell_start: g.other().cell_start.as_ptr(),
            cell_a: g.a.cell.as_ptr(),
            shape: crate::index::ring_shape(&g.axes),
        });
        Walker {
            driver: self,
            grid,
            rings: self.index == IndexKind::Rings,
            holds_a: true,
            a: RawSet { columns: a_ptrs.as_ptr(), n: inputs.a.len() as u64 },
            b: RawSet { columns: b_ptrs.as_ptr(), n: inputs.other().len() as u64 },
            raw_grid,
            _columns: (a_cols, b_cols, a_ptrs, b_ptrs, units),
        }
    }

    /// A walker of set `b` alone, against a set A of `a_points` points that
    /// this process does not hold: each chunk's rows of A come with it
    /// ([`Walker::walk_rows`]). Two sets and every pair only: a chunk of rows
    /// of A then reads those rows and all of B, nothing else.
    pub fn walker_without_a<'a>(&'a self, a_points: usize, b: &'a PointSet) -> Walker<'a> {
        assert!(
            self.visit == Visit::Cross && self.index == IndexKind::None,
            "rows of A alone serve only A x B, every pair"
        );
        self.use_box();
        let b_cols = self.widen(b);
        let b_ptrs = pointers(&b_cols);
        Walker {
            driver: self,
            grid: None,
            rings: false,
            holds_a: false,
            a: RawSet { columns: std::ptr::null(), n: a_points as u64 },
            b: RawSet { columns: b_ptrs.as_ptr(), n: b.len() as u64 },
            raw_grid: None,
            _columns: (Cow::Borrowed(&[]), Some(b_cols), Vec::new(), b_ptrs, Vec::new()),
        }
    }

    /// A set's columns as the driver reads them: widened to f64 in f64 mode.
    fn widen<'a>(&self, s: &'a PointSet) -> Cow<'a, [Column]> {
        if self.f64_mode {
            Cow::Owned(s.columns.iter().map(Column::widened).collect())
        } else {
            Cow::Borrowed(&s.columns)
        }
    }
}

/// The columns' addresses, as the driver's sets take them.
fn pointers(cols: &[Column]) -> Vec<*const c_void> {
    cols.iter().map(Column::as_ptr).collect()
}

/// A driver ready to walk work items: the sets (and grid) as the driver
/// reads them. Work items are rows of A (in cell order for a search of
/// rings), or the grid's units (most pairs first).
pub struct Walker<'a> {
    driver: &'a CpuDriver,
    grid: Option<&'a Grid>,
    pub rings: bool,
    /// Whether `a` points at set A's columns ([`CpuDriver::walker_without_a`]: it does not).
    holds_a: bool,
    a: RawSet,
    b: RawSet,
    raw_grid: Option<RawGrid>,
    /// What the raw pointers point into, kept alive with them.
    #[allow(clippy::type_complexity, reason = "held, never read")]
    _columns: (Cow<'a, [Column]>, Option<Cow<'a, [Column]>>, Vec<*const c_void>, Vec<*const c_void>, Vec<[u32; 4]>),
}

// SAFETY: the raw pointers point into data the walker holds or borrows for
// 'a, and the driver only reads it; each walk writes only its own buffers.
unsafe impl Sync for Walker<'_> {}
unsafe impl Send for Walker<'_> {}

impl Walker<'_> {
    /// Work items: the grid's units, or rows of A.
    pub fn items(&self) -> usize {
        match self.grid {
            Some(g) if !self.rings => g.units.len(),
            _ => self.a.n as usize,
        }
    }

    /// Pairs that items [lo, hi) visit (for a search of rings, its share of the estimate).
    pub fn pairs_of(&self, lo: usize, hi: usize) -> u64 {
        let n = self.a.n as usize;
        match self.grid {
            Some(g) if self.rings => (g.pairs * (hi - lo) as u128 / n.max(1) as u128) as u64,
            Some(g) => g.units[lo..hi].iter().map(|u| u.pairs).sum(),
            None => self.driver.visit.pairs_of_rows(lo as u64, hi as u64, n as u64, self.b.n) as u64,
        }
    }

    /// A thread's scratch for pairs: room for 64k to start with, so that
    /// items are seldom walked twice.
    pub fn buffer(&self) -> Vec<u32> {
        if self.driver.collect == Collect::Pairs { vec![0; 2 << 16] } else { Vec::new() }
    }

    /// Walks items [lo, hi): their totals, pairs, or lists (rows lo.. of
    /// the lists, in cell order for a search of rings).
    pub fn walk(&self, lo: usize, hi: usize, buffer: &mut Vec<u32>) -> Partial {
        assert!(self.holds_a, "a walker without set A walks the rows sent with a chunk (walk_rows)");
        self.walk_set(&self.a, lo, hi, buffer)
    }

    /// Walks `rows`, rows [first, first + rows.len()) of set A sent with a
    /// chunk, against every point of B: the partial result `walk` gives for
    /// those items where the whole of A is held (pairs and lists named by
    /// their rows of A).
    pub fn walk_rows(&self, rows: &PointSet, first: usize, buffer: &mut Vec<u32>) -> Partial {
        assert!(self.grid.is_none() && self.driver.visit == Visit::Cross, "rows of A alone serve only A x B");
        let cols = self.driver.widen(rows);
        let ptrs = pointers(&cols);
        let own = RawSet { columns: ptrs.as_ptr(), n: rows.len() as u64 };
        // The driver names an own point by its place in `own`: from `first` on in A.
        match self.walk_set(&own, 0, rows.len(), buffer) {
            Partial::Pairs(p) => Partial::Pairs(p.into_iter().map(|[i, j]| [i + first as u32, j]).collect()),
            Partial::Knn(lists) => Partial::Knn(lists.into_iter().map(|(r, v, ids)| (r + first, v, ids)).collect()),
            totals => totals,
        }
    }

    /// Walks items [lo, hi) of the own points `a`.
    fn walk_set(&self, a: &RawSet, lo: usize, hi: usize, buffer: &mut Vec<u32>) -> Partial {
        let lib = &*self.driver.lib;
        let (a, b) = (a as *const RawSet, &self.b as *const RawSet);
        let g = self.raw_grid.as_ref().map_or(std::ptr::null(), |g| g as *const RawGrid);
        let (lo64, hi64) = (lo as u64, hi as u64);
        const ROWS: &[u8] = b"twobs_rows";
        const DEFINED: &str = "every driver defines twobs_rows";
        // SAFETY: twobs_rows has the signature the output's CPU fragment gives
        // it for this collect; the sets outlive the call; each call writes
        // only the buffers it is given, sized for its items.
        unsafe {
            match self.driver.collect {
                Collect::Totals { slots, total: Total::Count } => {
                    let f: TotalsFn<u64> = *lib.get(ROWS).expect(DEFINED);
                    let mut t = vec![0u64; slots as usize];
                    f(a, b, g, lo64, hi64, t.as_mut_ptr());
                    Partial::Totals(crate::outcome::Totals::Counts(t))
                }
                Collect::Totals { slots, total: Total::Sum } => {
                    let f: TotalsFn<f64> = *lib.get(ROWS).expect(DEFINED);
                    let mut t = vec![0f64; slots as usize];
                    f(a, b, g, lo64, hi64, t.as_mut_ptr());
                    Partial::Totals(crate::outcome::Totals::Sums(t))
                }
                Collect::Pairs => {
                    let f: PairsFn = *lib.get(ROWS).expect(DEFINED);
                    let capacity = buffer.len() / 2;
                    let m = f(a, b, g, lo64, hi64, buffer.as_mut_ptr(), capacity as u64) as usize;
                    if m > capacity {
                        buffer.resize(2 * m.next_power_of_two(), 0);
                        f(a, b, g, lo64, hi64, buffer.as_mut_ptr(), m as u64);
                    }
                    Partial::Pairs(buffer[..2 * m].chunks_exact(2).map(|p| [p[0], p[1]]).collect())
                }
                Collect::Knn { k } => {
                    let f: KnnFn = *lib.get(ROWS).expect(DEFINED);
                    let len = (hi - lo) * k as usize;
                    let (mut values, mut ids) = (Column::zeros(self.driver.value, len), vec![0u32; len]);
                    f(a, b, g, lo64, hi64, values.as_mut_ptr(), ids.as_mut_ptr());
                    Partial::Knn(vec![(lo, values, ids)])
                }
            }
        }
    }
}
