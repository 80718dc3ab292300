//! The take of 100k 3-D f32 rows into three columns with their extremes and
//! finiteness (`index::take_rows`), against ways it could be done, warm and
//! cold (issue 32: the second call's take ran at twice its warm time).
//! One thread each, shared over rayon's pool in 16k-row chunks (as the take
//! is from `index::SHARED_FROM` rows), and in two halves, the second on a
//! thread asleep on a channel as the Python session's runner is. Cold: after 300 ms asleep (a session's first call
//! in between) or after reading 600 MB (evicting every cache).
//! At 50k to 1M rows; `--registered` compares columns registered with the
//! driver at 100k. `cargo run --release --example probe-take [--registered]`
use std::arch::x86_64::*;
use std::mem::MaybeUninit;
use std::time::{Duration, Instant};

use rayon::prelude::*;
use twobs::data::RowValue;

type Out<'a> = [&'a mut [MaybeUninit<f32>]; 3];
type Took = ([(f32, f32); 3], bool);
type Take = fn(&[f32], Out) -> Took;

/// The columns' deinterleave alone, as the compiler makes it.
fn scalar(rows: &[f32], [x, y, z]: Out) -> Took {
    for (i, r) in rows.chunks_exact(3).enumerate() {
        x[i].write(r[0]);
        y[i].write(r[1]);
        z[i].write(r[2]);
    }
    ([(0.0, 0.0); 3], true)
}

/// The library's take: AVX2 where the processor has it (since 7029573), else SSE2.
fn library(rows: &[f32], out: Out) -> Took {
    f32::take_three(rows, out)
}

/// Four rows in three registers, deinterleaved with five shuffles (the library's SSE2 take uses nine).
fn sse_five(rows: &[f32], [x, y, z]: Out) -> Took {
    let n = rows.len() / 3;
    let whole = n - n % 4;
    unsafe {
        let mut lo = [_mm_set1_ps(f32::INFINITY); 3];
        let mut hi = [_mm_set1_ps(f32::NEG_INFINITY); 3];
        let exponent = _mm_set1_epi32(0x7f80_0000);
        let mut bad = _mm_setzero_si128();
        let p = rows.as_ptr();
        let outs = [x.as_mut_ptr().cast::<f32>(), y.as_mut_ptr().cast(), z.as_mut_ptr().cast()];
        for i in (0..whole).step_by(4) {
            // a = x0 y0 z0 x1, b = y1 z1 x2 y2, c = z2 x3 y3 z3.
            let a = _mm_loadu_ps(p.add(3 * i));
            let b = _mm_loadu_ps(p.add(3 * i + 4));
            let c = _mm_loadu_ps(p.add(3 * i + 8));
            let t1 = _mm_shuffle_ps::<0b10_01_11_10>(b, c); // x2 y2 x3 y3
            let t2 = _mm_shuffle_ps::<0b01_00_10_01>(a, b); // y0 z0 y1 z1
            let xs = _mm_shuffle_ps::<0b10_00_11_00>(a, t1); // x0 x1 x2 x3
            let ys = _mm_shuffle_ps::<0b11_01_10_00>(t2, t1); // y0 y1 y2 y3
            let zs = _mm_shuffle_ps::<0b11_00_11_01>(t2, c); // z0 z1 z2 z3
            for (k, v) in [xs, ys, zs].into_iter().enumerate() {
                _mm_storeu_ps(outs[k].add(i), v);
                lo[k] = _mm_min_ps(v, lo[k]);
                hi[k] = _mm_max_ps(v, hi[k]);
                bad = _mm_or_si128(bad, _mm_cmpeq_epi32(_mm_and_si128(_mm_castps_si128(v), exponent), exponent));
            }
        }
        let fold =
            |v: __m128, f: fn(f32, f32) -> f32, s| std::mem::transmute::<__m128, [f32; 4]>(v).into_iter().fold(s, f);
        let lo = lo.map(|v| fold(v, f32::min, f32::INFINITY));
        let hi = hi.map(|v| fold(v, f32::max, f32::NEG_INFINITY));
        ([(lo[0], hi[0]), (lo[1], hi[1]), (lo[2], hi[2])], _mm_movemask_epi8(bad) == 0)
    }
}

