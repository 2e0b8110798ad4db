// sandcastle: an MCP server that runs code in sandboxes (app/app.h).
#include "app/app.h"

int main(int argc, char** argv) {
  return sandcastle::app::run_app(argc, argv);
}
