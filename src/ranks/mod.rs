//! Several processes running one schedule: MPI ranks, one or more a
//! machine, each with the GPUs (or CPU threads) of its own.
//!
//! Every rank reads the same inputs and makes the same schedule from them
//! and from the same described workers (its own GPUs, as many times as
//! there are ranks), so the ranks agree on the list of work without sending
//! it. What they share at run time is one counter a list ([`Counter`]): a
//! stream or thread that wants work takes the next position of the list,
//! whichever rank it is on, so a rank that finishes early goes on taking
//! the pieces the others have not reached (the list's pieces shrink towards
//! its end, so the ranks finish within one small piece of each other).
//! What each rank found goes to rank 0 keyed by its position in the list
//! ([`Keyed`], [`encode`]), and rank 0 merges it in key order
//! ([`in_order`]): f64 sums add in the same order whatever the number of
//! ranks, pairs come out in the one process's order.
//!
//! This module holds what needs no MPI (the counter's contract, the wire
//! format, the order of the merge, the check that ranks describe the same
//! machine); `mpi` (behind the cargo feature of that name) is the one room
//! that calls MPI.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

use crate::data::SetShape;
use crate::data::{Column, Inputs, PointSet};
use crate::outcome::{Outcome, Totals};
use crate::spec::Scalar;
use crate::stage::output::Partial;

#[cfg(feature = "mpi")]
pub mod mpi;

/// The number of processes an MPI launcher (mpiexec, mpirun, srun) started,
/// where one started this process: the process managers' own variables
/// say so (MPICH's and Slurm's PMI, PMIx, Open MPI).
pub fn launched() -> Option<usize> {
    let size = ["PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "SLURM_NTASKS"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.parse().ok());
    let rank = ["PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"].iter().any(|v| std::env::var_os(v).is_some());
    rank.then(|| size.unwrap_or(1))
}

/// The tasks of a Slurm step (`srun -n N`) that started this process, where
/// it has several: `srun` sets these whether or not it gives the tasks a
/// PMI (`--mpi=pmi2`, `pmix`) through which MPI finds the other ranks.
pub fn srun_tasks() -> Option<usize> {
    std::env::var_os("SLURM_PROCID")?;
    std::env::var("SLURM_STEP_NUM_TASKS").ok()?.parse().ok().filter(|&n| n > 1)
}

/// Why `srun`'s `tasks` copies must not each run alone: without a PMI every
/// copy is an MPI world of one, and each would run the whole problem and
/// write the same files.
pub fn no_pmi(tasks: usize) -> String {
    format!(
        "srun started {tasks} tasks, but gave them no PMI to find each other (MPI sees a world of 1 in each): each would run the whole problem and write the same files; run `srun --mpi=pmi2 ...` (MPICH's own PMI-1 client, as Debian's and scripts/carry-mpi.sh's bundle have, speaks to Slurm's pmi2 plugin), `srun --mpi=pmix ...` for an MPI built with PMIx, or `mpiexec` inside the allocation"
    )
}

/// Hands out the positions of a list of work that every rank holds alike:
/// each position once, in increasing order, to whichever thread of
/// whichever rank asks first; past the end once every one is taken.
pub trait Counter: Sync {
    fn next(&self) -> u64;
    /// The next position, with the bytes rank 0 sent with it where the
    /// counter carries them ([`Ranks::carrying`]: the rows of set A the
    /// piece reads, shared where rank 0 said they are the rows it sent
    /// before, [`RowsOfPlaces`]); None where this process holds them itself.
    fn next_carried(&self) -> (u64, Option<std::sync::Arc<Carried>>) {
        (self.next(), None)
    }
    /// The most bytes this counter held at once that its takers had not
    /// yet taken (a carrying counter asks ahead of them).
    fn most_bytes_ahead(&self) -> u64 {
        0
    }
    /// Bytes of rows this counter received from rank 0 so far.
    fn received_bytes(&self) -> u64 {
        0
    }
}

/// One process's counter: the list is this process's alone.
#[derive(Debug, Default)]
pub struct Local(AtomicU64);

impl Counter for Local {
    fn next(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed)
    }
}

/// The rows of set A that a carrying counter's answer brought (a piece's,
/// as [`encode_rows`] wrote them), read once by the rank's asker and shared
/// by the pieces that read the same rows; `alive` counts the bytes of
/// every answer's rows still held, until its last holder drops them.
#[derive(Debug)]
pub struct Carried {
    /// The rows, or why their bytes could not be read (the run fails with it).
    pub rows: Result<PointSet, WireError>,
    /// Bytes of the rows held (their wire's length where they were refused).
    held: u64,
    alive: std::sync::Arc<Alive>,
}

impl Carried {
    /// Whether the answer carried nothing: the list ended.
    pub fn is_end(&self) -> bool {
        self.held == 0
    }
}

/// Bytes of carried answers held now, and their most.
#[derive(Debug, Default)]
pub struct Alive {
    now: AtomicU64,
    most: AtomicU64,
}

impl Alive {
    /// The most bytes of answers held at once.
    pub fn most(&self) -> u64 {
        self.most.load(Ordering::Relaxed)
    }
}

