// What the image pull tests run against: Debian's docker-registry on
// loopback (anonymous, token auth, TLS), images pushed by skopeo from an OCI
// layout written by pull_fixtures/make_layouts.py, and misbehaving servers
// (pull_fixtures/*.mjs). Servers are waited for by the line they print when
// ready, never by sleeping.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace sandcastle::images::testing {

std::string fixtures_dir();

// Empty when every tool the tests need is installed, else what is missing.
std::string missing_tools();

struct TempDir {
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string path;
};

struct CommandResult {
  int status = -1;  // exit code, or -1 when it did not exit normally
  std::string out;  // stdout and stderr
};
CommandResult run_command(const std::vector<std::string>& argv);

std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& data);

// A port nobody listens on at the moment (for servers that must be told one).
int free_port();

// A child process whose stdout and stderr are read by a thread (so it never
// blocks on a full pipe); killed and reaped when destroyed.
class Server {
 public:
  // Starts argv and waits until its output contains `ready` (nullptr on
  // failure, with the output so far in *why).
  static std::unique_ptr<Server> start(const std::vector<std::string>& argv,
                                       const std::string& ready, std::chrono::seconds timeout,
                                       std::string* why);
  ~Server();
  std::string output() const;
  // The number after "listening " in its output (the .mjs servers print it).
  int listening_port() const;

 private:
  Server() = default;
  pid_t pid_ = -1;
  int fd_ = -1;
  std::thread reader_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string out_;
  bool eof_ = false;
};

// The shared setup: layouts, registries, pushed images. Built once per test binary.
struct PullEnv {
  std::string layout;        // OCI layout with refs amd, arm, multi
  std::string amd_manifest;  // digests of the images in it
  std::string arm_manifest;
  std::string multi_index;
  int port =
      0;  // anonymous registry: test/img:v1, test/arm:v1, test/multi:v1, test/docker:v1 (schema 2)
  int auth_port = 0;   // token-auth registry: private/img:v1, public/img:v1
  int tls_port = 0;    // TLS registry (cert for IP 127.0.0.1): test/img:v1
  std::string tls_ca;  // its certificate (self-signed)
  std::string error;   // set when the setup failed
};
const PullEnv& pull_env();

}  // namespace sandcastle::images::testing