/// Eight rows in three 256-bit registers: two blends and a lane permute a column.
#[target_feature(enable = "avx2")]
unsafe fn avx2_inner(rows: &[f32], [x, y, z]: Out) -> Took {
    let n = rows.len() / 3;
    let whole = n - n % 8;
    unsafe {
        let mut lo = [_mm256_set1_ps(f32::INFINITY); 3];
        let mut hi = [_mm256_set1_ps(f32::NEG_INFINITY); 3];
        let exponent = _mm256_set1_epi32(0x7f80_0000);
        let mut bad = _mm256_setzero_si256();
        let p = rows.as_ptr();
        let outs = [x.as_mut_ptr().cast::<f32>(), y.as_mut_ptr().cast(), z.as_mut_ptr().cast()];
        let px = _mm256_setr_epi32(0, 3, 6, 1, 4, 7, 2, 5);
        let py = _mm256_setr_epi32(1, 4, 7, 2, 5, 0, 3, 6);
        let pz = _mm256_setr_epi32(2, 5, 0, 3, 6, 1, 4, 7);
        for i in (0..whole).step_by(8) {
            let m0 = _mm256_loadu_ps(p.add(3 * i));
            let m1 = _mm256_loadu_ps(p.add(3 * i + 8));
            let m2 = _mm256_loadu_ps(p.add(3 * i + 16));
            let xs = _mm256_permutevar8x32_ps(_mm256_blend_ps::<0x24>(_mm256_blend_ps::<0x92>(m0, m1), m2), px);
            let ys = _mm256_permutevar8x32_ps(_mm256_blend_ps::<0x49>(_mm256_blend_ps::<0x24>(m0, m1), m2), py);
            let zs = _mm256_permutevar8x32_ps(_mm256_blend_ps::<0x92>(_mm256_blend_ps::<0x49>(m0, m1), m2), pz);
            for (k, v) in [xs, ys, zs].into_iter().enumerate() {
                _mm256_storeu_ps(outs[k].add(i), v);
                lo[k] = _mm256_min_ps(v, lo[k]);
                hi[k] = _mm256_max_ps(v, hi[k]);
                let e = _mm256_and_si256(_mm256_castps_si256(v), exponent);
                bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(e, exponent));
            }
        }
        let fold =
            |v: __m256, f: fn(f32, f32) -> f32, s| std::mem::transmute::<__m256, [f32; 8]>(v).into_iter().fold(s, f);
        let lo = lo.map(|v| fold(v, f32::min, f32::INFINITY));
        let hi = hi.map(|v| fold(v, f32::max, f32::NEG_INFINITY));
        ([(lo[0], hi[0]), (lo[1], hi[1]), (lo[2], hi[2])], _mm256_movemask_epi8(bad) == 0)
    }
}

fn avx2(rows: &[f32], out: Out) -> Took {
    unsafe { avx2_inner(rows, out) }
}

/// `take` over 16k-row chunks on rayon's pool.
fn shared(take: Take, rows: &[f32], [x, y, z]: Out) -> Took {
    const CHUNK: usize = 1 << 14;
    let parts: Vec<Took> = rows
        .par_chunks(3 * CHUNK)
        .zip(x.par_chunks_mut(CHUNK).zip(y.par_chunks_mut(CHUNK).zip(z.par_chunks_mut(CHUNK))))
        .map(|(r, (x, (y, z)))| take(r, [x, y, z]))
        .collect();
    parts
        .into_iter()
        .reduce(|a, b| (std::array::from_fn(|k| (a.0[k].0.min(b.0[k].0), a.0[k].1.max(b.0[k].1))), a.1 && b.1))
        .expect("a chunk")
}

/// A thread asleep on a channel between jobs, as the Python session's runner is.
struct Helper(std::sync::mpsc::Sender<Box<dyn FnOnce() + Send>>);

impl Helper {
    fn new() -> Helper {
        let (jobs, taken) = std::sync::mpsc::channel::<Box<dyn FnOnce() + Send>>();
        std::thread::spawn(move || {
            for job in taken {
                job();
            }
        });
        Helper(jobs)
    }
}

