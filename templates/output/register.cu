// Register output (Type-I): each thread tallies every slot in registers; one
// block reduction and one atomicAdd per slot and block at the end.

// Sum of v over the block; the result is valid in thread 0.
template <class T>
__device__ __forceinline__ T block_sum(T v) {
  __shared__ T warp_sums[B / 32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(FULL_WARP, v, o);
  if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = v;
  __syncthreads();
  v = threadIdx.x < B / 32 ? warp_sums[threadIdx.x] : T(0);
  if (threadIdx.x < 32) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(FULL_WARP, v, o);
  }
  __syncthreads();
  return v;
}

struct Output {
  Total* out;
  Setup setup;  // the contribution's, read once
  Tally tally[SLOTS];

  __device__ __forceinline__ Output(Total* totals, const Here&) : out(totals) {
#pragma unroll
    for (unsigned k = 0; k < SLOTS; ++k) tally[k] = Tally(0);
  }
  __device__ __forceinline__ unsigned first_step(unsigned from) const { return from; }
  __device__ __forceinline__ void begin_step(unsigned) {}

{% if tallying == "indicators" -%}
{% include "output/offer_indicators.cu" %}
{%- else -%}
{% include "output/offer_totals.cu" %}
  // Nothing kept apart from the tally.
  __device__ __forceinline__ void settle() {}
{% endif %}
  __device__ __forceinline__ void take(const Contribution& c, bool valid) {
    const unsigned slot = valid ? c.slot : SLOTS;
#pragma unroll
    for (unsigned k = 0; k < SLOTS; ++k) tally[k] += slot == k ? c.amount : Tally(0);
  }

  __device__ __forceinline__ bool end_step(unsigned) {
    settle();
    return false;
  }

  __device__ __forceinline__ void finish(const Here&) {
    settle();  // end_step settled every step: this keeps pairs offered outside one
#pragma unroll
    for (unsigned k = 0; k < SLOTS; ++k) {
      const Total total = block_sum<Total>(tally[k]);
      if (threadIdx.x == 0 && total != Total(0)) atomicAdd(out + k, total);
    }
  }
};
