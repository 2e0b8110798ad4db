// sandcastle: an MCP server that runs code in sandboxes (service/app.h).
#include "service/app.h"

int main(int argc, char** argv) {
  return sandcastle::service::run_app(argc, argv);
}
