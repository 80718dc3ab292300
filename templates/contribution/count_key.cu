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

// The slot of a key (0: counted, -1: not), from the edge; and from its value,
// which the key probe checks it against.
__device__ __forceinline__ int key_slot(Key k) {
  return (k == k ? !(k >= twobs_fail_edge) : {{ stage.map }}(k) {{ stage.compare }} THRESHOLD) ? 0 : -1;
}
__device__ __forceinline__ int value_slot(Key k) { return {{ stage.map }}(k) {{ stage.compare }} THRESHOLD ? 0 : -1; }
__device__ __forceinline__ unsigned key_edges() { return 1; }
__device__ __forceinline__ Key key_edge(unsigned) { return twobs_fail_edge; }

__device__ __forceinline__ Contribution contribute(const Point& twobs_a, const Point& twobs_b) {
  return {key_slot({{ stage.key }}(twobs_a, twobs_b)), 1u};
}
