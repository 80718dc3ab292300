//! The totals' device buffer (`stage::output::totals`): one 64-bit total
//! per slot on a stream, zeroed once and added to by every launch.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DriverError};

use crate::backend::cuda::launch::PushArg;
use crate::outcome::Totals;
use crate::stage::output::Total;
use crate::stage::output::totals::Arg;

/// The totals on one stream, zeroed once and added to by every launch.
pub struct DeviceTotals {
    totals: CudaSlice<u64>,
    total: Total,
}

impl DeviceTotals {
    pub fn new(stream: &Arc<CudaStream>, slots: u32, total: Total) -> Result<Self, DriverError> {
        // Zero bits are 0 as a count and +0.0 as a sum.
        Ok(DeviceTotals { totals: stream.alloc_zeros::<u64>(slots.max(1) as usize)?, total })
    }

    pub fn arg(&self, arg: Arg) -> &dyn PushArg {
        match arg {
            Arg::Totals => &self.totals,
        }
    }

    pub fn download(&self, stream: &Arc<CudaStream>) -> Result<Totals, DriverError> {
        let bits = stream.clone_dtoh(&self.totals)?;
        stream.synchronize()?;
        Ok(match self.total {
            Total::Count => Totals::Counts(bits),
            Total::Sum => Totals::Sums(bits.into_iter().map(f64::from_bits).collect()),
        })
    }
}
