// Random needle keys/values (see needle_values.h). The word lists below are ours: common,
// unambiguous English adjectives and concrete nouns, lower case, so keys read like RULER's
// ("quick-lantern").
#include "data/synthetic/needle_values.h"

#include <array>
#include <cstdio>

#include "kernels/core/error.h"

namespace amor::synthetic {
namespace {

constexpr std::array kAdjectives = {
    "able",    "ancient", "angry",    "bitter",  "black",   "blue",   "bold",   "brave",  "bright",
    "broad",   "broken",  "busy",     "calm",    "careful", "cheap",  "clean",  "clever", "cold",
    "cool",    "crisp",   "cruel",    "curious", "damp",    "dark",   "dear",   "deep",   "dense",
    "dizzy",   "dry",     "dull",     "eager",   "early",   "easy",   "empty",  "equal",  "exact",
    "fair",    "faint",   "false",    "famous",  "fancy",   "fast",   "fierce", "fine",   "firm",
    "flat",    "fond",    "fresh",    "frozen",  "full",    "funny",  "gentle", "giant",  "glad",
    "golden",  "good",    "grand",    "gray",    "great",   "green",  "happy",  "hard",   "heavy",
    "hidden",  "high",    "hollow",   "honest",  "hot",     "huge",   "humble", "hungry", "icy",
    "idle",    "jolly",   "keen",     "kind",    "large",   "late",   "lazy",   "light",  "little",
    "lively",  "lonely",  "long",     "loud",    "lucky",   "mellow", "mighty", "mild",   "modern",
    "narrow",  "neat",    "new",      "nimble",  "noble",   "odd",    "old",    "orange", "pale",
    "patient", "plain",   "pleasant", "polite",  "poor",    "proud",  "purple", "quick",  "quiet",
    "rapid",   "rare",    "raw",      "ready",   "red",     "rich",   "rough",  "round",  "royal",
    "rude",    "rural",   "rusty",    "sad",     "safe",    "salty",  "sharp",  "shiny",  "short",
    "shy",     "silent",  "silly",    "silver",  "simple",  "sleepy", "slow",   "small",  "smart",
    "smooth",  "soft",    "solid",    "sour",    "spare",   "steady", "steep",  "stern",  "still",
    "strange", "strict",  "strong",   "sturdy",  "subtle",  "sunny",  "sweet",  "swift",  "tall",
    "tame",    "tender",  "thick",    "thin",    "tidy",    "tiny",   "tough",  "true",   "ugly",
    "vast",    "violet",  "warm",     "weak",    "wet",     "white",  "wide",   "wild",   "wise",
    "witty",   "yellow",  "young",    "zealous", "zesty",
};

constexpr std::array kNouns = {
    "acorn",    "anchor",  "apple",    "arrow",   "badge",   "bagel",   "ball",     "banjo",
    "barn",     "basket",  "beacon",   "bean",    "bell",    "bench",   "bicycle",  "blanket",
    "boat",     "bottle",  "bracelet", "branch",  "bread",   "brick",   "bridge",   "brush",
    "bucket",   "button",  "cabin",    "cable",   "camel",   "candle",  "canoe",    "canyon",
    "carpet",   "carrot",  "castle",   "cactus",  "chair",   "cherry",  "chimney",  "circle",
    "cliff",    "clock",   "cloud",    "coat",    "comet",   "compass", "cookie",   "copper",
    "cottage",  "crayon",  "crown",    "cup",     "curtain", "daisy",   "desert",   "desk",
    "diamond",  "dolphin", "door",     "dragon",  "drum",    "eagle",   "engine",   "falcon",
    "feather",  "fence",   "ferret",   "fiddle",  "field",   "flag",    "flute",    "forest",
    "fountain", "fox",     "garden",   "garlic",  "gate",    "glacier", "glove",    "goat",
    "grape",    "guitar",  "hammer",   "harbor",  "harp",    "hat",     "hawk",     "helmet",
    "hill",     "honey",   "horizon",  "horse",   "island",  "jacket",  "jar",      "jewel",
    "kettle",   "key",     "kite",     "ladder",  "lake",    "lamp",    "lantern",  "lemon",
    "lens",     "lily",    "lion",     "lizard",  "locket",  "magnet",  "mango",    "maple",
    "marble",   "meadow",  "mirror",   "mitten",  "monkey",  "moon",    "mountain", "mushroom",
    "needle",   "nest",    "notebook", "oak",     "ocean",   "olive",   "orchard",  "otter",
    "owl",      "paddle",  "palace",   "panther", "parrot",  "peach",   "pebble",   "pencil",
    "pepper",   "piano",   "pillow",   "pine",    "planet",  "plum",    "pocket",   "pond",
    "pumpkin",  "puzzle",  "quilt",    "rabbit",  "radio",   "raft",    "rainbow",  "raven",
    "ribbon",   "river",   "robin",    "rocket",  "rose",    "saddle",  "sail",     "salmon",
    "sandal",   "scarf",   "shell",    "shovel",  "skate",   "sled",    "snail",    "spoon",
    "squirrel", "stable",  "star",     "statue",  "stone",   "stream",  "sugar",    "swan",
    "sword",    "table",   "teapot",   "tent",    "thimble", "thistle", "tiger",    "tomato",
    "torch",    "tower",   "tractor",  "trumpet", "tulip",   "turtle",  "umbrella", "valley",
    "violin",   "wagon",   "walnut",   "whale",   "whistle", "willow",  "window",   "wolf",
};

std::string random_number(Rng& rng) { return std::to_string(rng.between(1000000, 9999999)); }

std::string random_uuid(Rng& rng) {
  uint64_t hi = rng.next(), lo = rng.next();
  // uuid.UUID(int=..., version=4): version nibble 4, variant bits 10.
  hi = (hi & ~(0xfull << 12)) | (0x4ull << 12);
  lo = (lo & ~(0x3ull << 62)) | (0x2ull << 62);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(hi >> 32),
                static_cast<unsigned>((hi >> 16) & 0xffff), static_cast<unsigned>(hi & 0xffff),
                static_cast<unsigned>(lo >> 48),
                static_cast<unsigned long long>(lo & 0xffffffffffffull));
  return buf;
}

std::string random_word(Rng& rng) {
  std::string s = kAdjectives[rng.below(kAdjectives.size())];
  s += '-';
  s += kNouns[rng.below(kNouns.size())];
  return s;
}

}  // namespace

const char* needle_type_name(NeedleType t) {
  switch (t) {
    case NeedleType::Numbers:
      return "numbers";
    case NeedleType::Words:
      return "words";
    case NeedleType::Uuids:
      return "uuids";
  }
  return "?";
}

NeedleType parse_needle_type(std::string_view name) {
  if (name == "numbers") return NeedleType::Numbers;
  if (name == "words") return NeedleType::Words;
  if (name == "uuids") return NeedleType::Uuids;
  throw Error(fmt::format("unknown needle type '{}': expected numbers, words or uuids", name));
}

std::string random_needle_value(NeedleType t, Rng& rng) {
  switch (t) {
    case NeedleType::Numbers:
      return random_number(rng);
    case NeedleType::Words:
      return random_word(rng);
    case NeedleType::Uuids:
      return random_uuid(rng);
  }
  throw Error("random_needle_value: invalid needle type");
}

size_t num_adjectives() { return kAdjectives.size(); }
size_t num_nouns() { return kNouns.size(); }

}  // namespace amor::synthetic
