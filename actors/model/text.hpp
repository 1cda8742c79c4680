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

/// True if `x` holds a byte a log line must not carry verbatim: a control
/// character (below 0x20, or 0x7f).
bool has_control(std::string_view x);

/// `x` with every control character written as an escape (a newline as
/// the two characters `\n`, likewise `\r` and `\t`, others as `\x1b`), so
/// client text (a role, a peer, a job id) cannot break a text log line in
/// two or forge one. Other bytes are kept.
std::string escape_control(std::string_view x);

} // namespace recoverd
