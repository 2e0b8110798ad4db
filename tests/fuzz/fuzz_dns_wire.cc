// Fuzzes the DNS wire parser the sandbox's DNS stub and resolver use on
// hostile bytes (net/dns_wire.h): a parse must stay within its limits, and
// every reply built for a parsed query must parse back to the same id and
// question within the size the client accepts.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>
#include <vector>

#include "net/dns_wire.h"

namespace {

using namespace sandcastle::net;

void check_reply(const dns::Message& q, const std::vector<std::uint8_t>& wire, std::size_t limit) {
  if (wire.size() > limit && wire.size() > dns::kClassicUdpLimit) std::abort();
  auto r = dns::parse(wire);
  if (!r) std::abort();
  if (r->id != q.id || !r->is_response()) std::abort();
  if (r->question.wire_name != q.question.wire_name) std::abort();
  if (r->question.qtype != q.question.qtype) std::abort();
  for (const auto& a : r->answers)
    if (a.ttl > dns::kMaxAnswerTtl) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::uint8_t> in(data, size);
  auto m = dns::parse(in);
  if (!m) {
    (void)dns::peek_id(in);
    return 0;
  }
  if (m->question.wire_name.size() > dns::kMaxWireName) std::abort();
  if (m->answers.size() > dns::kMaxRecordsPerSection) std::abort();
  if (m->ede_text.size() > 256) std::abort();
  std::vector<IpAddr> addrs;
  for (const auto& a : m->answers)
    if (a.address) addrs.push_back(*a.address);
  addrs.push_back(IpAddr::v4({198, 51, 100, 2}));
  const std::size_t limit = dns::reply_limit(*m, false);
  check_reply(*m, dns::build_answer(*m, addrs, 3600, limit), limit);
  check_reply(*m, dns::build_refused(*m, dns::ede::kBlocked, "blocked"), limit);
  check_reply(*m, dns::build_nodata(*m), limit);
  check_reply(*m, dns::build_error(*m, dns::Rcode::kServFail), limit);
  return 0;
}
