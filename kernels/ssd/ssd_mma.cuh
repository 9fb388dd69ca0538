// Tensor-core pieces of the bf16 SSD kernels (ssd_forward_tc_cuda.cu, ssd_backward_tc_cuda.cu):
// bf16 tiles in shared memory and warp tiles of the mma m16n8k16 bf16 -> f32 product
// (kernels/core/mma.cuh), plus the tiles' loaders.
//
// Tiles: a matrix of R x W elements is stored row major as bf16 with R and W padded up to
// multiples of 16 (the mma's k and m step) and zeros in the padding, so every product runs over
// whole 16 x 16 fragments and the padding adds nothing. The row stride is pad16(W) + 8 elements:
// rows stay 16-byte aligned (ldmatrix reads 16-byte rows) and the stride is an odd number of
// 16-byte units, so the 8 rows of one ldmatrix matrix fall in 8 different bank groups.
//
// A warp tile covers (16 MT) x (16 NT) outputs; the 8 warps of a block take the warp tiles of an
// output in turn. An operand is read either as stored (X[m][k] for A, X[n][k] for B: ldmatrix)
// or transposed (X[k][m], X[k][n]: ldmatrix .trans): the fragment loads of kernels/core/tile.cuh
// (frag_a, frag_a_trans, frag_b2, frag_b2_trans; a B load covers the n-tiles n0 and n0 + 8), in
// their LaneParts form (the lane's parts computed once, the sums in the order these kernels had).
#pragma once
#include "kernels/core/mma.cuh"
#include "kernels/core/tile.cuh"
#include "kernels/ssd/ssd_tile.cuh"

