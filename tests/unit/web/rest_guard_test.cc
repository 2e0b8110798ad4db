// Every route of the table the server really builds (the MCP face's and the
// REST API's), walked from the table itself, against a real server on
// loopback with auth on: each refusal (no key, a cookie session without its
// CSRF token, a foreign Origin, a plain key on an admin route) has its exact
// status, and no refused request reaches its handler or changes the key
// database. Then the per-key bound on requests in flight (429, Retry-After),
// a key database that blocks (a writer holding its lock) stalling no other
// connection, and a revoked key refused on its next request.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <condition_variable>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "common/thread_pool.h"
#include "mcp/server.h"
#include "route_paths.h"
#include "store/key_store.h"
#include "transport/http/mcp_http.h"
#include "web/rest_api.h"

namespace sandcastle::web {
namespace {

namespace net = boost::asio;
namespace bhttp = boost::beast::http;
using nlohmann::json;
using transport::http::Route;

struct Reply {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::string header(const std::string& n) const {
    auto it = headers.find(n);
    return it == headers.end() ? std::string() : it->second;
  }
};

using testing::concrete;

class RestGuardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("sc-guard-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    auto ks = store::KeyStore::open((dir_ / "k.db").string());
    ASSERT_TRUE(ks.ok()) << ks.error().message();
    keys_ = std::move(ks).value();
    admin_ = keys_->create("ops", true)->secret;
    plain_ = keys_->create("alice", false)->secret;

    transport::http::McpHttpOptions mo;
    mo.auth_required = true;
    mo.verify_key = [this](const std::string& k) {
      {
        // A slow key database, when a test closes the gate.
        std::unique_lock lock(mu_);
        ++verifying_;
        cv_.notify_all();
        cv_.wait(lock, [&] { return !gate_closed_; });
      }
      return keys_->verify(k);
    };
    mcp_ = std::make_unique<transport::http::McpHttp>(server_, mo);
    RestOptions ro;
    ro.auth_required = true;
    ro.keys = keys_.get();
    ro.max_requests_per_key = 2;
    rest_ = std::make_unique<RestApi>(ro);
    rest_->add_routes(mcp_->router());
    // A route of the test's: it holds its request until released.
    transport::http::RouteMeta hold;
    hold.summary = "test";
    hold.auth = transport::http::RouteAuth::kApi;
    hold.blocking = true;
    (void)mcp_->router().add("GET", "/api/v1/test/hold", hold, [this](transport::http::Call& c) {
      {
        std::unique_lock lock(mu_);
        ++holding_;
        cv_.notify_all();
        cv_.wait(lock, [&] { return released_; });
      }
      c.reply(transport::http::Response::json(200, "{}"));
    });
    // Every handler counts its calls: a refused request must reach none.
    for (const auto& r : mcp_->router().routes()) {
      auto inner = r->handler;
      std::string name = r->method + " " + r->path;
      r->handler = [this, inner, name](transport::http::Call& c) {
        {
          std::lock_guard lock(mu_);
          ++reached_[name];
        }
        inner(c);
      };
    }
    transport::http::ServerOptions so;
    so.port = 0;
    so.threads = 1;  // one I/O thread: a stall there would stall every connection
    http_ = std::make_unique<transport::http::Server>(
        so, [this](transport::http::Request&& req, std::shared_ptr<transport::http::Exchange> ex) {
          mcp_->handle(std::move(req), std::move(ex));
        });
    auto port = http_->listen();
    ASSERT_TRUE(port.ok());
    port_ = *port;
    mcp_->attach(*http_);
    http_->start();
  }
  void TearDown() override {
    release();
    if (http_) http_->stop();
    // Workers may still hold an answered exchange (an MCP session's task
    // ends after its reply): it must go before the server's I/O context.
    auto& pool = ElasticPool::shared();
    for (int i = 0; i < 500 && pool.idle() != pool.threads(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    rest_.reset();
    mcp_.reset();
    http_.reset();
    keys_.reset();
    std::filesystem::remove_all(dir_);
  }
  void release() {
    std::lock_guard lock(mu_);
    released_ = true;
    gate_closed_ = false;
    cv_.notify_all();
  }

  Reply send(const std::string& method, const std::string& target,
             const std::map<std::string, std::string>& headers = {}, const std::string& body = {}) {
    net::io_context io;
    net::ip::tcp::socket sock(io);
    sock.connect({net::ip::make_address("127.0.0.1"), port_});
    // A server that stalls fails the test instead of hanging it.
    timeval tv{10, 0};
    ::setsockopt(sock.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    bhttp::request<bhttp::string_body> req{bhttp::string_to_verb(method), target, 11};
    if (req.method() == bhttp::verb::unknown) req.method_string(method);
    req.set(bhttp::field::host, "127.0.0.1:" + std::to_string(port_));
    for (const auto& [k, v] : headers) req.set(k, v);
    req.body() = body;
    req.prepare_payload();
    bhttp::write(sock, req);
    boost::beast::flat_buffer buf;
    bhttp::response<bhttp::string_body> res;
    bhttp::read(sock, buf, res);
    Reply out;
    out.status = static_cast<int>(res.result_int());
    for (const auto& f : res) {
      std::string n(f.name_string());
      for (auto& ch : n) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      out.headers[n] = std::string(f.value());
    }
    out.body = res.body();
    return out;
  }
  std::string sign_in(std::string* csrf) {
    Reply r = send("POST", "/api/v1/session", {{"content-type", "application/json"}},
                   json{{"api_key", admin_}}.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    *csrf = json::parse(r.body).value("csrf_token", "");
    std::string c = r.header("set-cookie");
    return c.substr(0, c.find(';'));
  }
  size_t reached(const std::string& name) {
    std::lock_guard lock(mu_);
    return reached_[name];
  }
  size_t key_count() { return keys_->list()->size(); }

  std::filesystem::path dir_;
  std::unique_ptr<store::KeyStore> keys_;
  std::string admin_, plain_;
  mcp::Server server_;
  std::unique_ptr<transport::http::McpHttp> mcp_;
  std::unique_ptr<RestApi> rest_;
  std::unique_ptr<transport::http::Server> http_;
  uint16_t port_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, size_t> reached_;
  int holding_ = 0;
  bool released_ = false;
  int verifying_ = 0;
  bool gate_closed_ = false;
};

void expect_problem(const Reply& r, int status, const std::string& code, const std::string& what) {
  EXPECT_EQ(r.status, status) << what << ": " << r.body;
  EXPECT_EQ(r.header("content-type"), "application/problem+json") << what;
  auto j = json::parse(r.body, nullptr, false);
  EXPECT_EQ(j.value("code", ""), code) << what << ": " << r.body;
}

TEST_F(RestGuardTest, EveryRouteRefusesWithoutChangingAnything) {
  std::string csrf;
  const std::string cookie = sign_in(&csrf);
  ASSERT_FALSE(cookie.empty());
  const size_t keys_before = key_count();
  size_t checked = 0, admin_checked = 0, csrf_checked = 0;
  for (const auto& r : mcp_->router().routes()) {
    using transport::http::RouteAuth;
    if (r->meta.auth == RouteAuth::kNone) continue;
    const std::string name = r->method + " " + r->path;
    const std::string path = concrete(r->path);
    const bool rest = r->meta.auth != RouteAuth::kKey;
    // POST /messages (MCP HTTP+SSE) takes its session id as the credential
    // without a key (clients drop the key from the endpoint URL).
    const bool session_capability = name == "POST /messages";
    std::vector<std::string> methods{r->method};
    if (r->method == "*") methods = {"GET", "POST", "DELETE"};
    for (const auto& m : methods) {
      const std::string what = m + " " + path;
      // No key.
      if (!session_capability) {
        Reply none = send(m, path);
        EXPECT_EQ(none.status, 401) << what << ": " << none.body;
        if (rest) expect_problem(none, 401, "unauthorized", what);
      }
      // A page on another site, with a good key.
      Reply foreign =
          send(m, path, {{"authorization", "Bearer " + admin_}, {"origin", "http://evil.example"}});
      EXPECT_EQ(foreign.status, 403) << what << ": " << foreign.body;
      if (rest) {
        expect_problem(foreign, 403, "forbidden", what);
        // Another page on this very machine is another origin too.
        expect_problem(
            send(m, path,
                 {{"authorization", "Bearer " + admin_}, {"origin", "http://127.0.0.1:1"}}),
            403, "forbidden", what + " (loopback origin)");
      }
      // A browser session without its CSRF token on an unsafe method.
      if (unsafe_method(m) && !session_capability) {
        Reply no_csrf = send(m, path, {{"cookie", cookie}});
        if (rest) {
          expect_problem(no_csrf, 403, "csrf", what);
          Reply wrong = send(m, path, {{"cookie", cookie}, {"x-csrf-token", csrf + "x"}});
          expect_problem(wrong, 403, "csrf", what + " (wrong token)");
          ++csrf_checked;
        } else {
          EXPECT_EQ(no_csrf.status, 401) << what << ": MCP takes no cookie";
        }
      }
      if (r->meta.auth == RouteAuth::kAdmin) {
        expect_problem(send(m, path, {{"authorization", "Bearer " + plain_}}), 403, "forbidden",
                       what + " (plain key)");
        ++admin_checked;
      }
      ++checked;
    }
    if (!session_capability) {
      EXPECT_EQ(reached(name), 0u) << name << " ran for a refused request";
    }
    EXPECT_EQ(key_count(), keys_before) << name;
  }
  EXPECT_GT(checked, 20u);
  EXPECT_GE(admin_checked, 3u);
  EXPECT_GT(csrf_checked, 10u);
  // The same session with its token gets through (the refusals above were
  // for the missing token, not the session).
  Reply ok =
      send("POST", "/api/v1/keys",
           {{"cookie", cookie}, {"x-csrf-token", csrf}, {"content-type", "application/json"}},
           R"({"name":"made"})");
  EXPECT_EQ(ok.status, 201) << ok.body;
  EXPECT_EQ(key_count(), keys_before + 1);
}

TEST_F(RestGuardTest, RequestsInFlightPerKeyAreBounded) {
  const std::map<std::string, std::string> as_plain{{"authorization", "Bearer " + plain_}};
  auto a =
      std::async(std::launch::async, [&] { return send("GET", "/api/v1/test/hold", as_plain); });
  auto b =
      std::async(std::launch::async, [&] { return send("GET", "/api/v1/test/hold", as_plain); });
  {
    std::unique_lock lock(mu_);
    ASSERT_TRUE(cv_.wait_for(lock, std::chrono::seconds(10), [&] { return holding_ == 2; }));
  }
  // A third from the same key: 429 with Retry-After; another key is not held back.
  Reply third = send("GET", "/api/v1/test/hold", as_plain);
  expect_problem(third, 429, "resource_exhausted", "third request");
  EXPECT_EQ(third.header("retry-after"), "1");
  Reply other = send("GET", "/api/v1/metrics", {{"authorization", "Bearer " + admin_}});
  EXPECT_EQ(other.status, 200) << other.body;
  release();
  EXPECT_EQ(a.get().status, 200);
  EXPECT_EQ(b.get().status, 200);
  // The slots are back: the next request goes through.
  EXPECT_EQ(send("GET", "/api/v1/test/hold", as_plain).status, 200);
}

TEST_F(RestGuardTest, ARevokedKeyIsRefusedOnItsNextRequest) {
  auto k = keys_->create("short-lived", true);
  ASSERT_TRUE(k.ok());
  const std::map<std::string, std::string> as_it{{"authorization", "Bearer " + k->secret}};
  EXPECT_EQ(send("GET", "/api/v1/keys", as_it).status, 200);
  Reply del = send("DELETE", "/api/v1/keys/" + k->info.id, {{"authorization", "Bearer " + admin_}});
  EXPECT_EQ(del.status, 204) << del.body;
  expect_problem(send("GET", "/api/v1/keys", as_it), 401, "unauthorized", "after revoke");
}

TEST_F(RestGuardTest, ABlockedKeyDatabaseStallsNoOtherConnection) {
  // Another process's writer holds the database: the guard's write of
  // last_used_at waits for it (SQLite's busy timeout), on a worker thread.
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ / "k.db").string().c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN IMMEDIATE; UPDATE api_keys SET name=name", nullptr, nullptr,
                         nullptr),
            SQLITE_OK);
  auto waiting = std::async(std::launch::async, [&] {
    return send("GET", "/api/v1/metrics", {{"authorization", "Bearer " + plain_}});
  });
  // Meanwhile the one I/O thread answers others at once.
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout)
      << "the write did not wait: the test proves nothing";
  for (int i = 0; i < 3; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(send("GET", "/healthz").status, 200);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(1000));
  }
  ASSERT_EQ(sqlite3_exec(other, "COMMIT", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(other);
  EXPECT_EQ(waiting.get().status, 200);
}

TEST_F(RestGuardTest, ASlowMcpKeyCheckStallsNoOtherConnection) {
  {
    std::lock_guard lock(mu_);
    gate_closed_ = true;
  }
  auto waiting = std::async(std::launch::async, [&] {
    return send(
        "POST", "/mcp",
        {{"authorization", "Bearer " + plain_},
         {"content-type", "application/json"},
         {"accept", "application/json, text/event-stream"}},
        R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",)"
        R"("capabilities":{},"clientInfo":{"name":"t","version":"1"}}})");
  });
  {
    std::unique_lock lock(mu_);
    ASSERT_TRUE(cv_.wait_for(lock, std::chrono::seconds(10), [&] { return verifying_ == 1; }));
  }
  // The key check waits (a slow disk); the one I/O thread answers others.
  for (int i = 0; i < 3; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(send("GET", "/healthz").status, 200);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(1000));
  }
  release();
  Reply r = waiting.get();
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find(R"("id":1)"), std::string::npos) << r.body;
}

}  // namespace
}  // namespace sandcastle::web