/// `take` in two halves: the second woken on the helper as the calling thread takes the first.
fn halves(helper: &Helper, take: Take, rows: &[f32], [x, y, z]: Out) -> Took {
    let n = rows.len() / 3;
    let half = (n / 2).next_multiple_of(8).min(n);
    let (r0, r1) = rows.split_at(3 * half);
    let (x0, x1) = x.split_at_mut(half);
    let (y0, y1) = y.split_at_mut(half);
    let (z0, z1) = z.split_at_mut(half);
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let job: Box<dyn FnOnce() + Send + '_> = Box::new(move || {
        let _ = done_tx.send(take(r1, [x1, y1, z1]));
    });
    // SAFETY: the job's borrows outlive it: this function waits for its result below.
    let job: Box<dyn FnOnce() + Send> = unsafe { std::mem::transmute(job) };
    helper.0.send(job).expect("the helper");
    let a = take(r0, [x0, y0, z0]);
    let b = loop {
        match done_rx.try_recv() {
            Ok(b) => break b,
            Err(_) => std::hint::spin_loop(),
        }
    };
    (std::array::from_fn(|k| (a.0[k].0.min(b.0[k].0), a.0[k].1.max(b.0[k].1))), a.1 && b.1)
}

/// `take` in two halves by rayon's `in_place_scope`: the calling thread
/// takes the first while a pool thread, woken for it, takes the second.
fn scope_halves(take: Take, rows: &[f32], [x, y, z]: Out) -> Took {
    let n = rows.len() / 3;
    let half = (n / 2).next_multiple_of(8).min(n);
    let (r0, r1) = rows.split_at(3 * half);
    let (x0, x1) = x.split_at_mut(half);
    let (y0, y1) = y.split_at_mut(half);
    let (z0, z1) = z.split_at_mut(half);
    let mut b = None;
    let a = rayon::in_place_scope(|s| {
        s.spawn(|_| b = Some(take(r1, [x1, y1, z1])));
        take(r0, [x0, y0, z0])
    });
    let b = b.expect("the scope ran its task");
    (std::array::from_fn(|k| (a.0[k].0.min(b.0[k].0), a.0[k].1.max(b.0[k].1))), a.1 && b.1)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    println!("avx2: {}; rayon threads {}", is_x86_feature_detected!("avx2"), rayon::current_num_threads());
    if std::env::args().any(|a| a == "--registered") {
        return registered();
    }
    let mut evict = vec![1u8; 600 << 20];
    let sizes: Vec<usize> = match std::env::args().any(|a| a == "--around-100k") {
        true => vec![100_000, 150_000],
        false => vec![50_000, 100_000, 200_000, 400_000, 1_000_000],
    };
    for n in sizes {
        println!("n = {n}");
        probe(n, &mut evict);
    }
}

/// With `--registered` (a GPU's host): the take of 100k rows into columns
/// registered with the driver (`cuMemHostRegister`, as a session's pool keeps
/// them) against plain ones, warm and after 300 ms asleep.
fn registered() {
    use cudarc::driver::{CudaContext, sys};
    let n = 100_000usize;
    let _ctx = CudaContext::new(0).expect("a GPU context");
    let mut s = 11u64;
    let rows: Vec<f32> = (0..3 * n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (s >> 40) as f32 / (1u64 << 24) as f32 * 46.4
        })
        .collect();
    for register in [false, true, false, true] {
        let mut cols: Vec<Vec<f32>> = (0..3).map(|_| vec![0.0; n]).collect();
        if register {
            for c in &cols {
                // SAFETY: the columns outlive the probe's use; the process ends without unregistering.
                let r =
                    unsafe { sys::cuMemHostRegister_v2(c.as_ptr() as *mut _, 4 * n, sys::CU_MEMHOSTREGISTER_PORTABLE) };
                r.result().expect("registering a column");
            }
        }
        for (cold, pause) in [("warm", 0u64), ("after 300 ms asleep", 300)] {
            let mut line = format!("registered {register}, {cold:>20}:");
            for (name, share) in [("avx2", false), ("avx2 shared", true), ("library shared", true)] {
                let take: Take = if name.starts_with("avx2") { avx2 } else { library };
                let mut times = Vec::new();
                for _ in 0..if pause == 0 { 50 } else { 11 } {
                    std::thread::sleep(Duration::from_millis(pause));
                    let [x, y, z] = cols.get_disjoint_mut([0, 1, 2]).unwrap();
                    let out = [as_uninit(x), as_uninit(y), as_uninit(z)];
                    let t = Instant::now();
                    std::hint::black_box(if share { shared(take, &rows, out) } else { take(&rows, out) });
                    times.push(t.elapsed().as_secs_f64() * 1e6);
                }
                line += &format!(" {name} {:.0}", median(times));
            }
            println!("{line} (medians, us)");
        }
    }
    for path in ["/sys/kernel/mm/transparent_hugepage/enabled", "/sys/kernel/mm/transparent_hugepage/defrag"] {
        println!("{path}: {}", std::fs::read_to_string(path).unwrap_or_else(|e| e.to_string()).trim());
    }
}