namespace amor::cuda::ssd::tc {

constexpr int kWarps = kThreads / 32;
// exp(v) as mma::exp2_approx(v kLog2e): one ex2.approx (relative error ~2^-22, far below the
// bf16 rounding of the tiles such factors scale) where expf takes several instructions.
using mma::kLog2e;

__host__ __device__ inline int pad16(int v) { return (v + 15) / 16 * 16; }
// Row stride, in elements, of a bf16 tile whose rows hold `width` elements (tile::padded_ld).
__host__ __device__ inline int stride_of(int width) {
  return int(tile::padded_ld<bf16_t>(pad16(width)));
}
// Bytes of an R x W bf16 tile (R padded to 16), rounded up to 16 so that the next tile stays
// 16-byte aligned.
__host__ __device__ inline int64_t tile_bytes(int64_t rows, int64_t width) {
  return (int64_t(pad16(int(rows))) * stride_of(int(width)) * 2 + 15) / 16 * 16;
}

// ---- loaders (block-wide; the caller synchronises afterwards)

// dst (stride ld) = rows t0 .. t0 + len - 1 of a [B, T, X, W] bf16 tensor at (b, xi), each row
// times scale[i] when scale is not null; zeros for the padding up to pad16(rows) x pad16(W).
// 16 bytes at a time where W is a multiple of 8 and the tensor 16-byte aligned.
__device__ inline void load_rows_bf16(bf16_t* dst, int ld, const bf16_t* __restrict__ src,
                                      int64_t b, int64_t xi, int64_t t0, int len, int rows,
                                      int64_t Tn, int64_t X, int W, const float* scale) {
  const int R = pad16(rows), C = pad16(W);
  const bool vec = W % 8 == 0 && (reinterpret_cast<uintptr_t>(src) & 15u) == 0;
  if (vec) {
    const int per = C / 8;
    for (int e = threadIdx.x; e < R * per; e += blockDim.x) {
      const int i = e / per, w = (e % per) * 8;
      uint4 raw = make_uint4(0, 0, 0, 0);
      if (i < len && w < W) {
        raw = *reinterpret_cast<const uint4*>(src + ((b * Tn + t0 + i) * X + xi) * W + w);
        if (scale) {
          bf16_t v[8];
          memcpy(v, &raw, 16);
          const float s = scale[i];
#pragma unroll
          for (int q = 0; q < 8; ++q) v[q] = from_f32<bf16_t>(to_f32(v[q]) * s);
          memcpy(&raw, v, 16);
        }
      }
      *reinterpret_cast<uint4*>(dst + i * ld + w) = raw;
    }
    return;
  }
  for (int e = threadIdx.x; e < R * C; e += blockDim.x) {
    const int i = e / C, w = e % C;
    float v = 0.0f;
    if (i < len && w < W) {
      v = to_f32(src[((b * Tn + t0 + i) * X + xi) * W + w]);
      if (scale) v *= scale[i];
    }
    dst[i * ld + w] = from_f32<bf16_t>(v);
  }
}

// dst (stride ld) = one f32 [P, N] state rounded to bf16, zeros for the padding. Returns this
// thread's part of sum_{p,n} src[p][n] other[p][n] (f32, unrounded) when `other` is not null,
// else 0. Four elements at a time where N is a multiple of 4 and both states 16-byte aligned.
__device__ inline float load_state_bf16(bf16_t* dst, int ld, const float* __restrict__ src, int P,
                                        int N, const float* __restrict__ other) {
  const int R = pad16(P), C = pad16(N);
  float dot = 0.0f;
  const bool vec = N % 4 == 0 && (reinterpret_cast<uintptr_t>(src) & 15u) == 0 &&
                   (reinterpret_cast<uintptr_t>(other) & 15u) == 0;
  if (vec) {
    const int per = C / 4;
    for (int e = threadIdx.x; e < R * per; e += blockDim.x) {
      const int p = e / per, n = (e % per) * 4;
      float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      if (p < P && n < N) {
        v = *reinterpret_cast<const float4*>(src + p * N + n);
        if (other) {
          const float4 o = *reinterpret_cast<const float4*>(other + p * N + n);
          dot += v.x * o.x + v.y * o.y + v.z * o.z + v.w * o.w;
        }
      }
      const uint32_t lo = mma::pack_bf16x2(v.x, v.y), hi = mma::pack_bf16x2(v.z, v.w);
      *reinterpret_cast<uint2*>(dst + p * ld + n) = make_uint2(lo, hi);
    }
    return dot;
  }
  for (int e = threadIdx.x; e < R * C; e += blockDim.x) {
    const int p = e / C, n = e % C;
    float v = 0.0f;
    if (p < P && n < N) {
      v = src[p * N + n];
      if (other) dot += v * other[p * N + n];
    }
    dst[p * ld + n] = from_f32<bf16_t>(v);
  }
  return dot;
}

// ---- warp tiles

// Calls f(m0, n0) for each of this warp's warp tiles of an M x N output (M, N multiples of 16).
// Warp-uniform: every lane of a warp gets the same tiles.
template <int MT, int NT, class F>
__device__ __forceinline__ void for_warp_tiles(int M, int N, F&& f) {
  const int tm = (M + 16 * MT - 1) / (16 * MT), tn = (N + 16 * NT - 1) / (16 * NT);
  for (int t = int(threadIdx.x) / 32; t < tm * tn; t += kWarps) {
    f((t / tn) * 16 * MT, (t % tn) * 16 * NT);
  }
}

// The f32 accumulators of one (16 MT) x (16 NT) warp tile at (m0, n0) of an M x N output:
// c[i][j] is the C fragment of rows m0 + 16 i .., columns n0 + 8 j ...
template <int MT, int NT>
struct WarpTile {
  int m0, n0, M, N;
  float c[MT][2 * NT][4];

  __device__ __forceinline__ WarpTile(int m0_, int n0_, int M_, int N_)
      : m0(m0_), n0(n0_), M(M_), N(N_) {
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < 2 * NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) c[i][j][e] = 0.0f;
  }

  // Row and column of accumulator c[i][j][e] (mma.cuh: c[0], c[1] row g, c[2], c[3] row g + 8).
  __device__ __forceinline__ int row(int i, int e) const {
    return m0 + 16 * i + (int(threadIdx.x) % 32) / 4 + (e >= 2 ? 8 : 0);
  }
  __device__ __forceinline__ int col(int j, int e) const {
    return n0 + 8 * j + 2 * (int(threadIdx.x) % 4) + (e & 1);
  }

