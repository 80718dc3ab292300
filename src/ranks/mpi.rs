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
//!
//! No rank waits in a blocking MPI call: MPICH's blocking receives,
//! sends and broadcasts poll, and would hold a core that the CPU backend's
//! threads (or another rank on the node) need for as long as they wait
//! (rank 1 waiting for rank 0 to read the inputs: seconds). Every wait
//! probes, or tests a nonblocking request, without rest for [`WAIT_SPIN`]
//! and then sleeps between tries, doubling the sleep from [`IDLE`] up to a
//! bound ([`wait_for`]); `bench/rank-wait.sh` measures a waiting
//! rank's CPU time.
//!
//! Every message goes over a communicator of twobs's own, a duplicate of
//! MPI's world (the command line) or of a caller's (the Python package's
//! `comm=`, an mpi4py communicator): a caller's own messages on theirs never
//! meet twobs's.

use std::sync::Mutex;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::thread::JoinHandle;

use std::mem::ManuallyDrop;

use mpi::Threading;
use mpi::environment::Universe;
use mpi::ffi::MPI_Comm;
use mpi::point_to_point::{Destination, MatchedReceiveVec, Source};
use mpi::raw::{AsRaw, FromRaw};
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::Root;

use super::{Carried, Counter, Ranks, Resolver, RowsOfPlaces};
use std::sync::Arc;

/// A request for the next position, and a rank's word that it has stopped asking.
const ASK: u64 = 0;
const DONE: u64 = 1;

/// How long the counter's server sleeps after a probe that found no request,
/// once [`SPIN`] has passed without one: a piece of work is milliseconds, an
/// answer this much later costs nothing.
const IDLE: std::time::Duration = std::time::Duration::from_micros(20);

/// How long after a request the counter's server probes without sleeping.
const SPIN: std::time::Duration = std::time::Duration::from_micros(500);

/// How long a waiting rank probes without sleeping before it sleeps
/// between probes: an answer from rank 0's server, which is probing
/// without rest itself, comes within this.
const WAIT_SPIN: std::time::Duration = std::time::Duration::from_micros(50);

/// The longest sleep between a counter's tries: an answer this late costs
/// a piece of work (milliseconds) nothing.
const ANSWER_SLEEP: std::time::Duration = std::time::Duration::from_micros(200);

/// The longest sleep between the tries of a wait for a broadcast or a
/// gather (rank 0 reading the inputs, a rank finishing its last piece).
const LONG_SLEEP: std::time::Duration = std::time::Duration::from_millis(2);

/// `poll`'s first value, tried without rest for [`WAIT_SPIN`], then after
/// sleeps that double from [`IDLE`] up to `most`: a rank waits without
/// holding a core (MPICH's blocking calls poll).
fn wait_for<T>(most: std::time::Duration, mut poll: impl FnMut() -> Option<T>) -> T {
    let start = std::time::Instant::now();
    let mut rest = IDLE;
    loop {
        if let Some(t) = poll() {
            return t;
        }
        if start.elapsed() < WAIT_SPIN {
            std::hint::spin_loop();
            continue;
        }
        std::thread::sleep(rest);
        rest = (rest * 2).min(most);
    }
}

/// Waits for a nonblocking request as [`wait_for`] does.
fn finish<'a, D: ?Sized, S: mpi::request::Scope<'a>>(
    request: mpi::request::Request<'a, D, S>,
    most: std::time::Duration,
) {
    let mut pending = Some(request);
    wait_for(most, || match pending.take().expect("a pending request").test() {
        Ok(_) => Some(()),
        Err(still) => {
            pending = Some(still);
            None
        }
    })
}

/// A message of `tag` from `from`, received once a probe finds it ([`wait_for`]).
fn receive_waiting<T: mpi::datatype::Equivalence>(
    from: &mpi::topology::Process<'_>,
    tag: i32,
    most: std::time::Duration,
) -> Vec<T> {
    let probed = wait_for(most, || from.immediate_matched_probe_with_tag(tag));
    probed.matched_receive_vec::<T>().0
}

/// Bytes a message carries at most (MPI counts in 32-bit integers).
const MESSAGE_BYTES: usize = 1 << 30;

/// Tags a world's counters cycle through (two each): successive counters
/// differ, and a session's thousands of runs stay below MPI's least tag bound (32767).
const COUNTER_TAGS: i32 = 10_000;

/// The ranks of a run over a communicator of twobs's own (a duplicate,
/// freed on drop), with MPI at the thread level of `MPI_THREAD_MULTIPLE`
/// (a counter's server runs beside the run's threads).
pub struct World {
    /// The duplicate every message of twobs goes over.
    comm: MPI_Comm,
    /// MPI itself where this world initialized it (finalized on drop, after
    /// the duplicate is freed); None where a caller (mpi4py) did.
    _universe: Option<Universe>,
    rank: usize,
    size: usize,
    /// Counters made so far: each takes tags of its own.
    counters: AtomicI32,
}

