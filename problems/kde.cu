// Gaussian kernel of bandwidth params::h between two points of DIMS coordinates.
__device__ float gaussian(const Point& a, const Point& b) {
  float d2 = 0.0f;
#pragma unroll
  for (unsigned i = 0; i < DIMS; ++i) {
    const float d = coord(a, i) - coord(b, i);
    d2 = i == 0 ? d * d : d2 + d * d;  // in 3-D: dx * dx + dy * dy + dz * dz
  }
  return expf(-d2 * (0.5f / (params::h * params::h)));
}
