#include "mcp/task_store.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

namespace sandcastle::mcp {
namespace {

struct FakeClock {
  int64_t now = 1'800'000'000'000;
  TaskStore::Clock fn() {
    return [this] { return now; };
  }
};

TEST(TaskStoreTest, WorkingThenCompletedKeepsTheResult) {
  FakeClock clock;
  TaskStore store({}, clock.fn());
  auto t = store.create("alice", "slow", std::nullopt);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->status, TaskStatus::kWorking);
  EXPECT_EQ(t->ttl_ms, store.limits().default_ttl_ms);
  EXPECT_EQ(t->id.size(), 32u);
  clock.now += 5;
  ASSERT_TRUE(store.complete(t->id, json{{"content", json::array()}}));
  auto got = store.get("alice", t->id);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->status, TaskStatus::kCompleted);
  EXPECT_EQ(got->result, json({{"content", json::array()}}));
  EXPECT_EQ(got->updated_ms, got->created_ms + 5);
  // Terminal is final: a late outcome is dropped.
  EXPECT_FALSE(store.fail(t->id, -32603, "late"));
  EXPECT_EQ(store.get("alice", t->id)->status, TaskStatus::kCompleted);
}

TEST(TaskStoreTest, OtherOwnersSeeNothing) {
  TaskStore store;
  auto t = store.create("alice", "slow", std::nullopt);
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(store.get("bob", t->id));
  EXPECT_FALSE(store.get("", t->id));
  EXPECT_EQ(store.cancel("bob", t->id), TaskStore::Cancel::kUnknown);
  EXPECT_EQ(store.get("alice", t->id)->status, TaskStatus::kWorking);
  auto page = store.list("bob", std::nullopt, 10);
  ASSERT_TRUE(page.ok());
  EXPECT_TRUE(page->tasks.empty());
}

TEST(TaskStoreTest, CancelCancelsTheTokenAndIsFinal) {
  TaskStore store;
  auto t = store.create("", "slow", std::nullopt);
  ASSERT_TRUE(t.ok());
  auto token = store.token(t->id);
  ASSERT_TRUE(token);
  EXPECT_EQ(store.cancel("", t->id), TaskStore::Cancel::kCancelled);
  EXPECT_TRUE(token->cancelled());
  EXPECT_EQ(store.get("", t->id)->status, TaskStatus::kCancelled);
  // The work ends because of the token; its result does not replace the status.
  EXPECT_FALSE(store.complete(t->id, json::object()));
  EXPECT_EQ(store.cancel("", t->id), TaskStore::Cancel::kAlreadyTerminal);
}

TEST(TaskStoreTest, InputRequiredResumesWhenEveryRequestIsAnswered) {
  TaskStore store;
  auto t = store.create("", "multi", std::nullopt);
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE(store.park(t->id,
                         json{{"a", {{"method", "elicitation/create"}}}, {"b", {{"method", "x"}}}},
                         json{{"round", 1}}));
  EXPECT_EQ(store.get("", t->id)->status, TaskStatus::kInputRequired);
  json responses;
  std::optional<json> state;
  EXPECT_EQ(
      store.update("", t->id, json{{"a", {{"action", "accept"}}}, {"zzz", 1}}, &responses, &state),
      TaskStore::Update::kPending);
  auto mid = store.get("", t->id);
  EXPECT_EQ(mid->status, TaskStatus::kInputRequired);
  EXPECT_FALSE(mid->input_requests.contains("a"));
  EXPECT_TRUE(mid->input_requests.contains("b"));
  EXPECT_EQ(store.update("", t->id, json{{"b", {{"action", "decline"}}}}, &responses, &state),
            TaskStore::Update::kResume);
  EXPECT_EQ(responses, json({{"a", {{"action", "accept"}}}, {"b", {{"action", "decline"}}}}));
  ASSERT_TRUE(state);
  EXPECT_EQ(*state, json({{"round", 1}}));
  EXPECT_EQ(store.get("", t->id)->status, TaskStatus::kWorking);
  EXPECT_EQ(store.update("", t->id, json::object(), &responses, &state),
            TaskStore::Update::kNotWaiting);
  EXPECT_EQ(store.update("", "nope", json::object(), &responses, &state),
            TaskStore::Update::kUnknown);
}

