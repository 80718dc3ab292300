// The angle between two points on the unit sphere, in degrees, from their
// unit vectors (twobs xi --radec makes them from RA and Dec in f64): twice
// the arcsine of half the chord, which stays accurate at small angles where
// the arccosine of the dot product does not. In f64 throughout, so that a
// pair's bucket is the one a float64 code (Corrfunc's DDtheta_mocks) finds,
// but for angles within about 1e-13 degrees of an edge.
__device__ double angle(double3 a, double3 b) {
  const double dx = a.x - b.x, dy = a.y - b.y, dz = a.z - b.z;
  const double half_chord = 0.5 * sqrt(dx * dx + dy * dy + dz * dz);
  return 2.0 * asin(half_chord < 1.0 ? half_chord : 1.0) * 57.29577951308232;
}
