// Fuzzes what comes back over a sandbox's init channel (sandbox/native/
// wire.h), each a record written by a process inside the sandbox: the
// supervisor's ExecReport, the file worker's replies and listing entries
// (file_wire.h), init's fixed-size InitStatus and the exec child's error
// record (i32 errno + string step), as supervisor.cc, file_client.cc and
// spawn.cc read them. The first byte picks the record.
// Decoded records must re-encode to the same bytes, and the error the server
// would make of any errno and step must format.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "common/result.h"
#include "sandbox/native/file_wire.h"
#include "sandbox/native/wire.h"

namespace {

using namespace sandcastle::sandbox::native;

void describe(const std::string& step, std::int32_t err) {
  const std::string m = sandcastle::Error::from_errno(step, err).message();
  if (m.size() < step.size()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 4) {
    case 0:
      if (auto rep = decode_report(in)) {
        if (encode(*rep) != in) std::abort();
        if (rep->kind == ReportKind::kSetupError) describe(rep->step, rep->err);
      }
      break;
    case 1:
      if (auto rep = decode_file_reply(in)) {
        if (encode(*rep) != in || rep->err < 0) std::abort();
        if (rep->err != 0) describe(rep->step, rep->err);
      } else if (auto e = decode_file_entry(in)) {
        // An entry's name never leads out of the listed directory.
        const std::string n = "/" + e->name + "/";
        if (encode(*e) != in || e->name.front() == '/' || n.find("/../") != std::string::npos ||
            n.find("/./") != std::string::npos || n.find("//") != std::string::npos)
          std::abort();
      }
      break;
    case 2: {
      // spawn.cc's read_init_status: the record as read, NUL-terminated.
      InitStatus st{};
      std::memcpy(&st, in.data(), std::min(in.size(), sizeof st));
      st.step[sizeof st.step - 1] = '\0';
      if (std::strlen(st.step) >= sizeof st.step) std::abort();
      if (st.err != 0) describe(st.step, st.err);
      break;
    }
    case 3: {
      // supervisor.cc: the exec child's setup error.
      WireReader r(in);
      std::int32_t err = r.i32();
      std::string step = r.str();
      if (r.ok()) describe(step, err);
      break;
    }
  }
  return 0;
}
