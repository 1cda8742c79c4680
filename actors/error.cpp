#include "actors/error.hpp"

#include <caf/message.hpp>
#include <caf/sec.hpp>

namespace recoverd {

caf::error make_error(errc code, std::string message) {
  return caf::error{static_cast<uint8_t>(code), errc_category,
                    caf::make_message(std::move(message))};
}

caf::error to_error(const failure& x) {
  if (!x)
    return caf::none;
  return make_error(x.code(), x.message());
}

std::optional<errc> errc_of(const caf::error& err) {
  if (!err || err.category() != errc_category)
    return std::nullopt;
  return static_cast<errc>(err.code());
}

std::string message_of(const caf::error& err) {
  if (!err)
    return {};
  const auto& ctx = err.context();
  if (err.category() == errc_category && ctx.match_elements<std::string>())
    return ctx.get_as<std::string>(0);
  if (err.category() == caf::atom("system"))
    return caf::to_string(static_cast<caf::sec>(err.code()));
  return caf::to_string(err);
}

std::string render_error(uint8_t code, caf::atom_value,
                         const caf::message& context) {
  std::string result = to_string(static_cast<errc>(code));
  if (context.match_elements<std::string>()) {
    result += ": ";
    result += context.get_as<std::string>(0);
  }
  return result;
}

} // namespace recoverd
