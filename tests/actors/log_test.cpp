// The logging macros: what a line below the logger's level costs.

#include <doctest/doctest.h>

#include "actors/log.hpp"
#include "fixtures/log_capture.hpp"

namespace recoverd {

TEST_CASE("log: a debug or trace line below the level does not evaluate its "
          "arguments") {
  log_capture logs; // level info
  int evaluated = 0;
  auto costly = [&] {
    ++evaluated;
    return std::string{"walked"};
  };
  ES_DEBUG("debug line {}", costly());
  ES_TRACE("trace line {}", costly());
  CHECK(evaluated == 0);
  CHECK(logs.lines(" line walked").empty());
  MESSAGE("at level debug the debug line is written, once; trace still not");
  REQUIRE(configure_logging("debug", "text"));
  ES_DEBUG("debug line {}", costly());
  ES_TRACE("trace line {}", costly());
  CHECK(evaluated == 1);
  CHECK(logs.lines("debug line walked").size() == 1);
  CHECK(logs.lines("trace line walked").empty());
  MESSAGE("at level trace both are");
  REQUIRE(configure_logging("trace", "text"));
  ES_TRACE("trace line {}", costly());
  CHECK(evaluated == 2);
  CHECK(logs.lines("trace line walked").size() == 1);
}

} // namespace recoverd
