// Register-RoC: each thread keeps its own point in registers and reads the
// other tile through the read-only data cache (__ldg), two points per load
// where the component is 4 or 8 bytes wide. Shared memory stays free for output.
// Tiles start on even points: the paired loads are aligned.
[[maybe_unused]] constexpr unsigned TILE_ALIGN = 2;
struct Tiles {
  Set s;
  unsigned start;

  __device__ __forceinline__ explicit Tiles(unsigned char*) {}

  __device__ __forceinline__ void load(const Set& set, unsigned tile_start) {
    s = set;
    start = tile_start;
  }

  __device__ __forceinline__ Point at(unsigned j) const {
    Point p;
{%- for c in components %}
    p{{ c.member }} = __ldg(s.{{ c.name }} + start + j);
{%- endfor %}
    return p;
  }

  template <class F>
  __device__ __forceinline__ void for_each(unsigned len, F&& f) const {
    unsigned j = 0;
#pragma unroll 2
    for (; j + 1 < len; j += 2) {  // tiles start at multiples of B: pairs are aligned
      Point p0, p1;
{%- for c in components %}
      {
        const {{ c.vec2 }} v = __ldg(reinterpret_cast<const {{ c.vec2 }}*>(s.{{ c.name }} + start + j));
        p0{{ c.member }} = v.x;
        p1{{ c.member }} = v.y;
      }
{%- endfor %}
      f(j, p0);
      f(j + 1, p1);
    }
    if (j < len) f(j, at(j));
  }
};
