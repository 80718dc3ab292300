constexpr unsigned K = {{ stage.k }};

// The K best (value, index) pairs seen so far, sorted; ties go to the smaller
// index, so the result does not depend on the order the pairs come in.
struct TopK {
  Value best[K];
  unsigned index[K];

  __device__ __forceinline__ TopK() {
#pragma unroll
    for (unsigned k = 0; k < K; ++k) {
      best[k] = {{ stage.worst }};  // ranks after every real value
      index[k] = 0xffffffffu;
    }
  }

  __device__ __forceinline__ static bool before(Value v, unsigned j, Value w, unsigned l) {
    return v < w || (v == w && j < l);
  }

  __device__ __forceinline__ void offer(Value v, unsigned j) {
    if (!before(v, j, best[K - 1], index[K - 1])) return;  // also drops NaN
    best[K - 1] = v;
    index[K - 1] = j;
    // Bubble the newcomer up: the rest of the list is already sorted.
#pragma unroll
    for (unsigned k = K - 1; k > 0; --k) {
      if (before(best[k], index[k], best[k - 1], index[k - 1])) {
        const Value tv = best[k];
        best[k] = best[k - 1];
        best[k - 1] = tv;
        const unsigned ti = index[k];
        index[k] = index[k - 1];
        index[k - 1] = ti;
      }
    }
  }
};

// No setup: the value is tested as it is.
__device__ __forceinline__ void prepare_contribution() {}
