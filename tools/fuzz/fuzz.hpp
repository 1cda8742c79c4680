#pragma once

/// recoverd's fuzzer: seeded mutation of a corpus kept in the repository
/// (tests/fuzz/corpus), against three entries that take bytes from outside:
/// - `events`: the event, snapshot and stored-fold decoders (what a damaged
///   log feeds the replay and the inspector), and `apply` of whatever
///   decodes, or more events folded onto a fold taken up;
/// - `grpc`: every unary RPC of Recover and Platform on an in-process daemon,
///   requests mutated field by field (so they still parse and reach the
///   proto -> domain conversion and the model), sometimes byte by byte;
/// - `http`: the HTTP gateway's router, paths and queries mutated.
/// A finding is a crash (the process dies: the harness cannot catch it, the
/// seed printed before each target reproduces it), an INTERNAL / UNKNOWN /
/// DEADLINE_EXCEEDED answer, an HTTP 5xx, a round trip that does not hold,
/// or a daemon that stops answering.

#include <cstdint>
#include <string>
#include <vector>

namespace recoverd::fuzz {

/// How long and on what to run.
struct options {
  /// Root of the corpus: one folder per target.
  std::string corpus;
  /// "events", "grpc", "http", "all", or a comma-separated list of them.
  std::string target = "all";
  /// Seed of the mutations: the same seed, corpus and count repeat a run.
  uint64_t seed = 1;
  /// Mutated inputs per target (when `seconds` is 0).
  size_t iterations = 1000;
  /// Run each target this long instead of `iterations` (0: use iterations).
  double seconds = 0;
};

/// The targets named by `list` ("grpc,http" gives both; empty items are
/// dropped).
std::vector<std::string> split_targets(const std::string& list);

/// What one target's run found.
struct report {
  std::string target;
  /// Inputs tried (the corpus itself included).
  size_t inputs = 0;
  /// Inputs the entry accepted (decoded, answered OK, HTTP 2xx).
  size_t accepted = 0;
  /// Wall-clock seconds of the run.
  double seconds = 0;
  /// What went wrong, one line each, with the input that did it.
  std::vector<std::string> findings;
};

/// Runs the chosen targets; fails (throws std::runtime_error) only when the
/// corpus or the daemon cannot be set up.
std::vector<report> run(const options& opts);

/// Writes the `events` seeds (encoded events and snapshots of a job driven
/// through a whole recovery) to `dir`; returns how many.
size_t write_event_corpus(const std::string& dir);

} // namespace recoverd::fuzz