impl Drop for Carried {
    fn drop(&mut self) {
        self.alive.now.fetch_sub(self.held, Ordering::Relaxed);
    }
}

/// One byte that rank 0 sends in place of a place's rows where they are the
/// rows it sent the same rank with its previous answer (a GPU's pieces cut
/// one block of A into ranges of steps). Rows are never one byte:
/// [`encode_rows`] starts with an 8-byte count.
const SAME_ROWS: u8 = 0xff;

/// Rank 0's side of a carrying counter: the rows of set A that each place
/// of the list reads (`span`: rows [lo, hi), None past the end of the
/// list), sent with the place to the rank that asked for it, or
/// [`SAME_ROWS`] where that rank was sent those very rows with its previous
/// answer.
pub struct RowsOfPlaces<'a> {
    a: &'a PointSet,
    span: &'a (dyn Fn(u64) -> Option<(usize, usize)> + Sync),
    last: std::sync::Mutex<std::collections::HashMap<usize, (usize, usize)>>,
}

impl<'a> RowsOfPlaces<'a> {
    pub fn new(a: &'a PointSet, span: &'a (dyn Fn(u64) -> Option<(usize, usize)> + Sync)) -> Self {
        RowsOfPlaces { a, span, last: Default::default() }
    }

    /// What goes with `place` to rank `to`: its rows, one byte where they
    /// are those `to` had with its previous answer, nothing past the end.
    pub fn answer(&self, place: u64, to: usize) -> Vec<u8> {
        let Some((lo, hi)) = (self.span)(place) else { return Vec::new() };
        let before = self.last.lock().expect("rows lock").insert(to, (lo, hi));
        if before == Some((lo, hi)) {
            return vec![SAME_ROWS];
        }
        encode_rows(self.a, lo, hi)
    }
}

/// Another rank's side of [`RowsOfPlaces`]: its answers, in the order they
/// came, read into the rows they carry ([`SAME_ROWS`]: the previous
/// answer's), each counted in `alive` while held.
#[derive(Default)]
pub struct Resolver {
    last: Option<std::sync::Arc<Carried>>,
    alive: std::sync::Arc<Alive>,
    /// Bytes that came, markers included.
    pub received: u64,
}

impl Resolver {
    pub fn resolve(&mut self, bytes: Vec<u8>) -> std::sync::Arc<Carried> {
        self.received += bytes.len() as u64;
        if bytes == [SAME_ROWS] {
            return match &self.last {
                Some(last) => last.clone(),
                None => {
                    let what = "rank 0 named the rows it sent before, and had sent none".into();
                    let rows = Err(WireError { at: 0, len: 1, what });
                    std::sync::Arc::new(Carried { rows, held: 1, alive: self.alive.clone() })
                }
            };
        }
        let rows = match bytes.is_empty() {
            true => Ok(PointSet { columns: Vec::new(), origin: "the end of the list".into(), rows: None }),
            false => decode_rows(&bytes),
        };
        let held = match &rows {
            Ok(rows) => rows.held_bytes(),
            Err(_) => bytes.len() as u64,
        };
        drop(bytes);
        let most = self.alive.now.fetch_add(held, Ordering::Relaxed) + held;
        self.alive.most.fetch_max(most, Ordering::Relaxed);
        let carried = std::sync::Arc::new(Carried { rows, held, alive: self.alive.clone() });
        // The end of the list (no rows) is no rows to name again.
        self.last = (held > 0).then(|| carried.clone());
        carried
    }

    /// What the answers held at most at once, counted until their last holder dropped them.
    pub fn alive(&self) -> std::sync::Arc<Alive> {
        self.alive.clone()
    }
}

/// The processes of one run, as the run sees them (MPI's world, in the
/// `mpi` build). Every method but `rank`, `size` and `host` is collective:
/// every rank calls it, in the same order.
pub trait Ranks: Send + Sync {
    fn rank(&self) -> usize;
    fn size(&self) -> usize;
    /// This rank's machine, for the report.
    fn host(&self) -> String;
    /// A counter every rank shares for one list of work. Each rank drops
    /// it once its own threads have stopped taking work; rank 0's drop
    /// waits until every rank has.
    fn counter(&self) -> Box<dyn Counter + '_>;
    /// A counter as [`Ranks::counter`]'s whose answers to the other ranks
    /// carry the rows of set A that each position reads (`rows`: rank 0
    /// gives them; the others give None), lent to `work` on this rank;
    /// returns once `work` has, and on rank 0 once every rank has stopped
    /// asking. Rank 0's own threads get no bytes: it holds what they would
    /// carry. Past the end of the list the answer carries no bytes: another
    /// rank asks ahead of its work, up to `ahead` answers, and stops asking
    /// there.
    fn carrying(&self, rows: Option<&RowsOfPlaces<'_>>, ahead: usize, work: &mut dyn FnMut(&dyn Counter));
    /// Every rank's bytes, in rank order, on rank 0; None on the others.
    fn gather(&self, mine: Vec<u8>) -> Option<Vec<Vec<u8>>>;
    /// Rank 0's bytes (`Some` there, ignored elsewhere) on every rank.
    fn broadcast(&self, bytes: Option<Vec<u8>>) -> Vec<u8>;
    /// Ends every rank's process with `code`: one rank failed, and the
    /// others would wait for it.
    fn abort(&self, code: i32) -> !;
}

/// A handle on the ranks of a run, for `RunOptions` (which is `Debug` and `Clone`).
#[derive(Clone)]
pub struct Handle(pub std::sync::Arc<dyn Ranks>);

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "rank {} of {}", self.0.rank(), self.0.size())
    }
}

