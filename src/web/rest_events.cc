// GET /api/v1/events: the caller's sandboxes, live, over SSE. A snapshot
// first, then upsert / remove as the service's event feed reports them, and
// every usage_interval the usage of the sandboxes whose numbers changed (none:
// nothing is sent). One ticker thread serves every open stream: per tick it
// starts, for each owner with a stream, a turn on the shared pool that
// samples at most kSamplesPerTick of its sandboxes; a comment line keeps
// quiet streams open.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <map>
#include <set>
#include <thread>

#include "common/thread_pool.h"
#include "web/rest_internal.h"

namespace sandcastle::web {

using namespace rest;

namespace {

struct EventStream {
  std::shared_ptr<transport::http::Exchange> ex;
  std::string owner;
  service::Caller caller;
  std::mutex mu;  // one writer at a time: snapshot, drains and ticks keep their order
  std::unique_ptr<service::SandboxEvents::Subscription> sub;
  std::shared_ptr<void> slot;  // of the owner's open streams; released when it closes
  std::map<std::string, service::UsageSample> last;
  std::chrono::steady_clock::time_point last_write = std::chrono::steady_clock::now();
  bool closed = false;

  // Called with mu held.
  void write(const std::string& s) {
    ex->write(s);
    last_write = std::chrono::steady_clock::now();
  }
  // A comment line when nothing was written for `keepalive`; mu held.
  void keep_alive_if_due(std::chrono::steady_clock::time_point now,
                         std::chrono::milliseconds keepalive) {
    if (!closed && now - last_write >= keepalive) write(": keep-alive\n\n");
  }
  // Also drops from `last` what is gone: after a resync the removals that
  // would have done it were among the lost events.
  void snapshot(service::Sandboxes& svc) {
    auto rows = svc.list(caller);
    std::set<std::string> ids;
    for (const auto& r : rows) ids.insert(r.value("sandbox_id", ""));
    std::erase_if(last, [&](const auto& kv) { return !ids.count(kv.first); });
    write(sse_event("snapshot", json{{"sandboxes", std::move(rows)}}));
  }
  void drain(service::Sandboxes& svc) {
    std::lock_guard lock(mu);
    if (closed || !sub) return;
    auto batch = sub->drain();
    if (batch.resync) snapshot(svc);
    for (const auto& e : batch.events) {
      if (e.kind == service::SandboxEvent::Kind::kRemoved) {
        last.erase(e.sandbox_id);
        write(sse_event("remove", json{{"sandbox_id", e.sandbox_id}}));
      } else {
        write(sse_event("upsert", json{{"sandbox", e.sandbox}}));
      }
    }
  }
};

// Changed enough to redraw, against what this stream last sent: an idle
// sandbox's init still costs a few microseconds of CPU now and then, memory
// moves by pages, and the process count blinks with the sandbox's own
// helpers; a console shows none of that.
bool changed(const service::UsageSample& sent, const service::UsageSample& now) {
  constexpr uint64_t kBytes = uint64_t{1024} * 1024;  // the console draws MiB
  auto apart = [](uint64_t x, uint64_t y) { return x > y ? x - y : y - x; };
  return std::abs(now.cpu_ms - sent.cpu_ms) >= 10.0 ||
         apart(now.memory_bytes, sent.memory_bytes) >= kBytes ||
         apart(now.disk_bytes, sent.disk_bytes) >= kBytes;
}

}  // namespace

// A tick samples at most this many sandboxes per owner, in turns: an open
// console's cost stays bounded whatever the number of sandboxes (500 are
// each sampled every 5th tick).
constexpr std::size_t kSamplesPerTick = 100;

// One owner's sampling. A turn runs on the shared pool, not on the ticker:
// a sandbox slow to answer (its file worker starved by its own programs)
// delays its owner's numbers only, never another tenant's. One turn per
// owner at a time: a tick that finds it still running skips that owner.
struct OwnerTurn {
  bool busy = false;       // guarded by Events::mu
  std::size_t cursor = 0;  // where the next turn starts (the running turn's)
};

struct RestApi::Events {
  std::map<std::string, std::shared_ptr<OwnerTurn>> turns;  // guarded by mu
  std::size_t running = 0;                                  // turns on the pool; guarded by mu
  std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  std::vector<std::shared_ptr<EventStream>> streams;  // open ones; pruned each tick
  std::thread ticker;

  void add(const std::shared_ptr<EventStream>& s, service::Sandboxes* svc,
           std::chrono::milliseconds interval, std::chrono::milliseconds keepalive) {
    std::lock_guard lock(mu);
    streams.push_back(s);
    if (!ticker.joinable())
      ticker = std::thread([this, svc, interval, keepalive] { run(svc, interval, keepalive); });
  }