  // c += sum_{k0 <= k < k1} A(m, k) B(k, n); k0, k1 multiples of 16. AT: A(m, k) = Am[k][m],
  // else Am[m][k]; BT: B(k, n) = Bm[k][n], else Bm[n][k]. Fragments past M or N are skipped
  // (warp-uniform tests).
  template <bool AT, bool BT>
  __device__ __forceinline__ void mac(const bf16_t* Am, int lda, const bf16_t* Bm, int ldb, int k0,
                                      int k1) {
    const tile::LaneParts lp = tile::lane_parts(int(threadIdx.x) % 32);
#pragma unroll
    for (int k = k0; k < k1; k += 16) {
      uint32_t a[MT][4], b[NT][4];
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        const int m = m0 + 16 * i;
        if (m >= M) continue;
        if (AT) {
          tile::frag_a_trans(a[i], Am, lda, m, k, lp);
        } else {
          tile::frag_a(a[i], Am, lda, m, k, lp);
        }
      }
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const int n = n0 + 16 * j;
        if (n >= N) continue;
        if (BT) {
          tile::frag_b2_trans(b[j], Bm, ldb, k, n, lp);
        } else {
          tile::frag_b2(b[j], Bm, ldb, k, n, lp);
        }
      }
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        if (m0 + 16 * i >= M) continue;
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          if (n0 + 16 * j >= N) continue;
          tile::mma_x2(c[i][2 * j], c[i][2 * j + 1], a[i], b[j]);
        }
      }
    }
  }

  // f(row, col, value&) for every accumulator of the tile inside M x N.
  template <class F>
  __device__ __forceinline__ void each(F&& f) {
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < 2 * NT; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e)
          if (row(i, e) < M && col(j, e) < N) f(row(i, e), col(j, e), c[i][j][e]);
  }
};

// ---- a [P, N] state held in registers across chunks (the fused kernels of ssd_state_tc_cuda.cu
// and ssd_forward_tc_cuda.cu). Warp w holds the 32 x 32 warp tile (w / tn, w % tn) of the
// pad16(P) x pad16(N) state, tn = ceil(pad16(N) / 32), as f32 accumulators (32 registers per
// thread); the state fits when every tile has a warp (P = 64, N = 128: 2 x 4 tiles, one per warp).
// Tile elements in the padding stay zero: they only ever accumulate products of zero padding.
__host__ __device__ inline int state_tiles_n(int N) { return (pad16(N) + 31) / 32; }
__host__ __device__ inline bool state_fits(int P, int N) {
  return ((pad16(P) + 31) / 32) * state_tiles_n(N) <= kWarps;
}
// This warp's tile; live: whether the warp holds one (warp-uniform).
__device__ __forceinline__ WarpTile<2, 2> state_tile(int P, int N, bool& live) {
  const int tn = state_tiles_n(N), tm = (pad16(P) + 31) / 32, w = int(threadIdx.x) / 32;
  live = w < tm * tn;
  return WarpTile<2, 2>((w / tn) * 32, (w % tn) * 32, pad16(P), pad16(N));
}
// st = src [P, N] f32 (zeros in the padding), or zeros when src is null.
__device__ __forceinline__ void state_load(WarpTile<2, 2>& st, const float* __restrict__ src,
                                           int P, int N) {
  st.each([&](int p, int n, float& v) { v = src && p < P && n < N ? src[p * N + n] : 0.0f; });
}
__device__ __forceinline__ void state_store(WarpTile<2, 2>& st, float* __restrict__ dst, int P,
                                            int N) {
  st.each([&](int p, int n, float& v) {
    if (p < P && n < N) dst[p * N + n] = v;
  });
}
// dst (row stride ld) = st rounded to bf16, rows < R and columns < C (R = pad16(P), C = pad16(N)
// writes the padding's zeros too: a shared-memory operand tile). Pairs of neighbouring columns
// as one 4-byte store where ld is even.
__device__ __forceinline__ void state_store_bf16(WarpTile<2, 2>& st, bf16_t* dst, int ld, int R,
                                                 int C) {
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; e += 2) {
        const int r = st.row(i, e), c = st.col(j, e);
        if (r >= R || c >= C) continue;
        if (c + 1 < C && ld % 2 == 0) {
          *reinterpret_cast<uint32_t*>(dst + r * ld + c) =
              mma::pack_bf16x2(st.c[i][j][e], st.c[i][j][e + 1]);
        } else {
          dst[r * ld + c] = from_f32<bf16_t>(st.c[i][j][e]);
          if (c + 1 < C) dst[r * ld + c + 1] = from_f32<bf16_t>(st.c[i][j][e + 1]);
        }
      }
}

