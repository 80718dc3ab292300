// Output privatization in shared memory: COPIES private copies of the totals
// per block; lane l updates copy l % COPIES, so only lanes that share a copy
// can collide (AOP, section 3.3.2; COPIES = 1 is plain OP). Copy c of slot s
// is word s * COPIES + c: with 32 copies the lanes of a warp hit 32 different
// banks. A pair that adds nothing adds to slot SLOTS, which is never read, so
// that no pair branches. The copies are summed into the global totals once
// per block.
constexpr unsigned COPIES = {{ stage.copies }};
typedef {{ stage.counter }} Counter;  // what a copy counts in

// Adds to the counter at a shared-memory address: one multiply-add makes the
// address of a slot's copy (a generic pointer would take three instructions).
__device__ __forceinline__ void add_to_copy(unsigned address, unsigned v) {
  asm volatile("red.shared.add.u32 [%0], %1;" ::"r"(address), "r"(v) : "memory");
}
__device__ __forceinline__ void add_to_copy(unsigned address, unsigned long long v) {
  atomicAdd(static_cast<unsigned long long*>(__cvta_shared_to_generic(address)), v);
}
__device__ __forceinline__ void add_to_copy(unsigned address, double v) {
  atomicAdd(static_cast<double*>(__cvta_shared_to_generic(address)), v);
}

struct Output {
  Total* out;
  Setup setup;  // the contribution's, read once
  Counter* copies;
  unsigned mine;  // the shared-memory address of this lane's copy of slot 0

  __device__ __forceinline__ Output(Total* totals, const Here& here)
      : out(totals),
        copies(reinterpret_cast<Counter*>(here.output_smem)),
        mine(static_cast<unsigned>(__cvta_generic_to_shared(copies + (threadIdx.x & (COPIES - 1))))) {
    for (unsigned k = threadIdx.x; k < COPIES * (SLOTS + 1); k += B) copies[k] = Counter(0);
    __syncthreads();
  }
  __device__ __forceinline__ unsigned first_step(unsigned from) const { return from; }
  __device__ __forceinline__ void begin_step(unsigned) {}

{% include "output/offer_totals.cu" %}

  __device__ __forceinline__ void take(const Contribution& c, bool valid) {
    const unsigned slot = valid ? c.slot : SLOTS;
    add_to_copy(mine + slot * (COPIES * sizeof(Counter)), static_cast<Counter>(c.amount));
  }

  __device__ __forceinline__ bool end_step(unsigned) { return false; }

  __device__ __forceinline__ void finish(const Here&) {
    __syncthreads();
    for (unsigned k = threadIdx.x; k < SLOTS; k += B) {
      Total total = Total(0);
#pragma unroll
      for (unsigned c = 0; c < COPIES; ++c) total += copies[k * COPIES + c];
      if (total != Total(0)) atomicAdd(out + k, total);
    }
  }
};
