// A sum is a total of one slot: every pair adds its value (times its points'
// weights where they have them), in f64.
[[maybe_unused]] constexpr unsigned SLOTS = 1;
typedef double Tally;
typedef double Total;

struct Contribution {
  unsigned slot;  // SLOTS: the pair adds nothing
  Tally amount;
};

__device__ __forceinline__ Contribution contribute(const Point& twobs_a, const Point& twobs_b) {
  return {0u, {{ stage.amount }}};
}

// No setup: the value is tested as it is.
__device__ __forceinline__ void prepare_contribution() {}
{% include "contribution/exact.cu" %}
