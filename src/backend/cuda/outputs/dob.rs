//! The direct output buffer's device side (`stage::output::dob` says how the
//! pool pages, overflows and resumes): the pool and its bookkeeping on one
//! stream, the relaunches until no block stopped early, and the drain that
//! packs the kept pages' pairs on the device.

use std::mem::MaybeUninit;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, DriverError, LaunchConfig, PushKernelArg};

use super::download::{Staging, download};
use crate::backend::cuda::launch::PushArg;
use crate::stage::output::dob::Arg;

/// The pool and its bookkeeping on one stream.
pub struct DeviceDob {
    pool: CudaSlice<u32>,
    owner: CudaSlice<u32>,
    fill: CudaSlice<u32>,
    next_page: CudaSlice<u32>,
    overflow: CudaSlice<u32>,
    resume: CudaSlice<u32>,
    /// The kept pages' pairs, packed by the drain, and how many.
    packed: CudaSlice<u32>,
    packed_count: CudaSlice<u64>,
    pages: u32,
    page_pairs: u32,
}

impl DeviceDob {
    fn new(stream: &Arc<CudaStream>, pages: u32, page_pairs: u32, max_grid: usize) -> Result<Self, DriverError> {
        let pages_n = pages as usize;
        Ok(DeviceDob {
            pool: stream.alloc_zeros::<u32>(pages_n * page_pairs as usize * 2)?,
            owner: stream.alloc_zeros::<u32>(pages_n * 2)?,
            fill: stream.alloc_zeros::<u32>(pages_n)?,
            next_page: stream.alloc_zeros::<u32>(1)?,
            overflow: stream.alloc_zeros::<u32>(1)?,
            resume: stream.alloc_zeros::<u32>(max_grid.max(1))?,
            packed: stream.alloc_zeros::<u32>(pages_n * page_pairs as usize * 2)?,
            packed_count: stream.alloc_zeros::<u64>(1)?,
            pages,
            page_pairs,
        })
    }

    pub fn arg(&self, arg: Arg) -> &dyn PushArg {
        match arg {
            Arg::Pool => &self.pool,
            Arg::PageOwner => &self.owner,
            Arg::PageFill => &self.fill,
            Arg::NextPage => &self.next_page,
            Arg::NumPages => &self.pages,
            Arg::Resume => &self.resume,
            Arg::Overflow => &self.overflow,
        }
    }
}

/// What running one unit to completion took.
#[derive(Debug, Clone, Copy, Default)]
pub struct DobRun {
    pub launches: u64,
    pub kernel_s: f64,
    pub drain_s: f64,
}

/// How the drain names a kernel's pairs: as the kernel wrote them, or (a
/// grid's kernel, which sees both sets in cell order) mapped back to input
/// indices through each set's permutation, one set's pairs as (min, max).
#[derive(Clone, Copy)]
pub enum PairNames<'a> {
    AsWritten,
    Sorted { perm_a: &'a CudaSlice<u32>, perm_b: &'a CudaSlice<u32>, unordered: bool },
}

