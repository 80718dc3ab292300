//! What a resident upload's steps cost on a GPU (issue 32): a call uploads
//! 100k 3-D points (three 400 KB columns) on a new stream, into buffers made
//! zero, then waits. Each step timed, from pageable and from registered
//! memory. `cargo build --release --example probe-upload`, run on the device.
use std::time::Instant;

use cudarc::driver::{CudaContext, sys};

fn main() {
    let ctx = CudaContext::new(0).expect("a GPU");
    unsafe { ctx.disable_event_tracking() };
    // As twobs's contexts keep freed memory in the pool.
    twobs::backend::cuda::keep_freed_memory(&ctx).expect("pool threshold");
    // What a call's `free_memory` asks the driver, each call.
    for round in 0..5 {
        let t = Instant::now();
        let free = ctx.mem_get_info().expect("info").0;
        println!("free memory round {round}: cuMemGetInfo {:?} ({free} free)", t.elapsed());
    }
    let n = 100_000usize;
    let columns: Vec<Vec<f32>> = (0..3).map(|c| (0..n).map(|i| (i * 3 + c) as f32).collect()).collect();
    for registered in [false, true] {
        if registered {
            for c in &columns {
                let r = unsafe {
                    sys::cuMemHostRegister_v2(c.as_ptr() as *mut _, c.len() * 4, sys::CU_MEMHOSTREGISTER_PORTABLE)
                };
                r.result().expect("registered");
            }
        }
        for round in 0..8 {
            let t0 = Instant::now();
            ctx.bind_to_thread().expect("bind");
            let stream = ctx.new_stream().expect("stream");
            let t1 = Instant::now();
            let mut devs: Vec<_> = (0..3).map(|_| unsafe { stream.alloc::<f32>(n + 1024) }.expect("alloc")).collect();
            let ta = Instant::now();
            for d in devs.iter_mut() {
                stream.memset_zeros(d).expect("zeros");
            }
            let t2 = Instant::now();
            for (c, d) in columns.iter().zip(devs.iter_mut()) {
                stream.memcpy_htod(c, &mut d.slice_mut(..n)).expect("copy");
            }
            let t3 = Instant::now();
            stream.synchronize().expect("sync");
            let t4 = Instant::now();
            drop(devs);
            let tf = Instant::now();
            drop(stream);
            let t5 = Instant::now();
            let us = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1e6;
            println!(
                "{} round {round}: stream {:.1} us, 3 allocs {:.1}, 3 memsets {:.1}, 3 copies queued {:.1}, sync {:.1}, 3 frees {:.1}, stream dropped {:.1}; total {:.1}",
                if registered { "registered" } else { "pageable" },
                us(t0, t1),
                us(t1, ta),
                us(ta, t2),
                us(t2, t3),
                us(t3, t4),
                us(t4, tf),
                us(tf, t5),
                us(t0, t5)
            );
        }
    }
}
