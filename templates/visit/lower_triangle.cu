  // Circulant tile pairing: block b meets tiles b+1 .. b+M/2 (mod M), so every
  // unordered pair of tiles is visited once and every block does the same work;
  // the last step pairs the block's own points with each other.
  const unsigned tiles_total = (other.n + B - 1) / B;
  const unsigned offdiag = (tiles_total - 1) / 2 + ((tiles_total % 2 == 0 && block < tiles_total / 2) ? 1 : 0);
  const unsigned steps = offdiag + 1;
  for (unsigned s = out.first_step(); s < steps; ++s) {
    out.begin_step(s);
    if (s < offdiag) {
      const unsigned tile = (block + 1 + s) % tiles_total;
      tiles.load(other, tile * B);
      tiles.for_each(umin(B, other.n - tile * B), [&](unsigned jl, const Point& q) {
        out.add(i, own, tile * B + jl, q, own_valid);
      });
    } else {
      tiles.load(a, block * B);
      const unsigned len = umin(B, a.n - block * B);
{{ stage.diagonal }}
    }
    if (out.end_step(s)) return;  // output full: this block resumes at step s
  }