// Global dst (row stride ld) = st rounded to bf16, rows < R and columns < C, through this warp's
// 32 x 32 staging tile in shared memory (kStageRow elements a row: the fragment stores hit 32
// distinct banks), so that each lane writes 16 contiguous bytes: 4 stores a lane, each warp store
// 8 rows of 64 bytes, instead of 16 scattered 4-byte stores (8 rows of 16 bytes each). The
// materialised chunk states of span_states (268 MB per call at 16K tokens, H 64) took it from 139
// to 294 us with the scattered stores (bench-ssd --kernels, 2026-12-01 session 2).
constexpr int kStageRow = 40;
constexpr int64_t kStagingBytes = int64_t(kWarps) * 32 * kStageRow * 2;
__device__ __forceinline__ void state_store_bf16_staged(WarpTile<2, 2>& st, bf16_t* stage,
                                                        bf16_t* dst, int ld, int R, int C) {
  const int lane = int(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; e += 2) {
        const int lr = 16 * i + g + (e >= 2 ? 8 : 0), lc = 8 * j + 2 * t;
        *reinterpret_cast<uint32_t*>(stage + lr * kStageRow + lc) =
            mma::pack_bf16x2(st.c[i][j][e], st.c[i][j][e + 1]);
      }
  mma::sync_warp();
  const bool vec = (reinterpret_cast<uintptr_t>(dst) & 15u) == 0 && ld % 8 == 0;
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int piece = lane + 32 * q, lr = piece / 4, lc = 8 * (piece % 4);
    const int r = st.m0 + lr, c = st.n0 + lc;
    if (r >= R) continue;
    const bf16_t* from = stage + lr * kStageRow + lc;
    if (vec && c + 8 <= C) {
      *reinterpret_cast<uint4*>(dst + int64_t(r) * ld + c) = *reinterpret_cast<const uint4*>(from);
    } else {
      for (int x = 0; x < 8 && c + x < C; ++x) dst[int64_t(r) * ld + c + x] = from[x];
    }
  }
  mma::sync_warp();  // the staging tile may be written again
}

// This thread's pieces (i, w) of a rows x per grid// This thread's pieces (i, w) of a rows x per grid, in the order of e = i per + w = threadIdx.x,
// threadIdx.x + blockDim.x, ...: the block-wide loop of the copies below, stepped by row and
// piece increments instead of a division per piece.
struct PieceWalk {
  int i, w, rows, per, di, dw;
  __device__ __forceinline__ PieceWalk(int rows_, int per_)
      : i(int(threadIdx.x) / per_), w(int(threadIdx.x) % per_), rows(rows_), per(per_),
        di(int(blockDim.x) / per_), dw(int(blockDim.x) % per_) {}
  __device__ __forceinline__ bool more() const { return i < rows; }
  __device__ __forceinline__ void next() {
    i += di;
    w += dw;
    if (w >= per) {
      w -= per;
      ++i;
    }
  }
};

// dst (stride ld) = rows t0 .. t0 + len - 1 of a [B, T, X, W] bf16 tensor at (b, xi), zeros for
// the padding up to pad16(len) x pad16(W): by cp.async where W is a multiple of 8 and the tensor
// 16-byte aligned (complete after cp_async_wait and a barrier), else by plain loads and stores
// (complete after a barrier). The caller commits the group.
// Blocks of kThreads threads (every kernel that copies with it). Where the thread count is a
// multiple of the pieces per row and the rows a multiple of the rows per pass (P, N multiples of 8
// up to 256, the chunk a multiple of 16: the presets), each thread copies the same column piece of
// every step-th row: no division per piece, and with compile-time sizes (ssd_tile.cuh's Shape) a
// fixed, unrolled count of copies whose addresses advance by a constant. ncu (2026-12-01): the
// general walk was a quarter of the chunk scan's issued instructions.
__device__ __forceinline__ void load_rows_async(bf16_t* dst, int ld, const bf16_t* __restrict__ src,
                                                int64_t b, int64_t xi, int64_t t0, int len,
                                                int64_t Tn, int64_t X, int W) {
  if (W % 8 == 0 && (reinterpret_cast<uintptr_t>(src) & 15u) == 0) {
    const bf16_t* row0 = src + ((b * Tn + t0) * X + xi) * W;
    const int64_t rs = X * W;
    const int per = pad16(W) / 8, rows = pad16(len);
    if (kThreads % per == 0 && rows % (kThreads / per) == 0) {
      const int step = kThreads / per, i0 = int(threadIdx.x) / per;
      const int w = 8 * (int(threadIdx.x) % per);
      const bf16_t* s = row0 + i0 * rs + w;
      bf16_t* d = dst + i0 * ld + w;
#pragma unroll
      for (int j = 0; j < rows / step; ++j) {
        const bool valid = w < W && i0 + j * step < len;
        mma::cp_async_16(d + j * step * ld, valid ? s + j * step * rs : src, valid);
      }
      return;
    }
    for (PieceWalk it(pad16(len), pad16(W) / 8); it.more(); it.next()) {
      const int i = it.i, w = 8 * it.w;
      const bool valid = i < len && w < W;
      mma::cp_async_16(dst + i * ld + w, valid ? row0 + i * rs + w : src, valid);
    }
    return;
  }
  load_rows_bf16(dst, ld, src, b, xi, t0, len, len, Tn, X, W, nullptr);
}

