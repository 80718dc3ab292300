// Output privatization in shared memory: COPIES private copies of the output
// per block; lane l updates copy l % COPIES, so only lanes that share a copy
// can collide (AOP, section 3.3.2; COPIES = 1 is plain OP). The copies are
// summed into the global output once per block.
constexpr unsigned COPIES = {{ plan.copies }};
constexpr unsigned OUTPUT_OFFSET = {{ plan.tile_bytes }};  // after the input tile

struct Output {
  unsigned long long* out;
  unsigned long long* copies;

  __device__ __forceinline__ Output(unsigned long long* result, unsigned char* smem)
      : out(result), copies(reinterpret_cast<unsigned long long*>(smem + OUTPUT_OFFSET)) {
    for (unsigned k = threadIdx.x; k < COPIES * SLOTS; k += B) copies[k] = 0;
    __syncthreads();
  }
  __device__ __forceinline__ unsigned first_step() const { return 0; }
  __device__ __forceinline__ void begin_step(unsigned) {}

  __device__ __forceinline__ void add(unsigned, unsigned, Value v, bool valid) {
    const int slot = valid ? slot_of(v) : -1;
    if (slot >= 0) atomicAdd(copies + (threadIdx.x & (COPIES - 1)) * SLOTS + slot, 1ull);
  }

  __device__ __forceinline__ bool end_step(unsigned) { return false; }

  __device__ __forceinline__ void finish(unsigned, bool) {
    __syncthreads();
    for (unsigned k = threadIdx.x; k < SLOTS; k += B) {
      unsigned long long total = 0;
#pragma unroll
      for (unsigned c = 0; c < COPIES; ++c) total += copies[c * SLOTS + k];
      if (total != 0) atomicAdd(out + k, total);
    }
  }
};
