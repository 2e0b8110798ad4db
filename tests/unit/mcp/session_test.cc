#include "mcp/session.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>

#include "server/fixtures.h"
#include "mcp/input_required.h"

namespace sandcastle::mcp {
namespace {

using namespace std::chrono_literals;

// Collects what the session sends, so tests can wait for a specific message.
class Outbox {
 public:
  // Messages are kept as the client reads them: serialized, then parsed.
  Session::Send sender() {
    return [this](const json& m) {
      json wire = json::parse(dump_message(m));
      std::lock_guard lock(mu_);
      msgs_.push_back(std::move(wire));
      cv_.notify_all();
    };
  }
  // The response with this id, or null after the timeout.
  json response(const json& id, std::chrono::milliseconds timeout = 3s) {
    return wait([&](const json& m) { return m.is_object() && m.contains("id") && m["id"] == id; },
                timeout);
  }
  json wait(const std::function<bool(const json&)>& pred, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    json found;
    cv_.wait_for(lock, timeout, [&] {
      for (auto& m : msgs_)
        if (pred(m)) {
          found = m;
          return true;
        }
      return false;
    });
    return found;
  }
  std::vector<json> notifications(const std::string& method) {
    std::lock_guard lock(mu_);
    std::vector<json> out;
    for (auto& m : msgs_)
      if (m.is_object() && m.value("method", "") == method) out.push_back(m);
    return out;
  }
  size_t size() {
    std::lock_guard lock(mu_);
    return msgs_.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<json> msgs_;
};

json request(const json& id, const std::string& method, json params = json::object()) {
  return json{{"jsonrpc", "2.0"}, {"id", id}, {"method", method}, {"params", std::move(params)}};
}

json modern_meta(json extra = json::object()) {
  json meta{{"io.modelcontextprotocol/protocolVersion", "2026-07-28"},
            {"io.modelcontextprotocol/clientCapabilities", json::object()}};
  meta.update(extra);
  return meta;
}

class SessionTest : public ::testing::Test {
 protected:
  SessionTest() : server_(ServerInfo{}, ServerOptions{.page_size = 4}) {
    register_test_fixtures(server_);
    session_ = Session::create(server_, out_.sender());
  }
  ~SessionTest() override { session_->shutdown(0ms, 2s); }

  json call(const json& msg) {
    session_->handle_json(msg);
    return out_.response(msg["id"]);
  }
  void initialize(const std::string& version = "2025-11-25") {
    json r = call(request(0, "initialize",
                          {{"protocolVersion", version},
                           {"capabilities", json::object()},
                           {"clientInfo", {{"name", "t"}, {"version", "1"}}}}));
    ASSERT_TRUE(r.contains("result")) << r.dump();
  }

