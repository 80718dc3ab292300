constexpr Value THRESHOLD = static_cast<Value>({{ stage.threshold }});

// Whether the pair belongs to the output.
__device__ __forceinline__ bool passes(const Point& twobs_a, const Point& twobs_b) {
  return twobs_pair(twobs_a, twobs_b) {{ stage.compare }} THRESHOLD;
}

// No setup: the value is tested as it is.
__device__ __forceinline__ void prepare_contribution() {}
