// f64 mode: the snippet's float arithmetic read as double: the type, its
// vectors, the f-suffixed math functions and CUDA's float intrinsics. In the
// snippet a conversion to float is an error (a call of a float-only function:
// part of the arithmetic silently done in f32 would not be f64 mode). A float literal stays a float: a
// constant that depends on float's precision (1.5 x 2^23 to round with) must
// be written for both (problems/rdf.cu).
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wfloat-conversion"
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
{%- for f in f64_intrinsics %}
#define {{ f.float }} {{ f.double }}
{%- endfor %}
