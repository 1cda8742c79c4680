// journal_bench: durable appends per second through the journal (group
// commit from many concurrent job-like writers) vs a bare RocksDB
// WriteBatch + sync loop writing the same records in batches of the size the
// journal achieved, on the same disk, in the same run (design §7: ratio >=
// 0.7).
//
// The baseline talks to RocksDB directly on purpose: it is the bare
// reference the journal is measured against, so it must not go through
// storage/.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scoped_actor.hpp>
#include <CLI/CLI.hpp>
#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include "actors/error.hpp"
#include "actors/journal.hpp"
#include "storage/encoding.hpp"
#include "storage/event_codec.hpp"
#include "storage/event_log.hpp"

using namespace recoverd;
namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

namespace {

struct options {
  size_t writers = 64;
  size_t records = 100'000;
  int rounds = 3;
  std::string dir;
};

// A realistic record: a job put of one pod with eight devices.
std::string sample_record(uint64_t seq) {
  job_spec spec;
  spec.job_id = "bench";
  spec.name = "bench-job";
  spec.recover_strategies = {"retry", "recover", "dump"};
  spec.process_recover_enable = true;
  pod p;
  p.uid = "3f2a9c1e-7d4b-4e8a-9b1c-0a2d3e4f5a6b";
  p.node_name = "node-0001";
  p.running = true;
  for (int d = 0; d < 8; ++d)
    p.devices.push_back({std::to_string(d), std::to_string(d)});
  spec.pods.push_back(p);
  return storage::encode_event({seq, 1'700'000'000'000, job_put{spec, false}});
}

struct journal_result {
  double per_second = 0;
  double mean_batch = 0;
};

journal_result run_journal(const options& opts, const std::string& path,
                           const std::string& payload) {
  storage::event_log_options log_opts;
  log_opts.path = path;
  auto log = storage::event_log::open(log_opts);
  if (!log) {
    std::fprintf(stderr, "journal_bench: %s\n", message_of(log.error()).c_str());
    std::exit(1);
  }
  journal_result result;
  {
    caf::actor_system_config cfg;
    caf::actor_system sys{cfg};
    auto j = sys.spawn<caf::detached>(journal, log->get(), journal_config{});
    auto per_writer = opts.records / opts.writers;
    caf::scoped_actor self{sys};
    auto start = clock_type::now();
    for (size_t w = 0; w < opts.writers; ++w) {
      // Each writer behaves like a job actor: one append in flight at a
      // time, the next one after the previous is durable.
      sys.spawn(
        [](caf::event_based_actor* writer, journal_actor j, caf::actor done,
           std::string job, std::string payload,
           size_t count) -> caf::behavior {
          auto seq = std::make_shared<uint64_t>(0);
          writer->send(writer, caf::tick_atom::value);
          return {
            [=](caf::tick_atom) {
              if (*seq == count) {
                writer->send(done, caf::ok_atom::value);
                writer->quit();
                return;
              }
              ++*seq;
              writer
                ->request(j, caf::infinite, append_atom::value,
                          std::vector<log_record>{{job, *seq, payload}},
                          std::vector<snapshot_record>{})
                .then([=](uint64_t) { writer->send(writer, caf::tick_atom::value); },
                      [=](caf::error&) {
                        writer->send(done, caf::ok_atom::value);
                        writer->quit();
                      });
            },
          };
        },
        j, caf::actor{self}, "job-" + std::to_string(w), payload, per_writer);
    }
    for (size_t w = 0; w < opts.writers; ++w)
      self->receive([](caf::ok_atom) {});
    auto secs = std::chrono::duration<double>(clock_type::now() - start).count();
    journal_stats stats;
    self->request(j, caf::infinite, status_atom::value)
      .receive([&](journal_stats& x) { stats = x; }, [](caf::error&) {});
    result.per_second = static_cast<double>(stats.records) / secs;
    result.mean_batch = static_cast<double>(stats.records)
                        / static_cast<double>(std::max<uint64_t>(1, stats.batches));
    caf::anon_send_exit(j, caf::exit_reason::user_shutdown);
    j = nullptr; // a live handle to a detached actor hangs ~actor_system
  }
  return result;
}

double run_bare(const options& opts, const std::string& path,
                const std::string& payload, size_t batch_size) {
  rocksdb::Options ro;
  ro.create_if_missing = true;
  ro.create_missing_column_families = true;
  std::vector<rocksdb::ColumnFamilyDescriptor> descs;
  for (auto* name : {"default", "events", "global"})
    descs.emplace_back(name, rocksdb::ColumnFamilyOptions{});
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  auto st = rocksdb::DB::Open(rocksdb::DBOptions{ro}, path, descs, &handles,
                              &raw);
  if (!st.ok()) {
    std::fprintf(stderr, "journal_bench: %s\n", st.ToString().c_str());
    std::exit(1);
  }
  std::unique_ptr<rocksdb::DB> db{raw};
  rocksdb::WriteOptions wo;
  wo.sync = true;
  auto per_writer = opts.records / opts.writers;
  auto total = per_writer * opts.writers;
  uint64_t position = 0;
  auto start = clock_type::now();
  size_t written = 0;
  while (written < total) {
    rocksdb::WriteBatch batch;
    for (size_t i = 0; i < batch_size && written < total; ++i, ++written) {
      // Same keys as the journal writes: the event and its global index.
      auto job = "job-" + std::to_string(written % opts.writers);
      auto key = storage::event_key(job, written / opts.writers + 1);
      batch.Put(handles[1], key, payload);
      batch.Put(handles[2], storage::be64(++position), key);
    }
    if (auto wst = db->Write(wo, &batch); !wst.ok()) {
      std::fprintf(stderr, "journal_bench: %s\n", wst.ToString().c_str());
      std::exit(1);
    }
  }
  auto secs = std::chrono::duration<double>(clock_type::now() - start).count();
  for (auto* h : handles)
    db->DestroyColumnFamilyHandle(h);
  db->Close();
  return static_cast<double>(total) / secs;
}

} // namespace

