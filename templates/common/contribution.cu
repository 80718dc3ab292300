// ------------------------------------------------------------------ what a pair contributes
{% if output.kind == "count" or output.kind == "pairs" -%}
constexpr Value THRESHOLD = static_cast<Value>({{ output.threshold }});
__device__ __forceinline__ bool passes(Value v) { return v {{ output.compare }} THRESHOLD; }
{% endif -%}
{% if output.kind == "count" -%}
// A count is a histogram with one slot.
[[maybe_unused]] constexpr unsigned SLOTS = 1;
__device__ __forceinline__ int slot_of(Value v) { return passes(v) ? 0 : -1; }
{% elif output.kind == "histogram" -%}
// bucket = floor((v - LO) * SCALE) in Value arithmetic, SCALE = bins / (max - min)
// rounded once on the host; values outside [min, max) and NaN fall in no bucket.
[[maybe_unused]] constexpr unsigned SLOTS = {{ output.bins }};
constexpr Value LO = {{ output.lo }};
constexpr Value SCALE = {{ output.scale }};
__device__ __forceinline__ int slot_of(Value v) {
  const Value x = (v - LO) * SCALE;
  return (x >= Value(0) && x < Value(SLOTS)) ? static_cast<int>(x) : -1;
}
{% elif output.kind == "knn" -%}
constexpr unsigned K = {{ output.k }};

// The K best (value, index) pairs seen so far, sorted; ties go to the smaller
// index, so the result does not depend on the order the pairs come in.
struct TopK {
  Value best[K];
  unsigned index[K];

  __device__ __forceinline__ TopK() {
#pragma unroll
    for (unsigned k = 0; k < K; ++k) {
      best[k] = {{ output.worst }};  // ranks after every real value
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
{% endif -%}
