//! The CPU backend: the problem's own snippet, compiled by the host C++
//! compiler into a driver that loops over the same pairs as the GPU kernel
//! with the same arithmetic. It runs where no GPU is, and it is the oracle
//! every GPU result is checked against.

use std::ffi::c_void;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::Context as _;
use indicatif::ProgressBar;

use crate::codegen;
use crate::data::{Column, Inputs, PointSet};
use crate::outcome::Outcome;
use crate::plan::{Visit, visit_of};
use crate::spec::{Output, Params, Problem};

/// Flags of every driver build. -ffp-contract=off: no fused multiply-add the
/// snippet did not ask for, as on the GPU (--fmad=false).
const CXX_FLAGS: [&str; 6] = ["-std=c++17", "-O2", "-fPIC", "-shared", "-ffp-contract=off", "-fno-math-errno"];

/// A compiled driver, loaded.
pub struct CpuDriver {
    lib: libloading::Library,
    kind: Kind,
    visit: Visit,
    f64_mode: bool,
    /// Buckets of a histogram, 1 for a count.
    slots: usize,
    k: usize,
    /// Where the driver's source is kept, for reading and for compiler messages.
    pub source_path: PathBuf,
    pub compile_seconds: f64,
    pub cached: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Count,
    Histogram,
    Sum,
    Pairs,
    Knn,
}

#[repr(C)]
struct RawSet {
    columns: *const *const c_void,
    n: u64,
}

type SlotsFn = unsafe extern "C" fn(*const RawSet, *const RawSet, u64, u64, *mut u64);
type SumFn = unsafe extern "C" fn(*const RawSet, *const RawSet, u64, u64, *mut f64);
type PairsFn = unsafe extern "C" fn(*const RawSet, *const RawSet, u64, u64, *mut u32, u64) -> u64;
type KnnFn = unsafe extern "C" fn(*const RawSet, *const RawSet, u64, u64, *mut f64, *mut u32);

/// The C++ compiler: $CXX, else c++, else g++.
fn compiler() -> anyhow::Result<(String, String)> {
    let candidates: Vec<String> = match std::env::var("CXX") {
        Ok(cxx) if !cxx.trim().is_empty() => vec![cxx],
        _ => vec!["c++".into(), "g++".into(), "clang++".into()],
    };
    for cxx in &candidates {
        if let Ok(out) = Command::new(cxx).arg("--version").output() {
            if out.status.success() {
                let version = String::from_utf8_lossy(&out.stdout).lines().next().unwrap_or("").to_owned();
                return Ok((cxx.clone(), version));
            }
        }
    }
    anyhow::bail!(
        "the CPU backend needs a C++ compiler and found none of {}; install g++ or set CXX",
        candidates.join(", ")
    )
}

/// $TWOBS_CACHE, else $XDG_CACHE_HOME/twobs, else ~/.cache/twobs, else the temp dir.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("TWOBS_CACHE") {
        return PathBuf::from(dir);
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(dir).join("twobs");
    }
    if let Some(home) = std::env::var_os("HOME") {
        return PathBuf::from(home).join(".cache").join("twobs");
    }
    std::env::temp_dir().join("twobs-cache")
}

fn key(parts: &[&str]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for p in parts {
        p.hash(&mut h);
    }
    h.finish()
}

