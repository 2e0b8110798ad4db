#include "mcp/task_store.h"

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
                               std::optional<int64_t> ttl_ms) {
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
            "); wait for them to expire or cancel running ones, or call without a task");
  if (tasks_.size() >= limits_.max_total)
    return Error::make(
        ErrorCode::kResourceExhausted,
        "the server holds " + std::to_string(tasks_.size()) + " tasks (its limit); retry later");
  int64_t ttl =
      ttl_ms && *ttl_ms > 0 ? std::min(*ttl_ms, limits_.max_ttl_ms) : limits_.default_ttl_ms;
  Record r;
  r.task.id = crypto::hex(crypto::random_bytes(16));  // unguessable: ids are capabilities too
  r.task.owner = owner;
  r.task.tool = tool;
  r.task.created_ms = r.task.updated_ms = now();
  r.task.ttl_ms = ttl;
  r.token = std::make_shared<CancelToken>();
  r.seq = next_seq_++;
  Task out = r.task;
  tasks_.emplace(out.id, std::move(r));
  return out;
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

bool TaskStore::finish(const std::string& id, TaskStatus status, json result, json error) {
  Task done;
  {
    std::lock_guard lock(mu_);
    auto it = tasks_.find(id);
    if (it == tasks_.end() || is_terminal(it->second.task.status)) return false;
    Task& t = it->second.task;
    t.status = status;
    t.updated_ms = now();
    t.result = std::move(result);
    t.error = std::move(error);
    t.input_requests = nullptr;
    it->second.responses = json::object();
    it->second.state.reset();
    done = t;
    changed_.notify_all();
  }
  for (const auto& fn : on_terminal_) fn(done);
  return true;
}

bool TaskStore::complete(const std::string& id, json result) {
  if (result.dump().size() > limits_.max_result_bytes)
    return fail(id, rpc_error::kInternalError,
                "the tool's result is larger than the " +
                    std::to_string(limits_.max_result_bytes >> 20) +
                    " MiB a task keeps; call it without a task or ask for less output");
  return finish(id, TaskStatus::kCompleted, std::move(result), nullptr);
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
  {
    std::lock_guard lock(mu_);
    Record* r = find_locked(owner, id);
    if (!r) return Cancel::kUnknown;
    if (is_terminal(r->task.status)) return Cancel::kAlreadyTerminal;
    token = r->token;
    r->task.status_message = "cancelled by the client";
  }
  // Marked first, so the work's own outcome (it ends because of the token) is dropped.
  finish(id, TaskStatus::kCancelled, nullptr, nullptr);
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
    changed_.wait(lock, [&] {
      Record* r = find_locked(owner, id);
      if (!r || is_terminal(r->task.status) || (stop && stop->cancelled())) {
        if (r) out = r->task;
        return true;
      }
      return false;
    });
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

size_t TaskStore::size() const {
  std::lock_guard lock(mu_);
  return tasks_.size();
}

void TaskStore::restore(Task t) {
  if (!is_terminal(t.status) || now() >= t.created_ms + t.ttl_ms) return;
  std::lock_guard lock(mu_);
  if (tasks_.size() >= limits_.max_total || tasks_.count(t.id)) return;
  Record r;
  r.token = std::make_shared<CancelToken>();
  r.seq = next_seq_++;
  std::string id = t.id;
  r.task = std::move(t);
  tasks_.emplace(id, std::move(r));
}

}  // namespace sandcastle::mcp
