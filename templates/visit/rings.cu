  // KNN on a grid (src/index.rs, IndexKind::Rings): each own point, a query
  // of A in cell order, meets the other set's points cell by cell in rings
  // around its own cell (ring r: offsets at most r on every axis and r on
  // one), nearest ring first. A point outside ring r lies more than
  // r * reach from the query in some component, and the spec promises a
  // pair's value is at least that: once the K-th value is below r * reach the
  // list is final. Each thread searches alone; a warp's queries share cells,
  // so their loads meet in the cache. Neighbours are offered by input index,
  // which breaks ties as brute force does.
  constexpr bool SKIP_SELF = {{ stage.skip_self }};
#pragma unroll 1
  for (unsigned r = 0; r < R; ++r) {
    if (!here.valid(r)) continue;
    const unsigned i = here.own(r);
    int n[3], c[3], lo[3], hi[3];
    int widest = 0;  // the last ring that holds a cell
    unsigned cell = grid_cell_a[i];
#pragma unroll
    for (int x = 0; x < 3; ++x) {
      n[x] = static_cast<int>(grid_shape.cells[x]);
      c[x] = static_cast<int>(cell % grid_shape.cells[x]);
      cell /= grid_shape.cells[x];
      // One period on a wrapping axis, so that no cell is met twice.
      const bool wraps = (grid_shape.periodic >> x) & 1u;
      lo[x] = wraps ? -((n[x] - 1) / 2) : -c[x];
      hi[x] = wraps ? n[x] / 2 : n[x] - 1 - c[x];
      widest = max(widest, max(-lo[x], hi[x]));
    }
    // The other set's points in cells [from, to] of a row (no wrap within).
    const auto cells = [&](int row, int from, int to) {
      const unsigned end = grid_cell_start[row + to + 1];
      for (unsigned j = grid_cell_start[row + from]; j < end; ++j) {
        if (SKIP_SELF && j == i) continue;
        out.add(r, i, own[r], grid_perm_b[j], load_point(other, j), true);
      }
    };
    // Cells c0 + d for d in [d0, d1] of a row: on a periodic axis the cells
    // before the row's start or past its end wrap around.
    const auto run = [&](int row, int d0, int d1) {
      int x0 = c[0] + d0, x1 = c[0] + d1;
      if (x0 < 0) {
        cells(row, x0 + n[0], min(x1, -1) + n[0]);
        x0 = 0;
      }
      if (x1 >= n[0]) {
        cells(row, max(x0, n[0]) - n[0], x1 - n[0]);
        x1 = n[0] - 1;
      }
      if (x0 <= x1) cells(row, x0, x1);
    };
#pragma unroll 1
    for (int ring = 0; ring <= widest; ++ring) {
      const int from0 = max(lo[0], -ring), to0 = min(hi[0], ring);
#pragma unroll 1
      for (int d2 = max(lo[2], -ring); d2 <= min(hi[2], ring); ++d2) {
        const int z = (c[2] + d2 + n[2]) % n[2];
#pragma unroll 1
        for (int d1 = max(lo[1], -ring); d1 <= min(hi[1], ring); ++d1) {
          const int row = ((z * n[1]) + (c[1] + d1 + n[1]) % n[1]) * n[0];
          if (abs(d1) == ring || abs(d2) == ring) {
            if (from0 <= to0) run(row, from0, to0);  // the whole run of the row is on the ring
          } else {
            if (-ring >= lo[0]) run(row, -ring, -ring);  // only the row's two ends
            if (ring <= hi[0]) run(row, ring, ring);
          }
        }
      }
      if (ring >= 1 && static_cast<double>(out.kth(r)) < ring * grid_shape.reach) break;
    }
  }
  // Each list goes to its query's row in the input's order, so that no
  // permutation is left for the host (the search runs in one launch: the
  // lists start fresh and are written once).
  out.finish_at(here, [&](unsigned r) { return grid_perm_a[here.own(r)]; });
  return;
