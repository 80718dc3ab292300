// Register-SHM: each thread keeps its own points in registers; the block
// stages the other tile in shared memory with 16-byte loads, one array per
// component, and every thread reads it back (broadcast, no bank conflicts),
// RUN points of each array in one load.
constexpr unsigned RUN = {{ stage.run }};
// Tiles start where every array's 16-byte loads are aligned.
[[maybe_unused]] constexpr unsigned TILE_ALIGN = {{ stage.align }};
template <class T>
struct alignas(RUN * sizeof(T)) Run {
  T v[RUN];
};

struct Tiles {
{%- for c in components %}
  {{ c.ctype }}* {{ c.name }};
{%- endfor %}

  __device__ __forceinline__ explicit Tiles(unsigned char* smem) {
{%- for c in components %}
    {{ c.name }} = reinterpret_cast<{{ c.ctype }}*>(smem + {{ c.tile_offset }});
{%- endfor %}
  }

  __device__ __forceinline__ static void copy16(const void* from, void* to, unsigned bytes) {
    const uint4* src = static_cast<const uint4*>(from);
    uint4* dst = static_cast<uint4*>(to);
    for (unsigned k = threadIdx.x; k < bytes / 16; k += B) dst[k] = src[k];
  }

  __device__ __forceinline__ void load(const Set& s, unsigned start) {
    __syncthreads();  // everyone is done with the previous tile
{%- for c in components %}
    copy16(s.{{ c.name }} + start, {{ c.name }}, B * sizeof({{ c.ctype }}));
{%- endfor %}
    __syncthreads();
  }

  __device__ __forceinline__ Point at(unsigned j) const {
    Point p;
{%- for c in components %}
    p{{ c.member }} = {{ c.name }}[j];
{%- endfor %}
    return p;
  }

  template <class F>
  __device__ __forceinline__ void for_each(unsigned len, F&& f) const {
    unsigned j = 0;
    // Unrolled a little (Tallying::tile_runs_unrolled): a full tile of a constant length would otherwise unroll whole.
#pragma unroll {{ tile_runs_unrolled }}
    for (; j + RUN <= len; j += RUN) {
{%- for c in components %}
      const Run<{{ c.ctype }}> run_{{ c.name }} = *reinterpret_cast<const Run<{{ c.ctype }}>*>({{ c.name }} + j);
{%- endfor %}
#pragma unroll
      for (unsigned k = 0; k < RUN; ++k) {
        Point p;
{%- for c in components %}
        p{{ c.member }} = run_{{ c.name }}.v[k];
{%- endfor %}
        f(j + k, p);
      }
    }
    for (; j < len; ++j) f(j, at(j));
  }
};
