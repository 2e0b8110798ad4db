#include "images/oci_layout_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/crypto.h"

namespace sandcastle::images {

namespace fs = std::filesystem;

bool is_sha256_digest(std::string_view digest) {
  if (digest.size() != 7 + 64 || digest.substr(0, 7) != "sha256:") return false;
  for (char c : digest.substr(7))
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::string sha256_digest(std::string_view data) {
  return "sha256:" + crypto::hex(crypto::sha256(data));
}

namespace {

Status write_all(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error::from_errno("write " + path);
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return ok_status();
}

Status write_file(const std::string& path, std::string_view data) {
  const std::string tmp = path + ".tmp";
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!fd) return Error::from_errno("create " + tmp);
  if (auto st = write_all(fd.get(), data, tmp); !st.ok()) return st;
  fd.reset();
  if (::rename(tmp.c_str(), path.c_str()) != 0) return Error::from_errno("rename " + tmp);
  return ok_status();
}

}  // namespace

BlobSink::BlobSink(std::string tmp_path, std::string final_path, std::string digest,
                   std::uint64_t size, UniqueFd fd, EVP_MD_CTX* ctx)
    : tmp_path_(std::move(tmp_path)),
      final_path_(std::move(final_path)),
      digest_(std::move(digest)),
      expected_size_(size),
      fd_(std::move(fd)),
      ctx_(ctx) {}

BlobSink::BlobSink(BlobSink&& o) noexcept
    : tmp_path_(std::move(o.tmp_path_)),
      final_path_(std::move(o.final_path_)),
      digest_(std::move(o.digest_)),
      expected_size_(o.expected_size_),
      bytes_(o.bytes_),
      fd_(std::move(o.fd_)),
      ctx_(std::exchange(o.ctx_, nullptr)),
      committed_(std::exchange(o.committed_, true)) {}

BlobSink::~BlobSink() {
  if (ctx_) EVP_MD_CTX_free(ctx_);
  fd_.reset();
  if (!committed_ && !tmp_path_.empty()) ::unlink(tmp_path_.c_str());
}

Status BlobSink::write(std::string_view data) {
  if (data.size() > expected_size_ - bytes_)
    return Error::make(ErrorCode::kInvalidArgument, "blob " + digest_ + " is longer than the " +
                                                        std::to_string(expected_size_) +
                                                        " bytes its descriptor states");
  if (EVP_DigestUpdate(ctx_, data.data(), data.size()) != 1)
    return Error::make(ErrorCode::kInternal, "SHA-256 update failed");
  if (auto st = write_all(fd_.get(), data, tmp_path_); !st.ok()) return st;
  bytes_ += data.size();
  return ok_status();
}

Status BlobSink::commit() {
  if (bytes_ != expected_size_)
    return Error::make(ErrorCode::kInvalidArgument,
                       "blob " + digest_ + " is " + std::to_string(bytes_) +
                           " bytes, its descriptor states " + std::to_string(expected_size_));
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_DigestFinal_ex(ctx_, md, &len) != 1)
    return Error::make(ErrorCode::kInternal, "SHA-256 final failed");
  const std::string got =
      "sha256:" + crypto::hex(std::string_view(reinterpret_cast<const char*>(md), len));
  if (got != digest_)
    return Error::make(ErrorCode::kInvalidArgument,
                       "digest mismatch: blob " + digest_ + " has content with digest " + got);
  fd_.reset();
  if (::rename(tmp_path_.c_str(), final_path_.c_str()) != 0)
    return Error::from_errno("rename " + tmp_path_);
  committed_ = true;
  return ok_status();
}

Result<OciLayoutWriter> OciLayoutWriter::create(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir + "/blobs/sha256", ec);
  if (ec) return Error::make(ErrorCode::kIo, "create " + dir + "/blobs/sha256: " + ec.message());
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().filename() != "blobs")
      return Error::make(ErrorCode::kAlreadyExists,
                         dir + " is not empty (found " + e.path().filename().string() + ")");
  OciLayoutWriter w(dir);
  if (auto st = write_file(dir + "/oci-layout", R"({"imageLayoutVersion":"1.0.0"})"); !st.ok())
    return st.take_error();
  return w;
}

bool OciLayoutWriter::has_blob(std::string_view digest) const {
  if (!is_sha256_digest(digest)) return false;
  struct stat st {};
  return ::stat((dir_ + "/blobs/sha256/" + std::string(digest.substr(7))).c_str(), &st) == 0;
}

Result<BlobSink> OciLayoutWriter::begin_blob(const std::string& digest, std::uint64_t size) {
  if (!is_sha256_digest(digest))
    return Error::make(ErrorCode::kInvalidArgument,
                       "unsupported digest '" + digest.substr(0, 100) + "' (only sha256)");
  const std::string final_path = dir_ + "/blobs/sha256/" + digest.substr(7);
  const std::string tmp_path = dir_ + "/blobs/" + digest.substr(7) + ".partial";
  UniqueFd fd(
      ::open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!fd) return Error::from_errno("create " + tmp_path);
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  if (!ctx || EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) != 1) {
    EVP_MD_CTX_free(ctx);
    ::unlink(tmp_path.c_str());
    return Error::make(ErrorCode::kInternal, "SHA-256 init failed");
  }
  return BlobSink(tmp_path, final_path, digest, size, std::move(fd), ctx);
}

Status OciLayoutWriter::write_blob(const std::string& digest, std::string_view bytes) {
  auto sink = begin_blob(digest, bytes.size());
  if (!sink.ok()) return sink.take_error();
  if (auto st = sink->write(bytes); !st.ok()) return st;
  return sink->commit();
}

Status OciLayoutWriter::write_index(const std::string& manifest_media_type,
                                    const std::string& manifest_digest, std::uint64_t manifest_size,
                                    const std::string& ref_name, const std::string& os,
                                    const std::string& architecture, const std::string& variant) {
  nlohmann::json desc = {
      {"mediaType", manifest_media_type}, {"digest", manifest_digest}, {"size", manifest_size}};
  if (!ref_name.empty()) desc["annotations"] = {{"org.opencontainers.image.ref.name", ref_name}};
  if (!os.empty() && !architecture.empty()) {
    desc["platform"] = {{"os", os}, {"architecture", architecture}};
    if (!variant.empty()) desc["platform"]["variant"] = variant;
  }
  nlohmann::json index = {{"schemaVersion", 2},
                          {"mediaType", "application/vnd.oci.image.index.v1+json"},
                          {"manifests", nlohmann::json::array({desc})}};
  return write_file(dir_ + "/index.json", index.dump());
}

}  // namespace sandcastle::images
