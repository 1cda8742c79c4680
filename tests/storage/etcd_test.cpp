// The etcd store's foundation against a real 3-member etcd (Debian's
// etcd-server on loopback): the client, leader election, fencing and the
// group-committed log, also while etcd loses its leader.

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <future>
#include <map>
#include <thread>

#include "actors/error.hpp"
#include "fixtures/certs.hpp"
#include "fixtures/etcd_cluster.hpp"
#include "services/status_mapping.hpp"
#include "storage/etcd_client.hpp"
#include "storage/etcd_leader.hpp"
#include "storage/etcd_log.hpp"
#include "storage/etcd_store.hpp"
#include "storage/event_log.hpp"
#include "fixtures/temp_dir.hpp"
#include "fixtures/jobs.hpp"
#include "storage/event_codec.hpp"
#include "storage/replay.hpp"

using namespace recoverd;
using namespace recoverd::storage::etcd;
using namespace std::chrono_literals;
using recoverd::test::etcd_cluster;

namespace {

/// Starts a 3-member cluster; false (with a message) when etcd is absent.
bool start_cluster(etcd_cluster& cluster) {
  if (!etcd_cluster::available()) {
    MESSAGE("skipped: ", etcd_cluster::binary,
            " is not installed (Debian package etcd-server)");
    return false;
  }
  REQUIRE_MESSAGE(cluster.start(), cluster.why());
  return true;
}

/// A client of `cluster`; with `leader_first`, it starts on etcd's leader.
std::shared_ptr<client> connect(etcd_cluster& cluster,
                                bool leader_first = false) {
  client_options opts;
  opts.endpoints = cluster.endpoints();
  if (leader_first) {
    auto leader = cluster.wait_for_leader();
    REQUIRE(leader);
    std::rotate(opts.endpoints.begin(), opts.endpoints.begin() + *leader,
                opts.endpoints.end());
  }
  auto c = client::make(opts);
  REQUIRE_MESSAGE(c, message_of(c.error()));
  return *c;
}

/// Starts `cluster` and connects to it; null when etcd is absent.
std::shared_ptr<client> start_and_connect(etcd_cluster& cluster) {
  if (!start_cluster(cluster))
    return nullptr;
  return connect(cluster);
}

/// Commits `t`; whether its compares held.
bool succeeds(client& c, const txn& t) {
  auto r = c.commit(t);
  REQUIRE_MESSAGE(r, message_of(r.error()));
  return r->succeeded;
}

/// Records `job`'s events `from` .. `to` with recognisable bytes.
std::vector<log_record> records(const std::string& job, uint64_t from,
                                uint64_t to, size_t size = 16) {
  std::vector<log_record> result;
  for (auto seq = from; seq <= to; ++seq) {
    auto bytes = job + "#" + std::to_string(seq) + ":";
    bytes.resize(std::max(size, bytes.size()), 'x');
    result.push_back({job, seq, bytes});
  }
  return result;
}

/// Checks that `job` holds exactly the events `from` .. `to` of `records`.
void check_job(const etcd_log& log, const std::string& job, uint64_t from,
               uint64_t to, size_t size = 16) {
  CAPTURE(job);
  auto got = log.read(job, 1, 0);
  REQUIRE_MESSAGE(got, message_of(got.error()));
  auto want = records(job, from, to, size);
  REQUIRE(got->size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    CHECK((*got)[i].seq == want[i].seq);
    CHECK((*got)[i].bytes == want[i].bytes);
  }
}

election_options election_for(const layout& keys, std::string address,
                              std::chrono::milliseconds ttl = 2s) {
  election_options opts;
  opts.key = keys.leader_key();
  opts.value = std::move(address);
  opts.ttl = ttl;
  return opts;
}

/// A started cluster, a client, and one replica leading the keys of
/// `cluster_name` with its log.
struct leading {
  explicit leading(const std::string& cluster_name) : keys(cluster_name) {
    // nop
  }

  /// False when etcd is absent (the test is skipped).
  bool start(std::chrono::milliseconds ttl = 2s, bool leader_first = false) {
    if (!start_cluster(cluster))
      return false;
    c = connect(cluster, leader_first);
    election = std::make_unique<leader_election>(
      c, election_for(keys, "10.0.0.1:8899", ttl),
      [this](caf::error) { ++lost; });
    REQUIRE_FALSE(election->campaign(10s));
    log = std::make_unique<etcd_log>(c, *election, keys);
    return true;
  }

  etcd_cluster cluster;
  layout keys;
  std::shared_ptr<client> c;
  std::atomic<int> lost{0};
  std::unique_ptr<leader_election> election;
  std::unique_ptr<etcd_log> log;
};

} // namespace

