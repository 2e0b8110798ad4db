#include "common/log.h"

int main() {
  sandcastle::init_logging("info");
  return 0;
}
