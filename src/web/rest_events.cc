// GET /api/v1/events: the caller's sandboxes, live, over SSE. A snapshot
// first, then upsert / remove as the service's event feed reports them, and
// every usage_interval the usage of the sandboxes whose numbers changed (none:
// nothing is sent). One ticker thread serves every open stream, asking the
// service once per owner per tick for a turn of at most kSamplesPerTick of
// its sandboxes; a comment line keeps quiet streams open.
#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <map>
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
  void snapshot(service::Sandboxes& svc) {
    write(sse_event("snapshot", json{{"sandboxes", svc.list(caller)}}));
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

struct RestApi::Events {
  std::map<std::string, std::size_t> cursor;  // per owner: where the next tick starts (ticker only)
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
      std::vector<std::shared_ptr<EventStream>> live = streams;
      lock.unlock();
      tick(*svc, live, keepalive);
      lock.lock();
    }
  }

  void tick(service::Sandboxes& svc, const std::vector<std::shared_ptr<EventStream>>& live,
            std::chrono::milliseconds keepalive) {
    std::map<std::string, std::vector<service::UsageSample>> by_owner;
    for (const auto& s : live) {
      if (by_owner.count(s->owner)) continue;
      std::size_t& at = cursor[s->owner];
      std::size_t total = 0;
      by_owner[s->owner] = svc.usage_some(s->owner, at, kSamplesPerTick, &total);
      at = at + kSamplesPerTick >= total ? 0 : at + kSamplesPerTick;
    }
    std::erase_if(cursor, [&](const auto& kv) { return !by_owner.count(kv.first); });
    const auto now = std::chrono::steady_clock::now();
    for (const auto& s : live) {
      std::lock_guard lock(s->mu);
      if (s->closed) continue;
      json samples = json::array();
      // `last` keeps what the client has: this tick's turn updates its part
      // (a removed sandbox leaves it with its remove event).
      for (const auto& u : by_owner[s->owner]) {
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
      if (!samples.empty()) {
        s->write(sse_event("usage", json{{"samples", samples}}));
      } else if (now - s->last_write >= keepalive) {
        s->write(": keep-alive\n\n");
      }
    }
  }

  void shutdown() {
    std::vector<std::shared_ptr<EventStream>> live;
    {
      std::lock_guard lock(mu);
      stop = true;
      live.swap(streams);
    }
    cv.notify_all();
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
        s->snapshot(*svc);
        for (const auto& u : svc->usage_all(s->owner)) s->last[u.sandbox_id] = u;
      }
      // Not under s->mu: the ticker takes its own lock, then each stream's.
      events_->add(s, svc, options_.usage_interval, options_.keepalive);
    });
  });
}

}  // namespace sandcastle::web
