//! The one room that calls MPI (rsmpi): the world of a run started by
//! `mpiexec` or `srun`, its shared counters, and the trips of bytes to and
//! from rank 0.
//!
//! A counter lives on rank 0. There, a thread of its own answers the other
//! ranks' requests (its probes keep MPI's progress going while rank 0's own
//! threads compute; it probes without rest for [`SPIN`] after a request,
//! which keeps up with requests in a burst, and sleeps [`IDLE`] between
//! probes after that, where a blocking receive would spin a core that a CPU
//! run's threads need), and rank 0's threads take from the same atomic
//! directly. Another rank's threads ask one at a time: a
//! request, then its answer. Messages of one counter carry tags of its own,
//! so counters of successive lists (frames) never mix.

use std::sync::Mutex;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::thread::JoinHandle;

use mpi::Threading;
use mpi::environment::Universe;
use mpi::point_to_point::{Destination, Source};
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::Root;

use super::{Counter, Ranks};

/// A request for the next position, and a rank's word that it has stopped asking.
const ASK: u64 = 0;
const DONE: u64 = 1;

/// How long the counter's server sleeps after a probe that found no request,
/// once [`SPIN`] has passed without one: a piece of work is milliseconds, an
/// answer this much later costs nothing.
const IDLE: std::time::Duration = std::time::Duration::from_micros(20);

/// How long after a request the counter's server probes without sleeping.
const SPIN: std::time::Duration = std::time::Duration::from_micros(500);

/// Bytes a message carries at most (MPI counts in 32-bit integers).
const MESSAGE_BYTES: usize = 1 << 30;

/// MPI's world, initialized with threads (a counter's server runs beside the run's threads).
pub struct World {
    _universe: Universe,
    rank: usize,
    size: usize,
    /// Counters made so far: each takes tags of its own.
    counters: AtomicI32,
}

// SAFETY: MPI is initialized with MPI_THREAD_MULTIPLE (checked in `start`),
// so any thread may call it; the universe is only dropped (finalized) by
// its owner, after every thread that used it has ended.
unsafe impl Send for World {}
unsafe impl Sync for World {}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("MPI could not be initialized (was it already?)")]
    Init,
    #[error(
        "this MPI library offers threads at level {0:?}, and twobs needs Multiple (a thread answers the other ranks while the run computes); use an MPI built with thread support (MPICH and Open MPI are)"
    )]
    Threading(Threading),
}

impl World {
    /// Initializes MPI.
    pub fn start() -> Result<World, StartError> {
        let (universe, threading) = mpi::initialize_with_threading(Threading::Multiple).ok_or(StartError::Init)?;
        if threading != Threading::Multiple {
            return Err(StartError::Threading(threading));
        }
        let world = universe.world();
        Ok(World { rank: world.rank() as usize, size: world.size() as usize, _universe: universe, counters: 0.into() })
    }
}

fn world() -> SimpleCommunicator {
    SimpleCommunicator::world()
}

impl Ranks for World {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn host(&self) -> String {
        mpi::environment::processor_name().unwrap_or_else(|_| "?".into())
    }

    fn counter(&self) -> Box<dyn Counter + '_> {
        // Tags 100, 101 for the first counter, 102, 103 for the next...
        let tag = 100 + 2 * self.counters.fetch_add(1, Ordering::Relaxed);
        if self.rank != 0 {
            return Box::new(Client { tag, lock: Mutex::new(()) });
        }
        let next = std::sync::Arc::new(AtomicU64::new(0));
        let others = self.size - 1;
        let served = next.clone();
        let server = std::thread::spawn(move || {
            let world = world();
            let (mut done, mut last) = (0, std::time::Instant::now());
            while done < others {
                let Some((message, _)) = world.any_process().immediate_matched_probe_with_tag(tag) else {
                    if last.elapsed() > SPIN {
                        std::thread::sleep(IDLE);
                    }
                    continue;
                };
                last = std::time::Instant::now();
                let (word, status) = message.matched_receive::<u64>();
                match word {
                    DONE => done += 1,
                    _ => {
                        let k = served.fetch_add(1, Ordering::Relaxed);
                        world.process_at_rank(status.source_rank()).send_with_tag(&k, tag + 1);
                    }
                }
            }
        });
        Box::new(Served { next, server: Some(server) })
    }

    fn gather(&self, mine: Vec<u8>) -> Option<Vec<Vec<u8>>> {
        let world = world();
        const TAG: i32 = 90;
        if self.rank != 0 {
            send(&world.process_at_rank(0), &mine, TAG);
            return None;
        }
        let mut all = vec![mine];
        for r in 1..self.size {
            all.push(receive(&world.process_at_rank(r as i32), TAG));
        }
        Some(all)
    }

    fn broadcast(&self, bytes: Option<Vec<u8>>) -> Vec<u8> {
        let world = world();
        let root = world.process_at_rank(0);
        let mut len = bytes.as_ref().map_or(0, |b| b.len() as u64);
        root.broadcast_into(&mut len);
        let mut out = if self.rank == 0 { bytes.unwrap_or_default() } else { vec![0u8; len as usize] };
        for chunk in out.chunks_mut(MESSAGE_BYTES) {
            root.broadcast_into(chunk);
        }
        out
    }

    fn abort(&self, code: i32) -> ! {
        world().abort(code)
    }
}

/// Sends `bytes` in messages of at most `MESSAGE_BYTES`, their count first.
fn send(to: &mpi::topology::Process<'_>, bytes: &[u8], tag: i32) {
    to.send_with_tag(&(bytes.len() as u64), tag);
    for chunk in bytes.chunks(MESSAGE_BYTES) {
        to.send_with_tag(chunk, tag);
    }
}

fn receive(from: &mpi::topology::Process<'_>, tag: i32) -> Vec<u8> {
    let (len, _) = from.receive_with_tag::<u64>(tag);
    let mut out = vec![0u8; len as usize];
    for chunk in out.chunks_mut(MESSAGE_BYTES) {
        from.receive_into_with_tag(chunk, tag);
    }
    out
}

/// Rank 0's side of a counter: its own threads take from the atomic, its
/// server thread answers the others.
struct Served {
    next: std::sync::Arc<AtomicU64>,
    server: Option<JoinHandle<()>>,
}

impl Counter for Served {
    fn next(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }
}

impl Drop for Served {
    /// Waits until every other rank has stopped asking.
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            server.join().expect("the counter's server thread panicked");
        }
    }
}

/// Another rank's side: one request at a time, answered by rank 0.
struct Client {
    tag: i32,
    lock: Mutex<()>,
}

impl Counter for Client {
    fn next(&self) -> u64 {
        let _one_at_a_time = self.lock.lock().expect("counter lock");
        let world = world();
        let root = world.process_at_rank(0);
        root.send_with_tag(&ASK, self.tag);
        root.receive_with_tag::<u64>(self.tag + 1).0
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        world().process_at_rank(0).send_with_tag(&DONE, self.tag);
    }
}
