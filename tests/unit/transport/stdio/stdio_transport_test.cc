#include "transport/stdio/stdio_transport.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <set>
#include <string>

#include "common/unique_fd.h"
#include "server/fixtures.h"

namespace sandcastle::transport {
namespace {

using namespace std::chrono_literals;
using mcp::json;

// Runs serve_stdio on a thread, fed and read through real pipes.
class StdioHarness {
 public:
  explicit StdioHarness(size_t max_line = 1 << 20) {
    mcp::register_test_fixtures(server_);
    int in[2], out[2];
    EXPECT_EQ(pipe2(in, O_CLOEXEC), 0);
    EXPECT_EQ(pipe2(out, O_CLOEXEC), 0);
    server_in_.reset(in[0]);
    to_server_.reset(in[1]);
    from_server_.reset(out[0]);
    server_out_.reset(out[1]);
    StdioOptions opts;
    opts.in_fd = server_in_.get();
    opts.out_fd = server_out_.get();
    opts.max_line_bytes = max_line;
    done_ = std::async(std::launch::async, [this, opts] { return serve_stdio(server_, opts); });
  }
  ~StdioHarness() {
    close_input();
    if (done_.valid()) done_.wait();
  }

  void write(const std::string& bytes) {
    ASSERT_EQ(::write(to_server_.get(), bytes.data(), bytes.size()),
              static_cast<ssize_t>(bytes.size()));
  }
  void close_input() { to_server_.reset(); }

  // Next line the server wrote, or "" on timeout.
  std::string read_line(std::chrono::milliseconds timeout = 3s) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      auto nl = buf_.find('\n');
      if (nl != std::string::npos) {
        std::string line = buf_.substr(0, nl);
        buf_.erase(0, nl + 1);
        return line;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left <= 0ms) return "";
      pollfd p{from_server_.get(), POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) return "";
      char chunk[4096];
      ssize_t n = ::read(from_server_.get(), chunk, sizeof chunk);
      if (n <= 0) return "";
      buf_.append(chunk, static_cast<size_t>(n));
    }
  }
  json read_json() {
    std::string line = read_line();
    EXPECT_FALSE(line.empty()) << "no message from the server";
    return line.empty() ? json() : json::parse(line);
  }
  std::future<int>& done() { return done_; }

 private:
  mcp::Server server_;
  UniqueFd server_in_, to_server_, from_server_, server_out_;
  std::future<int> done_;
  std::string buf_;
};

const char* kInit =
    R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{}}})"
    "\n";

TEST(StdioTransportTest, OneMessagePerLine) {
  StdioHarness h;
  h.write(kInit);
  EXPECT_EQ(h.read_json()["id"], 0);
  // Two messages in one write, split across a second write.
  h.write("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n{\"jsonrpc\":\"2.0\",\"id\":2,");
  h.write("\"method\":\"ping\"}\r\n\n   \n");
  EXPECT_EQ(h.read_json()["id"], 1);
  EXPECT_EQ(h.read_json()["id"], 2);
}

TEST(StdioTransportTest, OversizedLineRejectedAndServingContinues) {
  StdioHarness h(1024);
  h.write(std::string(5000, ' ') + "{}\n");
  json err = h.read_json();
  EXPECT_EQ(err["error"]["code"], mcp::rpc_error::kInvalidRequest);
  EXPECT_NE(err["error"]["message"].get<std::string>().find("exceeds the limit of 1024"), std::string::npos);
  h.write("{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}\n");
  EXPECT_EQ(h.read_json()["id"], 5);
}

