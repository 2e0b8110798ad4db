// Persistent sandboxes without root (issue 16, persist_mirror.h): what the
// copy to disk after each call costs, in one run, interleaved with an
// ephemeral sandbox holding the same files:
//   ./build/persist_mirror_bench [iterations]
//   unchanged:  `true` (nothing written: one metadata walk of both trees)
//   one small:  `echo >> one file` (that file's bytes)
//   one 1 MiB:  one 1 MiB file rewritten
//   write_file: a 4 KiB write_file call
// on a /workspace of 1,000 files / 50 MiB (10 dirs), plus the first copy of
// those 50 MiB and a start that copies them back, vs an ephemeral create.
// Runs unprivileged (as root it becomes sandcastle-test first); prints
// medians and p90 (ms) and the load average.
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "sandbox/native/fs_util.h"
#include "sandbox/native/native_backend.h"

using namespace sandcastle::sandbox;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

double pct(std::vector<double> v, double p) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(v.size() * p))];
}

std::string loadavg() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

SandboxSpec spec(const std::string& storage_id) {
  SpecOptions o;
  o.limits.disk_bytes = 256 * kMiB;
  if (!storage_id.empty()) {
    o.persistence = Persistence::kPersistent;
    o.storage_id = storage_id;
  }
  return *SandboxSpec::create(o);
}

bool sh(Sandbox& sb, const std::string& script) {
  ExecRequest req;
  req.argv = {"/bin/sh", "-c", script};
  req.timeout = std::chrono::seconds(120);
  auto r = sb.exec(req);
  if (!r || r->exit_code != 0) {
    std::fprintf(stderr, "persist_mirror_bench: %s: %s\n", script.c_str(),
                 r ? r->stderr_data.c_str() : r.error().message().c_str());
    return false;
  }
  return true;
}

bool become_test_user() {
  struct passwd* pw = ::getpwnam("sandcastle-test");
  if (!pw) return false;
  return ::setgroups(0, nullptr) == 0 && ::setresgid(pw->pw_gid, pw->pw_gid, pw->pw_gid) == 0 &&
         ::setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid) == 0 &&
         ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) == 0;
}

