// Shared fixture for the integration suites: one native backend per test
// binary (as the server has), and helpers to run commands briefly.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "sandbox/native/native_backend.h"
#include "sandbox/sandbox.h"

namespace sandcastle::sandbox::testing {

// The process-wide backend; null (with the reason) when the host cannot
// create sandboxes at all. Its images are those added with add_test_image.
native::NativeBackend* shared_backend(std::string* why = nullptr);

// Makes `image` (layers on disk, as the image store would hand them out)
// known to shared_backend() under image.name, replacing one of that name.
void add_test_image(native::ImageRoot image);

// An image made once per test run from the host's own files: python3 with
// its standard library and the libraries it links, busybox as /bin/sh, su
// with its setuid bit (and not the libraries it needs), an
// /etc/os-release of its own (ID=sandcastle-python-test). Added to
// shared_backend() as "py-host"; removed when the process exits. Null (with
// the reason) if it could not be made.
const native::ImageRoot* host_python_image(std::string* why = nullptr);

// This binary run again, in a child process, with `--gtest_filter=<filter>`
// and `<env_name>=1` set: for tests that need a backend of their own (the
// runtime directory is named after the process, so a second backend in this
// one would share, and remove, the fixture's). Waits for it.
struct ChildRun {
  pid_t pid = -1;
  int status = 0;   // as from waitpid
  std::string out;  // its stdout and stderr
};
ChildRun run_tests_in_child(const std::string& filter, const char* env_name);

// The pids /proc lists now (some may be gone by the time they are read).
std::vector<pid_t> proc_pids();
// Host pids below `pid` (its children, theirs, ...), as /proc has them now.
std::vector<pid_t> host_descendants(pid_t pid);
// Field 3 of the host's /proc/<pid>/stat (R, S, D, ...), or 0 if it is gone.
char host_state(pid_t pid);
// The host's /proc/<pid>/comm without its newline, or "" if it is gone.
std::string host_comm(pid_t pid);

class SandboxTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // A fresh sandbox with default spec (or the given options).
  std::unique_ptr<Sandbox> make(SpecOptions options = {});
  // Runs argv in sb_ and fails the test on a setup error.
  ExecResult run(const std::vector<std::string>& argv, const std::string& stdin_data = {},
                 std::chrono::milliseconds timeout = std::chrono::seconds(20));
  ExecResult sh(const std::string& script, std::chrono::milliseconds timeout = std::chrono::seconds(20));
  ExecResult py(const std::string& code, std::chrono::milliseconds timeout = std::chrono::seconds(20));
  bool cgroups() const;
  bool root() const;

  native::NativeBackend* backend_ = nullptr;
  std::unique_ptr<Sandbox> sb_;
};

}  // namespace sandcastle::sandbox::testing
