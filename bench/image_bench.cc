// Creating a sandbox rooted in an image against one on image "host", in one
// run, interleaved (issue 15's target: from an image <= 1.5x from host):
//   ./build/image_bench [iterations] [pause-ms] [layers]
// The image is made here from the host's own files (python3 with its
// standard library and libraries, busybox as sh: ~70 MiB), split into
// `layers` layers (default 1; the extra ones hold a file each), the way the
// image store keeps them. Both columns are created on demand (no warm pool:
// sandboxes of either kind made on demand), then each runs /bin/true;
// `pooled`: both from warm pools (a pool spec naming the image).
// Prints medians and p90 (ms) and the ratio, and the load average.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "sandbox/native/fs_util.h"
#include "sandbox/native/native_backend.h"

using namespace sandcastle::sandbox;
using Clock = std::chrono::steady_clock;

namespace {

std::string loadavg() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

bool sh(const std::string& cmd) {
  return std::system(cmd.c_str()) == 0;
}

// The python image of the integration tests (fixture.cc), in `layers` layers.
bool build_image(const std::string& base, int layers, native::ImageRoot& out) {
  const std::string l = base + "/l0";
  const std::string lib = "/usr/lib/x86_64-linux-gnu/";
  std::string cmd =
      "set -e; mkdir -p " + l + "/usr/bin " + l + "/usr/lib/x86_64-linux-gnu " + l + "/usr/lib64 " +
      l + "/etc && cd " + l +
      " && ln -s usr/bin bin && ln -s usr/lib lib && ln -s usr/lib64 lib64 && " +
      "cp -L /usr/bin/python3.11 /bin/busybox usr/bin/ && ln -s python3.11 usr/bin/python3 && " +
      "ln -s busybox usr/bin/sh && ln -s busybox usr/bin/true && cp -rL /usr/lib/python3.11 "
      "usr/lib/ && " +
      "cp -L /lib64/ld-linux-x86-64.so.2 usr/lib64/ && cp -L " + lib + "libc.so.6 " + lib +
      "libm.so.6 " + lib + "libz.so.1 " + lib + "libexpat.so.1 usr/lib/x86_64-linux-gnu/ && " +
      "echo ID=sandcastle-bench > etc/os-release";
  if (!sh(cmd)) return false;
  out.name = "bench";
  out.id = "sha256:bench";
  out.layers = {l};
  for (int i = 1; i < layers; ++i) {
    const std::string li = base + "/l" + std::to_string(i);
    if (!sh("mkdir -p " + li + "/etc && echo " + std::to_string(i) + " > " + li + "/etc/layer"))
      return false;
    out.layers.push_back(li);
  }
  return true;
}

struct Series {
  std::vector<double> ms;
  double p(double q) {
    std::sort(ms.begin(), ms.end());
    return ms[std::min(ms.size() - 1,
                       static_cast<std::size_t>(q * static_cast<double>(ms.size())))];
  }
};

// One create (timed), then /bin/true in it (timed with it), then destroy
// (untimed).
bool once(native::NativeBackend& b, const SandboxSpec& spec, Series& create, Series& first_exec) {
  auto t0 = Clock::now();
  auto sb = b.create(spec);
  if (!sb) {
    std::fprintf(stderr, "create (%s): %s\n", spec.image().c_str(), sb.error().message().c_str());
    return false;
  }
  auto t1 = Clock::now();
  ExecRequest req;
  req.argv = {"/bin/true"};
  auto r = (*sb)->exec(req);
  auto t2 = Clock::now();
  if (!r || r->exit_code != 0) {
    std::fprintf(stderr, "exec in %s failed\n", spec.image().c_str());
    return false;
  }
  (void)(*sb)->destroy();
  create.ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  first_exec.ms.push_back(std::chrono::duration<double, std::milli>(t2 - t0).count());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const bool pooled = argc > 1 && std::string(argv[1]) == "pooled";
  const int arg0 = pooled ? 2 : 1;
  const int n = argc > arg0 ? std::atoi(argv[arg0]) : 40;
  const int pause_ms = argc > arg0 + 1 ? std::atoi(argv[arg0 + 1]) : 20;
  const int layers = argc > arg0 + 2 ? std::atoi(argv[arg0 + 2]) : 1;
  if (n < 1 || pause_ms < 0 || layers < 1 || layers > 100) {
    std::fprintf(stderr, "usage: image_bench [pooled] [iterations] [pause-ms] [layers]\n");
    return 2;
  }
  char tmpl[] = "/tmp/sc-image-bench-XXXXXX";
  if (!::mkdtemp(tmpl)) return 1;
  const std::string base = tmpl;
  ::chmod(base.c_str(), 0755);
  native::ImageRoot image;
  if (!build_image(base, layers, image)) {
    std::fprintf(stderr, "could not build the bench image under %s\n", base.c_str());
    (void)native::remove_tree(base);
    return 1;
  }
  SpecOptions img_opts;
  img_opts.image = image.name;
  const SandboxSpec host = SandboxSpec::defaults();
  const SandboxSpec img = *SandboxSpec::create(img_opts);
  auto make_backend = [&](const SandboxSpec& pool_spec) -> std::unique_ptr<native::NativeBackend> {
    native::NativeBackendOptions o;
    o.pool.min = o.pool.max = pooled ? 2 : 0;
    o.pool_spec = pool_spec;
    o.images = [&image](const std::string& ref) -> sandcastle::Result<native::ImageRoot> {
      if (ref != image.name) return sandcastle::Error::make(sandcastle::ErrorCode::kNotFound, ref);
      return image;
    };
    auto b = native::NativeBackend::create(o);
    if (!b) {
      std::fprintf(stderr, "backend: %s\n", b.error().message().c_str());
      return nullptr;
    }
    return std::move(*b);
  };
  const std::string load_before = loadavg();
  Series host_c, host_e, img_c, img_e;
  bool ok = true;
  Series w1, w2;  // warm-up, discarded
  if (!pooled) {
    // One backend, no pool: both made on demand, interleaved, alternating
    // which goes first.
    auto b = make_backend(host);
    if (!b) return 1;
    ok = ok && once(*b, host, w1, w2) && once(*b, img, w1, w2);
    for (int i = 0; ok && i < n; ++i) {
      for (int k = 0; ok && k < 2; ++k) {
        std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
        const bool host_turn = (k == 0) == (i % 2 == 0);
        ok = host_turn ? once(*b, host, host_c, host_e) : once(*b, img, img_c, img_e);
      }
    }
    b->shutdown();
  } else {
    // A backend has one pool: a host-pooled and an image-pooled backend
    // take turns, four rounds each (a backend per process at a time).
    for (int round = 0; ok && round < 8; ++round) {
      const bool host_turn = round % 2 == 0;
      const SandboxSpec& spec = host_turn ? host : img;
      auto b = make_backend(spec);
      if (!b) return 1;
      ok = ok && once(*b, spec, w1, w2);
      for (int i = 0; ok && i < (n + 3) / 4; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
        (void)b->wait_pool([](const native::PoolStats& st) { return st.ready >= 2; },
                           std::chrono::seconds(10));
        ok = host_turn ? once(*b, spec, host_c, host_e) : once(*b, spec, img_c, img_e);
      }
      b->shutdown();
    }
  }
  (void)native::remove_tree(base);
  if (!ok) return 1;
  std::printf(
      "image_bench: create (and create + first exec of /bin/true) of a sandbox on a %d-layer image "
      "(~70 MiB: "
      "python3 + stdlib + busybox) vs on image host, %d each, interleaved, %d ms apart, %s, "
      "sandboxes %s; "
      "load average before: %s, after: %s\n",
      layers, n, pause_ms, geteuid() == 0 ? "root (idmapped layers)" : "unprivileged",
      pooled ? "both from a warm pool of 2" : "both made on demand (no pool)", load_before.c_str(),
      loadavg().c_str());
  std::printf("%-28s %9s %9s %9s %9s %8s   %s\n", "case", "host p50", "host p90", "image p50",
              "image p90", "ratio", "target (issue 15)");
  for (auto [label, h, m] : {std::tuple{"create", &host_c, &img_c},
                             std::tuple{"create + exec /bin/true", &host_e, &img_e}}) {
    const double ratio = m->p(0.5) / h->p(0.5);
    std::printf("%-28s %9.2f %9.2f %9.2f %9.2f %7.2fx   <= 1.5x: %s\n", label, h->p(0.5), h->p(0.9),
                m->p(0.5), m->p(0.9), ratio, ratio <= 1.5 ? "met" : "NOT met");
  }
  return 0;
}
