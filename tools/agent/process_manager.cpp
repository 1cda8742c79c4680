#include "process_manager.hpp"

#include <algorithm>
#include <optional>

namespace recoverd::agent {

namespace {

bool has_action(const ::ProcessManageSignal& sig, const std::string& action) {
  const auto& xs = sig.actions();
  return std::find(xs.begin(), xs.end(), action) != xs.end();
}

std::vector<std::string> fault_ranks(const ::ProcessManageSignal& sig) {
  std::vector<std::string> result;
  for (const auto& f : sig.faultranks())
    result.push_back(f.rankid());
  return result;
}

// Which operation a signal asks for; false for signals that only inform
// (keep-alive, pre-exit, start-agent pause/continue).
bool operation_of(const ::ProcessManageSignal& sig, operation& op) {
  const auto& type = sig.signaltype();
  if (type == "stopTrain") {
    op = has_action(sig, "pause_train") ? operation::pause : operation::stop;
    return true;
  }
  if (type == "saveAndExit") {
    op = operation::dump;
    return true;
  }
  if (type == "killMaster" || type == "faultNodesExit") {
    op = operation::exit;
    return true;
  }
  if (type != "changeStrategy")
    return false;
  const auto& s = sig.changestrategy();
  if (s == "continue")
    op = operation::continue_training;
  else if (s == "dump")
    op = operation::dump;
  else if (s == "exit")
    op = operation::exit;
  else
    op = operation::restart_ranks;
  return true;
}

std::string join(const std::vector<std::string>& xs) {
  std::string out;
  for (const auto& x : xs)
    out += (out.empty() ? "" : ",") + x;
  return out;
}

} // namespace

const char* to_string(operation op) {
  switch (op) {
    case operation::stop:
      return "stop";
    case operation::pause:
      return "pause";
    case operation::continue_training:
      return "continue";
    case operation::restart_ranks:
      return "restart-ranks";
    case operation::dump:
      return "dump";
    case operation::exit:
      return "exit";
    case operation::switch_nic:
      return "switch-nic";
    case operation::stress_test:
      return "stress-test";
  }
  return "?";
}

process_manager::process_manager(const std::string& server, std::string job_id,
                                 std::vector<std::string> strategies)
  : job_id_(std::move(job_id)),
    strategies_(std::move(strategies)),
    agent_(std::make_unique<client>(server, job_id_, "process-manager")) {
  // nop
}

process_manager::~process_manager() {
  stop();
}

void process_manager::register_callbacks(operation op, callback fn) {
  std::lock_guard<std::mutex> guard{mtx_};
  callbacks_[op] = std::move(fn);
}

void process_manager::on_event(std::function<void(const std::string&)> fn) {
  std::lock_guard<std::mutex> guard{mtx_};
  on_event_ = std::move(fn);
}

void process_manager::note(const std::string& line) {
  std::function<void(const std::string&)> f;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    f = on_event_;
  }
  if (f)
    f(line);
}

::Status process_manager::start() {
  auto st = agent_->init_clusterd();
  if (st.code() != 0)
    return st;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stopping_ = false;
  }
  runner_ = std::thread{[this] { run(); }};
  agent_->start_subscribe([this](const ::ProcessManageSignal& sig) {
    if (sig.signaltype() == "keep-alive")
      return;
    std::string line = "got " + sig.signaltype();
    if (!sig.changestrategy().empty())
      line += " " + sig.changestrategy();
    if (!sig.extraparams().empty())
      line += " (" + sig.extraparams() + ")";
    if (sig.timeout() != 0)
      line += " (timeout " + std::to_string(sig.timeout()) + ")";
    note(line);
    request req;
    // globalFault asks what the processes can do; the manager answers it.
    if (!operation_of(sig, req.op) && sig.signaltype() != "globalFault")
      return;
    req.signal = sig;
    req.strategy = sig.changestrategy();
    req.ranks = fault_ranks(sig);
    req.key = signal_key(sig);
    post(std::move(req));
  });
  ::ClientInfo who;
  who.set_jobid(job_id_);
  // stub() each time a stream opens: with several recoverd replicas it is
  // the one the agent's calls and subscription failed over to.
  workers_.emplace_back([this, who] {
    worker_loop<::SwitchRankList>(
      [this, who](grpc::ClientContext* ctx) {
        return agent_->stub().SubscribeNotifySwitch(ctx, who);
      },
      [this](const ::SwitchRankList& x) {
        request req;
        req.op = operation::switch_nic;
        req.ranks = {x.rankid().begin(), x.rankid().end()};
        req.to_backup = {x.op().begin(), x.op().end()};
        note("got SwitchRankList " + join(req.ranks));
        post(std::move(req));
      });
  });
  workers_.emplace_back([this, who] {
    worker_loop<::StressTestRankParams>(
      [this, who](grpc::ClientContext* ctx) {
        return agent_->stub().SubscribeNotifyExecStressTest(ctx, who);
      },
      [this](const ::StressTestRankParams& x) {
        request req;
        req.op = operation::stress_test;
        for (const auto& [rank, list] : x.stressparam()) {
          req.ranks.push_back(rank);
          req.stress_ops[rank] = {list.ops().begin(), list.ops().end()};
        }
        note("got StressTestRankParams for " + std::to_string(req.ranks.size())
             + " ranks");
        post(std::move(req));
      });
  });
  return st;
}