// SAFETY: MPI runs at MPI_THREAD_MULTIPLE (checked in `start` and
// `from_fortran`), so any thread may call it; the communicator is freed and
// the universe finalized only by their owner, after every thread that used
// them has ended.
unsafe impl Send for World {}
unsafe impl Sync for World {}

impl Drop for World {
    fn drop(&mut self) {
        // The duplicate before MPI is finalized (the universe's drop, after
        // this); a caller's MPI may be finalized already (mpi4py's atexit
        // runs before Python drops a module's sessions), and then it is gone with it.
        if !mpi::environment::is_finalized() {
            drop(unsafe { SimpleCommunicator::from_raw(self.comm) });
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("MPI could not be initialized (was it already?)")]
    Init,
    #[error(
        "this MPI library offers threads at level {0:?}, and twobs needs Multiple (a thread answers the other ranks while the run computes); use an MPI built with thread support (MPICH and Open MPI are)"
    )]
    Threading(Threading),
    #[error(
        "MPI was initialized at the thread level {0:?}, and twobs needs Multiple (a thread answers the other ranks while the run computes): set `mpi4py.rc.thread_level = \"multiple\"` (mpi4py's default) before `from mpi4py import MPI`"
    )]
    CallersThreading(Threading),
    #[error(
        "the communicator is of another MPI library than twobs's: mpi4py runs on {theirs:?}, twobs was built against {ours:?}; build mpi4py against twobs's MPI (`MPICC=mpicc pip install --no-binary=mpi4py mpi4py`), or twobs against mpi4py's"
    )]
    OtherLibrary { theirs: String, ours: String },
    #[error(
        "MPI is not initialized in twobs's MPI library ({ours:?}): mpi4py did not initialize it (`mpi4py.rc.initialize = False`, and no `MPI.Init_thread()` yet), or it runs on another copy of the library"
    )]
    NotInitialized { ours: String },
    #[error(
        "the communicator's handle {handle} reads as rank {found_rank} of {found_size} in twobs's MPI, but mpi4py says rank {rank} of {size}: the two link different MPI libraries, or the handle is not of this communicator"
    )]
    OtherHandle { handle: i64, rank: usize, size: usize, found_rank: usize, found_size: usize },
    #[error("the communicator's handle {handle} is MPI_COMM_NULL in twobs's MPI: this process is in no group of it")]
    Null { handle: i64 },
}

/// The MPI library twobs was built against, as it names itself.
pub fn library() -> String {
    mpi::environment::library_version().unwrap_or_else(|_| "?".into()).trim().to_owned()
}

impl World {
    /// Initializes MPI; the run's ranks are its world's.
    pub fn start() -> Result<World, StartError> {
        let (universe, threading) = mpi::initialize_with_threading(Threading::Multiple).ok_or(StartError::Init)?;
        if threading != Threading::Multiple {
            return Err(StartError::Threading(threading));
        }
        let own = universe.world().duplicate();
        let (rank, size) = (own.rank() as usize, own.size() as usize);
        Ok(World { comm: ManuallyDrop::new(own).as_raw(), _universe: Some(universe), rank, size, counters: 0.into() })
    }

    /// The ranks of a caller's communicator, given by its Fortran handle
    /// (mpi4py's `comm.py2f()`, the same integer in every MPI), with the
    /// rank, size and MPI library the caller's side reads for it: a handle
    /// of another MPI library is refused, not used. Collective (it
    /// duplicates the communicator): every rank of it calls.
    pub fn from_fortran(handle: i64, rank: usize, size: usize, theirs: &str) -> Result<World, StartError> {
        let ours = library();
        if theirs.trim() != ours {
            return Err(StartError::OtherLibrary { theirs: theirs.trim().to_owned(), ours });
        }
        if !mpi::environment::is_initialized() {
            return Err(StartError::NotInitialized { ours });
        }
        let threading = mpi::environment::threading_support();
        if threading != Threading::Multiple {
            return Err(StartError::CallersThreading(threading));
        }
        // SAFETY: MPI is initialized; f2c of any integer gives a handle or
        // MPI_COMM_NULL, and the caller's rank and size are checked on it
        // before it is used further.
        let raw = unsafe { mpi::ffi::RSMPI_Comm_f2c(handle as mpi::ffi::RSMPI_Fint) };
        // rsmpi names the built-in communicators itself, and wraps only others.
        let theirs = unsafe {
            match raw {
                r if r == mpi::ffi::RSMPI_COMM_NULL => return Err(StartError::Null { handle }),
                r if r == mpi::ffi::RSMPI_COMM_WORLD => ManuallyDrop::new(SimpleCommunicator::world()),
                r if r == mpi::ffi::RSMPI_COMM_SELF => ManuallyDrop::new(SimpleCommunicator::self_comm()),
                r => ManuallyDrop::new(SimpleCommunicator::from_raw(r)),
            }
        };
        let (found_rank, found_size) = (theirs.rank() as usize, theirs.size() as usize);
        if (found_rank, found_size) != (rank, size) {
            return Err(StartError::OtherHandle { handle, rank, size, found_rank, found_size });
        }
        let own = ManuallyDrop::new(theirs.duplicate());
        Ok(World { comm: own.as_raw(), _universe: None, rank, size, counters: 0.into() })
    }

