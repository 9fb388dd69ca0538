// BPE merging with a priority queue over a linked list of symbols: O(n log n) in the piece
// length, so long runs (whitespace, repeated characters, minified text) stay fast.
#include "data/tokenizer/bpe_model.h"

#include <algorithm>
#include <functional>
#include <queue>

namespace amor::tokenizer {

namespace {

uint64_t pair_key(int32_t left, int32_t right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

uint64_t mix(uint64_t k) {  // splitmix64's finaliser: pair keys are far from random
  k = (k ^ (k >> 30)) * 0xBF58476D1CE4E5B9ull;
  k = (k ^ (k >> 27)) * 0x94D049BB133111EBull;
  return k ^ (k >> 31);
}

}  // namespace

BpeModel::BpeModel(std::unordered_map<std::string, int32_t> vocab,
                   const std::array<int32_t, 256>& byte_ids, const std::vector<BpeMerge>& merges,
                   bool ignore_merges)
    : vocab_(std::move(vocab)), byte_ids_(byte_ids), ignore_merges_(ignore_merges) {
  size_t capacity = 16;
  while (capacity < merges.size() * 2) capacity *= 2;
  slots_.resize(capacity);
  mask_ = capacity - 1;
  for (size_t r = 0; r < merges.size(); ++r) {
    const BpeMerge& m = merges[r];
    const uint64_t key = pair_key(m.left, m.right);
    uint64_t i = mix(key) & mask_;
    while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & mask_;
    if (slots_[i].key == kEmpty) ++merge_count_;
    slots_[i] = {key, (static_cast<uint64_t>(r) << 32) | static_cast<uint32_t>(m.merged)};
  }
}

const BpeModel::Slot* BpeModel::find(uint64_t key) const {
  for (uint64_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
    if (slots_[i].key == key) return &slots_[i];
    if (slots_[i].key == kEmpty) return nullptr;
  }
}

void BpeModel::encode(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (piece.size() == 1) {
    out.push_back(byte_ids_[static_cast<unsigned char>(piece[0])]);
    return;
  }
  if (ignore_merges_) {
    auto it = vocab_.find(std::string(piece));
    if (it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const bool cacheable = piece.size() <= kMaxCachedBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(std::string(piece));
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t start = out.size();
  merge(piece, out);
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kMaxCacheEntries) cache_.clear();  // bounded memory on huge corpora
    cache_.emplace(std::string(piece), std::vector<int32_t>(out.begin() + start, out.end()));
  }
}

void BpeModel::merge(std::string_view piece, std::vector<int32_t>& out) const {
  const int n = static_cast<int>(piece.size());
  struct Symbol {
    int32_t id;  // -1 once merged into its left neighbour
    int prev, next;
  };
  std::vector<Symbol> sym(n);
  for (int i = 0; i < n; ++i)
    sym[i] = {byte_ids_[static_cast<unsigned char>(piece[i])], i - 1, i + 1 < n ? i + 1 : -1};

  // A candidate merge of the symbols at pos and sym[pos].next, valid while both still hold the
  // ids it was made from. Ordered by rank, then position (the leftmost first).
  struct Candidate {
    uint32_t rank;
    int pos;
    int32_t left, right, merged;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto consider = [&](int pos) {
    const int next = sym[pos].next;
    const Slot* slot = find(pair_key(sym[pos].id, sym[next].id));
    if (slot == nullptr) return;
    queue.push({static_cast<uint32_t>(slot->value >> 32), pos, sym[pos].id, sym[next].id,
                static_cast<int32_t>(slot->value & 0xFFFFFFFFu)});
  };
  for (int i = 0; i + 1 < n; ++i) consider(i);

  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = sym[c.pos];
    if (left.id != c.left || left.next < 0) continue;
    Symbol& right = sym[left.next];
    if (right.id != c.right) continue;
    left.id = c.merged;
    right.id = -1;
    left.next = right.next;
    if (left.next >= 0) sym[left.next].prev = c.pos;
    if (left.prev >= 0) consider(left.prev);
    if (left.next >= 0) consider(c.pos);
  }
  for (int i = 0; i >= 0; i = sym[i].next) out.push_back(sym[i].id);
}

}  // namespace amor::tokenizer
