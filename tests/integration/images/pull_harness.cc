#include "pull_harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

extern char** environ;

namespace sandcastle::images::testing {

namespace fs = std::filesystem;

std::string fixtures_dir() {
  return std::string(SANDCASTLE_SOURCE_DIR) + "/tests/integration/images/pull_fixtures";
}

std::string missing_tools() {
  std::string missing;
  for (const char* t : {"/usr/bin/docker-registry", "/usr/bin/skopeo", "/usr/bin/umoci",
                        "/usr/bin/node", "/usr/bin/openssl", "/usr/bin/python3"})
    if (::access(t, X_OK) != 0) missing += std::string(missing.empty() ? "" : ", ") + t;
  return missing;
}

TempDir::TempDir() {
  std::string tmpl = (fs::temp_directory_path() / "sc-pull-XXXXXX").string();
  if (::mkdtemp(tmpl.data())) path = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!path.empty()) fs::remove_all(path, ec);
}

namespace {

// argv with stdout and stderr on one pipe; the read end is returned.
pid_t spawn(const std::vector<std::string>& argv, int* read_fd) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p[1], 1);
  posix_spawn_file_actions_adddup2(&fa, p[1], 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  // Killed with the test process however it ends (a crash, _exit, a
  // sanitizer's exit code), not only by the destructors at a clean exit:
  // a registry left running outlives the run.
  std::vector<std::string> full = {"/usr/bin/setpriv", "--pdeathsig", "KILL", "--"};
  full.insert(full.end(), argv.begin(), argv.end());
  std::vector<char*> args;
  for (const auto& a : full) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(p[1]);
  if (rc != 0) {
    ::close(p[0]);
    return -1;
  }
  *read_fd = p[0];
  return pid;
}

}  // namespace

CommandResult run_command(const std::vector<std::string>& argv) {
  CommandResult r;
  int fd = -1;
  const pid_t pid = spawn(argv, &fd);
  if (pid < 0) {
    r.out = "spawn " + argv[0] + " failed";
    return r;
  }
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    r.out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << data;
}

int free_port() {
  const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = 0;
  if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(s);
  return port;
}

std::unique_ptr<Server> Server::start(const std::vector<std::string>& argv,
                                      const std::string& ready, std::chrono::seconds timeout,
                                      std::string* why) {
  std::unique_ptr<Server> s(new Server());
  s->pid_ = spawn(argv, &s->fd_);
  if (s->pid_ < 0) {
    *why = "spawn " + argv[0] + " failed";
    return nullptr;
  }
  Server* raw = s.get();
  s->reader_ = std::thread([raw] {
    char buf[4096];
    for (;;) {
      const ssize_t n = ::read(raw->fd_, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      std::lock_guard l(raw->mu_);
      if (n <= 0) {
        raw->eof_ = true;
        raw->cv_.notify_all();
        return;
      }
      raw->out_.append(buf, static_cast<std::size_t>(n));
      raw->cv_.notify_all();
    }
  });
  std::unique_lock l(s->mu_);
  const bool ok = s->cv_.wait_for(
      l, timeout, [&] { return s->out_.find(ready) != std::string::npos || s->eof_; });
  if (!ok || s->out_.find(ready) == std::string::npos) {
    *why = argv[0] + (ok ? " exited before it was ready: " : " not ready in time: ") + s->out_;
    l.unlock();
    return nullptr;
  }
  return s;
}

Server::~Server() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (reader_.joinable()) reader_.join();
  if (fd_ >= 0) ::close(fd_);
}

std::string Server::output() const {
  std::lock_guard l(mu_);
  return out_;
}

int Server::listening_port() const {
  const std::string out = output();
  const auto at = out.find("listening ");
  return at == std::string::npos ? 0 : std::atoi(out.c_str() + at + 10);
}

namespace {

struct EnvHolder {
  PullEnv env;
  TempDir dir;
  std::vector<std::unique_ptr<Server>> servers;
};

std::string registry_config(const std::string& root, int port, const std::string& extra) {
  return "version: 0.1\nlog:\n  level: info\n  accesslog:\n    disabled: true\nstorage:\n  "
         "filesystem:\n"
         "    rootdirectory: " +
         root + "\nhttp:\n  addr: 127.0.0.1:" + std::to_string(port) + "\n" + extra;
}

// Starts docker-registry with `extra` config; the port it listens on, or 0.
int start_registry(EnvHolder& h, const std::string& name, const std::string& extra,
                   std::string* why) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    const int port = free_port();
    const std::string cfg = h.dir.path + "/" + name + ".yml";
    write_file(cfg, registry_config(h.dir.path + "/" + name + "-data", port, extra));
    auto s = Server::start({"/usr/bin/docker-registry", "serve", cfg},
                           "listening on 127.0.0.1:" + std::to_string(port),
                           std::chrono::seconds(20), why);
    if (!s) continue;  // the port was taken meanwhile: another one
    h.servers.push_back(std::move(s));
    return port;
  }
  return 0;
}

