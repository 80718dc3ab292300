{{ header }}
{% include "common/types.cu" %}
{% include "common/snippet.cu" %}
// Everything twobs defines after the snippet lives in its own namespace, so
// that no name of the user's can clash with it.
namespace twobs_generated {
// ------------------------------------------------------------------ launch shape
constexpr unsigned B = {{ block_size }};  // threads per block = points per tile
constexpr unsigned R = {{ points_per_thread }};  // own points per thread: each tile point serves R pairs
[[maybe_unused]] constexpr unsigned TILE_BYTES = {{ tile_bytes }};  // the input tile's shared memory; the output's follows
[[maybe_unused]] constexpr bool UNORDERED_PAIRS = {{ unordered }};  // a pair is (min, max), not (own, other)
[[maybe_unused]] constexpr unsigned FULL_WARP = 0xffffffffu;
#define TWOBS_THREAD threadIdx.x  // fragments that set up shared state split it over the block
#define TWOBS_THREADS B

__device__ __forceinline__ unsigned umin(unsigned a, unsigned b) { return a < b ? a : b; }

// A point set: one array per component (SoA), each padded to a multiple of
// 1024 elements so that whole tiles and 16-byte loads stay in bounds.
struct Set {
{%- for c in components %}
  const {{ c.ctype }}* {{ c.name }};
{%- endfor %}
  unsigned n;
};

// A grid's shape for a search of rings (src/stage/mod.rs RingShape): cells
// per axis (axis 0 varies fastest), a bit per wrapping axis, a ring's reach.
struct RingShape {
  unsigned cells[3];
  unsigned periodic;
  double reach;
};

__device__ __forceinline__ Point load_point(const Set& s, unsigned i) {
  Point p;
{%- for c in components %}
  p{{ c.member }} = s.{{ c.name }}[i];
{%- endfor %}
  return p;
}

// What the output stage learns about its thread. Own point r of the thread
// is A's point i0 + r * B (so that the block's loads of them coalesce).
struct Here {
  unsigned i0;               // the thread's first own point in set A's block
  unsigned own_end;          // the end of the block's own points: those at or past it are padding
  unsigned a_offset;         // whole-input index of A's first point
  unsigned other_offset;     // likewise for the other set
  unsigned char* output_smem;  // the output's shared memory, after the input tile

  __device__ __forceinline__ unsigned own(unsigned r) const { return i0 + r * B; }
  __device__ __forceinline__ bool valid(unsigned r) const { return own(r) < own_end; }
};

// ------------------------------------------------------------------ what a pair contributes: {{ names.kind }}
{{ fragments.contribution }}
// ------------------------------------------------------------------ input stage: {{ names.input }}
{{ fragments.input }}
// ------------------------------------------------------------------ output stage: {{ names.output }}
{{ fragments.output }}
{%- if tallying == "indicators" %}
// Counts the pairs of a thread's own points with tile point q, where other
// outputs offer them (output/offer_indicators.cu): failures where FAILS, else passes.
template <bool FAILS>
struct Count {
  Output& out;
  const Point (&own)[R];

  template <class Valid>
  __device__ __forceinline__ void operator()(unsigned, const Point& q, const Valid& valid) const {
    out.template count<FAILS>(own, q, valid);
  }
};
{%- else %}
// Offers the pairs of a thread's own points with tile point (j, q);
// valid(r) says whether own point r's pair is in the visit. Every lane of
// the warp offers together (the output may vote).
struct Offer {
  Output& out;
  const Here& here;
  const Point (&own)[R];

  template <class Valid>
  __device__ __forceinline__ void operator()(unsigned j, const Point& q, const Valid& valid) const {
    out.offer(here, own, j, q, valid);
  }
};
{%- endif %}

// ------------------------------------------------------------------ kernel: {{ names.visit }}
extern "C" __global__ void __launch_bounds__(B) {{ kernel_name }}(
{%- for p in kernel_params %}
    {{ p.ctype }} {{ p.name }}{% if not loop.last %},{% endif %}
{%- endfor %}) {
  extern __shared__ __align__(16) unsigned char smem[];
  const Set a = { {% for c in components %}a_{{ c.name }}, {% endfor %}n_a };
{%- if two_sets %}
  const Set other = { {% for c in components %}b_{{ c.name }}, {% endfor %}n_b };
{%- else %}
  [[maybe_unused]] const Set& other = a;
{%- endif %}
  const unsigned t = threadIdx.x;
  const unsigned block = blockIdx.x;
{{ fragments.own }}
  const Here here = {first + t, own_end, a_offset, other_offset, smem + TILE_BYTES};
  prepare_contribution();
  __syncthreads();
  Point own[R];
#pragma unroll
  for (unsigned r = 0; r < R; ++r) own[r] = load_point(a, here.own(r));  // padding rows are loaded, never counted
  // Interior blocks own no padding: their full tiles skip every validity test.
  [[maybe_unused]] const bool all_own_valid = first + B * R <= own_end;
  Output out({% for name in output_args %}{{ name }}, {% endfor %}here);
  Tiles tiles(smem);
  [[maybe_unused]] const auto always = [](unsigned) { return true; };
  [[maybe_unused]] const auto own_valid = [&](unsigned r) { return here.valid(r); };
{%- if tallying == "indicators" %}
  // The walk is chosen once, the same in every thread, so that no pair tests
  // which comparison counts it.
  if (out.counts_fails()) {
    [[maybe_unused]] const Count<true> offer{out, own};
{{ fragments.visit }}
  } else {
    [[maybe_unused]] const Count<false> offer{out, own};
{{ fragments.visit }}
  }
{%- else %}
  [[maybe_unused]] const Offer offer{out, here, own};
{{ fragments.visit }}
{%- endif %}
  out.finish(here);
}
}  // namespace twobs_generated