/// A partial result with its key: its position in the list of work (CPU
/// chunks), or its rank and place there (GPUs' streams), so that rank 0
/// merges every rank's partials in one order.
pub type Keyed = (u64, Partial);

/// Every rank's partials in key order: the order the merge adds them in.
pub fn in_order(per_rank: Vec<Vec<Keyed>>) -> Vec<Partial> {
    let mut all: Vec<Keyed> = per_rank.into_iter().flatten().collect();
    all.sort_by_key(|(key, _)| *key);
    all.into_iter().map(|(_, p)| p).collect()
}

/// What one rank did, for the report of the run.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct RankWork {
    pub rank: usize,
    pub host: String,
    /// GPUs (0: CPU threads) it ran on, and its threads.
    pub gpus: usize,
    pub threads: usize,
    /// Positions of the shared list it took, and their pairs.
    pub taken: u64,
    pub pairs: u128,
    /// Seconds from the start of its compute to the end of its last piece.
    pub compute_s: f64,
    /// What it held of the inputs.
    pub holding: Holding,
    /// Bytes of input points it held at most at once: both sets where it
    /// holds them whole; set B and the rows of the pieces in flight where
    /// A's rows travel with its pieces.
    pub input_bytes: u64,
    /// Bytes of input points it received from rank 0 (the broadcast, and
    /// the rows sent with its pieces); 0 on rank 0, which read them.
    pub received_bytes: u64,
}

/// What a rank holds of a run's inputs (docs/architecture.md, "A rank's memory").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Holding {
    /// Both sets whole: one set (a piece of rows pairs them with every
    /// earlier row), grids and the cell hierarchy (sorted from whole sets),
    /// the GPUs, and Python's ranks (each given the points by its caller).
    Whole,
    /// Set B whole, and of set A only the rows of the pieces it computes,
    /// sent by rank 0 with each piece: two sets, every pair, on the CPU.
    RowsOfA,
}

impl Holding {
    pub fn name(self) -> &'static str {
        match self {
            Holding::Whole => "both sets whole",
            Holding::RowsOfA => "set B whole, the rows of A of its pieces",
        }
    }
}

/// What a rank other than 0 is sent of a run whose A travels with its
/// pieces: set B whole, and of A its size, origin, and what a schedule
/// reads of it (its ranges and sample), so that every rank makes the same
/// schedule.
#[derive(Debug, Clone)]
pub struct RowsOfA {
    pub a_points: usize,
    pub a_origin: String,
    pub a_shape: SetShape,
    pub b: PointSet,
    /// Whose pieces the rows travel with: rank 0's backend, which every rank runs on.
    pub pieces: Pieces,
    /// Rank 0's verdict on the points' range (`run::f64_for_range`): the
    /// arithmetic every rank computes in.
    pub f64_mode: bool,
    /// Bytes of this message (what the rank received before its pieces).
    pub received_bytes: u64,
}

/// Whose pieces A's rows travel with, in blocks or chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pieces {
    /// The CPU driver's chunks of rows (`CpuDriver::run_parts`).
    CpuChunks,
    /// The GPUs' pieces, each reading one block of A (`run::gpu_rows_block`).
    GpuBlocks,
}

/// What rank 0 sends every rank before a run of several: the frames whole,
/// or B and the size of A where A's rows travel with the pieces.
#[derive(Debug)]
pub enum Sent {
    Whole { frames: Vec<Inputs>, notes: Vec<String> },
    RowsOfA(RowsOfA),
}

/// Rank 0's message of [`Sent::RowsOfA`]: B whole, A's size and shape
/// (`a_shape`, `SetShape::of` A), the arithmetic, and whose pieces.
pub fn encode_rows_of_a(inputs: &Inputs, a_shape: &SetShape, f64_mode: bool, pieces: Pieces) -> Vec<u8> {
    let b = inputs.b.as_ref().expect("rows of A travel only for two sets");
    let mut out = vec![SENT_ROWS_OF_A];
    put(&mut out, inputs.a.len() as u64);
    put_text(&mut out, &inputs.a.origin);
    out.push(u8::from(f64_mode));
    out.push(match pieces {
        Pieces::CpuChunks => 0,
        Pieces::GpuBlocks => 1,
    });
    put(&mut out, a_shape.ranges.len() as u64);
    a_shape.ranges.iter().for_each(|&(lo, hi)| [lo, hi].iter().for_each(|x| put(&mut out, x.to_bits())));
    put_text(&mut out, &a_shape.sample.origin);
    put(&mut out, a_shape.sample.columns.len() as u64);
    a_shape.sample.columns.iter().for_each(|c| put_column(&mut out, c, 0, c.len()));
    put_text(&mut out, &b.origin);
    put(&mut out, b.columns.len() as u64);
    b.columns.iter().for_each(|c| put_column(&mut out, c, 0, c.len()));
    out
}