// This thread's part of sum_{r < R, c < W} a[r][c] b[r][c] over two bf16 tiles with one row
// stride ld (a multiple of 8, as stride_of gives; tiles 16-byte aligned): 8 elements at a time
// where W is a multiple of 8, else one at a time; f32 products and sums.
__device__ inline float tile_dot_bf16(const bf16_t* a, const bf16_t* b, int ld, int R, int W) {
  float s = 0.0f;
  if (W % 8 == 0) {
    for (PieceWalk it(R, W / 8); it.more(); it.next()) {
      const int at = it.i * ld + 8 * it.w;
      const uint4 va = *reinterpret_cast<const uint4*>(a + at);
      const uint4 vb = *reinterpret_cast<const uint4*>(b + at);
      const uint32_t ua[4] = {va.x, va.y, va.z, va.w}, ub[4] = {vb.x, vb.y, vb.z, vb.w};
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const uint32_t alo = ua[q] << 16, ahi = ua[q] & 0xffff0000u;
        const uint32_t blo = ub[q] << 16, bhi = ub[q] & 0xffff0000u;
        float fa, fb, fc, fd;
        memcpy(&fa, &alo, 4);
        memcpy(&fb, &blo, 4);
        memcpy(&fc, &ahi, 4);
        memcpy(&fd, &bhi, 4);
        s += fa * fb + fc * fd;
      }
    }
    return s;
  }
  const int warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  for (int r = warp; r < R; r += int(blockDim.x) / 32)
    for (int c = lane; c < W; c += 32) s += to_f32(a[r * ld + c]) * to_f32(b[r * ld + c]);
  return s;
}

// The rounding of load_rows_bf16's scaling, applied to an mma fragment or a staged tile.
using mma::scale_bf16x2;

// Rows r < R of a bf16 tile (stride ld, W columns) times w(r), rounded back to bf16 (the rounding
// of scale_bf16x2), in place, block-wide: 8 columns per 16-byte load where W is a multiple of 8
// and rows start 16-byte aligned (ld a multiple of 8), else one element at a time. Complete after
// a barrier. Scaling a staged tile once costs a thread two 16-byte pieces per 64 x 64 chunk; the
// same scaling applied to every MMA fragment (mac_scaled_rows) was ~80% of a k step's issued
// instructions (ncu, 2026-12-01).
template <class Wf>
__device__ __forceinline__ void scale_rows_bf16(bf16_t* tile, int ld, int R, int W, Wf&& w) {
  if (W % 8 == 0 && ld % 8 == 0) {
    const int per = W / 8;
    for (int e = int(threadIdx.x); e < R * per; e += int(blockDim.x)) {
      const int r = e / per, c = 8 * (e % per);
      uint4* at = reinterpret_cast<uint4*>(tile + r * ld + c);
      const float f = w(r);
      uint4 v = *at;
      v.x = scale_bf16x2(v.x, f, f);
      v.y = scale_bf16x2(v.y, f, f);
      v.z = scale_bf16x2(v.z, f, f);
      v.w = scale_bf16x2(v.w, f, f);
      *at = v;
    }
    return;
  }
  for (int e = int(threadIdx.x); e < R * W; e += int(blockDim.x)) {
    const int r = e / W, c = e % W;
    tile[r * ld + c] = from_f32<bf16_t>(to_f32(tile[r * ld + c]) * w(r));
  }
}

