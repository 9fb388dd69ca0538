// RULER NIAH prompt generation (see niah.h for the tasks, the template and our choices).
#include "data/synthetic/niah.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <set>

#include "data/synthetic/haystack.h"
#include "data/synthetic/rng.h"
#include "kernels/core/error.h"

namespace amor::synthetic {
namespace {

constexpr std::string_view kNoise =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";

constexpr std::string_view kTemplate =
    "Some special magic {type_needle_v} are hidden within the following text. Make sure to "
    "memorize it. I will quiz you about the {type_needle_v} afterwards.\n{context}\nWhat are all "
    "the special magic {type_needle_v} for {query} mentioned in the provided text? The special "
    "magic {type_needle_v} for {query} mentioned in the provided text are";

constexpr int kNumDepths = 40;  // RULER: np.round(np.linspace(0, 100, num=40)).astype(int)
double ruler_depth(int i) { return static_cast<double>(std::lround(100.0 * i / (kNumDepths - 1))); }

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
    s.replace(p, from.size(), to);
  return s;
}

// Python's str.format for the two fields that stay fixed within a sample.
std::string fill(std::string_view tpl, const std::string& type_needle_v, const std::string& query) {
  std::string out;
  for (size_t i = 0; i < tpl.size();) {
    if (tpl.substr(i, 15) == "{type_needle_v}") {
      out += type_needle_v;
      i += 15;
    } else if (tpl.substr(i, 7) == "{query}") {
      out += query;
      i += 7;
    } else {
      out += tpl[i++];
    }
  }
  return out;
}

// FNV-1a: tasks draw different keys and values for the same seed and cell.
uint64_t name_hash(std::string_view name) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

struct Needle {
  std::string text;
  double depth = 0;  // percent
};

// One sample's fixed parts: the needles and the prompt around the context.
struct SampleParts {
  std::vector<Needle> needles;
  size_t first_answer = 0;             // index into needles
  std::vector<size_t> answer_needles;  // needle index of each answer
  std::vector<std::string> answers;
  std::string head, tail;  // prompt = head + context + tail
  std::set<std::string> keys;
};

struct Context {
  std::string text;
  std::vector<size_t> needle_offset;  // byte offset of each needle in text
  std::vector<RoleSpan> roles;        // what each byte of text is, in order, covering it

  // Appends a piece with its role (a span continuing the last one if the role is the same).
  void add(std::string_view piece, TokenRole role) {
    if (piece.empty()) return;
    if (!roles.empty() && roles.back().role == role)
      roles.back().end += piece.size();
    else
      roles.push_back({text.size(), text.size() + piece.size(), role});
    text += piece;
  }
};

std::string needle_sentence(NeedleType value_type, const std::string& key,
                            const std::string& value) {
  return fmt::format("One of the special magic {} for {} is: {}.", needle_type_name(value_type),
                     key, value);
}

class Generator {
 public:
  Generator(const NiahTask& task, const TokenCounter& count, const EssayText* essay)
      : task_(task), count_(count), essay_(essay) {}

  TextSample sample(const NiahConfig& c, int64_t index) {
    const uint64_t depth_key = c.depth_percent
                                   ? static_cast<uint64_t>(std::llround(*c.depth_percent * 1000))
                                   : std::numeric_limits<uint64_t>::max();
    const uint64_t sample_seed =
        derive_seed(c.seed, {name_hash(task_.name), static_cast<uint64_t>(c.max_seq_length),
                             depth_key, static_cast<uint64_t>(index)});
    Rng rng(sample_seed);
    SampleParts parts = make_parts(c, rng);
    distractor_rng_ = std::make_unique<Rng>(derive_seed(sample_seed, {1}));
    distractors_.clear();

    const size_t budget = static_cast<size_t>(c.max_seq_length - c.tokens_to_generate);
    auto cost = [&](size_t n) { return count_(parts.head + build(parts, n).text + parts.tail); };
    const size_t max_n = task_.haystack == HaystackKind::Essay ? essay_->num_words() : budget;
    if (!hint_) hint_ = estimate_units(parts, budget);
    const auto n = fit_largest(cost, budget, max_n, *hint_);
    AMOR_CHECK(n.has_value(),
               "{}: max_seq_length {} is too small: the prompt with its needles and no haystack "
               "takes {} tokens, and tokens_to_generate {} must fit too",
               task_.name, c.max_seq_length, cost(0), c.tokens_to_generate);
    if (task_.haystack == HaystackKind::Essay && *n == max_n) {
      const size_t all = cost(max_n);
      AMOR_CHECK(
          all >= budget,
          "{}: the essay text is too short for max_seq_length {}: all of its {} words make a "
          "{}-token prompt, short of the {} tokens wanted ({} minus tokens_to_generate {})",
          task_.name, c.max_seq_length, max_n, all, budget, c.max_seq_length, c.tokens_to_generate);
    }
    hint_ = *n;

    Context ctx = build(parts, *n);
    TextSample s;
    s.index = index;
    s.task = task_.name;
    s.prompt = parts.head + ctx.text + parts.tail;
    s.roles.push_back({0, parts.head.size(), TokenRole::Other});
    for (const RoleSpan& r : ctx.roles)
      s.roles.push_back({parts.head.size() + r.begin, parts.head.size() + r.end, r.role});
    s.roles.push_back({parts.head.size() + ctx.text.size(), s.prompt.size(), TokenRole::Question});
    s.answers = parts.answers;
    s.max_seq_length = c.max_seq_length;
    s.tokens_to_generate = c.tokens_to_generate;
    s.prompt_tokens = static_cast<int64_t>(count_(s.prompt));
    s.depth_percent = c.depth_percent ? *c.depth_percent : -1.0;
    for (size_t k : parts.answer_needles)
      s.answer_depths.push_back(100.0 * static_cast<double>(ctx.needle_offset[k]) /
                                static_cast<double>(ctx.text.size()));
    return s;
  }

