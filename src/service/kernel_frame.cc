#include "service/kernel_frame.h"

#include <sys/socket.h>

#include <climits>
#include <initializer_list>

#include "common/json_parse.h"
#include "sandbox/sandbox.h"

namespace sandcastle::service {

using nlohmann::json;

namespace {

Error bad(std::string why) {
  return Error::make(ErrorCode::kInvalidArgument, std::move(why));
}

// "\"key\"", built by appending (GCC 12 warns falsely on "\"" + string).
std::string in_quotes(std::string_view key) {
  std::string s;
  s.reserve(key.size() + 2);
  s += '"';
  s += key;
  s += '"';
  return s;
}

const char* kind_of(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float: return "a number";
    default: return "not a JSON value";
  }
}

Error wrong(const std::string& field, const json& v, const char* expected) {
  return bad(in_quotes(field) + " is " + kind_of(v) + ", expected " + expected);
}

// The fields of one frame object, each looked at once and checked.
class Fields {
 public:
  Fields(json& obj, std::string type) : obj_(obj), type_(std::move(type)) {}

  // Only these keys: anything else is not our driver speaking.
  Status only(std::initializer_list<const char*> keys) const {
    for (const auto& [k, v] : obj_.items()) {
      bool known = false;
      for (const char* key : keys) known = known || k == key;
      if (!known)
        return bad("unexpected field \"" + k.substr(0, 64) + "\" in a " + type_ + " frame");
    }
    return {};
  }

  json* find(const char* key) {
    auto it = obj_.find(key);
    return it == obj_.end() ? nullptr : &*it;
  }

  Result<std::string> string(const char* key, std::size_t max_len) {
    json* v = find(key);
    if (!v) return bad("a " + type_ + " frame without \"" + key + "\"");
    if (!v->is_string()) return wrong(key, *v, "a string");
    auto& s = v->get_ref<std::string&>();
    if (s.size() > max_len)
      return bad(in_quotes(key) + " is " + std::to_string(s.size()) + " bytes, over " +
                 std::to_string(max_len));
    return std::move(s);
  }

  // An integer in [lo, hi]; nullopt when absent and not required.
  Result<std::optional<int>> integer(const char* key, long long lo, long long hi, bool required) {
    json* v = find(key);
    if (!v) {
      if (required) return bad("a " + type_ + " frame without \"" + key + "\"");
      return std::optional<int>();
    }
    if (!v->is_number_integer()) return wrong(key, *v, "an integer");
    bool in_range;
    if (v->is_number_unsigned()) {
      const auto u = v->get<std::uint64_t>();
      in_range = u <= static_cast<std::uint64_t>(hi) && static_cast<long long>(u) >= lo;
    } else {
      const auto i = v->get<std::int64_t>();
      in_range = i >= lo && i <= hi;
    }
    if (!in_range)
      return bad(in_quotes(key) + " is " + v->dump() + ", outside " + std::to_string(lo) + ".." +
                 std::to_string(hi));
    return std::optional<int>(static_cast<int>(v->get<std::int64_t>()));
  }

  // A MIME bundle: an object (its values are the kernel's business).
  Result<json> bundle(const char* key, bool required) {
    json* v = find(key);
    if (!v) {
      if (required) return bad("a " + type_ + " frame without \"" + key + "\"");
      return json();
    }
    if (!v->is_object()) return wrong(key, *v, "an object (a MIME bundle)");
    return std::move(*v);
  }

