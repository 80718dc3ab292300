//! Where a run's host time goes before the GPU starts, for a session's call:
//! the shapes, the range check (from the shapes' ranges) and the schedule, timed on this machine for a
//! described H200 (no GPU needed). `cargo run --release --example probe-call-overhead`
use std::time::Instant;

use twobs::data::{Column, Inputs, PointSet};
use twobs::index::{IndexChoice, Shapes};
use twobs::schedule::{GpuOptions, Hybrid, Schedule, Workers};

fn main() {
    take_rows_alone();
    if std::env::args().any(|a| a == "--take-alone") {
        return;
    }
    take_rows();
    kernel_keys();
    gpu_lookups();
    let rdf = twobs::problems::built_in("rdf").expect("rdf");
    let rdf_params = rdf.bind(&["bins=100".into(), "r_max=5".into(), "box=46.4".into()]).expect("params");
    let knn = twobs::problems::built_in("knn").expect("knn");
    let knn_params = knn.bind(&["k=16".into()]).expect("params");
    let cases = [(&rdf, &rdf_params, 100_000usize), (&rdf, &rdf_params, 1_000_000), (&knn, &knn_params, 1_000_000)];
    for (problem, params, n) in cases {
        let (problem, params): (&twobs::spec::Problem, _) = (problem, params);
        let mut state = 12345u64;
        let mut next = || {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 40) as f32 / (1u64 << 24) as f32 * 46.4
        };
        let columns = (0..3).map(|_| Column::F32((0..n).map(|_| next()).collect())).collect();
        let inputs = Inputs { a: PointSet { columns, origin: "probe".into(), rows: None }, b: None };
        let h200 = twobs::device::Device::profile("h200").expect("h200");
        let workers = Workers::described(&h200, 1, 141 << 30, 2, 16);
        let opts = two_streams();
        for round in 0..3 {
            // As a run reads them: the shapes once, the range check from their ranges.
            let t = Instant::now();
            let shapes = Shapes::of(&inputs);
            let t_shapes = t.elapsed();
            let t = Instant::now();
            let spread = twobs::data::Spread::with_ranges(&inputs.a, shapes.a.ranges.clone());
            let range = twobs::data::f32_range_of(problem, params, &[spread]);
            let t_range = t.elapsed();
            let t = Instant::now();
            let schedule =
                Schedule::make(problem, params, &shapes, IndexChoice::Auto, &opts, &workers).expect("schedule");
            let t_schedule = t.elapsed();
            let t = Instant::now();
            let probe = twobs::codegen::render_probe(problem, params, twobs::stage::Test::Keys);
            let t_probe = t.elapsed();
            println!(
                "{} n={n} round {round}: range {:?} ({range:?}), shapes {:?}, schedule {:?} ({} GPUs), FP probe rendered {:?} ({} bytes)",
                problem.name,
                t_range,
                t_shapes,
                t_schedule,
                schedule.gpus,
                t_probe,
                probe.source.len()
            );
        }
        // As a run on points already on the GPU schedules (the GPU alone, `run::execute_on_gpu`).
        let alone = GpuOptions { hybrid: Hybrid::Off, ..opts };
        let shapes = Shapes::of(&inputs);
        for round in 0..5 {
            let t = Instant::now();
            let schedule =
                Schedule::make(problem, params, &shapes, IndexChoice::Auto, &alone, &workers).expect("schedule");
            println!(
                "{} n={n} round {round}: schedule of the GPU alone {:?} ({:?})",
                problem.name,
                t.elapsed(),
                schedule.indexing.layout().map(|l| l.cells)
            );
        }
    }
}

