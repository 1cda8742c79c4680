#pragma once

/// Client text on its way into messages, JSON and logs: UTF-8 checks and
/// bounded, always-valid excerpts. Client input may hold any bytes; what we
/// echo back or write down must be valid UTF-8 and short.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "actors/model/timeouts.hpp"

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

/// Parses a duration such as "5s", "250ms", "1.5s", "15m", "2h", "30d" or a
/// bare number of seconds. Returns false on anything else or a negative
/// value.
bool parse_duration(const std::string& text, millis& out);

/// Parses a restart budget: "N/DURATION" (at most N fault recoveries within
/// DURATION, e.g. "3/1h"), or "0" / "off" (none: `flows` = 0). Returns
/// false on anything else, a zero window, or N above 1000.
bool parse_restart_budget(const std::string& text, uint32_t& flows,
                          millis& window);

} // namespace recoverd
