// etcd_bench: durable appends per second through the etcd log's fenced,
// group-committed append (many concurrent writers handing in one event each
// and waiting for it, as job actors do) vs a bare loop of the same
// transactions (the same events in batches of the size the committer
// achieved, with the same puts and compares but without the fence, the
// committer and the client) against the same 3-member etcd, in
// the same run (issue #14: ratio >= 0.7).
//
// The baseline calls etcd's generated stub directly on purpose: it is the
// bare reference the log is measured against, so it must not go through
// storage/.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <grpcpp/grpcpp.h>

#include "actors/error.hpp"
#include "etcd_rpc.grpc.pb.h"
#include "fixtures/etcd_cluster.hpp"
#include "storage/etcd_client.hpp"
#include "storage/etcd_leader.hpp"
#include "storage/etcd_log.hpp"

using namespace recoverd;
using namespace recoverd::storage::etcd;
using clock_type = std::chrono::steady_clock;

namespace {

struct options {
  size_t writers = 64;
  size_t events = 30'000;
  size_t bytes = 256;
  int rounds = 2;
  std::vector<std::string> endpoints;
};

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

std::string payload(const std::string& job, uint64_t seq, size_t size) {
  auto result = job + "#" + std::to_string(seq) + ":";
  result.resize(std::max(size, result.size()), 'e');
  return result;
}

struct figures {
  double events_per_s = 0;
  double txns_per_s = 0;
  double events_per_txn = 0;
};

/// `writers` threads, each appending `per_writer` events of its own job one
/// at a time through the group committer.
figures run_committer(etcd_log& log, const options& opts, const std::string& tag,
                      std::vector<std::vector<log_record>>& batches_out) {
  auto per_writer = opts.events / opts.writers;
  group_committer committer{log};
  std::atomic<size_t> failures{0};
  std::vector<std::thread> threads;
  auto start = clock_type::now();
  for (size_t w = 0; w < opts.writers; ++w)
    threads.emplace_back([&, w] {
      auto job = tag + "-w" + std::to_string(w);
      for (uint64_t seq = 1; seq <= per_writer; ++seq)
        if (committer.submit({{job, seq, payload(job, seq, opts.bytes)}})
              .get())
          ++failures;
    });
  for (auto& t : threads)
    t.join();
  auto elapsed = seconds_since(start);
  if (failures > 0)
    std::fprintf(stderr, "etcd_bench: %zu appends failed\n", failures.load());
  figures result;
  auto total = per_writer * opts.writers;
  auto batches = committer.batches();
  result.events_per_s = static_cast<double>(total) / elapsed;
  result.events_per_txn = static_cast<double>(total)
                          / static_cast<double>(std::max<uint64_t>(batches, 1));
  result.txns_per_s = static_cast<double>(batches) / elapsed;
  // The baseline replays the same events in batches of the size achieved,
  // round-robin over the writers' jobs as they arrived.
  auto batch_size = static_cast<size_t>(result.events_per_txn + 0.5);
  batch_size = std::max<size_t>(batch_size, 1);
  std::vector<log_record> batch;
  for (uint64_t seq = 1; seq <= per_writer; ++seq)
    for (size_t w = 0; w < opts.writers; ++w) {
      auto job = tag + "-bare-w" + std::to_string(w);
      batch.push_back({job, seq, payload(job, seq, opts.bytes)});
      if (batch.size() == batch_size)
        batches_out.push_back(std::move(batch)), batch.clear();
    }
  if (!batch.empty())
    batches_out.push_back(std::move(batch));
  return result;
}

/// One Txn per planned transaction, in a plain loop on the stub.
figures run_bare(const std::vector<txn>& txns, size_t events,
                 const std::string& endpoint) {
  auto channel = grpc::CreateChannel(endpoint,
                                     grpc::InsecureChannelCredentials());
  auto kv = etcdserverpb::KV::NewStub(channel);
  std::vector<etcdserverpb::TxnRequest> requests;
  requests.reserve(txns.size());
  for (const auto& t : txns) {
    etcdserverpb::TxnRequest req;
    for (const auto& c : t.compares()) {
      auto* cmp = req.add_compare();
      cmp->set_key(c.key);
      cmp->set_target(etcdserverpb::Compare_CompareTarget_CREATE);
      cmp->set_create_revision(c.number);
    }
    for (const auto& op : t.success()) {
      auto* put = req.add_success()->mutable_request_put();
      put->set_key(op.key);
      put->set_value(op.value);
    }
    requests.push_back(std::move(req));
  }
  size_t failures = 0;
  auto start = clock_type::now();
  for (const auto& req : requests) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now()
                     + std::chrono::seconds(10));
    etcdserverpb::TxnResponse resp;
    if (!kv->Txn(&ctx, req, &resp).ok())
      ++failures;
  }
  auto elapsed = seconds_since(start);
  if (failures > 0)
    std::fprintf(stderr, "etcd_bench: %zu bare txns failed\n", failures);
  figures result;
  result.events_per_s = static_cast<double>(events) / elapsed;
  result.txns_per_s = static_cast<double>(requests.size()) / elapsed;
  result.events_per_txn = static_cast<double>(events)
                          / static_cast<double>(std::max<size_t>(
                            requests.size(), 1));
  return result;
}

} // namespace

