// Per-query top-K: each query thread keeps its K best (value, index) pairs in
// registers (K is a compile-time constant, so the arrays stay in registers
// while they fit) and writes them once.
struct Output {
  Value* out_value;
  unsigned* out_index;
  TopK top;

  __device__ __forceinline__ Output(Value* values, unsigned* indices, unsigned char*)
      : out_value(values), out_index(indices) {}
  __device__ __forceinline__ unsigned first_step() const { return 0; }
  __device__ __forceinline__ void begin_step(unsigned) {}

  __device__ __forceinline__ void add(unsigned, unsigned j, Value v, bool valid) {
    if (valid) top.offer(v, j);
  }

  __device__ __forceinline__ bool end_step(unsigned) { return false; }

  __device__ __forceinline__ void finish(unsigned i, bool own_valid) {
    if (!own_valid) return;
#pragma unroll
    for (unsigned k = 0; k < K; ++k) {
      out_value[static_cast<size_t>(i) * K + k] = top.best[k];
      out_index[static_cast<size_t>(i) * K + k] = top.index[k];
    }
  }
};
