// |a.key - b.key| in 64 bits, so that no pair of int keys overflows.
__device__ long long key_gap(Point a, Point b) {
  const long long gap = static_cast<long long>(a.key) - static_cast<long long>(b.key);
  return gap < 0 ? -gap : gap;
}