 private:
  SampleParts make_parts(const NiahConfig& c, Rng& rng) {
    SampleParts p;
    const int K = std::max(task_.num_keys, task_.num_queries);
    std::vector<std::string> keys;
    std::vector<std::vector<std::string>> values(static_cast<size_t>(K));
    struct Slot {
      int key, value;
    };
    std::vector<Slot> slots;
    for (int k = 0; k < K; ++k) {
      std::string key;
      for (int attempt = 0;; ++attempt) {
        AMOR_CHECK(attempt < 1000, "{}: cannot draw {} distinct keys", task_.name, K);
        key = random_needle_value(task_.key_type, rng);
        if (p.keys.insert(key).second) break;
      }
      keys.push_back(key);
      for (int v = 0; v < task_.num_values; ++v) {
        values[k].push_back(random_needle_value(task_.value_type, rng));
        p.needles.push_back({needle_sentence(task_.value_type, key, values[k].back()), 0.0});
        slots.push_back({k, v});
      }
    }
    // RULER shuffles the needles, then pairs them with sorted random depths.
    std::vector<size_t> order(p.needles.size());
    std::iota(order.begin(), order.end(), size_t{0});
    rng.shuffle(order);
    std::vector<Needle> shuffled;
    std::vector<Slot> shuffled_slots;
    for (size_t i : order) {
      shuffled.push_back(p.needles[i]);
      shuffled_slots.push_back(slots[i]);
    }
    p.needles = std::move(shuffled);

    const auto queried =
        rng.sample_distinct(static_cast<uint64_t>(K), static_cast<uint64_t>(task_.num_queries));
    std::vector<std::string> query_keys;
    for (uint64_t qi : queried) {
      const int k = static_cast<int>(qi);
      query_keys.push_back(keys[k]);
      for (int v = 0; v < task_.num_values; ++v) {
        p.answers.push_back(values[k][v]);
        for (size_t j = 0; j < shuffled_slots.size(); ++j)
          if (shuffled_slots[j].key == k && shuffled_slots[j].value == v)
            p.answer_needles.push_back(j);
      }
    }
    p.first_answer = p.answer_needles.front();

    // Depths: the first answer's needle at the requested depth, the others drawn from RULER's 40.
    const size_t n_drawn = p.needles.size() - (c.depth_percent ? 1 : 0);
    const auto drawn = rng.sample_distinct(kNumDepths, n_drawn);
    size_t d = 0;
    for (size_t j = 0; j < p.needles.size(); ++j) {
      if (c.depth_percent && j == p.first_answer)
        p.needles[j].depth = *c.depth_percent;
      else
        p.needles[j].depth = ruler_depth(static_cast<int>(drawn[d++]));
    }

    std::string query;
    for (size_t i = 0; i < query_keys.size(); ++i) {
      if (i > 0) query += i + 1 == query_keys.size() ? ", and " : ", ";
      query += query_keys[i];
    }
    std::string tpl(kTemplate);
    std::string type = needle_type_name(task_.value_type);
    if (task_.num_queries * task_.num_values == 1) {  // RULER's singular rewrite, verbatim
      tpl = replace_all(tpl, "Some", "A");
      tpl = replace_all(tpl, "are all", "is");
      tpl = replace_all(tpl, "are", "is");
      tpl = replace_all(tpl, "answers", "answer");
      type.pop_back();
    }
    const size_t at = tpl.find("{context}");
    p.head = fill(std::string_view(tpl).substr(0, at), type, query);
    p.tail = fill(std::string_view(tpl).substr(at + 9), type, query);
    return p;
  }

