#pragma once

/// What the benchmarks read of their own process from /proc.

#include <fstream>
#include <string>

namespace recoverd::bench {

/// Resident set size (VmRSS) of this process in KiB; -1 when unknown.
inline long rss_kib() {
  std::ifstream f{"/proc/self/status"};
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0)
      return std::stol(line.substr(6));
  return -1;
}

} // namespace recoverd::bench
