// Issue-rate microbenchmarks for the H200 (scripts/issue-rate.py): the 2PCF
// pair loop's instruction mix with no barrier and no tile loads (one shared
// tile read over and over), and streams of independent FP32 instructions.
constexpr unsigned B = 256;
extern "C" __global__ void __launch_bounds__(B) mix(const float* xs, unsigned reps, float scale, float offset, float* out) {
  __shared__ __align__(16) float tx[B], ty[B], tz[B];
  const unsigned t = threadIdx.x;
  tx[t] = xs[t];
  ty[t] = xs[B + t];
  tz[t] = xs[2 * B + t];
  __syncthreads();
  const unsigned me = (blockIdx.x * B + t) % (3 * B);
  const float ax0 = xs[me], ay0 = xs[(me + 7) % (3 * B)], az0 = xs[(me + 13) % (3 * B)];
  const float ax1 = xs[(me + 1) % (3 * B)], ay1 = xs[(me + 8) % (3 * B)], az1 = xs[(me + 14) % (3 * B)];
  float w = 0.0f;
  for (unsigned rep = 0; rep < reps; ++rep) {
#pragma unroll 2
    for (unsigned j = 0; j < B; j += 4) {
      const float4 X = *reinterpret_cast<const float4*>(tx + j);
      const float4 Y = *reinterpret_cast<const float4*>(ty + j);
      const float4 Z = *reinterpret_cast<const float4*>(tz + j);
      const float qx[4] = {X.x, X.y, X.z, X.w}, qy[4] = {Y.x, Y.y, Y.z, Y.w}, qz[4] = {Z.x, Z.y, Z.z, Z.w};
#pragma unroll
      for (unsigned k = 0; k < 4; ++k) {
        float dx = ax0 - qx[k], dy = ay0 - qy[k], dz = az0 - qz[k];
        w += __saturatef(__fmaf_rn(fmaf(dz, dz, fmaf(dy, dy, dx * dx)), scale, offset));
        dx = ax1 - qx[k]; dy = ay1 - qy[k]; dz = az1 - qz[k];
        w += __saturatef(__fmaf_rn(fmaf(dz, dz, fmaf(dy, dy, dx * dx)), scale, offset));
      }
    }
  }
  out[blockIdx.x * B + t] = w;
}

// The same pairs, own point outer: an own coordinate serves 4 differences in a row.
extern "C" __global__ void __launch_bounds__(B) mix_own_outer(const float* xs, unsigned reps, float scale, float offset, float* out) {
  __shared__ __align__(16) float tx[B], ty[B], tz[B];
  const unsigned t = threadIdx.x;
  tx[t] = xs[t];
  ty[t] = xs[B + t];
  tz[t] = xs[2 * B + t];
  __syncthreads();
  const unsigned me = (blockIdx.x * B + t) % (3 * B);
  const float ax0 = xs[me], ay0 = xs[(me + 7) % (3 * B)], az0 = xs[(me + 13) % (3 * B)];
  const float ax1 = xs[(me + 1) % (3 * B)], ay1 = xs[(me + 8) % (3 * B)], az1 = xs[(me + 14) % (3 * B)];
  float w = 0.0f;
  for (unsigned rep = 0; rep < reps; ++rep) {
#pragma unroll 2
    for (unsigned j = 0; j < B; j += 4) {
      const float4 X = *reinterpret_cast<const float4*>(tx + j);
      const float4 Y = *reinterpret_cast<const float4*>(ty + j);
      const float4 Z = *reinterpret_cast<const float4*>(tz + j);
      const float qx[4] = {X.x, X.y, X.z, X.w}, qy[4] = {Y.x, Y.y, Y.z, Y.w}, qz[4] = {Z.x, Z.y, Z.z, Z.w};
#pragma unroll
      for (unsigned k = 0; k < 4; ++k) {
        const float dx = ax0 - qx[k], dy = ay0 - qy[k], dz = az0 - qz[k];
        w += __saturatef(__fmaf_rn(fmaf(dz, dz, fmaf(dy, dy, dx * dx)), scale, offset));
      }
#pragma unroll
      for (unsigned k = 0; k < 4; ++k) {
        const float dx = ax1 - qx[k], dy = ay1 - qy[k], dz = az1 - qz[k];
        w += __saturatef(__fmaf_rn(fmaf(dz, dz, fmaf(dy, dy, dx * dx)), scale, offset));
      }
    }
  }
  out[blockIdx.x * B + t] = w;
}

