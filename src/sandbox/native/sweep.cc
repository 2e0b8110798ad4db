#include "sandbox/native/sweep.h"

#include <signal.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cstdio>

#include "common/log.h"
#include "sandbox/native/cgroup.h"
#include "sandbox/native/fs_util.h"
#include "sandbox/native/host_image.h"
#include "sandbox/native/persist_disk.h"
#include "sandbox/native/save_freeze.h"

namespace sandcastle::sandbox::native {
namespace {

bool pid_alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

}  // namespace

SweepReport sweep_leftovers() {
  SweepReport rep;
  // First: a frozen sandbox's processes keep its cgroups busy until thawed.
  for (auto& g : sweep_stale_save_freezers()) rep.removed.push_back(std::move(g));
  CgroupSupport cg = detect_cgroups();
  for (const auto& dir : find_stale_cgroups(cg)) {
    if (auto st = remove_cgroup_dir(dir, cg.version); st) rep.removed.push_back(dir);
    else rep.failed.push_back(dir + ": " + st.error().message());
  }
  for (const char* parent_dir : {"/run", "/tmp"}) {
    const std::string parent = parent_dir;
    for (const auto& name : list_dir(parent)) {
      std::string_view rest;
      auto owner = owner_pid(name, "sandcastle-", &rest);
      if (!owner || !rest.empty() || pid_alive(*owner)) continue;
      std::string path = parent + "/" + name;
      if (::access(path.c_str(), W_OK) != 0) continue;  // another user's
      // Idmapped layer binds of an image sandbox being made (image_root.h).
      // Each sandbox's directory is bound onto itself and holds the layers'
      // binds: both go (a detach of the outer one takes the inner ones too).
      for (const auto& sb : list_dir(path + "/img")) {
        const std::string dir = path + "/img/" + sb;
        for (const auto& n : list_dir(dir)) ::umount2((dir + "/" + n).c_str(), MNT_DETACH);
        ::umount2(dir.c_str(), MNT_DETACH);
      }
      // Persistent storage mounted by it (persist_disk.h): unmounted (its
      // loop device then detaches itself), never deleted. One that stays
      // mounted keeps the directory: remove_tree would not cross into it,
      // but nothing of it is touched at all.
      if (!sweep_persist_mounts(path)) {
        rep.failed.push_back(path + ": persistent storage still mounted");
        continue;
      }
      if (auto st = remove_tree(path); st) rep.removed.push_back(path);
      else rep.failed.push_back(path + ": " + st.error().message());
    }
  }
  for (const auto& r : rep.removed) spdlog::info("sweep: removed leftover {}", r);
  for (const auto& f : rep.failed) spdlog::warn("sweep: {}", f);
  return rep;
}

}  // namespace sandcastle::sandbox::native
