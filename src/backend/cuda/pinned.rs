//! Host memory page-locked where it lies (`cuMemHostRegister`): for buffers
//! that a caller fills call after call and the GPUs read, the Python
//! session's columns. On the H200's host (docs/benchmarks.md, host copies)
//! an upload from such memory runs at the bus's 49-52 GB/s, against 7-11 GB/s
//! from pageable memory, and registering costs about one pageable copy
//! (10-28 GB/s), once for the buffer's life.

use std::ffi::c_void;
use std::sync::Arc;

use cudarc::driver::{CudaContext, sys};

/// A registration of host memory with the driver, for every context, undone when dropped.
pub struct Registered {
    address: usize,
    ctx: Arc<CudaContext>,
}

impl Registered {
    /// Registers `bytes` at `address`, where a context of this process's
    /// exists already (a session's first GPU call made it) and the driver
    /// agrees; or why not, and the memory then uploads as pageable memory
    /// does. The driver locks the whole pages the region touches (an
    /// allocator's large blocks start at an offset into their first page).
    ///
    /// # Safety
    /// The memory must stay allocated where it is until the value is dropped:
    /// the GPUs would otherwise read the pages it had, not the ones the
    /// address has then.
    pub unsafe fn new(address: *const u8, bytes: usize) -> Result<Registered, String> {
        let ctx = super::any_context().ok_or("no GPU context made yet")?;
        ctx.bind_to_thread().map_err(|e| format!("binding GPU {}'s context: {e}", ctx.ordinal()))?;
        // SAFETY: the caller keeps the region allocated until the drop undoes this.
        let registered =
            unsafe { sys::cuMemHostRegister_v2(address as *mut c_void, bytes, sys::CU_MEMHOSTREGISTER_PORTABLE) };
        registered.result().map_err(|e| format!("cuMemHostRegister of {bytes} bytes at {address:p}: {e}"))?;
        Ok(Registered { address: address as usize, ctx })
    }
}
impl Drop for Registered {
    fn drop(&mut self) {
        // A context that cannot be bound any more (the process is ending) has let go of the pages already.
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: the address this value registered, and no other registration of it.
            let _ = unsafe { sys::cuMemHostUnregister(self.address as *mut c_void) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session asks for a registration after each call; before any GPU
    /// run made a context (and on a machine without a GPU) it is refused,
    /// saying why, and the memory uploads as pageable memory does.
    #[test]
    fn registering_needs_a_context_a_run_made() {
        let column = vec![1.5f32; 1 << 18];
        let bytes = column.len() * 4;
        // SAFETY: `column` outlives the registration, which is dropped first.
        let registered = unsafe { Registered::new(column.as_ptr().cast(), bytes) };
        match super::super::any_context() {
            None => assert_eq!(registered.err().as_deref(), Some("no GPU context made yet")),
            Some(_) => drop(registered.expect("a context exists: the driver registers the column")),
        }
        drop(column);
    }
}