TEST(StdioTransportTest, OversizedRequestErrorCarriesItsId) {
  StdioHarness h(1024);
  // SDKs write the id last...
  h.write(R"({"method":"tools/call","params":{"name":"x","arguments":{"blob":")" + std::string(4000, 'a') +
          R"(","id":99}},"jsonrpc":"2.0","id":"req-7"})" "\n");
  json err = h.read_json();
  EXPECT_EQ(err["id"], "req-7");
  EXPECT_EQ(err["error"]["code"], mcp::rpc_error::kInvalidRequest);
  // ...hand-written clients first; a nested "id" is never mistaken for it.
  h.write(R"({"jsonrpc":"2.0","id":12,"method":"x","params":{"a":")" + std::string(4000, 'b') + R"(","o":{"id":7}}})" "\n");
  EXPECT_EQ(h.read_json()["id"], 12);
  h.write(R"({"method":"x","params":{"a":")" + std::string(4000, 'c') + R"(","o":{"id":7}}})" "\n");
  EXPECT_TRUE(h.read_json()["id"].is_null());
}

TEST(StdioTransportTest, MalformedInputKeepsServing) {
  StdioHarness h;
  h.write("{oops\n");
  EXPECT_EQ(h.read_json()["error"]["code"], mcp::rpc_error::kParseError);
  h.write("\"just a string\"\n");
  EXPECT_EQ(h.read_json()["error"]["code"], mcp::rpc_error::kInvalidRequest);
  h.write("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"p\":\"\xc3\x28\"}\n");
  EXPECT_EQ(h.read_json()["error"]["code"], mcp::rpc_error::kParseError);
  h.write("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n");
  EXPECT_EQ(h.read_json()["id"], 2);
}

TEST(StdioTransportTest, UnterminatedLastLineAtEofIsHandled) {
  StdioHarness h;
  h.write("{\"jsonrpc\":\"2.0\",\"id\":\"last\",\"method\":\"ping\"}");
  h.close_input();
  EXPECT_EQ(h.read_json()["id"], "last");
  ASSERT_EQ(h.done().wait_for(2s), std::future_status::ready);
  EXPECT_EQ(h.done().get(), 0);
}

TEST(StdioTransportTest, EofWithLongCallExitsWithinTwoSeconds) {
  StdioHarness h;
  h.write(kInit);
  (void)h.read_json();
  h.write(R"({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"test_sleep","arguments":{"ms":60000}}})" "\n");
  std::this_thread::sleep_for(50ms);
  auto start = std::chrono::steady_clock::now();
  h.close_input();
  ASSERT_EQ(h.done().wait_for(2s), std::future_status::ready);
  EXPECT_EQ(h.done().get(), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
}

TEST(StdioTransportTest, EofLetsShortCallAnswer) {
  StdioHarness h;
  h.write(kInit);
  (void)h.read_json();
  h.write(R"({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"test_sleep","arguments":{"ms":300}}})" "\n");
  h.close_input();
  json r = h.read_json();
  EXPECT_EQ(r["id"], 3);
  EXPECT_GE(r["result"]["structuredContent"]["slept_ms"].get<int>(), 290);
}

// The thread that reads a tool call runs it and hands reading on
// (leader/follower): calls sent one write at a time, or several in one
// write, all run at once, and a ping sent behind them is answered while
// they still run.
TEST(StdioTransportTest, ReadingGoesOnWhileTheReaderRunsACall) {
  StdioHarness h;
  h.write(kInit);
  (void)h.read_json();
  auto sleep_call = [](int id) {
    return R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
           R"(,"method":"tools/call","params":{"name":"test_sleep","arguments":{"ms":600}}})"
           "\n";
  };
  const auto start = std::chrono::steady_clock::now();
  h.write(sleep_call(1));
  h.write(sleep_call(2));
  h.write(sleep_call(3) + sleep_call(4) + sleep_call(5));
  h.write("{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"ping\"}\n");
  json first = h.read_json();
  EXPECT_EQ(first["id"], 6) << "the ping waited behind a call: " << first.dump();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 500ms);
  std::set<int> answered;
  for (int i = 0; i < 5; ++i) {
    json r = h.read_json();
    EXPECT_GE(r["result"]["structuredContent"]["slept_ms"].get<int>(), 590) << r.dump();
    answered.insert(r["id"].get<int>());
  }
  EXPECT_EQ(answered, (std::set<int>{1, 2, 3, 4, 5}));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1500ms) << "the calls ran one after another";
}

}  // namespace
}  // namespace sandcastle::transport
