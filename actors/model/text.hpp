#pragma once

/// Client text on its way into messages, JSON and logs: UTF-8 checks and
/// bounded, always-valid excerpts. Client input may hold any bytes; what we
/// echo back or write down must be valid UTF-8 and short.

#include <cstddef>
#include <string>
#include <string_view>

namespace recoverd {

/// Longest excerpt of client text that error messages echo, in bytes.
constexpr size_t excerpt_limit = 256;

/// True if `x` is well-formed UTF-8 (no overlong forms, no surrogates,
/// nothing above U+10FFFF).
bool is_utf8(std::string_view x);

/// `x` as valid UTF-8 of at most `limit` bytes of content: every byte that
/// is not part of a well-formed sequence becomes U+FFFD, and a longer text
/// is cut at a character boundary and ends with "…(N bytes)", N being the
/// size of `x`.
std::string excerpt(std::string_view x, size_t limit = excerpt_limit);

} // namespace recoverd
