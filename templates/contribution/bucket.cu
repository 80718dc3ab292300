// bucket = floor((v - LO) * SCALE) in Value arithmetic, SCALE = bins / (max - min)
// rounded once on the host; values outside [min, max) and NaN fall in no bucket.
[[maybe_unused]] constexpr unsigned SLOTS = {{ stage.bins }};
constexpr Value LO = {{ stage.lo }};
constexpr Value SCALE = {{ stage.scale }};

__device__ __forceinline__ int bucket_of(Value v) {
  const Value x = (v - LO) * SCALE;
  return (x >= Value(0) && x < Value(SLOTS)) ? static_cast<int>(x) : -1;
}
