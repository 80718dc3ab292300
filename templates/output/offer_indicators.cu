  // A count by indicators (count_key.cu): each pair adds its 1 or 0 to a
  // float, which holds every whole number up to 2^24 exactly; each step
  // moves it into the integer tally. A step meets at most B x R x R pairs (a
  // lower triangle's span), far below that.
  static_assert(B * R * R < (1u << 24), "a step's indicators stay exact in a float");
  Key counted = Key(0);  // the step's counted pairs
  Tally met = 0;         // the step's pairs, where failures are counted

  // Whether the count counts failures, the same in every thread: the kernel
  // walks its pairs with count<true> then, else with count<false>.
  __device__ __forceinline__ bool counts_fails() const { return setup.counts_fails; }

  // The pairs of every own point with tile point q, counted.
  template <bool FAILS, class Valid>
  __device__ __forceinline__ void count(const Point (&own)[R], const Point& q, const Valid& valid) {
#pragma unroll
    for (unsigned r = 0; r < R; ++r) {
      if (valid(r)) {
        counted += twobs_generated::counted<FAILS>(own[r], q, setup);
        if (FAILS) ++met;
      }
    }
  }

  // One pair, where a visit pattern offers pairs one at a time (tested exactly).
  __device__ __forceinline__ void add(unsigned, unsigned, const Point& own, unsigned, const Point& q, bool valid) {
    take(contribute(own, q), valid);
  }

  // Moves the step's count into the tally.
  __device__ __forceinline__ void settle() {
    const Tally step = static_cast<Tally>(counted);
    tally[0] += setup.counts_fails ? met - step : step;
    counted = Key(0);
    met = 0;
  }
