//! Downloads of large outputs (pairs, KNN lists): through two pinned buffers
//! per GPU, every core emptying one into the result's memory while the bus
//! fills the other. On the H200 host (`docs/bench/h200-host-copies.json`)
//! the bus moves 52 GB/s into pinned memory against 6-13 GB/s into pageable
//! memory, and fresh pageable memory faults page by page.

use std::mem::MaybeUninit;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaStream, CudaView, DriverError, PinnedHostSlice};

/// Bytes a download moves through each pinned buffer at a time.
const STAGE_BYTES: usize = 64 << 20;
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

/// Copies the bytes of `src` into `room` (as long): a chunk at a time
/// through the GPU's pinned buffers, every core copying one into `room`
/// while the bus fills the other; or, for small downloads and while another
/// stream holds the buffers, straight into pageable memory mapped beforehand
/// on every core. `room` is advised huge pages first.
pub fn download(
    stream: &Arc<CudaStream>,
    src: CudaView<'_, u8>,
    staging: Option<&Mutex<Staging>>,
    room: &mut [MaybeUninit<u8>],
) -> Result<(), DriverError> {
    let len = room.len();
    assert_eq!(src.len(), len, "a download fills its room exactly");
    if len == 0 {
        return Ok(());
    }
    huge_pages(room);
    let mut held = if is_staged(len as u64) { staging.and_then(|s| s.try_lock().ok()) } else { None };
    let Some(Staging([even, odd])) = held.as_deref_mut() else {
        prefault(room);
        // SAFETY: the copy writes every byte of `room` and finishes
        // (synchronize) before the caller reads it.
        let dst = unsafe { std::slice::from_raw_parts_mut(room.as_mut_ptr().cast::<u8>(), len) };
        stream.memcpy_dtoh(&src, dst)?;
        return stream.synchronize();
    };
    // The context tracks no events (each stream thread synchronizes its own
    // work), so each buffer's copy is waited for by an event of ours.
    let ctx = stream.context();
    let done = [ctx.new_event(None)?, ctx.new_event(None)?];
    let buffers = [even.as_mut_slice()?, odd.as_mut_slice()?];
    let span = |c: usize| (c * STAGE_BYTES, ((c + 1) * STAGE_BYTES).min(len));
    // cudarc copies as many bytes as the destination holds, so each copy
    // lands in a slice of the buffer exactly as long as its chunk: the whole
    // buffer would read past the chunk (past the source, at its end).
    let fetch = |c: usize, buffer: &mut [u8]| -> Result<(), DriverError> {
        let (lo, hi) = span(c);
        stream.memcpy_dtoh(&src.slice(lo..hi), &mut buffer[..hi - lo])?;
        done[c % 2].record(stream)
    };
    let chunks = len.div_ceil(STAGE_BYTES);
    fetch(0, buffers[0])?;
    for c in 0..chunks {
        if c + 1 < chunks {
            // The next chunk's buffer was emptied into `room` in the last round.
            fetch(c + 1, buffers[(c + 1) % 2])?;
        }
        let (lo, hi) = span(c);
        done[c % 2].synchronize()?;
        spread_copy(&buffers[c % 2][..hi - lo], &mut room[lo..hi]);
    }
    stream.synchronize()
}

/// `dst` = `src`, on every core.
fn spread_copy(src: &[u8], dst: &mut [MaybeUninit<u8>]) {
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    let per = dst.len().div_ceil(threads).max(1 << 19);
    std::thread::scope(|s| {
        for (part, from) in dst.chunks_mut(per).zip(src.chunks(per)) {
            // SAFETY: `part` and `from` have one length and do not overlap.
            s.spawn(move || unsafe {
                std::ptr::copy_nonoverlapping(from.as_ptr(), part.as_mut_ptr().cast::<u8>(), from.len())
            });
        }
    });
}

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
    const PAGE: usize = 4096;
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
    let chunk = room.len().div_ceil(threads).max(1 << 21);
    std::thread::scope(|s| {
        for part in room.chunks_mut(chunk) {
            s.spawn(move || part.iter_mut().step_by(PAGE).for_each(|p| *p = MaybeUninit::new(0)));
        }
    });
}
