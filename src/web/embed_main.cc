// Build-time generator of the console's asset table (src/web/web.cmake runs
// it): reads each file, gzips it, hashes it, and writes a .cc defining
// sandcastle::web::embedded_assets() (src/web/embedded_assets.h).
//
//   sandcastle-embed-web OUT.cc NAME=PATH... [!NAME=PATH...]
//
// A "!" before the name keeps a file out of /assets/ (offered through code
// only). index.html's "__ASSET_BASE__" becomes /assets/<version>, where the
// version hashes every other served asset: one changed file gives every URL a
// new name, so browsers may cache each URL for good.
#include <openssl/evp.h>
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Input {
  std::string name;
  std::string path;
  bool served = true;
  std::string data;
};

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

std::string content_type(const std::string& name) {
  if (ends_with(name, ".html")) return "text/html; charset=utf-8";
  if (ends_with(name, ".css")) return "text/css; charset=utf-8";
  if (ends_with(name, ".js") || ends_with(name, ".mjs")) return "text/javascript; charset=utf-8";
  if (ends_with(name, ".svg")) return "image/svg+xml";
  if (ends_with(name, ".json")) return "application/json";
  if (ends_with(name, ".png")) return "image/png";
  if (ends_with(name, ".woff2")) return "font/woff2";
  return "";
}

bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > 100 || name.front() == '.') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
  });
}

std::string sha256_hex(const std::string& data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr) != 1) return {};
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[md[i] >> 4];
    out += kHex[md[i] & 15];
  }
  return out;
}

bool gzip(const std::string& in, std::string* out) {
  z_stream z{};
  // 15 + 16: a gzip wrapper (zlib writes mtime 0, so the output is reproducible).
  if (deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY) != Z_OK) return false;
  out->resize(deflateBound(&z, in.size()) + 64);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out->data());
  z.avail_out = static_cast<uInt>(out->size());
  int rc = deflate(&z, Z_FINISH);
  out->resize(z.total_out);
  deflateEnd(&z);
  return rc == Z_STREAM_END;
}

// A trailing "//# sourceMappingURL=..." (or the CSS form) names a .map file
// the console does not ship; without it the browser asks for nothing extra.
void strip_source_map(std::string* s) {
  for (const char* marker : {"\n//# sourceMappingURL=", "\n/*# sourceMappingURL="}) {
    auto at = s->rfind(marker);
    if (at != std::string::npos && s->find('\n', at + 1) >= s->size() - 1) s->resize(at + 1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: " << argv[0] << " OUT.cc [!]NAME=PATH...\n";
    return 2;
  }
  std::vector<Input> inputs;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    Input in;
    if (!arg.empty() && arg[0] == '!') {
      in.served = false;
      arg.erase(0, 1);
    }
    auto eq = arg.find('=');
    if (eq == std::string::npos) {
      std::cerr << "embed: expected NAME=PATH, got " << arg << "\n";
      return 2;
    }
    in.name = arg.substr(0, eq);
    in.path = arg.substr(eq + 1);
    if (!valid_name(in.name) || content_type(in.name).empty()) {
      std::cerr << "embed: bad asset name or unknown type: " << in.name << "\n";
      return 2;
    }
    std::ifstream f(in.path, std::ios::binary);
    if (!f) {
      std::cerr << "embed: cannot read " << in.path
                << " (web/node_modules missing? run scripts/install-deps)\n";
      return 1;
    }
    std::ostringstream ss;
    ss << f.rdbuf();
    in.data = ss.str();
    if (ends_with(in.name, ".js") || ends_with(in.name, ".mjs") || ends_with(in.name, ".css"))
      strip_source_map(&in.data);
    inputs.push_back(std::move(in));
  }
  std::sort(inputs.begin(), inputs.end(),
            [](const Input& a, const Input& b) { return a.name < b.name; });
  for (size_t i = 1; i < inputs.size(); ++i) {
    if (inputs[i].name == inputs[i - 1].name) {
      std::cerr << "embed: duplicate asset " << inputs[i].name << "\n";
      return 2;
    }
  }
  std::string all;
  for (const auto& in : inputs) {
    if (!in.served || in.name == "index.html") continue;
    all += in.name + '\0' + sha256_hex(in.data) + '\0';
  }
  const std::string version = sha256_hex(all).substr(0, 12);
  for (auto& in : inputs) {
    if (in.name != "index.html") continue;
    const std::string marker = "__ASSET_BASE__";
    for (auto at = in.data.find(marker); at != std::string::npos; at = in.data.find(marker, at))
      in.data.replace(at, marker.size(), "/assets/" + version);
  }

  std::ostringstream out;
  out << "// Generated by src/web/embed_main.cc from web/: do not edit.\n"
         "#include \"web/embedded_assets.h\"\n\nnamespace sandcastle::web {\nnamespace {\n\n";
  std::ostringstream table;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Input& in = inputs[i];
    std::string gz;
    if (!gzip(in.data, &gz)) {
      std::cerr << "embed: gzip failed for " << in.path << "\n";
      return 1;
    }
    out << "// " << in.name << "\nconstexpr unsigned char kAsset" << i << "[] = {";
    for (size_t j = 0; j < gz.size(); ++j) {
      if (j % 24 == 0) out << "\n";
      out << static_cast<unsigned>(static_cast<unsigned char>(gz[j])) << ",";
    }
    out << "};\n\n";
    table << "    {\"" << in.name << "\", \"" << content_type(in.name) << "\", kAsset" << i
          << ", sizeof kAsset" << i << ", " << in.data.size() << ", \""
          << sha256_hex(in.data).substr(0, 16) << "\", " << (in.served ? "true" : "false")
          << "},\n";
  }
  out << "constexpr EmbeddedAsset kAssets[] = {\n"
      << table.str() << "};\n\n}  // namespace\n\n"
      << "std::span<const EmbeddedAsset> embedded_assets() { return kAssets; }\n\n"
      << "std::string_view asset_version() { return \"" << version << "\"; }\n\n"
      << "}  // namespace sandcastle::web\n";
  const std::string text = out.str();
  std::ofstream f(argv[1], std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) {
    std::cerr << "embed: cannot write " << argv[1] << "\n";
    return 1;
  }
  return 0;
}
