#include "storage/etcd_leader.hpp"

#include "actors/error.hpp"

namespace recoverd::storage::etcd {

namespace {

using clock = std::chrono::steady_clock;

caf::error deposed(std::string why) {
  return make_error(errc::deposed, "deposed: " + std::move(why));
}

int64_t ttl_seconds(std::chrono::milliseconds ttl) {
  return (ttl.count() + 999) / 1000;
}

} // namespace

caf::error validate(const election_options& opts) {
  if (opts.key.empty())
    return make_error(errc::invalid_argument, "election: empty leader key");
  if (opts.value.empty())
    return make_error(errc::invalid_argument,
                      "election: empty advertised address");
  if (opts.ttl < std::chrono::seconds(2) || opts.ttl.count() % 1000 != 0)
    return make_error(errc::invalid_argument,
                      "election: the lease TTL must be whole seconds, at "
                      "least 2 s");
  return {};
}

leader_election::leader_election(std::shared_ptr<client> c,
                                 election_options opts, loss_handler on_loss)
  : client_(std::move(c)), opts_(std::move(opts)),
    on_loss_(std::move(on_loss)) {
  // nop
}

leader_election::~leader_election() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    leading_ = false;
    epoch_ = 0;
  }
  reap();
}

caf::expected<bool> leader_election::try_campaign() {
  if (auto err = validate(opts_))
    return err;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (leading_ && clock::now() < expires_)
      return true;
  }
  reap();
  // The lease counts from before the grant: the local deadline is never
  // later than etcd's.
  auto sent = clock::now();
  auto granted = client_->grant(ttl_seconds(opts_.ttl));
  if (!granted)
    return granted.error();
  txn t;
  t.if_create_revision(opts_.key, compare_result::equal, 0)
    .then_put(opts_.key, opts_.value, granted->id);
  auto result = client_->commit(t);
  if (!result) {
    // Whatever the attempt did, revoking the lease undoes it.
    (void) client_->revoke(granted->id);
    return result.error();
  }
  int64_t epoch = 0;
  if (result->succeeded) {
    // The key was created by this transaction: at its revision.
    epoch = result->revision;
  } else {
    // A retried attempt may find the key its first try created.
    auto current = client_->get(opts_.key);
    if (current && *current && (*current)->lease == granted->id)
      epoch = (*current)->create_revision;
  }
  if (epoch == 0) {
    (void) client_->revoke(granted->id);
    return false;
  }
  start_term(granted->id, epoch, sent + std::chrono::seconds(granted->ttl_s));
  return true;
}

caf::error leader_election::campaign(std::chrono::milliseconds timeout,
                                     const std::function<bool()>& stop) {
  auto deadline = clock::now() + timeout;
  std::string last_failure = "another replica holds the leader key";
  for (;;) {
    auto won = try_campaign();
    if (won && *won)
      return {};
    if (!won) {
      if (errc_of(won.error()) == errc::invalid_argument)
        return won.error();
      last_failure = message_of(won.error());
    }
    if (stop && stop())
      return make_error(errc::shutting_down, "election: campaign stopped");
    if (clock::now() >= deadline)
      return make_error(errc::storage_failure,
                        "election: still a standby after "
                          + std::to_string(timeout.count())
                          + " ms: " + last_failure);
    // Wait for the key to go (deleted, or its lease expired), watching it
    // from just after the revision at which it was seen.
    auto seen = client_->range({opts_.key, {}});
    if (seen && seen->kvs.empty())
      continue;
    struct vacancy {
      std::mutex mtx;
      std::condition_variable cv;
      bool signalled = false;
    };
    auto v = std::make_shared<vacancy>();
    auto signal = [v] {
      std::lock_guard<std::mutex> guard{v->mtx};
      v->signalled = true;
      v->cv.notify_all();
    };
    std::unique_ptr<watcher> w;
    if (seen) {
      auto started = client_->watch(
        {opts_.key, {}}, seen->revision + 1,
        [signal](std::vector<watch_event> events) {
          for (const auto& e : events)
            if (e.is_delete)
              signal();
        },
        // Whatever ended the watch, trying again finds out more.
        [signal](caf::error) { signal(); });
      if (started)
        w = std::move(*started);
    }
    std::unique_lock<std::mutex> lock{v->mtx};
    // Also wake now and then: for `stop`, and in case the watch missed the
    // vacancy (it could not be started).
    while (!v->signalled && clock::now() < deadline && !(stop && stop())) {
      v->cv.wait_for(lock, std::chrono::milliseconds(100));
      if (!w)
        break;
    }
    lock.unlock();
    w.reset();
  }
}

bool leader_election::leading() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return leading_ && clock::now() < expires_;
}