TEST(TaskStoreTest, TtlIsCappedAndExpiredTasksArePurgedAndCancelled) {
  FakeClock clock;
  TaskLimits limits;
  limits.max_ttl_ms = 10'000;
  TaskStore store(limits, clock.fn());
  auto t = store.create("", "slow", 1'000'000);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->ttl_ms, 10'000);
  auto token = store.token(t->id);
  std::vector<std::string> purged;
  store.add_on_purge([&](const std::vector<std::string>& ids) { purged = ids; });
  clock.now += 9'999;
  EXPECT_TRUE(store.get("", t->id));
  EXPECT_EQ(store.purge_expired(), 0u);
  clock.now += 1;
  EXPECT_FALSE(store.get("", t->id));  // expired: gone before the purge runs
  EXPECT_EQ(store.purge_expired(), 1u);
  EXPECT_TRUE(token->cancelled());
  EXPECT_EQ(purged, std::vector<std::string>{t->id});
  EXPECT_EQ(store.size(), 0u);
}

TEST(TaskStoreTest, LimitsPerOwnerAndPerServer) {
  TaskLimits limits;
  limits.max_per_owner = 2;
  limits.max_total = 3;
  TaskStore store(limits);
  ASSERT_TRUE(store.create("a", "t", std::nullopt).ok());
  ASSERT_TRUE(store.create("a", "t", std::nullopt).ok());
  auto third = store.create("a", "t", std::nullopt);
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.error().code, ErrorCode::kResourceExhausted);
  ASSERT_TRUE(store.create("b", "t", std::nullopt).ok());
  auto over = store.create("c", "t", std::nullopt);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().code, ErrorCode::kResourceExhausted);
}

TEST(TaskStoreTest, ListPagesTheOwnersTasksInOrder) {
  TaskStore store;
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    ids.push_back(store.create("a", "t", std::nullopt)->id);
    ASSERT_TRUE(store.create("b", "t", std::nullopt).ok());
  }
  std::vector<std::string> seen;
  std::optional<std::string> cursor;
  int pages = 0;
  do {
    auto page = store.list("a", cursor, 2);
    ASSERT_TRUE(page.ok());
    for (const auto& t : page->tasks) seen.push_back(t.id);
    cursor = page->next_cursor;
    ++pages;
  } while (cursor);
  EXPECT_EQ(seen, ids);
  EXPECT_EQ(pages, 3);
  auto bad = store.list("a", std::string("garbage"), 2);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
}

TEST(TaskStoreTest, OversizedResultFailsTheTask) {
  TaskLimits limits;
  limits.max_result_bytes = 100;
  TaskStore store(limits);
  auto t = store.create("", "t", std::nullopt);
  ASSERT_TRUE(store.complete(t->id, json{{"text", std::string(200, 'x')}}));
  auto got = store.get("", t->id);
  EXPECT_EQ(got->status, TaskStatus::kFailed);
  EXPECT_EQ(got->error["code"], -32603);
  EXPECT_TRUE(got->result.is_null());
}

TEST(TaskStoreTest, WaitTerminalWakesOnCompletion) {
  TaskStore store;
  auto t = store.create("", "t", std::nullopt);
  std::thread worker([&] { store.complete(t->id, json{{"ok", true}}); });
  auto done = store.wait_terminal("", t->id, nullptr);
  worker.join();
  ASSERT_TRUE(done);
  EXPECT_EQ(done->status, TaskStatus::kCompleted);
  CancelToken stop;
  auto other = store.create("", "t", std::nullopt);
  std::thread canceller([&] { stop.cancel(); });
  auto none = store.wait_terminal("", other->id, &stop);
  canceller.join();
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, TaskStatus::kWorking);
}

TEST(TaskStoreTest, RestoreBringsBackOnlyLiveTerminalTasks) {
  FakeClock clock;
  TaskStore store({}, clock.fn());
  Task done;
  done.id = "d";
  done.owner = "k";
  done.status = TaskStatus::kCompleted;
  done.created_ms = clock.now - 10;
  done.ttl_ms = 1000;
  done.result = json{{"content", json::array()}};
  store.restore(done);
  Task old = done;
  old.id = "old";
  old.created_ms = clock.now - 2000;
  store.restore(old);
  Task running = done;
  running.id = "r";
  running.status = TaskStatus::kWorking;
  store.restore(running);
  EXPECT_TRUE(store.get("k", "d"));
  EXPECT_FALSE(store.get("k", "old"));
  EXPECT_FALSE(store.get("k", "r"));
}