/// What rank 0 sent: [`encode_frames`]' frames, or [`encode_rows_of_a`]'s B.
pub fn decode_sent(bytes: &[u8]) -> Result<Sent, WireError> {
    match bytes.first() {
        Some(&SENT_WHOLE) => {
            let (frames, notes) = decode_frames(&bytes[1..])?;
            Ok(Sent::Whole { frames, notes })
        }
        Some(&SENT_ROWS_OF_A) => {
            let mut r = Reader { bytes, at: 1 };
            let a_points = r.u64()? as usize;
            let a_origin = r.text()?;
            let f64_mode = r.take(1)?[0] != 0;
            let pieces = match r.take(1)?[0] {
                0 => Pieces::CpuChunks,
                1 => Pieces::GpuBlocks,
                other => {
                    let what = format!("pieces of kind {other}, neither the CPU's chunks (0) nor the GPUs' blocks (1)");
                    return Err(WireError { at: r.at - 1, len: bytes.len(), what });
                }
            };
            let mut ranges = Vec::new();
            for _ in 0..r.u64()? {
                ranges.push((f64::from_bits(r.u64()?), f64::from_bits(r.u64()?)));
            }
            let sample_origin = r.text()?;
            let sample = (0..r.u64()?).map(|_| r.column()).collect::<Result<Vec<_>, _>>()?;
            let sample = PointSet { columns: sample, origin: sample_origin, rows: None };
            let a_shape = SetShape { len: a_points, ranges, sample };
            let origin = r.text()?;
            let columns = (0..r.u64()?).map(|_| r.column()).collect::<Result<Vec<_>, _>>()?;
            if r.at != bytes.len() {
                return Err(r.error("bytes left over after set B"));
            }
            let b = PointSet { columns, origin, rows: None };
            let received_bytes = bytes.len() as u64;
            Ok(Sent::RowsOfA(RowsOfA { a_points, a_origin, a_shape, b, pieces, f64_mode, received_bytes }))
        }
        _ => Err(WireError { at: 0, len: bytes.len(), what: "neither frames nor set B".into() }),
    }
}

const SENT_WHOLE: u8 = 0;
const SENT_ROWS_OF_A: u8 = 1;

/// Rows [lo, hi) of `set`'s columns, for the trip with a piece.
pub fn encode_rows(set: &PointSet, lo: usize, hi: usize) -> Vec<u8> {
    let mut out = Vec::new();
    put(&mut out, set.columns.len() as u64);
    set.columns.iter().for_each(|c| put_column(&mut out, c, lo, hi));
    out
}

/// The rows `encode_rows` wrote, as a set of their own (its row 0 is the first row of A sent).
pub fn decode_rows(bytes: &[u8]) -> Result<PointSet, WireError> {
    let mut r = Reader { bytes, at: 0 };
    let columns = (0..r.u64()?).map(|_| r.column()).collect::<Result<Vec<_>, _>>()?;
    if r.at != bytes.len() {
        return Err(r.error("bytes left over after the rows"));
    }
    if columns.iter().any(|c| c.len() != columns[0].len()) {
        return Err(r.error("columns of different lengths"));
    }
    Ok(PointSet { columns, origin: "rows of set A sent with a piece".into(), rows: None })
}

/// The machine each rank described (its GPUs' names and count), where they
/// differ from rank 0's: ranks make one schedule only if they run alike.
pub fn unlike(described: &[String]) -> Option<String> {
    let first = described.first()?;
    let odd: Vec<String> =
        described.iter().enumerate().filter(|(_, d)| *d != first).map(|(r, d)| format!("rank {r} has {d}")).collect();
    (!odd.is_empty()).then(|| format!("rank 0 has {first}, but {}", odd.join(", ")))
}

/// Rank 0's merged totals on every rank (a histogram is a few KB: every
/// rank of a Python caller gets the whole result, as `MPI_Allreduce` would
/// give it, but exact); other outcomes stay where they are. Collective.
pub fn share_totals(r: &dyn Ranks, outcome: Outcome) -> Result<Outcome, WireError> {
    let Outcome::Totals(totals) = outcome else { return Ok(outcome) };
    let mine = (r.rank() == 0).then(|| encode(&[(0, Partial::Totals(totals))]));
    let bytes = r.broadcast(mine);
    match decode(&bytes)?.pop() {
        Some((_, Partial::Totals(t))) => Ok(Outcome::Totals(t)),
        _ => Err(WireError { at: 0, len: bytes.len(), what: "rank 0 sent no totals".into() }),
    }
}

