// Per-query top-K: each query thread keeps the K best (value, index) pairs of
// each of its R own points in registers (K and R are compile-time constants,
// so the arrays stay in registers while they fit). It starts from empty lists
// on a query block's first launch (`fresh`), else from the lists already in
// the output, so that launches over further blocks of points refine them, and
// writes them back once.
struct Output {
  Value* out_value;
  unsigned* out_index;
  unsigned other_offset;
  TopK top[R];

  __device__ __forceinline__ Output(Value* values, unsigned* indices, unsigned fresh, const Here& here)
      : out_value(values), out_index(indices), other_offset(here.other_offset) {
#pragma unroll
    for (unsigned r = 0; r < R; ++r) {
      if (fresh || !here.valid(r)) continue;  // TopK() starts empty
#pragma unroll
      for (unsigned k = 0; k < K; ++k) {
        top[r].best[k] = out_value[static_cast<size_t>(here.own(r)) * K + k];
        top[r].index[k] = out_index[static_cast<size_t>(here.own(r)) * K + k];
      }
    }
  }
  __device__ __forceinline__ unsigned first_step(unsigned from) const { return from; }
  __device__ __forceinline__ void begin_step(unsigned) {}

{% include "output/offer_pairs.cu" %}

  __device__ __forceinline__ void add(unsigned r, unsigned, const Point& own, unsigned j, const Point& q, bool valid) {
    const Value v = twobs_pair(own, q);
    if (valid) top[r].offer(v, other_offset + j);
  }

  __device__ __forceinline__ bool end_step(unsigned) { return false; }

  // Own point r's K-th value so far (a search of rings stops on it).
  __device__ __forceinline__ Value kth(unsigned r) const { return top[r].best[K - 1]; }

  // Writes own point r's list to row row(r) of the output.
  template <class Row>
  __device__ __forceinline__ void finish_at(const Here& here, const Row& row) {
#pragma unroll
    for (unsigned r = 0; r < R; ++r) {
      if (!here.valid(r)) continue;
      const size_t at = static_cast<size_t>(row(r)) * K;
#pragma unroll
      for (unsigned k = 0; k < K; ++k) {
        out_value[at + k] = top[r].best[k];
        out_index[at + k] = top[r].index[k];
      }
    }
  }

  __device__ __forceinline__ void finish(const Here& here) {
    finish_at(here, [&](unsigned r) { return here.own(r); });
  }
};
