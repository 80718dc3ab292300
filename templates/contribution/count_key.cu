{% include "contribution/keys.cu" %}
// A count is a total of one slot: the pairs whose value passes, tested on the key.
[[maybe_unused]] constexpr unsigned SLOTS = 1;
typedef unsigned Tally;            // a thread meets fewer than 2^32 pairs per launch
typedef unsigned long long Total;  // 64-bit totals in shared and global memory
constexpr Value THRESHOLD = static_cast<Value>({{ stage.threshold }});

// The smallest key whose value fails: pairs with smaller keys pass.
__shared__ Key twobs_fail_edge;

__device__ __forceinline__ void prepare_contribution() {
  if (TWOBS_THREAD == 0) twobs_fail_edge = smallest_key([](Key k) { return !({{ stage.map }}(k) {{ stage.compare }} THRESHOLD); });
}

struct Contribution {
  int slot;  // < 0: the pair adds nothing
  Tally amount;
};

__device__ __forceinline__ Contribution contribute(const Point& twobs_a, const Point& twobs_b) {
  const Key k = {{ stage.key }}(twobs_a, twobs_b);
  const bool pass = k == k ? !(k >= twobs_fail_edge) : {{ stage.map }}(k) {{ stage.compare }} THRESHOLD;
  return {pass ? 0 : -1, 1u};
}