impl CpuDriver {
    /// Renders, compiles (or finds in the cache) and loads the driver for `problem`.
    pub fn compile(problem: &Problem, params: &Params, f64_mode: bool) -> anyhow::Result<CpuDriver> {
        let visit = visit_of(problem);
        let (p, v) = if f64_mode { (problem.in_f64(), params.in_f64()) } else { (problem.clone(), params.clone()) };
        let driver = codegen::render_cpu(&p, &v, visit, f64_mode)?;
        let (cxx, version) = compiler()?;
        let dir = cache_dir().join("cpu");
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot create the cache {}", dir.display()))?;
        let id = key(&[&driver.source, &cxx, &version, &CXX_FLAGS.join(" ")]);
        let stem = format!("{}-{id:016x}", problem.name);
        let source_path = dir.join(format!("{stem}.cpp"));
        let lib_path = dir.join(format!("{stem}.so"));
        let start = Instant::now();
        let cached = lib_path.exists();
        if !cached {
            std::fs::write(&source_path, &driver.source)
                .with_context(|| format!("cannot write {}", source_path.display()))?;
            let partial = dir.join(format!("{stem}.{}.tmp.so", std::process::id()));
            let out = Command::new(&cxx)
                .args(CXX_FLAGS)
                .arg("-o")
                .arg(&partial)
                .arg(&source_path)
                .output()
                .with_context(|| format!("cannot run {cxx}"))?;
            if !out.status.success() {
                let log = String::from_utf8_lossy(&out.stderr);
                let shown: Vec<&str> = log.lines().take(40).collect();
                anyhow::bail!(
                    "{cxx} could not compile the CPU driver of `{}`:\n{}\n(the generated driver is {})",
                    problem.name,
                    shown.join("\n"),
                    source_path.display()
                );
            }
            std::fs::rename(&partial, &lib_path).with_context(|| format!("cannot store {}", lib_path.display()))?;
        }
        let compile_seconds = start.elapsed().as_secs_f64();
        // SAFETY: a library twobs generated and compiled; its initializers do nothing.
        let lib = unsafe { libloading::Library::new(&lib_path) }
            .with_context(|| format!("cannot load {}", lib_path.display()))?;
        let (kind, slots, k) = match &problem.output {
            Output::Count { .. } => (Kind::Count, 1, 0),
            Output::Histogram { bins, .. } => (Kind::Histogram, params.eval(bins).as_f64() as usize, 0),
            Output::Sum => (Kind::Sum, 0, 0),
            Output::Pairs { .. } => (Kind::Pairs, 0, 0),
            Output::Knn { k } => (Kind::Knn, 0, params.eval(k).as_f64() as usize),
        };
        Ok(CpuDriver { lib, kind, visit, f64_mode, slots, k, source_path, compile_seconds, cached })
    }

