#include "mcp/task_store.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <ctime>

#include "common/crypto.h"
#include "mcp/pagination.h"

namespace sandcastle::mcp {

namespace {

int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The reaper re-reads the clock at least this often: the store's clock is
// the wall clock, which may jump.
constexpr int64_t kMaxReapSleepMs = 60'000;

std::string mib(size_t bytes) {
  return std::to_string(bytes >> 20) + " MiB";
}

constexpr std::array<const char*, 5> kStatusNames = {"working", "input_required", "completed",
                                                     "failed", "cancelled"};

}  // namespace

const char* task_status_name(TaskStatus s) {
  return kStatusNames.at(static_cast<size_t>(s));
}

std::optional<TaskStatus> parse_task_status(const std::string& name) {
  for (size_t i = 0; i < kStatusNames.size(); ++i)
    if (name == kStatusNames.at(i)) return static_cast<TaskStatus>(i);
  return std::nullopt;
}

std::string iso8601_ms(int64_t ms) {
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  std::array<char, 32> buf{};
  size_t n = std::strftime(buf.data(), buf.size(), "%Y-%m-%dT%H:%M:%S", &tm);
  std::array<char, 8> frac{};
  (void)std::snprintf(frac.data(), frac.size(), ".%03dZ", static_cast<int>(ms % 1000));
  return std::string(buf.data(), n) + frac.data();
}

TaskStore::TaskStore(TaskLimits limits, Clock clock) : limits_(limits), clock_(std::move(clock)) {
  if (!clock_) clock_ = wall_ms;
}

Result<Task> TaskStore::create(const std::string& owner, const std::string& tool,
                               std::optional<int64_t> ttl_ms, std::shared_ptr<CancelToken>* token) {
  purge_expired();
  std::lock_guard lock(mu_);
  size_t mine = 0;
  for (const auto& [_, r] : tasks_)
    if (r.task.owner == owner) ++mine;
  if (mine >= limits_.max_per_owner)
    return Error::make(
        ErrorCode::kResourceExhausted,
        "this caller already has " + std::to_string(mine) + " tasks (the limit is " +
            std::to_string(limits_.max_per_owner) +
            "); a task counts until its TTL ends, finished or cancelled: wait for them to "
            "expire, or call without a task");
  if (tasks_.size() >= limits_.max_total)
    return Error::make(
        ErrorCode::kResourceExhausted,
        "the server holds " + std::to_string(tasks_.size()) + " tasks (its limit); retry later");
  int64_t ttl = ttl_ms && *ttl_ms > 0 ? std::clamp(*ttl_ms, limits_.min_ttl_ms, limits_.max_ttl_ms)
                                      : limits_.default_ttl_ms;
  Record r;
  r.task.id = crypto::hex(crypto::random_bytes(16));  // unguessable: ids are capabilities too
  r.task.owner = owner;
  r.task.tool = tool;
  r.task.created_ms = r.task.updated_ms = now();
  r.task.ttl_ms = ttl;
  r.token = std::make_shared<CancelToken>();
  r.seq = next_seq_++;
  if (token) *token = r.token;
  Task out = r.task;
  tasks_.emplace(out.id, std::move(r));
  changed_.notify_all();  // the reaper's next expiry may be this one
  return out;
}

bool TaskStore::contains(const std::string& id) const {
  std::lock_guard lock(mu_);
  return tasks_.count(id) != 0;
}

TaskStore::Record* TaskStore::find_locked(const std::string& owner, const std::string& id) {
  auto it = tasks_.find(id);
  if (it == tasks_.end() || it->second.task.owner != owner) return nullptr;
  if (now() >= it->second.task.created_ms + it->second.task.ttl_ms)
    return nullptr;  // expired, purge pending
  return &it->second;
}

std::optional<Task> TaskStore::get(const std::string& owner, const std::string& id) {
  std::lock_guard lock(mu_);
  Record* r = find_locked(owner, id);
  if (!r) return std::nullopt;
  return r->task;
}

std::shared_ptr<CancelToken> TaskStore::token(const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = tasks_.find(id);
  return it == tasks_.end() ? nullptr : it->second.token;
}

bool TaskStore::finish(const std::string& id, TaskStatus status, json result, json error,
                       size_t bytes) {
  Task done;
  {
    std::lock_guard lock(mu_);
    auto it = tasks_.find(id);
    if (it == tasks_.end() || is_terminal(it->second.task.status)) return false;
    done = finish_locked(it->second, status, std::move(result), std::move(error), bytes);
  }
  for (const auto& fn : on_terminal_) fn(done);
  return true;
}

std::optional<std::string> TaskStore::over_budget_locked(const std::string& owner,
                                                         size_t bytes) const {
  auto mine = owner_bytes_.find(owner);
  const size_t owner_bytes = mine == owner_bytes_.end() ? 0 : mine->second;
  std::string which;
  if (owner_bytes + bytes > limits_.max_owner_result_bytes)
    which = "this caller's finished tasks keep " + mib(owner_bytes) + " of at most " +
            mib(limits_.max_owner_result_bytes);
  else if (total_bytes_ + bytes > limits_.max_total_result_bytes)
    which = "the server's finished tasks keep " + mib(total_bytes_) + " of at most " +
            mib(limits_.max_total_result_bytes);
  else
    return std::nullopt;
  return "result too large for the server's task budget (" + which +
         " until their TTL ends); read results sooner with a shorter ttl, or call without a task";
}

Task TaskStore::finish_locked(Record& r, TaskStatus status, json result, json error, size_t bytes) {
  Task& t = r.task;
  if (bytes > 0) {
    if (auto why = over_budget_locked(t.owner, bytes)) {
      status = TaskStatus::kFailed;
      result = nullptr;
      error = json{{"code", rpc_error::kInternalError}, {"message", *why}};
    } else {
      r.bytes = bytes;
      owner_bytes_[t.owner] += bytes;
      total_bytes_ += bytes;
    }
  }
  t.status = status;
  t.updated_ms = now();
  t.result = std::move(result);
  t.error = std::move(error);
  t.input_requests = nullptr;
  r.responses = json::object();
  r.state.reset();
  changed_.notify_all();
  return t;
}

void TaskStore::release_locked(const Record& r) {
  if (r.bytes == 0) return;
  total_bytes_ -= r.bytes;
  auto mine = owner_bytes_.find(r.task.owner);
  if (mine == owner_bytes_.end()) return;
  mine->second -= r.bytes;
  if (mine->second == 0) owner_bytes_.erase(mine);
}

bool TaskStore::complete(const std::string& id, json result) {
  const size_t bytes = result.dump().size();
  if (bytes > limits_.max_result_bytes)
    return fail(id, rpc_error::kInternalError,
                "the tool's result is larger than the " + mib(limits_.max_result_bytes) +
                    " a task keeps; call it without a task or ask for less output");
  return finish(id, TaskStatus::kCompleted, std::move(result), nullptr, bytes);
}

bool TaskStore::fail(const std::string& id, int code, const std::string& message) {
  return finish(id, TaskStatus::kFailed, nullptr, json{{"code", code}, {"message", message}});
}

bool TaskStore::park(const std::string& id, json input_requests, std::optional<json> state) {
  std::lock_guard lock(mu_);
  auto it = tasks_.find(id);
  if (it == tasks_.end() || is_terminal(it->second.task.status)) return false;
  it->second.task.status = TaskStatus::kInputRequired;
  it->second.task.input_requests = std::move(input_requests);
  it->second.task.updated_ms = now();
  it->second.state = std::move(state);
  changed_.notify_all();
  return true;
}

bool TaskStore::set_message(const std::string& id, const std::string& message) {
  std::lock_guard lock(mu_);
  auto it = tasks_.find(id);
  if (it == tasks_.end() || is_terminal(it->second.task.status)) return false;
  it->second.task.status_message = message;
  it->second.task.updated_ms = now();
  return true;
}

TaskStore::Update TaskStore::update(const std::string& owner, const std::string& id,
                                    const json& answers, json* responses,
                                    std::optional<json>* state) {
  std::lock_guard lock(mu_);
  Record* r = find_locked(owner, id);
  if (!r) return Update::kUnknown;
  if (r->task.status != TaskStatus::kInputRequired || !answers.is_object())
    return Update::kNotWaiting;
  json& pending = r->task.input_requests;
  for (const auto& [key, value] : answers.items()) {
    if (!pending.is_object() || !pending.contains(key)) continue;  // unknown or already answered
    r->responses[key] = value;
    pending.erase(key);
  }
  r->task.updated_ms = now();
  if (pending.is_object() && !pending.empty()) return Update::kPending;
  r->task.status = TaskStatus::kWorking;
  r->task.input_requests = nullptr;
  *responses = r->responses;
  *state = r->state;
  changed_.notify_all();
  return Update::kResume;
}

TaskStore::Cancel TaskStore::cancel(const std::string& owner, const std::string& id) {
  std::shared_ptr<CancelToken> token;
  Task done;
  {
    std::lock_guard lock(mu_);
    Record* r = find_locked(owner, id);
    if (!r) return Cancel::kUnknown;
    if (is_terminal(r->task.status)) return Cancel::kAlreadyTerminal;
    token = r->token;
    // One critical section: a task that completes meanwhile keeps its own message.
    r->task.status_message = "cancelled by the client";
    done = finish_locked(*r, TaskStatus::kCancelled, nullptr, nullptr, 0);
  }
  for (const auto& fn : on_terminal_) fn(done);
  // Marked first, so the work's own outcome (it ends because of the token) is dropped.
  token->cancel();
  return Cancel::kCancelled;
}

Result<TaskStore::Page> TaskStore::list(const std::string& owner,
                                        const std::optional<std::string>& cursor,
                                        size_t page_size) {
  purge_expired();
  uint64_t after = 0;
  if (cursor) {
    auto at = decode_cursor("tasks", *cursor);
    if (!at)
      return Error::make(ErrorCode::kInvalidArgument,
                         "Invalid cursor: pass back a nextCursor exactly as received");
    after = *at;
  }
  std::lock_guard lock(mu_);
  std::map<uint64_t, const Task*> mine;  // by creation order
  for (const auto& [_, r] : tasks_)
    if (r.task.owner == owner && r.seq > after) mine.emplace(r.seq, &r.task);
  Page page;
  uint64_t last = after;
  for (const auto& [seq, t] : mine) {
    if (page.tasks.size() == page_size) {
      page.next_cursor = encode_cursor("tasks", last);  // resumes after the last task returned
      break;
    }
    page.tasks.push_back(*t);
    last = seq;
  }
  return page;
}

std::optional<Task> TaskStore::wait_terminal(const std::string& owner, const std::string& id,
                                             CancelToken* stop) {
  size_t sub = 0;
  if (stop)
    sub = stop->on_cancel([this] {
      std::lock_guard lock(mu_);
      changed_.notify_all();
    });
  std::optional<Task> out;
  {
    std::unique_lock lock(mu_);
    auto done = [&] {
      Record* r = find_locked(owner, id);
      if (!r || is_terminal(r->task.status) || (stop && stop->cancelled())) {
        if (r) out = r->task;
        return true;
      }
      return false;
    };
    // Woken by changes, and at the task's expiry even if no reaper runs.
    while (!done()) {
      const Record& r = tasks_.at(id);
      const int64_t left = r.task.created_ms + r.task.ttl_ms - now();
      changed_.wait_for(lock,
                        std::chrono::milliseconds(std::clamp<int64_t>(left, 1, kMaxReapSleepMs)));
    }
  }
  if (stop && sub) stop->unsubscribe(sub);
  return out;
}

std::vector<std::shared_ptr<CancelToken>> TaskStore::purge_locked(std::vector<std::string>* ids) {
  std::vector<std::shared_ptr<CancelToken>> running;
  const int64_t t = now();
  for (auto it = tasks_.begin(); it != tasks_.end();) {
    if (t < it->second.task.created_ms + it->second.task.ttl_ms) {
      ++it;
      continue;
    }
    if (!is_terminal(it->second.task.status)) running.push_back(it->second.token);
    ids->push_back(it->first);
    release_locked(it->second);
    it = tasks_.erase(it);
  }
  if (!ids->empty()) changed_.notify_all();
  return running;
}

void TaskStore::after_purge(std::vector<std::shared_ptr<CancelToken>> tokens,
                            const std::vector<std::string>& ids) {
  for (auto& tok : tokens) tok->cancel();  // outside the lock: callbacks may take it
  if (!ids.empty())
    for (const auto& fn : on_purge_) fn(ids);
}

size_t TaskStore::purge_expired() {
  std::vector<std::string> ids;
  std::vector<std::shared_ptr<CancelToken>> tokens;
  {
    std::lock_guard lock(mu_);
    tokens = purge_locked(&ids);
  }
  after_purge(std::move(tokens), ids);
  return ids.size();
}

std::optional<int64_t> TaskStore::next_expiry_locked() const {
  std::optional<int64_t> next;
  for (const auto& [_, r] : tasks_) {
    const int64_t at = r.task.created_ms + r.task.ttl_ms;
    if (!next || at < *next) next = at;
  }
  return next;
}

void TaskStore::reap(CancelToken& stop) {
  const size_t sub = stop.on_cancel([this] {
    std::lock_guard lock(mu_);
    changed_.notify_all();
  });
  std::unique_lock lock(mu_);
  while (!stop.cancelled()) {
    const auto next = next_expiry_locked();
    const int64_t wait = next ? *next - now() : kMaxReapSleepMs;
    if (wait > 0) {
      changed_.wait_for(lock, std::chrono::milliseconds(std::min(wait, kMaxReapSleepMs)));
      continue;
    }
    std::vector<std::string> ids;
    auto tokens = purge_locked(&ids);
    lock.unlock();
    after_purge(std::move(tokens), ids);
    lock.lock();
  }
  lock.unlock();
  if (sub) stop.unsubscribe(sub);
}

size_t TaskStore::size() const {
  std::lock_guard lock(mu_);
  return tasks_.size();
}

void TaskStore::restore(Task t) {
  if (!is_terminal(t.status) || now() >= t.created_ms + t.ttl_ms) return;
  const size_t bytes = t.result.is_null() ? 0 : t.result.dump().size();
  std::lock_guard lock(mu_);
  if (tasks_.size() >= limits_.max_total || tasks_.count(t.id)) return;
  if (over_budget_locked(t.owner, bytes)) return;  // oldest first: the newest are dropped
  Record r;
  r.token = std::make_shared<CancelToken>();
  r.seq = next_seq_++;
  r.bytes = bytes;
  owner_bytes_[t.owner] += bytes;
  total_bytes_ += bytes;
  std::string id = t.id;
  r.task = std::move(t);
  tasks_.emplace(id, std::move(r));
  changed_.notify_all();
}

}  // namespace sandcastle::mcp