/// A numpy array's rows taken into columns and measured in one pass
/// (`index::take_rows`, as a Python call takes them), against the passes it
/// replaced: a copy (here a plain one, pushed row by row), then the
/// extremes, finiteness and sample (`Shapes::of`, with a clone of the set).
fn take_rows() {
    for n in [100_000usize, 1_000_000] {
        let mut state = 7u64;
        let rows: Vec<f32> = (0..3 * n)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (state >> 40) as f32 / (1u64 << 24) as f32 * 46.4
            })
            .collect();
        let mut kept: Vec<Vec<f32>> = (0..3).map(|_| Vec::with_capacity(n)).collect();
        for round in 0..6 {
            let t = Instant::now();
            let mut copy: Vec<Vec<f32>> = std::mem::take(&mut kept);
            for c in copy.iter_mut() {
                c.clear();
            }
            for row in rows.chunks_exact(3) {
                for (c, &x) in copy.iter_mut().zip(row) {
                    c.push(x);
                }
            }
            let plain = t.elapsed();
            let t = Instant::now();
            let taken = twobs::index::take_rows(&rows, n, copy, "probe");
            let one_pass = t.elapsed();

            let t = Instant::now();
            let shape = Shapes::of(&Inputs { a: taken.set.clone(), b: None });
            let finite = taken.set.columns.iter().all(|c| c.min_max().1.is_finite());
            let passes = t.elapsed();
            assert_eq!(shape.a.ranges, taken.shape.ranges);
            println!(
                "take_rows n={n} round {round}: one pass {one_pass:?}; a plain copy {plain:?}; the extremes and sample again {passes:?} ({finite})"
            );
            kept = f32_columns(taken.set.columns);
        }
    }
}

/// What naming a run's kernel costs (a session's call looks its kernels up
/// by the problem's printed form): the print, and its hash.
fn kernel_keys() {
    let rdf = twobs::problems::built_in("rdf").expect("rdf");
    for round in 0..5 {
        let t = Instant::now();
        let printed = format!("{rdf:?}");
        let print = t.elapsed();
        let t = Instant::now();
        let key = twobs::cache::Key::of(&[printed.as_bytes()]);
        let hash = t.elapsed();
        let t = Instant::now();
        let digest = <sha2::Sha256 as sha2::Digest>::digest(printed.as_bytes());
        println!("kernel key round {round}: SHA-256 of the printed problem {:?} ({:02x})", t.elapsed(), digest[0]);
        println!("kernel key round {round}: print {print:?} ({} bytes), hash {hash:?} ({})", printed.len(), key.hex());
    }
    // What each kernel's lookup prints besides the problem: the parameters' key and the GPU.
    let params = rdf.bind(&["bins=100".into(), "r_max=5".into(), "box=46.4".into()]).expect("params");
    let h200 = twobs::device::Device::profile("h200").expect("h200");
    for round in 0..5 {
        let t = Instant::now();
        let code = params.code_key();
        let code_s = t.elapsed();
        let t = Instant::now();
        let dev = format!("{h200:?}");
        let dev_s = t.elapsed();
        println!(
            "kernel lookup round {round}: params' key {code_s:?} ({} bytes), the GPU printed {dev_s:?} ({} bytes)",
            code.len(),
            dev.len()
        );
    }
}

/// What a GPU run's first steps cost where a GPU is usable: finding the
/// GPUs as a schedule sees them, each call (a session's calls repeat it).
fn gpu_lookups() {
    use twobs::backend::cuda;
    if let Err(e) = cuda::usable() {
        println!("gpu lookups: no GPU ({e})");
        return;
    }
    let opts = two_streams();
    for round in 0..6 {
        let t = Instant::now();
        cuda::usable().expect("usable");
        let usable = t.elapsed();
        let t = Instant::now();
        let gpus = cuda::gpus(&opts).expect("gpus");
        let found = t.elapsed();
        let t = Instant::now();
        let dev = cuda::live_device(0).expect("device 0");
        let live = t.elapsed();
        println!(
            "gpu lookups round {round}: usable {usable:?}, gpus {found:?} ({} of them), live_device {live:?} ({})",
            gpus.ordinals.len(),
            dev.name
        );
    }
}

