#include "services/replica.hpp"

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <filesystem>
#include <thread>

#include <unistd.h>

#include "actors/error.hpp"
#include "actors/log.hpp"
#include "services/standby.hpp"
#include "storage/etcd_leader.hpp"
#include "storage/etcd_log.hpp"
#include "storage/etcd_store.hpp"
#include "storage/event_log.hpp"
#include "storage/replay.hpp"

namespace recoverd {

namespace etcd = storage::etcd;

namespace {

/// What the replica's main thread waits for: a signal or the term's loss.
struct outcome {
  std::mutex mtx;
  std::condition_variable cv;
  std::atomic<bool> stop{false};
  bool lost = false;
  caf::error why;

  void lose(caf::error err) {
    std::lock_guard<std::mutex> guard{mtx};
    lost = true;
    why = std::move(err);
    cv.notify_all();
  }

  void signal() {
    std::lock_guard<std::mutex> guard{mtx};
    stop = true;
    cv.notify_all();
  }
};

void print_addresses(const char* what, const std::string& agent,
                     const std::string& control, const std::string& http) {
  std::printf("recoverd: %s on %s\n", what, agent.c_str());
  if (!control.empty())
    std::printf("recoverd: control on %s\n", control.c_str());
  if (!http.empty())
    std::printf("recoverd: http on %s\n", http.c_str());
  std::fflush(stdout);
}

} // namespace

caf::error validate(const replica_options& opts) {
  if (auto err = etcd::validate(opts.etcd))
    return err;
  if (auto err = etcd::validate_cluster(opts.cluster))
    return err;
  etcd::election_options e;
  e.key = "/recoverd/" + opts.cluster + "/leader";
  e.value = opts.advertise.empty() ? "-" : opts.advertise;
  e.ttl = opts.lease_ttl;
  return etcd::validate(e);
}

replica_end run_replica(app_options opts, const replica_options& replica,
                        const sigset_t& signals) {
  auto fail = [](const caf::error& err) {
    std::fprintf(stderr, "recoverd: %s\n", message_of(err).c_str());
    return replica_end::failed;
  };
  auto out = std::make_shared<outcome>();
  // SIGINT and SIGTERM are blocked in every thread; this one takes them.
  std::thread([out, signals] {
    int sig = 0;
    sigwait(&signals, &sig);
    ES_INFO("recoverd received {}; shutting down",
            sig == SIGINT ? "SIGINT" : "SIGTERM");
    out->signal();
  }).detach();
  auto client = etcd::client::make(replica.etcd);
  if (!client)
    return fail(client.error());
  etcd::layout keys{replica.cluster};
  // The archive: the replica's own RocksDB log, filled from etcd's.
  auto archive = storage::event_log::open(log_options(opts));
  if (!archive)
    return fail(archive.error());
  // The replica's name in etcd's marks: its host and data directory.
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  std::error_code ec;
  auto dir = std::filesystem::absolute(opts.data_dir, ec).string();
  auto name = std::string{host} + ":" + dir;
  std::unique_ptr<etcd::archive_follower> follower;
  // Follows etcd's log; while etcd cannot be read, waits as a standby
  // would, not exit. False when a signal came first.
  auto follow = [&] {
    for (;;) {
      follower.reset();
      follower = std::make_unique<etcd::archive_follower>(*client, keys,
                                                          **archive, name);
      auto err = follower->start();
      if (!err)
        return true;
      ES_WARN("recoverd standby cannot read etcd's log yet: {}",
              message_of(err));
      std::unique_lock<std::mutex> lock{out->mtx};
      if (out->cv.wait_for(lock, std::chrono::seconds(1),
                           [&out] { return out->stop.load(); }))
        return false;
    }
  };
  if (!follow())
    return replica_end::stopped;
  // The standby serves UNAVAILABLE until this replica leads.
  std::mutex leader_mtx;
  std::string leader_now;
  auto standby = standby_server::start(opts, [&] {
    std::lock_guard<std::mutex> guard{leader_mtx};
    return leader_now;
  });
  if (!standby)
    return fail(standby.error());
  auto advertise = replica.advertise.empty() ? (*standby)->address()
                                             : replica.advertise;
  etcd::election_options eopts{keys.leader_key(), advertise, replica.lease_ttl};
  etcd::leader_election election{*client, eopts, [out](caf::error err) {
                                   out->lose(std::move(err));
                                 }};
  print_addresses("listening", (*standby)->address(),
                  (*standby)->control_address(), (*standby)->http_address());
  ES_INFO("recoverd standby (etcd cluster '{}', {} archived records): "
          "campaigning for the lead",
          replica.cluster, follower->archived_records());
  for (;;) {
    if (out->stop)
      return replica_end::stopped;
    if (auto who = election.leader(); who && *who) {
      std::lock_guard<std::mutex> guard{leader_mtx};
      leader_now = (*who)->value;
    }
    auto err = election.campaign(std::chrono::seconds(2),
                                 [out] { return out->stop.load(); });
    if (!err)
      break;
    if (errc_of(err) == errc::invalid_argument)
      return fail(err);
    // A watch that ended (etcd compacted past it, or unreachable too
    // long): read the log afresh; each record is still stored once.
    if (auto lag = follower->failure()) {
      ES_WARN("recoverd standby's watch of etcd's log ended: {}; reading it "
              "again",
              message_of(lag));
      if (!follow())
        return replica_end::stopped;
    }
  }
  // Leading: the archive takes the rest of etcd's log, then the app opens
  // it and replays (its pending signals go out again with their uuids).
  auto t0 = std::chrono::steady_clock::now();
  if (auto err = follower->catch_up())
    return fail(err);
  auto [live, stale] = follower->live_jobs();
  ES_INFO("recoverd leads (epoch {}); archive complete with {} records; {} "
          "jobs live ({} events folded as they came), {} to replay",
          election.epoch(), follower->archived_records(), live - stale,
          follower->folded_events(), stale);
  auto jobs = follower->take_jobs();
  if (!jobs)
    return fail(jobs.error());
  opts.preloaded = std::make_shared<storage::replay_result>(std::move(*jobs));
  follower.reset();
  archive->reset();
  opts.listen = (*standby)->address();
  if (!opts.control_listen.empty())
    opts.control_listen = (*standby)->control_address();
  if (!opts.http_listen.empty())
    opts.http_listen = (*standby)->http_address();
  (*standby)->stop();
  standby->reset();
  etcd::etcd_log log{*client, election, keys};
  opts.journal.authority = std::make_shared<etcd::etcd_authority>(
    log, election, *client);
  auto running = app::start(opts);
  if (!running)
    return fail(running.error());
  ES_INFO("recoverd took the lead in {:.1f} ms after winning the election",
          std::chrono::duration<double, std::milli>(
            std::chrono::steady_clock::now() - t0)
            .count());
  print_addresses("leading", (*running)->address(),
                  (*running)->control_port() != 0
                    ? (*running)->control_address()
                    : std::string{},
                  (*running)->http_address());
  std::unique_lock<std::mutex> lock{out->mtx};
  out->cv.wait(lock, [&out] { return out->stop || out->lost; });
  if (out->lost) {
    ES_WARN("recoverd lost the lead: {}; refusing writes and re-joining as "
            "a standby",
            message_of(out->why));
    lock.unlock();
    (*running)->stop();
    return replica_end::deposed;
  }
  lock.unlock();
  (*running)->stop();
  // A planned stop hands the lead over at once instead of after the TTL.
  if (auto err = election.resign())
    ES_WARN("recoverd could not resign its term: {}", message_of(err));
  return replica_end::stopped;
}

} // namespace recoverd
