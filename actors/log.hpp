#pragma once

/// Logging: one named spdlog logger on stderr, text or JSON lines. Messages
/// are subject first: "job j1 registered by taskd".

#ifndef SPDLOG_ACTIVE_LEVEL
#  define SPDLOG_ACTIVE_LEVEL SPDLOG_LEVEL_TRACE
#endif

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

#include "actors/model/vocabulary.hpp"

namespace recoverd {

/// The process-wide logger (created on first use, level info, text).
spdlog::logger& logger();

/// The line format of the logger: "text" or "json" (null on another name).
/// Both escape the message's control characters, so one call logs one line
/// whatever client text it carries.
std::unique_ptr<spdlog::formatter>
make_log_formatter(const std::string& format);

/// Structured fields for the lines logged on this thread while it lives:
/// the JSON format writes them as members ("job", "uuid", "state"; an empty
/// uuid or state is left out) after "msg"; the
/// text format leaves them out (the message names them). The logger formats
/// on the calling thread, so a field reaches exactly the lines in its scope.
class log_fields {
public:
  /// @param state The recovery machine's state the lines speak of.
  log_fields(std::string job, std::string uuid, std::string state = {});
  ~log_fields();

  log_fields(const log_fields&) = delete;
  log_fields& operator=(const log_fields&) = delete;

  /// The fields in scope on this thread, innermost; null when none.
  static const log_fields* current();

  const std::string& job() const {
    return job_;
  }

  const std::string& uuid() const {
    return uuid_;
  }

  const std::string& state() const {
    return state_;
  }

private:
  std::string job_;
  std::string uuid_;
  std::string state_;
  const log_fields* outer_;
};

/// Sets level ("trace", "debug", "info", "warn", "error", "off") and format
/// ("text" or "json"). Returns false on an unknown name.
bool configure_logging(const std::string& level, const std::string& format);

} // namespace recoverd

/// Log lines name the typed vocabulary by its wire names (fmt 9 needs a
/// formatter per type).
template <class Enum>
struct vocabulary_formatter : fmt::formatter<fmt::string_view> {
  template <class Context>
  auto format(Enum x, Context& ctx) const {
    return fmt::formatter<fmt::string_view>::format(::recoverd::to_string(x),
                                                    ctx);
  }
};

template <>
struct fmt::formatter<recoverd::flow_state>
  : vocabulary_formatter<recoverd::flow_state> {};

template <>
struct fmt::formatter<recoverd::flow_event>
  : vocabulary_formatter<recoverd::flow_event> {};

template <>
struct fmt::formatter<recoverd::report_kind>
  : vocabulary_formatter<recoverd::report_kind> {};

template <>
struct fmt::formatter<recoverd::om_kind>
  : vocabulary_formatter<recoverd::om_kind> {};

/// Trace and debug lines check the level before anything else: below it,
/// their arguments are not evaluated (spdlog's own macros evaluate them
/// whenever SPDLOG_ACTIVE_LEVEL compiles the line in, as it does here).
#define ES_BELOW_INFO_(level, log, ...)                                       \
  do {                                                                         \
    auto& es_logger_ = ::recoverd::logger();                                   \
    if (es_logger_.should_log(level))                                          \
      log(&es_logger_, __VA_ARGS__);                                           \
  } while (false)
#define ES_TRACE(...)                                                          \
  ES_BELOW_INFO_(spdlog::level::trace, SPDLOG_LOGGER_TRACE, __VA_ARGS__)
#define ES_DEBUG(...)                                                          \
  ES_BELOW_INFO_(spdlog::level::debug, SPDLOG_LOGGER_DEBUG, __VA_ARGS__)
#define ES_INFO(...) SPDLOG_LOGGER_INFO(&::recoverd::logger(), __VA_ARGS__)
#define ES_WARN(...) SPDLOG_LOGGER_WARN(&::recoverd::logger(), __VA_ARGS__)
#define ES_ERROR(...) SPDLOG_LOGGER_ERROR(&::recoverd::logger(), __VA_ARGS__)
