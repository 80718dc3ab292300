// Global output: every pair updates the output in global memory with an
// atomicAdd. For outputs too large for a private copy in shared memory, and
// as the baseline that privatization is measured against.
struct Output {
  unsigned long long* out;

  __device__ __forceinline__ Output(unsigned long long* result, unsigned char*) : out(result) {}
  __device__ __forceinline__ unsigned first_step() const { return 0; }
  __device__ __forceinline__ void begin_step(unsigned) {}

  __device__ __forceinline__ void add(unsigned, unsigned, Value v, bool valid) {
    const int slot = valid ? slot_of(v) : -1;
    if (slot >= 0) atomicAdd(out + slot, 1ull);
  }

  __device__ __forceinline__ bool end_step(unsigned) { return false; }
  __device__ __forceinline__ void finish(unsigned, bool) {}
};
