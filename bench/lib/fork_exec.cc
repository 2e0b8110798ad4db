// The C floor of `execute_command /bin/true` (bench/tools_bench.mjs): for
// each line read on stdin, one fork + execv of argv[1..] + waitpid, and the
// time that took, in microseconds, on a line of stdout ("error" if the
// program did not exit 0). Driven one line at a time, so that its samples
// interleave with the server's and the machine's drift hits both alike.
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>

namespace {

double now_us() {
  struct timespec t {};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) / 1e3;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs("usage: fork_exec PROGRAM [ARG...]\n", stderr);
    return 2;
  }
  char line[64];
  while (std::fgets(line, sizeof line, stdin)) {
    const double start = now_us();
    const pid_t pid = fork();
    if (pid == 0) {
      execv(argv[1], argv + 1);
      _exit(127);
    }
    int status = 0;
    const bool ok =
        pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    const double took = now_us() - start;
    if (ok)
      std::printf("%.3f\n", took);
    else
      std::puts("error");
    std::fflush(stdout);
  }
  return 0;
}