TEST(TaskStoreTest, TtlHasAFloorAndTheTokenComesWithTheTask) {
  TaskStore store;
  std::shared_ptr<CancelToken> token;
  auto t = store.create("", "t", 1, &token);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->ttl_ms, 1000);
  ASSERT_TRUE(token);
  EXPECT_EQ(token, store.token(t->id));
  EXPECT_TRUE(store.contains(t->id));
  EXPECT_FALSE(store.contains("nope"));
}

TEST(TaskStoreTest, KeptResultsHaveAByteBudgetPerOwnerAndPerServer) {
  FakeClock clock;
  TaskLimits limits;
  limits.max_owner_result_bytes = 100;
  limits.max_total_result_bytes = 150;
  TaskStore store(limits, clock.fn());
  const json result{{"text", std::string(50, 'x')}};  // 61 bytes serialized
  auto finish = [&](const std::string& owner) {
    auto t = store.create(owner, "t", 10'000);
    EXPECT_TRUE(store.complete(t->id, result));
    return *store.get(owner, t->id);
  };
  EXPECT_EQ(finish("a").status, TaskStatus::kCompleted);
  Task over_owner = finish("a");
  EXPECT_EQ(over_owner.status, TaskStatus::kFailed);
  EXPECT_TRUE(over_owner.result.is_null());
  EXPECT_EQ(over_owner.error["code"], -32603);
  EXPECT_EQ(over_owner.error["message"],
            "result too large for the server's task budget (this caller's finished tasks keep 0 "
            "MiB of at most 0 MiB until their TTL ends); read results sooner with a shorter ttl, "
            "or call without a task");
  EXPECT_EQ(finish("b").status, TaskStatus::kCompleted);  // 122 of 150
  Task over_server = finish("c");
  EXPECT_EQ(over_server.status, TaskStatus::kFailed);
  EXPECT_NE(over_server.error["message"].get<std::string>().find("the server's finished tasks"),
            std::string::npos);
  // Purged results give their bytes back; a cancelled task keeps none.
  clock.now += 10'000;
  EXPECT_EQ(store.purge_expired(), 4u);
  EXPECT_EQ(finish("c").status, TaskStatus::kCompleted);
  auto t = store.create("c", "t", 10'000);
  EXPECT_EQ(store.cancel("c", t->id), TaskStore::Cancel::kCancelled);
  EXPECT_EQ(finish("c").status, TaskStatus::kFailed);  // 61 + 61 > 100: the cancel added nothing
}

TEST(TaskStoreTest, CancelMessageOnlyWhenTheCancelWins) {
  TaskStore store;
  auto t = store.create("", "t", std::nullopt);
  ASSERT_TRUE(store.complete(t->id, json::object()));
  EXPECT_EQ(store.cancel("", t->id), TaskStore::Cancel::kAlreadyTerminal);
  EXPECT_EQ(store.get("", t->id)->status_message, "");
  auto u = store.create("", "t", std::nullopt);
  EXPECT_EQ(store.cancel("", u->id), TaskStore::Cancel::kCancelled);
  auto got = store.get("", u->id);
  EXPECT_EQ(got->status, TaskStatus::kCancelled);
  EXPECT_EQ(got->status_message, "cancelled by the client");
}

// No create() or list() comes: the reaper alone purges the expired task,
// cancels its work and wakes a tasks/result waiter.
TEST(TaskStoreTest, AReaperPurgesAQuietStoreAtExpiry) {
  TaskLimits limits;
  limits.min_ttl_ms = 1;
  TaskStore store(limits);
  std::promise<std::vector<std::string>> purged;
  store.add_on_purge([&](const std::vector<std::string>& ids) { purged.set_value(ids); });
  TaskReaper reaper(store);
  std::shared_ptr<CancelToken> token;
  auto t = store.create("", "t", 200, &token);
  ASSERT_TRUE(t.ok());
  auto waited =
      std::async(std::launch::async, [&] { return store.wait_terminal("", t->id, nullptr); });
  auto ids = purged.get_future();
  ASSERT_EQ(ids.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(ids.get(), std::vector<std::string>{t->id});
  EXPECT_TRUE(token->cancelled());
  EXPECT_EQ(store.size(), 0u);
  ASSERT_EQ(waited.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_FALSE(waited.get());
}

TEST(TaskStoreTest, Iso8601) {
  EXPECT_EQ(iso8601_ms(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(iso8601_ms(1'785'000'000'123), "2026-07-25T17:20:00.123Z");
}

}  // namespace
}  // namespace sandcastle::mcp
