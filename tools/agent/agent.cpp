#include "agent.hpp"

#include <algorithm>

namespace recoverd::agent {

namespace {

constexpr auto call_timeout = std::chrono::seconds(10);

// With several addresses: one attempt at one replica, and the pause after a
// round in which none served. A standby and a dead replica answer at once;
// a leader's durable write may take seconds while etcd elects a leader of
// its own, and a report sent again after it was applied would be refused
// as unexpected: an attempt waits about a lease TTL (a paused leader's lead
// has gone to another replica by then).
constexpr auto attempt_timeout = std::chrono::seconds(5);
constexpr auto round_pause = std::chrono::milliseconds(100);

// The answers that send a call on to the next replica: a standby's (or a
// refused connection's) UNAVAILABLE, and an attempt that ran out of time.
bool moves_on(const grpc::Status& st) {
  return st.error_code() == grpc::StatusCode::UNAVAILABLE
         || st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED
         // A replica shutting a listener down (a standby taking the lead)
         // cancels the calls it holds.
         || st.error_code() == grpc::StatusCode::CANCELLED;
}

// "a, b,,c" -> {"a", "b", "c"}.
std::vector<std::string> split_addresses(const std::string& server) {
  std::vector<std::string> result;
  size_t pos = 0;
  for (;;) {
    auto end = server.find(',', pos);
    auto item = server.substr(pos, end == std::string::npos ? end : end - pos);
    auto first = item.find_first_not_of(" \t");
    if (first != std::string::npos) {
      auto last = item.find_last_not_of(" \t");
      result.push_back(item.substr(first, last - first + 1));
    }
    if (end == std::string::npos)
      return result;
    pos = end + 1;
  }
}

std::unique_ptr<grpc::ClientContext> context() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + call_timeout);
  // Across a daemon restart the channel is briefly down: wait for it (up to
  // the deadline) instead of failing the report at once.
  ctx->set_wait_for_ready(true);
  return ctx;
}

::Status failed(const grpc::Status& st) {
  ::Status result;
  result.set_code(-1);
  result.set_info(st.error_message());
  return result;
}

void add_faults(const std::vector<fault>& faults,
                google::protobuf::RepeatedPtrField<::FaultRank>* out) {
  for (const auto& [rank, type] : faults) {
    auto* f = out->Add();
    f->set_rankid(rank);
    f->set_faulttype(type);
  }
}

// Enough to span one flow's signals; older ones cannot come again.
constexpr size_t seen_limit = 64;

} // namespace

std::string signal_key(const ::ProcessManageSignal& sig) {
  // The parts are names and short texts; a newline separates them.
  std::string key = sig.uuid() + '\n' + sig.signaltype() + '\n'
    + sig.changestrategy() + '\n' + sig.extraparams();
  for (const auto& a : sig.actions())
    key += '\n' + a;
  return key;
}

client::client(const std::string& server, std::string job_id, std::string role)
  : job_id_(std::move(job_id)), role_(std::move(role)) {
  auto addresses = split_addresses(server);
  if (addresses.size() <= 1)
    addresses = {server};
  grpc::ChannelArguments args;
  // As TaskD: keep-alive pings every 3 s, also without calls.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 3000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  if (addresses.size() > 1) {
    // Calls do not wait for a channel here, so a channel that backed off
    // after its replica went away must try again soon: that replica may be
    // the next leader.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  }
  for (const auto& address : addresses) {
    channels_.push_back(grpc::CreateCustomChannel(
      address, grpc::InsecureChannelCredentials(), args));
    stubs_.push_back(::Recover::NewStub(channels_.back()));
  }
}

client::~client() {
  stop();
}

::ClientInfo client::who() const {
  ::ClientInfo info;
  info.set_jobid(job_id_);
  info.set_role(role_);
  return info;
}

void client::advance(size_t from) {
  // Both threads may see the same replica fail; only the first moves on.
  if (current_.compare_exchange_strong(from, (from + 1) % stubs_.size()))
    ++failovers_;
}

template <class Request>
::Status client::unary(rpc<Request> method, const Request& req) {
  ::Status resp;
  if (stubs_.size() == 1) {
    auto ctx = context();
    if (auto st = (stubs_.front().get()->*method)(ctx.get(), req, &resp);
        !st.ok())
      return failed(st);
    return resp;
  }
  // Only the leader serves: a standby answers UNAVAILABLE at once and a dead
  // leader refuses the connection, so no attempt waits for a channel.
  auto deadline = std::chrono::system_clock::now() + call_timeout;
  for (size_t attempt = 1;; ++attempt) {
    auto i = current_.load();
    grpc::ClientContext ctx;
    ctx.set_deadline(
      std::min(std::chrono::system_clock::now() + attempt_timeout, deadline));
    ctx.set_wait_for_ready(false);
    resp.Clear();
    auto st = (stubs_[i].get()->*method)(&ctx, req, &resp);
    if (st.ok())
      return resp;
    if (!moves_on(st) || std::chrono::system_clock::now() >= deadline)
      return failed(st);
    advance(i);
    if (attempt % stubs_.size() == 0) {
      // A full round and no leader: an election may be under way.
      std::this_thread::sleep_until(
        std::min(std::chrono::system_clock::now() + round_pause, deadline));
      if (std::chrono::system_clock::now() >= deadline)
        return failed(st);
    }
  }
}

