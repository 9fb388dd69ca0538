// The check every on-by-default 0/1 environment switch gets (kernels/core/env_switch.h): `read`
// (a function that reads the switch now) gives true unset, empty and at 1, false at 0, and refuses
// any other value with an amor::Error that names the variable and the value. The variable's value
// before the check is restored after it.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <string>

#include "tests/common/error_of.h"

namespace amor::testing {

inline void expect_on_off_switch(const char* name, const std::function<bool()>& read) {
  SCOPED_TRACE(name);
  const char* saved = std::getenv(name);
  const std::string saved_value = saved ? saved : "";
  unsetenv(name);
  EXPECT_TRUE(read());
  for (const char* v : {"", "1"}) {
    setenv(name, v, 1);
    EXPECT_TRUE(read()) << "'" << v << "'";
  }
  setenv(name, "0", 1);
  EXPECT_FALSE(read());
  setenv(name, "yes", 1);
  const std::string message = error_of([&] { read(); });
  EXPECT_NE(message.find(std::string(name) + " is 'yes'"), std::string::npos) << message;
  if (saved) {
    setenv(name, saved_value.c_str(), 1);
  } else {
    unsetenv(name);
  }
}

}  // namespace amor::testing
