// The random keys and values of RULER's needles (NVIDIA RULER, scripts/data/synthetic/niah.py):
//   numbers: 7-digit integers, uniform in [1000000, 9999999]
//   uuids:   version-4 UUIDs from 128 random bits, lowercase 8-4-4-4-12
//   words:   "adjective-noun" pairs. RULER takes them from the wonderwords package's lists;
//            that package is not available here, so we ship our own lists (needle_values.cpp:
//            176 adjectives x 200 nouns = 35,200 keys); only the key strings differ.
#pragma once
#include <string>
#include <string_view>

#include "data/synthetic/rng.h"

namespace amor::synthetic {

enum class NeedleType { Numbers, Words, Uuids };

// "numbers", "words", "uuids" (the plural RULER writes into the needle sentence).
const char* needle_type_name(NeedleType t);
NeedleType parse_needle_type(std::string_view name);  // error lists the valid names

std::string random_needle_value(NeedleType t, Rng& rng);

// The word lists (exposed for tests: distinctness, size).
size_t num_adjectives();
size_t num_nouns();

}  // namespace amor::synthetic
