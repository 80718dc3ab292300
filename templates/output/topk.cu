// Per-query top-K: each query thread keeps its K best (value, index) pairs in
// registers (K is a compile-time constant, so the arrays stay in registers
// while they fit). It starts from the lists already in the output, so that
// launches over further blocks of points refine them, and writes them back once.
struct Output {
  Value* out_value;
  unsigned* out_index;
  unsigned other_offset;
  TopK top;

  __device__ __forceinline__ Output(Value* values, unsigned* indices, const Here& here)
      : out_value(values), out_index(indices), other_offset(here.other_offset) {
    if (here.own_valid) {
#pragma unroll
      for (unsigned k = 0; k < K; ++k) {
        top.best[k] = out_value[static_cast<size_t>(here.i) * K + k];
        top.index[k] = out_index[static_cast<size_t>(here.i) * K + k];
      }
    }
  }
  __device__ __forceinline__ unsigned first_step() const { return 0; }
  __device__ __forceinline__ void begin_step(unsigned) {}

  __device__ __forceinline__ void add(unsigned, const Point& own, unsigned j, const Point& q, bool valid) {
    const Value v = pair_value(own, q);
    if (valid) top.offer(v, other_offset + j);
  }

  __device__ __forceinline__ bool end_step(unsigned) { return false; }

  __device__ __forceinline__ void finish(const Here& here) {
    if (!here.own_valid) return;
#pragma unroll
    for (unsigned k = 0; k < K; ++k) {
      out_value[static_cast<size_t>(here.i) * K + k] = top.best[k];
      out_index[static_cast<size_t>(here.i) * K + k] = top.index[k];
    }
  }
};
