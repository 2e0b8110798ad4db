#include "engine_fixture.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

namespace sandcastle::sandbox::engine::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct RunningEngine {
  TestEngine engine;
  pid_t pid = -1;
  std::string why;  // set when it could not start
  std::string log;
  std::vector<std::string> argv;  // how it was started (restart_test_engine)
};

bool sh(const std::string& cmd) {
  return std::system(cmd.c_str()) == 0;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

pid_t spawn(const std::vector<std::string>& argv, const std::string& log) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return -1;
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Async-signal-safe only: the engines die with the test binary.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    ::setpgid(0, 0);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(fd);
  return pid;
}

void stop(pid_t pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGTERM);
  const auto until = Clock::now() + std::chrono::seconds(15);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() > until) {
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Podman's exec sessions leave conmon processes behind (they wait 300 s,
// --exit-delay, to clean up after the exec); they are ours, named by the
// engine's directory in their command line.
void kill_leftovers(const std::string& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string pid = entry.path().filename();
    if (pid.empty() || !std::all_of(pid.begin(), pid.end(), ::isdigit)) continue;
    std::string cmdline = read_file("/proc/" + pid + "/cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(dir + "/") != std::string::npos) ::kill(std::stoi(pid), SIGKILL);
  }
}

// The engines leave mounts (overlay layers, netns files) under their
// directories; unmount them (deepest first) before removing the tree.
void remove_engine_dir(const std::string& dir) {
  std::vector<std::string> mounts;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string id, parent, dev, root, point;
    ls >> id >> parent >> dev >> root >> point;
    if (point.rfind(dir + "/", 0) == 0 || point == dir) mounts.push_back(point);
  }
  std::sort(mounts.begin(), mounts.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  for (const auto& m : mounts) ::umount2(m.c_str(), MNT_DETACH);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// A CA, a server certificate for 127.0.0.1 and a client certificate, as
// docker's "protect the daemon socket" guide makes them.
bool make_certs(const std::string& dir) {
  const std::string q = "cd '" + dir + "' && ";
  return sh(q +
            "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=test-ca "
            "-keyout ca-key.pem -out ca.pem >/dev/null 2>&1") &&
         sh(q +
            "openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout server-key.pem "
            "-out server.csr >/dev/null 2>&1 && printf 'subjectAltName=IP:127.0.0.1\\n"
            "extendedKeyUsage=serverAuth\\n' > server.ext && openssl x509 -req -in server.csr "
            "-CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 2 -extfile server.ext "
            "-out server-cert.pem >/dev/null 2>&1") &&
         sh(q +
            "mkdir -p client && openssl req -newkey rsa:2048 -nodes -subj /CN=client "
            "-keyout client/key.pem -out client.csr >/dev/null 2>&1 && printf "
            "'extendedKeyUsage=clientAuth\\n' > client.ext && openssl x509 -req -in client.csr "
            "-CA ca.pem -CAkey ca-key.pem -CAcreateserial -days 2 -extfile client.ext "
            "-out client/cert.pem >/dev/null 2>&1 && cp ca.pem client/ca.pem");
}

// A root filesystem of busybox (static) and its applets, as a tar.
bool make_rootfs_tar(const std::string& dir, const std::string& tar) {
  const std::string r = dir + "/rootfs";
  std::string cmd =
      "mkdir -p '" + r + "/bin' '" + r + "/tmp' '" + r + "/workspace' '" + r +
      "/etc' && cp /bin/busybox '" + r + "/bin/' && cd '" + r + "/bin' && for a in " +
      "sh cat echo true sleep ls id kill ps head; do ln -s busybox $a; done && " +
      "printf 'root:x:0:0::/:/bin/sh\\nu:x:1000:1000::/workspace:/bin/sh\\n' > ../etc/passwd && "
      "chmod 1777 ../tmp && tar -C '" +
      r + "' -cf '" + tar + "' .";
  return sh(cmd);
}

bool wait_ready(RunningEngine& r) {
  const auto until = Clock::now() + std::chrono::seconds(60);
  EngineOptions o;
  o.url = r.engine.url;
  o.timeout = std::chrono::seconds(5);
  while (Clock::now() < until) {
    int status = 0;
    if (::waitpid(r.pid, &status, WNOHANG) == r.pid) {
      r.pid = -1;
      r.why = r.engine.name + " exited at start: " + read_file(r.log).substr(0, 2000);
      return false;
    }
    auto c = EngineClient::connect(o);
    if (c.ok()) return true;
    // No event to wait on: the engine creates its socket when it is ready.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  r.why = r.engine.name + " did not answer within 60 s: " + read_file(r.log).substr(0, 2000);
  return false;
}

void start(RunningEngine& r, const std::string& name) {
  r.engine.name = name;
  const std::string bin = name == "podman" ? "podman" : "dockerd";
  if (!sh("command -v " + bin + " >/dev/null 2>&1")) {
    r.why = bin + " is not installed (scripts/install-deps installs it)";
    return;
  }
  if (::geteuid() != 0) {
    r.why =
        name + " needs root here (rootless engines need subuid ranges this test does not set up)";
    return;
  }
  char tmpl[] = "/tmp/sc-eng-XXXXXX";
  if (!::mkdtemp(tmpl)) {
    r.why = "mkdtemp";
    return;
  }
  const std::string d = tmpl;
  r.engine.root = d;
  r.log = d + "/" + name + ".log";
  r.engine.url = "unix://" + d + "/" + name + ".sock";
  std::vector<std::string> argv;
  if (name == "podman") {
    // machine.md: runc (crun refuses the hybrid cgroups); everything of its
    // own under d, /run/libpod included (--tmpdir).
    const std::string flags = "--root " + d + "/root --runroot " + d + "/run --tmpdir " + d +
                              "/tmp --runtime runc --cgroup-manager cgroupfs --events-backend file";
    argv = {"podman",   "--root",           d + "/root", "--runroot",   d + "/run",
            "--tmpdir", d + "/tmp",         "--runtime", "runc",        "--cgroup-manager",
            "cgroupfs", "--events-backend", "file",      "--log-level", "error",
            "system",   "service",          "--time=0",  r.engine.url};
    r.engine.cli_prefix = "podman " + flags;
  } else {
    if (!make_certs(d)) {
      r.why = "openssl could not make the TLS test certificates";
      return;
    }
    const int port = free_port();
    r.engine.tls_url = "tcp://127.0.0.1:" + std::to_string(port);
    r.engine.tls_dir = d + "/client";
    argv = {"dockerd",
            "--iptables=false",
            "--ip6tables=false",
            "--bridge=none",
            "--data-root",
            d + "/data",
            "--exec-root",
            d + "/exec",
            "--pidfile",
            d + "/docker.pid",
            "--log-level",
            "error",
            "-H",
            r.engine.url,
            "-H",
            r.engine.tls_url,
            "--tlsverify",
            "--tlscacert",
            d + "/ca.pem",
            "--tlscert",
            d + "/server-cert.pem",
            "--tlskey",
            d + "/server-key.pem"};
    r.engine.cli_prefix = "docker -H " + r.engine.url;
  }
  r.argv = argv;
  r.pid = spawn(argv, r.log);
  if (r.pid < 0) {
    r.why = "could not start " + bin;
    return;
  }
  if (!wait_ready(r)) return;

  const std::string tar = d + "/busybox.tar";
  if (!make_rootfs_tar(d, tar)) {
    r.why = "could not make the busybox rootfs tar (busybox-static installed?)";
    return;
  }
  EngineOptions o;
  o.url = r.engine.url;
  auto c = EngineClient::connect(o);
  if (!c.ok()) {
    r.why = c.error().message();
    return;
  }
  std::ifstream in(tar, std::ios::binary);
  ByteSource src = [&in](char* buf, std::size_t cap) -> Result<std::size_t> {
    in.read(buf, static_cast<std::streamsize>(cap));
    return static_cast<std::size_t>(in.gcount());
  };
  auto id = (*c)->image_import(src, "sandcastle-engine-test:busybox");
  if (!id.ok()) {
    r.why = "importing the busybox image: " + id.error().message();
    return;
  }
  r.engine.image = *id;
}

struct Engines {
  std::mutex mu;
  std::map<std::string, std::unique_ptr<RunningEngine>> running;
};

Engines& engines() {
  static Engines e;
  return e;
}

class StopEngines : public ::testing::Environment {
 public:
  void TearDown() override {
    auto& e = engines();
    std::lock_guard lock(e.mu);
    for (auto& [name, r] : e.running) {
      if (r->pid > 0) {
        // Whatever a failed test left: containers (and their volumes).
        EngineOptions o;
        o.url = r->engine.url;
        if (auto c = EngineClient::connect(o); c.ok()) {
          if (auto list = (*c)->container_list(true); list.ok() && list->is_array())
            for (const auto& ct : *list)
              if (ct.contains("Id") && ct["Id"].is_string())
                (void)(*c)->container_remove(ct["Id"].get<std::string>(), true, true);
        }
        stop(r->pid);
      }
      if (!r->engine.root.empty()) {
        kill_leftovers(r->engine.root);
        remove_engine_dir(r->engine.root);
      }
    }
    e.running.clear();
  }
};

const bool registered = [] {
  ::testing::AddGlobalTestEnvironment(new StopEngines);
  return true;
}();

}  // namespace

const TestEngine* test_engine(const std::string& name, std::string* why) {
  auto& e = engines();
  std::lock_guard lock(e.mu);
  auto& slot = e.running[name];
  if (!slot) {
    slot = std::make_unique<RunningEngine>();
    start(*slot, name);
  }
  if (!slot->why.empty()) {
    if (why) *why = slot->why;
    return nullptr;
  }
  return &slot->engine;
}

bool stop_test_engine(const std::string& name) {
  auto& e = engines();
  std::lock_guard lock(e.mu);
  auto it = e.running.find(name);
  if (it == e.running.end() || it->second->pid <= 0) return false;
  stop(it->second->pid);
  it->second->pid = -1;
  return true;
}

bool restart_test_engine(const std::string& name, std::string* why) {
  auto& e = engines();
  std::lock_guard lock(e.mu);
  auto it = e.running.find(name);
  if (it == e.running.end() || it->second->argv.empty()) {
    if (why) *why = name + " was never started";
    return false;
  }
  RunningEngine& r = *it->second;
  if (r.pid > 0) return true;
  // The log of the first start stays: the restart's goes next to it.
  r.pid = spawn(r.argv, r.log + ".restart");
  if (r.pid < 0) {
    if (why) *why = "could not start " + name + " again";
    return false;
  }
  if (!wait_ready(r)) {
    if (why) *why = r.why;
    r.why.clear();
    return false;
  }
  return true;
}

std::unique_ptr<EngineClient> client_for(const TestEngine& engine) {
  EngineOptions o;
  o.url = engine.url;
  o.timeout = std::chrono::seconds(60);
  auto c = EngineClient::connect(o);
  EXPECT_TRUE(c.ok()) << c.error().message();
  if (!c.ok()) return nullptr;
  return std::move(*c);
}

nlohmann::json locked_down_config(const std::string& image) {
  using nlohmann::json;
  return json{
      {"Image", image},
      {"Cmd", {"sleep", "3600"}},
      {"User", "1000"},
      {"WorkingDir", "/workspace"},
      {"HostConfig",
       {{"CapDrop", {"ALL"}},
        {"NetworkMode", "none"},
        {"SecurityOpt", {"no-new-privileges"}},
        {"ReadonlyRootfs", true},
        {"Tmpfs", {{"/tmp", "rw,nosuid,nodev,size=64m"}}},
        {"Mounts", json::array({{{"Type", "volume"}, {"Target", "/workspace"}}})},
        {"Memory", 256 << 20},
        {"PidsLimit", 256},
        {"Ulimits", json::array({{{"Name", "nofile"}, {"Soft", 20000}, {"Hard", 20000}},
                                 {{"Name", "nproc"}, {"Soft", 32768}, {"Hard", 32768}}})}}}};
}

std::string tar_of_file(const std::string& name, const std::string& content) {
  std::string h(512, '\0');
  std::copy(name.begin(), name.end(), h.begin());
  auto put_octal = [&h](std::size_t off, std::size_t width, unsigned long long v) {
    std::snprintf(&h[off], width, "%0*llo", static_cast<int>(width - 1), v);
  };
  put_octal(100, 8, 0644);
  put_octal(108, 8, 1000);
  put_octal(116, 8, 1000);
  put_octal(124, 12, content.size());
  put_octal(136, 12, 1700000000);
  h[156] = '0';
  std::copy_n("ustar", 5, &h[257]);
  h[263] = '0';
  h[264] = '0';
  std::fill_n(&h[148], 8, ' ');
  unsigned sum = 0;
  for (unsigned char c : h) sum += c;
  std::snprintf(&h[148], 8, "%06o", sum);
  std::string out = h + content;
  out.append((512 - content.size() % 512) % 512, '\0');
  out.append(1024, '\0');
  return out;
}

std::string first_file_in_tar(const std::string& tar, std::string* name, bool* ok) {
  *ok = false;
  std::size_t off = 0;
  while (off + 512 <= tar.size()) {
    const char* h = tar.data() + off;
    if (h[0] == '\0') return {};
    const std::size_t size = std::strtoull(std::string(h + 124, 12).c_str(), nullptr, 8);
    const char type = h[156];
    if (type == '0' || type == '\0') {
      if (off + 512 + size > tar.size()) return {};
      *name = std::string(h, strnlen(h, 100));
      *ok = true;
      return tar.substr(off + 512, size);
    }
    off += 512 + (size + 511) / 512 * 512;
  }
  return {};
}

}  // namespace sandcastle::sandbox::engine::testing
