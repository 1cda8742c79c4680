// recoverd-fuzz: long fuzz runs of the event decoder, the gRPC request
// conversion and the HTTP router (see fuzz.hpp); the test suite runs a short
// one. Exit codes: 0 nothing found, 1 findings, 2 bad usage or set-up.

#include <cstdio>
#include <stdexcept>

#include <CLI/CLI.hpp>

#include "fuzz.hpp"

int main(int argc, char** argv) {
  using namespace recoverd::fuzz;
  CLI::App cli{"recoverd-fuzz: mutates the corpus in tests/fuzz/corpus "
               "against the event decoder, every unary RPC and the HTTP "
               "router"};
  cli.set_version_flag("--version", std::string{"recoverd-fuzz "} + RECOVERD_VERSION);
  options opts;
  opts.corpus = RECOVERD_CORPUS_DIR;
  std::string write_events;
  cli.add_option("--corpus", opts.corpus, "corpus root (one folder per target)")
    ->capture_default_str();
  cli.add_option("--target", opts.target,
                 "events, grpc, http, all, or a comma-separated list "
                 "(grpc,http: the HTTP run follows the gRPC one on the same "
                 "daemon)")
    ->check(CLI::Validator(
      [](std::string& value) -> std::string {
        for (const auto& t : split_targets(value))
          if (t != "events" && t != "grpc" && t != "http" && t != "all")
            return "unknown target '" + t + "'";
        return {};
      },
      "TARGETS"))
    ->capture_default_str();
  cli.add_option("--seed", opts.seed, "seed of the mutations")
    ->capture_default_str();
  cli.add_option("--iterations", opts.iterations, "inputs per target")
    ->capture_default_str();
  cli.add_option("--seconds", opts.seconds,
                 "run each target this long instead (0: use --iterations)")
    ->check(CLI::NonNegativeNumber)
    ->capture_default_str();
  cli.add_option("--write-event-corpus", write_events,
                 "write the events seeds to this folder and exit");
  CLI11_PARSE(cli, argc, argv);
  try {
    if (!write_events.empty()) {
      auto n = write_event_corpus(write_events);
      std::printf("%zu seeds written to %s\n", n, write_events.c_str());
      return 0;
    }
    size_t inputs = 0;
    size_t findings = 0;
    for (const auto& r : run(opts)) {
      std::printf("%s: %zu inputs, %zu accepted, %.1f s, %zu findings\n",
                  r.target.c_str(), r.inputs, r.accepted, r.seconds,
                  r.findings.size());
      for (const auto& f : r.findings)
        std::printf("  %s\n", f.c_str());
      inputs += r.inputs;
      findings += r.findings.size();
    }
    std::printf("seed %llu: %zu inputs, %zu findings\n",
                static_cast<unsigned long long>(opts.seed), inputs, findings);
    return findings == 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "recoverd-fuzz: %s\n", e.what());
    return 2;
  }
}
