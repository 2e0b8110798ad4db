// Files of a sandbox: list, download, upload (raw PUT or multipart), delete.
// Paths are the sandbox's own (relative to its workdir, or absolute in its
// view): the service resolves them inside the sandbox, never on the host.
// Downloads are attachments; inline only as plain text or a raster image,
// with a CSP that gives them no script and no origin (a sandbox's file must
// not run as the console).
#include "web/rest_internal.h"
#include "web/rest_multipart.h"

namespace sandcastle::web {

using namespace rest;

namespace {

std::string extension(const std::string& path) {
  auto slash = path.rfind('/');
  auto dot = path.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return {};
  std::string ext = path.substr(dot + 1);
  for (auto& ch : ext) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return ext;
}

// {content type, may be shown inline}
std::pair<std::string, bool> content_type_for(const std::string& path) {
  const std::string ext = extension(path);
  if (ext == "png") return {"image/png", true};
  if (ext == "jpg" || ext == "jpeg") return {"image/jpeg", true};
  if (ext == "gif") return {"image/gif", true};
  if (ext == "webp") return {"image/webp", true};
  for (const char* t :
       {"txt", "md",   "py",   "js", "mjs",  "ts",  "sh",   "c",   "h",    "cc",   "cpp",
        "rs",  "go",   "java", "rb", "csv",  "tsv", "log",  "ini", "toml", "yaml", "yml",
        "cfg", "conf", "sql",  "r",  "json", "xml", "html", "htm", "css",  "svg"})
    if (ext == t) return {"text/plain; charset=utf-8", true};  // shown as text, never rendered
  if (ext == "pdf") return {"application/pdf", false};
  if (ext == "zip") return {"application/zip", false};
  return {"application/octet-stream", false};
}

std::string basename_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Content-Disposition with a filename safe in a header: an ASCII fallback
// and the exact name percent-encoded (RFC 6266 / 8187).
std::string disposition(bool as_inline, const std::string& name) {
  std::string ascii, encoded;
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (unsigned char ch : name) {
    ascii.push_back(ch >= 0x20 && ch < 0x7f && ch != '"' && ch != '\\' ? static_cast<char>(ch)
                                                                       : '_');
    if (std::isalnum(ch) || ch == '.' || ch == '-' || ch == '_') {
      encoded.push_back(static_cast<char>(ch));
    } else {
      encoded += '%';
      encoded += kHex[ch >> 4];
      encoded += kHex[ch & 15];
    }
  }
  if (ascii.empty()) ascii = "download";
  return std::string(as_inline ? "inline" : "attachment") + "; filename=\"" + ascii +
         "\"; filename*=UTF-8''" + encoded;
}

// A file name from an upload: one path component, no control characters.
bool valid_upload_name(const std::string& n) {
  if (n.empty() || n.size() > 255 || n == "." || n == "..") return false;
  for (unsigned char ch : n)
    if (ch < 0x20 || ch == 0x7f || ch == '/' || ch == '\\') return false;
  return true;
}

bool need_path(Call& c, std::string* path) {
  auto it = c.req.query.find("path");
  if (it == c.req.query.end() || it->second.empty()) {
    c.reply(problem(400, "invalid_argument", "the path query parameter is required"));
    return false;
  }
  if (it->second.find('\0') != std::string::npos || it->second.size() > 4096) {
    c.reply(problem(400, "invalid_argument", "the path is not a valid path"));
    return false;
  }
  *path = it->second;
  return true;
}

}  // namespace

void RestApi::file_routes(Router& r) {
  service::Sandboxes* svc = options_.sandboxes;  // outlives the server; null: 503
  const RouteParam path_param{"path", "query", "string",
                              "a path in the sandbox (relative to its workdir)", true};
  {
    auto m = meta("List a directory", "files");
    m.params = {RouteParam{"path", "query", "string", "a directory (default: the workdir)", false}};
    (void)r.add("GET", "/api/v1/sandboxes/{id}/files", m, [this, svc](Call& c) {
      with_service(c, [svc](Call& call, const Caller& who) {
        auto it = call.req.query.find("path");
        reply_result(call,
                     svc->list_files(to_service(who), call.param("id"),
                                     it == call.req.query.end() ? std::string() : it->second));
      });
    });
  }
  {
    auto m = meta("Download a file", "files");
    m.params = {path_param,
                RouteParam{"inline", "query", "integer", "1: show text and images inline", false}};
    m.response_type = "application/octet-stream";
    m.response_schema = json{{"type", "string"}, {"contentMediaType", "application/octet-stream"}};
    (void)r.add("GET", "/api/v1/sandboxes/{id}/files/content", m, [this, svc](Call& c) {
      with_service(c, [svc](Call& call, const Caller& who) {
        std::string path;
        if (!need_path(call, &path)) return;
        auto f = svc->read_file(to_service(who), call.param("id"), path);
        if (!f.ok()) return call.reply(problem(f.error()));
        auto [type, can_inline] = content_type_for(f->path.empty() ? path : f->path);
        Response res = Response::text(200, std::move(f->data), type);
        res.headers.emplace_back("Content-Disposition",
                                 disposition(can_inline && query_flag(call, "inline"),
                                             basename_of(f->path.empty() ? path : f->path)));
        res.headers.emplace_back("X-Content-Type-Options", "nosniff");
        res.headers.emplace_back("Content-Security-Policy",
                                 "default-src 'none'; img-src 'self'; sandbox");
        res.headers.emplace_back("Cache-Control", "no-store");
        call.reply(std::move(res));
      });
    });
  }
  {
    auto m = meta("Create or replace a file with the raw body", "files");
    m.params = {path_param};
    m.request_type = "application/octet-stream";
    m.request_schema = json{{"type", "string"}, {"contentMediaType", "application/octet-stream"}};
    m.success_status = 201;
    (void)r.add("PUT", "/api/v1/sandboxes/{id}/files/content", m, [this, svc](Call& c) {
      with_service(c, [svc](Call& call, const Caller& who) {
        std::string path;
        if (!need_path(call, &path)) return;
        const uint64_t cap = svc->max_file_bytes();
        if (call.req.body.size() > cap)
          return call.reply(problem(413, "payload_too_large",
                                    "the file is " + std::to_string(call.req.body.size()) +
                                        " bytes, above the limit of " + std::to_string(cap)));
        reply_result(call, svc->write_file(to_service(who), call.param("id"), path, call.req.body),
                     201);
      });
    });
  }
  {
    auto m = meta("Upload files (multipart/form-data: a path field, then file parts)", "files");
    m.request_type = "multipart/form-data";
    m.request_schema = json{
        {"type", "object"},
        {"properties",
         {{"path", {{"type", "string"}}},
          {"file",
           {{"type", "array"},
            {"items", {{"type", "string"}, {"contentMediaType", "application/octet-stream"}}}}}}}};
    m.success_status = 201;
    (void)r.add("POST", "/api/v1/sandboxes/{id}/files", m, [this, svc](Call& c) {
      with_service(c, [svc, total = options_.max_body_bytes](Call& call, const Caller& who) {
        auto boundary = multipart_boundary(call.req.header("content-type"));
        if (!boundary.ok())
          return call.reply(problem(415, "unsupported_media_type", boundary.error().message()));
        MultipartLimits limits;
        limits.max_part_bytes = svc->max_file_bytes();
        limits.max_total_bytes = total;
        // A file part is a range of the body, kept as a view (no copy).
        struct Upload {
          std::string name;
          size_t begin = 0;
          size_t end = 0;
        };
        const MultipartParser* parsing = nullptr;
        std::string dir;
        bool dir_seen = false;
        std::vector<Upload> files;
        enum class In { kNone, kPath, kFile } in = In::kNone;
        MultipartSink sink;
        sink.begin = [&](const PartHead& h) -> Status {
          if (h.name == "path" && !h.has_filename) {
            if (dir_seen || !files.empty())
              return Error::make(ErrorCode::kInvalidArgument, "one path field, before the files");
            dir_seen = true;
            in = In::kPath;
            return ok_status();
          }
          if (h.name == "file" && h.has_filename) {
            if (!valid_upload_name(h.filename))
              return Error::make(ErrorCode::kInvalidArgument,
                                 "a file name must be one path component (no '/', '..' or "
                                 "control characters)");
            files.push_back({h.filename, parsing->offset(), parsing->offset()});
            in = In::kFile;
            return ok_status();
          }
          return Error::make(ErrorCode::kInvalidArgument,
                             "unexpected part '" + h.name + "': send path and file parts");
        };
        sink.data = [&](std::string_view d) -> Status {
          if (in == In::kPath) {
            if (dir.size() + d.size() > 4096)
              return Error::make(ErrorCode::kInvalidArgument, "the path is too long");
            dir.append(d);
          } else if (in == In::kFile) {
            if (parsing->offset() != files.back().end)
              return Error::make(ErrorCode::kInternal, "a file part's bytes are not contiguous");
            files.back().end += d.size();
          }
          return ok_status();
        };
        sink.end = [&]() -> Status {
          in = In::kNone;
          return ok_status();
        };
        MultipartParser parser(*boundary, limits, sink);
        parsing = &parser;
        Status st;
        const std::string_view body = call.req.body;
        constexpr size_t kChunk = size_t{64} * 1024;
        for (size_t off = 0; st.ok() && off < body.size(); off += kChunk)
          st = parser.feed(body.substr(off, kChunk));
        if (st.ok()) st = parser.finish();
        if (st.ok() && files.empty())
          st = Error::make(ErrorCode::kInvalidArgument, "no file parts in the upload");
        if (st.ok() && dir.find('\0') != std::string::npos)
          st = Error::make(ErrorCode::kInvalidArgument, "bad path");
        if (!st.ok()) {
          // Everything is checked before anything is written: a refused upload changes nothing.
          const auto& e = st.error();
          return call.reply(e.code == ErrorCode::kResourceExhausted
                                ? problem(413, "payload_too_large", e.message())
                                : problem(e));
        }
        while (!dir.empty() && dir.back() == '/' && dir.size() > 1) dir.pop_back();
        // All or none: a part that cannot be written leaves the others unwritten too.
        std::vector<service::FileUpload> uploads;
        for (const auto& f : files)
          uploads.push_back(
              {dir.empty() ? f.name : (dir == "/" ? "/" + f.name : dir + "/" + f.name),
               body.substr(f.begin, f.end - f.begin)});
        auto w = svc->write_files(to_service(who), call.param("id"), uploads);
        if (!w.ok()) return call.reply(problem(w.error()));
        reply_json(call, 201, json{{"files", std::move(*w)}});
      });
    });
  }
  {
    auto m = meta("Delete a file or (recursive=1) a directory", "files");
    m.params = {path_param, RouteParam{"recursive", "query", "integer",
                                       "1: a directory and everything in it", false}};
    m.success_status = 204;
    (void)r.add("DELETE", "/api/v1/sandboxes/{id}/files", m, [this, svc](Call& c) {
      with_service(c, [svc](Call& call, const Caller& who) {
        std::string path;
        if (!need_path(call, &path)) return;
        auto s = svc->remove_file(to_service(who), call.param("id"), path,
                                  query_flag(call, "recursive"));
        if (!s.ok()) return call.reply(problem(s.error()));
        call.reply(Response{204, {}, {}});
      });
    });
  }
}

}  // namespace sandcastle::web
