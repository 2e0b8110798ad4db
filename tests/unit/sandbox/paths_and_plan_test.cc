#include <gtest/gtest.h>

#include <algorithm>

#include "sandbox/native/host_image.h"
#include "sandbox/native/sandbox_fs.h"

namespace sandcastle::sandbox::native {
namespace {

TEST(SandboxPaths, NormalisesRelativeAndAbsolute) {
  EXPECT_EQ(*sandbox_relative_path("a/b", "/workspace"), "workspace/a/b");
  EXPECT_EQ(*sandbox_relative_path("/etc//passwd", "/workspace"), "etc/passwd");
  EXPECT_EQ(*sandbox_relative_path("./x/.", "/workspace"), "workspace/x");
  EXPECT_EQ(*sandbox_relative_path("/", "/workspace"), "");
}

TEST(SandboxPaths, RefusesDotDotNulAndKernelFs) {
  EXPECT_EQ(sandbox_relative_path("../x", "/workspace").error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(sandbox_relative_path("/a/../b", "/w").error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(sandbox_relative_path(std::string("a\0b", 3), "/w").error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(sandbox_relative_path("", "/w").error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(sandbox_relative_path("/proc/1/root", "/w").error().code, ErrorCode::kPermissionDenied);
  EXPECT_EQ(sandbox_relative_path("/dev/sda", "/w").error().code, ErrorCode::kPermissionDenied);
  EXPECT_TRUE(sandbox_relative_path("/procfile", "/w").ok());
}

TEST(HostImagePlan, ReadOnlyUsrSizedTmpfsAndRootLast) {
  SpecOptions o;
  o.limits.disk_bytes = 3 * kMiB;
  auto spec = SandboxSpec::create(o);
  ASSERT_TRUE(spec.ok());
  auto plan = host_image_plan(*spec, "/run/t/etc");
  auto find = [&](MountKind k, const std::string& dst) {
    return std::find_if(plan.begin(), plan.end(), [&](const MountOp& m) { return m.kind == k && m.dst == dst; });
  };
  auto usr = find(MountKind::kBind, "usr");
  ASSERT_NE(usr, plan.end());
  EXPECT_FALSE(usr->writable);
  auto ws = find(MountKind::kTmpfs, "workspace");
  ASSERT_NE(ws, plan.end());
  EXPECT_EQ(ws->size, 3 * kMiB);
  EXPECT_NE(find(MountKind::kProc, "proc"), plan.end());
  EXPECT_NE(find(MountKind::kBind, "etc"), plan.end());
  EXPECT_EQ(find(MountKind::kBind, "etc")->src, "/run/t/etc");
  // Every mount point is created before it is mounted on.
  EXPECT_LT(find(MountKind::kMkdir, "workspace"), ws);
  EXPECT_EQ(plan.back().kind, MountKind::kReadOnly);
  EXPECT_EQ(plan.back().dst, "");
}

}  // namespace
}  // namespace sandcastle::sandbox::native
