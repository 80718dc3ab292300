{% include "contribution/keys.cu" %}
constexpr Value THRESHOLD = static_cast<Value>({{ stage.threshold }});

// The smallest key whose value fails: pairs with smaller keys pass.
__shared__ Key twobs_fail_edge;

__device__ __forceinline__ void prepare_contribution() {
  if (TWOBS_THREAD == 0) twobs_fail_edge = smallest_key([](Key k) { return !({{ stage.map }}(k) {{ stage.compare }} THRESHOLD); });
}

// Whether the pair belongs to the output, tested on the key.
__device__ __forceinline__ bool passes(const Point& twobs_a, const Point& twobs_b) {
  const Key k = {{ stage.key }}(twobs_a, twobs_b);
  return k == k ? !(k >= twobs_fail_edge) : {{ stage.map }}(k) {{ stage.compare }} THRESHOLD;
}