/// One thread's take of 100k 3-D rows (f32 and f64), against a plain memcpy of
/// the same bytes: what a call pays where the pool's threads are asleep.
/// The first rounds, then the least and the median of 50 (a loaded machine's noise is all upward).
fn take_rows_alone() {
    fn rounds<T: twobs::data::RowValue + Default>(
        rows: &[T],
        n: usize,
        one: &rayon::ThreadPool,
        back: fn(Column) -> Vec<T>,
    ) {
        let mut kept: Vec<Vec<T>> = (0..3).map(|_| Vec::with_capacity(n)).collect();
        let mut copy = vec![T::default(); 3 * n];
        let (mut takes, mut copies) = (Vec::new(), Vec::new());
        for _ in 0..50 {
            let t = Instant::now();
            let taken = one.install(|| twobs::index::take_rows(rows, n, std::mem::take(&mut kept), "probe"));
            takes.push(t.elapsed());
            let t = Instant::now();
            copy.copy_from_slice(rows);
            copies.push(t.elapsed());
            std::hint::black_box(&copy);
            kept = taken.set.columns.into_iter().map(back).collect();
        }
        let first: Vec<_> = takes[..3].to_vec();
        takes.sort();
        copies.sort();
        println!(
            "take_rows alone n={n} {}: one thread first {first:?}, least {:?}, median {:?}; memcpy of the rows least {:?}, median {:?}",
            std::any::type_name::<T>(),
            takes[0],
            takes[25],
            copies[0],
            copies[25]
        );
    }
    let n = 100_000usize;
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("a pool of one");
    let rows: Vec<f32> = (0..3 * n).map(|i| (i as f32 * 0.37).sin() * 46.4).collect();
    rounds(&rows, n, &one, |c| match c {
        Column::F32(v) => v,
        _ => unreachable!("f32 rows make f32 columns"),
    });
    let rows: Vec<f64> = rows.iter().map(|&x| f64::from(x)).collect();
    rounds(&rows, n, &one, |c| match c {
        Column::F64(v) => v,
        _ => unreachable!("f64 rows make f64 columns"),
    });
    here_or_shared();
}

/// 3-D f32 rows taken on the calling thread or shared by the global pool's
/// threads (as a Python call takes them), back to back and after a pause
/// of 20 ms (the pool's threads asleep, as after a first call's NVRTC):
/// medians of 15 rounds, in us.
fn here_or_shared() {
    for n in [50_000usize, 100_000, 200_000, 400_000, 1_000_000] {
        let rows: Vec<f32> = (0..3 * n).map(|i| (i as f32 * 0.37).sin() * 46.4).collect();
        let mut line = format!("take_rows n={n}:");
        for (name, shared_from) in [("here", usize::MAX), ("shared", 0)] {
            for pause in [0u64, 20] {
                let mut kept: Vec<Vec<f32>> = (0..3).map(|_| Vec::with_capacity(n)).collect();
                let mut took = Vec::new();
                for _ in 0..15 {
                    std::thread::sleep(std::time::Duration::from_millis(pause));
                    let t = Instant::now();
                    let taken =
                        twobs::index::take_rows_shared_from(&rows, n, std::mem::take(&mut kept), "probe", shared_from);
                    took.push(t.elapsed().as_secs_f64() * 1e6);
                    kept = f32_columns(taken.set.columns);
                }
                took.sort_by(f64::total_cmp);
                line += &format!(" {name} after {pause} ms {:.0},", took[7]);
            }
        }
        println!("{line} (medians, us; SHARED_FROM = {})", twobs::index::SHARED_FROM);
    }
}

/// A session's GPU options: every GPU, two streams, the CPU beside them where it helps.
fn two_streams() -> GpuOptions {
    GpuOptions { streams: 2, hybrid: Hybrid::Auto, ..Default::default() }
}

/// The f32 columns a take filled, as buffers to fill again.
fn f32_columns(columns: Vec<Column>) -> Vec<Vec<f32>> {
    columns
        .into_iter()
        .map(|c| match c {
            Column::F32(v) => v,
            _ => unreachable!("the probe takes f32 rows"),
        })
        .collect()
}
