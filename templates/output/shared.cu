// Output privatization in shared memory: COPIES private copies of the totals
// per block; lane l updates copy l % COPIES, so only lanes that share a copy
// can collide (AOP, section 3.3.2; COPIES = 1 is plain OP). Copy c of slot s
// is word s * COPIES + c: with 32 copies the lanes of a warp hit 32 different
// banks. A pair that adds nothing adds to slot SLOTS, which is never read, so
// that no pair branches. The copies are summed into the global totals once
// per block.
constexpr unsigned COPIES = {{ stage.copies }};
typedef {{ stage.counter }} Counter;  // what a copy counts in

struct Output {
  Total* out;
  Counter* copies;

  __device__ __forceinline__ Output(Total* totals, const Here& here)
      : out(totals), copies(reinterpret_cast<Counter*>(here.output_smem)) {
    for (unsigned k = threadIdx.x; k < COPIES * (SLOTS + 1); k += B) copies[k] = Counter(0);
    __syncthreads();
  }
  __device__ __forceinline__ unsigned first_step() const { return 0; }
  __device__ __forceinline__ void begin_step(unsigned) {}

  __device__ __forceinline__ void add(unsigned, unsigned, const Point& own, unsigned, const Point& q, bool valid) {
    const Contribution c = contribute(own, q);
    const unsigned slot = valid && c.slot >= 0 ? static_cast<unsigned>(c.slot) : SLOTS;
    atomicAdd(copies + slot * COPIES + (threadIdx.x & (COPIES - 1)), static_cast<Counter>(c.amount));
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
