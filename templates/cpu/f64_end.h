#undef float
#undef float1
#undef float2
#undef float3
#undef float4
#undef make_float1
#undef make_float2
#undef make_float3
#undef make_float4
{%- for f in f64_functions %}
#undef {{ f }}f
{%- endfor %}
{%- for f in f64_intrinsics %}
#undef {{ f.float }}
{%- endfor %}
#pragma GCC diagnostic pop
