{% include "contribution/threshold_key.cu" %}
// A count is a total of one slot: the pairs whose key passes.
[[maybe_unused]] constexpr unsigned SLOTS = 1;
typedef unsigned Tally;            // a thread meets fewer than 2^32 pairs per launch
typedef unsigned long long Total;  // 64-bit totals in shared and global memory

struct Contribution {
  int slot;  // < 0: the pair adds nothing
  Tally amount;
};

__device__ __forceinline__ Contribution contribute(const Point& twobs_a, const Point& twobs_b) {
  return {key_slot(twobs_key(twobs_a, twobs_b)), 1u};
}
