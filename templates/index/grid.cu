// Builds a cut-off problem's grid on the GPU (src/backend/cuda/grid.rs), as
// src/index.rs builds it on the host: the cell of every point, a counting
// sort by cell (histogram, exclusive scan, scatter, gather), and the units:
// runs of at most RUN own points along a row of cells, each with the ranges
// of the other set's sorted points in the neighbouring cells. One module for
// every problem; the axes come as a parameter.
//
// The scatter takes slots by atomics, so points within a cell come in no
// fixed order: every GPU of a run must share one grid (the host makes it for
// several), and pairs are named through `perm`, never by their place.

// The indexed axes, as `index::Axis` describes them. Cell c of axis d holds
// values in [origin + c side, origin + (c + 1) side); cells are numbered
// with axis 0 fastest. An axis of a triclinic box (tilted[d]) takes its
// value along a normal of the box's faces: normal[d] . (x, y, z), over the
// set's first `box_count` components.
struct Axes {
  const void* column[3];  // the set's component arrays
  unsigned kind[3];       // their scalar: 0 f32, 1 f64, 2 i32, 3 i64, 4 u32
  double origin[3];
  double side[3];
  unsigned cells[3];
  unsigned periodic[3];
  unsigned count;         // axes indexed, 0 to 3
  unsigned tilted[3];
  double normal[3][3];
  const void* box_column[3];  // components x, y, z
  unsigned box_kind[3];
  unsigned box_count;
};

__device__ __forceinline__ double value_at(const void* column, unsigned kind, unsigned i) {
  switch (kind) {
    case 0: return static_cast<const float*>(column)[i];
    case 1: return static_cast<const double*>(column)[i];
    case 2: return static_cast<const int*>(column)[i];
    case 3: return static_cast<double>(static_cast<const long long*>(column)[i]);
    default: return static_cast<const unsigned*>(column)[i];
  }
}

// `Axis::cell`, in the same f64 arithmetic.
__device__ __forceinline__ unsigned axis_cell(const Axes& axes, unsigned d, double x) {
  const double cells = axes.cells[d];
  double q;
  if (axes.periodic[d]) {
    const double t = (x - axes.origin[d]) / (axes.side[d] * cells);
    q = (t - floor(t)) * cells;
  } else {
    q = (x - axes.origin[d]) / axes.side[d];
  }
  const double f = floor(q);
  if (!(f > 0.0)) return 0;  // below the first cell, or not a number
  if (f >= cells - 1.0) return axes.cells[d] - 1;
  return static_cast<unsigned>(f);
}

// `Axis::coordinate`: the component, or the sum along the normal in the same order.
__device__ __forceinline__ double axis_value(const Axes& axes, unsigned d, unsigned i) {
  if (!axes.tilted[d]) return value_at(axes.column[d], axes.kind[d], i);
  // Unfused, as the host rounds it: both grids place a point alike.
  double u = 0.0;
  for (unsigned k = 0; k < axes.box_count; ++k) {
    u = __dadd_rn(u, __dmul_rn(axes.normal[d][k], value_at(axes.box_column[k], axes.box_kind[k], i)));
  }
  return u;
}

// The cell of each of the set's n points, and how many points each cell holds.
extern "C" __global__ void twobs_grid_cells(Axes axes, unsigned n, unsigned* cell_of, unsigned* count) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    unsigned cell = 0, stride = 1;
    for (unsigned d = 0; d < axes.count; ++d) {
      cell += axis_cell(axes, d, axis_value(axes, d, i)) * stride;
      stride *= axes.cells[d];
    }
    cell_of[i] = cell;
    atomicAdd(count + cell, 1u);
  }
}

// Exclusive scan of n values, SCAN_BLOCK per block of 1024 threads; each
// block's total goes to sums[block] (scanned in turn, then added back).
constexpr unsigned SCAN_THREADS = 1024;
constexpr unsigned SCAN_PER_THREAD = 2;

