// Shuffle tiling (section 3.4.2): each lane loads one point of the tile into a
// register and the warp broadcasts them in turn with __shfl_sync. No shared
// memory and no read-only cache; only a few more registers.
[[maybe_unused]] constexpr unsigned TILE_ALIGN = 1;  // tiles may start anywhere
struct Tiles {
  Set s;
  unsigned start;

  __device__ __forceinline__ explicit Tiles(unsigned char*) {}

  __device__ __forceinline__ void load(const Set& set, unsigned tile_start) {
    s = set;
    start = tile_start;
  }

  template <class F>
  __device__ __forceinline__ void for_each(unsigned len, F&& f) const {
    const unsigned lane = threadIdx.x & 31;
#pragma unroll 1
    for (unsigned c = 0; c < len; c += 32) {
      const Point mine = load_point(s, start + c + lane);  // padding keeps this in bounds
      const unsigned m = umin(32, len - c);
#pragma unroll 4
      for (unsigned k = 0; k < m; ++k) {
        Point q;
{%- for c in components %}
        q{{ c.member }} = __shfl_sync(FULL_WARP, mine{{ c.member }}, k);
{%- endfor %}
        f(c + k, q);
      }
    }
  }
};