  // Distractor needle i of this sample (the haystack of niah_multikey_2/3), drawn on demand from
  // the sample's second stream so that a longer haystack extends a shorter one.
  const std::string& distractor(size_t i, const SampleParts& p) {
    while (distractors_.size() <= i) {
      std::string key;
      do key = random_needle_value(task_.key_type, *distractor_rng_);
      while (p.keys.count(key));
      distractors_.push_back(needle_sentence(
          task_.value_type, key, random_needle_value(task_.value_type, *distractor_rng_)));
    }
    return distractors_[i];
  }

  // The context with n haystack units (essay words, noise blocks or distractor needles).
  Context build(const SampleParts& p, size_t n) {
    std::vector<std::string_view> units;
    std::string_view sep = "\n";
    if (task_.haystack == HaystackKind::Essay) {
      sep = " ";
      const std::string_view text = essay_->prefix(n);
      for (auto [b, e] : essay_->sentences(n)) units.push_back(text.substr(b, e - b));
    } else if (task_.haystack == HaystackKind::Repeat) {
      units.assign(n, kNoise);
    } else {
      if (n > 0) distractor(n - 1, p);  // grow the list first: views below must stay valid
      for (size_t i = 0; i < n; ++i) units.push_back(distractors_[i]);
    }
    // Needle j goes before unit floor(units * depth / 100); ties keep the needles' order.
    std::vector<std::pair<size_t, size_t>> at;  // (unit position, needle)
    for (size_t j = 0; j < p.needles.size(); ++j)
      at.emplace_back(static_cast<size_t>(std::floor(static_cast<double>(units.size()) *
                                                     p.needles[j].depth / 100.0)),
                      j);
    std::stable_sort(at.begin(), at.end(), [](auto& a, auto& b) { return a.first < b.first; });

    Context ctx;
    ctx.needle_offset.resize(p.needles.size());
    const TokenRole unit_role = task_.haystack == HaystackKind::Needle ? TokenRole::Distractor : TokenRole::Haystack;
    auto separate = [&] {
      if (!ctx.text.empty()) ctx.add(sep, TokenRole::Haystack);
    };
    size_t next = 0;
    for (size_t u = 0; u <= units.size(); ++u) {
      for (; next < at.size() && at[next].first == u; ++next) {
        separate();
        const size_t j = at[next].second;
        ctx.needle_offset[j] = ctx.text.size();
        const bool answer = std::find(p.answer_needles.begin(), p.answer_needles.end(), j) != p.answer_needles.end();
        ctx.add(p.needles[j].text, answer ? TokenRole::Needle : TokenRole::Distractor);
      }
      if (u < units.size()) {
        separate();
        ctx.add(units[u], unit_role);
      }
    }
    return ctx;
  }

  // A first guess at the haystack size, so the first sample's search starts near the answer.
  size_t estimate_units(const SampleParts& p, size_t budget) {
    const size_t fixed = count_(p.head + p.tail);
    if (fixed >= budget) return 0;
    double per_unit;
    if (task_.haystack == HaystackKind::Essay) {
      const size_t probe = std::min<size_t>(essay_->num_words(), 2000);
      per_unit = static_cast<double>(count_(essay_->prefix(probe))) /
                 static_cast<double>(std::max<size_t>(probe, 1));
    } else if (task_.haystack == HaystackKind::Repeat) {
      per_unit = static_cast<double>(count_(kNoise));
    } else {
      per_unit = static_cast<double>(count_(distractor(0, p)));
    }
    return static_cast<size_t>(static_cast<double>(budget - fixed) / std::max(per_unit, 1e-3));
  }