extern "C" __global__ void __launch_bounds__(B) mix2(const float* xs, unsigned reps, float scale, float offset, float* out) {
  __shared__ __align__(16) float tx[B], ty[B], tz[B];
  const unsigned t = threadIdx.x;
  tx[t] = xs[t];
  ty[t] = xs[B + t];
  tz[t] = xs[2 * B + t];
  __syncthreads();
  const unsigned me = (blockIdx.x * B + t) % (3 * B);
  const float ax0 = xs[me], ay0 = xs[(me + 7) % (3 * B)], az0 = xs[(me + 13) % (3 * B)];
  const float ax1 = xs[(me + 1) % (3 * B)], ay1 = xs[(me + 8) % (3 * B)], az1 = xs[(me + 14) % (3 * B)];
  float w = 0.0f, v = 0.0f;
  for (unsigned rep = 0; rep < reps; ++rep) {
#pragma unroll 2
    for (unsigned j = 0; j < B; j += 4) {
      const float4 X = *reinterpret_cast<const float4*>(tx + j);
      const float4 Y = *reinterpret_cast<const float4*>(ty + j);
      const float4 Z = *reinterpret_cast<const float4*>(tz + j);
      const float qx[4] = {X.x, X.y, X.z, X.w}, qy[4] = {Y.x, Y.y, Y.z, Y.w}, qz[4] = {Z.x, Z.y, Z.z, Z.w};
#pragma unroll
      for (unsigned k = 0; k < 4; ++k) {
        float dx = ax0 - qx[k], dy = ay0 - qy[k], dz = az0 - qz[k];
        w += __saturatef(__fmaf_rn(fmaf(dz, dz, fmaf(dy, dy, dx * dx)), scale, offset));
        dx = ax1 - qx[k]; dy = ay1 - qy[k]; dz = az1 - qz[k];
        v += __saturatef(__fmaf_rn(fmaf(dz, dz, fmaf(dy, dy, dx * dx)), scale, offset));
      }
    }
  }
  out[blockIdx.x * B + t] = w + v;
}

extern "C" __global__ void __launch_bounds__(B) mix4(const float* xs, unsigned reps, float scale, float offset, float* out) {
  __shared__ __align__(16) float tx[B], ty[B], tz[B];
  const unsigned t = threadIdx.x;
  tx[t] = xs[t];
  ty[t] = xs[B + t];
  tz[t] = xs[2 * B + t];
  __syncthreads();
  const unsigned me = (blockIdx.x * B + t) % (3 * B);
  const float ax0 = xs[me], ay0 = xs[(me + 7) % (3 * B)], az0 = xs[(me + 13) % (3 * B)];
  const float ax1 = xs[(me + 1) % (3 * B)], ay1 = xs[(me + 8) % (3 * B)], az1 = xs[(me + 14) % (3 * B)];
  float w[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (unsigned rep = 0; rep < reps; ++rep) {
#pragma unroll 2
    for (unsigned j = 0; j < B; j += 4) {
      const float4 X = *reinterpret_cast<const float4*>(tx + j);
      const float4 Y = *reinterpret_cast<const float4*>(ty + j);
      const float4 Z = *reinterpret_cast<const float4*>(tz + j);
      const float qx[4] = {X.x, X.y, X.z, X.w}, qy[4] = {Y.x, Y.y, Y.z, Y.w}, qz[4] = {Z.x, Z.y, Z.z, Z.w};
#pragma unroll
      for (unsigned k = 0; k < 4; ++k) {
        float dx = ax0 - qx[k], dy = ay0 - qy[k], dz = az0 - qz[k];
        w[k & 1] += __saturatef(__fmaf_rn(fmaf(dz, dz, fmaf(dy, dy, dx * dx)), scale, offset));
        dx = ax1 - qx[k]; dy = ay1 - qy[k]; dz = az1 - qz[k];
        w[2 + (k & 1)] += __saturatef(__fmaf_rn(fmaf(dz, dz, fmaf(dy, dy, dx * dx)), scale, offset));
      }
    }
  }
  out[blockIdx.x * B + t] = w[0] + w[1] + w[2] + w[3];
}

extern "C" __global__ void __launch_bounds__(B) ffma(const float* xs, unsigned reps, float scale, float offset, float* out) {
  const unsigned t = threadIdx.x;
  float a[8];
#pragma unroll
  for (unsigned k = 0; k < 8; ++k) a[k] = xs[(t + k) % (3 * B)];
  for (unsigned rep = 0; rep < reps; ++rep) {
#pragma unroll 16
    for (unsigned j = 0; j < 64; ++j) {
#pragma unroll
      for (unsigned k = 0; k < 8; ++k) a[k] = __fmaf_rn(a[k], scale, offset);
    }
  }
  float s = 0.0f;
#pragma unroll
  for (unsigned k = 0; k < 8; ++k) s += a[k];
  out[blockIdx.x * B + t] = s;
}

// FFMAs whose three operands are all registers (no uniform or constant operand).
extern "C" __global__ void __launch_bounds__(B) ffma3(const float* xs, unsigned reps, float scale, float offset, float* out) {
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
      for (unsigned k = 0; k < 8; ++k) a[k] = __fmaf_rn(a[k], b[k], c[k]);
    }
  }
  float s = 0.0f;
#pragma unroll
  for (unsigned k = 0; k < 8; ++k) s += a[k];
  out[blockIdx.x * B + t] = s;
}

// Differences and squares as the pair loop makes them: FADD and FMUL on two registers.
extern "C" __global__ void __launch_bounds__(B) fadd2(const float* xs, unsigned reps, float scale, float offset, float* out) {
  const unsigned t = threadIdx.x;
  float a[8], b[8];
#pragma unroll
  for (unsigned k = 0; k < 8; ++k) {
    a[k] = xs[(t + k) % (3 * B)];
    b[k] = xs[(t + k + 8) % (3 * B)] * scale;
  }
  for (unsigned rep = 0; rep < reps; ++rep) {
#pragma unroll 16
    for (unsigned j = 0; j < 64; ++j) {
#pragma unroll
      for (unsigned k = 0; k < 8; ++k) a[k] = __fadd_rn(a[k], b[k]);
    }
  }
  float s = 0.0f;
#pragma unroll
  for (unsigned k = 0; k < 8; ++k) s += a[k];
  out[blockIdx.x * B + t] = s;
}