// t += sum_{k < K} A(m, k) B(k, n) with A(m, k) = w(k) Am[k][m] (rounded to bf16 as the product
// of load_rows_bf16's scaling would be) and B(k, n) = Bm[k][n]: WarpTile::mac<true, true> with
// the rows of Am scaled by w on the way (w(k) finite for every k < K; zero rows give zero).
template <int MT, int NT, class W>
__device__ __forceinline__ void mac_scaled_rows(WarpTile<MT, NT>& t, const bf16_t* Am, int lda,
                                                W&& w, const bf16_t* Bm, int ldb, int K) {
  const int tq = int(threadIdx.x) % 32 % 4;
  const tile::LaneParts lp = tile::lane_parts(int(threadIdx.x) % 32);
#pragma unroll
  for (int k = 0; k < K; k += 16) {
    // a[0], a[1] hold k + 2 tq, k + 2 tq + 1; a[2], a[3] the same + 8 (mma.cuh's A layout).
    const float w0 = w(k + 2 * tq), w1 = w(k + 2 * tq + 1);
    const float w2 = w(k + 2 * tq + 8), w3 = w(k + 2 * tq + 9);
    uint32_t a[MT][4], b[NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      const int m = t.m0 + 16 * i;
      if (m >= t.M) continue;
      tile::frag_a_trans(a[i], Am, lda, m, k, lp);
      a[i][0] = scale_bf16x2(a[i][0], w0, w1);
      a[i][1] = scale_bf16x2(a[i][1], w0, w1);
      a[i][2] = scale_bf16x2(a[i][2], w2, w3);
      a[i][3] = scale_bf16x2(a[i][3], w2, w3);
    }
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const int n = t.n0 + 16 * j;
      if (n >= t.N) continue;
      tile::frag_b2_trans(b[j], Bm, ldb, k, n, lp);
    }
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      if (t.m0 + 16 * i >= t.M) continue;
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        if (t.n0 + 16 * j >= t.N) continue;
        tile::mma_x2(t.c[i][2 * j], t.c[i][2 * j + 1], a[i], b[j]);
      }
    }
  }
}

// t += sum_{k0 <= k < k1} A(m, k) B(k, n) with A(m, k) = w(m) Am[m][k] (rounded to bf16) and
// B(k, n) = Bm[k][n]: WarpTile::mac<false, true> with the rows of Am scaled by w on the way.
template <int MT, int NT, class W>
__device__ __forceinline__ void mac_scaled_a(WarpTile<MT, NT>& t, const bf16_t* Am, int lda,
                                             W&& w, const bf16_t* Bm, int ldb, int k0, int k1) {
  const int g = int(threadIdx.x) % 32 / 4;
  const tile::LaneParts lp = tile::lane_parts(int(threadIdx.x) % 32);
  float wr[MT][2];  // a[0], a[2] hold row m + g; a[1], a[3] row m + g + 8 (mma.cuh's A layout)
#pragma unroll
  for (int i = 0; i < MT; ++i) {
    wr[i][0] = t.m0 + 16 * i < t.M ? w(t.m0 + 16 * i + g) : 0.0f;
    wr[i][1] = t.m0 + 16 * i < t.M ? w(t.m0 + 16 * i + g + 8) : 0.0f;
  }
#pragma unroll
  for (int k = k0; k < k1; k += 16) {
    uint32_t a[MT][4], b[NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      const int m = t.m0 + 16 * i;
      if (m >= t.M) continue;
      tile::frag_a(a[i], Am, lda, m, k, lp);
      a[i][0] = scale_bf16x2(a[i][0], wr[i][0], wr[i][0]);
      a[i][1] = scale_bf16x2(a[i][1], wr[i][1], wr[i][1]);
      a[i][2] = scale_bf16x2(a[i][2], wr[i][0], wr[i][0]);
      a[i][3] = scale_bf16x2(a[i][3], wr[i][1], wr[i][1]);
    }
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const int n = t.n0 + 16 * j;
      if (n >= t.N) continue;
      tile::frag_b2_trans(b[j], Bm, ldb, k, n, lp);
    }
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      if (t.m0 + 16 * i >= t.M) continue;
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        if (t.n0 + 16 * j >= t.N) continue;
        tile::mma_x2(t.c[i][2 * j], t.c[i][2 * j + 1], a[i], b[j]);
      }
    }
  }
}

