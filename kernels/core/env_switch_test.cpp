// env_choice and env_int: the default when unset or empty, the value when accepted, and an
// amor::Error naming the variable, the value and what is accepted for anything else.
#include "kernels/core/env_switch.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "tests/common/error_of.h"

namespace amor {
namespace {

constexpr const char* kVar = "AMOR_ENV_SWITCH_TEST";

// Sets kVar (nullptr: unsets it) for one scope.
class ScopedEnv {
 public:
  explicit ScopedEnv(const char* value) {
    if (value)
      setenv(kVar, value, 1);
    else
      unsetenv(kVar);
  }
  ~ScopedEnv() { unsetenv(kVar); }
};

std::string choice() { return env_choice(kVar, {"tile", "reg", "fused"}, "reg"); }

TEST(EnvChoice, UnsetOrEmptyIsTheFallback) {
  {
    ScopedEnv env(nullptr);
    EXPECT_EQ(choice(), "reg");
  }
  ScopedEnv env("");
  EXPECT_EQ(choice(), "reg");
}

TEST(EnvChoice, ListedValuesAreReturned) {
  for (const char* v : {"tile", "reg", "fused"}) {
    ScopedEnv env(v);
    EXPECT_EQ(choice(), v);
  }
}

TEST(EnvChoice, AnythingElseIsRefusedWithTheList) {
  for (const char* v : {"tiel", "Tile", "tile ", "1"}) {
    ScopedEnv env(v);
    const std::string what = testing::error_of([] { choice(); });
    EXPECT_EQ(what, std::string(kVar) + " is '" + v +
                        "'; it accepts tile, reg or fused (unset or empty: reg)");
  }
}

TEST(EnvInt, UnsetOrEmptyIsTheFallbackEvenOutsideTheRange) {
  {
    ScopedEnv env(nullptr);
    EXPECT_EQ(env_int(kVar, 1, 16, 0), 0);
  }
  ScopedEnv env("");
  EXPECT_EQ(env_int(kVar, 1, 16, 0), 0);
}

TEST(EnvInt, NumbersInTheRangeAreReturned) {
  for (int v : {1, 8, 16}) {
    ScopedEnv env(std::to_string(v).c_str());
    EXPECT_EQ(env_int(kVar, 1, 16, 0), v);
  }
  ScopedEnv env("-3");
  EXPECT_EQ(env_int(kVar, -5, 5, 0), -3);
}

TEST(EnvInt, NonNumbersAndOutOfRangeAreRefused) {
  for (const char* v : {"0", "17", "-1", "eight", "8x", " 8", "8 ", "+", "99999999999999999999"}) {
    ScopedEnv env(v);
    const std::string what = testing::error_of([] { env_int(kVar, 1, 16, 0); });
    EXPECT_EQ(what, std::string(kVar) + " is '" + v +
                        "'; it accepts a whole number from 1 to 16 (unset or empty: 0)")
        << v;
  }
}

}  // namespace
}  // namespace amor
