{% include "contribution/bucket.cu" %}
typedef unsigned Tally;            // a thread meets fewer than 2^32 pairs per launch
typedef unsigned long long Total;  // 64-bit totals in shared and global memory

struct Contribution {
  unsigned slot;  // SLOTS: the pair adds nothing
  Tally amount;
};

__device__ __forceinline__ Contribution contribute(const Point& twobs_a, const Point& twobs_b) {
  return {bucket_of(twobs_pair(twobs_a, twobs_b)), 1u};
}

// The value is tested as it is; log-spaced buckets load their edges.
__device__ __forceinline__ void prepare_contribution() { prepare_buckets(); }
{% include "contribution/exact.cu" %}
