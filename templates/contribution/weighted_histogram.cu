// A weighted histogram: the bucket of a pair as for a plain histogram, and
// each pair adds {{ stage.amount }} to its bucket, in f64:
// the spec's weight function, the product of its points' weights, or both.
{% include "contribution/bucket.cu" %}
typedef double Tally;
typedef double Total;

struct Contribution {
  unsigned slot;  // SLOTS: the pair adds nothing
  Tally amount;
};

__device__ __forceinline__ Contribution contribute(const Point& twobs_a, const Point& twobs_b) {
  return {bucket_of(twobs_pair(twobs_a, twobs_b)), {{ stage.amount }}};
}

// The value is tested as it is; log-spaced buckets load their edges.
__device__ __forceinline__ void prepare_contribution() { prepare_buckets(); }
{% include "contribution/exact.cu" %}
