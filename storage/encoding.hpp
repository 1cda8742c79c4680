#pragma once

/// Key encoding of the event log. Keys are ordered bytes: a job's events
/// sort by sequence number because sequence numbers are big-endian.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace recoverd::storage {

/// Appends `x` as 8 big-endian bytes.
inline void put_be64(std::string& out, uint64_t x) {
  for (int shift = 56; shift >= 0; shift -= 8)
    out.push_back(static_cast<char>((x >> shift) & 0xff));
}

/// Reads 8 big-endian bytes at `pos` (the caller checks the size).
inline uint64_t get_be64(std::string_view in, size_t pos = 0) {
  uint64_t x = 0;
  for (size_t i = 0; i < 8; ++i)
    x = (x << 8) | static_cast<unsigned char>(in[pos + i]);
  return x;
}

/// 8 big-endian bytes of `x`.
inline std::string be64(uint64_t x) {
  std::string out;
  put_be64(out, x);
  return out;
}

/// A stored snapshot or base: the sequence number it folds up to (8
/// big-endian bytes), then the record.
inline std::string seq_prefixed(uint64_t seq, std::string_view bytes) {
  std::string out;
  out.reserve(8 + bytes.size());
  put_be64(out, seq);
  out.append(bytes);
  return out;
}

/// A 64-bit FNV-1a hash of `bytes`: stable across builds and machines, to
/// recognise a stored record again (not against malice).
inline uint64_t record_hash(std::string_view bytes) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

/// Key of a job's event: job id, a 0 byte (job ids hold no control
/// characters), then the big-endian sequence number.
inline std::string event_key(std::string_view job_id, uint64_t seq) {
  std::string out;
  out.reserve(job_id.size() + 9);
  out.append(job_id);
  out.push_back('\0');
  put_be64(out, seq);
  return out;
}

/// The first key after every event key of `job_id`.
inline std::string job_upper_bound(std::string_view job_id) {
  std::string out{job_id};
  out.push_back('\x01');
  return out;
}

/// Splits an event key into job id and sequence number.
inline std::optional<std::pair<std::string_view, uint64_t>>
parse_event_key(std::string_view key) {
  if (key.size() < 9 || key[key.size() - 9] != '\0')
    return std::nullopt;
  return std::make_pair(key.substr(0, key.size() - 9),
                        get_be64(key, key.size() - 8));
}

/// Key of an event of a fleet stream (in the fleet family): 'e', then the
/// stream's name as an event key.
inline std::string fleet_event_key(std::string_view stream, uint64_t seq) {
  return "e" + event_key(stream, seq);
}

/// Key of the snapshot of a fleet stream (in the fleet family): 's', then
/// the stream's name.
inline std::string fleet_snapshot_key(std::string_view stream) {
  return "s" + std::string{stream};
}

} // namespace recoverd::storage
