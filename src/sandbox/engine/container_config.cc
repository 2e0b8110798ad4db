#include "sandbox/engine/container_config.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "sandbox/sandbox.h"

namespace sandcastle::sandbox::engine {
namespace {

using nlohmann::json;

// Docker's tmpfs default is noexec; a sandbox compiles and runs programs in
// /workspace and /tmp, as on the native backend.
std::string tmpfs_options(std::uint64_t bytes, const std::string& owner_mode) {
  return "rw,exec,nosuid,nodev,size=" + std::to_string(bytes) + owner_mode;
}

std::string owner_of(const std::string& user) {
  // "1000:1000" -> ",uid=1000,gid=1000"; a named user is left to the image.
  auto colon = user.find(':');
  std::string uid = user.substr(0, colon);
  std::string gid = colon == std::string::npos ? uid : user.substr(colon + 1);
  auto numeric = [](const std::string& s) {
    return !s.empty() &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (!numeric(uid) || !numeric(gid)) return "";
  return ",uid=" + uid + ",gid=" + gid;
}

void put_octal(std::string& h, std::size_t off, std::size_t width, unsigned long long v) {
  char buf[32];
  (void)std::snprintf(buf, sizeof buf, "%0*llo", static_cast<int>(width - 1), v);
  std::copy_n(buf, width - 1, h.begin() + static_cast<std::ptrdiff_t>(off));
}

}  // namespace

std::string ustar_header(const std::string& name, char type, unsigned mode, std::uint64_t size,
                         const std::string& link) {
  std::string h(512, '\0');
  std::copy(name.begin(), name.end(), h.begin());
  put_octal(h, 100, 8, mode);
  put_octal(h, 108, 8, 0);
  put_octal(h, 116, 8, 0);
  put_octal(h, 124, 12, size);
  put_octal(h, 136, 12, 1700000000);
  h[156] = type;
  std::copy(link.begin(), link.end(), h.begin() + 157);
  std::copy_n("ustar", 5, h.begin() + 257);
  h[263] = '0';
  h[264] = '0';
  std::fill_n(h.begin() + 148, 8, ' ');
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  char cks[8];
  (void)std::snprintf(cks, sizeof cks, "%06o", sum);
  std::copy_n(cks, 7, h.begin() + 148);
  return h;
}

json container_config(const SandboxSpec& spec, const ContainerPlan& plan) {
  const Limits& l = spec.limits();
  json binds = json::array();
  if (plan.host_root) {
    binds.push_back("/usr:/usr:ro");
    binds.push_back(plan.etc_dir + ":/etc:ro");
    // As the native "host" image: certificates, and the alternatives that
    // /usr's links go through (libblas, java, awk); the template has their
    // mount points.
    for (const char* sub : {"ssl", "alternatives", "ca-certificates"})
      if (::access((std::string("/etc/") + sub).c_str(), F_OK) == 0)
        binds.push_back(std::string("/etc/") + sub + ":/etc/" + sub + ":ro");
  }
  if (!plan.remote) binds.push_back(plan.share_dir + ":" + kSharedDir + ":ro");
  json host{
      {"Binds", binds},
      {"Tmpfs",
       {{"/tmp", tmpfs_options(l.tmp_bytes, ",mode=1777")},
        {spec.workdir(),
         tmpfs_options(l.disk_bytes,
                       (plan.podman ? std::string(",U") : owner_of(plan.user)) + ",mode=0755")}}},
      {"ReadonlyRootfs", true},
      {"CapDrop", {"ALL"}},
      {"SecurityOpt", {"no-new-privileges"}},
      {"NetworkMode", "none"},
      {"Memory", l.memory_bytes},
      {"MemorySwap", l.memory_bytes},
      {"PidsLimit", l.pids},
      // Podman's defaults here are the host's, which its runtime refuses to
      // raise past; dockerd takes them as given (machine.md).
      {"Ulimits", json::array({{{"Name", "nofile"}, {"Soft", 20000}, {"Hard", 20000}},
                               {{"Name", "nproc"}, {"Soft", 32768}, {"Hard", 32768}}})},
  };
  // PID 1's stdout is the container log: no log driver, so nothing written
  // there (by the agent, or by sandbox code through /proc) fills the
  // engine host's disk.
  host["LogConfig"] = json{{"Type", "none"}, {"Config", json::object()}};
  if (spec.network() == NetworkMode::kAllowList) {
    // Still no interface but lo: the agent listens there for the server's
    // proxies (EngineSandbox::open_net_listeners), :53 included, as the
    // sandbox user. The sysctl is the container's own network namespace's.
    // No "Dns": with NetworkMode none neither engine writes a resolv.conf
    // (Podman leaves none, Docker the image's), and a resolv.conf without a
    // nameserver means 127.0.0.1 to glibc and musl alike.
    host["Sysctls"] = {{"net.ipv4.ip_unprivileged_port_start", "0"}};
  }
  if (l.cpu_millis > 0) host["NanoCpus"] = static_cast<std::uint64_t>(l.cpu_millis) * 1'000'000;
  json config{
      {"Image", plan.image},
      {"Entrypoint", {kAgentInContainer}},
      {"Cmd", {"init"}},
      {"User", plan.user},
      {"WorkingDir", spec.workdir()},
      {"Hostname", spec.hostname()},
      {"NetworkDisabled", true},
      {"Labels",
       {{"sandcastle", "1"},
        {"sandcastle.sandbox", plan.sandbox_id},
        {"sandcastle.server", plan.server_tag}}},
      {"HostConfig", host},
      // The agent exits on SIGTERM; a hung one is killed after a second,
      // not the engine's default ten.
      {"StopTimeout", 1},
  };
  // Removed with the container (the remover's v=1).
  if (plan.remote) config["Volumes"] = {{kSharedDir, json::object()}};
  return config;
}

Result<std::string> tar_file_entry(const std::string& name, unsigned mode, std::string_view data) {
  if (name.empty() || name.size() >= 100 || name.find('\0') != std::string::npos)
    return Error::make(ErrorCode::kInvalidArgument, "tar entry name '" + name.substr(0, 100) + "'");
  std::string out = ustar_header(name, '0', mode, data.size());
  out.append(data);
  out.append((512 - data.size() % 512) % 512, '\0');
  return out;
}

std::string tar_end() {
  return std::string(1024, '\0');
}

std::string host_base_tar() {
  std::string out;
  for (const char* d : {"usr/", "etc/", "workspace/", "opt/", "opt/sandcastle/", "proc/", "dev/",
                        "sys/", "root/", "home/", "run/", "var/"})
    out += ustar_header(d, '5', 0755, 0);
  // Podman copies a tmpfs's mode from the image's directory.
  for (const char* d : {"tmp/", "var/tmp/"}) out += ustar_header(d, '5', 01777, 0);
  for (const char* l : {"bin", "lib", "lib32", "lib64", "libx32", "sbin"})
    out += ustar_header(l, '2', 0777, 0, std::string("usr/") + l);
  out.append(1024, '\0');
  return out;
}

}  // namespace sandcastle::sandbox::engine