// dst (stride ld) = a [R, C] bf16 matrix (row stride C) with zeros for the padding up to
// pad16(R) x pad16(C). 16 bytes at a time where C is a multiple of 8 and src 16-byte aligned.
__device__ inline void load_tile_bf16(bf16_t* dst, int ld, const bf16_t* __restrict__ src, int R,
                                      int C) {
  const int Rp = pad16(R), Cp = pad16(C);
  if (C % 8 == 0 && (reinterpret_cast<uintptr_t>(src) & 15u) == 0) {
    const int per = Cp / 8;
    for (int e = threadIdx.x; e < Rp * per; e += blockDim.x) {
      const int r = e / per, c = (e % per) * 8;
      uint4 raw = make_uint4(0, 0, 0, 0);
      if (r < R && c < C) raw = *reinterpret_cast<const uint4*>(src + r * C + c);
      *reinterpret_cast<uint4*>(dst + r * ld + c) = raw;
    }
    return;
  }
  for (int e = threadIdx.x; e < Rp * Cp; e += blockDim.x) {
    const int r = e / Cp, c = e % Cp;
    dst[r * ld + c] = r < R && c < C ? src[r * C + c] : from_f32<bf16_t>(0.0f);
  }
}

// load_tile_bf16 by cp.async where C is a multiple of 8 and src 16-byte aligned (complete after
// cp_async_wait and a barrier), else by plain loads and stores (complete after a barrier). The
// caller commits the group.
__device__ inline void load_tile_async(bf16_t* dst, int ld, const bf16_t* __restrict__ src, int R,
                                       int C) {
  if (C % 8 == 0 && (reinterpret_cast<uintptr_t>(src) & 15u) == 0) {
    for (PieceWalk it(pad16(R), pad16(C) / 8); it.more(); it.next()) {
      const int r = it.i, c = 8 * it.w;
      const bool valid = r < R && c < C;
      mma::cp_async_16(dst + r * ld + c, valid ? src + r * C + c : src, valid);
    }
    return;
  }
  load_tile_bf16(dst, ld, src, R, C);
}

}  // namespace amor::cuda::ssd::tc

