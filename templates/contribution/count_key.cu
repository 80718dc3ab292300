{% include "contribution/threshold_key.cu" %}
// A count is a total of one slot: a pair adds 1 when its key passes, else 0
// (an amount, not a slot, so that adding it is one instruction).
[[maybe_unused]] constexpr unsigned SLOTS = 1;
typedef unsigned Tally;            // a thread meets fewer than 2^32 pairs per launch
typedef unsigned long long Total;  // 64-bit totals in shared and global memory

struct Contribution {
  unsigned slot;  // SLOTS: the pair adds nothing
  Tally amount;
};

__device__ __forceinline__ Contribution contribute(const Point& twobs_a, const Point& twobs_b) {
  return {0u, key_slot(twobs_key(twobs_a, twobs_b)) == PASS ? 1u : 0u};
}

// What a thread reads once, after the set-up: the edge and the weights, kept in registers.
struct Setup {
  Key last_pass;
  Weights weights;
  __device__ __forceinline__ Setup() : last_pass(twobs_last_pass), weights(twobs_weights) {}
};

// Sure unless the key is NaN, which is tested on its value.
__device__ __forceinline__ bool contribute_fast(const Point& twobs_a, const Point& twobs_b, const Setup& twobs_s,
                                                Contribution& twobs_c) {
  const Key twobs_k = twobs_key(twobs_a, twobs_b);
  twobs_c = {0u, key_slot_fast(twobs_k, twobs_s.last_pass) == PASS ? 1u : 0u};
  return twobs_k == twobs_k;
}

// The pair's weight where the weights are on: 1 when it is counted (it
// passes, or it fails where the count counts failures), else 0.
__device__ __forceinline__ Key weigh(const Point& twobs_a, const Point& twobs_b, const Setup& twobs_s) {
  return weigh_key(twobs_key(twobs_a, twobs_b), twobs_s.weights);
}
