// Register output (Type-I): each thread counts into SLOTS register(s); one block
// reduction and one 64-bit atomicAdd per slot and block at the end.
struct Output {
  unsigned long long* out;
  unsigned counts[SLOTS];  // a thread meets fewer than 2^32 points per launch

  __device__ __forceinline__ Output(unsigned long long* result, unsigned char*) : out(result) {
#pragma unroll
    for (unsigned k = 0; k < SLOTS; ++k) counts[k] = 0;
  }
  __device__ __forceinline__ unsigned first_step() const { return 0; }
  __device__ __forceinline__ void begin_step(unsigned) {}

  __device__ __forceinline__ void add(unsigned, unsigned, Value v, bool valid) {
    const int slot = valid ? slot_of(v) : -1;
#pragma unroll
    for (unsigned k = 0; k < SLOTS; ++k) counts[k] += slot == static_cast<int>(k);
  }

  __device__ __forceinline__ bool end_step(unsigned) { return false; }

  __device__ __forceinline__ void finish(unsigned, bool) {
#pragma unroll
    for (unsigned k = 0; k < SLOTS; ++k) {
      const unsigned long long total = block_sum<unsigned long long>(counts[k]);
      if (threadIdx.x == 0 && total != 0) atomicAdd(out + k, total);
    }
  }
};