namespace amor::cuda::ssd {

// ---- the bf16 (tensor-core) kernels' launchers. Forward (ssd_forward_tc_cuda.cu): the chunk
// outer products of launch_chunk_outer and the chunk scan (step (3) of ssd_forward_cuda.cu).
void launch_chunk_outer_tc(const Dims& k, const bf16_t* u, const bf16_t* v, const float* dt,
                           const float* cum, bool to_end, float* out, cudaStream_t s);
void launch_chunk_scan_tc(const Dims& k, const bf16_t* x, const float* dt, const bf16_t* Bm,
                          const bf16_t* Cm, const float* D, const float* cum,
                          const float* states, bf16_t* y, cudaStream_t s);
int64_t forward_tc_smem(const Dims& k);
// Backward (ssd_backward_tc_cuda.cu): the dx and dB/dC kernels of ssd_backward_cuda.cu, with the
// same inputs and outputs.
void launch_dx_tc(const Dims& k, const bf16_t* x, const float* dt, const bf16_t* Bm,
                  const bf16_t* Cm, const float* D, const bf16_t* dy, const float* cum,
                  const float* states, const float* grads, bf16_t* dx, float* ddt, float* dcum,
                  float* partials, cudaStream_t s);
void launch_dbc_tc(const Dims& k, const bf16_t* x, const float* dt, const bf16_t* Bm,
                   const bf16_t* Cm, const bf16_t* dy, const float* cum, const float* states,
                   const float* grads, float* dBh, float* dCh, float* dcum, cudaStream_t s);
int64_t backward_tc_smem(const Dims& k);
// The span path's dB, dC summed over splits of a group's heads in the block (partials
// [B,T,G,nsplit,N] f32, nsplit = dbc_heads_splits) with the dcum terms of launch_dbc_tc; used
// where dbc_heads_fit (a Q x N tile per warp, Q = 64 and N = 128 fit).
bool dbc_heads_fit(const Dims& k);
int64_t dbc_heads_splits(const Dims& k);
void launch_dbc_heads_tc(const Dims& k, const bf16_t* x, const float* dt, const bf16_t* Bm,
                         const bf16_t* Cm, const bf16_t* dy, const float* cum,
                         const bf16_t* states, const bf16_t* grads, float* dBp, float* dCp,
                         float* dcum, cudaStream_t s);
// The same on the span path's bf16 chunk states S_c and gradients G_{c+1} (dx: dx_reg_kernel, the
// reductions in registers); dBh, dCh in bf16; the <G, S> term of dcum goes into the dbc kernel
// (states unused by dx).
void launch_dx_tc(const Dims& k, const bf16_t* x, const float* dt, const bf16_t* Bm,
                  const bf16_t* Cm, const float* D, const bf16_t* dy, const float* cum,
                  const bf16_t* grads, bf16_t* dx, float* ddt, float* dcum, float* partials,
                  cudaStream_t s);
void launch_dbc_tc(const Dims& k, const bf16_t* x, const float* dt, const bf16_t* Bm,
                   const bf16_t* Cm, const bf16_t* dy, const float* cum, const bf16_t* states,
                   const bf16_t* grads, bf16_t* dBh, bf16_t* dCh, float* dcum, cudaStream_t s);

// ---- the bf16 path by spans of chunks (ssd_state_tc_cuda.cu; used where spans_fit).
// Chunks per span (per block of the span kernels), >= 2.
int span_len(const Dims& k);
// Whether a [P, N] state fits the warps' register tiles (P = 64, N = 128 does).
bool spans_fit(const Dims& k);
// Per span (b, h, s), carrying a [P, N] state across its chunks in order (reverse: last to
// first): out_chunks[b,h,c] (bf16, when not null) = the state before chunk c's step, then
// state <- exp(cum_last) state + sum_i wt_i u_i v_i^T (wt as launch_chunk_outer's to_end);
// started from init[b,h,s] (f32, null: zeros); out_spans[b,h,s] (f32, when not null) = the
// state after the span.
void launch_span_states_tc(const Dims& k, int m, const bf16_t* u, const bf16_t* v,
                           const float* dt, const float* cum, bool to_end, bool reverse,
                           const float* init, float* out_spans, bf16_t* out_chunks,
                           cudaStream_t s);
// In place over spans [B,H,ns,P,N] f32 (each span's own contribution): slot s <- the state
// entering span s in the pass's direction, starting from `first` (null: zeros); `last` (when
// not null) = the state after the last span.
void launch_span_passing(const Dims& k, int m, const float* cum, const float* first,
                         float* spans, float* last, bool reverse, cudaStream_t s);
int64_t span_smem(const Dims& k);
// The forward's chunk scan by spans (ssd_forward_tc_cuda.cu): y of every chunk of a span from
// the state entering the span (spans[b,h,s], f32), carrying the state across the span's chunks;
// out_chunks [B,H,nc,P,N] bf16 (when not null) = the state entering each chunk, the same bits as
// launch_span_states_tc's out_chunks from the same entering span states (kept for the backward).
void launch_scan_spans_tc(const Dims& k, int m, const bf16_t* x, const float* dt,
                          const bf16_t* Bm, const bf16_t* Cm, const float* D, const float* cum,
                          const float* spans, bf16_t* y, bf16_t* out_chunks, cudaStream_t s);
int64_t scan_spans_smem(const Dims& k);
// Whether the bf16 kernels run by spans: the state fits the register tiles and every span
// kernel's shared memory fits a block (else the per-chunk kernels run).
bool spans_on();  // ssd_set_spans
int64_t backward_spans_smem(const Dims& k);  // ssd_backward_tc_cuda.cu
inline bool use_spans(const Dims& k) {
  return spans_on() && spans_fit(k) && backward_spans_smem(k) <= kSsdMaxSmemBytes &&
         span_smem(k) <= kSsdMaxSmemBytes && scan_spans_smem(k) <= kSsdMaxSmemBytes;
}

}  // namespace amor::cuda::ssd
