#include "actors/model/reset_document.hpp"

#include <openssl/evp.h>

namespace recoverd {

std::string reset_document(const std::string& op,
                           const std::vector<int64_t>& ranks,
                           int64_t update_time_s, int32_t retry_time,
                           bool restart_fault_process) {
  // Go's encoding/json of the reference's struct: no spaces, field order,
  // an empty list as [].
  std::string out = "{\"RankList\":[";
  if (op == "fault")
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (i > 0)
        out += ',';
      out += "{\"RankId\":" + std::to_string(ranks[i])
        + ",\"LogicId\":0,\"Status\":\"fault\",\"Policy\":\"\","
          "\"InitialPolicy\":\"\",\"ErrorCode\":null,"
          "\"ErrorCodeHex\":\"\"}";
    }
  out += "],\"UpdateTime\":" + std::to_string(update_time_s);
  out += ",\"RetryTime\":" + std::to_string(retry_time);
  out += ",\"FaultFlushing\":";
  out += op == "notifyFaultFlushing" ? "true" : "false";
  out += ",\"GracefulExit\":0,\"RestartFaultProcess\":";
  out += op == "fault" && restart_fault_process ? "true" : "false";
  out += "}";
  return out;
}

std::string sha256_hex(const std::string& bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &len, EVP_sha256(), nullptr);
  static constexpr char hex[] = "0123456789abcdef";
  std::string result;
  for (unsigned int i = 0; i < len; ++i) {
    result.push_back(hex[digest[i] >> 4]);
    result.push_back(hex[digest[i] & 0xf]);
  }
  return result;
}

} // namespace recoverd
