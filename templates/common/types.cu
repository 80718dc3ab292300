// ------------------------------------------------------------------ types
{% if point.is_struct -%}
struct Point {
{%- for line in point.struct_fields %}
  {{ line }}
{%- endfor %}
};
{%- else -%}
typedef {{ point.ctype }} Point;
{%- endif %}
typedef {{ value_ctype }} Value;
{%- if value2 %}
// The two values of a pair (<output kind="histogram2d">), one member per <axis>.
struct Value2 {
  Value {{ value2[0] }}, {{ value2[1] }};
};
{%- endif %}
{%- if point.coords %}

// The point's coordinates by number, for snippets of any dimension: in an
// unrolled loop over DIMS every index is a constant and coord a register.
[[maybe_unused]] constexpr unsigned DIMS = {{ point.coords.dims }};
__device__ __forceinline__ {{ point.coords.scalar }} coord(const Point& p, unsigned i) {
{%- if point.coords.members %}
  return {% for m in point.coords.members %}{% if not loop.last %}i == {{ loop.index0 }} ? p.{{ m }} : {% else %}p.{{ m }}{% endif %}{% endfor %};
{%- else %}
  return p.v[i];
{%- endif %}
}
{%- endif %}

// A periodic box (a parameter of type="box"): edge vectors (lx, 0, 0),
// (xy ly, ly, 0), (xz lz, yz lz, lz), tilt factors as in HOOMD and freud;
// lx == 0 for open boundaries.
template <typename T>
struct PeriodicBox {
  T lx, ly, lz, xy, xz, yz;
};

{%- for p in params %}{% if p.run_time %}

// A box read at run time (the plan's box_time: run), the one parameter that is
// not a compile-time constant below: its numbers, and what a
// minimum image takes from them, set by the runner before each launch (GPU)
// or run (CPU). The derived ones are rounded once in T, as the compiler folds
// them from a box known at compile time, so that both give the same bits.
#define TWOBS_BOX_AT_RUN_TIME 1
template <typename T>
struct RunTimeBox {
  T lx, ly, lz, xy, xz, yz;
  T per_lx, per_ly, per_lz;  // 1 / lx, 1 / ly, 1 / lz
  T xy_ly, xz_lz, yz_lz;     // the tilted edges' components: xy ly, xz lz, yz lz
};
{%- endif %}{% endfor %}

// Parameters are compile-time constants: the runner recompiles when they change.
namespace params {
{%- for p in params %}
{%- if p.run_time %}
#ifdef __CUDACC_RTC__
__constant__ {{ p.ctype }} {{ p.name }};
#else
{{ p.ctype }} {{ p.name }};  // set by twobs_use_box (templates/cpu/driver.cpp)
#endif
{%- else %}
[[maybe_unused]] constexpr {{ p.ctype }} {{ p.name }} = {{ p.literal }};
{%- endif %}
{%- endfor %}
}  // namespace params
