// The image mount plan's inputs and shape (image_root.h); the plan itself
// runs in tests/integration/sandbox/image_test.cc.
#include "sandbox/native/image_root.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace sandcastle::sandbox::native {
namespace {

TEST(ImageRoot, LayerPathsThatCannotBeLowerDirsAreRefused) {
  EXPECT_TRUE(check_layer_paths({"/var/lib/sandcastle/images/layers/sha256-ab"}).ok());
  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
           {},
           {"relative/dir"},
           {"/a,upperdir=/etc"},
           {"/a:/b"},
           {"/a\\b"},
           {"/a\nb"},
           {""},
           std::vector<std::string>(129, "/l"),
           std::vector<std::string>(40, "/" + std::string(100, 'x'))}) {
    auto st = check_layer_paths(bad);
    ASSERT_FALSE(st.ok()) << (bad.empty() ? "(none)" : bad[0]);
    EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument);
  }
}

TEST(ImageRoot, PlanMountsTheOverlayTopFirstAndPivotsIntoIt) {
  RuntimeDirs dirs;
  dirs.root_mount = "/run/sc/root";
  dirs.share = "/run/sc/share";
  dirs.mask = "/run/sc/mask";
  Limits l;
  l.disk_bytes = 8 << 20;
  auto plan = image_base_plan({"/l/top", "/l/bottom"}, dirs, l);
  auto overlay = std::find_if(plan.begin(), plan.end(),
                              [](const MountOp& op) { return op.kind == MountKind::kOverlay; });
  ASSERT_NE(overlay, plan.end());
  EXPECT_EQ(overlay->src, "/l/top:/l/bottom");
  EXPECT_EQ(overlay->dst, kImageRootSubdir);
  // The disk limit's tmpfs comes before the overlay whose upper dir it holds.
  auto rw = std::find_if(plan.begin(), plan.end(), [](const MountOp& op) {
    return op.kind == MountKind::kTmpfs && op.dst == "rw";
  });
  ASSERT_NE(rw, plan.end());
  EXPECT_LT(rw, overlay);
  EXPECT_EQ(rw->size, 8u << 20);
  // /opt/sandcastle is bound read-only. /workspace is a real directory of the
  // overlay, not a mount: an image's own /workspace (a saved sandbox's files)
  // shows there, and writes to it land in the upper dir on the same tmpfs.
  bool drivers = false, workspace_dir = false, workspace_mount = false;
  for (const auto& op : plan) {
    if (op.kind == MountKind::kBind && op.dst == "merged/opt/sandcastle")
      drivers = !op.writable && op.src == dirs.share;
    if (op.dst == "merged/workspace") {
      if (op.kind == MountKind::kRealDir) workspace_dir = true;
      else workspace_mount = true;
    }
  }
  EXPECT_TRUE(drivers);
  EXPECT_TRUE(workspace_dir);
  EXPECT_FALSE(workspace_mount);
}

TEST(ImageRoot, InitConfigCarriesTheRootSubdir) {
  InitConfig c;
  c.new_root = "/run/x/root";
  c.root_subdir = kImageRootSubdir;
  c.mounts.push_back(MountOp{MountKind::kMove, "dev", "merged/dev", 0, 0, false, ""});
  c.mounts.push_back(MountOp{MountKind::kOverlay, "/a:/b", "merged", 0, 0, true, "rw"});
  auto d = decode_init_config(encode(c));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->root_subdir, "merged");
  ASSERT_EQ(d->mounts.size(), 2u);
  EXPECT_EQ(d->mounts[0].describe(), "move /dev -> /merged/dev");
  EXPECT_EQ(d->mounts[1].describe(), "mount overlay /merged");
  const std::string bytes = encode(c);
  EXPECT_FALSE(decode_init_config(bytes.substr(0, bytes.size() - 1)).has_value());  // truncated
}

}  // namespace
}  // namespace sandcastle::sandbox::native