// 1,000 files of 52,429 bytes (50 MiB) in 10 directories.
const char* kFill =
    "cd /workspace && for d in 0 1 2 3 4 5 6 7 8 9; do mkdir -p d$d; i=0; while [ $i -lt 100 ]; "
    "do head -c 52429 /dev/urandom > d$d/f$i; i=$((i+1)); done; done";

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::max(5, std::atoi(argv[1])) : 40;
  char tmpl[] = "/var/tmp/sc-mirror-bench-XXXXXX";
  if (!::mkdtemp(tmpl)) return 1;
  const std::string storage = tmpl;
  if (::geteuid() == 0) {
    struct passwd* pw = ::getpwnam("sandcastle-test");
    if (!pw || ::chown(storage.c_str(), pw->pw_uid, pw->pw_gid) != 0 || !become_test_user()) {
      std::printf("persist_mirror_bench: no user sandcastle-test to run as; skipped\n");
      (void)native::remove_tree(storage);
      return 0;
    }
  }
  int rc = 1;
  {
    native::NativeBackendOptions o;
    o.pool.min = 0;
    o.storage_dir = storage;
    auto made = native::NativeBackend::create(std::move(o));
    if (!made) {
      std::fprintf(stderr, "persist_mirror_bench: %s\n", made.error().message().c_str());
      return 1;
    }
    auto& backend = **made;
    std::printf("load average before: %s\n\n", loadavg().c_str());

    auto t = Clock::now();
    auto eph = backend.create(spec(""));
    const double eph_create = ms_since(t);
    t = Clock::now();
    auto per = backend.create(spec("bench-1"));
    const double per_create_new = ms_since(t);
    if (!eph || !per) return 1;
    if (!sh(**eph, kFill)) return 1;
    // The first copy: 50 MiB in 1,000 files, timed with the call that wrote them.
    t = Clock::now();
    if (!sh(**per, kFill)) return 1;
    const double first_copy = ms_since(t);
    t = Clock::now();
    if (!sh(**eph, kFill)) return 1;
    const double fill_eph = ms_since(t);

    struct Row {
      const char* name;
      std::vector<double> eph, per;
    };
    Row rows[] = {{"unchanged (`true`)", {}, {}},
                  {"one small change (`echo >> file`)", {}, {}},
                  {"one 1 MiB file rewritten", {}, {}},
                  {"write_file 4 KiB", {}, {}}};
    const std::string four_k(4096, 'x');
    auto empty = backend.create(spec("bench-empty"));
    auto eph2 = backend.create(spec(""));
    if (!empty || !eph2) return 1;
    std::vector<double> empty_eph, empty_per;
    for (int i = 0; i < n; ++i) {
      {
        ExecRequest req;
        req.argv = {"/bin/true"};
        t = Clock::now();
        if (!(*eph2)->exec(req)) return 1;
        empty_eph.push_back(ms_since(t));
        t = Clock::now();
        if (!(*empty)->exec(req)) return 1;
        empty_per.push_back(ms_since(t));
      }
      for (int which = 0; which < 2; ++which) {
        Sandbox& sb = which == 0 ? **eph : **per;
        auto note = [&](Row& r, double ms) { (which == 0 ? r.eph : r.per).push_back(ms); };
        ExecRequest req;
        req.argv = {"/bin/true"};
        t = Clock::now();
        if (!sb.exec(req)) return 1;
        note(rows[0], ms_since(t));
        req.argv = {"/bin/sh", "-c", "echo " + std::to_string(i) + " >> /workspace/d3/f7"};
        t = Clock::now();
        if (!sb.exec(req)) return 1;
        note(rows[1], ms_since(t));
        req.argv = {"/bin/sh", "-c", "head -c 1048576 /dev/urandom > /workspace/d5/big"};
        t = Clock::now();
        if (!sb.exec(req)) return 1;
        note(rows[2], ms_since(t));
        t = Clock::now();
        if (!sb.write_file("/workspace/d9/w", four_k).ok()) return 1;
        note(rows[3], ms_since(t));
      }
    }
    std::printf(
        "| per call, /workspace of 1,000 files / 50 MiB (n=%d) | ephemeral p50 | persistent "
        "p50 | added p50 | ephemeral p90 | persistent p90 |\n|---|---|---|---|---|---|\n",
        n);
    std::printf(
        "| `true`, persistent with an empty /workspace (the fixed cost) | %.2f | %.2f | %.2f | "
        "%.2f | %.2f |\n",
        pct(empty_eph, 0.5), pct(empty_per, 0.5), pct(empty_per, 0.5) - pct(empty_eph, 0.5),
        pct(empty_eph, 0.9), pct(empty_per, 0.9));
    for (auto& r : rows)
      std::printf("| %s | %.2f | %.2f | %.2f | %.2f | %.2f |\n", r.name, pct(r.eph, 0.5),
                  pct(r.per, 0.5), pct(r.per, 0.5) - pct(r.eph, 0.5), pct(r.eph, 0.9),
                  pct(r.per, 0.9));

    // A restart: the 50 MiB copied back before the sandbox is handed out.
    (void)(*per)->release();
    std::vector<double> restart, fresh;
    for (int i = 0; i < 5; ++i) {
      t = Clock::now();
      auto again = backend.create(spec("bench-1"));
      restart.push_back(ms_since(t));
      if (!again) return 1;
      (void)(*again)->release();
      t = Clock::now();
      auto e = backend.create(spec(""));
      fresh.push_back(ms_since(t));
      if (e) (void)(*e)->destroy();
    }
    std::printf("\n| start | ms |\n|---|---|\n");
    std::printf("| ephemeral create (first) | %.1f |\n", eph_create);
    std::printf("| persistent create, new storage | %.1f |\n", per_create_new);
    std::printf("| fill 50 MiB / 1,000 files, ephemeral | %.1f |\n", fill_eph);
    std::printf("| fill 50 MiB / 1,000 files, persistent (with its first copy) | %.1f |\n",
                first_copy);
    std::printf("| ephemeral create, p50 of 5 | %.1f |\n", pct(fresh, 0.5));
    std::printf("| persistent restart, 50 MiB copied back, p50 of 5 | %.1f |\n", pct(restart, 0.5));
    std::printf("\nload average after: %s\n", loadavg().c_str());
    (void)(*eph)->destroy();
    (void)(*eph2)->destroy();
    (void)(*empty)->destroy();
    (void)backend.remove_storage("bench-1");
    rc = 0;
  }
  (void)native::remove_tree(storage);
  return rc;
}