 private:
  json& obj_;
  std::string type_;
};

constexpr std::size_t kMaxId = 64;

Result<json> decode_error(json* e) {
  if (!e) return bad("a result frame with status \"error\" but no \"error\"");
  if (!e->is_object()) return wrong("error", *e, "an object");
  Fields f(*e, "error");
  if (auto ok = f.only({"name", "value", "traceback"}); !ok) return ok.error();
  for (const char* key : {"name", "value"}) {
    json* v = f.find(key);
    if (!v || !v->is_string())
      return v ? wrong(std::string("error.") + key, *v, "a string")
               : bad(std::string("an error without \"") + key + "\"");
  }
  json* tb = f.find("traceback");
  if (!tb) return bad("an error without \"traceback\"");
  if (!tb->is_array()) return wrong("error.traceback", *tb, "an array of strings");
  for (const auto& line : *tb)
    if (!line.is_string()) return wrong("error.traceback[]", line, "a string");
  return std::move(*e);
}

// [[path, size, mtime_sec, mtime_nsec], ...] and truncated: every name a
// clean relative path, every number in range.
Result<std::optional<KernelListing>> decode_listing(json* l) {
  if (!l || l->is_null()) return std::optional<KernelListing>();
  if (!l->is_object()) return wrong("listing", *l, "an object or null");
  Fields f(*l, "listing");
  if (auto ok = f.only({"files", "truncated"}); !ok) return ok.error();
  json* files = f.find("files");
  json* truncated = f.find("truncated");
  if (!files || !files->is_array())
    return files ? wrong("listing.files", *files, "an array") : bad("a listing without \"files\"");
  if (!truncated || !truncated->is_boolean())
    return truncated ? wrong("listing.truncated", *truncated, "a boolean")
                     : bad("a listing without \"truncated\"");
  if (files->size() > kMaxKernelListing)
    return bad("a listing of " + std::to_string(files->size()) + " files, over " +
               std::to_string(kMaxKernelListing));
  KernelListing out;
  out.truncated = truncated->get<bool>();
  out.count = files->size();
  for (auto& e : *files) {
    if (!e.is_array() || e.size() != 4 || !e[0].is_string() || !e[1].is_number_unsigned() ||
        !e[2].is_number_integer() || !e[3].is_number_integer())
      return bad("a listing entry is not [path, size, mtime_sec, mtime_nsec]");
    auto& name = e[0].get_ref<std::string&>();
    if (!sandbox::valid_listed_name(name))
      return bad("a listing names \"" + name.substr(0, 64) + "\", not a relative path");
    const auto nsec = e[3].get<std::int64_t>();
    if (e[2].is_number_unsigned() && e[2].get<std::uint64_t>() > INT64_MAX)
      return bad("a listing entry's mtime is out of range");
    if (nsec < 0 || nsec >= 1'000'000'000)
      return bad("a listing entry's mtime_nsec is " + std::to_string(nsec));
    out.files[std::move(name)] = {e[1].get<std::uint64_t>(), e[2].get<std::int64_t>(), nsec};
  }
  return std::optional<KernelListing>(std::move(out));
}

Result<KernelFrame> decode_object(json& msg, std::size_t bytes, std::size_t values) {
  auto type_it = msg.find("type");
  if (type_it == msg.end()) return bad("a frame without \"type\"");
  if (!type_it->is_string()) return wrong("type", *type_it, "a string");
  const std::string type = type_it->get<std::string>();
  Fields f(msg, type.size() <= 32 ? type : "?");
  if (type == "hello") {
    if (auto ok = f.only({"type", "pid", "version"}); !ok) return ok.error();
    HelloFrame h;
    auto pid = f.integer("pid", 1, INT_MAX, true);
    if (!pid) return pid.error();
    auto version = f.string("version", 256);
    if (!version) return version.error();
    h.pid = **pid;
    h.version = std::move(*version);
    return KernelFrame(std::move(h));
  }
  if (type == "stream") {
    if (auto ok = f.only({"type", "id", "name", "text"}); !ok) return ok.error();
    StreamFrame s;
    auto id = f.string("id", kMaxId);
    if (!id) return id.error();
    auto name = f.string("name", 16);
    if (!name) return name.error();
    if (*name != "stdout" && *name != "stderr")
      return bad("\"name\" is \"" + *name + "\", expected \"stdout\" or \"stderr\"");
    auto text = f.string("text", bytes);
    if (!text) return text.error();
    s.id = std::move(*id);
    s.is_stderr = *name == "stderr";
    s.text = std::move(*text);
    return KernelFrame(std::move(s));
  }
  if (type == "display") {
    if (auto ok = f.only({"type", "id", "data"}); !ok) return ok.error();
    DisplayFrame d;
    auto id = f.string("id", kMaxId);
    if (!id) return id.error();
    auto data = f.bundle("data", true);
    if (!data) return data.error();
    d.id = std::move(*id);
    d.data = std::move(*data);
    d.bytes = bytes;
    d.values = values;
    return KernelFrame(std::move(d));
  }
  if (type == "result") {
    if (auto ok = f.only(
            {"type", "id", "execution_count", "status", "value", "error", "exit_code", "listing"});
        !ok)
      return ok.error();
    ResultFrame r;
    auto id = f.string("id", kMaxId);
    if (!id) return id.error();
    auto count = f.integer("execution_count", 0, INT_MAX, true);
    if (!count) return count.error();
    auto status = f.string("status", 16);
    if (!status) return status.error();
    if (*status != "ok" && *status != "error")
      return bad("\"status\" is \"" + *status + "\", expected \"ok\" or \"error\"");
    auto value = f.bundle("value", false);
    if (!value) return value.error();
    r.failed = *status == "error";
    if (r.failed) {
      auto e = decode_error(f.find("error"));
      if (!e) return e.error();
      r.error = std::move(*e);
    } else if (json* e = f.find("error")) {
      return wrong("error", *e, "no error with status \"ok\"");
    }
    auto exit_code = f.integer("exit_code", INT_MIN, INT_MAX, false);
    if (!exit_code) return exit_code.error();
    auto listing = decode_listing(f.find("listing"));
    if (!listing) return listing.error();
    r.listing = std::move(*listing);
    r.id = std::move(*id);
    r.execution_count = **count;
    r.value = std::move(*value);
    r.exit_code = *exit_code;
    return KernelFrame(std::move(r));
  }
  std::string shown = type.substr(0, 32);
  return bad("\"type\" is \"" + shown + "\", expected hello, stream, display or result");
}

}  // namespace

std::size_t max_frame_bytes(std::size_t max_output_bytes) {
  // Escaping takes at most 6 bytes a character, but the value and the
  // traceback are each cut to the output cap: 4x covers both with room.
  return kMaxDisplayBytes + 4 * max_output_bytes;
}

const char* frame_type_name(const KernelFrame& f) {
  static constexpr const char* kNames[] = {"hello", "stream", "display", "result"};
  return kNames[f.index()];
}

Result<KernelFrame> decode_kernel_frame(std::string_view body, std::size_t max_bytes) {
  JsonLimits limits{max_bytes};
  limits.max_values = kMaxFrameValues;
  std::size_t values = 0;
  auto msg = parse_json(body, limits, &values);
  if (!msg) return msg.error();
  if (!msg->is_object())
    return bad(std::string("the frame is ") + kind_of(*msg) + ", not a JSON object");
  return decode_object(*msg, body.size(), values);
}

Result<std::optional<std::string_view>> FrameReader::next(std::size_t max_frame) {
  if (pos_ == buf_.size()) {
    // Nothing pending: a buffer a large frame grew goes back.
    pos_ = 0;
    if (buf_.capacity() > kIdleBytes)
      std::string().swap(buf_);
    else
      buf_.clear();
    return std::optional<std::string_view>();
  }
  if (buf_.size() - pos_ < 4) return std::optional<std::string_view>();
  const auto* p = reinterpret_cast<const unsigned char*>(buf_.data() + pos_);
  const std::size_t n =
      (std::size_t{p[0]} << 24) | (std::size_t{p[1]} << 16) | (std::size_t{p[2]} << 8) | p[3];
  if (n > max_frame)
    return bad("a frame of " + std::to_string(n) + " bytes, over the limit of " +
               std::to_string(max_frame) + " bytes");
  if (buf_.size() - pos_ < 4 + n) {
    // Incomplete: keep only this frame, with room for it and one read.
    if (pos_ > 0) {
      buf_.erase(0, pos_);
      pos_ = 0;
    }
    if (buf_.capacity() < 4 + n + kReadBytes) buf_.reserve(4 + n + kReadBytes);
    return std::optional<std::string_view>();
  }
  std::string_view body(buf_.data() + pos_ + 4, n);
  pos_ += 4 + n;
  return std::optional<std::string_view>(body);
}

ssize_t FrameReader::fill(int fd, int flags) {
  if (pos_ > 0 && pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  }
  // Read on the stack, then kept: the buffer grows by what came (a result
  // frame is tens of bytes), not by a zero-filled read's worth.
  char chunk[kReadBytes];
  ssize_t n = ::recv(fd, chunk, sizeof chunk, flags);
  if (n > 0) buf_.append(chunk, static_cast<std::size_t>(n));
  return n;
}

}  // namespace sandcastle::service