int main(int argc, char** argv) {
  options opts;
  CLI::App app{"etcd_bench: fenced group-committed appends vs bare Txns"};
  app.add_option("--writers", opts.writers, "concurrent writers");
  app.add_option("--events", opts.events, "events per round and mode");
  app.add_option("--bytes", opts.bytes, "bytes per event");
  app.add_option("--rounds", opts.rounds, "rounds of both modes");
  app.add_option("--endpoints", opts.endpoints,
                 "an existing etcd (default: start 3 members on loopback)");
  app.set_version_flag("--version", RECOVERD_VERSION);
  CLI11_PARSE(app, argc, argv);
  if (opts.writers == 0 || opts.events < opts.writers) {
    std::fprintf(stderr, "etcd_bench: need events >= writers >= 1\n");
    return 2;
  }
  std::unique_ptr<test::etcd_cluster> cluster;
  if (opts.endpoints.empty()) {
    if (!test::etcd_cluster::available()) {
      std::fprintf(stderr, "etcd_bench: %s is not installed\n",
                   test::etcd_cluster::binary);
      return 1;
    }
    cluster = std::make_unique<test::etcd_cluster>(3);
    if (!cluster->start()) {
      std::fprintf(stderr, "etcd_bench: %s\n", cluster->why().c_str());
      return 1;
    }
    opts.endpoints = cluster->endpoints();
  }
  client_options copts;
  copts.endpoints = opts.endpoints;
  auto c = client::make(copts);
  if (!c) {
    std::fprintf(stderr, "etcd_bench: %s\n", message_of(c.error()).c_str());
    return 1;
  }
  layout keys{"bench"};
  election_options eopts;
  eopts.key = keys.leader_key();
  eopts.value = "bench:8899";
  leader_election election{*c, eopts};
  if (auto err = election.campaign(std::chrono::seconds(30))) {
    std::fprintf(stderr, "etcd_bench: %s\n", message_of(err).c_str());
    return 1;
  }
  etcd_log log{*c, election, keys};
  std::printf("etcd_bench: %zu writers, %zu events of %zu bytes per mode, "
              "3-member etcd %s\n",
              opts.writers, opts.events, opts.bytes,
              cluster ? "on loopback (started here)" : "given");
  double worst = 1e9;
  for (int round = 1; round <= opts.rounds; ++round) {
    auto tag = "r" + std::to_string(round);
    std::vector<std::vector<log_record>> batches;
    auto ours = run_committer(log, opts, tag, batches);
    std::vector<txn> txns;
    size_t events = 0;
    for (const auto& b : batches) {
      auto planned = log.plan(b, election.epoch());
      if (!planned) {
        std::fprintf(stderr, "etcd_bench: %s\n",
                     message_of(planned.error()).c_str());
        return 1;
      }
      events += b.size();
      txns.insert(txns.end(), planned->begin(), planned->end());
    }
    auto bare = run_bare(txns, events, opts.endpoints.front());
    auto ratio = ours.events_per_s / bare.events_per_s;
    worst = std::min(worst, ratio);
    std::printf("round %d: fenced group append %8.0f events/s (%6.0f txns/s, "
                "%.1f events/txn) | bare txn loop %8.0f events/s (%6.0f "
                "txns/s) | ratio %.2f\n",
                round, ours.events_per_s, ours.txns_per_s,
                ours.events_per_txn, bare.events_per_s, bare.txns_per_s,
                ratio);
  }
  std::printf("etcd_bench: worst ratio %.2f (target >= 0.70)\n", worst);
  (void) election.resign();
  return 0;
}