fn probe(n: usize, evict: &mut [u8]) {
    let mut s = 7u64;
    let rows: Vec<f32> = (0..3 * n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (s >> 40) as f32 / (1u64 << 24) as f32 * 46.4
        })
        .collect();
    let mut cols: Vec<Vec<f32>> = (0..3).map(|_| vec![0.0; n]).collect();
    let mut copy = vec![0f32; 3 * n];
    let has_avx2 = is_x86_feature_detected!("avx2");
    let helper = Helper::new();
    let takes: Vec<(&str, Take)> = {
        let mut t: Vec<(&str, Take)> =
            vec![("scalar deinterleave", scalar), ("library", library), ("sse2, 5 shuffles", sse_five)];
        if has_avx2 {
            t.push(("avx2", avx2));
        }
        t
    };
    let reference = library(&rows, {
        let [x, y, z] = cols.get_disjoint_mut([0, 1, 2]).unwrap();
        [as_uninit(x), as_uninit(y), as_uninit(z)]
    });
    let wanted: Vec<Vec<f32>> = cols.clone();
    for (cold, pause) in [("warm", 0usize), ("after 300 ms asleep", 1), ("after reading 600 MB", 2)] {
        let rounds = if pause == 0 { 50 } else { 9 };
        let mut before = || match pause {
            1 => std::thread::sleep(Duration::from_millis(300)),
            2 => {
                let mut sum = 0u64;
                for k in (0..evict.len()).step_by(64) {
                    sum = sum.wrapping_add(evict[k] as u64);
                    evict[k] = sum as u8;
                }
                std::hint::black_box(sum);
            }
            _ => {}
        };
        let mut line = format!("{cold:>22}:");
        let mut times = Vec::new();
        for _ in 0..rounds {
            before();
            let t = Instant::now();
            copy.copy_from_slice(&rows);
            std::hint::black_box(&copy);
            times.push(t.elapsed().as_secs_f64() * 1e6);
        }
        line += &format!(" memcpy {:.0}", median(times));
        for (name, take) in &takes {
            for share in [0, 1, 2, 3] {
                let mut times = Vec::new();
                for _ in 0..rounds {
                    before();
                    let [x, y, z] = cols.get_disjoint_mut([0, 1, 2]).unwrap();
                    let out = [as_uninit(x), as_uninit(y), as_uninit(z)];
                    let t = Instant::now();
                    let took = match share {
                        0 => take(&rows, out),
                        1 => shared(*take, &rows, out),
                        2 => halves(&helper, *take, &rows, out),
                        _ => scope_halves(*take, &rows, out),
                    };
                    times.push(t.elapsed().as_secs_f64() * 1e6);
                    if *name != "scalar deinterleave" {
                        assert_eq!(took, reference, "{name}");
                    }
                    assert!(cols == wanted, "{name}: the columns");
                }
                line += &format!(", {name}{} {:.0}", ["", " shared", " halves", " scope halves"][share], median(times));
            }
        }
        println!("{line} (medians of {rounds}, us)");
    }
}

fn as_uninit(v: &mut [f32]) -> &mut [MaybeUninit<f32>] {
    // SAFETY: f32 and MaybeUninit<f32> have one layout; only f32 values are written.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast(), v.len()) }
}
