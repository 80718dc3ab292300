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

// Parameters are compile-time constants: the runner recompiles when they change.
namespace params {
{%- for p in params %}
[[maybe_unused]] constexpr {{ p.ctype }} {{ p.name }} = {{ p.literal }};
{%- endfor %}
}  // namespace params
