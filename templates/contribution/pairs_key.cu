{% include "contribution/threshold_key.cu" %}
// Whether the pair belongs to the output, tested on the key.
__device__ __forceinline__ bool passes(const Point& twobs_a, const Point& twobs_b) {
  return key_slot(twobs_key(twobs_a, twobs_b)) == PASS;
}
