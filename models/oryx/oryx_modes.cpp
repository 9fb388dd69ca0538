#include "models/oryx/oryx_modes.h"

#include <algorithm>
#include <cctype>

#include "kernels/core/error.h"

namespace amor::model {

namespace {

constexpr const char* kScheduleHelp =
    "use attention, linear, prefill_linear_decode_attention or a segment list such as "
    "\"linear:512,attention:128,linear:*\"";

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return "";
  size_t b = s.find_last_not_of(" \t");
  return s.substr(a, b - a + 1);
}

bool is_keyword(const std::string& s) {
  return s == "attention" || s == "linear" || s == "prefill_linear_decode_attention";
}

// Fills row [0, T) from a segment list, repeating it when it has no "*".
void fill_segments(const std::vector<OryxSegment>& segs, int64_t T, uint8_t* row) {
  int64_t t = 0;
  while (t < T) {
    for (const OryxSegment& s : segs) {
      int64_t end = s.length < 0 ? T : std::min(T, t + s.length);
      std::fill(row + t, row + end, static_cast<uint8_t>(s.attention ? 1 : 0));
      t = end;
      if (t >= T) break;
    }
  }
}

}  // namespace

std::vector<OryxSegment> parse_oryx_segments(const std::string& schedule) {
  AMOR_CHECK(!trim(schedule).empty(), "model.oryx.schedule is empty; {}", kScheduleHelp);
  std::vector<OryxSegment> segs;
  size_t start = 0;
  while (true) {
    size_t comma = schedule.find(',', start);
    std::string item = trim(
        schedule.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    int index = static_cast<int>(segs.size()) + 1;
    size_t colon = item.find(':');
    AMOR_CHECK(colon != std::string::npos,
               "model.oryx.schedule \"{}\": segment {} \"{}\" is not MODE:LEN; {}", schedule, index,
               item, kScheduleHelp);
    std::string mode = trim(item.substr(0, colon)), len = trim(item.substr(colon + 1));
    AMOR_CHECK(mode == "attention" || mode == "linear",
               "model.oryx.schedule \"{}\": segment {} has mode \"{}\"; a segment's mode is "
               "attention or linear",
               schedule, index, mode);
    OryxSegment seg;
    seg.attention = mode == "attention";
    if (len == "*") {
      seg.length = -1;
    } else {
      bool digits =
          !len.empty() && len.size() <= 15 &&
          std::all_of(len.begin(), len.end(), [](unsigned char c) { return std::isdigit(c); });
      AMOR_CHECK(digits && std::stoll(len) > 0,
                 "model.oryx.schedule \"{}\": segment {} has length \"{}\"; a length is a positive "
                 "token count or * (the rest of the sequence)",
                 schedule, index, len);
      seg.length = std::stoll(len);
    }
    AMOR_CHECK(segs.empty() || segs.back().length >= 0,
               "model.oryx.schedule \"{}\": segment {} follows a \"*\" segment; * (the rest of the "
               "sequence) must be the last segment",
               schedule, index);
    segs.push_back(seg);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return segs;
}

std::string oryx_schedule_problem(const std::string& schedule) {
  if (is_keyword(schedule)) return "";
  try {
    parse_oryx_segments(schedule);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void validate_oryx_config(const OryxConfig& c) {
  AMOR_CHECK(c.linear == "gdn" || c.linear == "mamba2",
             "model.oryx.linear is \"{}\"; use gdn (Oryx-TG) or mamba2 (Oryx-TM)", c.linear);
  AMOR_CHECK(c.chunk > 0, "model.oryx.chunk is {}; it must be a positive token count", c.chunk);
  AMOR_CHECK(c.p_attention >= 0.0 && c.p_attention <= 1.0,
             "model.oryx.p_attention is {}; it must be a probability in [0, 1]", c.p_attention);
  if (!is_keyword(c.schedule)) parse_oryx_segments(c.schedule);
}

Tensor oryx_training_modes(const OryxConfig& c, int64_t B, int64_t T, std::mt19937_64& rng) {
  AMOR_CHECK(c.chunk > 0, "model.oryx.chunk is {}; it must be a positive token count", c.chunk);
  AMOR_CHECK(c.p_attention >= 0.0 && c.p_attention <= 1.0,
             "model.oryx.p_attention is {}; it must be a probability in [0, 1]", c.p_attention);
  AMOR_CHECK(B >= 0 && T >= 0, "oryx_training_modes: B={} T={} must be >= 0", B, T);
  Tensor modes = Tensor::zeros({B, T}, DType::U8);
  uint8_t* m = modes.data<uint8_t>();
  const double two53 = 9007199254740992.0;  // 2^53
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t0 = 0; t0 < T; t0 += c.chunk) {
      // u in [0, 1) with 53 random bits; p = 1 always fires, p = 0 never does.
      double u = static_cast<double>(rng() >> 11) / two53;
      uint8_t a = u < c.p_attention ? 1 : 0;
      std::fill(m + b * T + t0, m + b * T + std::min(T, t0 + c.chunk), a);
    }
  }
  return modes;
}

Tensor oryx_inference_modes(const OryxConfig& c, int64_t B, int64_t T, int64_t prefill_len) {
  AMOR_CHECK(B >= 0 && T >= 0, "oryx_inference_modes: B={} T={} must be >= 0", B, T);
  Tensor modes = Tensor::zeros({B, T}, DType::U8);
  if (T == 0) return modes;
  std::vector<uint8_t> row(static_cast<size_t>(T), 0);
  if (c.schedule == "attention") {
    std::fill(row.begin(), row.end(), 1);
  } else if (c.schedule == "linear") {
    // row stays 0
  } else if (c.schedule == "prefill_linear_decode_attention") {
    AMOR_CHECK(prefill_len >= 0,
               "model.oryx.schedule prefill_linear_decode_attention needs a prefill length >= 0, "
               "got {}",
               prefill_len);
    std::fill(row.begin() + std::min(T, prefill_len), row.end(), 1);
  } else {
    fill_segments(parse_oryx_segments(c.schedule), T, row.data());
  }
  uint8_t* m = modes.data<uint8_t>();
  for (int64_t b = 0; b < B; ++b) std::copy(row.begin(), row.end(), m + b * T);
  return modes;
}

Tensor oryx_inference_modes_at(const OryxConfig& c, int64_t B, int64_t start, int64_t T,
                               int64_t prefill_len) {
  AMOR_CHECK(start >= 0 && T >= 0, "oryx_inference_modes_at: start {} and T {} must be >= 0",
             start, T);
  Tensor row = oryx_inference_modes(c, 1, start + T, prefill_len);
  Tensor modes = Tensor::empty({B, T}, DType::U8);
  const uint8_t* r = row.data<uint8_t>() + start;
  for (int64_t b = 0; b < B; ++b) std::copy(r, r + T, modes.data<uint8_t>() + b * T);
  return modes;
}

}  // namespace amor::model
