// A weighted histogram: the bucket of a pair as for a plain histogram
// (floor((v - LO) * SCALE), outside [min, max) and NaN in none), and each pair
// adds {{ stage.weight }}(twobs_a, twobs_b) to its bucket, in f64.
[[maybe_unused]] constexpr unsigned SLOTS = {{ stage.bins }};
typedef double Tally;
typedef double Total;
constexpr Value LO = {{ stage.lo }};
constexpr Value SCALE = {{ stage.scale }};

struct Contribution {
  int slot;  // < 0: the pair adds nothing
  Tally amount;
};

__device__ __forceinline__ Contribution contribute(const Point& twobs_a, const Point& twobs_b) {
  const Value x = (pair_value(twobs_a, twobs_b) - LO) * SCALE;
  return {(x >= Value(0) && x < Value(SLOTS)) ? static_cast<int>(x) : -1, static_cast<double>({{ stage.weight }}(twobs_a, twobs_b))};
}