  Server server_;
  Outbox out_;
  std::shared_ptr<Session> session_;
};

// A tool marked runs_inline answers before handle_json returns (no worker
// hand-off); an ordinary one answers later, from a worker.
TEST_F(SessionTest, InlineToolsAnswerOnTheCallersThread) {
  initialize();
  const size_t before = out_.size();
  session_->handle_json(request(1, "tools/call", {{"name", "test_echo"}, {"arguments", {{"text", "hi"}}}}));
  EXPECT_EQ(out_.size(), before + 1) << "answered synchronously";
  session_->handle_json(request(2, "tools/call", {{"name", "test_sleep"}, {"arguments", {{"ms", 100}}}}));
  EXPECT_EQ(out_.size(), before + 1) << "the sleeping tool runs on a worker";
  EXPECT_TRUE(out_.response(2).contains("result"));
}

// tools/list is serialized once and then sent as those bytes; a tool added
// later shows up (the memo is keyed by the registry's size).
TEST_F(SessionTest, ToolsListIsMemoizedAndFollowsTheRegistry) {
  initialize();
  json a = call(request(1, "tools/list"));
  json b = call(request(2, "tools/list"));
  ASSERT_TRUE(a.contains("result")) << a.dump();
  EXPECT_EQ(a["result"], b["result"]);
  EXPECT_EQ(b["id"], 2);
  ToolDefinition def;
  def.name = "aaa_added_later";
  def.description = "added after the first tools/list";
  def.input_schema = json{{"type", "object"}};
  server_.tools().add(def, [](const json&, RequestContext&) { return ToolResult::text("x"); });
  std::set<std::string> names;
  json params = json::object();
  for (int page = 0; page < 100; ++page) {
    json r = call(request(100 + page, "tools/list", params));
    for (const auto& t : r["result"]["tools"]) names.insert(t["name"].get<std::string>());
    if (!r["result"].contains("nextCursor")) break;
    params["cursor"] = r["result"]["nextCursor"];
  }
  EXPECT_EQ(names.size(), server_.tools().size());
  EXPECT_TRUE(names.count("aaa_added_later"));
}

TEST_F(SessionTest, InitializeNegotiatesAndDeclaresCapabilities) {
  json r = call(request(1, "initialize", {{"protocolVersion", "2025-03-26"}, {"capabilities", json::object()}}));
  EXPECT_EQ(r["result"]["protocolVersion"], "2025-03-26");
  EXPECT_EQ(r["result"]["serverInfo"]["name"], "sandcastle");
  EXPECT_TRUE(r["result"]["capabilities"].contains("tools"));
  EXPECT_TRUE(r["result"]["capabilities"].contains("logging"));
  // The fixtures register prompts and resources, so they are declared; a
  // server without handlers declares nothing it cannot serve.
  EXPECT_TRUE(r["result"]["capabilities"].contains("prompts"));
  EXPECT_TRUE(r["result"]["capabilities"].contains("resources"));
  Server bare;
  EXPECT_FALSE(bare.capabilities().contains("prompts"));
  EXPECT_FALSE(bare.capabilities().contains("resources"));
  EXPECT_FALSE(bare.capabilities().contains("completions"));

  json again = call(request(2, "initialize", {{"protocolVersion", "2025-03-26"}}));
  EXPECT_EQ(again["error"]["code"], rpc_error::kInvalidRequest);
}

TEST_F(SessionTest, UnknownVersionGetsNewest) {
  json r = call(request("init", "initialize", {{"protocolVersion", "1999-01-01"}}));
  EXPECT_EQ(r["id"], "init");
  EXPECT_EQ(r["result"]["protocolVersion"], "2025-11-25");
}

TEST_F(SessionTest, InitializeNeedsVersion) {
  json r = call(request(1, "initialize", json::object()));
  EXPECT_EQ(r["error"]["code"], rpc_error::kInvalidParams);
}

TEST_F(SessionTest, RequestsBeforeInitializeAreRefusedExceptPing) {
  EXPECT_EQ(call(request(1, "tools/list"))["error"]["code"], rpc_error::kInvalidRequest);
  EXPECT_TRUE(call(request(2, "ping")).contains("result"));
}

TEST_F(SessionTest, UnknownMethodAndParamsErrors) {
  initialize();
  EXPECT_EQ(call(request(1, "nope/nothing"))["error"]["code"], rpc_error::kMethodNotFound);
  json bad_params{{"jsonrpc", "2.0"}, {"id", 2}, {"method", "tools/list"}, {"params", {1, 2}}};
  EXPECT_EQ(call(bad_params)["error"]["code"], rpc_error::kInvalidParams);
  EXPECT_EQ(call(request(3, "tools/call", {{"name", "no_such_tool"}}))["error"]["code"],
            rpc_error::kInvalidParams);
  EXPECT_EQ(call(request(4, "tools/call", {{"arguments", json::object()}}))["error"]["code"],
            rpc_error::kInvalidParams);
  EXPECT_EQ(call(request(5, "logging/setLevel", {{"level", "loud"}}))["error"]["code"],
            rpc_error::kInvalidParams);
}

TEST_F(SessionTest, IdsAreEchoedExactly) {
  initialize();
  for (json id : {json("x-1"), json(0), json(-5), json(9007199254740993LL), json("")}) {
    json r = call(request(id, "ping"));
    ASSERT_TRUE(r.contains("result")) << id.dump();
    EXPECT_EQ(r["id"].dump(), id.dump());
  }
}

TEST_F(SessionTest, InvalidMessagesGetInvalidRequest) {
  session_->handle_text("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":7}");
  EXPECT_EQ(out_.response(3)["error"]["code"], rpc_error::kInvalidRequest);
  session_->handle_text("{not json");
  json parse = out_.wait([](const json& m) { return m.contains("error") && m["error"]["code"] == -32700; }, 1s);
  EXPECT_TRUE(parse["id"].is_null());
  // Found by fuzzing: an out-of-range number throws out_of_range, not parse_error.
  session_->handle_text("{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\",\"x\":1E1111}");
  json range = out_.wait([](const json& m) { return m.contains("error") && m["error"]["code"] == -32700 && m["error"]["message"].get<std::string>().find("out_of_range") != std::string::npos; }, 1s);
  EXPECT_FALSE(range.is_null());
  session_->handle_text("{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\",\"x\":\"\xff\"}");
  json utf = out_.wait([](const json& m) { return m.contains("error") && m["error"]["code"] == -32700 && m["error"]["message"].get<std::string>().find("UTF-8") != std::string::npos; }, 1s);
  EXPECT_FALSE(utf.is_null());
}

TEST_F(SessionTest, ToolsListPaginatesDeterministically) {
  initialize();
  std::vector<std::string> names;
  json params = json::object();
  for (int page = 0; page < 20; ++page) {
    json r = call(request(100 + page, "tools/list", params));
    ASSERT_TRUE(r.contains("result")) << r.dump();
    EXPECT_LE(r["result"]["tools"].size(), 4u);
    for (auto& t : r["result"]["tools"]) names.push_back(t["name"]);
    if (!r["result"].contains("nextCursor")) break;
    params = {{"cursor", r["result"]["nextCursor"]}};
  }
  EXPECT_EQ(names.size(), server_.tools().size());
  EXPECT_EQ(names.front(), "test_simple_text");
  json bad = call(request(200, "tools/list", {{"cursor", "bogus"}}));
  EXPECT_EQ(bad["error"]["code"], rpc_error::kInvalidParams);
}

TEST_F(SessionTest, ToolCallReturnsStructuredAndTextAndValidates) {
  initialize();
  json r = call(request(1, "tools/call", {{"name", "test_echo"}, {"arguments", {{"text", "hi"}, {"mode", "upper"}}}}));
  EXPECT_EQ(r["result"]["structuredContent"]["text"], "HI");
  EXPECT_EQ(r["result"]["structuredContent"]["count"], 1);  // the schema default
  EXPECT_EQ(json::parse(r["result"]["content"][0]["text"].get<std::string>()),
            r["result"]["structuredContent"]);
  EXPECT_FALSE(r["result"].contains("isError"));

  json bad = call(request(2, "tools/call", {{"name", "test_echo"}, {"arguments", {{"text", "hi"}, {"count", 0}}}}));
  EXPECT_EQ(bad["result"]["isError"], true);
  EXPECT_NE(bad["result"]["content"][0]["text"].get<std::string>().find("argument 'count': expected >= 1"),
            std::string::npos);
}

TEST_F(SessionTest, ProgressIncreasesThenResult) {
  initialize();
  session_->handle_json(request(1, "tools/call", {{"name", "test_tool_with_progress"}, {"_meta", {{"progressToken", "p1"}}}}));
  ASSERT_FALSE(out_.response(1).is_null());
  auto progress = out_.notifications("notifications/progress");
  ASSERT_EQ(progress.size(), 3u);
  double last = -1;
  for (auto& p : progress) {
    EXPECT_EQ(p["params"]["progressToken"], "p1");
    EXPECT_GT(p["params"]["progress"].get<double>(), last);
    last = p["params"]["progress"];
    EXPECT_EQ(p["params"]["total"], 100);
  }
}

TEST_F(SessionTest, NoProgressWithoutToken) {
  initialize();
  ASSERT_FALSE(call(request(1, "tools/call", {{"name", "test_tool_with_progress"}})).is_null());
  EXPECT_TRUE(out_.notifications("notifications/progress").empty());
}

TEST_F(SessionTest, CancellationStopsHandlerAndSuppressesResponse) {
  initialize();
  auto start = std::chrono::steady_clock::now();
  session_->handle_json(request(7, "tools/call", {{"name", "test_sleep"}, {"arguments", {{"ms", 30000}}}}));
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(session_->inflight(), 1u);
  session_->handle_json({{"jsonrpc", "2.0"}, {"method", "notifications/cancelled"},
                         {"params", {{"requestId", 7}, {"reason", "test"}}}});
  for (int i = 0; i < 100 && session_->inflight() > 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(session_->inflight(), 0u);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_TRUE(out_.response(7, 200ms).is_null()) << "a cancelled request must get no response";
}

// 2026-07-28 subscriptions/listen: acknowledged first (tagged with the
// subscription's id, listing the kinds this server will send: none), then
// held open without a response until the client cancels it. Legacy: -32601.
TEST_F(SessionTest, SubscriptionsListenAcknowledgesAndHoldsUntilCancelled) {
  session_->handle_json(request(9, "subscriptions/listen",
                                {{"notifications", {{"toolsListChanged", true}}}, {"_meta", modern_meta()}}));
  json ack = out_.wait([](const json& m) { return m.value("method", "") == "notifications/subscriptions/acknowledged"; },
                       2s);
  ASSERT_FALSE(ack.is_null());
  EXPECT_EQ(ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"].get<std::string>().rfind("sub-", 0), 0u);
  EXPECT_EQ(ack["params"]["notifications"], json::object());
  EXPECT_TRUE(out_.response(9, 300ms).is_null()) << "the stream stays open";
  EXPECT_EQ(session_->inflight(), 1u);
  session_->handle_json({{"jsonrpc", "2.0"}, {"method", "notifications/cancelled"},
                         {"params", {{"requestId", 9}, {"reason", "client closed"}}}});
  for (int i = 0; i < 100 && session_->inflight() > 0; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(session_->inflight(), 0u) << "cancelling ends the listener";
  EXPECT_TRUE(out_.response(9, 100ms).is_null());
  json bad = call(request(10, "subscriptions/listen", {{"notifications", 3}, {"_meta", modern_meta()}}));
  EXPECT_EQ(bad["error"]["code"], rpc_error::kInvalidParams);
  initialize();
  EXPECT_EQ(call(request(11, "subscriptions/listen"))["error"]["code"], rpc_error::kMethodNotFound);
}

// SEP-2322: a tool needing the client answers input_required with a signed
// requestState; the client's second round completes it; an altered state or
// a malformed answer is -32602; the legacy era never sees input_required.
TEST_F(SessionTest, InputRequiredRoundTripsWithSignedState) {
  auto call_modern = [&](int id, json extra) {
    json params{{"name", "test_input_required_result_multi_round"}, {"arguments", json::object()},
                {"_meta", modern_meta()}};
    params.update(extra);
    return call(request(id, "tools/call", params));
  };
  json r1 = call_modern(1, json::object());
  ASSERT_EQ(r1["result"]["resultType"], "input_required") << r1.dump();
  EXPECT_EQ(r1["result"]["inputRequests"]["step1"]["method"], "elicitation/create");
  const std::string state1 = r1["result"]["requestState"];
  json r2 = call_modern(2, {{"inputResponses", {{"step1", {{"action", "accept"}, {"content", {{"name", "Ada"}}}}}}},
                            {"requestState", state1}});
  ASSERT_EQ(r2["result"]["resultType"], "input_required") << r2.dump();
  const std::string state2 = r2["result"]["requestState"];
  EXPECT_NE(state1, state2);
  json r3 = call_modern(3, {{"inputResponses", {{"step2", {{"action", "accept"}, {"content", {{"color", "teal"}}}}}}},
                            {"requestState", state2}});
  ASSERT_EQ(r3["result"]["resultType"], "complete") << r3.dump();
  EXPECT_EQ(r3["result"]["content"][0]["text"], "Ada likes teal");
  // One changed character in the payload, or a state made for another method.
  std::string tampered = state2;
  tampered[2] = tampered[2] == 'A' ? 'B' : 'A';
  EXPECT_EQ(call_modern(4, {{"requestState", tampered}})["error"]["code"], rpc_error::kInvalidParams);
  const std::string foreign = sign_request_state(server_.state_key(), "prompts/get", json{{"round", 2}, {"name", "x"}});
  EXPECT_EQ(call_modern(5, {{"requestState", foreign}})["error"]["code"], rpc_error::kInvalidParams);
  EXPECT_EQ(call_modern(6, {{"inputResponses", {{"step1", 12345}}}})["error"]["code"], rpc_error::kInvalidParams);
  EXPECT_EQ(call_modern(7, {{"inputResponses", nullptr}})["error"]["code"], rpc_error::kInvalidParams);
  initialize();
  json legacy = call(request(8, "tools/call", {{"name", "test_input_required_result_elicitation"}, {"arguments", json::object()}}));
  EXPECT_EQ(legacy["error"]["code"], rpc_error::kInternalError) << legacy.dump();
}

TEST_F(SessionTest, SlowCallDoesNotDelayPing) {
  initialize();
  session_->handle_json(request("slow", "tools/call", {{"name", "test_sleep"}, {"arguments", {{"ms", 1500}}}}));
  auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(call(request("p", "ping")).contains("result"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 500ms);
  json slow = out_.response("slow", 5s);
  EXPECT_GE(slow["result"]["structuredContent"]["slept_ms"].get<int>(), 1400);
}

TEST_F(SessionTest, DuplicateInflightIdRefused) {
  initialize();
  session_->handle_json(request(9, "tools/call", {{"name", "test_sleep"}, {"arguments", {{"ms", 500}}}}));
  std::this_thread::sleep_for(50ms);
  session_->handle_json(request(9, "ping"));
  json dup = out_.wait([](const json& m) { return m.contains("error") && m["id"] == 9; }, 1s);
  EXPECT_EQ(dup["error"]["code"], rpc_error::kInvalidRequest);
}

TEST_F(SessionTest, LoggingFollowsSetLevel) {
  initialize();
  ASSERT_TRUE(call(request(1, "logging/setLevel", {{"level", "error"}})).contains("result"));
  ASSERT_FALSE(call(request(2, "tools/call", {{"name", "test_tool_with_logging"}})).is_null());
  EXPECT_TRUE(out_.notifications("notifications/message").empty());
  ASSERT_TRUE(call(request(3, "logging/setLevel", {{"level", "debug"}})).contains("result"));
  ASSERT_FALSE(call(request(4, "tools/call", {{"name", "test_tool_with_logging"}})).is_null());
  auto logs = out_.notifications("notifications/message");
  ASSERT_EQ(logs.size(), 3u);
  EXPECT_EQ(logs[0]["params"]["level"], "info");
  EXPECT_EQ(logs[0]["params"]["data"], "Tool execution started");
}

TEST_F(SessionTest, BatchesOnlyFor20250326) {
  initialize("2025-06-18");
  session_->handle_json(json::array({request(1, "ping")}));
  json err = out_.wait([](const json& m) { return m.is_object() && m.contains("error"); }, 1s);
  EXPECT_EQ(err["error"]["code"], rpc_error::kInvalidRequest);
  EXPECT_TRUE(err["id"].is_null());
}

TEST_F(SessionTest, BatchReturnsArrayUnder20250326) {
  initialize("2025-03-26");
  session_->handle_json(json::array({request(1, "ping"), json{{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}},
                                     request(2, "tools/list"), json{{"bad", true}}}));
  json arr = out_.wait([](const json& m) { return m.is_array(); }, 2s);
  ASSERT_TRUE(arr.is_array());
  ASSERT_EQ(arr.size(), 3u);
  EXPECT_EQ(arr[0]["id"], 1);
  EXPECT_EQ(arr[1]["id"], 2);
  EXPECT_EQ(arr[2]["error"]["code"], rpc_error::kInvalidRequest);
  session_->handle_json(json::array());
  json empty = out_.wait([](const json& m) { return m.is_object() && m.contains("error") && m["id"].is_null(); }, 1s);
  EXPECT_EQ(empty["error"]["code"], rpc_error::kInvalidRequest);
}

TEST_F(SessionTest, ModernDiscoverAndResultEnvelope) {
  json d = call(request(1, "server/discover", {{"_meta", modern_meta()}}));
  ASSERT_TRUE(d.contains("result")) << d.dump();
  EXPECT_EQ(d["result"]["resultType"], "complete");
  EXPECT_EQ(d["result"]["supportedVersions"][0], "2026-07-28");
  EXPECT_TRUE(d["result"]["capabilities"].contains("tools"));
  EXPECT_EQ(d["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "sandcastle");

  json l = call(request(2, "tools/list", {{"_meta", modern_meta()}}));
  EXPECT_EQ(l["result"]["resultType"], "complete");
  EXPECT_TRUE(l["result"]["ttlMs"].is_number_integer());
  EXPECT_TRUE(l["result"]["cacheScope"] == "public" || l["result"]["cacheScope"] == "private");

  json c = call(request(3, "tools/call", {{"name", "test_simple_text"}, {"_meta", modern_meta()}}));
  EXPECT_EQ(c["result"]["resultType"], "complete");
  EXPECT_FALSE(c["result"].contains("ttlMs"));
  EXPECT_EQ(c["result"]["content"][0]["text"], "This is a simple text response for testing.");
}

TEST_F(SessionTest, ModernEnvelopeErrors) {
  json bad_version = call(request(1, "tools/list", {{"_meta", modern_meta({{"io.modelcontextprotocol/protocolVersion", "2099-01-01"}})}}));
  EXPECT_EQ(bad_version["error"]["code"], rpc_error::kUnsupportedProtocolVersion);
  EXPECT_EQ(bad_version["error"]["data"]["requested"], "2099-01-01");
  EXPECT_EQ(bad_version["error"]["data"]["supported"][0], "2026-07-28");

  json no_caps = call(request(2, "tools/list", {{"_meta", {{"io.modelcontextprotocol/protocolVersion", "2026-07-28"}}}}));
  EXPECT_EQ(no_caps["error"]["code"], rpc_error::kInvalidParams);
  EXPECT_NE(no_caps["error"]["message"].get<std::string>().find("clientCapabilities"), std::string::npos);

  EXPECT_EQ(call(request(3, "ping", {{"_meta", modern_meta()}}))["error"]["code"], rpc_error::kMethodNotFound);
  EXPECT_EQ(call(request(4, "logging/setLevel", {{"level", "info"}, {"_meta", modern_meta()}}))["error"]["code"],
            rpc_error::kMethodNotFound);

  json missing = call(request(5, "tools/call", {{"name", "test_needs_sampling"}, {"_meta", modern_meta()}}));
  EXPECT_EQ(missing["error"]["code"], rpc_error::kMissingRequiredClientCapability);
  EXPECT_TRUE(missing["error"]["data"]["requiredCapabilities"].contains("sampling"));
  json with = call(request(6, "tools/call", {{"name", "test_needs_sampling"},
      {"_meta", modern_meta({{"io.modelcontextprotocol/clientCapabilities", {{"sampling", json::object()}}}})}}));
  EXPECT_TRUE(with.contains("result")) << with.dump();
}

TEST_F(SessionTest, ModernLoggingOnlyWhenRequested) {
  ASSERT_FALSE(call(request(1, "tools/call", {{"name", "test_tool_with_logging"}, {"_meta", modern_meta()}})).is_null());
  EXPECT_TRUE(out_.notifications("notifications/message").empty());
  ASSERT_FALSE(call(request(2, "tools/call", {{"name", "test_tool_with_logging"},
      {"_meta", modern_meta({{"io.modelcontextprotocol/logLevel", "info"}})}})).is_null());
  EXPECT_EQ(out_.notifications("notifications/message").size(), 3u);
}

TEST_F(SessionTest, ShutdownLetsShortWorkFinishAndCancelsTheRest) {
  initialize();
  session_->handle_json(request("short", "tools/call", {{"name", "test_sleep"}, {"arguments", {{"ms", 200}}}}));
  session_->handle_json(request("long", "tools/call", {{"name", "test_sleep"}, {"arguments", {{"ms", 60000}}}}));
  std::this_thread::sleep_for(20ms);
  auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(session_->shutdown(500ms, 1s));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1500ms);
  EXPECT_TRUE(out_.response("short", 0ms).contains("result"));
  EXPECT_TRUE(out_.response("long", 0ms).is_null());
}

}  // namespace
}  // namespace sandcastle::mcp
