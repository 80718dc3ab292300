
// Every answer of contribute is exact: the fast path is the same, and needs nothing set up.
struct Setup {};

__device__ __forceinline__ bool contribute_fast(const Point& twobs_a, const Point& twobs_b, const Setup&,
                                                Contribution& twobs_c) {
  twobs_c = contribute(twobs_a, twobs_b);
  return true;
}

// Never called: the fast answer is always sure.
__device__ __forceinline__ Contribution contribute_unsure(const Point& twobs_a, const Point& twobs_b) {
  return contribute(twobs_a, twobs_b);
}
