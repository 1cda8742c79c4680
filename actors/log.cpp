#include "actors/log.hpp"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>

#include "actors/model/text.hpp"

namespace recoverd {

namespace {

thread_local const log_fields* current_fields = nullptr;

// Appends `text` as the body of a JSON string.
void append_json_escaped(std::string_view text, spdlog::memory_buf_t& dest) {
  static constexpr char hex[] = "0123456789abcdef";
  for (auto c : text) {
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

// Writes the message as the body of a JSON string.
class json_escaped_message : public spdlog::custom_flag_formatter {
public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    append_json_escaped({msg.payload.data(), msg.payload.size()}, dest);
  }

  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<json_escaped_message>();
  }
};

// Writes the `log_fields` in scope as JSON members, each after a comma.
class json_fields : public spdlog::custom_flag_formatter {
public:
  void format(const spdlog::details::log_msg&, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const auto* x = log_fields::current();
    if (x == nullptr)
      return;
    auto member = [&](std::string_view name, const std::string& value) {
      dest.append(std::string_view{",\""});
      dest.append(name);
      dest.append(std::string_view{"\":\""});
      append_json_escaped(value, dest);
      dest.push_back('"');
    };
    member("job", x->job());
    if (!x->uuid().empty())
      member("uuid", x->uuid());
    if (!x->state().empty())
      member("state", x->state());
  }

  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<json_fields>();
  }
};

// Writes the message with its control characters escaped: client text in
// a message (a role, a peer, a job id) cannot end the line and forge the next.
class text_escaped_message : public spdlog::custom_flag_formatter {
public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    std::string_view payload{msg.payload.data(), msg.payload.size()};
    if (!has_control(payload)) {
      dest.append(payload);
      return;
    }
    auto escaped = escape_control(payload);
    dest.append(std::string_view{escaped});
  }

  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<text_escaped_message>();
  }
};

std::shared_ptr<spdlog::logger> make_logger() {
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto result = std::make_shared<spdlog::logger>("recoverd", sink);
  result->set_formatter(make_log_formatter("text"));
  result->set_level(spdlog::level::info);
  result->flush_on(spdlog::level::info);
  return result;
}

} // namespace

log_fields::log_fields(std::string job, std::string uuid, std::string state)
  : job_(std::move(job)),
    uuid_(std::move(uuid)),
    state_(std::move(state)),
    outer_(current_fields) {
  current_fields = this;
}

log_fields::~log_fields() {
  current_fields = outer_;
}

const log_fields* log_fields::current() {
  return current_fields;
}

spdlog::logger& logger() {
  static auto instance = make_logger();
  return *instance;
}

std::unique_ptr<spdlog::formatter>
make_log_formatter(const std::string& format) {
  auto f = std::make_unique<spdlog::pattern_formatter>();
  if (format == "json") {
    f->add_flag<json_escaped_message>('*');
    f->add_flag<json_fields>('&').set_pattern(
      R"({"time":"%Y-%m-%dT%H:%M:%S.%e%z","level":"%l","msg":"%*"%&})");
  } else if (format == "text") {
    f->add_flag<text_escaped_message>('*').set_pattern(
      "%Y-%m-%dT%H:%M:%S.%e%z %l %*");
  } else {
    return nullptr;
  }
  return f;
}

bool configure_logging(const std::string& level, const std::string& format) {
  auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off")
    return false;
  auto f = make_log_formatter(format);
  if (!f)
    return false;
  logger().set_formatter(std::move(f));
  logger().set_level(lvl);
  return true;
}

} // namespace recoverd
