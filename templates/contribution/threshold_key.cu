{% include "contribution/keys.cu" %}
constexpr Value THRESHOLD = static_cast<Value>({{ stage.threshold }});
constexpr unsigned PASS = 0, FAIL = 1;  // the slots of a threshold's test

// The largest key whose value passes: with map non-decreasing and the test
// `value {{ stage.compare }} THRESHOLD`, exactly the keys up to it pass.
__shared__ Key twobs_last_pass;

// The smallest key whose value fails: -inf when every key fails, NaN when
// none does (a comparison `k >= edge` is then false for every key).
__device__ __forceinline__ Key find_first_fail() {
  return smallest_key([](Key twobs_k) { return !(twobs_map(twobs_k) {{ stage.compare }} THRESHOLD); });
}
__device__ __forceinline__ Key find_last_pass() { return key_before(find_first_fail()); }

// The slot of a key, from its value, which the key probe checks the rest against.
__device__ __forceinline__ unsigned value_slot(Key twobs_k) { return twobs_map(twobs_k) {{ stage.compare }} THRESHOLD ? PASS : FAIL; }

// The slot of a key, from the edge. A NaN key is tested on its value (map
// may send it anywhere).
__device__ __forceinline__ unsigned key_slot_fast(Key twobs_k, Key twobs_edge) { return twobs_k <= twobs_edge ? PASS : FAIL; }
__device__ __forceinline__ unsigned key_slot(Key twobs_k) {
  return twobs_k == twobs_k ? key_slot_fast(twobs_k, twobs_last_pass) : value_slot(twobs_k);
}
__device__ __forceinline__ unsigned key_edges() { return 1; }
__device__ __forceinline__ Key key_edge(unsigned) { return twobs_last_pass; }
