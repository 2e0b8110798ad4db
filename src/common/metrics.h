// A small process-wide metrics registry rendered in the Prometheus text
// format (/metrics). Counters, gauges and histograms are identified by name
// plus a label set; getting one is cheap after the first lookup, so callers
// may look up per event or keep the reference (references stay valid for the
// life of the process).
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace sandcastle::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Counter {
 public:
  void inc(double v = 1.0);
  double value() const;

 private:
  std::atomic<double> value_{0};
};

class Gauge {
 public:
  void set(double v) { value_.store(v, std::memory_order_relaxed); }
  void add(double v);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  // Cumulative counts per bound, then +Inf; sum; count.
  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  const std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> buckets_;  // per bound + overflow, not cumulative
  double sum_ = 0;
  uint64_t count_ = 0;
};

// Seconds-scale buckets suited to code executions (5 ms … 5 min).
std::vector<double> duration_buckets();

class Registry {
 public:
  Counter& counter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge& gauge(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram& histogram(const std::string& name, const std::string& help, const Labels& labels = {},
                       std::vector<double> bounds = duration_buckets());
  // A gauge computed when /metrics is scraped (e.g. live sandboxes).
  void gauge_fn(const std::string& name, const std::string& help, std::function<double()> fn);
  // A family whose series are computed when /metrics is scraped, so a
  // series per live object (sandbox) goes away with it; type is "gauge" or
  // "counter".
  using Rows = std::vector<std::pair<Labels, double>>;
  void family_fn(const std::string& name, const std::string& help, const std::string& type,
                 std::function<Rows()> fn);

  std::string render() const;

 private:
  struct Family {
    std::string type;  // counter | gauge | histogram
    std::string help;
    std::map<std::string, std::unique_ptr<Counter>> counters;  // by rendered labels
    std::map<std::string, std::unique_ptr<Gauge>> gauges;
    std::map<std::string, std::unique_ptr<Histogram>> histograms;
    std::function<double()> fn;
    std::function<Rows()> rows_fn;
  };
  Family& family(const std::string& name, const std::string& type, const std::string& help);

  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
};

// The process-wide registry.
Registry& registry();

// Renders `{a="x",b="y"}` with Prometheus escaping ("" for no labels).
std::string render_labels(const Labels& labels);

// Well-known metric names, so tools and transports agree on them.
namespace name {
inline constexpr const char* kSandboxesLive = "sandcastle_sandboxes_live";
inline constexpr const char* kSandboxesCreated = "sandcastle_sandboxes_created_total";
inline constexpr const char* kSandboxesDestroyed = "sandcastle_sandboxes_destroyed_total";
inline constexpr const char* kExecutions = "sandcastle_executions_total";  // label outcome
inline constexpr const char* kExecutionSeconds = "sandcastle_execution_duration_seconds";
inline constexpr const char* kToolCalls = "sandcastle_tool_calls_total";  // labels tool, outcome
inline constexpr const char* kToolCallSeconds = "sandcastle_tool_call_duration_seconds";
inline constexpr const char* kHttpRequests = "sandcastle_http_requests_total";  // label code
inline constexpr const char* kSseStreams = "sandcastle_sse_streams_open";
inline constexpr const char* kMcpSessions = "sandcastle_mcp_sessions_live";
}  // namespace name

}  // namespace sandcastle::metrics
