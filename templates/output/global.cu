// Global output: every pair updates the totals in global memory with an
// atomicAdd. For outputs too large for a private copy in shared memory, and
// as the baseline that privatization is measured against.
struct Output {
  Total* out;
  Setup setup;  // the contribution's, read once

  __device__ __forceinline__ Output(Total* totals, const Here&) : out(totals) {}
  __device__ __forceinline__ unsigned first_step(unsigned from) const { return from; }
  __device__ __forceinline__ void begin_step(unsigned) {}

{% include "output/offer_totals.cu" %}

  __device__ __forceinline__ void take(const Contribution& c, bool valid) {
    const unsigned slot = valid ? c.slot : SLOTS;
    if (slot < SLOTS) atomicAdd(out + slot, static_cast<Total>(c.amount));
  }

  __device__ __forceinline__ bool end_step(unsigned) { return false; }
  __device__ __forceinline__ void finish(const Here&) {}
};
