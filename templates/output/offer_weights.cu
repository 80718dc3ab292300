  // A count on keys by weights (count_key.cu): each pair adds its weight,
  // exactly 1 or 0, to a float, which holds every whole number up to 2^24
  // exactly; each step moves it into the integer tally. A step meets at
  // most B x R x R pairs (a lower triangle's span), far below that.
  static_assert(B * R * R < (1u << 24), "a step's weights stay exact in a float");
  Key weights = Key(0);  // the step's counted pairs
  Tally met = 0;         // the step's weighed pairs, where failures are counted

  // Whether pairs are weighed (`weigh`), the same in every thread: the
  // kernel walks its pairs with `weigh` where the threshold has weights,
  // with `offer` where it has not.
  __device__ __forceinline__ bool weighs() const { return setup.weights.on; }

  // The pairs of every own point with tile point q, weighed.
  template <class Valid>
  __device__ __forceinline__ void weigh(const Point (&own)[R], const Point& q, const Valid& valid) {
#pragma unroll
    for (unsigned r = 0; r < R; ++r) {
      if (valid(r)) {
        weights += twobs_generated::weigh(own[r], q, setup);
        ++met;
      }
    }
  }

  // The pairs of every own point with tile point (j, q), each tested exactly
  // (where the threshold has no weights).
  template <class Valid>
  __device__ __forceinline__ void offer(const Here&, const Point (&own)[R], unsigned, const Point& q,
                                        const Valid& valid) {
#pragma unroll
    for (unsigned r = 0; r < R; ++r) take(contribute(own[r], q), valid(r));
  }

  // One pair, where a visit pattern offers pairs one at a time.
  __device__ __forceinline__ void add(unsigned, unsigned, const Point& own, unsigned, const Point& q, bool valid) {
    take(contribute(own, q), valid);
  }

  // Moves the step's weights into the tally.
  __device__ __forceinline__ void settle() {
    const Tally counted = static_cast<Tally>(weights);
    tally[0] += setup.weights.counts_fails ? met - counted : counted;
    weights = Key(0);
    met = 0;
  }
