#include "actors/log.hpp"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>

namespace recoverd {

namespace {

// Writes the message as the body of a JSON string.
class json_escaped_message : public spdlog::custom_flag_formatter {
public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    static constexpr char hex[] = "0123456789abcdef";
    for (auto c : msg.payload) {
      switch (c) {
        case '"': dest.append(std::string_view{"\\\""}); break;
        case '\\': dest.append(std::string_view{"\\\\"}); break;
        case '\n': dest.append(std::string_view{"\\n"}); break;
        case '\r': dest.append(std::string_view{"\\r"}); break;
        case '\t': dest.append(std::string_view{"\\t"}); break;
        default:
          if (static_cast<unsigned char>(c) < 0x20) {
            char buf[] = {'\\', 'u', '0', '0', hex[(c >> 4) & 0xf],
                          hex[c & 0xf]};
            dest.append(buf, buf + sizeof(buf));
          } else {
            dest.push_back(c);
          }
      }
    }
  }

  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<json_escaped_message>();
  }
};

std::shared_ptr<spdlog::logger> make_logger() {
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto result = std::make_shared<spdlog::logger>("recoverd", sink);
  result->set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %l %v");
  result->set_level(spdlog::level::info);
  result->flush_on(spdlog::level::info);
  return result;
}

} // namespace

spdlog::logger& logger() {
  static auto instance = make_logger();
  return *instance;
}

bool configure_logging(const std::string& level, const std::string& format) {
  auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off")
    return false;
  if (format == "json") {
    auto f = std::make_unique<spdlog::pattern_formatter>();
    f->add_flag<json_escaped_message>('*').set_pattern(
      R"({"time":"%Y-%m-%dT%H:%M:%S.%e%z","level":"%l","msg":"%*"})");
    logger().set_formatter(std::move(f));
  } else if (format == "text") {
    logger().set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %l %v");
  } else {
    return false;
  }
  logger().set_level(lvl);
  return true;
}

} // namespace recoverd
