// Keys (the spec's key map): the value of a pair is map(key) with map
// non-decreasing, so whether a value passes a test, or reaches a bucket,
// holds for all keys from some edge on. Each edge is the smallest key that
// passes, found by bisection over the keys in order with the very arithmetic
// of map; each backend finds its edges when it starts, with its own
// arithmetic. Pairs are then tested on the key alone. A NaN key is tested on
// its value.
typedef Value Key;

// Non-NaN keys in order, as unsigned integers (sign-magnitude to offset binary).
__device__ __forceinline__ unsigned long long key_rank(float k) {
  const unsigned u = __float_as_uint(k);
  return (u & 0x80000000u) ? static_cast<unsigned long long>(~u) : static_cast<unsigned long long>(u | 0x80000000u);
}
__device__ __forceinline__ float key_of_rank(unsigned long long r, float) {
  const unsigned u = static_cast<unsigned>(r);
  return __uint_as_float((u & 0x80000000u) ? (u & 0x7fffffffu) : ~u);
}
__device__ __forceinline__ float key_infinity(float) { return __uint_as_float(0x7f800000u); }
__device__ __forceinline__ unsigned long long key_rank(double k) {
  const unsigned long long u = static_cast<unsigned long long>(__double_as_longlong(k));
  return (u >> 63) ? ~u : (u | (1ull << 63));
}
__device__ __forceinline__ double key_of_rank(unsigned long long r, double) {
  return __longlong_as_double(static_cast<long long>((r >> 63) ? (r & ~(1ull << 63)) : ~r));
}
__device__ __forceinline__ double key_infinity(double) { return __longlong_as_double(0x7ff0000000000000LL); }

// The smallest key k with passes(k), for passes false and then true along the
// keys: -inf when every key passes, NaN when none does (a comparison
// `k >= edge` is then false for every key).
template <class Passes>
__device__ Key smallest_key(Passes passes) {
  const Key inf = key_infinity(Key(0));
  if (!passes(inf)) return inf - inf;  // NaN
  if (passes(-inf)) return -inf;
  unsigned long long lo = key_rank(-inf), hi = key_rank(inf);  // passes(lo) false, passes(hi) true
  while (hi - lo > 1) {
    const unsigned long long mid = lo + (hi - lo) / 2;
    if (passes(key_of_rank(mid, Key(0)))) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return key_of_rank(hi, Key(0));
}

// The key before first_fail, the smallest key that fails (as smallest_key
// gives it): the largest key that passes, +inf when none fails, NaN when
// every key does (a comparison `k <= edge` is then false for every key).
__device__ __forceinline__ Key key_before(Key first_fail) {
  const Key inf = key_infinity(Key(0));
  if (first_fail != first_fail) return inf;  // none fails
  if (first_fail == -inf) return inf - inf;   // every key fails: NaN
  return key_of_rank(key_rank(first_fail) - 1, Key(0));
}