template <class Msg, class Open>
void process_manager::worker_loop(Open open, std::function<void(const Msg&)> take) {
  for (;;) {
    grpc::ClientContext ctx;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (stopping_)
        return;
      live_.push_back(&ctx);
    }
    auto reader = open(&ctx);
    Msg msg;
    while (reader->Read(&msg))
      take(msg);
    reader->Finish();
    std::unique_lock<std::mutex> lock{mtx_};
    live_.erase(std::remove(live_.begin(), live_.end(), &ctx), live_.end());
    if (cv_.wait_for(lock, std::chrono::milliseconds(100),
                     [this] { return stopping_; }))
      return;
  }
}

void process_manager::post(request req) {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    bool repeat = !req.key.empty()
      && std::find(pending_.begin(), pending_.end(), req.key) != pending_.end();
    if (!repeat) {
      if (!req.key.empty())
        pending_.push_back(req.key);
      queue_.push_back(std::move(req));
      cv_.notify_all();
      return;
    }
  }
  // Its report is still to come.
  note("got " + req.signal.signaltype() + " again while handling it; dropped");
}

void process_manager::run() {
  for (;;) {
    request req;
    {
      std::unique_lock<std::mutex> lock{mtx_};
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_)
        return;
      req = std::move(queue_.front());
      queue_.pop_front();
    }
    handle(req);
    std::lock_guard<std::mutex> guard{mtx_};
    pending_.erase(std::remove(pending_.begin(), pending_.end(), req.key),
                   pending_.end());
  }
}

void process_manager::handle(const request& req) {
  if (req.signal.signaltype() == "globalFault") {
    auto st = agent_->report_recover_strategy(strategies_);
    note("reported strategies " + join(strategies_)
         + (st.code() == 0 ? "" : " (answered " + std::to_string(st.code()) + ")"));
    return;
  }
  callback fn;
  std::optional<outcome> before;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (auto i = callbacks_.find(req.op); i != callbacks_.end())
      fn = i->second;
    if (!req.key.empty())
      for (const auto& [key, out] : handled_)
        if (key == req.key)
          before = out;
  }
  if (before) {
    // Done already; only the report may have been lost.
    note("got " + req.signal.signaltype() + " again; reporting its outcome "
         + std::to_string(before->code) + " again");
    report(req, *before);
    return;
  }
  outcome out;
  if (fn)
    out = fn(req);
  note(std::string{"ran "} + to_string(req.op)
       + (req.strategy.empty() ? "" : " " + req.strategy) + " -> "
       + std::to_string(out.code));
  if (!req.key.empty()) {
    std::lock_guard<std::mutex> guard{mtx_};
    handled_.emplace_back(req.key, out);
    if (handled_.size() > 64)
      handled_.pop_front();
  }
  report(req, out);
}

void process_manager::report(const request& req, const outcome& out) {
  ::Status st;
  const auto& type = req.signal.signaltype();
  switch (req.op) {
    case operation::stop:
    case operation::pause:
      st = agent_->report_stop_complete(out.code);
      note("reported stop complete " + std::to_string(out.code));
      break;
    case operation::continue_training:
    case operation::restart_ranks:
    case operation::dump: {
      auto strategy = type == "saveAndExit" ? std::string{"dump"} : req.strategy;
      st = agent_->report_recover_status(out.code, strategy, out.isolate_ranks);
      note("reported " + strategy + " status " + std::to_string(out.code));
      break;
    }
    case operation::exit:
      return; // nothing to report: the processes are gone
    case operation::switch_nic: {
      ::SwitchResult res;
      res.set_jobid(job_id_);
      res.set_result(out.ok);
      ::Status resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      ctx.set_wait_for_ready(true);
      if (auto g = agent_->stub().ReplySwitchNicResult(&ctx, res, &resp); !g.ok())
        resp.set_code(-1);
      st = resp;
      note(std::string{"replied switch "} + (out.ok ? "ok" : "failed"));
      break;
    }
    case operation::stress_test: {
      ::StressTestResult res;
      res.set_jobid(job_id_);
      for (const auto& [rank, ops] : req.stress_ops)
        for (auto op : ops) {
          auto key = std::to_string(op);
          stress_op_outcome r;
          if (auto i = out.stress.find(rank); i != out.stress.end())
            if (auto j = i->second.find(key); j != i->second.end())
              r = j->second;
          auto& x = (*(*res.mutable_stressresult())[rank].mutable_rankresult())[key];
          x.set_code(r.code);
          x.set_result(r.detail);
        }
      ::Status resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      ctx.set_wait_for_ready(true);
      if (auto g = agent_->stub().ReplyStressTestResult(&ctx, res, &resp); !g.ok())
        resp.set_code(-1);
      st = resp;
      note("replied stress test results");
      break;
    }
  }
  if (st.code() != 0)
    note("recoverd answered " + std::to_string(st.code()) + ": " + st.info());
}

void process_manager::stop() {
  {
    std::lock_guard<std::mutex> guard{mtx_};
    stopping_ = true;
    for (auto* ctx : live_)
      ctx->TryCancel();
    cv_.notify_all();
  }
  agent_->stop();
  for (auto& w : workers_)
    if (w.joinable())
      w.join();
  workers_.clear();
  if (runner_.joinable())
    runner_.join();
}

} // namespace recoverd::agent
