#include "common/metrics.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace sandcastle::metrics {

namespace {

std::string format_value(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<long long>(v));
  std::ostringstream os;
  os.precision(9);
  os << v;
  return os.str();
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

// Adds one label to an already rendered set: {a="x"} + le="1" → {a="x",le="1"}.
std::string with_label(const std::string& rendered, const std::string& k, const std::string& v) {
  std::string extra = k + "=\"" + escape(v) + "\"";
  if (rendered.empty()) return "{" + extra + "}";
  return rendered.substr(0, rendered.size() - 1) + "," + extra + "}";
}

}  // namespace

void Counter::inc(double v) {
  double cur = value_.load(std::memory_order_relaxed);
  while (!value_.compare_exchange_weak(cur, cur + v, std::memory_order_relaxed)) {
  }
}

double Counter::value() const { return value_.load(std::memory_order_relaxed); }

void Gauge::add(double v) {
  double cur = value_.load(std::memory_order_relaxed);
  while (!value_.compare_exchange_weak(cur, cur + v, std::memory_order_relaxed)) {
  }
}

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), buckets_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  size_t i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  std::lock_guard lock(mu_);
  ++buckets_[i];
  sum_ += v;
  ++count_;
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.bounds = bounds_;
  std::lock_guard lock(mu_);
  uint64_t acc = 0;
  for (uint64_t b : buckets_) {
    acc += b;
    s.cumulative.push_back(acc);
  }
  s.sum = sum_;
  s.count = count_;
  return s;
}

std::vector<double> duration_buckets() {
  return {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
}

std::string render_labels(const Labels& labels) {
  if (labels.empty()) return {};
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i) out += ",";
    out += labels[i].first + "=\"" + escape(labels[i].second) + "\"";
  }
  return out + "}";
}

Registry::Family& Registry::family(const std::string& name, const std::string& type,
                                   const std::string& help) {
  auto& f = families_[name];
  if (f.type.empty()) {
    f.type = type;
    f.help = help;
  }
  return f;
}

Counter& Registry::counter(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard lock(mu_);
  auto& slot = family(name, "counter", help).counters[render_labels(labels)];
  if (!slot) slot = std::make_unique<Counter>();
  return *slot;
}

Gauge& Registry::gauge(const std::string& name, const std::string& help, const Labels& labels) {
  std::lock_guard lock(mu_);
  auto& slot = family(name, "gauge", help).gauges[render_labels(labels)];
  if (!slot) slot = std::make_unique<Gauge>();
  return *slot;
}

Histogram& Registry::histogram(const std::string& name, const std::string& help, const Labels& labels,
                               std::vector<double> bounds) {
  std::lock_guard lock(mu_);
  auto& slot = family(name, "histogram", help).histograms[render_labels(labels)];
  if (!slot) slot = std::make_unique<Histogram>(std::move(bounds));
  return *slot;
}

void Registry::gauge_fn(const std::string& name, const std::string& help, std::function<double()> fn) {
  std::lock_guard lock(mu_);
  family(name, "gauge", help).fn = std::move(fn);
}

void Registry::family_fn(const std::string& name, const std::string& help, const std::string& type,
                         std::function<Rows()> fn) {
  std::lock_guard lock(mu_);
  family(name, type, help).rows_fn = std::move(fn);
}

std::string Registry::render() const {
  // Callback gauges run without mu_ held: they take their owner's lock (the
  // sandbox manager's), under which the owner may be asking for a counter.
  std::vector<std::pair<std::string, std::function<double()>>> fns;
  std::vector<std::pair<std::string, std::function<Rows()>>> row_fns;
  {
    std::lock_guard lock(mu_);
    for (const auto& [name, f] : families_) {
      if (f.fn) fns.emplace_back(name, f.fn);
      if (f.rows_fn) row_fns.emplace_back(name, f.rows_fn);
    }
  }
  std::map<std::string, double> computed;
  for (const auto& [name, fn] : fns) computed[name] = fn();
  std::map<std::string, Rows> computed_rows;
  for (const auto& [name, fn] : row_fns) computed_rows[name] = fn();
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& [name, f] : families_) {
    out += "# HELP " + name + " " + f.help + "\n# TYPE " + name + " " + f.type + "\n";
    if (auto it = computed.find(name); it != computed.end())
      out += name + " " + format_value(it->second) + "\n";
    if (auto it = computed_rows.find(name); it != computed_rows.end())
      for (const auto& [labels, v] : it->second)
        out += name + render_labels(labels) + " " + format_value(v) + "\n";
    for (const auto& [labels, c] : f.counters) out += name + labels + " " + format_value(c->value()) + "\n";
    for (const auto& [labels, g] : f.gauges) out += name + labels + " " + format_value(g->value()) + "\n";
    for (const auto& [labels, h] : f.histograms) {
      auto s = h->snapshot();
      for (size_t i = 0; i < s.bounds.size(); ++i)
        out += name + "_bucket" + with_label(labels, "le", format_value(s.bounds[i])) + " " +
               std::to_string(s.cumulative[i]) + "\n";
      out += name + "_bucket" + with_label(labels, "le", "+Inf") + " " + std::to_string(s.count) + "\n";
      out += name + "_sum" + labels + " " + format_value(s.sum) + "\n";
      out += name + "_count" + labels + " " + std::to_string(s.count) + "\n";
    }
  }
  return out;
}

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: used from detached threads
  return *r;
}

}  // namespace sandcastle::metrics
