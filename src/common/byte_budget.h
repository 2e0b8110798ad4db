// ByteBudget: a server-wide allowance of bytes that callers reserve before
// they hold large buffers whose size somebody else decides (a sandbox's
// files), so the sum held at once has a stated bound whatever one tenant
// does. A reservation that does not fit waits for others to be released,
// up to a deadline; one larger than the whole budget never fits.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>

namespace sandcastle {

class ByteBudget {
 public:
  // Returns its bytes when destroyed.
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& o) noexcept : budget_(o.budget_), bytes_(o.bytes_) { o.budget_ = nullptr; }
    Lease& operator=(Lease&& o) noexcept {
      if (this != &o) {
        release();
        budget_ = o.budget_;
        bytes_ = o.bytes_;
        o.budget_ = nullptr;
      }
      return *this;
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { release(); }
    std::uint64_t bytes() const { return budget_ ? bytes_ : 0; }

   private:
    friend class ByteBudget;
    Lease(ByteBudget* b, std::uint64_t n) : budget_(b), bytes_(n) {}
    void release() {
      if (budget_) budget_->give_back(bytes_);
      budget_ = nullptr;
    }
    ByteBudget* budget_ = nullptr;
    std::uint64_t bytes_ = 0;
  };

  explicit ByteBudget(std::uint64_t total) : total_(total) {}
  std::uint64_t total() const { return total_; }

  // A lease of n bytes, or nothing if they did not become free in time.
  std::optional<Lease> reserve(std::uint64_t n, std::chrono::milliseconds wait) {
    if (n > total_) return std::nullopt;
    std::unique_lock l(mu_);
    if (!cv_.wait_for(l, wait, [&] { return used_ + n <= total_; })) return std::nullopt;
    used_ += n;
    return Lease(this, n);
  }

  std::uint64_t used() const {
    std::lock_guard l(mu_);
    return used_;
  }

 private:
  void give_back(std::uint64_t n) {
    {
      std::lock_guard l(mu_);
      used_ -= n;
    }
    cv_.notify_all();
  }

  const std::uint64_t total_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::uint64_t used_ = 0;
};

}  // namespace sandcastle
