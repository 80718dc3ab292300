// Naive (Algorithm 1): no staging; every thread reads the other points
// straight from global memory. The baseline the other stages are measured against.
[[maybe_unused]] constexpr unsigned TILE_ALIGN = 1;  // tiles may start anywhere
struct Tiles {
  Set s;
  unsigned start;

  __device__ __forceinline__ explicit Tiles(unsigned char*) {}

  __device__ __forceinline__ void load(const Set& set, unsigned tile_start) {
    s = set;
    start = tile_start;
  }

  __device__ __forceinline__ Point at(unsigned j) const { return load_point(s, start + j); }

  template <class F>
  __device__ __forceinline__ void for_each(unsigned len, F&& f) const {
    // Unrolled a little: a full tile of a constant length would otherwise unroll whole.
#pragma unroll 4
    for (unsigned j = 0; j < len; ++j) f(j, at(j));
  }
};
