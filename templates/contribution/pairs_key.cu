{% include "contribution/threshold_key.cu" %}
__device__ __forceinline__ void prepare_contribution() {
  if (TWOBS_THREAD == 0) twobs_last_pass = find_last_pass();
}

// Whether the pair belongs to the output, tested on the key.
__device__ __forceinline__ bool passes(const Point& twobs_a, const Point& twobs_b) {
  return key_slot(twobs_key(twobs_a, twobs_b)) == PASS;
}

// What the key probe checks on every key.
__device__ __forceinline__ bool key_agrees(Key twobs_k) { return key_slot(twobs_k) == value_slot(twobs_k); }
// No estimate: nothing to measure.
__device__ __forceinline__ double key_estimate_error(Key) { return 0.0; }
