// env_choice and env_int: the default when unset or empty, the value when accepted, and an
// amor::Error naming the variable, the value and what is accepted for anything else; a retired
// switch that is still set is refused by name at the first read.
#include "kernels/core/env_switch.h"

#include <gtest/gtest.h>

#include <cstdio>
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

// Sets any variable for one scope (unset after it).
class ScopedVar {
 public:
  ScopedVar(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedVar() { unsetenv(name_); }

 private:
  const char* name_;
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

// ---- Retired switches (removed in e423819, session 7)

struct Retired {
  const char* name;
  const char* value;  // the value that chose the removed kernel
  const char* instead;  // a piece of what the message says runs now
};
constexpr Retired kRetired[] = {
    {"AMOR_GDN_SBWD", "reg", "gdn_state_bwd_wide_kernel"},
    {"AMOR_GDN_QK_FINISH", "smem", "AMOR_GDN_QK=tile"},
    {"AMOR_SSD_BWD", "tile", "dx_reg_kernel"},
};

TEST(RetiredSwitches, EachIsRefusedByNameWithItsReplacement) {
  EXPECT_EQ(testing::error_of([] { refuse_retired_switches(); }), "(no error)");
  for (const Retired& r : kRetired) {
    ScopedVar var(r.name, r.value);
    const std::string what = testing::error_of([] { refuse_retired_switches(); });
    EXPECT_EQ(what.rfind(std::string(r.name) + " is '" + r.value +
                             "', but that switch was retired on 2026-12-02 (session 7): ",
                         0),
              0u)
        << what;
    EXPECT_NE(what.find(r.instead), std::string::npos) << what;
    EXPECT_EQ(what.substr(what.size() - 10), "; unset it") << what;
  }
  EXPECT_EQ(testing::error_of([] { refuse_retired_switches(); }), "(no error)");
}

TEST(RetiredSwitches, EverySetOneIsNamedInOneMessage) {
  ScopedVar a("AMOR_GDN_SBWD", "wide"), b("AMOR_SSD_BWD", "reg");
  const std::string what = testing::error_of([] { refuse_retired_switches(); });
  EXPECT_NE(what.find("AMOR_GDN_SBWD is 'wide'"), std::string::npos) << what;
  EXPECT_NE(what.find("AMOR_SSD_BWD is 'reg'"), std::string::npos) << what;
  EXPECT_EQ(what.find("AMOR_GDN_QK_FINISH"), std::string::npos) << what;
}

TEST(RetiredSwitches, EmptyAndLongerNamesAreNotRetired) {
  // Empty means unset, as for every switch; AMOR_GDN_SBWD_WARPS is alive.
  ScopedVar a("AMOR_GDN_SBWD", ""), b("AMOR_GDN_SBWD_WARPS", "8");
  EXPECT_EQ(testing::error_of([] { refuse_retired_switches(); }), "(no error)");
}

// env_choice and env_int check once per process; the check refuses again at every read while it
// fails, and stops once the switch is unset. In a fresh process (a "threadsafe" death test
// re-runs this test alone), so no earlier read has passed the check already.
TEST(RetiredSwitches, TheFirstReadsRefuseUntilUnset) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("AMOR_SSD_BWD", "tile", 1);
        const std::string a = testing::error_of([] { choice(); });
        const std::string b = testing::error_of([] { env_int(kVar, 1, 16, 0); });
        unsetenv("AMOR_SSD_BWD");
        const std::string c = choice();
        std::fprintf(stderr, "[%s] [%s] [%s]\n", a.c_str(), b.c_str(), c.c_str());
        std::fflush(stderr);
        std::_Exit(a == b && c == "reg" ? 0 : 1);
      },
      ::testing::ExitedWithCode(0),
      "^\\[AMOR_SSD_BWD is 'tile', but that switch was retired on 2026-12-02 \\(session 7\\): "
      "SSD's span-path backward always runs dx_reg_kernel.*; unset it\\] \\[AMOR_SSD_BWD is "
      "'tile'.*\\] \\[reg\\]");
}

}  // namespace
}  // namespace amor