extern "C" __global__ void __launch_bounds__(SCAN_THREADS)
    twobs_grid_scan_blocks(const unsigned* in, unsigned* out, unsigned n, unsigned* sums) {
  __shared__ unsigned warp_totals[32];
  const unsigned base = blockIdx.x * SCAN_THREADS * SCAN_PER_THREAD + threadIdx.x * SCAN_PER_THREAD;
  unsigned v[SCAN_PER_THREAD];
  unsigned mine = 0;
#pragma unroll
  for (unsigned k = 0; k < SCAN_PER_THREAD; ++k) {
    v[k] = base + k < n ? in[base + k] : 0;
    mine += v[k];
  }
  // The thread's exclusive offset within the block: a scan over warps, then over the warps' totals.
  const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  unsigned inclusive = mine;
#pragma unroll
  for (unsigned d = 1; d < 32; d <<= 1) {
    const unsigned up = __shfl_up_sync(0xffffffffu, inclusive, d);
    if (lane >= d) inclusive += up;
  }
  if (lane == 31) warp_totals[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    unsigned t = warp_totals[lane];
#pragma unroll
    for (unsigned d = 1; d < 32; d <<= 1) {
      const unsigned up = __shfl_up_sync(0xffffffffu, t, d);
      if (lane >= d) t += up;
    }
    warp_totals[lane] = t;  // inclusive over warps
  }
  __syncthreads();
  unsigned offset = inclusive - mine + (warp > 0 ? warp_totals[warp - 1] : 0);
#pragma unroll
  for (unsigned k = 0; k < SCAN_PER_THREAD; ++k) {
    if (base + k < n) out[base + k] = offset;
    offset += v[k];
  }
  if (threadIdx.x == SCAN_THREADS - 1) sums[blockIdx.x] = offset;
}

extern "C" __global__ void twobs_grid_scan_add(unsigned* out, unsigned n, const unsigned* scanned_sums) {
  const unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] += scanned_sums[i / (SCAN_THREADS * SCAN_PER_THREAD)];
}

// Each point to the next free slot of its cell: perm[slot] is its input
// index, sorted_cell[slot] its cell. `next` starts as the cells' starts.
extern "C" __global__ void twobs_grid_scatter(const unsigned* cell_of, unsigned n, unsigned* next, unsigned* perm,
                                              unsigned* sorted_cell) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const unsigned cell = cell_of[i];
    const unsigned slot = atomicAdd(next + cell, 1u);
    perm[slot] = i;
    sorted_cell[slot] = cell;
  }
}

// A component array in cell order: to[k] = from[perm[k]], 4- or 8-byte values.
extern "C" __global__ void twobs_grid_gather4(const unsigned* from, unsigned* to, const unsigned* perm, unsigned n) {
  for (unsigned k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) to[k] = from[perm[k]];
}
extern "C" __global__ void twobs_grid_gather8(const unsigned long long* from, unsigned long long* to,
                                              const unsigned* perm, unsigned n) {
  for (unsigned k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) to[k] = from[perm[k]];
}

// How a unit meets the rows of cells next to its own, as src/index.rs's
// `row_offsets` lists them (the own row first): those within `reach` cells.
// Every indexed periodic axis has at least 2 reach + 2 cells, so that no
// two offsets reach one cell and a pair of rows is met once.
constexpr unsigned MAX_ROWS = 81;  // (2 reach + 1)^2 at the largest reach, 4
struct Stencil {
  unsigned axes;           // axes indexed, 0 to 3
  int cells[3];
  unsigned periodic[3];
  unsigned rows;           // rows met, at most MAX_ROWS
  int offset[MAX_ROWS][2];  // each row's offset over axes 1 and 2
  unsigned diagonal;       // one set, each unordered pair once: the own row from the own point on
  unsigned skip_self;      // one set, every ordered pair but (i, i)
  unsigned run;            // own points per unit, at most
  unsigned stride;         // ranges a unit may take: 2 per row, and the own row's wrap
  int reach;               // cells a cutoff spans
};

// Units each row of A's cells takes: its points in runs of at most `run`.
extern "C" __global__ void twobs_grid_row_units(const unsigned* cell_start, unsigned rows, unsigned row_len,
                                                unsigned run, unsigned* units) {
  const unsigned r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows) units[r] = (cell_start[(r + 1) * row_len] - cell_start[r * row_len] + run - 1) / run;
}

__device__ __forceinline__ void push_range(uint2* ranges, unsigned& count, unsigned lo, unsigned hi) {
  ranges[count++] = make_uint2(lo, hi);
}

