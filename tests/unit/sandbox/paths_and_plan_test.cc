#include <gtest/gtest.h>

#include <algorithm>

#include "sandbox/native/host_image.h"
#include "sandbox/native/file_client.h"

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
  RuntimeDirs dirs;
  dirs.etc_template = "/run/t/etc";
  dirs.share = "/run/t/share";
  auto plan = host_image_plan(*spec, dirs);
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
  // The server's shared files: a read-only bind at kSharedDir.
  auto share = find(MountKind::kBind, std::string(kSharedDir).substr(1));
  ASSERT_NE(share, plan.end());
  EXPECT_EQ(share->src, "/run/t/share");
  EXPECT_FALSE(share->writable);
  // Every mount point is created before it is mounted on.
  EXPECT_LT(find(MountKind::kMkdir, "workspace"), ws);
  EXPECT_EQ(plan.back().kind, MountKind::kReadOnly);
  EXPECT_EQ(plan.back().dst, "");
}

TEST(HostImagePlan, BasePartIsSpecIndependentAndSpecPartOnlySizesAndSeals) {
  // The base plan is built before any spec is known (prespawned inits): it
  // mounts no filesystem of its own beyond proc and devpts — /dev, /dev/shm
  // and /tmp are mounts of the root tmpfs's directories.
  std::vector<std::string> submounts;
  RuntimeDirs dirs;
  dirs.etc_template = "/run/t/etc";
  dirs.share = "/run/t/share";
  for (const MountOp& op : host_image_base_plan(dirs)) {
    EXPECT_NE(op.kind, MountKind::kTmpfs) << op.describe();
    if (op.kind == MountKind::kSubmount) submounts.push_back(op.dst);
  }
  EXPECT_EQ(submounts, (std::vector<std::string>{"dev", "dev/shm", "tmp"}));
  SpecOptions o;
  o.limits.tmp_bytes = 5 * kMiB;
  auto spec = SandboxSpec::create(o);
  ASSERT_TRUE(spec.ok());
  auto rest = host_image_spec_plan(*spec);
  for (const MountOp& op : rest)
    EXPECT_TRUE(op.kind == MountKind::kTmpfs || op.kind == MountKind::kReadOnly || op.kind == MountKind::kResize)
        << op.describe();
  ASSERT_FALSE(rest.empty());
  // The root tmpfs is sized to the /tmp limit (it holds /tmp and /dev/shm).
  EXPECT_EQ(rest.front().kind, MountKind::kResize);
  EXPECT_EQ(rest.front().dst, "");
  EXPECT_EQ(rest.front().size, 5 * kMiB);
  EXPECT_EQ(rest.back().kind, MountKind::kReadOnly);
  EXPECT_EQ(rest.back().dst, "");
}

}  // namespace
}  // namespace sandcastle::sandbox::native
