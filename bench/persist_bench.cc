// Persistent sandboxes (issue 16, src/sandbox/native/persist_disk.h), in one
// run, interleaved with their baselines:
//   ./build/persist_bench [iterations]
//   create:  an ephemeral create (tmpfs /workspace) vs a persistent one on
//            new storage (sparse file + mkfs.ext4 + loop + mount: first
//            start) vs on existing storage (loop + mount: a restart);
//            each followed by one `true` exec, timed apart.
//   fork:    what fork_sandbox does with a running sandbox holding 50 MiB
//            of files: copy_storage (FIFREEZE, copy, FITHAW; the copy's
//            loop device attached ahead) then a start on the copy (a warm
//            sandbox takes it: mount, move_mount over /workspace) and one
//            `true` exec (target p50 <= 50 ms), the copy_storage part
//            apart, vs `cp --sparse=always` of the same released image,
//            all after a syncfs of the host filesystem (a quiet disk); and
//            copy_storage right after the last ones (the freeze's flush then
//            waits for their writeback).
// Needs root (loop mounts); prints medians (ms) and the load average.
#include <fcntl.h>
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

double median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double p90(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, v.size() * 9 / 10)];
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

bool run_true(Sandbox& sb) {
  ExecRequest req;
  req.argv = {"/bin/true"};
  auto r = sb.exec(req);
  return r && r->exit_code == 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (::geteuid() != 0) {
    std::printf("persist_bench: needs root (loop mounts); skipped\n");
    return 0;
  }
  const int n = argc > 1 ? std::atoi(argv[1]) : 15;
  char tmpl[] = "/var/tmp/sc-persist-bench-XXXXXX";
  if (!::mkdtemp(tmpl)) return 1;
  const std::string storage = tmpl;
  native::NativeBackendOptions o;
  // A warm pool of two: an ephemeral create takes one, and so does a
  // persistent one (its storage mounted over the pooled /workspace); each
  // round waits for the pool to be whole first.
  o.pool.min = 2;
  o.pool.max = 2;
  o.storage_dir = storage;
  auto backend = native::NativeBackend::create(o);
  if (!backend) {
    std::fprintf(stderr, "backend: %s\n", backend.error().message().c_str());
    return 1;
  }
  auto& b = **backend;
  const std::string load_before = loadavg();

  std::vector<double> eph_create, eph_exec, first_create, first_exec, again_create, again_exec,
      release_ms;
  auto pool_whole = [&] {
    return b.wait_pool([](const native::PoolStats& s) { return s.ready >= 2; },
                       std::chrono::seconds(20));
  };
  for (int i = 0; i < n + 1; ++i) {  // the first round warms caches, untimed
    const bool keep = i > 0;
    pool_whole();
    auto t = Clock::now();
    auto e = b.create(spec(""));
    const double c0 = ms_since(t);
    if (!e) return std::fprintf(stderr, "create: %s\n", e.error().message().c_str()), 1;
    t = Clock::now();
    if (!run_true(**e)) return 1;
    const double x0 = ms_since(t);
    (void)(*e)->destroy();

    const std::string id = "bench-" + std::to_string(i);
    t = Clock::now();
    auto p = b.create(spec(id));
    const double c1 = ms_since(t);
    if (!p) return std::fprintf(stderr, "create: %s\n", p.error().message().c_str()), 1;
    t = Clock::now();
    if (!run_true(**p)) return 1;
    const double x1 = ms_since(t);
    t = Clock::now();
    (void)(*p)->release();
    const double r1 = ms_since(t);

    pool_whole();
    t = Clock::now();
    auto q = b.create(spec(id));
    const double c2 = ms_since(t);
    if (!q) return std::fprintf(stderr, "create: %s\n", q.error().message().c_str()), 1;
    t = Clock::now();
    if (!run_true(**q)) return 1;
    const double x2 = ms_since(t);
    (void)(*q)->destroy();
    if (keep) {
      eph_create.push_back(c0);
      eph_exec.push_back(x0);
      first_create.push_back(c1);
      first_exec.push_back(x1);
      again_create.push_back(c2);
      again_exec.push_back(x2);
      release_ms.push_back(r1);
    }
  }
  std::printf("| create (n=%d, median ms) | create | p90 | first exec |\n|---|---|---|---|\n", n);
  std::printf("| ephemeral (tmpfs /workspace) | %.2f | %.2f | %.2f |\n", median(eph_create),
              p90(eph_create), median(eph_exec));
  std::printf("| persistent, new storage (mkfs + mount, warm sandbox) | %.2f | %.2f | %.2f |\n",
              median(first_create), p90(first_create), median(first_exec));
  std::printf("| persistent, existing storage (mount, warm sandbox) | %.2f | %.2f | %.2f |\n",
              median(again_create), p90(again_create), median(again_exec));
  std::printf("| release of a persistent sandbox (kill, wait, unmount) | %.2f | %.2f | |\n",
              median(release_ms), p90(release_ms));

  // fork: 50 MiB of files in a running sandbox.
  auto src = b.create(spec("fork-src"));
  if (!src) return std::fprintf(stderr, "create: %s\n", src.error().message().c_str()), 1;
  ExecRequest fill;
  fill.argv = {"/bin/sh", "-c",
               "mkdir /workspace/pkgs && for i in $(seq 50); do "
               "head -c 1048576 /dev/urandom > /workspace/pkgs/f$i; done && sync"};
  fill.timeout = std::chrono::seconds(120);
  if (auto r = (*src)->exec(fill); !r || r->exit_code != 0) return 1;
  // The baseline's source: a released copy of the same files.
  if (!b.copy_storage("fork-src", "fork-base")) return 1;
  std::vector<double> fork_ms, copy_ms, cp_ms, fork_dirty_ms;
  const int storage_fd = ::open(storage.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  for (int i = 0; i < n + 1; ++i) {
    const std::string to = "fork-" + std::to_string(i);
    // Unsynced writes of the host filesystem's (the last round's copies)
    // make the freeze's flush of disk.img wait for them (data=ordered): timed
    // once as they come, once after a syncfs, as a fork on a quiet disk.
    {
      auto t = Clock::now();
      auto st = b.copy_storage("fork-src", to + "-d");
      if (!st) return 1;
      if (i > 0) fork_dirty_ms.push_back(ms_since(t));
      (void)b.remove_storage(to + "-d");
    }
    ::syncfs(storage_fd);
    pool_whole();
    auto t = Clock::now();
    auto st = b.copy_storage("fork-src", to);
    const double c_only = ms_since(t);
    if (!st) return std::fprintf(stderr, "copy: %s\n", st.error().message().c_str()), 1;
    auto forked = b.create(spec(to));
    if (!forked) return std::fprintf(stderr, "start: %s\n", forked.error().message().c_str()), 1;
    if (!run_true(**forked)) return 1;
    const double f = ms_since(t);
    (void)(*forked)->destroy();
    const std::string cp =
        "cp --sparse=always " + storage + "/fork-base/disk.img " + storage + "/cp.img";
    ::syncfs(storage_fd);
    t = Clock::now();
    if (std::system(cp.c_str()) != 0) return 1;
    const double c = ms_since(t);
    ::unlink((storage + "/cp.img").c_str());
    if (i > 0) {
      fork_ms.push_back(f);
      copy_ms.push_back(c_only);
      cp_ms.push_back(c);
    }
  }
  struct stat img {};
  ::stat((storage + "/fork-base/disk.img").c_str(), &img);
  std::printf(
      "\n| fork of 50 MiB of files (n=%d, image %lld MiB allocated) | median ms | p90 "
      "|\n|---|---|---|\n",
      n, static_cast<long long>(img.st_blocks * 512 / (1024 * 1024)));
  std::printf("| fork: copy_storage + start on the copy + `true` | %.2f | %.2f |\n",
              median(fork_ms), p90(fork_ms));
  std::printf("| of which copy_storage, source running (FIFREEZE + copy) | %.2f | %.2f |\n",
              median(copy_ms), p90(copy_ms));
  std::printf("| copy_storage, host disk still writing back the last copies | %.2f | %.2f |\n",
              median(fork_dirty_ms), p90(fork_dirty_ms));
  std::printf("| baseline: cp --sparse=always of the released image | %.2f | %.2f |\n",
              median(cp_ms), p90(cp_ms));
  std::printf("| ratio fork / cp | %.2f | |\n", median(fork_ms) / median(cp_ms));
  ::close(storage_fd);
  (void)(*src)->destroy();
  (void)b.remove_storage("fork-base");
  std::printf("\nload average before: %s, after: %s\n", load_before.c_str(), loadavg().c_str());
  b.shutdown();
  (void)native::remove_tree(storage);
  return 0;
}
