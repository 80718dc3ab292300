//! Downloads of large outputs (pairs, KNN lists): through two pinned buffers
//! per GPU, every core emptying one into the result's memory while the bus
//! fills the other. On the H200 host (docs/benchmarks.md, host copies)
//! the bus moves 52 GB/s into pinned memory against 6-13 GB/s into pageable
//! memory, and fresh pageable memory faults page by page.

use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaStream, CudaView, DriverError, PinnedHostSlice};

/// Bytes of each pinned buffer.
const STAGE_BYTES: usize = 64 << 20;
/// Bytes a download moves through one slot of a buffer at a time.
const SLOT_BYTES: usize = 8 << 20;
/// Bytes a copier takes from a landed chunk at a time.
const STRIPE_BYTES: usize = 512 << 10;
/// Downloads of at least this many bytes go through the GPU's pinned
/// buffers where no other stream holds them.
const STAGED_FROM: usize = 4 << 20;

/// Whether a download of `bytes` goes through the pinned buffers.
pub fn is_staged(bytes: u64) -> bool {
    bytes >= STAGED_FROM as u64
}

/// Pinned memory that downloads go through: two buffers of STAGE_BYTES, made
/// once per GPU and process (with its context), taken by one stream's
/// download at a time.
pub struct Staging([PinnedHostSlice<u8>; 2]);

impl Staging {
    /// Pins the buffers: 128 MB, about 55 ms on the H200 host.
    pub fn new(ctx: &Arc<cudarc::driver::CudaContext>) -> Result<Staging, DriverError> {
        // Cached, not write-combined (cudarc's default): the host reads these,
        // and reads of write-combined memory bypass the cache.
        // SAFETY: the buffers are written by the copies before they are read.
        let pin = || unsafe { ctx.alloc_pinned_with_flags::<u8>(STAGE_BYTES, 0) };
        Ok(Staging([pin()?, pin()?]))
    }
}

/// Copies the bytes of `src` into `room` (as long): see [`download_parts`].
pub fn download(
    stream: &Arc<CudaStream>,
    src: CudaView<'_, u8>,
    staging: Option<&Mutex<Staging>>,
    room: &mut [MaybeUninit<u8>],
) -> Result<(), DriverError> {
    download_parts(stream, vec![(src, room)], staging)
}