TEST_SUITE("etcd") {

TEST_CASE("etcd options, keys and plans are checked without a cluster") {
  client_options opts;
  CHECK(errc_of(validate(opts)) == errc::invalid_argument);
  opts.endpoints = {"127.0.0.1:2379", "http://127.0.0.1:2380/"};
  CHECK_FALSE(validate(opts));
  opts.endpoints = {"no-port"};
  CHECK(errc_of(validate(opts)) == errc::invalid_argument);
  opts.endpoints = {"127.0.0.1:99999"};
  CHECK(errc_of(validate(opts)) == errc::invalid_argument);
  opts.endpoints = {"127.0.0.1:2379"};
  opts.cert_file = "/nonexistent/cert.pem";
  CHECK(errc_of(validate(opts)) == errc::invalid_argument);
  opts.key_file = "/nonexistent/key.pem";
  CHECK(errc_of(validate(opts)) == errc::invalid_argument);
  CHECK(prefix_end("a/") == "a0");
  CHECK(prefix_end(std::string("a\xff", 2)) == "b");
  CHECK(errc_of(validate_cluster("prod-1")) == std::nullopt);
  CHECK(errc_of(validate_cluster("a/b")) == errc::invalid_argument);
  CHECK(errc_of(validate_cluster("")) == errc::invalid_argument);
  MESSAGE("job ids cannot reach into each other's keys");
  layout keys{"c"};
  CHECK(keys.event_key("a", 7) == "/recoverd/c/log/a/00000000000000000007");
  CHECK(keys.job_prefix("a/b") == "/recoverd/c/log/a%2Fb/");
  CHECK(layout::encode_job("x y%") == "x%20y%25");
  CHECK(keys.meta_key("a") == "/recoverd/c/meta/a");
  election_options bad;
  CHECK(errc_of(validate(bad)) == errc::invalid_argument);
  bad = election_for(keys, "host:1", 1500ms);
  CHECK(errc_of(validate(bad)) == errc::invalid_argument);
  CHECK_FALSE(validate(election_for(keys, "host:1", 5s)));
  MESSAGE("a deposed replica answers UNAVAILABLE, which agents retry");
  CHECK(to_grpc_status(make_error(errc::deposed, "deposed")).error_code()
        == grpc::StatusCode::UNAVAILABLE);
}

TEST_CASE("etcd put, range, txn, lease and watch") {
  etcd_cluster cluster;
  auto c = start_and_connect(cluster);
  if (!c)
    return;
  MESSAGE("put and range");
  for (auto k : {"/t/a", "/t/b", "/t/c", "/u/a"}) {
    auto rev = c->put(k, std::string("v") + k);
    REQUIRE_MESSAGE(rev, message_of(rev.error()));
  }
  auto all = c->range({"/t/", prefix_end("/t/")});
  REQUIRE(all);
  REQUIRE(all->kvs.size() == 3);
  CHECK(all->kvs[0].key == "/t/a");
  CHECK(all->kvs[2].value == "v/t/c");
  CHECK_FALSE(all->more);
  auto limited = c->range({"/t/", prefix_end("/t/")}, 2);
  REQUIRE(limited);
  CHECK(limited->kvs.size() == 2);
  CHECK(limited->more);
  auto absent = c->get("/t/zzz");
  REQUIRE(absent);
  CHECK_FALSE(absent->has_value());
  MESSAGE("txn: create only if absent, then compare value and revision");
  txn create;
  create.if_create_revision("/t/new", compare_result::equal, 0)
    .then_put("/t/new", "1");
  auto first = c->commit(create);
  REQUIRE(first);
  CHECK(first->succeeded);
  CHECK_FALSE(succeeds(*c, create));
  auto kv = c->get("/t/new");
  REQUIRE(kv);
  REQUIRE(kv->has_value());
  CHECK((*kv)->create_revision == first->revision);
  txn by_value;
  by_value.if_value("/t/new", compare_result::equal, "1")
    .if_mod_revision("/t/new", compare_result::equal, first->revision)
    .then_put("/t/new", "2")
    .then_delete("/t/a");
  CHECK(succeeds(*c, by_value));
  CHECK_FALSE(succeeds(*c, by_value));
  txn otherwise;
  otherwise.if_value("/t/new", compare_result::equal, "1")
    .then_put("/t/x", "then")
    .else_put("/t/x", "else");
  REQUIRE(c->commit(otherwise));
  CHECK((*c->get("/t/x"))->value == "else");
  CHECK_FALSE(c->get("/t/a")->has_value());
  MESSAGE("a transaction above etcd's limits is refused, nothing written");
  txn huge;
  for (int i = 0; i < 200; ++i)
    huge.then_put("/t/huge/" + std::to_string(i), "v");
  auto refused = c->commit(huge);
  REQUIRE_FALSE(refused);
  CHECK(errc_of(refused.error()) == errc::invalid_argument);
  CHECK(c->range({"/t/huge/", prefix_end("/t/huge/")})->kvs.empty());
  MESSAGE("a lease's keys go with its revocation");
  auto l = c->grant(5);
  REQUIRE(l);
  CHECK(l->ttl_s >= 4);
  REQUIRE(c->put("/t/leased", "x", l->id));
  auto ttl = c->keep_alive(l->id);
  REQUIRE(ttl);
  CHECK(*ttl > 0);
  CHECK_FALSE(c->revoke(l->id));
  CHECK_FALSE(c->get("/t/leased")->has_value());
  auto gone = c->keep_alive(l->id);
  REQUIRE(gone);
  CHECK(*gone == 0);
  CHECK_FALSE(c->revoke(l->id));
  MESSAGE("watch from a past revision sees the changes in order");
  std::mutex mtx;
  std::condition_variable cv;
  std::vector<watch_event> seen;
  auto w = c->watch(
    {"/t/", prefix_end("/t/")}, first->revision,
    [&](std::vector<watch_event> events) {
      std::lock_guard<std::mutex> guard{mtx};
      seen.insert(seen.end(), events.begin(), events.end());
      cv.notify_all();
    },
    [](caf::error) {});
  REQUIRE(w);
  REQUIRE(c->put("/t/after", "y"));
  {
    std::unique_lock<std::mutex> lock{mtx};
    cv.wait_for(lock, 10s, [&] {
      return !seen.empty() && seen.back().kv.key == "/t/after";
    });
    REQUIRE(seen.size() >= 4);
    CHECK(seen[0].kv.key == "/t/new");
    CHECK(seen[0].kv.value == "1");
    CHECK(seen[1].kv.value == "2");
    CHECK(seen[2].is_delete);
    CHECK(seen[2].kv.key == "/t/a");
    CHECK(seen.back().kv.value == "y");
  }
  (*w)->stop();
  MESSAGE("a watch from a compacted revision ends with history_purged");
  auto now = c->put("/t/last", "z");
  REQUIRE(now);
  REQUIRE_FALSE(c->compact(*now));
  std::promise<caf::error> ended;
  auto late = c->watch({"/t/", prefix_end("/t/")}, first->revision,
                       [](std::vector<watch_event>) {},
                       [&](caf::error err) { ended.set_value(err); });
  REQUIRE(late);
  auto f = ended.get_future();
  REQUIRE(f.wait_for(10s) == std::future_status::ready);
  auto err = f.get();
  CHECK(errc_of(err) == errc::history_purged);
  CHECK(message_of(err).find(std::to_string(*now)) != std::string::npos);
}

TEST_CASE("etcd group append reads back in order") {
  leading replica{"group"};
  if (!replica.start())
    return;
  auto& log = *replica.log;
  MESSAGE("one batch of three interleaved jobs is one transaction");
  std::vector<log_record> batch;
  for (uint64_t seq = 1; seq <= 20; ++seq)
    for (auto job : {"a", "b/x", "c"})
      batch.push_back(records(job, seq, seq).front());
  auto done = log.append(batch);
  REQUIRE_MESSAGE(done, message_of(done.error()));
  CHECK(done->txns == 1);
  for (auto job : {"a", "b/x", "c"})
    check_job(log, job, 1, 20);
  auto meta = log.meta("b/x");
  REQUIRE(meta);
  REQUIRE(meta->has_value());
  CHECK((*meta)->last_seq == 20);
  CHECK((*meta)->epoch == replica.election->epoch());
  auto tail = log.read("a", 18, 10);
  REQUIRE(tail);
  REQUIRE(tail->size() == 3);
  CHECK(tail->front().seq == 18);
  auto none = log.read("unknown", 1, 0);
  REQUIRE(none);
  CHECK(none->empty());
  MESSAGE("the same batch again is done already and writes nothing");
  auto revision = replica.c->range({"/", prefix_end("/")}, 1);
  REQUIRE(revision);
  auto again = log.append(batch);
  REQUIRE_MESSAGE(again, message_of(again.error()));
  CHECK(again->txns == 1);
  CHECK(again->revision == revision->revision);
  check_job(log, "a", 1, 20);
  MESSAGE("bad batches change nothing");
  auto changed = records("c", 5, 5);
  changed.front().bytes = "other bytes";
  auto conflict = log.append(changed);
  REQUIRE_FALSE(conflict);
  CHECK(errc_of(conflict.error()) == errc::conflict);
  check_job(log, "c", 1, 20);
  auto backwards = log.append({{"d", 2, "x"}, {"d", 1, "y"}});
  REQUIRE_FALSE(backwards);
  CHECK(errc_of(backwards.error()) == errc::invalid_argument);
  CHECK(log.read("d", 1, 0)->empty());
  CHECK(errc_of(log.append({{"", 1, "x"}}).error()) == errc::invalid_argument);
  MESSAGE("8 writers through the group committer, one event at a time");
  group_committer committer{log};
  std::vector<std::thread> writers;
  std::atomic<int> failures{0};
  for (int w = 0; w < 8; ++w)
    writers.emplace_back([&, w] {
      auto job = "w" + std::to_string(w);
      for (auto& x : records(job, 1, 40))
        if (committer.submit({x}).get())
          ++failures;
    });
  for (auto& t : writers)
    t.join();
  CHECK(failures == 0);
  for (int w = 0; w < 8; ++w)
    check_job(log, "w" + std::to_string(w), 1, 40);
  // Each writer waits for its event, so 8 writers share batches.
  CHECK(committer.batches() < 8 * 40);
  MESSAGE(committer.batches(), " batches for 320 events");
}

TEST_CASE("etcd append splits a batch at job boundaries within limits") {
  leading replica{"split"};
  if (!replica.start())
    return;
  auto& log = *replica.log;
  const auto& keys = replica.keys;
  auto check_limits = [](const std::vector<txn>& txns) {
    for (const auto& t : txns) {
      CHECK(t.success().size() <= 128);
      CHECK(t.payload_bytes() <= size_t{3} << 19);
    }
  };
  MESSAGE("by count: 300 events of one job and 3 small jobs");
  std::vector<log_record> batch = records("big", 1, 300);
  for (auto job : {"s1", "s2", "s3"})
    for (auto& x : records(job, 1, 30))
      batch.push_back(x);
  auto plan = log.plan(batch, 1);
  REQUIRE(plan);
  check_limits(*plan);
  // 300 events + a meta per part need 3 parts; the small jobs (93 ops)
  // share the last part's room only when they fit whole.
  CHECK(plan->size() >= 3);
  for (const auto& t : *plan) {
    std::map<std::string, int> metas;
    for (const auto& op : t.success())
      if (op.key.find("/meta/") != std::string::npos)
        ++metas[op.key];
    for (const auto& [key, n] : metas)
      CHECK(n == 1);
  }
  // Each small job sits in one transaction.
  for (auto job : {"s1", "s2", "s3"}) {
    int holding = 0;
    for (const auto& t : *plan)
      for (const auto& op : t.success())
        if (op.key == keys.meta_key(job))
          ++holding;
    CHECK(holding == 1);
  }
  auto done = log.append(batch);
  REQUIRE_MESSAGE(done, message_of(done.error()));
  CHECK(done->txns == plan->size());
  check_job(log, "big", 1, 300);
  for (auto job : {"s1", "s2", "s3"})
    check_job(log, job, 1, 30);
  CHECK((*log.meta("big"))->last_seq == 300);
  MESSAGE("by size: 6 jobs of 5 events of 100 KiB");
  std::vector<log_record> heavy;
  for (int j = 0; j < 6; ++j)
    for (auto& x : records("h" + std::to_string(j), 1, 5, 100 * 1024))
      heavy.push_back(x);
  auto heavy_plan = log.plan(heavy, 1);
  REQUIRE(heavy_plan);
  check_limits(*heavy_plan);
  CHECK(heavy_plan->size() == 2);
  auto heavy_done = log.append(heavy);
  REQUIRE_MESSAGE(heavy_done, message_of(heavy_done.error()));
  for (int j = 0; j < 6; ++j)
    check_job(log, "h" + std::to_string(j), 1, 5, 100 * 1024);
  MESSAGE("one event above the limit is refused, nothing written");
  std::vector<log_record> too_big{{"t", 1, "small"},
                                  {"t", 2, std::string(2 << 20, 'x')}};
  auto refused = log.append(too_big);
  REQUIRE_FALSE(refused);
  CHECK(errc_of(refused.error()) == errc::invalid_argument);
  CHECK(log.read("t", 1, 0)->empty());
}

TEST_CASE("etcd election: one leads, the other takes over") {
  etcd_cluster cluster;
  auto c = start_and_connect(cluster);
  if (!c)
    return;
  layout keys{"elect"};
  std::atomic<int> a_lost{0};
  auto a = std::make_unique<leader_election>(
    c, election_for(keys, "a:8899"), [&](caf::error) { ++a_lost; });
  auto b_owner = std::make_unique<leader_election>(
    c, election_for(keys, "b:8899"));
  auto& b = *b_owner;
  auto won = a->try_campaign();
  REQUIRE(won);
  CHECK(*won);
  CHECK(a->leading());
  auto first_epoch = a->epoch();
  CHECK(first_epoch > 0);
  auto lost = b.try_campaign();
  REQUIRE(lost);
  CHECK_FALSE(*lost);
  CHECK_FALSE(b.leading());
  auto holder = b.leader();
  REQUIRE(holder);
  REQUIRE(holder->has_value());
  CHECK((*holder)->value == "a:8899");
  MESSAGE("a's renewals keep it leading past its TTL");
  std::this_thread::sleep_for(3s);
  CHECK(a->leading());
  CHECK_FALSE(*b.try_campaign());
  MESSAGE("b waits; a resigns; b takes over");
  auto waiting = std::async(std::launch::async,
                            [&] { return b.campaign(20s); });
  std::this_thread::sleep_for(300ms);
  CHECK(waiting.wait_for(0s) != std::future_status::ready);
  REQUIRE_FALSE(a->resign());
  CHECK_FALSE(a->leading());
  CHECK(a_lost == 0);
  REQUIRE(waiting.wait_for(20s) == std::future_status::ready);
  REQUIRE_FALSE(waiting.get());
  CHECK(b.leading());
  auto second_epoch = b.epoch();
  CHECK(second_epoch > first_epoch);
  CHECK((*b.leader())->value == "b:8899");
  MESSAGE("b goes away without resigning; a takes over when its lease "
          "expires");
  // Destroying b's election stops its renewals and leaves the key.
  b_owner.reset();
  leader_election a2{c, election_for(keys, "a:8899")};
  REQUIRE_FALSE(*a2.try_campaign());
  REQUIRE_FALSE(a2.campaign(20s));
  CHECK(a2.leading());
  CHECK(a2.epoch() > second_epoch);
  CHECK((*a2.leader())->value == "a:8899");
}

TEST_CASE("etcd fencing: a deposed leader's appends write nothing") {
  etcd_cluster cluster;
  auto c = start_and_connect(cluster);
  if (!c)
    return;
  layout keys{"fence"};
  std::promise<caf::error> a_lost;
  std::atomic<int> a_losses{0};
  leader_election a{c, election_for(keys, "a:8899"), [&](caf::error err) {
                      if (a_losses++ == 0)
                        a_lost.set_value(err);
                    }};
  REQUIRE_FALSE(a.campaign(10s));
  etcd_log a_log{c, a, keys};
  REQUIRE(a_log.append(records("j", 1, 10)));
  auto old_epoch = a.epoch();
  MESSAGE("a's lease is revoked behind its back; b takes over");
  auto holder = c->get(keys.leader_key());
  REQUIRE(holder);
  REQUIRE(holder->has_value());
  REQUIRE_FALSE(c->revoke((*holder)->lease));
  leader_election b{c, election_for(keys, "b:8899")};
  REQUIRE_FALSE(b.campaign(10s));
  MESSAGE("etcd refuses a transaction fenced by a's epoch");
  for (int i = 0; i < 50; ++i) {
    txn stale;
    stale.if_create_revision(keys.leader_key(), compare_result::equal,
                             old_epoch)
      .then_put(keys.event_key("j", 11), "stale");
    CHECK_FALSE(succeeds(*c, stale));
  }
  MESSAGE("a's appends are refused as deposed, and a knows it lost");
  for (int i = 0; i < 50; ++i) {
    auto refused = a_log.append(records("j", 11, 20));
    REQUIRE_FALSE(refused);
    CHECK(errc_of(refused.error()) == errc::deposed);
  }
  CHECK_FALSE(a.leading());
  CHECK(a.epoch() == 0);
  auto lost = a_lost.get_future();
  REQUIRE(lost.wait_for(10s) == std::future_status::ready);
  CHECK(errc_of(lost.get()) == errc::deposed);
  CHECK(a_losses == 1);
  check_job(a_log, "j", 1, 10);
  auto meta = a_log.meta("j");
  REQUIRE(meta);
  CHECK((*meta)->last_seq == 10);
  CHECK((*meta)->epoch == old_epoch);
  MESSAGE("b appends in its epoch");
  etcd_log b_log{c, b, keys};
  REQUIRE(b_log.append(records("j", 11, 12)));
  check_job(b_log, "j", 1, 12);
  CHECK((*b_log.meta("j"))->epoch == b.epoch());
  CHECK(b.epoch() > old_epoch);
}

TEST_CASE("etcd appends continue after the etcd leader is killed") {
  leading replica{"kill"};
  // The client starts on the member that is killed: its calls and watches
  // must move to another.
  if (!replica.start(5s, true))
    return;
  auto& cluster = replica.cluster;
  auto& log = *replica.log;
  // A watch of the job's events, as a standby's archive will follow them:
  // it must resume on another member without a gap or a repeat.
  std::mutex mtx;
  std::condition_variable cv;
  std::vector<std::string> watched;
  auto prefix = replica.keys.job_prefix("k");
  auto before = replica.c->range({prefix, prefix_end(prefix)});
  REQUIRE(before);
  auto w = replica.c->watch(
    {prefix, prefix_end(prefix)}, before->revision + 1,
    [&](std::vector<watch_event> events) {
      std::lock_guard<std::mutex> guard{mtx};
      for (auto& e : events)
        watched.push_back(e.kv.key);
      cv.notify_all();
    },
    [](caf::error) {});
  REQUIRE(w);
  std::atomic<uint64_t> acked{0};
  std::atomic<bool> stop{false};
  caf::error failure;
  std::thread appender([&] {
    uint64_t seq = 1;
    while (!stop) {
      auto done = log.append(records("k", seq, seq + 9));
      if (!done) {
        failure = done.error();
        return;
      }
      seq += 10;
      acked = seq - 1;
    }
  });
  auto wait_for_acked = [&](uint64_t n) {
    auto deadline = std::chrono::steady_clock::now() + 30s;
    while (acked < n && !failure && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(10ms);
    return acked >= n;
  };
  CHECK(wait_for_acked(200));
  auto leader = cluster.wait_for_leader();
  REQUIRE(leader);
  MESSAGE("SIGKILL etcd's leader, member ", *leader, ", after ", acked.load(),
          " events");
  cluster.kill(*leader, SIGKILL);
  auto at_kill = acked.load();
  CHECK(wait_for_acked(at_kill + 200));
  stop = true;
  appender.join();
  CHECK_MESSAGE(!failure, message_of(failure));
  MESSAGE(acked.load(), " events acknowledged, ", replica.c->failovers(),
          " calls moved to another member");
  auto next = cluster.wait_for_leader();
  REQUIRE(next);
  CHECK(*next != *leader);
  CHECK(replica.c->failovers() > 0);
  MESSAGE("no recoverd failover: the term survived");
  CHECK(replica.election->leading());
  CHECK(replica.lost == 0);
  check_job(log, "k", 1, acked.load());
  std::unique_lock<std::mutex> lock{mtx};
  cv.wait_for(lock, 20s, [&] { return watched.size() >= acked; });
  CAPTURE(watched.size());
  CAPTURE(acked.load());
  REQUIRE(watched.size() == acked);
  for (uint64_t seq = 1; seq <= acked; ++seq)
    CHECK(watched[seq - 1] == replica.keys.event_key("k", seq));
}

TEST_CASE("etcd records of every kind name their stream; other keys are "
          "none") {
  layout keys{"k"};
  for (auto kind : {record_kind::event, record_kind::snapshot,
                    record_kind::fleet_event, record_kind::fleet_snapshot}) {
    auto key = keys.event_key(stream_of(kind, "job 1%"), 42);
    auto x = parse_record(keys, key, "bytes");
    REQUIRE(x);
    CHECK(x->kind == kind);
    CHECK(x->name == "job 1%");
    CHECK(x->seq == 42);
    CHECK(x->bytes == "bytes");
  }
  CHECK_FALSE(parse_record(keys, keys.leader_key(), ""));
  CHECK_FALSE(parse_record(keys, keys.meta_key("j"), ""));
  CHECK_FALSE(parse_record(keys, keys.event_key("x/j", 1), ""));
  CHECK_FALSE(parse_record(layout{"other"}, keys.event_key("j", 1), ""));
  CHECK_FALSE(parse_record(keys, keys.job_prefix("j") + "12", ""));
}

TEST_CASE("etcd authority and archive: a follower's log gets every record "
          "the leader commits, once; etcd keeps a stream's latest snapshot "
          "and what follows, once every archive holds the rest") {
  leading replica{"archive"};
  if (!replica.start())
    return;
  etcd_authority authority{*replica.log, *replica.election, replica.c, 0ms};
  auto commit = [&](uint64_t from, uint64_t to, bool snapshot) {
    std::vector<snapshot_record> snaps;
    fleet_records fleet;
    if (snapshot)
      snaps.push_back({"a", to, "snap-a-" + std::to_string(to)});
    fleet.events = records("nodes", from, to);
    auto err = authority.commit(records("a", from, to), snaps, fleet);
    REQUIRE_MESSAGE(!err, message_of(err));
  };
  auto open_archive = [](const std::string& path) {
    recoverd::storage::event_log_options opts;
    opts.path = path;
    auto log = recoverd::storage::event_log::open(opts);
    REQUIRE(log);
    return std::move(*log);
  };
  recoverd::test::temp_dir dir;
  auto archive = open_archive(dir / "archive");
  archive_follower follower{replica.c, replica.keys, *archive, "replica-1"};
  REQUIRE_FALSE(follower.start());
  auto mark = replica.c->get(archived_key(replica.keys, "replica-1"));
  REQUIRE(mark);
  REQUIRE(*mark);
  commit(1, 5, true);
  MESSAGE("the snapshot's trim waits for the follower's archive");
  CHECK(authority.pending_trims() == 1);
  for (int i = 0; i < 200 && follower.archived_records() < 11; ++i)
    std::this_thread::sleep_for(10ms);
  CHECK(follower.archived_records() == 11);
  size_t trimmed = 0;
  for (int i = 0; i < 50 && trimmed == 0; ++i) {
    std::this_thread::sleep_for(100ms);
    auto t = authority.trim();
    REQUIRE_MESSAGE(t, message_of(t.error()));
    trimmed = *t;
  }
  CHECK(trimmed == 1);
  CHECK(authority.pending_trims() == 0);
  auto left = replica.log->read("a", 1, 100);
  REQUIRE(left);
  REQUIRE(left->size() == 1);
  CHECK(left->front().seq == 5);
  MESSAGE("a new replica's archive starts at the snapshot");
  auto fresh_log = open_archive(dir / "fresh");
  archive_follower fresh{replica.c, replica.keys, *fresh_log};
  REQUIRE_FALSE(fresh.start());
  CHECK(fresh.archived_records() == 7);
  auto fresh_snap = fresh_log->snapshot("a");
  REQUIRE(fresh_snap);
  REQUIRE(*fresh_snap);
  CHECK((*fresh_snap)->seq == 5);
  fresh.stop();
  MESSAGE("history is compacted only as far as the follower's archive "
          "reaches, so its watch goes on");
  auto compacted = authority.compact_history();
  REQUIRE_MESSAGE(compacted, message_of(compacted.error()));
  CHECK(*compacted > 0);
  CHECK(*compacted <= follower.archived_revision());
  auto again = authority.compact_history();
  REQUIRE(again);
  CHECK(*again == 0);
  MESSAGE("later commits arrive by the watch");
  commit(6, 9, false);
  for (int i = 0; i < 200 && follower.archived_records() < 19; ++i)
    std::this_thread::sleep_for(10ms);
  CHECK(follower.archived_records() == 19);
  commit(10, 12, true);
  MESSAGE("catching up reads what the watch may not have delivered yet, and "
          "stores nothing twice; a leader's follower leaves no mark");
  REQUIRE_FALSE(follower.catch_up());
  CHECK(follower.archived_records() == 26);
  REQUIRE_FALSE(follower.catch_up());
  CHECK(follower.archived_records() == 26);
  mark = replica.c->get(archived_key(replica.keys, "replica-1"));
  REQUIRE(mark);
  CHECK_FALSE(*mark);
  MESSAGE("the first follower's archive holds the whole history");
  auto events = archive->read("a", 1, 100);
  REQUIRE(events);
  REQUIRE(events->size() == 12);
  auto want = records("a", 1, 12);
  for (size_t i = 0; i < want.size(); ++i)
    CHECK((*events)[i].bytes == want[i].bytes);
  auto snap = archive->snapshot("a");
  REQUIRE(snap);
  REQUIRE(*snap);
  CHECK((*snap)->seq == 12);
  CHECK((*snap)->bytes == "snap-a-12");
  auto fleet = archive->read_fleet("nodes");
  REQUIRE(fleet);
  REQUIRE(fleet->events.size() == 12);
  CHECK(fleet->events.back().bytes == records("nodes", 12, 12)[0].bytes);
}

TEST_CASE("etcd authority: an append it cannot vouch for ends the term") {
  leading replica{"give-up"};
  if (!replica.start())
    return;
  etcd_authority authority{*replica.log, *replica.election, replica.c};
  REQUIRE_FALSE(authority.commit(records("a", 1, 3), {}, {}));
  MESSAGE("the same seqs with other bytes: etcd holds the first ones");
  auto err = authority.commit(records("a", 1, 3, 32), {}, {});
  CHECK(errc_of(err) == errc::deposed);
  CHECK(message_of(err).find("stepping down") != std::string::npos);
  CHECK(replica.lost == 1);
  CHECK_FALSE(replica.election->leading());
  MESSAGE("nothing more is written, and the leader key is gone");
  CHECK(errc_of(authority.commit(records("a", 4, 4), {}, {}))
        == errc::deposed);
  auto key = replica.c->get(replica.keys.leader_key());
  REQUIRE(key);
  CHECK_FALSE(*key);
  check_job(*replica.log, "a", 1, 3);
}

TEST_CASE("etcd hot standby: the follower folds the jobs as their events "
          "arrive; a leader takes them without a replay") {
  leading replica{"hot"};
  if (!replica.start())
    return;
  etcd_authority authority{*replica.log, *replica.election, replica.c};
  auto put = [](const std::string& id, uint64_t seq) {
    return log_record{
      id, seq,
      recoverd::storage::encode_event(
        {seq, 1'700'000'000'000, job_put{recoverd::test::make_job(id), true}})};
  };
  auto gone = [](const std::string& id, uint64_t seq) {
    return log_record{id, seq,
                      recoverd::storage::encode_event(
                        {seq, 1'700'000'000'001, job_deleted{}})};
  };
  REQUIRE_FALSE(authority.commit({put("j1", 1), put("j2", 1)}, {}, {}));
  recoverd::test::temp_dir dir;
  recoverd::storage::event_log_options opts;
  opts.path = dir / "archive";
  auto archive = recoverd::storage::event_log::open(opts);
  REQUIRE(archive);
  archive_follower follower{replica.c, replica.keys, **archive};
  REQUIRE_FALSE(follower.start());
  REQUIRE_FALSE(authority.commit({put("j1", 2), gone("j2", 2), put("j3", 1)},
                                 {}, {}));
  for (int i = 0; i < 200 && follower.folded_events() < 5; ++i)
    std::this_thread::sleep_for(10ms);
  CHECK(follower.folded_events() == 5);
  REQUIRE_FALSE(follower.catch_up());
  CHECK(follower.live_jobs() == std::pair<size_t, size_t>{3, 0});
  auto jobs = follower.take_jobs();
  REQUIRE_MESSAGE(jobs, message_of(jobs.error()));
  CHECK(jobs->events_replayed == 0);
  REQUIRE(jobs->live.size() == 2);
  CHECK(jobs->live[0].state.spec.job_id == "j1");
  CHECK(jobs->live[0].state.seq == 2);
  CHECK(jobs->live[1].state.spec.job_id == "j3");
  REQUIRE(jobs->deleted.size() == 1);
  CHECK(jobs->deleted[0].job_id == "j2");
  CHECK(jobs->deleted[0].seq == 2);
  MESSAGE("the same as a replay of the archive");
  auto replayed = recoverd::storage::replay_all(**archive);
  REQUIRE(replayed);
  REQUIRE(replayed->live.size() == 2);
  CHECK(replayed->live[0].state.seq == jobs->live[0].state.seq);
  CHECK(replayed->live[0].state.spec.pods.size()
        == jobs->live[0].state.spec.pods.size());
}

TEST_CASE("etcd over TLS with a client certificate") {
  if (!etcd_cluster::available()) {
    MESSAGE("skipped: ", etcd_cluster::binary, " is not installed");
    return;
  }
  test::test_pki pki{"recoverd"};
  etcd_cluster cluster{
    1, etcd_cluster::tls_files{pki.file("ca.pem"), pki.file("server.pem"),
                               pki.file("server.key")}};
  REQUIRE_MESSAGE(cluster.start(), cluster.why());
  client_options opts;
  opts.endpoints = {"https://" + cluster.endpoints().front()};
  opts.ca_file = pki.file("ca.pem");
  opts.cert_file = pki.file("recoverd.pem");
  opts.key_file = pki.file("recoverd.key");
  auto c = client::make(opts);
  REQUIRE_MESSAGE(c, message_of(c.error()));
  REQUIRE((*c)->put("/tls/k", "v"));
  auto kv = (*c)->get("/tls/k");
  REQUIRE(kv);
  REQUIRE(kv->has_value());
  CHECK((*kv)->value == "v");
  MESSAGE("without a client certificate, or without TLS, nothing gets in");
  opts.failover_budget = 1s;
  auto no_cert = opts;
  no_cert.cert_file.clear();
  no_cert.key_file.clear();
  auto anonymous = client::make(no_cert);
  REQUIRE(anonymous);
  auto refused = (*anonymous)->put("/tls/anonymous", "v");
  REQUIRE_FALSE(refused);
  CHECK(errc_of(refused.error()) == errc::storage_failure);
  auto plain_opts = opts;
  plain_opts.endpoints = cluster.endpoints();
  plain_opts.ca_file.clear();
  plain_opts.cert_file.clear();
  plain_opts.key_file.clear();
  auto plain = client::make(plain_opts);
  REQUIRE(plain);
  CHECK_FALSE((*plain)->put("/tls/plain", "v"));
  CHECK_FALSE((*(*c)->get("/tls/anonymous")).has_value());
  CHECK_FALSE((*(*c)->get("/tls/plain")).has_value());
}

} // TEST_SUITE
