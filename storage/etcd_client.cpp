#include "storage/etcd_client.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include <grpcpp/grpcpp.h>

#include "actors/error.hpp"
#include "etcd_rpc.grpc.pb.h"

namespace recoverd::storage::etcd {

namespace {

using clock = std::chrono::steady_clock;

/// A member address without its scheme, and whether it asked for TLS.
struct endpoint {
  std::string address;
  bool https = false;
};

std::optional<endpoint> parse_endpoint(const std::string& url) {
  endpoint result;
  std::string rest = url;
  if (rest.rfind("https://", 0) == 0) {
    result.https = true;
    rest = rest.substr(8);
  } else if (rest.rfind("http://", 0) == 0) {
    rest = rest.substr(7);
  }
  while (!rest.empty() && rest.back() == '/')
    rest.pop_back();
  auto colon = rest.rfind(':');
  if (rest.empty() || colon == std::string::npos || colon == 0
      || colon + 1 == rest.size()
      || rest.find('/') != std::string::npos)
    return std::nullopt;
  auto port = rest.substr(colon + 1);
  if (!std::all_of(port.begin(), port.end(),
                   [](char c) { return c >= '0' && c <= '9'; })
      || port.size() > 5 || std::stoi(port) > 65535)
    return std::nullopt;
  result.address = rest;
  return result;
}

caf::expected<std::string> read_pem(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  if (!in)
    return make_error(errc::invalid_argument,
                      "etcd: cannot read TLS file " + path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

/// Whether another member (or the same one a little later) may succeed:
/// the member is down or unreachable, it has no leader, or the request
/// timed out in raft.
bool retryable(const grpc::Status& st) {
  return st.error_code() == grpc::StatusCode::UNAVAILABLE
         || st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
}

caf::error from_status(const char* what, const grpc::Status& st) {
  auto msg = std::string{"etcd "} + what + ": " + st.error_message();
  switch (st.error_code()) {
    case grpc::StatusCode::INVALID_ARGUMENT:
      // Too many operations, a request too large, an empty key.
      return make_error(errc::invalid_argument, std::move(msg));
    case grpc::StatusCode::OUT_OF_RANGE:
      return make_error(errc::history_purged, std::move(msg));
    default:
      return make_error(errc::storage_failure, std::move(msg));
  }
}

key_value from_proto(const mvccpb::KeyValue& x) {
  key_value result;
  result.key = x.key();
  result.value = x.value();
  result.create_revision = x.create_revision();
  result.mod_revision = x.mod_revision();
  result.version = x.version();
  result.lease = x.lease();
  return result;
}

etcdserverpb::Compare_CompareResult to_proto(compare_result x) {
  switch (x) {
    case compare_result::equal:
      return etcdserverpb::Compare_CompareResult_EQUAL;
    case compare_result::not_equal:
      return etcdserverpb::Compare_CompareResult_NOT_EQUAL;
    case compare_result::greater:
      return etcdserverpb::Compare_CompareResult_GREATER;
    case compare_result::less:
      return etcdserverpb::Compare_CompareResult_LESS;
  }
  return etcdserverpb::Compare_CompareResult_EQUAL;
}

void to_proto(const compare& x, etcdserverpb::Compare& out) {
  out.set_key(x.key);
  out.set_result(to_proto(x.result));
  switch (x.target) {
    case compare_target::create_revision:
      out.set_target(etcdserverpb::Compare_CompareTarget_CREATE);
      out.set_create_revision(x.number);
      break;
    case compare_target::mod_revision:
      out.set_target(etcdserverpb::Compare_CompareTarget_MOD);
      out.set_mod_revision(x.number);
      break;
    case compare_target::version:
      out.set_target(etcdserverpb::Compare_CompareTarget_VERSION);
      out.set_version(x.number);
      break;
    case compare_target::value:
      out.set_target(etcdserverpb::Compare_CompareTarget_VALUE);
      out.set_value(x.value);
      break;
  }
}

void to_proto(const txn_op& x, etcdserverpb::RequestOp& out) {
  if (x.is_delete) {
    auto* del = out.mutable_request_delete_range();
    del->set_key(x.key);
    del->set_range_end(x.range_end);
  } else {
    auto* put = out.mutable_request_put();
    put->set_key(x.key);
    put->set_value(x.value);
    put->set_lease(x.lease);
  }
}

} // namespace

caf::error validate(const client_options& opts) {
  if (opts.endpoints.empty())
    return make_error(errc::invalid_argument, "etcd: no endpoints");
  for (const auto& url : opts.endpoints)
    if (!parse_endpoint(url))
      return make_error(errc::invalid_argument,
                        "etcd: endpoint '" + url
                          + "' is not [http[s]://]host:port");
  if (opts.cert_file.empty() != opts.key_file.empty())
    return make_error(errc::invalid_argument,
                      "etcd: a client certificate needs its key and the "
                      "key its certificate");
  for (const auto* f : {&opts.ca_file, &opts.cert_file, &opts.key_file})
    if (!f->empty() && !std::filesystem::is_regular_file(*f))
      return make_error(errc::invalid_argument,
                        "etcd: TLS file " + *f + " does not exist");
  if (opts.rpc_timeout.count() <= 0 || opts.failover_budget.count() <= 0)
    return make_error(errc::invalid_argument,
                      "etcd: timeouts must be positive");
  return {};
}

std::string prefix_end(std::string prefix) {
  // The smallest key greater than every key starting with `prefix`: the
  // prefix with its last byte below 0xff incremented. All 0xff: every key.
  while (!prefix.empty()) {
    auto& last = prefix.back();
    if (static_cast<unsigned char>(last) < 0xff) {
      last = static_cast<char>(static_cast<unsigned char>(last) + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');
}

// -- txn ----------------------------------------------------------------------

txn& txn::if_create_revision(std::string key, compare_result r, int64_t rev) {
  payload_bytes_ += key.size();
  compares_.push_back(
    {std::move(key), compare_target::create_revision, r, rev, {}});
  return *this;
}

txn& txn::if_mod_revision(std::string key, compare_result r, int64_t rev) {
  payload_bytes_ += key.size();
  compares_.push_back(
    {std::move(key), compare_target::mod_revision, r, rev, {}});
  return *this;
}

txn& txn::if_value(std::string key, compare_result r, std::string value) {
  payload_bytes_ += key.size() + value.size();
  compares_.push_back(
    {std::move(key), compare_target::value, r, 0, std::move(value)});
  return *this;
}

txn& txn::then_put(std::string key, std::string value, int64_t lease) {
  payload_bytes_ += key.size() + value.size();
  success_.push_back({false, std::move(key), std::move(value), lease, {}});
  return *this;
}

txn& txn::then_delete(std::string key, std::string range_end) {
  payload_bytes_ += key.size() + range_end.size();
  success_.push_back({true, std::move(key), {}, 0, std::move(range_end)});
  return *this;
}

txn& txn::else_put(std::string key, std::string value, int64_t lease) {
  payload_bytes_ += key.size() + value.size();
  failure_.push_back({false, std::move(key), std::move(value), lease, {}});
  return *this;
}

// -- client -------------------------------------------------------------------

/// One member: its channel and stubs.
struct member {
  std::string address;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<etcdserverpb::KV::Stub> kv;
  std::unique_ptr<etcdserverpb::Lease::Stub> lease;
  std::unique_ptr<etcdserverpb::Watch::Stub> watch;
};

struct client::impl {
  std::vector<member> members;
  /// The member that answered last: calls start there.
  std::atomic<size_t> current{0};

  /// Runs `f(member, context)` on the members in turn until it succeeds,
  /// fails for a reason another member would share, or the budget is spent.
  template <class F>
  caf::error call(client& self, const char* what, F&& f,
                  std::chrono::milliseconds budget
                  = std::chrono::milliseconds::max()) {
    const auto& opts = self.opts_;
    auto deadline = clock::now() + std::min(budget, opts.failover_budget);
    auto backoff = std::chrono::milliseconds(25);
    auto first = current.load();
    auto n = members.size();
    grpc::Status last;
    for (size_t attempt = 0;; ++attempt) {
      auto index = (first + attempt) % n;
      auto& m = members[index];
      grpc::ClientContext ctx;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - clock::now());
      ctx.set_deadline(
        std::chrono::system_clock::now()
        + std::min(std::max(left, std::chrono::milliseconds(50)),
                   opts.rpc_timeout));
      auto st = f(m, ctx);
      if (st.ok()) {
        current.store(index);
        return {};
      }
      if (!retryable(st))
        return from_status(what, st);
      last = st;
      if (clock::now() >= deadline) {
        return make_error(errc::storage_failure,
                          std::string{"etcd "} + what + ": no member answered "
                            + "within the failover budget; last: "
                            + m.address + ": " + st.error_message());
      }
      self.failovers_ += 1;
      // A full round of refusals: the cluster is between leaders or down;
      // wait a little before the next round.
      if ((attempt + 1) % n == 0) {
        std::this_thread::sleep_for(backoff);
        backoff = std::min(backoff * 2, std::chrono::milliseconds(400));
      }
    }
  }
};

client::client(client_options opts)
  : opts_(std::move(opts)), impl_(std::make_unique<impl>()) {
  // nop
}

client::~client() = default;

caf::expected<std::shared_ptr<client>> client::make(client_options opts) {
  if (auto err = validate(opts))
    return err;
  bool tls = !opts.ca_file.empty() || !opts.cert_file.empty();
  for (const auto& url : opts.endpoints)
    tls = tls || parse_endpoint(url)->https;
  std::shared_ptr<grpc::ChannelCredentials> creds;
  if (tls) {
    grpc::SslCredentialsOptions ssl;
    if (!opts.ca_file.empty()) {
      auto ca = read_pem(opts.ca_file);
      if (!ca)
        return ca.error();
      ssl.pem_root_certs = std::move(*ca);
    }
    if (!opts.cert_file.empty()) {
      auto cert = read_pem(opts.cert_file);
      if (!cert)
        return cert.error();
      auto key = read_pem(opts.key_file);
      if (!key)
        return key.error();
      ssl.pem_cert_chain = std::move(*cert);
      ssl.pem_private_key = std::move(*key);
    }
    creds = grpc::SslCredentials(ssl);
  } else {
    creds = grpc::InsecureChannelCredentials();
  }
  std::shared_ptr<client> result{new client(std::move(opts))};
  for (const auto& url : result->opts_.endpoints) {
    grpc::ChannelArguments args;
    // A member that comes back is used again within a second.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    args.SetMaxReceiveMessageSize(-1);
    // One channel per member, not shared with other clients in-process.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    member m;
    m.address = parse_endpoint(url)->address;
    m.channel = grpc::CreateCustomChannel(m.address, creds, args);
    m.kv = etcdserverpb::KV::NewStub(m.channel);
    m.lease = etcdserverpb::Lease::NewStub(m.channel);
    m.watch = etcdserverpb::Watch::NewStub(m.channel);
    result->impl_->members.push_back(std::move(m));
  }
  return result;
}

caf::expected<range_result> client::range(const key_range& r, int64_t limit) {
  etcdserverpb::RangeRequest req;
  req.set_key(r.key);
  req.set_range_end(r.range_end);
  req.set_limit(limit);
  etcdserverpb::RangeResponse resp;
  auto err = impl_->call(*this, "range", [&](member& m, auto& ctx) {
    resp.Clear();
    return m.kv->Range(&ctx, req, &resp);
  });
  if (err)
    return err;
  range_result result;
  result.more = resp.more();
  result.revision = resp.header().revision();
  result.kvs.reserve(resp.kvs_size());
  for (const auto& kv : resp.kvs())
    result.kvs.push_back(from_proto(kv));
  return result;
}

caf::expected<std::optional<key_value>> client::get(const std::string& key) {
  auto r = range({key, {}}, 1);
  if (!r)
    return r.error();
  if (r->kvs.empty())
    return std::optional<key_value>{};
  return std::optional<key_value>{std::move(r->kvs.front())};
}

caf::expected<int64_t>
client::put(const std::string& key, const std::string& value, int64_t lease) {
  etcdserverpb::PutRequest req;
  req.set_key(key);
  req.set_value(value);
  req.set_lease(lease);
  etcdserverpb::PutResponse resp;
  auto err = impl_->call(*this, "put", [&](member& m, auto& ctx) {
    return m.kv->Put(&ctx, req, &resp);
  });
  if (err)
    return err;
  return resp.header().revision();
}

caf::expected<txn_result> client::commit(const txn& t) {
  etcdserverpb::TxnRequest req;
  for (const auto& c : t.compares())
    to_proto(c, *req.add_compare());
  for (const auto& op : t.success())
    to_proto(op, *req.add_success());
  for (const auto& op : t.failure())
    to_proto(op, *req.add_failure());
  etcdserverpb::TxnResponse resp;
  auto err = impl_->call(*this, "txn", [&](member& m, auto& ctx) {
    return m.kv->Txn(&ctx, req, &resp);
  });
  if (err)
    return err;
  return txn_result{resp.succeeded(), resp.header().revision()};
}

caf::expected<lease> client::grant(int64_t ttl_s) {
  if (ttl_s <= 0)
    return make_error(errc::invalid_argument,
                      "etcd: a lease needs a positive TTL");
  etcdserverpb::LeaseGrantRequest req;
  req.set_ttl(ttl_s);
  etcdserverpb::LeaseGrantResponse resp;
  auto err = impl_->call(*this, "lease grant", [&](member& m, auto& ctx) {
    return m.lease->LeaseGrant(&ctx, req, &resp);
  });
  if (err)
    return err;
  if (!resp.error().empty())
    return make_error(errc::storage_failure,
                      "etcd lease grant: " + resp.error());
  return lease{resp.id(), resp.ttl()};
}

caf::expected<int64_t>
client::keep_alive(int64_t lease_id, std::chrono::milliseconds budget) {
  etcdserverpb::LeaseKeepAliveRequest req;
  req.set_id(lease_id);
  etcdserverpb::LeaseKeepAliveResponse resp;
  auto err = impl_->call(*this, "lease keep-alive", [&](member& m,
                                                         auto& ctx) {
    // One round trip on the bidirectional stream: the renewal is rare
    // (every TTL/3), and a stream per renewal fails over like any call.
    auto stream = m.lease->LeaseKeepAlive(&ctx);
    bool ok = stream->Write(req) && stream->Read(&resp);
    stream->WritesDone();
    if (ok) {
      ctx.TryCancel();
      stream->Finish();
      return grpc::Status::OK;
    }
    auto st = stream->Finish();
    return st.ok() ? grpc::Status{grpc::StatusCode::UNAVAILABLE,
                                  "keep-alive stream closed"}
                   : st;
  }, budget);
  if (err)
    return err;
  return resp.ttl();
}

caf::error client::revoke(int64_t lease_id) {
  etcdserverpb::LeaseRevokeRequest req;
  req.set_id(lease_id);
  etcdserverpb::LeaseRevokeResponse resp;
  auto err = impl_->call(*this, "lease revoke", [&](member& m, auto& ctx) {
    auto st = m.lease->LeaseRevoke(&ctx, req, &resp);
    // Already expired (or revoked by an earlier attempt): the goal holds.
    if (st.error_code() == grpc::StatusCode::NOT_FOUND)
      return grpc::Status::OK;
    return st;
  });
  return err;
}

caf::error client::compact(int64_t revision) {
  etcdserverpb::CompactionRequest req;
  req.set_revision(revision);
  req.set_physical(true);
  etcdserverpb::CompactionResponse resp;
  return impl_->call(*this, "compact", [&](member& m, auto& ctx) {
    return m.kv->Compact(&ctx, req, &resp);
  });
}

// -- watcher ------------------------------------------------------------------

struct watcher::impl {
  std::shared_ptr<client> owner;
  key_range range;
  /// Revision of the next event to deliver (0: from now).
  int64_t next_revision = 0;
  event_handler on_events;
  error_handler on_error;
  std::atomic<bool> created{false};
  std::mutex mtx;
  grpc::ClientContext* ctx = nullptr;
  bool stopping = false;
};

bool watcher::created() const {
  return impl_ && impl_->created.load();
}

watcher::~watcher() {
  stop();
}

void watcher::stop() {
  if (!impl_)
    return;
  {
    std::lock_guard<std::mutex> guard{impl_->mtx};
    impl_->stopping = true;
    if (impl_->ctx != nullptr)
      impl_->ctx->TryCancel();
  }
  if (thread_.joinable()) {
    // A handler that stops its own watcher cannot wait for itself.
    if (thread_.get_id() == std::this_thread::get_id())
      thread_.detach();
    else
      thread_.join();
  }
}

caf::expected<std::unique_ptr<watcher>>
client::watch(const key_range& r, int64_t start_revision,
              watcher::event_handler on_events,
              watcher::error_handler on_error) {
  if (r.key.empty())
    return make_error(errc::invalid_argument, "etcd watch: empty key");
  std::unique_ptr<watcher> result{new watcher};
  result->impl_ = std::make_shared<watcher::impl>();
  auto w = result->impl_;
  w->owner = shared_from_this();
  w->range = r;
  w->next_revision = start_revision;
  w->on_events = std::move(on_events);
  w->on_error = std::move(on_error);
  result->thread_ = std::thread([w] {
    auto& self = *w->owner;
    auto& members = self.impl_->members;
    auto n = members.size();
    auto index = self.impl_->current.load();
    auto deadline = clock::now() + self.opts_.failover_budget;
    auto backoff = std::chrono::milliseconds(25);
    std::string last_failure;
    for (;;) {
      auto& m = members[index % n];
      grpc::ClientContext ctx;
      // Without a leader a member would keep the stream open and silent;
      // etcd cancels it instead when it is asked to require one.
      ctx.AddMetadata("hasleader", "true");
      {
        std::lock_guard<std::mutex> guard{w->mtx};
        if (w->stopping)
          return;
        w->ctx = &ctx;
      }
      auto stream = m.watch->Watch(&ctx);
      etcdserverpb::WatchRequest req;
      auto* create = req.mutable_create_request();
      create->set_key(w->range.key);
      create->set_range_end(w->range.range_end);
      create->set_start_revision(w->next_revision);
      etcdserverpb::WatchResponse resp;
      caf::error fatal;
      if (stream->Write(req)) {
        while (stream->Read(&resp)) {
          if (resp.compact_revision() != 0) {
            fatal = make_error(errc::history_purged,
                               "etcd watch: revisions before "
                                 + std::to_string(resp.compact_revision())
                                 + " were compacted");
            break;
          }
          if (resp.canceled()) {
            last_failure = "watch canceled: " + resp.cancel_reason();
            break;
          }
          if (resp.created()) {
            // Events start after the revision of the creation when the
            // watch began "now".
            if (w->next_revision == 0)
              w->next_revision = resp.header().revision() + 1;
            w->created.store(true);
            deadline = clock::now() + self.opts_.failover_budget;
            backoff = std::chrono::milliseconds(25);
          }
          if (resp.events_size() == 0)
            continue;
          std::vector<watch_event> events;
          events.reserve(resp.events_size());
          for (const auto& e : resp.events()) {
            events.push_back(
              {e.type() == mvccpb::Event_EventType_DELETE, from_proto(e.kv())});
            w->next_revision = e.kv().mod_revision() + 1;
          }
          w->on_events(std::move(events));
        }
      }
      ctx.TryCancel();
      auto status = stream->Finish();
      {
        std::lock_guard<std::mutex> guard{w->mtx};
        w->ctx = nullptr;
        if (w->stopping)
          return;
      }
      if (fatal) {
        w->on_error(std::move(fatal));
        return;
      }
      if (!status.ok() && !retryable(status)
          && status.error_code() != grpc::StatusCode::CANCELLED) {
        w->on_error(from_status("watch", status));
        return;
      }
      if (!status.ok())
        last_failure = m.address + ": " + status.error_message();
      if (clock::now() >= deadline) {
        w->on_error(make_error(errc::storage_failure,
                               "etcd watch: no member answered within the "
                               "failover budget; last: "
                                 + last_failure));
        return;
      }
      // Resume on the next member from the revision after the last event.
      self.failovers_ += 1;
      ++index;
      if (index % n == 0) {
        std::this_thread::sleep_for(backoff);
        backoff = std::min(backoff * 2, std::chrono::milliseconds(400));
      }
    }
  });
  return result;
}

} // namespace recoverd::storage::etcd
