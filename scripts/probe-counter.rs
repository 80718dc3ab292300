//! What sharing a run between MPI ranks costs (issue 34), for the model in
//! docs/performance.md: how many places a second the counter on rank 0
//! hands out when the other ranks' threads ask as fast as they can (rank 0's
//! own threads, which take from its atomic at no cost, stay out: they would
//! take most places before the others' first answers), one request's round
//! trip, and rank 0's gather and merge of every rank's histogram (500
//! buckets of u64).
//!
//!     cargo build --release --features mpi --example probe-counter
//!     mpiexec -n 2 target/release/examples/probe-counter [THREADS]

use std::time::Instant;

use twobs::outcome::Totals;
use twobs::ranks::mpi::World;
use twobs::ranks::{self, Counter, Ranks};
use twobs::stage::output::Partial;

fn main() {
    let world = World::start().expect("MPI starts");
    let threads: usize = std::env::args().nth(1).and_then(|t| t.parse().ok()).unwrap_or(1);
    const PLACES: u64 = 200_000;
    let start = Instant::now();
    let counter = world.counter();
    let taken: Vec<(u64, f64)> = std::thread::scope(|s| {
        let askers = if world.rank() == 0 { 0 } else { threads };
        let hs: Vec<_> = (0..askers)
            .map(|_| {
                let c: &dyn Counter = &*counter;
                s.spawn(move || {
                    let (mut n, t) = (0u64, Instant::now());
                    while c.next() < PLACES {
                        n += 1;
                    }
                    (n, t.elapsed().as_secs_f64())
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    drop(counter);
    let counter_s = start.elapsed().as_secs_f64();
    let mine: u64 = taken.iter().map(|t| t.0).sum();
    let busy: f64 = taken.iter().map(|t| t.1).fold(0.0, f64::max);
    let line = format!(
        "rank {}: {mine} places in {busy:.3} s ({:.2} us a request and its answer, {threads} thread(s) asking)",
        world.rank(),
        1e6 * busy * threads as f64 / mine.max(1) as f64
    );
    // Rank 0's merge: every rank's 500-bucket histogram, 100 times.
    let histogram = vec![(world.rank() as u64, Partial::Totals(Totals::Counts(vec![7; 500])))];
    let start = Instant::now();
    for _ in 0..100 {
        if let Some(all) = world.gather(ranks::encode(&histogram)) {
            let parts = all.iter().map(|b| ranks::decode(b).unwrap()).collect();
            let mut sum = Totals::Counts(vec![0; 500]);
            for p in ranks::in_order(parts) {
                if let Partial::Totals(t) = p {
                    sum.add(&t);
                }
            }
            assert_eq!(sum, Totals::Counts(vec![7 * world.size() as u64; 500]));
        }
    }
    let gather_s = start.elapsed().as_secs_f64() / 100.0;
    let lines = world.gather(line.into_bytes());
    if let Some(lines) = lines {
        for l in lines {
            println!("{}", String::from_utf8_lossy(&l));
        }
        println!(
            "{} ranks ({} asking, {threads} thread(s) each): {PLACES} places in {counter_s:.3} s ({:.0} places/s); gather and merge of {} histograms of 500 buckets: {:.3} ms",
            world.size(),
            world.size() - 1,
            PLACES as f64 / counter_s,
            world.size(),
            1e3 * gather_s
        );
    }
}
