#pragma once

/// What the benchmarks read of their own process: /proc, getrusage and the
/// allocator.

#include <cstdint>
#include <fstream>
#include <string>

#include <dlfcn.h>
#include <sys/resource.h>

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

/// What a process has used so far (getrusage of itself).
struct usage {
  double cpu_ms = 0; ///< CPU time, user + system.
  long faults = 0;   ///< Minor page faults.
  long switches = 0; ///< Context switches, voluntary and involuntary.
};

/// Reads `usage` of the calling process now.
inline usage usage_now() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto ms = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) * 1e3
      + static_cast<double>(t.tv_usec) / 1e3;
  };
  return {ms(u.ru_utime) + ms(u.ru_stime), u.ru_minflt,
          u.ru_nvcsw + u.ru_nivcsw};
}

/// Bytes the process's allocator holds for live allocations, when it is
/// jemalloc (its `stats.allocated`); -1 otherwise. Looked up at run time, so
/// that a build with glibc's malloc needs no jemalloc header.
inline long allocated_bytes() {
  using mallctl_fn = int (*)(const char*, void*, size_t*, void*, size_t);
  auto* ctl = reinterpret_cast<mallctl_fn>(::dlsym(RTLD_DEFAULT, "mallctl"));
  if (ctl == nullptr)
    return -1;
  // The statistics are a snapshot taken at each new epoch.
  uint64_t epoch = 1;
  size_t len = sizeof(epoch);
  if (ctl("epoch", &epoch, &len, &epoch, len) != 0)
    return -1;
  size_t allocated = 0;
  len = sizeof(allocated);
  if (ctl("stats.allocated", &allocated, &len, nullptr, 0) != 0)
    return -1;
  return static_cast<long>(allocated);
}

} // namespace recoverd::bench