/// Copies the bytes of each source into its room (as long), the parts one
/// after another with no gap: a chunk at a time through the GPU's pinned
/// buffers, every core copying landed chunks into the rooms while the bus
/// fills the next slots; or, for small downloads and while another stream
/// holds the buffers, straight into pageable memory mapped beforehand on
/// every core. The rooms are advised huge pages first.
pub fn download_parts(
    stream: &Arc<CudaStream>,
    mut parts: Vec<(CudaView<'_, u8>, &mut [MaybeUninit<u8>])>,
    staging: Option<&Mutex<Staging>>,
) -> Result<(), DriverError> {
    parts.retain(|(_, room)| !room.is_empty());
    let mut len = 0;
    for (src, room) in &mut parts {
        assert_eq!(src.len(), room.len(), "a download fills its room exactly");
        huge_pages(room);
        len += room.len();
    }
    let mut held = if is_staged(len as u64) { staging.and_then(|s| s.try_lock().ok()) } else { None };
    let Some(Staging([even, odd])) = held.as_deref_mut() else {
        for (src, room) in parts {
            prefault(room);
            // SAFETY: the copy writes every byte of `room` and finishes
            // (synchronize) before the caller reads it.
            let dst = unsafe { std::slice::from_raw_parts_mut(room.as_mut_ptr().cast::<u8>(), room.len()) };
            stream.memcpy_dtoh(&src, dst)?;
        }
        return stream.synchronize();
    };
    // Each part's chunks: (part, [lo, hi) of it).
    let spans: Vec<(usize, usize, usize)> = parts
        .iter()
        .enumerate()
        .flat_map(|(p, (src, _))| {
            (0..src.len().div_ceil(SLOT_BYTES)).map(move |c| (p, c * SLOT_BYTES, ((c + 1) * SLOT_BYTES).min(src.len())))
        })
        .collect();
    // Chunks of SLOT_BYTES go through the slots of the two buffers in turn:
    // the issuer (the scope's body, on a pool thread) starts each chunk's
    // copy from the GPU as soon as its slot is free, waits for it, and tells
    // the copiers (tasks on the rayon pool,
    // whose scope costs 25-33 us on the H200 host where spawning 16 threads
    // costs 0.4 ms); they claim the landed chunk's stripes one by one and copy
    // them into the rooms. A copier that claims dynamically can finish any
    // chunk alone, so the copy progresses however few pool threads it gets
    // (another GPU's download may hold the rest). The bus (52 GB/s) runs
    // ahead while the host writes fresh memory, its slower part.
    let slots: Vec<&mut [u8]> =
        [even.as_mut_slice()?, odd.as_mut_slice()?].into_iter().flat_map(|b| b.chunks_mut(SLOT_BYTES)).collect();
    let slot_count = slots.len();
    let slot_ptrs: Vec<Shared<*mut u8>> = slots.into_iter().map(|s| Shared(s.as_mut_ptr())).collect();
    // The context tracks no events (each stream thread synchronizes its own
    // work), so each slot's copy is waited for by an event of ours.
    let ctx = stream.context();
    let landed: Vec<_> = (0..slot_count).map(|_| ctx.new_event(None)).collect::<Result<_, _>>()?;
    let chunks = spans.len();
    let copiers = rayon::current_num_threads();
    let stripes = |c: usize| (spans[c].2 - spans[c].1).div_ceil(STRIPE_BYTES);
    // Chunks [0, ready) are in their slots; of chunk c, claimed[c] stripes
    // were taken and copied[c] copied out.
    let ready = AtomicUsize::new(0);
    let claimed: Vec<AtomicUsize> = (0..chunks).map(|_| AtomicUsize::new(0)).collect();
    let copied: Vec<AtomicUsize> = (0..chunks).map(|_| AtomicUsize::new(0)).collect();
    let failed = AtomicBool::new(false);
    let room_ptrs: Vec<Shared<*mut u8>> = parts.iter_mut().map(|(_, r)| Shared(r.as_mut_ptr().cast::<u8>())).collect();
    rayon::scope(|s| {
        for _ in 0..copiers {
            let (ready, claimed, copied, failed, slot_ptrs, room_ptrs, spans) =
                (&ready, &claimed, &copied, &failed, &slot_ptrs, &room_ptrs, &spans);
            s.spawn(move |_| {
                for c in 0..chunks {
                    while ready.load(Ordering::Acquire) <= c {
                        if failed.load(Ordering::Relaxed) {
                            return;
                        }
                        std::thread::yield_now();
                    }
                    let (part, lo, hi) = spans[c];
                    loop {
                        let k = claimed[c].fetch_add(1, Ordering::Relaxed);
                        if k >= stripes(c) {
                            break;
                        }
                        let (from, to) = (k * STRIPE_BYTES, ((k + 1) * STRIPE_BYTES).min(hi - lo));
                        // SAFETY: the chunk landed in its slot (the issuer saw
                        // its event before raising `ready`), the slot is not
                        // refilled until all its stripes are counted in
                        // `copied`, and each stripe is claimed by one copier.
                        unsafe {
                            std::ptr::copy_nonoverlapping(
                                slot_ptrs[c % slot_count].0.add(from),
                                room_ptrs[part].0.add(lo + from),
                                to - from,
                            )
                        };
                        copied[c].fetch_add(1, Ordering::Release);
                    }
                }
            });
        }
        let issue = || -> Result<(), DriverError> {
            let mut fetched = 0;
            let mut c = 0;
            while c < chunks {
                // Start every chunk whose slot the copiers have emptied.
                while fetched < chunks
                    && (fetched < slot_count
                        || copied[fetched - slot_count].load(Ordering::Acquire) == stripes(fetched - slot_count))
                {
                    let (part, lo, hi) = spans[fetched];
                    // SAFETY: no copier reads this slot until `ready` passes its chunk.
                    let slot = unsafe { std::slice::from_raw_parts_mut(slot_ptrs[fetched % slot_count].0, hi - lo) };
                    // cudarc copies as many bytes as the destination holds:
                    // exactly the chunk's, not the whole slot's.
                    stream.memcpy_dtoh(&parts[part].0.slice(lo..hi), slot)?;
                    landed[fetched % slot_count].record(stream)?;
                    fetched += 1;
                }
                if fetched == c {
                    // Chunk c's slot is still being emptied: wait for the copiers.
                    std::thread::yield_now();
                    continue;
                }
                landed[c % slot_count].synchronize()?;
                ready.store(c + 1, Ordering::Release);
                c += 1;
            }
            Ok(())
        };
        let result = issue();
        if result.is_err() {
            failed.store(true, Ordering::Relaxed);
        }
        result
    })?;
    stream.synchronize()
}

/// A pointer the copying threads share; what it points at is synchronized by hand.
#[derive(Clone, Copy)]
struct Shared<T>(T);
// SAFETY: see `download_parts`: each slot is written by the bus or read by the
// copiers, never both, and the copiers' stripes of the room are disjoint.
unsafe impl<T> Send for Shared<T> {}
unsafe impl<T> Sync for Shared<T> {}

/// Asks the kernel to back `room` with huge pages where it can: filling
/// fresh memory costs a fault per page, and a 2 MB page takes one fault
/// where 4 KB pages take 512. Only advice: where transparent huge pages are
/// off it changes nothing.
fn huge_pages(room: &mut [MaybeUninit<u8>]) {
    const HUGE: usize = 2 << 20;
    let (start, end) = (room.as_ptr() as usize, room.as_ptr() as usize + room.len());
    let (lo, hi) = (start.next_multiple_of(HUGE), end / HUGE * HUGE);
    if hi > lo {
        // SAFETY: [lo, hi) lies inside `room`, memory this process owns;
        // MADV_HUGEPAGE changes how it is backed, never its contents.
        unsafe { libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE) };
    }
}

/// Maps every page of `room` on every core before the copy into it: fresh
/// memory faults page by page on first touch, and one thread taking those
/// faults, inside the copy, ran at under 2 GB/s on the H200 host.
fn prefault(room: &mut [MaybeUninit<u8>]) {
    use rayon::prelude::*;
    const PAGE: usize = 4096;
    room.par_chunks_mut(1 << 21).for_each(|part| part.iter_mut().step_by(PAGE).for_each(|p| *p = MaybeUninit::new(0)));
}
