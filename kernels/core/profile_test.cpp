// profile::Section: exclusive times of nested sections, calls, reset, the table, and nothing
// recorded while profiling is off.
#include "kernels/core/profile.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace amor::profile {
namespace {

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

const Row* find(const std::vector<Row>& rows, const std::string& name) {
  for (const Row& r : rows)
    if (r.name == name) return &r;
  return nullptr;
}

TEST(Profile, NestedSectionsGetExclusiveTime) {
  set_enabled(true);
  set_device(Device::CPU);
  reset();
  for (int i = 0; i < 2; ++i) {
    Section outer("test outer");
    sleep_ms(20);
    {
      Section inner("test inner");
      sleep_ms(40);
    }
    sleep_ms(10);
  }
  std::vector<Row> rows = profile::rows();
  const Row* outer = find(rows, "test outer");
  const Row* inner = find(rows, "test inner");
  ASSERT_TRUE(outer && inner);
  EXPECT_EQ(outer->calls, 2);
  EXPECT_EQ(inner->calls, 2);
  EXPECT_GE(inner->seconds, 0.078);
  EXPECT_GE(outer->seconds, 0.058);
  EXPECT_LT(outer->seconds, 0.078) << "the inner section's 80 ms counted in the outer one";

  const std::string table = format_table(rows, 2, 0.2);
  EXPECT_NE(table.find("test outer"), std::string::npos) << table;
  EXPECT_NE(table.find("(outside every section)"), std::string::npos) << table;
  EXPECT_NE(table.find("step wall time"), std::string::npos) << table;

  reset();
  EXPECT_EQ(find(profile::rows(), "test inner")->calls, 0);
  set_enabled(false);
}

TEST(Profile, OffRecordsNothing) {
  set_enabled(false);
  { Section s("test never seen"); }
  EXPECT_EQ(find(rows(), "test never seen"), nullptr);
}

}  // namespace
}  // namespace amor::profile