// An auth file of the test's own: skopeo otherwise reads /run/containers/<uid>/auth.json,
// which a root podman on the same machine leaves unreadable (EACCES) to other users.
bool push(const EnvHolder& h, const std::string& src, const std::string& dest,
          std::vector<std::string> extra, std::string* why) {
  const std::string authfile = h.dir.path + "/auth.json";
  if (::access(authfile.c_str(), F_OK) != 0) write_file(authfile, "{}\n");
  std::vector<std::string> argv = {"skopeo",          "copy",  "--quiet", "--dest-tls-verify=false",
                                   "--dest-authfile", authfile};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back(src);
  argv.push_back(dest);
  auto r = run_command(argv);
  if (r.status != 0) *why = "skopeo copy " + src + " " + dest + ": " + r.out;
  return r.status == 0;
}

std::string ref_digest(const std::string& layout, const std::string& ref) {
  auto index = nlohmann::json::parse(read_file(layout + "/index.json"));
  for (const auto& m : index["manifests"])
    if (m["annotations"]["org.opencontainers.image.ref.name"] == ref) return m["digest"];
  return {};
}

void build(EnvHolder& h) {
  PullEnv& e = h.env;
  if (auto m = missing_tools(); !m.empty()) {
    e.error = "missing tools: " + m;
    return;
  }
  e.layout = h.dir.path + "/layout";
  if (auto r = run_command({"python3", fixtures_dir() + "/make_layouts.py", e.layout});
      r.status != 0) {
    e.error = "make_layouts.py: " + r.out;
    return;
  }
  e.amd_manifest = ref_digest(e.layout, "amd");
  e.arm_manifest = ref_digest(e.layout, "arm");
  e.multi_index = ref_digest(e.layout, "multi");

  // Anonymous registry.
  if (!(e.port = start_registry(h, "anon", "", &e.error))) return;
  const std::string anon = "docker://127.0.0.1:" + std::to_string(e.port);
  if (!push(h, "oci:" + e.layout + ":amd", anon + "/test/img:v1", {}, &e.error) ||
      !push(h, "oci:" + e.layout + ":arm", anon + "/test/arm:v1", {}, &e.error) ||
      !push(h, "oci:" + e.layout + ":multi", anon + "/test/multi:v1", {"--all"}, &e.error) ||
      !push(h, "oci:" + e.layout + ":amd", anon + "/test/docker:v1", {"--format", "v2s2"},
            &e.error))
    return;

  // Token auth: a token server signing with a key whose certificate the registry trusts.
  const std::string key = h.dir.path + "/token-key.pem", cert = h.dir.path + "/token-cert.pem";
  if (auto r =
          run_command({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key,
                       "-out", cert, "-days", "2", "-subj", "/CN=sandcastle test token signer"});
      r.status != 0) {
    e.error = "openssl: " + r.out;
    return;
  }
  auto tokens =
      Server::start({"node", fixtures_dir() + "/token_server.mjs", key, cert, "sandcastle-test"},
                    "listening ", std::chrono::seconds(20), &e.error);
  if (!tokens) return;
  const int token_port = tokens->listening_port();
  h.servers.push_back(std::move(tokens));
  const std::string auth =
      "auth:\n  token:\n    realm: http://127.0.0.1:" + std::to_string(token_port) +
      "/token\n    service: sandcastle-registry\n    issuer: sandcastle-test\n"
      "    rootcertbundle: " +
      cert + "\n";
  if (!(e.auth_port = start_registry(h, "auth", auth, &e.error))) return;
  const std::string authed = "docker://127.0.0.1:" + std::to_string(e.auth_port);
  if (!push(h, "oci:" + e.layout + ":amd", authed + "/private/img:v1",
            {"--dest-creds", "alice:secret"}, &e.error) ||
      !push(h, "oci:" + e.layout + ":amd", authed + "/public/img:v1",
            {"--dest-creds", "alice:secret"}, &e.error))
    return;

  // TLS: a self-signed certificate for the IP address 127.0.0.1 only.
  const std::string tkey = h.dir.path + "/tls-key.pem";
  e.tls_ca = h.dir.path + "/tls-cert.pem";
  if (auto r = run_command({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                            tkey, "-out", e.tls_ca, "-days", "2", "-subj", "/CN=127.0.0.1",
                            "-addext", "subjectAltName=IP:127.0.0.1"});
      r.status != 0) {
    e.error = "openssl: " + r.out;
    return;
  }
  const std::string tls = "  tls:\n    certificate: " + e.tls_ca + "\n    key: " + tkey + "\n";
  if (!(e.tls_port = start_registry(h, "tls", tls, &e.error))) return;
  if (!push(h, "oci:" + e.layout + ":amd",
            "docker://127.0.0.1:" + std::to_string(e.tls_port) + "/test/img:v1", {}, &e.error))
    return;
}

}  // namespace

const PullEnv& pull_env() {
  // Destroyed at exit: the servers are killed and the directory removed.
  static const std::unique_ptr<EnvHolder> holder = [] {
    auto h = std::make_unique<EnvHolder>();
    if (h->dir.path.empty()) {
      h->env.error = "mkdtemp failed";
    } else {
      build(*h);
    }
    return h;
  }();
  return holder->env;
}

}  // namespace sandcastle::images::testing
