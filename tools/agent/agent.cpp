#include "agent.hpp"

#include <algorithm>

namespace recoverd::agent {

namespace {

constexpr auto call_timeout = std::chrono::seconds(10);

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
  grpc::ChannelArguments args;
  // As TaskD: keep-alive pings every 3 s, also without calls.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 3000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  channel_ = grpc::CreateCustomChannel(server,
                                       grpc::InsecureChannelCredentials(), args);
  stub_ = ::Recover::NewStub(channel_);
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

::Status client::init() {
  ::Status resp;
  auto ctx = context();
  if (auto st = stub_->Init(ctx.get(), who(), &resp); !st.ok())
    return failed(st);
  return resp;
}

::Status client::register_job() {
  ::Status resp;
  auto ctx = context();
  if (auto st = stub_->Register(ctx.get(), who(), &resp); !st.ok())
    return failed(st);
  return resp;
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
    auto stream = stub_->SubscribeProcessManageSignal(&ctx, who());
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

::Status client::report_stop_complete(int code,
                                      const std::vector<fault>& faults) {
  ::StopCompleteRequest req;
  req.set_jobid(job_id_);
  req.mutable_status()->set_code(code);
  add_faults(faults, req.mutable_faultranks());
  ::Status resp;
  auto ctx = context();
  if (auto st = stub_->ReportStopComplete(ctx.get(), req, &resp); !st.ok())
    return failed(st);
  return resp;
}

::Status client::report_recover_strategy(
  const std::vector<std::string>& strategies,
  const std::vector<fault>& faults) {
  ::RecoverStrategyRequest req;
  req.set_jobid(job_id_);
  for (const auto& s : strategies)
    req.add_strategies(s);
  add_faults(faults, req.mutable_faultranks());
  ::Status resp;
  auto ctx = context();
  if (auto st = stub_->ReportRecoverStrategy(ctx.get(), req, &resp); !st.ok())
    return failed(st);
  return resp;
}

::Status client::report_recover_status(int code, const std::string& strategy,
                                       const std::vector<std::string>& isolate) {
  ::RecoverStatusRequest req;
  req.set_jobid(job_id_);
  req.mutable_status()->set_code(code);
  req.set_strategy(strategy);
  for (const auto& r : isolate)
    req.add_isolaterankids(r);
  ::Status resp;
  auto ctx = context();
  if (auto st = stub_->ReportRecoverStatus(ctx.get(), req, &resp); !st.ok())
    return failed(st);
  return resp;
}

::Status client::report_process_fault(const std::vector<fault>& faults) {
  ::ProcessFaultRequest req;
  req.set_jobid(job_id_);
  add_faults(faults, req.mutable_faultranks());
  ::Status resp;
  auto ctx = context();
  if (auto st = stub_->ReportProcessFault(ctx.get(), req, &resp); !st.ok())
    return failed(st);
  return resp;
}

} // namespace recoverd::agent