// Unit u: its own points of A, and the ranges of the other set's points in
// the cells next to them (`push_row_runs` in src/index.rs), with the pairs it
// visits and the partners each own point may meet.
extern "C" __global__ void twobs_grid_units(Stencil st, const unsigned* unit_start, unsigned rows,
                                            const unsigned* start_a, const unsigned* sorted_cell_a,
                                            const unsigned* start_b, unsigned total_units, uint4* units,
                                            uint2* ranges, unsigned long long* pairs,
                                            unsigned long long* partners) {
  const unsigned u = blockIdx.x * blockDim.x + threadIdx.x;
  if (u >= total_units) return;
  // The row whose units hold u: the last with unit_start[row] <= u.
  unsigned lo = 0, hi = rows;
  while (hi - lo > 1) {
    const unsigned mid = (lo + hi) / 2;
    if (unit_start[mid] <= u) lo = mid; else hi = mid;
  }
  const unsigned row = lo;
  const int len = st.axes > 0 ? st.cells[0] : 1;
  const unsigned row_first = row * len;
  const unsigned own_lo = start_a[row_first] + (u - unit_start[row]) * st.run;
  const unsigned own_hi = min(own_lo + st.run, start_a[row_first + len]);
  const int x0 = sorted_cell_a[own_lo] - row_first, x1 = sorted_cell_a[own_hi - 1] - row_first;
  int coords[3] = {0, 0, 0};
  unsigned rest = row;
  for (unsigned d = 1; d < st.axes; ++d) {
    coords[d] = rest % st.cells[d];
    rest /= st.cells[d];
  }
  uint2* mine = ranges + static_cast<size_t>(u) * st.stride;
  unsigned count = 0;
  if (st.axes == 0) {
    push_range(mine, count, 0, start_b[1]);
  }
  for (unsigned o = 0; o < st.rows && st.axes > 0; ++o) {
    int base = 0, stride = len;
    bool outside = false;
    for (unsigned d = 1; d < st.axes; ++d) {
      int c = coords[d] + st.offset[o][d - 1];
      if (st.periodic[d]) {
        c = (c % st.cells[d] + st.cells[d]) % st.cells[d];
      } else if (c < 0 || c >= st.cells[d]) {
        outside = true;
      }
      base += c * stride;
      stride *= st.cells[d];
    }
    if (outside) continue;
    const unsigned* at = start_b + base;
    if (st.diagonal && o == 0) {
      // The own row from the run on; where the row wraps, the pairs of its
      // last cells and its first are met from the first cells' runs: cells
      // x0 - reach .. -1, wrapped, less any the run already meets.
      const int h = min(x1 + st.reach, len - 1);
      push_range(mine, count, at[x0], at[h + 1]);
      const int wrapped = max(len - (st.reach - x0), h + 1);
      if (st.periodic[0] && x0 < st.reach && wrapped < len) push_range(mine, count, at[wrapped], at[len]);
      continue;
    }
    const int l = x0 - st.reach, h = x1 + st.reach;
    if (!st.periodic[0]) {
      push_range(mine, count, at[max(l, 0)], at[min(h, len - 1) + 1]);
    } else if (h - l + 1 >= len) {
      push_range(mine, count, at[0], at[len]);
    } else if (l < 0) {
      push_range(mine, count, at[0], at[h + 1]);
      push_range(mine, count, at[l + len], at[len]);
    } else if (h >= len) {
      push_range(mine, count, at[l], at[len]);
      push_range(mine, count, at[0], at[h - len + 1]);
    } else {
      push_range(mine, count, at[l], at[h + 1]);
    }
  }
  const unsigned first = u * st.stride;
  units[u] = make_uint4(own_lo, own_hi, first, first + count);
  unsigned long long met = 0;
  for (unsigned k = 0; k < count; ++k) met += mine[k].y - mine[k].x;
  const unsigned long long m = own_hi - own_lo;
  unsigned long long visited = m * met;
  if (st.diagonal) {
    // Own point i meets its row's points after it: i + 1 - (the row range's start) fewer.
    visited -= m * (own_lo + 1ull - mine[0].x) + m * (m - 1) / 2;
  } else if (st.skip_self) {
    visited -= m;
  }
  pairs[u] = visited;
  partners[u] = met;
}
