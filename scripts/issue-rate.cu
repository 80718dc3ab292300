// Issue-rate microbenchmarks for the H200 (scripts/issue-rate.py): the 2PCF
// pair loop's instruction mix with no barrier and no tile loads (one shared
// tile read over and over), and streams of independent FP32 instructions.
constexpr unsigned B = 256;

// The 2PCF pair loop over one shared tile, `reps` times: two own points, a
// weight a pair, summed into ACCS accumulators. OWN_OUTER walks the four
// tile points of a run once per own point instead of both own points per
// tile point.
template <unsigned ACCS, bool OWN_OUTER>
__device__ __forceinline__ void pairs(const float* xs, unsigned reps, float scale, float offset, float* out) {
  __shared__ __align__(16) float tx[B], ty[B], tz[B];
  const unsigned t = threadIdx.x;
  tx[t] = xs[t];
  ty[t] = xs[B + t];
  tz[t] = xs[2 * B + t];
  __syncthreads();
  const unsigned me = (blockIdx.x * B + t) % (3 * B);
  const float ax0 = xs[me], ay0 = xs[(me + 7) % (3 * B)], az0 = xs[(me + 13) % (3 * B)];
  const float ax1 = xs[(me + 1) % (3 * B)], ay1 = xs[(me + 8) % (3 * B)], az1 = xs[(me + 14) % (3 * B)];
  const float ax[2] = {ax0, ax1}, ay[2] = {ay0, ay1}, az[2] = {az0, az1};
  float w[ACCS] = {};
  for (unsigned rep = 0; rep < reps; ++rep) {
#pragma unroll 2
    for (unsigned j = 0; j < B; j += 4) {
      const float4 X = *reinterpret_cast<const float4*>(tx + j);
      const float4 Y = *reinterpret_cast<const float4*>(ty + j);
      const float4 Z = *reinterpret_cast<const float4*>(tz + j);
      const float qx[4] = {X.x, X.y, X.z, X.w}, qy[4] = {Y.x, Y.y, Y.z, Y.w}, qz[4] = {Z.x, Z.y, Z.z, Z.w};
#pragma unroll
      for (unsigned n = 0; n < 8; ++n) {
        const unsigned k = OWN_OUTER ? n % 4 : n / 2, r = OWN_OUTER ? n / 4 : n % 2;
        const float dx = ax[r] - qx[k], dy = ay[r] - qy[k], dz = az[r] - qz[k];
        // One accumulator; one an own point; or one an own point and tile point parity.
        const unsigned acc = ACCS == 4 ? 2 * r + (k & 1) : ACCS == 2 ? r : 0;
        w[acc] += __saturatef(__fmaf_rn(fmaf(dz, dz, fmaf(dy, dy, dx * dx)), scale, offset));
      }
    }
  }
  float s = w[0];
#pragma unroll
  for (unsigned k = 1; k < ACCS; ++k) s += w[k];
  out[blockIdx.x * B + t] = s;
}

extern "C" __global__ void __launch_bounds__(B) mix(const float* xs, unsigned reps, float scale, float offset, float* out) {
  pairs<1, false>(xs, reps, scale, offset, out);
}
// The same pairs, own point outer: an own coordinate serves 4 differences in a row.
extern "C" __global__ void __launch_bounds__(B) mix_own_outer(const float* xs, unsigned reps, float scale,
                                                              float offset, float* out) {
  pairs<1, true>(xs, reps, scale, offset, out);
}
extern "C" __global__ void __launch_bounds__(B) mix2(const float* xs, unsigned reps, float scale, float offset, float* out) {
  pairs<2, false>(xs, reps, scale, offset, out);
}
extern "C" __global__ void __launch_bounds__(B) mix4(const float* xs, unsigned reps, float scale, float offset, float* out) {
  pairs<4, false>(xs, reps, scale, offset, out);
}

// Eight independent chains of one FP32 instruction, `reps` x 64 deep.
enum class Stream { FfmaUniform, FfmaRegisters, FaddRegisters };
template <Stream S>
__device__ __forceinline__ void stream(const float* xs, unsigned reps, float scale, float offset, float* out) {
  const unsigned t = threadIdx.x;
  float a[8], b[8], c[8];
#pragma unroll
  for (unsigned k = 0; k < 8; ++k) {
    a[k] = xs[(t + k) % (3 * B)];
    b[k] = xs[(t + k + 8) % (3 * B)] * scale;
    c[k] = xs[(t + k + 16) % (3 * B)] + offset;
  }
  for (unsigned rep = 0; rep < reps; ++rep) {
#pragma unroll 16
    for (unsigned j = 0; j < 64; ++j) {
#pragma unroll
      for (unsigned k = 0; k < 8; ++k) {
        if (S == Stream::FfmaUniform) a[k] = __fmaf_rn(a[k], scale, offset);  // register x uniform + register
        if (S == Stream::FfmaRegisters) a[k] = __fmaf_rn(a[k], b[k], c[k]);  // three registers
        if (S == Stream::FaddRegisters) a[k] = __fadd_rn(a[k], b[k]);        // two registers, as the differences
      }
    }
  }
  float s = 0.0f;
#pragma unroll
  for (unsigned k = 0; k < 8; ++k) s += a[k];
  out[blockIdx.x * B + t] = s;
}

extern "C" __global__ void __launch_bounds__(B) ffma(const float* xs, unsigned reps, float scale, float offset, float* out) {
  stream<Stream::FfmaUniform>(xs, reps, scale, offset, out);
}
extern "C" __global__ void __launch_bounds__(B) ffma3(const float* xs, unsigned reps, float scale, float offset, float* out) {
  stream<Stream::FfmaRegisters>(xs, reps, scale, offset, out);
}
extern "C" __global__ void __launch_bounds__(B) fadd2(const float* xs, unsigned reps, float scale, float offset, float* out) {
  stream<Stream::FaddRegisters>(xs, reps, scale, offset, out);
}
