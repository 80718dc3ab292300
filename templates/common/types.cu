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

// Parameters are compile-time constants: the runner recompiles when they change.
namespace params {
{%- for p in params %}
[[maybe_unused]] constexpr {{ p.ctype }} {{ p.name }} = {{ p.literal }};
{%- endfor %}
}  // namespace params