    /// Runs every pair of `inputs` on `threads` threads.
    pub fn run(&self, inputs: &Inputs, threads: usize, progress: &ProgressBar) -> anyhow::Result<Outcome> {
        let widen = |s: &PointSet| -> Vec<Column> {
            if self.f64_mode { s.columns.iter().map(Column::widened).collect() } else { s.columns.clone() }
        };
        let a_cols = widen(&inputs.a);
        let b_cols = inputs.b.as_ref().map(widen);
        let ptrs = |cols: &[Column]| -> Vec<*const c_void> {
            cols.iter()
                .map(|c| match c {
                    Column::F32(v) => v.as_ptr() as *const c_void,
                    Column::F64(v) => v.as_ptr() as *const c_void,
                    Column::I32(v) => v.as_ptr() as *const c_void,
                    Column::I64(v) => v.as_ptr() as *const c_void,
                    Column::U32(v) => v.as_ptr() as *const c_void,
                })
                .collect()
        };
        let a_ptrs = ptrs(&a_cols);
        let b_ptrs = b_cols.as_deref().map(ptrs).unwrap_or_else(|| a_ptrs.clone());
        let n = inputs.a.len();
        let n_b = inputs.other().len();
        let a = RawSet { columns: a_ptrs.as_ptr(), n: n as u64 };
        let b = RawSet { columns: b_ptrs.as_ptr(), n: n_b as u64 };
        let sets = Shared((&a as *const RawSet, &b as *const RawSet));

        let threads = threads.max(1);
        let chunk = (n / (threads * 64)).clamp(1, 4096);
        let chunks = n.div_ceil(chunk);
        let next = AtomicUsize::new(0);
        let rows_weight = |lo: usize, hi: usize| -> u64 {
            match self.visit {
                Visit::LowerTriangle => (lo..hi).map(|i| (n - 1 - i) as u64).sum(),
                Visit::AllPairs => ((hi - lo) * (n - 1)) as u64,
                Visit::Cross => ((hi - lo) * n_b) as u64,
            }
        };

        // Each worker takes chunks of rows in turn; results land per chunk so
        // that their combination does not depend on which thread ran which.
        enum Part {
            Slots(Vec<u64>),
            Sum(f64),
            Pairs(Vec<[u32; 2]>),
            Knn,
        }
        let mut knn_values = vec![0f64; if self.kind == Kind::Knn { n * self.k } else { 0 }];
        let mut knn_ids = vec![0u32; knn_values.len()];
        let knn_out = Shared((knn_values.as_mut_ptr(), knn_ids.as_mut_ptr()));
        let lib = &self.lib;
        let work = |_: usize| -> anyhow::Result<Vec<(usize, Part)>> {
            let (a, b) = sets.get();
            let mut out = Vec::new();
            let mut buffer: Vec<u32> = Vec::new();
            loop {
                let c = next.fetch_add(1, Ordering::Relaxed);
                if c >= chunks {
                    break;
                }
                let (lo, hi) = (c * chunk, ((c + 1) * chunk).min(n));
                // SAFETY: the symbol has the signature the driver template gives it for
                // this output kind; the sets outlive the call; each chunk writes only
                // its own rows of the KNN arrays.
                let part = unsafe {
                    match self.kind {
                        Kind::Count | Kind::Histogram => {
                            let f: SlotsFn = *lib.get(b"twobs_rows")?;
                            let mut slots = vec![0u64; self.slots];
                            f(a, b, lo as u64, hi as u64, slots.as_mut_ptr());
                            Part::Slots(slots)
                        }
                        Kind::Sum => {
                            let f: SumFn = *lib.get(b"twobs_rows")?;
                            let mut sum = 0.0;
                            f(a, b, lo as u64, hi as u64, &mut sum);
                            Part::Sum(sum)
                        }
                        Kind::Pairs => {
                            let f: PairsFn = *lib.get(b"twobs_rows")?;
                            let capacity = buffer.len() / 2;
                            let m = f(a, b, lo as u64, hi as u64, buffer.as_mut_ptr(), capacity as u64) as usize;
                            if m > capacity {
                                buffer.resize(2 * m.next_power_of_two(), 0);
                                f(a, b, lo as u64, hi as u64, buffer.as_mut_ptr(), m as u64);
                            }
                            Part::Pairs(buffer[..2 * m].chunks_exact(2).map(|p| [p[0], p[1]]).collect())
                        }
                        Kind::Knn => {
                            let f: KnnFn = *lib.get(b"twobs_rows")?;
                            let (values, ids) = knn_out.get();
                            f(a, b, lo as u64, hi as u64, values.add(lo * self.k), ids.add(lo * self.k));
                            Part::Knn
                        }
                    }
                };
                progress.inc(rows_weight(lo, hi));
                out.push((c, part));
            }
            Ok(out)
        };
        let mut parts: Vec<(usize, Part)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads).map(|t| s.spawn(move || work(t))).collect();
            handles.into_iter().map(|h| h.join().expect("CPU worker panicked")).collect::<anyhow::Result<Vec<_>>>()
        })?
        .into_iter()
        .flatten()
        .collect();
        parts.sort_by_key(|(c, _)| *c);

        Ok(match self.kind {
            Kind::Count | Kind::Histogram => {
                let mut total = vec![0u64; self.slots];
                for (_, p) in &parts {
                    if let Part::Slots(s) = p {
                        total.iter_mut().zip(s).for_each(|(t, x)| *t += x);
                    }
                }
                if self.kind == Kind::Count { Outcome::Count(total[0]) } else { Outcome::Histogram(total) }
            }
            Kind::Sum => Outcome::Sum(parts.iter().map(|(_, p)| if let Part::Sum(s) = p { *s } else { 0.0 }).sum()),
            Kind::Pairs => Outcome::Pairs(
                parts.into_iter().flat_map(|(_, p)| if let Part::Pairs(v) = p { v } else { Vec::new() }).collect(),
            ),
            Kind::Knn => Outcome::Knn { k: self.k, ids: knn_ids, values: knn_values },
        })
    }
}

/// Raw pointers handed to worker threads: they point at data that outlives the
/// scope, and the workers only read it (or write disjoint rows).
#[derive(Clone, Copy)]
struct Shared<T>(T);
unsafe impl<T> Sync for Shared<T> {}
unsafe impl<T> Send for Shared<T> {}
impl<T: Copy> Shared<T> {
    fn get(&self) -> T {
        self.0
    }
}
