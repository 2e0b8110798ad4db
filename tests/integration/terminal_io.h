// Driving a sandbox::Terminal in tests as the server's relay does: wait on
// its fd, read what waits, type into it. Shared by the native and engine
// terminal suites.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>

#include <chrono>
#include <optional>
#include <regex>
#include <string>
#include <string_view>

#include "sandbox/sandbox.h"

namespace sandcastle::sandbox::testing {

// Reads t's output into `acc` until `want` matches it, the shell ends, or
// the time is up.
inline bool read_until(Terminal& t, std::string& acc, const std::regex& want,
                       std::chrono::milliseconds timeout = std::chrono::seconds(15)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    char buf[4096];
    for (;;) {
      auto n = t.read(buf, sizeof buf);
      EXPECT_TRUE(n.ok()) << n.error().message();
      if (!n.ok() || *n == 0) break;
      acc.append(buf, *n);
    }
    if (std::regex_search(acc, want)) return true;
    if (t.exit_code()) return false;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    struct pollfd p = {t.fd(), POLLIN, 0};
    (void)::poll(&p, 1, static_cast<int>(left.count()));
  }
}

// Reads until the shell has ended and its output is all read.
inline std::optional<int> wait_end(Terminal& t, std::string& acc,
                                   std::chrono::milliseconds timeout = std::chrono::seconds(15)) {
  read_until(t, acc, std::regex("$^never"), timeout);
  return t.exit_code();
}

inline TerminalRequest sized(std::uint16_t cols, std::uint16_t rows) {
  TerminalRequest r;
  r.cols = cols;
  r.rows = rows;
  return r;
}

inline void type(Terminal& t, std::string_view s) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!s.empty() && std::chrono::steady_clock::now() < deadline) {
    auto n = t.write(s);
    ASSERT_TRUE(n.ok()) << n.error().message();
    s.remove_prefix(*n);
  }
  ASSERT_TRUE(s.empty());
}

}  // namespace sandcastle::sandbox::testing
