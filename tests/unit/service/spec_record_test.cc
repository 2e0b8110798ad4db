#include "service/spec_record.h"

#include <gtest/gtest.h>

namespace sandcastle::service {
namespace {

using sandbox::Persistence;
using sandbox::SpecOptions;

// `text` with the first `from` replaced by `to` (which must be there).
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(SpecRecord, RoundTripsEveryField) {
  SpecOptions o;
  o.image = "py:latest";
  o.limits.memory_bytes = 123 * sandbox::kMiB;
  o.limits.pids = 77;
  o.limits.cpu_millis = 1500;
  o.limits.disk_bytes = 99 * sandbox::kMiB;
  o.limits.tmp_bytes = 7 * sandbox::kMiB;
  o.limits.open_files = 333;
  o.limits.file_size_bytes = 4242;
  o.limits.exec_timeout = std::chrono::milliseconds(4321);
  o.env = {{"A", "1"}, {"B", "two words"}};
  o.workdir = "/srv/app";
  o.hostname = "box-1";
  o.persistence = Persistence::kPersistent;
  o.storage_id = "sb-0123456789ab";
  o.network = sandbox::NetworkMode::kFull;
  o.network_allow = {"allowed.test", "10.0.0.0/8:*"};
  o.network_deny = {"[2001:db8::]/32"};
  auto back = spec_from_json(spec_to_json(o));
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->image, o.image);
  EXPECT_EQ(back->limits.memory_bytes, o.limits.memory_bytes);
  EXPECT_EQ(back->limits.pids, o.limits.pids);
  EXPECT_EQ(back->limits.cpu_millis, o.limits.cpu_millis);
  EXPECT_EQ(back->limits.disk_bytes, o.limits.disk_bytes);
  EXPECT_EQ(back->limits.tmp_bytes, o.limits.tmp_bytes);
  EXPECT_EQ(back->limits.open_files, o.limits.open_files);
  EXPECT_EQ(back->limits.file_size_bytes, o.limits.file_size_bytes);
  EXPECT_EQ(back->limits.exec_timeout, o.limits.exec_timeout);
  EXPECT_EQ(back->env, o.env);
  EXPECT_EQ(back->workdir, o.workdir);
  EXPECT_EQ(back->hostname, o.hostname);
  EXPECT_EQ(back->persistence, Persistence::kPersistent);
  EXPECT_EQ(back->storage_id, o.storage_id);
  EXPECT_EQ(back->network, sandbox::NetworkMode::kFull);
  EXPECT_EQ(back->network_allow, o.network_allow);
  EXPECT_EQ(back->network_deny, o.network_deny);
}

// Records written before "full" existed say "allow-list" and have no rule
// lists; they still load.
TEST(SpecRecord, ReadsTheOldNetworkRecord) {
  std::string old = spec_to_json(SpecOptions{});
  old = replaced(old, "\"network\":\"none\"", "\"network\":\"allow-list\"");
  old = replaced(old, ",\"network_allow\":[]", "");
  old = replaced(old, ",\"network_deny\":[]", "");
  ASSERT_EQ(old.find("network_"), std::string::npos) << old;
  auto back = spec_from_json(old);
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_EQ(back->network, sandbox::NetworkMode::kAllowList);
  EXPECT_TRUE(back->network_allow.empty());
  SpecOptions o;
  o.network = sandbox::NetworkMode::kAllowList;
  EXPECT_NE(spec_to_json(o).find("\"network\":\"allowlist\""), std::string::npos);
}

// The record comes back from a file on disk: damage is an error, never a
// sandbox with some other spec.
TEST(SpecRecord, RefusesDamagedRecords) {
  EXPECT_EQ(spec_from_json("").error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(spec_from_json("{\"version\":2}").error().code, ErrorCode::kInvalidArgument);
  std::string good = spec_to_json(SpecOptions{});
  std::string bad_type = good;
  bad_type.replace(bad_type.find("\"pids\":256"), 10, "\"pids\":\"x\"");
  EXPECT_EQ(spec_from_json(bad_type).error().code, ErrorCode::kInvalidArgument);
  std::string bad_value = good;
  bad_value.replace(bad_value.find("\"pids\":256"), 10, "\"pids\":1");  // below the minimum
  auto r = spec_from_json(bad_value);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message().find("pids"), std::string::npos) << r.error().message();
  std::string bad_storage = good;
  bad_storage.replace(bad_storage.find("\"storage_id\":\"\""), 15, "\"storage_id\":\"../x\"");
  EXPECT_EQ(spec_from_json(bad_storage).error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(spec_from_json(std::string(2 << 20, ' ')).error().code, ErrorCode::kInvalidArgument);
  const std::string bad_mode = replaced(good, "\"network\":\"none\"", "\"network\":\"open\"");
  EXPECT_EQ(spec_from_json(bad_mode).error().context,
            "stored sandbox spec: unknown network mode 'open'");
  const std::string bad_rule = replaced(good, "\"network_allow\":[]", "\"network_allow\":[\"*\"]");
  EXPECT_EQ(spec_from_json(bad_rule).error().code, ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace sandcastle::service