int main(int argc, char** argv) {
  options opts;
  CLI::App cli{"journal_bench: journal group commit vs bare RocksDB"};
  cli.set_version_flag("--version", std::string{"journal_bench "} + RECOVERD_VERSION);
  cli.add_option("--writers", opts.writers, "concurrent job-like writers")
    ->capture_default_str();
  cli.add_option("--records", opts.records, "records per round")
    ->capture_default_str();
  cli.add_option("--rounds", opts.rounds, "rounds (median is reported)")
    ->capture_default_str();
  cli.add_option("--dir", opts.dir, "scratch directory (default: a temp dir)");
  CLI11_PARSE(cli, argc, argv);
  if (opts.writers == 0 || opts.records < opts.writers || opts.rounds < 1) {
    std::fprintf(stderr, "journal_bench: need writers >= 1, records >= "
                         "writers, rounds >= 1\n");
    return 2;
  }
  auto base = opts.dir.empty()
                ? fs::temp_directory_path() / ("journal-bench-"
                                               + std::to_string(::getpid()))
                : fs::path{opts.dir};
  fs::create_directories(base);
  auto payload = sample_record(1);
  std::vector<double> ours;
  std::vector<double> bare;
  std::vector<double> batches;
  for (int r = 0; r < opts.rounds; ++r) {
    auto jdir = base / ("journal-" + std::to_string(r));
    auto bdir = base / ("bare-" + std::to_string(r));
    auto j = run_journal(opts, jdir.string(), payload);
    auto batch = std::max<size_t>(1, static_cast<size_t>(j.mean_batch + 0.5));
    auto b = run_bare(opts, bdir.string(), payload, batch);
    std::printf("round %d: journal %.0f appends/s (mean batch %.1f), bare "
                "RocksDB WriteBatch(%zu)+sync %.0f appends/s, ratio %.2f\n",
                r + 1, j.per_second, j.mean_batch, batch, b, j.per_second / b);
    std::fflush(stdout);
    ours.push_back(j.per_second);
    bare.push_back(b);
    batches.push_back(j.mean_batch);
    fs::remove_all(jdir);
    fs::remove_all(bdir);
  }
  auto median = [](std::vector<double> xs) {
    std::sort(xs.begin(), xs.end());
    return xs[xs.size() / 2];
  };
  auto m_ours = median(ours);
  auto m_bare = median(bare);
  std::printf("\njournal durable appends/s (sync=always, %zu writers, %zu "
              "records of %zu bytes): %.0f (median of %d), mean batch %.1f\n",
              opts.writers, opts.records, payload.size(), m_ours, opts.rounds,
              median(batches));
  std::printf("bare RocksDB WriteBatch+sync loop, same records and batch "
              "size: %.0f appends/s\n",
              m_bare);
  std::printf("ratio journal / bare: %.2f (design target >= 0.70)\n",
              m_ours / m_bare);
  // One machine-readable line for scripts/bench.sh (BENCHMARKS.md).
  std::printf("RESULT\tJournal: durable appends/s (group commit, %zu writers)\t"
              "%.0f/s\t%.0f/s (bare RocksDB WriteBatch+sync)\t%.2f\t>= 0.70\n",
              opts.writers, m_ours, m_bare, m_ours / m_bare);
  if (opts.dir.empty())
    fs::remove_all(base);
  return 0;
}
