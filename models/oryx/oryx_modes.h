// Which mixer produces each token's output in an Oryx model (design §3 "oryx"): a u8 [B,T] tensor,
// 1 = attention, 0 = the linear mixer. Every layer of a forward pass uses the same modes.
//
// Training (oryx_training_modes): each model.oryx.chunk-token chunk of each sequence is attention
// with probability model.oryx.p_attention, independently; the last chunk may be shorter. The coin
// is taken straight from the 64-bit generator (top 53 bits < p * 2^53) rather than from a
// std::*_distribution, whose algorithms differ between standard libraries, so a seed gives the
// same modes on every platform.
//
// Inference (oryx_inference_modes) follows model.oryx.schedule:
//   attention                        every token attention
//   linear                           every token linear
//   prefill_linear_decode_attention  tokens t < prefill_len linear, the rest attention
//   a segment list                   "MODE:LEN,MODE:LEN,...", MODE attention|linear, LEN a positive
//                                    token count or "*" (the rest of the sequence; last segment
//                                    only). A list without "*" repeats from its start until the
//                                    sequence is covered, so "linear:96,attention:32" makes the
//                                    last 32 tokens of every 128 attention.
// Positions are absolute (token 0 is the first of the sequence), so a decoder that generates one
// token at a time takes column t of the modes for the full length.
#pragma once
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/core/tensor.h"
#include "models/core/config.h"

namespace amor::model {

struct OryxSegment {
  bool attention = false;
  int64_t length = 0;  // tokens; -1 = the rest of the sequence
};

// Parses a segment list; throws amor::Error naming model.oryx.schedule on any mistake.
std::vector<OryxSegment> parse_oryx_segments(const std::string& schedule);

// Checks every model.oryx.* key (linear kind, chunk, p_attention, schedule); throws amor::Error
// naming the key.
void validate_oryx_config(const OryxConfig& c);

// u8 [B,T] on the cpu; draws ceil(T / chunk) coins per sequence, sequence by sequence.
Tensor oryx_training_modes(const OryxConfig& c, int64_t B, int64_t T, std::mt19937_64& rng);

// u8 [B,T] on the cpu, the same row for every sequence. prefill_len is used only by
// prefill_linear_decode_attention (and must be >= 0 there).
Tensor oryx_inference_modes(const OryxConfig& c, int64_t B, int64_t T, int64_t prefill_len);

// Columns [start, start + T) of oryx_inference_modes(c, B, start + T, prefill_len): the modes of
// the next T tokens of a decode that stands at position start. u8 [B,T] on the cpu.
Tensor oryx_inference_modes_at(const OryxConfig& c, int64_t B, int64_t start, int64_t T,
                               int64_t prefill_len);

}  // namespace amor::model
