#include "actors/model/text.hpp"

#include <algorithm>
#include <cmath>

namespace recoverd {

namespace {

constexpr std::string_view replacement = "\xEF\xBF\xBD"; // U+FFFD

// The length of the well-formed UTF-8 sequence at `x[i]`, or 0.
size_t sequence_at(std::string_view x, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(x[k]); };
  auto c = byte(i);
  if (c < 0x80)
    return 1;
  size_t n = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0)
      lo = 0xA0; // overlong
    else if (c == 0xED)
      hi = 0x9F; // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0)
      lo = 0x90; // overlong
    else if (c == 0xF4)
      hi = 0x8F; // above U+10FFFF
  } else {
    return 0;
  }
  if (i + n > x.size())
    return 0;
  // Only the second byte has a narrowed range.
  if (byte(i + 1) < lo || byte(i + 1) > hi)
    return 0;
  for (size_t k = 2; k < n; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF)
      return 0;
  return n;
}

} // namespace

bool is_utf8(std::string_view x) {
  for (size_t i = 0; i < x.size();) {
    auto n = sequence_at(x, i);
    if (n == 0)
      return false;
    i += n;
  }
  return true;
}

std::string excerpt(std::string_view x, size_t limit) {
  std::string out;
  out.reserve(std::min(x.size(), limit) + 16);
  size_t i = 0;
  while (i < x.size()) {
    auto n = sequence_at(x, i);
    auto piece = n == 0 ? replacement : x.substr(i, n);
    if (out.size() + piece.size() > limit)
      break;
    out += piece;
    i += n == 0 ? 1 : n;
  }
  if (i < x.size())
    out += "\xE2\x80\xA6(" + std::to_string(x.size()) + " bytes)";
  return out;
}

namespace {

bool is_control(char c) {
  return static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
}

} // namespace

bool has_control(std::string_view x) {
  return std::any_of(x.begin(), x.end(), is_control);
}

std::string escape_control(std::string_view x) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(x.size() + 8);
  for (auto c : x) {
    if (!is_control(c)) {
      out += c;
      continue;
    }
    switch (c) {
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default: {
        auto b = static_cast<unsigned char>(c);
        out += "\\x";
        out += hex[b >> 4];
        out += hex[b & 0xf];
      }
    }
  }
  return out;
}

bool parse_duration(const std::string& text, millis& out) {
  size_t pos = 0;
  double value = 0;
  try {
    value = std::stod(text, &pos);
  } catch (...) {
    return false;
  }
  if (!std::isfinite(value) || value < 0)
    return false;
  auto unit = text.substr(pos);
  double factor = 0;
  if (unit.empty() || unit == "s")
    factor = 1000;
  else if (unit == "ms")
    factor = 1;
  else if (unit == "m")
    factor = 60'000;
  else if (unit == "h")
    factor = 3'600'000;
  else if (unit == "d")
    factor = 86'400'000;
  else
    return false;
  out = millis{static_cast<int64_t>(std::llround(value * factor))};
  return true;
}

bool parse_restart_budget(const std::string& text, uint32_t& flows,
                          millis& window) {
  if (text == "0" || text == "off") {
    flows = 0;
    return true;
  }
  auto slash = text.find('/');
  if (slash == std::string::npos || slash == 0 || slash > 4)
    return false;
  uint32_t n = 0;
  for (size_t i = 0; i < slash; ++i) {
    if (text[i] < '0' || text[i] > '9')
      return false;
    n = n * 10 + static_cast<uint32_t>(text[i] - '0');
  }
  millis w{0};
  if (n > 1000 || !parse_duration(text.substr(slash + 1), w)
      || w.count() <= 0)
    return false;
  flows = n;
  window = w;
  return true;
}

} // namespace recoverd
