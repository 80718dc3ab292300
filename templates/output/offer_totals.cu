  // The pairs of every own point with tile point (j, q): the contribution's
  // fast answers, made exact where a lane of the warp is unsure of one (one
  // vote for R pairs, so that sure pairs never branch).
  template <class Valid>
  __device__ __forceinline__ void offer(const Here&, const Point (&own)[R], unsigned, const Point& q,
                                        const Valid& valid) {
    Contribution c[R];
    bool all = true;
#pragma unroll
    for (unsigned r = 0; r < R; ++r) all = contribute_fast(own[r], q, setup, c[r]) && all;
    if (!__all_sync(FULL_WARP, all)) {
#pragma unroll
      for (unsigned r = 0; r < R; ++r) {
        Contribution again;  // the same fast answer again: cheaper than keeping R flags through the loop
        if (!contribute_fast(own[r], q, setup, again)) c[r] = contribute_unsure(own[r], q);
      }
    }
#pragma unroll
    for (unsigned r = 0; r < R; ++r) take(c[r], valid(r));
  }

  // One pair, where a visit pattern offers pairs one at a time.
  __device__ __forceinline__ void add(unsigned, unsigned, const Point& own, unsigned, const Point& q, bool valid) {
    take(contribute(own, q), valid);
  }
