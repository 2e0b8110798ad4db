// The container an engine sandbox runs in (container_config.h): every
// hardening the issue lists, limits from the spec, and the "host" image's
// binds; and the base image tar the engine imports.
#include "sandbox/engine/container_config.h"

#include <gtest/gtest.h>

#include "sandbox/sandbox.h"

namespace sandcastle::sandbox::engine {
namespace {

ContainerPlan host_plan() {
  ContainerPlan p;
  p.image = kHostBaseImage;
  p.host_root = true;
  p.etc_dir = "/run/sandcastle-1/etc";
  p.share_dir = "/run/sandcastle-1/share";
  p.sandbox_id = "eng-0123456789ab";
  p.server_tag = "h:1";
  return p;
}

SandboxSpec spec_with_limits() {
  SpecOptions o;
  o.limits.memory_bytes = 300 * kMiB;
  o.limits.pids = 77;
  o.limits.cpu_millis = 1500;
  o.limits.disk_bytes = 40 * kMiB;
  o.limits.tmp_bytes = 8 * kMiB;
  o.hostname = "box";
  return *SandboxSpec::create(o);
}

TEST(ContainerConfig, LocksTheContainerDown) {
  auto c = container_config(spec_with_limits(), host_plan());
  const auto& h = c["HostConfig"];
  EXPECT_EQ(h["CapDrop"], nlohmann::json::array({"ALL"}));
  EXPECT_EQ(h["SecurityOpt"], nlohmann::json::array({"no-new-privileges"}));
  EXPECT_EQ(h["ReadonlyRootfs"], true);
  EXPECT_EQ(h["NetworkMode"], "none");
  EXPECT_EQ(c["NetworkDisabled"], true);
  EXPECT_EQ(c["User"], "1000:1000");
  // No seccomp override: the engine's default profile applies.
  for (const auto& o : h["SecurityOpt"])
    EXPECT_EQ(o.get<std::string>().find("seccomp"), std::string::npos);
  EXPECT_FALSE(h.contains("Privileged"));
  EXPECT_FALSE(h.contains("CapAdd"));
  EXPECT_EQ(h["LogConfig"]["Type"], "none");  // PID 1's output fills no disk
  EXPECT_EQ(c["StopTimeout"], 1);
  EXPECT_EQ(c["Entrypoint"], nlohmann::json::array({kAgentInContainer}));
  EXPECT_EQ(c["Cmd"], nlohmann::json::array({"init"}));
}

// Issue 19's allowlist: still no interface but lo; the agent (not root)
// may bind :53 there.
TEST(ContainerConfig, AllowlistKeepsNoNetworkButLetsTheAgentBindLowPorts) {
  auto none = container_config(spec_with_limits(), host_plan());
  EXPECT_FALSE(none["HostConfig"].contains("Sysctls"));
  SpecOptions o;
  o.network = NetworkMode::kAllowList;
  auto c = container_config(*SandboxSpec::create(o), host_plan());
  const auto& h = c["HostConfig"];
  EXPECT_EQ(h["NetworkMode"], "none");
  EXPECT_EQ(c["NetworkDisabled"], true);
  EXPECT_EQ(h["Sysctls"], (nlohmann::json{{"net.ipv4.ip_unprivileged_port_start", "0"}}));
  EXPECT_FALSE(h.contains("Dns"));  // engines ignore it without a network
}

TEST(ContainerConfig, LimitsComeFromTheSpec) {
  auto c = container_config(spec_with_limits(), host_plan());
  const auto& h = c["HostConfig"];
  EXPECT_EQ(h["Memory"], 300 * kMiB);
  EXPECT_EQ(h["MemorySwap"], 300 * kMiB);  // no swap on top
  EXPECT_EQ(h["PidsLimit"], 77);
  EXPECT_EQ(h["NanoCpus"], 1'500'000'000u);
  EXPECT_EQ(h["Tmpfs"]["/tmp"], "rw,exec,nosuid,nodev,size=8388608,mode=1777");
  EXPECT_EQ(h["Tmpfs"]["/workspace"],
            "rw,exec,nosuid,nodev,size=41943040,uid=1000,gid=1000,mode=0755");
  EXPECT_EQ(c["Hostname"], "box");
}

TEST(ContainerConfig, PodmanOwnsTheWorkspaceWithU) {
  auto plan = host_plan();
  plan.podman = true;
  auto c = container_config(spec_with_limits(), plan);
  EXPECT_EQ(c["HostConfig"]["Tmpfs"]["/workspace"],
            "rw,exec,nosuid,nodev,size=41943040,U,mode=0755");
}

TEST(ContainerConfig, HostImageBindsUsrAndTheTemplateReadOnly) {
  auto c = container_config(spec_with_limits(), host_plan());
  const auto& binds = c["HostConfig"]["Binds"];
  EXPECT_EQ(binds[0], "/usr:/usr:ro");
  EXPECT_EQ(binds[1], "/run/sandcastle-1/etc:/etc:ro");
  EXPECT_EQ(binds.back(), "/run/sandcastle-1/share:/opt/sandcastle:ro");
  for (const auto& b : binds)
    EXPECT_EQ(b.get<std::string>().substr(b.get<std::string>().size() - 3), ":ro");
}

TEST(ContainerConfig, AnImageOfTheEnginesKeepsItsOwnTree) {
  auto plan = host_plan();
  plan.host_root = false;
  plan.image = "busybox:1";
  plan.user = "nobody";
  auto c = container_config(spec_with_limits(), plan);
  EXPECT_EQ(c["HostConfig"]["Binds"],
            nlohmann::json::array({"/run/sandcastle-1/share:/opt/sandcastle:ro"}));
  EXPECT_EQ(c["User"], "nobody");
  // A named user: the tmpfs is not chowned to a number we would guess.
  EXPECT_EQ(c["HostConfig"]["Tmpfs"]["/workspace"], "rw,exec,nosuid,nodev,size=41943040,mode=0755");
}

TEST(ContainerConfig, ARemotePlanBindsNothingOfThisHost) {
  auto plan = host_plan();
  plan.host_root = false;
  plan.remote = true;
  plan.image = "busybox:1";
  auto c = container_config(spec_with_limits(), plan);
  EXPECT_EQ(c["HostConfig"]["Binds"], nlohmann::json::array());
  // kSharedDir is an anonymous volume of the container's (removed with it).
  EXPECT_EQ(c["Volumes"], (nlohmann::json{{"/opt/sandcastle", nlohmann::json::object()}}));
  EXPECT_EQ(c["Entrypoint"], nlohmann::json::array({kAgentInContainer}));
  EXPECT_FALSE(container_config(spec_with_limits(), host_plan()).contains("Volumes"));
}

TEST(ContainerConfig, TarFileEntryIsRootsWithItsModeAndPadding) {
  auto e = tar_file_entry(".agent", 0755, "abc");
  ASSERT_TRUE(e.ok());
  ASSERT_EQ(e->size(), 1024u);
  EXPECT_EQ(std::string(e->c_str()), ".agent");
  EXPECT_EQ(std::string(e->c_str() + 100, 7), "0000755");
  EXPECT_EQ(std::string(e->c_str() + 108, 7), "0000000");  // uid
  EXPECT_EQ(std::string(e->c_str() + 116, 7), "0000000");  // gid
  EXPECT_EQ(std::string(e->c_str() + 124, 11), "00000000003");
  EXPECT_EQ((*e)[156], '0');
  EXPECT_EQ(e->substr(512, 4), std::string("abc\0", 4));
  auto empty = tar_file_entry("x", 0444, "");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->size(), 512u);
  auto long_name = tar_file_entry(std::string(100, 'n'), 0444, "x");
  ASSERT_FALSE(long_name.ok());
  EXPECT_EQ(long_name.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(tar_end(), std::string(1024, '\0'));
}

TEST(ContainerConfig, BaseTarHasMountPointsAndMergedUsrLinks) {
  const std::string tar = host_base_tar();
  ASSERT_EQ(tar.size() % 512, 0u);
  std::vector<std::pair<std::string, char>> entries;
  for (std::size_t at = 0; at + 512 <= tar.size(); at += 512) {
    if (tar[at] == '\0') break;
    entries.emplace_back(std::string(tar.c_str() + at), tar[at + 156]);
    if (entries.back().first == "bin") {
      EXPECT_EQ(std::string(tar.c_str() + at + 157), "usr/bin");
    }
    if (entries.back().first == "tmp/") {
      EXPECT_EQ(std::string(tar.c_str() + at + 100, 7), "0001777");
    }
  }
  auto has = [&](const std::string& name, char type) {
    for (const auto& e : entries)
      if (e.first == name && e.second == type) return true;
    return false;
  };
  EXPECT_TRUE(has("usr/", '5'));
  EXPECT_TRUE(has("workspace/", '5'));
  EXPECT_TRUE(has("opt/sandcastle/", '5'));
  EXPECT_TRUE(has("bin", '2'));
  EXPECT_TRUE(has("lib64", '2'));
  EXPECT_TRUE(has("tmp/", '5'));
}

}  // namespace
}  // namespace sandcastle::sandbox::engine
