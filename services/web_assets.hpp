#pragma once

/// The dashboard's static files (services/web/), built into the binary by
/// scripts/embed_web.py so that the page needs no file system and no
/// network beyond the daemon's own HTTP port.

#include <string_view>

namespace recoverd {

/// One static file of the dashboard.
struct web_asset {
  /// The URL path it is served at: "/" for the page, "/ui/NAME" for the rest.
  std::string_view path;
  /// Its Content-Type header.
  std::string_view content_type;
  /// Its bytes.
  std::string_view body;
  /// A strong ETag (quoted): a hash of `body`.
  std::string_view etag;
};

/// The file served at `path`, or null when there is none.
const web_asset* find_web_asset(std::string_view path);

} // namespace recoverd
