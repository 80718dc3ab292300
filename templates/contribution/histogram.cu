// bucket = floor((v - LO) * SCALE) in Value arithmetic, SCALE = bins / (max - min)
// rounded once on the host; values outside [min, max) and NaN fall in no bucket.
[[maybe_unused]] constexpr unsigned SLOTS = {{ stage.bins }};
typedef unsigned Tally;            // a thread meets fewer than 2^32 pairs per launch
typedef unsigned long long Total;  // 64-bit totals in shared and global memory
constexpr Value LO = {{ stage.lo }};
constexpr Value SCALE = {{ stage.scale }};

struct Contribution {
  int slot;  // < 0: the pair adds nothing
  Tally amount;
};

__device__ __forceinline__ Contribution contribute(const Point& twobs_a, const Point& twobs_b) {
  const Value x = (pair_value(twobs_a, twobs_b) - LO) * SCALE;
  return {(x >= Value(0) && x < Value(SLOTS)) ? static_cast<int>(x) : -1, 1u};
}
