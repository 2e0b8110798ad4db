// The save_sandbox wire (layer_export.h): the request init decodes and the
// summary the server decodes from the sandbox's worker (hostile bytes).
#include "sandbox/native/layer_export.h"

#include <gtest/gtest.h>

namespace sandcastle::sandbox::native {
namespace {

TEST(LayerExportWire, RequestRoundTripAndControlKind) {
  const std::string payload = encode(LayerExportWire{1ull << 33, 77});
  const std::string message = encode_control(ControlKind::kSaveLayer, payload);
  auto m = decode_control(message);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->kind, ControlKind::kSaveLayer);
  auto w = decode_layer_export(m->payload);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->max_bytes, 1ull << 33);
  EXPECT_EQ(w->max_entries, 77u);
  EXPECT_FALSE(decode_layer_export(payload + "x"));
  EXPECT_FALSE(decode_layer_export(payload.substr(0, 12)));
}

TEST(LayerExportWire, SummaryRoundTrip) {
  LayerSummaryWire s;
  s.err = 27;
  s.message = "/workspace/big (9 bytes) would make the layer larger";
  s.entries = 5;
  s.bytes = 10240;
  s.skipped = 1;
  s.unreadable = 2;
  s.skipped_paths = {"/workspace/fifo", "/etc/secret"};
  s.whole_root = true;
  auto d = decode_layer_summary(encode(s));
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->err, 27);
  EXPECT_EQ(d->message, s.message);
  EXPECT_EQ(d->entries, 5u);
  EXPECT_EQ(d->bytes, 10240u);
  EXPECT_EQ(d->skipped, 1u);
  EXPECT_EQ(d->unreadable, 2u);
  EXPECT_EQ(d->skipped_paths, s.skipped_paths);
  EXPECT_TRUE(d->whole_root);
}

TEST(LayerExportWire, SummaryFromTheSandboxIsBounded) {
  LayerSummaryWire s;
  s.skipped_paths.assign(65, "/x");  // more than any worker sends
  EXPECT_FALSE(decode_layer_summary(encode(s)));
  s.skipped_paths.assign(3, "/x");
  const std::string ok = encode(s);
  EXPECT_TRUE(decode_layer_summary(ok));
  EXPECT_FALSE(decode_layer_summary(ok + "trailing"));
  EXPECT_FALSE(decode_layer_summary(ok.substr(0, ok.size() - 1)));
  // A string length past the message is refused, not read.
  std::string bad = ok;
  bad[4] = '\xff';
  bad[5] = '\xff';
  EXPECT_FALSE(decode_layer_summary(bad));
}

}  // namespace
}  // namespace sandcastle::sandbox::native
