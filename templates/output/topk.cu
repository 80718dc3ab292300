// Per-query top-K: each query thread keeps its K best (value, index) pairs,
// sorted, in registers (K is a compile-time constant, so the arrays stay in
// registers while they fit) and writes them once. Ties go to the smaller
// index, so the result does not depend on the order pairs are visited in.
struct Output {
  Value* out_value;
  unsigned* out_index;
  Value best[K];
  unsigned best_index[K];

  __device__ __forceinline__ Output(Value* values, unsigned* indices, unsigned char*)
      : out_value(values), out_index(indices) {
#pragma unroll
    for (unsigned k = 0; k < K; ++k) {
      best[k] = worst();
      best_index[k] = 0xffffffffu;
    }
  }
  __device__ __forceinline__ unsigned first_step() const { return 0; }
  __device__ __forceinline__ void begin_step(unsigned) {}

  __device__ __forceinline__ static bool before(Value v, unsigned j, Value w, unsigned l) {
    return v < w || (v == w && j < l);
  }

  __device__ __forceinline__ void add(unsigned, unsigned j, Value v, bool valid) {
    if (!valid || !before(v, j, best[K - 1], best_index[K - 1])) return;
    best[K - 1] = v;
    best_index[K - 1] = j;
    // Bubble the newcomer up: the rest of the list is already sorted.
#pragma unroll
    for (unsigned k = K - 1; k > 0; --k) {
      if (before(best[k], best_index[k], best[k - 1], best_index[k - 1])) {
        const Value tv = best[k];
        best[k] = best[k - 1];
        best[k - 1] = tv;
        const unsigned ti = best_index[k];
        best_index[k] = best_index[k - 1];
        best_index[k - 1] = ti;
      }
    }
  }

  __device__ __forceinline__ bool end_step(unsigned) { return false; }

  __device__ __forceinline__ void finish(unsigned i, bool own_valid) {
    if (!own_valid) return;
#pragma unroll
    for (unsigned k = 0; k < K; ++k) {
      out_value[static_cast<size_t>(i) * K + k] = best[k];
      out_index[static_cast<size_t>(i) * K + k] = best_index[k];
    }
  }
};