/// What a rank was given to run on, in a line that differs where the
/// points do: each set's origin, size and a digest of its values (a fold
/// of every value's bits; 3M values in a few ms). Ranks that share a run
/// must hold the same inputs (`run::agree` compares the lines).
pub fn fingerprint(inputs: &Inputs) -> String {
    let sets: Vec<String> = std::iter::once(&inputs.a)
        .chain(&inputs.b)
        .map(|set| {
            let mut h: u64 = 0x9e37_79b9_7f4a_7c15;
            for c in &set.columns {
                h = mix(h, c.len() as u64 ^ ((scalar_code(c.scalar()) as u64) << 56));
                // One match a column, not a value.
                h = match c {
                    Column::F32(v) => v.iter().fold(h, |h, x| mix(h, x.to_bits() as u64)),
                    Column::F64(v) => v.iter().fold(h, |h, x| mix(h, x.to_bits())),
                    Column::I32(v) => v.iter().fold(h, |h, &x| mix(h, x as u32 as u64)),
                    Column::I64(v) => v.iter().fold(h, |h, &x| mix(h, x as u64)),
                    Column::U32(v) => v.iter().fold(h, |h, &x| mix(h, x as u64)),
                };
            }
            format!("{} points x {} columns, digest {h:016x}", set.len(), set.columns.len())
        })
        .collect();
    format!("inputs {}", sets.join(" and "))
}

/// One step of `fingerprint`'s fold.
fn mix(h: u64, x: u64) -> u64 {
    (h.rotate_left(5) ^ x).wrapping_mul(0x0100_0000_01b3_0001)
}

/// Why bytes from another rank could not be read.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
#[error("a rank's partial results are cut short or damaged at byte {at} of {len}: {what}")]
pub struct WireError {
    pub at: usize,
    pub len: usize,
    pub what: String,
}

/// Little-endian bytes of keyed partials, for the trip to rank 0.
pub fn encode(parts: &[Keyed]) -> Vec<u8> {
    let mut out = Vec::new();
    put(&mut out, parts.len() as u64);
    for (key, part) in parts {
        put(&mut out, *key);
        match part {
            Partial::Totals(Totals::Counts(c)) => {
                out.push(0);
                put(&mut out, c.len() as u64);
                c.iter().for_each(|&x| put(&mut out, x));
            }
            Partial::Totals(Totals::Sums(s)) => {
                out.push(1);
                put(&mut out, s.len() as u64);
                s.iter().for_each(|&x| put(&mut out, x.to_bits()));
            }
            Partial::Pairs(p) => {
                out.push(2);
                put(&mut out, p.len() as u64);
                p.iter().flatten().for_each(|&i| out.extend_from_slice(&i.to_le_bytes()));
            }
            Partial::Knn(rows) => {
                out.push(3);
                put(&mut out, rows.len() as u64);
                for (first, values, ids) in rows {
                    put(&mut out, *first as u64);
                    put_column(&mut out, values, 0, values.len());
                    put(&mut out, ids.len() as u64);
                    ids.iter().for_each(|&i| out.extend_from_slice(&i.to_le_bytes()));
                }
            }
        }
    }
    out
}