/// Packs the pairs of the pages the host keeps into `packed` (the drain kernel, `drain`).
fn pack(
    stream: &Arc<CudaStream>,
    drain: &CudaFunction,
    d: &mut DeviceDob,
    names: PairNames,
) -> Result<(), DriverError> {
    stream.memset_zeros(&mut d.packed_count)?;
    // One warp per page.
    let cfg = LaunchConfig { grid_dim: (d.pages.div_ceil(8), 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
    let mut b = stream.launch_builder(drain);
    b.arg(&d.pool).arg(&d.owner).arg(&d.fill).arg(&d.next_page).arg(&d.pages).arg(&d.page_pairs).arg(&d.resume);
    let null = 0u64;
    let unordered: u32;
    match names {
        PairNames::AsWritten => {
            unordered = 0;
            b.arg(&null).arg(&null).arg(&unordered);
        }
        PairNames::Sorted { perm_a, perm_b, unordered: u } => {
            unordered = u32::from(u);
            b.arg(perm_a).arg(perm_b).arg(&unordered);
        }
    }
    b.arg(&mut d.packed).arg(&mut d.packed_count);
    // SAFETY: the drain's signature is (uint2* pool, uint2* owner, unsigned* fill,
    // unsigned* next_page, unsigned pages, unsigned page_pairs, unsigned* resume,
    // unsigned* perm_a, unsigned* perm_b, unsigned unordered, uint2* packed,
    // unsigned long long* packed_count), as pushed (a null pointer as a 64-bit
    // zero); packed holds the whole pool, the perms every sorted point.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

/// Runs a DOB kernel of `grid` blocks to completion: `launch` it, pack the
/// pairs of finished steps on the device with `drain` and move them into
/// `sink`, relaunch from the resume points while the pool overflows, and
/// grow the pool when a launch makes no progress at all. `dob` is reused
/// when it holds at least `pool_pairs` pairs and `grid` resume points.
#[allow(clippy::too_many_arguments, reason = "one run of a kernel, its pool and its drain")]
pub fn run<E: From<DriverError>>(
    stream: &Arc<CudaStream>,
    page_pairs: u32,
    grid: u32,
    pool_pairs: u64,
    dob: &mut Option<DeviceDob>,
    launch: &mut dyn FnMut(&DeviceDob) -> Result<(), E>,
    drain: &CudaFunction,
    names: PairNames,
    staging: Option<&Mutex<Staging>>,
    sink: &mut Vec<[u32; 2]>,
) -> Result<DobRun, E> {
    let pages = pool_pairs.div_ceil(page_pairs as u64).clamp(1, u32::MAX as u64 / 2) as u32;
    let grid_n = grid as usize;
    if dob.as_ref().is_none_or(|d| d.resume.len() < grid_n || d.pages < pages || d.page_pairs != page_pairs) {
        *dob = None; // free the old pool first
        *dob = Some(DeviceDob::new(stream, pages, page_pairs, grid_n)?);
    }
    let mut d = dob.take().expect("allocated above");
    let mut run = DobRun::default();
    let result = (|| -> Result<(), E> {
        stream.memset_zeros(&mut d.resume)?;
        let mut last_resume = vec![0u32; grid_n];
        loop {
            stream.memset_zeros(&mut d.next_page)?;
            stream.memset_zeros(&mut d.overflow)?;
            let t0 = Instant::now();
            launch(&d)?;
            stream.synchronize().map_err(E::from)?;
            run.kernel_s += t0.elapsed().as_secs_f64();
            run.launches += 1;

            let t = Instant::now();
            pack(stream, drain, &mut d, names)?;
            let overflow = stream.clone_dtoh(&d.overflow)?[0];
            let kept = stream.clone_dtoh(&d.packed_count)?[0] as usize;
            if kept > 0 {
                // Straight into the sink's room: no regrowth.
                sink.reserve(kept);
                let start = sink.len();
                let room = &mut sink.spare_capacity_mut()[..kept];
                // SAFETY: the room's bytes ([u32; 2] has no padding), viewed as bytes.
                let bytes = unsafe {
                    std::slice::from_raw_parts_mut(room.as_mut_ptr().cast::<MaybeUninit<u8>>(), size_of_val(room))
                };
                // SAFETY: the packed pairs' u32 words, viewed as their bytes.
                let packed = unsafe { d.packed.transmute::<u8>(kept * 8) }.expect("the pool holds the kept pairs");
                download(stream, packed, staging, bytes)?;
                // SAFETY: the download wrote all `kept` pairs and has finished.
                unsafe { sink.set_len(start + kept) };
            }
            run.drain_s += t.elapsed().as_secs_f64();
            if overflow == 0 {
                return Ok(());
            }
            let resume = stream.clone_dtoh(&d.resume.slice(..grid_n))?;
            if kept == 0 && resume == last_resume {
                // Not one block finished a step: the pool is too small for any; grow it.
                let pages = d.pages.saturating_mul(4).min(u32::MAX / 2);
                let grown = DeviceDob::new(stream, pages, page_pairs, grid_n)?;
                d = grown;
                stream.memcpy_htod(&resume, &mut d.resume.slice_mut(..grid_n))?;
            }
            last_resume = resume;
        }
    })();
    *dob = Some(d);
    result.map(|()| run)
}
