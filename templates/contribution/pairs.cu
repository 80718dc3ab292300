constexpr Value THRESHOLD = static_cast<Value>({{ stage.threshold }});

// Whether the pair belongs to the output.
__device__ __forceinline__ bool passes(const Point& a, const Point& b) {
  return pair_value(a, b) {{ stage.compare }} THRESHOLD;
}
