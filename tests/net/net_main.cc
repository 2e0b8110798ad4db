// net_tests: the network-policy tests that need a world of their own
// (net_world.h). The namespaces are entered here, before gtest or anything
// else can start a thread (unshare(CLONE_NEWNS) refuses a threaded caller);
// without root or `ip` every test is skipped and says why.
#include <gtest/gtest.h>

#include <cstdio>

#include "net_world.h"

int main(int argc, char** argv) {
  using sandcastle::nettest::NetWorld;
  ::testing::InitGoogleTest(&argc, argv);
  if (auto s = NetWorld::enter_private_namespaces(); !s) {
    (void)std::fprintf(stderr, "net_tests: skipping every test: %s\n", s.error().message().c_str());
    NetWorld::set_global(nullptr, "no net_tests world: " + s.error().message(), false);
  } else if (auto w = NetWorld::build(SANDCASTLE_SOURCE_DIR); !w) {
    (void)std::fprintf(stderr, "net_tests: could not build the world: %s\n",
                       w.error().message().c_str());
    NetWorld::set_global(nullptr, "the net_tests world failed: " + w.error().message(), true);
  } else {
    NetWorld::set_global(std::move(*w), "", false);
  }
  int rc = RUN_ALL_TESTS();
  NetWorld::reset_global();
  return rc;
}
