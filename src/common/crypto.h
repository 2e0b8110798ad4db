// Small cryptographic helpers over OpenSSL's libcrypto: hashes for stored API
// keys, HMAC for signed file links, random secrets, constant-time compares.
#pragma once

#include <string>
#include <string_view>

namespace sandcastle::crypto {

// Raw 32-byte digests.
std::string sha256(std::string_view data);
std::string hmac_sha256(std::string_view key, std::string_view data);
// `n` bytes from the kernel's CSPRNG (getrandom); throws std::runtime_error on failure.
std::string random_bytes(size_t n);

std::string hex(std::string_view bytes);
// RFC 4648 §5 base64url without padding (common/base64.h decodes it).
std::string base64url(std::string_view bytes);

// Compares without an early exit, so timing reveals nothing but the length.
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace sandcastle::crypto