    /// A view of the run's communicator (not freed when dropped).
    fn comm(&self) -> ManuallyDrop<SimpleCommunicator> {
        view(self.comm)
    }

    /// The first of a new counter's two tags: 100 (and 101) for the first counter, 102 for the next...
    fn next_tag(&self) -> i32 {
        100 + 2 * (self.counters.fetch_add(1, Ordering::Relaxed) % COUNTER_TAGS)
    }
}

/// Rank 0's answers to the `others` ranks' requests on counter `tag`, until
/// each has said it stopped: the next position of `next`, and after it
/// the rows of A it reads where the counter carries them.
fn serve(raw: Raw, tag: i32, others: usize, next: &AtomicU64, rows: Option<&RowsOfPlaces<'_>>) {
    let world = view(raw.0);
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
                let k = next.fetch_add(1, Ordering::Relaxed);
                let to = world.process_at_rank(status.source_rank());
                match rows {
                    None => to.send_with_tag(&k, tag + 1),
                    // One message: the place, then its rows (a CPU piece's: kilobytes; a GPU block's: megabytes).
                    Some(rows) => {
                        let mut answer = k.to_le_bytes().to_vec();
                        answer.extend(rows.answer(k, status.source_rank() as usize));
                        assert!(answer.len() <= MESSAGE_BYTES, "a piece's rows fit one message");
                        to.send_with_tag(&answer[..], tag + 1);
                    }
                }
            }
        }
    }
}

/// A communicator handle as rsmpi's type, left for its owner to free.
fn view(raw: MPI_Comm) -> ManuallyDrop<SimpleCommunicator> {
    // SAFETY: `raw` is a World's live duplicate, freed only by that World
    // (ManuallyDrop: never here).
    ManuallyDrop::new(unsafe { SimpleCommunicator::from_raw(raw) })
}

/// A communicator's raw handle, for a counter's server thread (an integer in MPICH, a pointer in Open MPI).
#[derive(Clone, Copy)]
struct Raw(MPI_Comm);

// SAFETY: MPI handles may be used from any thread at MPI_THREAD_MULTIPLE.
unsafe impl Send for Raw {}
unsafe impl Sync for Raw {}

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
        let tag = self.next_tag();
        if self.rank != 0 {
            return Box::new(Client { comm: Raw(self.comm), tag, carrying: false, lock: Mutex::new(()) });
        }
        let next = std::sync::Arc::new(AtomicU64::new(0));
        let (others, served, raw) = (self.size - 1, next.clone(), Raw(self.comm));
        let server = std::thread::spawn(move || {
            let raw = raw;
            serve(raw, tag, others, &served, None)
        });
        Box::new(Served { next, server: Some(server) })
    }

    fn carrying(&self, rows: Option<&RowsOfPlaces<'_>>, ahead: usize, work: &mut dyn FnMut(&dyn Counter)) {
        let tag = self.next_tag();
        if self.rank != 0 {
            let client = Client { comm: Raw(self.comm), tag, carrying: true, lock: Mutex::new(()) };
            let client = &client;
            let mut resolver = Resolver::default();
            let (alive, received) = (resolver.alive(), AtomicU64::new(0));
            let (to_work, from_asker) = std::sync::mpsc::sync_channel(ahead.max(1));
            std::thread::scope(|s| {
                // Asks ahead of the work: a piece's rows arrive while the one before computes.
                let received = &received;
                s.spawn(move || {
                    loop {
                        let (k, bytes) = client.next_carried_raw();
                        // Read once here; rows named again are the previous answer's (a GPU's pieces of one block).
                        let carried = resolver.resolve(bytes);
                        let end = carried.is_end();
                        received.store(resolver.received, Ordering::Relaxed);
                        // The work stopped taking (it dropped its end), or the list ended.
                        if to_work.send((k, carried)).is_err() || end {
                            break;
                        }
                    }
                    drop(to_work);
                });
                let asked = Asked { from_asker: Mutex::new(from_asker), alive: &alive, received };
                work(&asked);
            });
            // (The client's drop tells rank 0 this rank has stopped asking.)
            return;
        }
        let rows = rows.expect("rank 0 gives the rows its counter's answers carry");
        let next = std::sync::Arc::new(AtomicU64::new(0));
        let (others, raw) = (self.size - 1, Raw(self.comm));
        // Scoped: the server reads rank 0's points, borrowed for the run.
        std::thread::scope(|s| {
            s.spawn(|| serve(raw, tag, others, &next, Some(rows)));
            work(&Served { next: next.clone(), server: None });
        });
    }

    fn gather(&self, mine: Vec<u8>) -> Option<Vec<Vec<u8>>> {
        let world = self.comm();
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
        let world = self.comm();
        let root = world.process_at_rank(0);
        let mut len = bytes.as_ref().map_or(0, |b| b.len() as u64);
        // Nonblocking, tested with sleeps: the other ranks wait here while
        // rank 0 reads the inputs.
        mpi::request::scope(|scope| finish(root.immediate_broadcast_into(scope, &mut len), LONG_SLEEP));
        let mut out = if self.rank == 0 { bytes.unwrap_or_default() } else { vec![0u8; len as usize] };
        for chunk in out.chunks_mut(MESSAGE_BYTES) {
            mpi::request::scope(|scope| finish(root.immediate_broadcast_into(scope, chunk), LONG_SLEEP));
        }
        out
    }

    fn abort(&self, code: i32) -> ! {
        self.comm().abort(code)
    }
}

