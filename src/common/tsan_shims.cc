// ThreadSanitizer builds only (`make build-tsan`); empty otherwise.
//
// libstdc++ implements std::timed_mutex::try_lock_for with
// pthread_mutex_clocklock (glibc 2.30+), which the TSan runtime of GCC 12 and
// clang 14 does not intercept: TSan never sees the lock taken, reports
// "unlock of an unlocked mutex" at the unlock, and orders nothing after the
// acquisition (so it could report false races on what the mutex guards).
// This definition takes precedence over glibc's and locks through
// pthread_mutex_timedlock, which TSan does intercept. Not a suppression: the
// lock stays fully visible to TSan.
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SANDCASTLE_TSAN_BUILD 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define SANDCASTLE_TSAN_BUILD 1
#endif

#ifdef SANDCASTLE_TSAN_BUILD
#include <pthread.h>
#include <time.h>

#include <cerrno>

extern "C" int pthread_mutex_clocklock(pthread_mutex_t* mutex, clockid_t clock,
                                       const struct timespec* abstime) noexcept {
  if (clock == CLOCK_REALTIME) return pthread_mutex_timedlock(mutex, abstime);
  if (clock != CLOCK_MONOTONIC) return EINVAL;
  // The same distance from now, on the realtime clock timedlock measures.
  constexpr long long kNs = 1'000'000'000;
  struct timespec mono {}, real {};
  clock_gettime(CLOCK_MONOTONIC, &mono);
  clock_gettime(CLOCK_REALTIME, &real);
  long long left = (abstime->tv_sec - mono.tv_sec) * kNs + (abstime->tv_nsec - mono.tv_nsec);
  if (left < 0) left = 0;
  long long at = real.tv_sec * kNs + real.tv_nsec + left;
  struct timespec deadline {};
  deadline.tv_sec = static_cast<time_t>(at / kNs);
  deadline.tv_nsec = static_cast<long>(at % kNs);
  return pthread_mutex_timedlock(mutex, &deadline);
}
#endif
