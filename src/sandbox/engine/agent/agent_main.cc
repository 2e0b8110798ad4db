// sandcastle-agent: the helper bind-mounted into every engine container
// (agent_wire.h says why it exists and what it speaks). Static, so it runs
// on any image; it needs no capability and no particular uid.
//
//   sandcastle-agent init    the container's PID 1: reaps, leaves on SIGTERM
//   sandcastle-agent serve   the protocol on stdin/stdout, logs on stderr
#include <cstdio>
#include <cstring>

#include "sandbox/engine/agent/init_mode.h"
#include "sandbox/engine/agent/serve_loop.h"

int main(int argc, char** argv) {
  using namespace sandcastle::sandbox::engine::agent;
  if (argc == 2 && std::strcmp(argv[1], "init") == 0) return run_init();
  if (argc == 2 && std::strcmp(argv[1], "serve") == 0) return run_serve();
  (void)std::fprintf(stderr, "usage: sandcastle-agent init|serve\n");
  return 2;
}
