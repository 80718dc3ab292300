// KNN on a grid (src/index.rs, IndexKind::Rings): query i of set A (in cell
// order) meets the other set's points cell by cell, in rings around its own
// cell: ring r holds the cells whose offsets from it are at most r on every
// axis and r on one. A point outside ring r lies more than r * reach from the
// query in some component, and the spec promises a pair's value is at least
// that: once the K-th value is below r * reach, no farther point can enter.
struct TwobsGrid {
  const uint32_t* units;       // unused: a search's work item is one query
  const uint32_t* ranges;      // unused
  const uint32_t* perm_a;      // input index of each sorted point of A
  const uint32_t* perm_b;      // and of the other set
  const uint32_t* cell_start;  // the other set's cell c holds its sorted points [cell_start[c], cell_start[c + 1])
  const uint32_t* cell_a;      // the cell of each sorted point of A
  struct {
    uint32_t cells[3];  // cells per axis (1 past the grid's axes); axis 0 varies fastest
    uint32_t periodic;  // a bit per wrapping axis
    double reach;       // ring r reaches r * reach around its query
  } shape;              // src/stage/mod.rs RingShape
};
// One set: a query is not its own neighbour.
constexpr bool TWOBS_SKIP_SELF = {{ stage.skip_self }};

static inline uint64_t input_index_a(const TwobsGrid* g, uint64_t i) { return g->perm_a[i]; }
static inline uint64_t input_index_b(const TwobsGrid* g, uint64_t j) { return g->perm_b[j]; }

// Calls offer(j, q) for the other set's points j (cell order) ring by ring
// around query i, until done(r * reach) says the K-th value is final, or every
// cell is met. Each cell is met once: on a periodic axis of n cells the
// offsets run over one period, -(n - 1) / 2 .. n / 2.
template <class Offer, class Done>
static inline void for_rings(const TwobsSet* b, const TwobsGrid* g, uint64_t i, Offer&& offer, Done&& done) {
  int64_t n[3], c[3], lo[3], hi[3];
  uint32_t cell = g->cell_a[i];
  int64_t widest = 0;  // the last ring that holds a cell
  for (int a = 0; a < 3; ++a) {
    const bool wraps = (g->shape.periodic >> a) & 1u;
    n[a] = g->shape.cells[a];
    c[a] = cell % g->shape.cells[a];
    cell /= g->shape.cells[a];
    lo[a] = wraps ? -((n[a] - 1) / 2) : -c[a];
    hi[a] = wraps ? n[a] / 2 : n[a] - 1 - c[a];
    widest = std::max(widest, std::max(-lo[a], hi[a]));
  }
  // The other set's points in cells c0 + d, d in [d0, d1], of the row at
  // base: on a periodic axis the cells before the row's start or past its
  // end wrap around.
  auto run = [&](int64_t base, int64_t d0, int64_t d1) {
    int64_t x0 = c[0] + d0, x1 = c[0] + d1;
    auto cells = [&](int64_t from, int64_t to) {  // cells [from, to] of the row
      for (uint64_t j = g->cell_start[base + from]; j < g->cell_start[base + to + 1]; ++j) {
        if (TWOBS_SKIP_SELF && j == i) continue;
        offer(j, load_point(b, j));
      }
    };
    if (x0 < 0) {
      cells(x0 + n[0], std::min<int64_t>(x1, -1) + n[0]);
      x0 = 0;
    }
    if (x1 >= n[0]) {
      cells(std::max(x0, n[0]) - n[0], x1 - n[0]);
      x1 = n[0] - 1;
    }
    if (x0 <= x1) cells(x0, x1);
  };
  for (int64_t r = 0; r <= widest; ++r) {
    const int64_t from0 = std::max(lo[0], -r), to0 = std::min(hi[0], r);
    for (int64_t d2 = std::max(lo[2], -r); d2 <= std::min(hi[2], r); ++d2) {
      const int64_t z = (c[2] + d2 + n[2]) % n[2];
      for (int64_t d1 = std::max(lo[1], -r); d1 <= std::min(hi[1], r); ++d1) {
        const int64_t y = (c[1] + d1 + n[1]) % n[1];
        const int64_t base = (z * n[1] + y) * n[0];
        if (std::abs(d1) == r || std::abs(d2) == r) {
          if (from0 <= to0) run(base, from0, to0);  // the whole run of the row is on the ring
        } else {
          if (-r >= lo[0]) run(base, -r, -r);  // only the row's two ends
          if (r <= hi[0]) run(base, r, r);
        }
      }
    }
    if (r >= 1 && done(static_cast<double>(r) * g->shape.reach)) return;
  }
}
