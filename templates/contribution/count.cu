// A count is a total of one slot: a pair adds 1 when its value passes, else 0.
[[maybe_unused]] constexpr unsigned SLOTS = 1;
typedef unsigned Tally;            // a thread meets fewer than 2^32 pairs per launch
typedef unsigned long long Total;  // 64-bit totals in shared and global memory
constexpr Value THRESHOLD = static_cast<Value>({{ stage.threshold }});

struct Contribution {
  unsigned slot;  // SLOTS: the pair adds nothing
  Tally amount;
};

__device__ __forceinline__ Contribution contribute(const Point& twobs_a, const Point& twobs_b) {
  return {0u, twobs_pair(twobs_a, twobs_b) {{ stage.compare }} THRESHOLD ? 1u : 0u};
}

// No setup: the value is tested as it is.
__device__ __forceinline__ void prepare_contribution() {}
{% include "contribution/exact.cu" %}