::Status client::init() {
  return unary(&::Recover::Stub::Init, who());
}

::Status client::register_job() {
  return unary(&::Recover::Stub::Register, who());
}

::Status client::init_clusterd() {
  auto st = init();
  if (st.code() != 0)
    return st;
  return register_job();
}

void client::start_subscribe(
  std::function<void(const ::ProcessManageSignal&)> on_signal,
  std::chrono::milliseconds backoff) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (thread_.joinable())
    return;
  stopping_ = false;
  thread_ = std::thread{[this, on_signal, backoff] {
    subscribe_loop(on_signal, backoff);
  }};
}

void client::subscribe_loop(
  std::function<void(const ::ProcessManageSignal&)> on_signal,
  std::chrono::milliseconds backoff) {
  for (;;) {
    grpc::ClientContext ctx;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (stopping_)
        return;
      live_ = &ctx;
      ++subscriptions_;
    }
    auto i = current_.load();
    auto stream = stubs_[i]->SubscribeProcessManageSignal(&ctx, who());
    ::ProcessManageSignal sig;
    while (stream->Read(&sig)) {
      if (on_signal)
        on_signal(sig);
      std::lock_guard<std::mutex> guard{mtx_};
      ++received_;
      if (sig.signaltype() == "keep-alive")
        continue;
      auto key = signal_key(sig);
      if (std::find(seen_.begin(), seen_.end(), key) != seen_.end()) {
        ++redelivered_;
        continue;
      }
      seen_.push_back(std::move(key));
      if (seen_.size() > seen_limit)
        seen_.pop_front();
      queue_.push_back(sig);
      cv_.notify_all();
    }
    stream->Finish();
    std::unique_lock<std::mutex> lock{mtx_};
    live_ = nullptr;
    if (stopping_)
      return;
    // With several replicas, a stream that ended (a standby's UNAVAILABLE, a
    // killed or deposed leader) is re-opened at the next one.
    if (stubs_.size() > 1)
      advance(i);
    if (cv_.wait_for(lock, backoff, [this] { return stopping_; }))
      return;
  }
}

void client::stop() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stopping_ = true;
    if (live_ != nullptr)
      live_->TryCancel();
    cv_.notify_all();
  }
  if (thread_.joinable())
    thread_.join();
}

std::optional<::ProcessManageSignal>
client::next_signal(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock{mtx_};
  if (!cv_.wait_for(lock, timeout, [this] { return !queue_.empty(); }))
    return std::nullopt;
  auto result = std::move(queue_.front());
  queue_.pop_front();
  return result;
}

size_t client::received() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return received_;
}

size_t client::redelivered() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return redelivered_;
}

size_t client::subscriptions() const {
  std::lock_guard<std::mutex> guard{mtx_};
  return subscriptions_;
}

size_t client::failovers() const {
  return failovers_.load();
}

::Status client::report_stop_complete(int code,
                                      const std::vector<fault>& faults) {
  ::StopCompleteRequest req;
  req.set_jobid(job_id_);
  req.mutable_status()->set_code(code);
  add_faults(faults, req.mutable_faultranks());
  return unary(&::Recover::Stub::ReportStopComplete, req);
}

::Status client::report_recover_strategy(
  const std::vector<std::string>& strategies,
  const std::vector<fault>& faults) {
  ::RecoverStrategyRequest req;
  req.set_jobid(job_id_);
  for (const auto& s : strategies)
    req.add_strategies(s);
  add_faults(faults, req.mutable_faultranks());
  return unary(&::Recover::Stub::ReportRecoverStrategy, req);
}

::Status client::report_recover_status(int code, const std::string& strategy,
                                       const std::vector<std::string>& isolate) {
  ::RecoverStatusRequest req;
  req.set_jobid(job_id_);
  req.mutable_status()->set_code(code);
  req.set_strategy(strategy);
  for (const auto& r : isolate)
    req.add_isolaterankids(r);
  return unary(&::Recover::Stub::ReportRecoverStatus, req);
}

::Status client::report_process_fault(const std::vector<fault>& faults) {
  ::ProcessFaultRequest req;
  req.set_jobid(job_id_);
  add_faults(faults, req.mutable_faultranks());
  return unary(&::Recover::Stub::ReportProcessFault, req);
}

} // namespace recoverd::agent
