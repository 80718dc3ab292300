//! What a parallel step costs to start on this machine: 16 (all cores)
//! scoped threads spawned and joined, against one rayon scope with as many
//! tasks; and the extremes of 3M floats on every core against one.
//! On the H200 host: 0.38-0.44 ms per scoped spawn, 22-33 us per rayon scope.
//!
//! Build: `cargo build --release --example probe-spawn-cost`; run
//! `target/release/examples/probe-spawn-cost` on the machine in question.
use std::time::Instant;

fn main() {
    let n = std::thread::available_parallelism().map_or(1, |t| t.get());
    let v: Vec<f32> = (0..3_000_000).map(|i| (i % 1000) as f32).collect();
    for round in 0..3 {
        let t = Instant::now();
        for _ in 0..50 {
            std::thread::scope(|s| {
                for _ in 0..n {
                    s.spawn(|| std::hint::black_box(1));
                }
            });
        }
        let spawn = t.elapsed().as_secs_f64() / 50.0;
        let t = Instant::now();
        for _ in 0..50 {
            rayon::scope(|s| {
                for _ in 0..n {
                    s.spawn(|_| {
                        std::hint::black_box(1);
                    });
                }
            });
        }
        let pool = t.elapsed().as_secs_f64() / 50.0;
        let t = Instant::now();
        let per = v.len().div_ceil(n);
        let most: f32 = std::thread::scope(|s| {
            let h: Vec<_> = v.chunks(per).map(|c| s.spawn(move || c.iter().fold(0f32, |a, &x| a.max(x)))).collect();
            h.into_iter().map(|h| h.join().expect("a thread")).fold(0f32, f32::max)
        });
        let spread = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let most_serial: f32 = v.iter().fold(0f32, |a, &x| a.max(x));
        let serial = t.elapsed().as_secs_f64();
        assert_eq!(most, most_serial);
        println!(
            "round {round}: {n} threads: scoped spawn {:.1} us, rayon scope {:.1} us; max of 3M floats on every core {:.2} ms, on one {:.2} ms",
            spawn * 1e6,
            pool * 1e6,
            spread * 1e3,
            serial * 1e3
        );
    }
}