int64_t leader_election::epoch() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return leading_ && clock::now() < expires_ ? epoch_ : 0;
}

caf::expected<std::optional<key_value>> leader_election::leader() {
  return client_->get(opts_.key);
}

caf::expected<txn_result> leader_election::fenced(txn t) {
  if (!t.failure().empty())
    return make_error(errc::invalid_argument,
                      "election: a fenced transaction writes nothing when "
                      "its compares fail");
  int64_t epoch = 0;
  bool expired = false;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (!leading_)
      return deposed("not the leader");
    epoch = epoch_;
    expired = clock::now() >= expires_;
  }
  if (expired) {
    auto why = deposed("the lease of epoch " + std::to_string(epoch)
                       + " ran out before it could be renewed");
    step_down(epoch, why);
    return why;
  }
  bool own_compares = !t.compares().empty();
  t.if_create_revision(opts_.key, compare_result::equal, epoch);
  auto result = client_->commit(t);
  if (!result || result->succeeded)
    return result;
  if (own_compares) {
    auto current = client_->get(opts_.key);
    if (!current)
      return current.error();
    if (*current && (*current)->create_revision == epoch)
      return result;
  }
  auto why = deposed("the leader key no longer belongs to epoch "
                     + std::to_string(epoch));
  step_down(epoch, why);
  return why;
}

caf::error leader_election::resign() {
  int64_t lease = 0;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    lease = lease_;
    lease_ = 0;
    leading_ = false;
    epoch_ = 0;
    cv_.notify_all();
  }
  reap();
  if (lease != 0)
    return client_->revoke(lease);
  return {};
}

void leader_election::give_up(caf::error why) {
  int64_t epoch = 0;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    epoch = epoch_;
  }
  step_down(epoch, std::move(why));
  (void) resign();
}

void leader_election::start_term(int64_t lease_id, int64_t epoch,
                                 clock::time_point expires) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    lease_ = lease_id;
    epoch_ = epoch;
    leading_ = true;
    expires_ = expires;
    renewer_ = std::thread([this, lease_id, epoch] {
      renew_loop(lease_id, epoch);
    });
  }
  // Anything that happens to the key after its creation ends the term: a
  // delete (revoked, expired, removed by hand) or a new key.
  auto w = client_->watch(
    {opts_.key, {}}, epoch + 1,
    [this, epoch](std::vector<watch_event> events) {
      for (const auto& e : events)
        if (e.is_delete || e.kv.create_revision != epoch) {
          step_down(epoch, deposed("the leader key of epoch "
                                   + std::to_string(epoch) + " was "
                                   + (e.is_delete ? "deleted" : "replaced")));
          return;
        }
    },
    // The watch is only the early warning: without it the renewals and the
    // fenced transactions still end the term.
    [](caf::error) {});
  std::lock_guard<std::mutex> guard{mtx_};
  if (w)
    key_watch_ = std::move(*w);
}

void leader_election::renew_loop(int64_t lease_id, int64_t epoch) {
  auto interval = opts_.ttl / 3;
  std::unique_lock<std::mutex> lock{mtx_};
  for (;;) {
    if (cv_.wait_for(lock, interval,
                     [&] { return stopping_ || epoch_ != epoch; }))
      return;
    lock.unlock();
    auto sent = clock::now();
    auto ttl = client_->keep_alive(lease_id, interval);
    lock.lock();
    if (stopping_ || epoch_ != epoch)
      return;
    if (ttl && *ttl > 0) {
      expires_ = sent + std::chrono::seconds(*ttl);
      continue;
    }
    caf::error why;
    if (ttl)
      why = deposed("the lease of epoch " + std::to_string(epoch)
                    + " expired");
    else if (clock::now() >= expires_)
      why = deposed("the lease of epoch " + std::to_string(epoch)
                    + " could not be renewed before it expired: "
                    + message_of(ttl.error()));
    else
      continue;
    lock.unlock();
    step_down(epoch, std::move(why));
    return;
  }
}

void leader_election::step_down(int64_t epoch, caf::error why) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (!leading_ || epoch_ != epoch)
      return;
    leading_ = false;
    epoch_ = 0;
    cv_.notify_all();
  }
  if (on_loss_)
    on_loss_(std::move(why));
}

void leader_election::reap() {
  std::thread renewer;
  std::unique_ptr<watcher> key_watch;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (leading_)
      return;
    stopping_ = true;
    cv_.notify_all();
    renewer = std::move(renewer_);
    key_watch = std::move(key_watch_);
  }
  if (renewer.joinable())
    renewer.join();
  key_watch.reset();
  std::lock_guard<std::mutex> guard{mtx_};
  stopping_ = false;
}

} // namespace recoverd::storage::etcd
