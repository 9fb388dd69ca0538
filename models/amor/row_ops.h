// Row operations for AMOR's sparse execution: pick out the firing rows of a [rows, width] tensor,
// put computed rows back, and a projection whose value at a row depends on that row alone.
//
// Gather and scatter copy each run of consecutive rows with one Tensor::copy_from, so they work
// on any device without a kernel of their own (firing tokens come in runs; the worst case,
// alternating rows, is one small copy per row).
//
// Why row_stable_linear: OpenBLAS computes a row of x W^T with different micro-kernels depending
// on the row count and on where the row falls in the blocking (remainder tiles), so the same row
// projected in a batch of 14 rows and in a batch of 7 can differ in the last bits. AMOR computes Q
// and O over all rows in training and over the firing rows only at inference; to make the two
// exactly equal (design §3: "identical numerics"), Q and O are computed on the CPU one row per
// GEMM call, a fixed function of that row and W. Elsewhere (CUDA) it is the ordinary GEMM.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/core/tensor.h"

namespace amor::model {

// The flat indices (b*T + t) of the rows where gate (u8, any shape, any device) is nonzero, in
// increasing order.
std::vector<int64_t> firing_rows(const Tensor& gate);

// x [N, w] -> [rows.size(), w] with row i = x[rows[i]]; rows increasing and in [0, N).
Tensor gather_rows(const Tensor& x, const std::vector<int64_t>& rows);

// src [rows.size(), w] -> [n_rows, w], zero except row rows[i] = src[i]; rows increasing.
Tensor scatter_rows(const Tensor& src, const std::vector<int64_t>& rows, int64_t n_rows);

// x [..., in], w [out, in] -> x W^T [..., out]; on the CPU each row by its own GEMM call.
Tensor row_stable_linear(const Tensor& x, const Tensor& w);

}  // namespace amor::model
