// f64 mode: the snippet's float arithmetic read as double.
#define float double
#define float1 double1
#define float2 double2
#define float3 double3
#define float4 double4
#define make_float1 make_double1
#define make_float2 make_double2
#define make_float3 make_double3
#define make_float4 make_double4
{%- for f in f64_functions %}
#define {{ f }}f {{ f }}
{%- endfor %}