  void run(service::Sandboxes* svc, std::chrono::milliseconds interval,
           std::chrono::milliseconds keepalive) {
    std::unique_lock lock(mu);
    while (!stop) {
      cv.wait_for(lock, interval, [&] { return stop; });
      if (stop) break;
      std::erase_if(streams, [](const std::shared_ptr<EventStream>& s) {
        std::lock_guard l(s->mu);
        return s->closed || s->ex->closed();
      });
      std::map<std::string, std::vector<std::shared_ptr<EventStream>>> by_owner;
      for (const auto& s : streams) by_owner[s->owner].push_back(s);
      std::erase_if(turns,
                    [&](const auto& kv) { return !kv.second->busy && !by_owner.count(kv.first); });
      for (auto& [owner, list] : by_owner) {
        auto& turn = turns[owner];
        if (!turn) turn = std::make_shared<OwnerTurn>();
        if (turn->busy) {
          keep_alive(list, keepalive);
          continue;
        }
        turn->busy = true;
        ++running;
        try {
          ElasticPool::shared().submit([this, svc, turn, streams = list, keepalive] {
            sample(*svc, *turn, streams, keepalive);
            std::lock_guard l(mu);
            turn->busy = false;
            --running;
            cv.notify_all();
          });
        } catch (const std::exception& e) {  // no thread to be had (the pids limit): next tick
          turn->busy = false;
          --running;
          spdlog::warn("live list: a usage turn could not start: {}", e.what());
        }
      }
    }
  }

  static void keep_alive(const std::vector<std::shared_ptr<EventStream>>& list,
                         std::chrono::milliseconds keepalive) {
    const auto now = std::chrono::steady_clock::now();
    for (const auto& s : list) {
      std::lock_guard lock(s->mu);
      s->keep_alive_if_due(now, keepalive);
    }
  }

  // One owner's turn: samples the next kSamplesPerTick of its sandboxes and
  // sends each of its streams what changed for it.
  static void sample(service::Sandboxes& svc, OwnerTurn& turn,
                     const std::vector<std::shared_ptr<EventStream>>& list,
                     std::chrono::milliseconds keepalive) {
    std::size_t total = 0;
    const auto got = svc.usage_some(list.front()->owner, turn.cursor, kSamplesPerTick, &total);
    turn.cursor = turn.cursor + kSamplesPerTick >= total ? 0 : turn.cursor + kSamplesPerTick;
    const auto now = std::chrono::steady_clock::now();
    for (const auto& s : list) {
      std::lock_guard lock(s->mu);
      if (s->closed) continue;
      json samples = json::array();
      // `last` keeps what the client has: this turn updates its part (a
      // removed sandbox leaves it with its remove event or a resync).
      for (const auto& u : got) {
        auto it = s->last.find(u.sandbox_id);
        if (it != s->last.end() && !changed(it->second, u)) continue;
        samples.push_back(json{{"sandbox_id", u.sandbox_id},
                               {"memory_bytes", u.memory_bytes},
                               {"peak_memory_bytes", u.peak_memory_bytes},
                               {"cpu_ms", u.cpu_ms},
                               {"processes", u.processes},
                               {"disk_bytes", u.disk_bytes}});
        s->last[u.sandbox_id] = u;
      }
      if (samples.empty())
        s->keep_alive_if_due(now, keepalive);
      else
        s->write(sse_event("usage", json{{"samples", samples}}));
    }
  }

  // Waits for the turns on the pool: they hold the service and the streams.
  // Each ends within the sandboxes' own call deadlines.
  void shutdown() {
    std::vector<std::shared_ptr<EventStream>> live;
    {
      std::unique_lock lock(mu);
      stop = true;
      live.swap(streams);
      cv.notify_all();
      cv.wait(lock, [&] { return running == 0; });
    }
    if (ticker.joinable()) ticker.join();
    for (auto& s : live) {
      std::lock_guard lock(s->mu);
      s->closed = true;
      s->sub.reset();
      s->slot.reset();
      s->ex->finish();
    }
  }
};

void RestApi::shutdown() {
  if (events_) events_->shutdown();
}

void RestApi::event_routes(Router& r) {
  events_ = std::make_shared<Events>();
  auto m = meta("The caller's sandboxes, live (SSE: snapshot, upsert, remove, usage)", "sandboxes");
  m.response_type = "text/event-stream";
  m.response_schema = nullptr;
  (void)r.add("GET", "/api/v1/events", m, [this](Call& c) {
    with_service(c, [this](Call& call, const Caller& who) {
      service::Sandboxes* svc = options_.sandboxes;
      auto slot = streams_.acquire(who.owner());
      if (!slot)
        return call.reply(too_many("this key has " + std::to_string(streams_.max()) +
                                   " event streams open (the most it may); close one first"));
      auto s = std::make_shared<EventStream>();
      s->slot = std::move(slot);
      s->ex = call.ex;
      s->caller = to_service(who);
      s->owner = s->caller.owner;
      auto headers = sse_headers();
      for (auto& h : call.cors) headers.push_back(h);
      std::weak_ptr<EventStream> weak = s;
      call.ex->on_close([weak] {
        if (auto st = weak.lock()) {
          std::lock_guard l(st->mu);
          st->closed = true;
          st->sub.reset();
          st->slot.reset();
        }
      });
      {
        std::lock_guard lock(s->mu);  // the snapshot goes first, before any drain
        if (s->closed) return;
        call.ex->start_stream(200, std::move(headers));
        // Subscribed before the snapshot is taken: nothing falls between them
        // (an event already in the snapshot is repeated: upserts are idempotent).
        s->sub = svc->events().subscribe(s->owner, [weak, svc] {
          ElasticPool::shared().submit([weak, svc] {
            if (auto st = weak.lock()) st->drain(*svc);
          });
        });
        // Usage follows in the owner's next turns (each sandbox's first
        // sample is news to this stream): nothing is sampled here, on the
        // request's thread.
        s->snapshot(*svc);
      }
      // Not under s->mu: the ticker takes its own lock, then each stream's.
      events_->add(s, svc, options_.usage_interval, options_.keepalive);
    });
  });
}

}  // namespace sandcastle::web
