#pragma once

/// The protobuf wire form read and written field by field, for records the
/// codec splices (a snapshot whose spec's bytes are kept) or reads in part
/// (a snapshot's head). Internal to `storage/`.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <google/protobuf/io/coded_stream.h>

namespace recoverd::storage {

/// Wire types of the protobuf encoding (groups are not used here).
enum class wire : uint32_t {
  varint = 0,
  fixed64 = 1,
  delimited = 2,
  fixed32 = 5
};

/// One field of a message's wire form.
struct wire_field {
  int number = 0;
  wire type = wire::varint;
  std::string_view whole;   ///< Tag and value.
  std::string_view payload; ///< The value of a length-delimited field.
};

/// Calls `f` with each field of the message `bytes`, in order; false when
/// the bytes are not a well-formed message.
template <class F>
bool for_each_field(std::string_view bytes, F f) {
  google::protobuf::io::CodedInputStream in{
    reinterpret_cast<const uint8_t*>(bytes.data()),
    static_cast<int>(bytes.size())};
  for (;;) {
    auto start = static_cast<size_t>(in.CurrentPosition());
    auto tag = in.ReadTag();
    if (tag == 0)
      return start == bytes.size();
    wire_field x;
    x.number = static_cast<int>(tag >> 3);
    x.type = static_cast<wire>(tag & 7);
    uint64_t ignored = 0;
    uint32_t size = 0;
    bool ok = true;
    switch (x.type) {
      case wire::varint:
        ok = in.ReadVarint64(&ignored);
        break;
      case wire::fixed64:
        ok = in.Skip(8);
        break;
      case wire::fixed32:
        ok = in.Skip(4);
        break;
      case wire::delimited:
        ok = in.ReadVarint32(&size);
        if (ok) {
          x.payload = bytes.substr(static_cast<size_t>(in.CurrentPosition()),
                                   size);
          ok = x.payload.size() == size && in.Skip(static_cast<int>(size));
        }
        break;
      default:
        return false;
    }
    if (!ok)
      return false;
    x.whole = bytes.substr(start,
                           static_cast<size_t>(in.CurrentPosition()) - start);
    f(x);
  }
}

/// Appends `x` as a base-128 varint.
inline void append_varint(std::string& out, uint64_t x) {
  while (x >= 0x80) {
    out.push_back(static_cast<char>((x & 0x7f) | 0x80));
    x >>= 7;
  }
  out.push_back(static_cast<char>(x));
}

/// Appends the tag and length of message field `field`, whose `size` bytes
/// the caller appends next.
inline void append_message_head(std::string& out, uint32_t field,
                                size_t size) {
  append_varint(out, (uint64_t{field} << 3)
                       | static_cast<uint32_t>(wire::delimited));
  append_varint(out, size);
}

} // namespace recoverd::storage
