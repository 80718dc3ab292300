// Register output (Type-I): each thread sums its pair values in a double;
// one block reduction and one atomicAdd per block at the end.
struct Output {
  double* out;
  double sum;

  __device__ __forceinline__ Output(double* result, unsigned char*) : out(result), sum(0.0) {}
  __device__ __forceinline__ unsigned first_step() const { return 0; }
  __device__ __forceinline__ void begin_step(unsigned) {}

  __device__ __forceinline__ void add(unsigned, unsigned, Value v, bool valid) {
    sum += valid ? static_cast<double>(v) : 0.0;
  }

  __device__ __forceinline__ bool end_step(unsigned) { return false; }

  __device__ __forceinline__ void finish(unsigned, bool) {
    const double total = block_sum<double>(sum);
    if (threadIdx.x == 0) atomicAdd(out, total);
  }
};
