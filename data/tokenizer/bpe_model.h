// The BPE merge step of a byte-level tokenizer, on raw bytes: a piece starts as one token per
// byte and the adjacent pair with the lowest merge rank is merged (the leftmost among equals)
// until no pair has a rank, as Hugging Face tokenizers and transformers.js do. Results for short
// pieces are cached (words repeat); the cache is safe to share between threads.
#pragma once
#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace amor::tokenizer {

struct BpeMerge {
  int32_t left, right, merged;  // token ids; rank = position in the list
};

class BpeModel {
 public:
  // vocab: token bytes -> id. byte_ids[b]: the token of the single byte b. merges in rank order;
  // a pair listed twice keeps its later rank (as HF's and transformers.js's maps do).
  // ignore_merges: a piece that is itself a vocabulary token is that token (Llama-3).
  BpeModel(std::unordered_map<std::string, int32_t> vocab, const std::array<int32_t, 256>& byte_ids,
           const std::vector<BpeMerge>& merges, bool ignore_merges);

  // Appends the ids of one pre-token piece (raw bytes) to out.
  void encode(std::string_view piece, std::vector<int32_t>& out) const;

  size_t merge_count() const { return merge_count_; }  // distinct pairs

 private:
  void merge(std::string_view piece, std::vector<int32_t>& out) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::array<int32_t, 256> byte_ids_;
  // Open addressing, linear probing (BPE's hot loop): key (left << 32 | right), value
  // (rank << 32 | merged); kEmpty marks a free slot (ids are below 2^31, so no key equals it).
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  struct Slot {
    uint64_t key = kEmpty, value = 0;
  };
  const Slot* find(uint64_t key) const;
  std::vector<Slot> slots_;
  uint64_t mask_ = 0;
  size_t merge_count_ = 0;
  bool ignore_merges_;

  static constexpr size_t kMaxCachedBytes = 64, kMaxCacheEntries = 1 << 18;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace amor::tokenizer
