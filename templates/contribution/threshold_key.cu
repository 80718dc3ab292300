{% include "contribution/keys.cu" %}
constexpr Value THRESHOLD = static_cast<Value>({{ stage.threshold }});

// The smallest key whose value fails: pairs with smaller keys pass.
__shared__ Key twobs_fail_edge;

__device__ __forceinline__ void prepare_contribution() {
  if (TWOBS_THREAD == 0) twobs_fail_edge = smallest_key([](Key twobs_k) { return !(twobs_map(twobs_k) {{ stage.compare }} THRESHOLD); });
}

// The slot of a key (0: passes, -1: not), from the edge; and from its value,
// which the key probe checks it against.
__device__ __forceinline__ int key_slot(Key twobs_k) {
  return (twobs_k == twobs_k ? !(twobs_k >= twobs_fail_edge) : twobs_map(twobs_k) {{ stage.compare }} THRESHOLD) ? 0 : -1;
}
__device__ __forceinline__ int value_slot(Key twobs_k) { return twobs_map(twobs_k) {{ stage.compare }} THRESHOLD ? 0 : -1; }
__device__ __forceinline__ unsigned key_edges() { return 1; }
__device__ __forceinline__ Key key_edge(unsigned) { return twobs_fail_edge; }
