#pragma once

/// Logging: one named spdlog logger on stderr, text or JSON lines. Messages
/// are subject first: "job j1 registered by taskd".

#ifndef SPDLOG_ACTIVE_LEVEL
#  define SPDLOG_ACTIVE_LEVEL SPDLOG_LEVEL_TRACE
#endif

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

namespace recoverd {

/// The process-wide logger (created on first use, level info, text).
spdlog::logger& logger();

/// Sets level ("trace", "debug", "info", "warn", "error", "off") and format
/// ("text" or "json"). Returns false on an unknown name.
bool configure_logging(const std::string& level, const std::string& format);

} // namespace recoverd

#define ES_TRACE(...) SPDLOG_LOGGER_TRACE(&::recoverd::logger(), __VA_ARGS__)
#define ES_DEBUG(...) SPDLOG_LOGGER_DEBUG(&::recoverd::logger(), __VA_ARGS__)
#define ES_INFO(...) SPDLOG_LOGGER_INFO(&::recoverd::logger(), __VA_ARGS__)
#define ES_WARN(...) SPDLOG_LOGGER_WARN(&::recoverd::logger(), __VA_ARGS__)
#define ES_ERROR(...) SPDLOG_LOGGER_ERROR(&::recoverd::logger(), __VA_ARGS__)
