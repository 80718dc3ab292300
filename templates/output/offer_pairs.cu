  // The pairs of every own point with tile point (j, q), one at a time.
  template <class Valid>
  __device__ __forceinline__ void offer(const Here& here, const Point (&own)[R], unsigned j, const Point& q,
                                        const Valid& valid) {
#pragma unroll
    for (unsigned r = 0; r < R; ++r) add(r, here.own(r), own[r], j, q, valid(r));
  }