/// The keyed partials `encode` wrote.
pub fn decode(bytes: &[u8]) -> Result<Vec<Keyed>, WireError> {
    let mut r = Reader { bytes, at: 0 };
    let count = r.u64()?;
    let mut parts = Vec::new();
    for _ in 0..count {
        let key = r.u64()?;
        let part = match r.take(1)?[0] {
            0 => Partial::Totals(Totals::Counts(r.many(8, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")))?)),
            1 => Partial::Totals(Totals::Sums(
                r.many(8, |b| f64::from_bits(u64::from_le_bytes(b.try_into().expect("8 bytes"))))?,
            )),
            2 => {
                let flat = r.many(8, |b| [u32_at(b, 0), u32_at(b, 4)])?;
                Partial::Pairs(flat)
            }
            3 => {
                let rows = r.u64()?;
                let mut out = Vec::new();
                for _ in 0..rows {
                    let first = r.u64()? as usize;
                    let values = r.column()?;
                    let ids = r.many(4, |b| u32_at(b, 0))?;
                    out.push((first, values, ids));
                }
                Partial::Knn(out)
            }
            other => return Err(r.error(&format!("an unknown kind of partial result ({other})"))),
        };
        parts.push((key, part));
    }
    if r.at != bytes.len() {
        return Err(r.error("bytes left over after the last partial result"));
    }
    Ok(parts)
}

/// Little-endian bytes of a run's frames of point sets, for rank 0 to send
/// every rank what it read once (and the notes its reading made).
pub fn encode_frames(frames: &[Inputs], notes: &[String]) -> Vec<u8> {
    let mut out = vec![SENT_WHOLE];
    let text = put_text;
    put(&mut out, notes.len() as u64);
    notes.iter().for_each(|n| text(&mut out, n));
    put(&mut out, frames.len() as u64);
    for inputs in frames {
        for set in std::iter::once(&inputs.a).chain(&inputs.b) {
            out.push(1);
            text(&mut out, &set.origin);
            match &set.rows {
                Some(rows) => {
                    out.push(1);
                    put(&mut out, rows.len() as u64);
                    rows.iter().for_each(|&r| put(&mut out, r));
                }
                None => out.push(0),
            }
            put(&mut out, set.columns.len() as u64);
            set.columns.iter().for_each(|c| put_column(&mut out, c, 0, c.len()));
        }
        if inputs.b.is_none() {
            out.push(0);
        }
    }
    out
}

/// The frames and notes `encode_frames` wrote (after its first byte, which
/// says that frames follow: [`decode_sent`]).
fn decode_frames(bytes: &[u8]) -> Result<(Vec<Inputs>, Vec<String>), WireError> {
    let mut r = Reader { bytes, at: 0 };
    let notes = (0..r.u64()?).map(|_| r.text()).collect::<Result<Vec<_>, _>>()?;
    let mut frames = Vec::new();
    for _ in 0..r.u64()? {
        let a = r.point_set()?.ok_or_else(|| r.error("a frame without its set A"))?;
        let b = r.point_set()?;
        frames.push(Inputs { a, b });
    }
    if r.at != bytes.len() {
        return Err(r.error("bytes left over after the last frame"));
    }
    Ok((frames, notes))
}

/// Values [lo, hi) of `column`.
fn put_column(out: &mut Vec<u8>, column: &Column, lo: usize, hi: usize) {
    out.push(scalar_code(column.scalar()));
    put(out, (hi - lo) as u64);
    out.reserve((hi - lo) * column.scalar().bytes() as usize);
    // One match a column, not a value (rank 0's server encodes a piece's rows while its threads compute).
    match column {
        Column::F32(v) => v[lo..hi].iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        Column::F64(v) => v[lo..hi].iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        Column::I32(v) => v[lo..hi].iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        Column::I64(v) => v[lo..hi].iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
        Column::U32(v) => v[lo..hi].iter().for_each(|x| out.extend_from_slice(&x.to_le_bytes())),
    }
}

fn put_text(out: &mut Vec<u8>, t: &str) {
    put(out, t.len() as u64);
    out.extend_from_slice(t.as_bytes());
}

fn put(out: &mut Vec<u8>, x: u64) {
    out.extend_from_slice(&x.to_le_bytes());
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn scalar_code(s: Scalar) -> u8 {
    match s {
        Scalar::F32 => 0,
        Scalar::F64 => 1,
        Scalar::I32 => 2,
        Scalar::I64 => 3,
        Scalar::U32 => 4,
    }
}

fn scalar_of(code: u8) -> Option<Scalar> {
    [Scalar::F32, Scalar::F64, Scalar::I32, Scalar::I64, Scalar::U32].get(code as usize).copied()
}

/// A column of `scalar` from its little-endian bytes.
fn column_from(scalar: Scalar, raw: &[u8]) -> Column {
    let w = scalar.bytes() as usize;
    let words = raw.chunks_exact(w);
    match scalar {
        Scalar::F32 => Column::F32(words.map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes"))).collect()),
        Scalar::F64 => Column::F64(words.map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes"))).collect()),
        Scalar::I32 => Column::I32(words.map(|b| i32::from_le_bytes(b.try_into().expect("4 bytes"))).collect()),
        Scalar::I64 => Column::I64(words.map(|b| i64::from_le_bytes(b.try_into().expect("8 bytes"))).collect()),
        Scalar::U32 => Column::U32(words.map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes"))).collect()),
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn error(&self, what: &str) -> WireError {
        WireError { at: self.at, len: self.bytes.len(), what: what.to_owned() }
    }

    fn take(&mut self, n: usize) -> Result<&[u8], WireError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let end = end.ok_or_else(|| self.error(&format!("{n} more bytes were expected")))?;
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    fn column(&mut self) -> Result<Column, WireError> {
        let scalar = scalar_of(self.take(1)?[0]).ok_or_else(|| self.error("an unknown value type"))?;
        let len = self.u64()? as usize;
        let raw = self.take(len.checked_mul(scalar.bytes() as usize).ok_or_else(|| self.error("too many values"))?)?;
        Ok(column_from(scalar, raw))
    }

    fn text(&mut self) -> Result<String, WireError> {
        let len = self.u64()? as usize;
        let raw = self.take(len)?.to_vec();
        String::from_utf8(raw).map_err(|_| self.error("text that is not UTF-8"))
    }

    /// A point set, or None where the frame has no set B.
    fn point_set(&mut self) -> Result<Option<PointSet>, WireError> {
        if self.take(1)?[0] == 0 {
            return Ok(None);
        }
        let origin = self.text()?;
        let rows = match self.take(1)?[0] {
            0 => None,
            _ => Some(self.many(8, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")))?),
        };
        let columns = (0..self.u64()?).map(|_| self.column()).collect::<Result<Vec<_>, _>>()?;
        Ok(Some(PointSet { columns, origin, rows }))
    }

    fn u64(&mut self) -> Result<u64, WireError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }

    /// A count, then that many items of `width` bytes each.
    fn many<T>(&mut self, width: usize, item: impl Fn(&[u8]) -> T) -> Result<Vec<T>, WireError> {
        let n = self.u64()? as usize;
        let raw = self.take(n.checked_mul(width).ok_or_else(|| self.error("too many items"))?)?;
        Ok(raw.chunks_exact(width).map(item).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_partial_comes_back_from_the_wire_as_it_left() {
        let parts: Vec<Keyed> = vec![
            (7, Partial::Totals(Totals::Counts(vec![0, 3, u64::MAX]))),
            (2, Partial::Totals(Totals::Sums(vec![0.1, -0.0, f64::NAN, f64::INFINITY, 1e-310]))),
            (9, Partial::Pairs(vec![[1, 2], [u32::MAX, 0]])),
            (0, Partial::Pairs(vec![])),
            (
                u64::MAX,
                Partial::Knn(vec![
                    (4, Column::F32(vec![0.5, f32::INFINITY]), vec![3, u32::MAX]),
                    (6, Column::I64(vec![-5, i64::MAX]), vec![1, 0]),
                    (8, Column::F64(vec![1.0 / 3.0]), vec![2]),
                ]),
            ),
        ];
        let back = decode(&encode(&parts)).expect("decodes");
        assert_eq!(back.len(), parts.len());
        for ((k, p), (kb, pb)) in parts.iter().zip(&back) {
            assert_eq!(k, kb);
            // NaN != NaN: compare the encodings, which hold every bit.
            assert_eq!(encode(&[(*k, p.clone())]), encode(&[(*kb, pb.clone())]));
        }
        let Partial::Totals(Totals::Sums(s)) = &back[1].1 else { panic!("sums") };
        assert!(s[2].is_nan() && s[1].is_sign_negative() && s[4] == 1e-310);
    }

    #[test]
    fn frames_of_point_sets_come_back_from_the_wire_as_they_left() {
        let set = |origin: &str, rows| PointSet {
            columns: vec![Column::F32(vec![0.25, -1.5, f32::MAX]), Column::I32(vec![7, -7, 0])],
            origin: origin.into(),
            rows,
        };
        let frames = vec![
            Inputs { a: set("a.npy", None), b: Some(set("b.csv", Some(vec![0, 2, 5]))) },
            Inputs { a: set("uniform:3 (seed 1)", None), b: None },
        ];
        let notes = vec!["a note".to_owned(), String::new()];
        let bytes = encode_frames(&frames, &notes);
        let Ok(Sent::Whole { frames: back, notes: notes_back }) = decode_sent(&bytes) else { panic!("frames") };
        assert_eq!(notes_back, notes);
        assert_eq!(back.len(), 2);
        for (x, y) in frames.iter().zip(&back) {
            for (s, t) in std::iter::once(&x.a).chain(&x.b).zip(std::iter::once(&y.a).chain(&y.b)) {
                assert_eq!((&s.columns, &s.origin, &s.rows), (&t.columns, &t.origin, &t.rows));
            }
            assert_eq!(x.b.is_some(), y.b.is_some());
        }
        assert!(decode_sent(&bytes[..bytes.len() - 1]).is_err());
    }

    #[test]
    fn set_b_and_rows_of_a_come_back_from_the_wire_as_they_left() {
        let set = |origin: &str, n: usize| PointSet {
            columns: vec![
                Column::F32((0..n).map(|i| i as f32 * 0.5 - 3.0).collect()),
                Column::F64((0..n).map(|i| 1.0 / (i as f64 + 1.0)).collect()),
                Column::I32((0..n).map(|i| -(i as i32)).collect()),
            ],
            origin: origin.into(),
            rows: None,
        };
        let inputs = Inputs { a: set("a.npy", 10), b: Some(set("b.csv", 4)) };
        let shape = SetShape::of(&inputs.a);
        let Ok(Sent::RowsOfA(got)) = decode_sent(&encode_rows_of_a(&inputs, &shape, true, Pieces::GpuBlocks)) else {
            panic!("rows of A")
        };
        assert_eq!(
            (got.a_points, got.a_origin.as_str(), got.f64_mode, got.pieces),
            (10, "a.npy", true, Pieces::GpuBlocks)
        );
        // Every rank makes the schedule from the same shape of A.
        assert_eq!((got.a_shape.len, &got.a_shape.ranges), (shape.len, &shape.ranges));
        assert_eq!(
            (&got.a_shape.sample.columns, &got.a_shape.sample.origin),
            (&shape.sample.columns, &shape.sample.origin)
        );
        let b = inputs.b.as_ref().unwrap();
        assert_eq!((&got.b.columns, &got.b.origin), (&b.columns, &b.origin));
        let rows = decode_rows(&encode_rows(&inputs.a, 3, 7)).expect("decodes");
        let whole = set("", 10);
        for (c, w) in rows.columns.iter().zip(&whole.columns) {
            assert_eq!(c.len(), 4);
            assert!((0..4).all(|x| c.bits(x) == w.bits(x + 3)));
        }
        let bytes = encode_rows(&inputs.a, 0, 2);
        assert!(decode_rows(&bytes[..bytes.len() - 1]).is_err());
        assert!(decode_sent(&[7]).unwrap_err().what.contains("neither frames nor set B"));
    }

    #[test]
    fn rows_sent_again_to_the_same_rank_travel_as_one_byte_and_resolve_to_the_first() {
        let a = PointSet {
            columns: vec![Column::F32((0..100).map(|i| i as f32).collect()), Column::I64((0..100).collect())],
            origin: "a".into(),
            rows: None,
        };
        // Places 0-2 read block [0, 40), place 3 block [40, 100) (a GPU's pieces of two units); 4 is past the end.
        let span = |k: u64| match k {
            0..=2 => Some((0, 40)),
            3 => Some((40, 100)),
            _ => None,
        };
        let rows = RowsOfPlaces::new(&a, &span);
        let full = encode_rows(&a, 0, 40);
        // Rank 1 takes places 0 and 1, rank 2 place 2: each is sent the rows once.
        assert_eq!(rows.answer(0, 1), full);
        assert_eq!(rows.answer(1, 1), vec![SAME_ROWS]);
        assert_eq!(rows.answer(2, 2), full);
        assert_eq!(rows.answer(3, 1), encode_rows(&a, 40, 100));
        assert!(rows.answer(4, 1).is_empty());
        let mut on_1 = Resolver::default();
        let first = on_1.resolve(full.clone());
        let again = on_1.resolve(vec![SAME_ROWS]);
        assert!(std::sync::Arc::ptr_eq(&first, &again));
        assert_eq!(on_1.received, full.len() as u64 + 1);
        let rows = first.rows.as_ref().expect("rows");
        assert_eq!((rows.len(), rows.columns[1].bits(39)), (40, 39));
        // Read once, counted once while held, and freed with the last holder.
        let block = 40 * (4 + 8);
        let alive = on_1.alive();
        assert_eq!(alive.most(), block);
        let next = on_1.resolve(encode_rows(&a, 40, 100));
        drop((first, again));
        assert_eq!(alive.now.load(Ordering::Relaxed), 60 * 12);
        assert_eq!(alive.most(), block + 60 * 12);
        assert!(!next.is_end() && on_1.resolve(Vec::new()).is_end());
        // A marker with nothing before it, and cut bytes, are refused, not guessed.
        let refused = Resolver::default().resolve(vec![SAME_ROWS]);
        assert!(refused.rows.as_ref().unwrap_err().what.contains("had sent none"));
        assert!(on_1.resolve(full[..full.len() - 1].to_vec()).rows.is_err());
    }

    #[test]
    fn damaged_bytes_are_refused_with_where() {
        let bytes = encode(&[(1, Partial::Pairs(vec![[1, 2], [3, 4]]))]);
        let cut = decode(&bytes[..bytes.len() - 3]).unwrap_err();
        assert_eq!(cut.len, bytes.len() - 3);
        assert!(cut.what.contains("more bytes"), "{cut}");
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer).unwrap_err().what.contains("left over"));
        let mut odd = bytes;
        odd[16] = 9;
        assert!(decode(&odd).unwrap_err().to_string().contains("unknown kind of partial result (9)"));
    }

    #[test]
    fn partials_merge_in_key_order_whatever_rank_found_them() {
        let sum = |k: u64, x: f64| (k, Partial::Totals(Totals::Sums(vec![x])));
        // Sums that a different order would round differently.
        let values = [1e16, 1.0, -1e16, 1.0, 3.0];
        let one: Vec<Keyed> = values.iter().enumerate().map(|(k, &x)| sum(k as u64, x)).collect();
        let reference = in_order(vec![one.clone()]);
        // The same keys spread over ranks in any way: the same order.
        let split =
            vec![vec![one[3].clone(), one[0].clone()], vec![], vec![one[4].clone(), one[1].clone(), one[2].clone()]];
        let merged = in_order(split);
        let total = |parts: &[Partial]| {
            let mut t = Totals::Sums(vec![0.0]);
            parts.iter().for_each(|p| {
                if let Partial::Totals(x) = p {
                    t.add(x)
                }
            });
            t
        };
        assert_eq!(total(&merged), total(&reference));
        assert_eq!(total(&reference), Totals::Sums(vec![4.0]));
    }

    #[test]
    fn a_fingerprint_changes_with_any_value_and_not_with_the_origin() {
        let set = |x: f32, origin: &str| PointSet {
            columns: vec![Column::F32(vec![0.5, x, 0.25]), Column::F32(vec![1.0, 2.0, 3.0])],
            origin: origin.into(),
            rows: None,
        };
        let one = Inputs { a: set(0.75, "set A"), b: None };
        assert_eq!(fingerprint(&one), fingerprint(&Inputs { a: set(0.75, "a.npy"), b: None }));
        // One bit of one value.
        let next = f32::from_bits(0.75f32.to_bits() + 1);
        assert_ne!(fingerprint(&one), fingerprint(&Inputs { a: set(next, "set A"), b: None }));
        let two = Inputs { a: set(0.75, "set A"), b: Some(set(0.75, "set B")) };
        assert_ne!(fingerprint(&one), fingerprint(&two));
        assert!(fingerprint(&two).starts_with("inputs 3 points x 2 columns"), "{}", fingerprint(&two));
    }

    #[test]
    fn ranks_that_describe_another_machine_are_named() {
        assert_eq!(unlike(&["2 x H200".into(), "2 x H200".into()]), None);
        let why = unlike(&["2 x H200".into(), "2 x H200".into(), "1 x H100".into()]).expect("unlike");
        assert!(why.contains("rank 2 has 1 x H100") && why.starts_with("rank 0 has 2 x H200"), "{why}");
        assert_eq!(unlike(&[]), None);
    }

    #[test]
    fn a_local_counter_hands_out_each_position_once_in_order() {
        let c = Local::default();
        let taken: Vec<u64> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..4).map(|_| s.spawn(|| (0..100).map(|_| c.next()).collect::<Vec<_>>())).collect();
            hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
        });
        let mut sorted = taken.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..400).collect::<Vec<_>>());
    }
}
