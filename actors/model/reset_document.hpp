#pragma once

/// The reset document (`reset.json` in the `reset-config-<job>` ConfigMap)
/// byte for byte as the reference writes it, and its check code.

#include <cstdint>
#include <string>
#include <vector>

namespace recoverd {

/// The reset document for `op` ("clear", "notifyFaultFlushing", "fault",
/// "restartAllProcess"): Go's JSON encoding of the reference's struct, byte
/// for byte. `ranks` are used by "fault".
std::string reset_document(const std::string& op,
                           const std::vector<int64_t>& ranks,
                           int64_t update_time_s, int32_t retry_time,
                           bool restart_fault_process);

/// Hex SHA-256 of `bytes`.
std::string sha256_hex(const std::string& bytes);

} // namespace recoverd
