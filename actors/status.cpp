#include "actors/status.hpp"

#include <utility>

#include <caf/sec.hpp>

#include "actors/error.hpp"

namespace recoverd {

component_status unanswered(std::string name, std::string kind,
                            std::string why) {
  component_status result;
  result.name = std::move(name);
  result.kind = std::move(kind);
  result.answered = false;
  result.problem = std::move(why);
  return result;
}

component_status unanswered(std::string name, std::string kind,
                            const caf::error& err, caf::timespan timeout) {
  if (err == caf::sec::request_timeout) {
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout);
    return unanswered(std::move(name), std::move(kind),
                      "did not answer within " + std::to_string(ms.count())
                        + " ms");
  }
  return unanswered(std::move(name), std::move(kind),
                    "could not be asked: " + message_of(err));
}

} // namespace recoverd