/// Sends `bytes` in messages of at most `MESSAGE_BYTES`, their count first,
/// each a nonblocking send tested with sleeps (a large one waits for rank 0
/// to receive the ranks before this one).
fn send(to: &mpi::topology::Process<'_>, bytes: &[u8], tag: i32) {
    let len = bytes.len() as u64;
    mpi::request::scope(|scope| finish(to.immediate_send_with_tag(scope, &len, tag), LONG_SLEEP));
    for chunk in bytes.chunks(MESSAGE_BYTES) {
        mpi::request::scope(|scope| finish(to.immediate_send_with_tag(scope, chunk, tag), LONG_SLEEP));
    }
}

/// What [`send`] sent, each message received once a probe finds it.
fn receive(from: &mpi::topology::Process<'_>, tag: i32) -> Vec<u8> {
    let len = receive_waiting::<u64>(from, tag, LONG_SLEEP);
    let len = *len.first().expect("a count of bytes") as usize;
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        out.extend(receive_waiting::<u8>(from, tag, LONG_SLEEP));
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

/// Another rank's side: one request at a time, answered by rank 0 (with
/// the bytes it carries, where it carries them).
struct Client {
    comm: Raw,
    tag: i32,
    carrying: bool,
    lock: Mutex<()>,
}

impl Counter for Client {
    fn next(&self) -> u64 {
        assert!(!self.carrying, "a carrying counter's answers are taken with their bytes");
        self.next_carried_raw().0
    }
}

impl Client {
    /// The next place, and the bytes rank 0 sent with it where the counter carries them.
    fn next_carried_raw(&self) -> (u64, Vec<u8>) {
        let _one_at_a_time = self.lock.lock().expect("counter lock");
        let world = view(self.comm.0);
        let root = world.process_at_rank(0);
        root.send_with_tag(&ASK, self.tag);
        // Waited for without spinning (MPICH's blocking receive polls, and
        // the asker waits beside the run's threads).
        if !self.carrying {
            let answer = receive_waiting::<u64>(&root, self.tag + 1, ANSWER_SLEEP);
            return (*answer.first().expect("rank 0 answers with a place"), Vec::new());
        }
        let mut answer = receive_waiting::<u8>(&root, self.tag + 1, ANSWER_SLEEP);
        assert!(answer.len() >= 8, "rank 0 answers with a place and its bytes");
        let k = u64::from_le_bytes(answer[..8].try_into().expect("8 bytes"));
        answer.drain(..8);
        (k, answer)
    }
}

/// A rank's side of a carrying counter: the places and bytes its asker
/// thread received ahead of the work, in order.
struct Asked<'a> {
    from_asker: Mutex<std::sync::mpsc::Receiver<(u64, Arc<Carried>)>>,
    /// Bytes of answers held (queued, or taken and not yet dropped), and their most.
    alive: &'a super::Alive,
    /// Bytes received so far.
    received: &'a AtomicU64,
}

impl Counter for Asked<'_> {
    fn next(&self) -> u64 {
        self.next_carried().0
    }

    fn next_carried(&self) -> (u64, Option<Arc<Carried>>) {
        match self.from_asker.lock().expect("counter lock").recv() {
            Ok((k, bytes)) => (k, Some(bytes)),
            // The list ended: past it, with nothing.
            Err(_) => (u64::MAX, None),
        }
    }

    fn most_bytes_ahead(&self) -> u64 {
        self.alive.most()
    }

    fn received_bytes(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        view(self.comm.0).process_at_rank(0).send_with_tag(&DONE, self.tag);
    }
}