  const NiahTask& task_;
  const TokenCounter& count_;
  const EssayText* essay_;
  std::optional<size_t> hint_;
  std::unique_ptr<Rng> distractor_rng_;
  std::vector<std::string> distractors_;
};

void validate_task(const NiahTask& t) {
  AMOR_CHECK(t.num_keys >= 1 && t.num_values >= 1 && t.num_queries >= 1,
             "{}: num_keys, num_values and num_queries must be at least 1 (got {}, {}, {})", t.name,
             t.num_keys, t.num_values, t.num_queries);
  const int needles = std::max(t.num_keys, t.num_queries) * t.num_values;
  AMOR_CHECK(needles <= kNumDepths,
             "{}: {} needles (keys x values) exceed RULER's {} needle depths", t.name, needles,
             kNumDepths);
}

void validate(const NiahConfig& c) {
  validate_task(c.task);
  AMOR_CHECK(c.tokens_to_generate >= 0, "{}: tokens_to_generate must be >= 0, got {}", c.task.name,
             c.tokens_to_generate);
  AMOR_CHECK(c.max_seq_length > c.tokens_to_generate,
             "{}: max_seq_length {} must exceed tokens_to_generate {}", c.task.name,
             c.max_seq_length, c.tokens_to_generate);
  AMOR_CHECK(c.num_samples >= 1, "{}: num_samples must be at least 1, got {}", c.task.name,
             c.num_samples);
  if (c.depth_percent)
    AMOR_CHECK(*c.depth_percent >= 0 && *c.depth_percent <= 100,
               "{}: depth_percent {} is outside [0, 100]", c.task.name, *c.depth_percent);
}

std::unique_ptr<EssayText> load_essay(const NiahTask& t, std::string_view essay) {
  if (t.haystack != HaystackKind::Essay) return nullptr;
  auto e = std::make_unique<EssayText>(essay);
  AMOR_CHECK(e->num_words() > 0,
             "{}: the essay haystack needs essay text, and the text given is empty", t.name);
  return e;
}

std::vector<TextSample> generate(const NiahConfig& c, const TokenCounter& count,
                                 const EssayText* essay) {
  validate(c);
  Generator g(c.task, count, essay);
  std::vector<TextSample> out;
  for (int64_t i = 0; i < c.num_samples; ++i) out.push_back(g.sample(c, i));
  return out;
}

}  // namespace

std::vector<std::string> niah_task_names() {
  return {"niah_single_1",   "niah_single_2",   "niah_single_3",   "niah_multikey_1",
          "niah_multikey_2", "niah_multikey_3", "niah_multivalue", "niah_multiquery"};
}

NiahTask niah_task(std::string_view name) {
  using H = HaystackKind;
  using N = NeedleType;
  NiahTask t;
  t.name = std::string(name);
  auto set = [&](H h, N k, N v, int nk, int nv, int nq) {
    t.haystack = h;
    t.key_type = k;
    t.value_type = v;
    t.num_keys = nk;
    t.num_values = nv;
    t.num_queries = nq;
    return t;
  };
  if (name == "niah_single_1") return set(H::Repeat, N::Words, N::Numbers, 1, 1, 1);
  if (name == "niah_single_2") return set(H::Essay, N::Words, N::Numbers, 1, 1, 1);
  if (name == "niah_single_3") return set(H::Essay, N::Words, N::Uuids, 1, 1, 1);
  if (name == "niah_multikey_1") return set(H::Essay, N::Words, N::Numbers, 4, 1, 1);
  if (name == "niah_multikey_2") return set(H::Needle, N::Words, N::Numbers, 1, 1, 1);
  if (name == "niah_multikey_3") return set(H::Needle, N::Uuids, N::Uuids, 1, 1, 1);
  if (name == "niah_multivalue") return set(H::Essay, N::Words, N::Numbers, 1, 4, 1);
  if (name == "niah_multiquery") return set(H::Essay, N::Words, N::Numbers, 4, 1, 4);
  std::string valid;
  for (const auto& n : niah_task_names()) valid += (valid.empty() ? "" : ", ") + n;
  throw Error(fmt::format("unknown NIAH task '{}': expected one of {}", name, valid));
}

std::vector<TextSample> niah(const NiahConfig& c, const TokenCounter& count,
                             std::string_view essay) {
  validate(c);
  const auto e = load_essay(c.task, essay);
  return generate(c, count, e.get());
}

std::vector<TextSample> niah_grid(const NiahGridConfig& g, const TokenCounter& count,
                                  std::string_view essay) {
  AMOR_CHECK(!g.lengths.empty(), "{}: the grid has no lengths", g.task.name);
  AMOR_CHECK(!g.depths.empty(), "{}: the grid has no depths", g.task.name);
  validate_task(g.task);
  const auto e = load_essay(g.task, essay);
  std::vector<TextSample> out;
  for (int64_t L : g.lengths) {
    for (double d : g.depths) {
      NiahConfig c{g.task, L, g.tokens_to_generate, d, g.samples_per_cell, g.seed};
      auto cell = generate(c, count, e.get());
      out.insert(out.end(), std::make_move_iterator(cell.begin()),
                 std::make_move_iterator(cell.end()));
    }
  }
  return out;
}

}  // namespace amor::synthetic
