// What recording a run costs, below the MCP layer (issue 16):
//   ./build/history_store_bench [appends]
// (a) append_history as a tool call pays it: queue the entry for the writer
//     thread (median, p99);
// (b) the same append written synchronously (append + flush: one
//     transaction per run), what a run would wait for without the writer;
// (c) the writer's own time per entry when it writes batches.
// An entry like a warm `x += 1` (no output). Compare (a) with the ~0.3 ms of
// a warm execute_code round trip (bench/history_bench.mjs measures that
// end to end); the load average is printed because a busy machine inflates
// every column.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "store/sqlite_sandbox_store.h"

namespace {

using namespace sandcastle::store;
using Clock = std::chrono::steady_clock;

double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1,
                    static_cast<std::size_t>(p / 100.0 * static_cast<double>(v.size())))];
}

std::string loadavg() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a + " " + b + " " + c;
}

HistoryEntry warm_entry() {
  HistoryEntry e;
  e.sandbox_id = "sb-0123456789ab";
  e.at = std::chrono::system_clock::now();
  e.caller = "key-1";
  e.tool = "execute_code";
  e.language = "python";
  e.input = "x += 1";
  e.exit_code = 0;
  e.reason = "exited";
  e.duration_us = 120;
  return e;
}

std::unique_ptr<SqliteSandboxStore> open_store(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  auto db = StateDb::open(dir.string());
  if (!db.ok()) {
    std::fprintf(stderr, "%s\n", db.error().message().c_str());
    std::exit(1);
  }
  auto st = SqliteSandboxStore::open(std::shared_ptr<StateDb>(std::move(db).value()));
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.error().message().c_str());
    std::exit(1);
  }
  return std::move(st).value();
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::max(100, std::atoi(argv[1])) : 20000;
  const auto dir =
      std::filesystem::temp_directory_path() / ("history-store-bench-" + std::to_string(getpid()));
  const std::string load0 = loadavg();
  std::vector<double> queued, sync;
  double batch_us = 0;
  {
    auto store = open_store(dir);
    const auto e = warm_entry();
    for (int i = 0; i < n; ++i) {
      const auto t0 = Clock::now();
      (void)store->append_history(e);
      queued.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    store->flush();
    for (int i = 0; i < n / 10; ++i) {
      const auto t0 = Clock::now();
      (void)store->append_history(e);
      store->flush();
      sync.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    // The writer alone: fill the queue's worth, then time the flush.
    double total = 0;
    int written = 0;
    for (int r = 0; r < 20; ++r) {
      for (int i = 0; i < 250; ++i) (void)store->append_history(e);
      const auto t0 = Clock::now();
      store->flush();
      total += std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
      written += 250;
    }
    batch_us = total / written;
  }
  std::filesystem::remove_all(dir);
  std::printf("History store, %d appends of a warm `x += 1` entry; loadavg %s -> %s\n\n", n,
              load0.c_str(), loadavg().c_str());
  std::printf("| what | median us | p99 us |\n|---|---|---|\n");
  std::printf("| append_history (queued for the writer) | %.2f | %.2f |\n", pct(queued, 50),
              pct(queued, 99));
  std::printf("| append + flush (one transaction per run) | %.1f | %.1f |\n", pct(sync, 50),
              pct(sync, 99));
  std::printf("| writer, per entry, batches of 250 | %.2f | |\n", batch_us);
  return 0;
}
