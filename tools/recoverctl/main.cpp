// recoverctl: the operator CLI of recoverd. Talks to a running daemon over
// gRPC; JSON in and out is the proto3 JSON mapping of protos/platform.proto
// and protos/inspect.proto. `timeline`, `events` and `incidents` also work
// offline on a data directory (--data-dir), opened read-only, so they work on
// a copy of the log and while a daemon runs on it.
//
// Exit codes: 0 success; 1 the daemon refused the request (the message says
// why; offline: the job has no events; `status`: a component reports a
// problem or did not answer); 2 bad usage or bad input (nothing was
// sent); 3 the daemon (offline: the data directory) could not be reached.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include "actors/error.hpp"
#include "actors/model/incidents.hpp"
#include "actors/model/text.hpp"
#include "inspect.grpc.pb.h"
#include "platform.grpc.pb.h"
#include "recover.grpc.pb.h"
#include "services/inspect_convert.hpp"
#include "storage/event_codec.hpp"
#include "storage/event_log.hpp"
#include "storage/retention.hpp"
#include "tools/recoverctl/output.hpp"

namespace pb = recoverd::platform::v1;
namespace pi = recoverd::inspection::v1;
using recoverctl::output_format;

namespace {

constexpr int exit_refused = 1;
constexpr int exit_usage = 2;
constexpr int exit_unreachable = 3;

struct options {
  std::string server = "127.0.0.1:8899";
  /// TLS: the CA of the server certificate; empty: plaintext.
  std::string ca;
  /// mTLS: client certificate and key (PEM files).
  std::string cert;
  std::string key;
  /// Bearer token sent as `authorization: Bearer ...` (TLS only).
  std::string token;
  /// --timeout as given ("10", "5s", "500ms"), and parsed.
  std::string timeout = "10s";
  recoverd::millis timeout_ms{10'000};
  /// -o: "table" or "wide" for people, "json" or "yaml" for scripts.
  std::string output = "table";
  output_format format = output_format::table;

  /// True when the whole answer is printed (JSON or YAML), not a table.
  bool json() const {
    return format == output_format::json || format == output_format::yaml;
  }

  bool wide() const {
    return format == output_format::wide;
  }
};

// The -o of this run: set once by main, before any command runs.
output_format chosen_format = output_format::table;

int fail(int code, const std::string& msg) {
  std::cerr << "recoverctl: " << msg << "\n";
  return code;
}

// Maps a failed call to a message and an exit code.
int rpc_failed(const grpc::Status& st, const std::string& server) {
  if (st.error_code() == grpc::StatusCode::UNAVAILABLE
      && st.error_message().find("state change refused") == std::string::npos)
    return fail(exit_unreachable,
                "cannot reach recoverd at " + server + ": "
                  + st.error_message());
  if (st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED)
    return fail(exit_unreachable,
                "recoverd at " + server + " did not answer in time");
  return fail(exit_refused, st.error_message());
}

// A whole answer for scripts, as -o asked (JSON or YAML).
std::string structured(const google::protobuf::Message& msg) {
  return recoverctl::render(msg, chosen_format);
}

// One message as compact JSON (for JSON-lines streams).
std::string to_json_line(const google::protobuf::Message& msg) {
  google::protobuf::util::JsonPrintOptions opts;
  opts.always_print_primitive_fields = true;
  std::string out;
  if (!google::protobuf::util::MessageToJsonString(msg, &out, opts).ok())
    return "{}";
  return out;
}

// Reads a PEM file; exits with code 2 when it cannot.
std::string read_or_exit(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  if (!in) {
    std::cerr << "recoverctl: cannot read " << path << "\n";
    std::exit(2);
  }
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// The one channel of every command: plaintext, or TLS with --ca (plus a
// client certificate and/or a bearer token).
std::shared_ptr<grpc::Channel> channel_of(const options& opts) {
  if (opts.ca.empty())
    return grpc::CreateChannel(opts.server, grpc::InsecureChannelCredentials());
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = read_or_exit(opts.ca);
  if (!opts.cert.empty()) {
    ssl.pem_cert_chain = read_or_exit(opts.cert);
    ssl.pem_private_key = read_or_exit(opts.key);
  }
  auto creds = grpc::SslCredentials(ssl);
  if (!opts.token.empty())
    creds = grpc::CompositeChannelCredentials(
      creds, grpc::AccessTokenCredentials(opts.token));
  return grpc::CreateChannel(opts.server, creds);
}

class client {
public:
  explicit client(const options& opts) : opts_(opts) {
    stub_ = pb::Platform::NewStub(
      channel_of(opts));
  }

  std::unique_ptr<grpc::ClientContext> context() const {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + opts_.timeout_ms);
    return ctx;
  }

  pb::Platform::Stub& stub() {
    return *stub_;
  }

  bool json() const {
    return opts_.json();
  }

  const std::string& server() const {
    return opts_.server;
  }

private:
  const options& opts_;
  std::unique_ptr<pb::Platform::Stub> stub_;
};

int job_put(client& c, const std::string& file) {
  std::string text;
  if (file == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), {});
  } else {
    std::ifstream in{file};
    if (!in)
      return fail(exit_usage, file + ": cannot read");
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  pb::PutJobRequest req;
  auto st = google::protobuf::util::JsonStringToMessage(text,
                                                        req.mutable_spec());
  if (!st.ok())
    return fail(exit_usage, file + ": not a valid job file: "
                              + std::string{st.message()});
  pb::PutJobResponse resp;
  auto ctx = c.context();
  if (auto rst = c.stub().PutJob(ctx.get(), req, &resp); !rst.ok())
    return rpc_failed(rst, c.server());
  if (c.json()) {
    std::cout << structured(resp);
    return 0;
  }
  std::cout << "job " << resp.job().spec().jobid()
            << (resp.created() ? " created" : " updated") << " (seq "
            << resp.job().lastseq() << ")\n";
  return 0;
}

// One job's status for people: the fields an operator looks at first.
void print_job(const pb::JobStatus& j) {
  const auto& s = j.spec();
  int ranks = 0;
  for (const auto& p : s.pods())
    ranks += p.devices_size();
  auto row = [](const char* key, const std::string& value) {
    std::printf("%-12s %s\n", key, value.c_str());
  };
  row("JOB", s.jobid() + " (" + s.name() + ", namespace " + s.namespace_() + ")");
  row("STATE", j.recoverystate() + (j.uuid().empty() ? "" : ", flow " + j.uuid()));
  row("AGENT", std::string{j.subscribed()   ? "attached"
                           : j.registered() ? "registered, detached"
                           : j.inited()     ? "inited"
                                            : "-"}
                 + ", label " + (j.processrecoverlabel().empty() ? "-" : j.processrecoverlabel()));
  row("HEALTH", j.healthstate().empty() ? "-" : j.healthstate());
  row("TOPOLOGY", std::to_string(s.pods_size()) + " pods, " + std::to_string(ranks)
                    + " ranks");
  row("FLOWS", std::to_string(j.flows()) + (j.lastoutcome().empty() ? "" : ", last: " + j.lastoutcome()));
  row("SEQ", std::to_string(j.lastseq()));
  std::string annotations;
  for (const auto& [k, v] : std::map<std::string, std::string>{
         s.annotations().begin(), s.annotations().end()})
    annotations += (annotations.empty() ? "" : ", ") + k + "=" + v;
  row("ANNOTATIONS", annotations.empty() ? "-" : annotations);
}

int job_get(client& c, const std::string& id) {
  pb::JobRef req;
  req.set_jobid(id);
  pb::JobStatus resp;
  auto ctx = c.context();
  if (auto st = c.stub().GetJob(ctx.get(), req, &resp); !st.ok())
    return rpc_failed(st, c.server());
  if (c.json())
    std::cout << structured(resp);
  else
    print_job(resp);
  return 0;
}

int job_delete(client& c, const std::string& id) {
  pb::JobRef req;
  req.set_jobid(id);
  pb::DeleteJobResponse resp;
  auto ctx = c.context();
  if (auto st = c.stub().DeleteJob(ctx.get(), req, &resp); !st.ok())
    return rpc_failed(st, c.server());
  if (c.json())
    std::cout << structured(resp);
  else
    std::cout << "job " << id << " deleted (seq " << resp.lastseq() << ")\n";
  return 0;
}

int annotate(client& c, const std::string& id,
             const std::vector<std::string>& pairs, uint64_t expected_seq) {
  pb::SetAnnotationsRequest req;
  req.set_jobid(id);
  req.set_expectedseq(expected_seq);
  for (const auto& p : pairs) {
    auto eq = p.find('=');
    if (eq == std::string::npos) {
      if (p.size() > 1 && p.back() == '-') {
        req.add_remove(p.substr(0, p.size() - 1));
        continue;
      }
      return fail(exit_usage, "expected KEY=VALUE or KEY- (to remove), got \""
                                + p + "\"");
    }
    if (eq == 0)
      return fail(exit_usage, "empty annotation key in \"" + p + "\"");
    (*req.mutable_set())[p.substr(0, eq)] = p.substr(eq + 1);
  }
  pb::Annotations resp;
  auto ctx = c.context();
  if (auto st = c.stub().SetAnnotations(ctx.get(), req, &resp); !st.ok())
    return rpc_failed(st, c.server());
  if (c.json()) {
    std::cout << structured(resp);
    return 0;
  }
  for (const auto& [k, v] : std::map<std::string, std::string>{
         resp.annotations().begin(), resp.annotations().end()})
    std::cout << k << "=" << v << "\n";
  std::cout << "(label " << resp.processrecoverlabel() << ", seq " << resp.seq()
            << ")\n";
  return 0;
}

std::unique_ptr<::Recover::Stub> recover_stub(const options& opts) {
  return ::Recover::NewStub(
    channel_of(opts));
}

std::unique_ptr<grpc::ClientContext> deadline_context(const options& opts) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + opts.timeout_ms);
  return ctx;
}

/// The last message of a stream or the status it failed with.
struct followed {
  std::string last;
  grpc::Status status;
  explicit operator bool() const { return status.ok(); }
  const std::string& operator*() const { return last; }
  const std::string* operator->() const { return &last; }
  const grpc::Status& error() const { return status; }
};

// Prints an operator stream's messages until it ends (JSON: one object a
// line).
template <class Response>
followed follow_operator(std::unique_ptr<grpc::ClientReader<Response>> reader,
                         bool json) {
  followed result;
  Response msg;
  while (reader->Read(&msg)) {
    result.last = msg.msg();
    std::cout << (json ? to_json_line(msg) : result.last) << "\n" << std::flush;
  }
  result.status = reader->Finish();
  return result;
}

// Starts a link switch and follows the operator stream to the outcome.
int switch_nic(const options& opts, const std::string& id,
               const std::vector<std::string>& args) {
  ::SwitchNics req;
  req.set_jobid(id);
  std::string node;
  for (const auto& a : args) {
    auto eq = a.find('=');
    if (eq == std::string::npos) {
      node = a;
      continue;
    }
    if (node.empty())
      return fail(exit_usage, "name a NODE before " + a);
    auto dev = a.substr(0, eq);
    auto op = a.substr(eq + 1);
    if (dev.empty() || (op != "on" && op != "off"))
      return fail(exit_usage, "expected DEV=on or DEV=off, got \"" + a + "\"");
    auto& list = (*req.mutable_nicops())[node];
    list.add_dev(dev);
    list.add_op(op == "on");
  }
  if (req.nicops().empty())
    return fail(exit_usage, "nothing to switch: give NODE DEV=on|off ...");
  auto stub = recover_stub(opts);
  ::Status resp;
  auto ctx = deadline_context(opts);
  if (auto st = stub->SwitchNicTrack(ctx.get(), req, &resp); !st.ok())
    return rpc_failed(st, opts.server);
  if (resp.code() != 0)
    return fail(exit_refused, "switch refused (" + std::to_string(resp.code())
                                + "): " + resp.info());
  if (!opts.json())
    std::cout << "switch started: " << resp.info() << "\n" << std::flush;
  ::SwitchNicRequest follow;
  follow.set_jobid(id);
  grpc::ClientContext fctx;
  auto last = follow_operator(stub->SubscribeSwitchNicSignal(&fctx, follow),
                              opts.json());
  if (!last)
    return rpc_failed(last.error(), opts.server);
  return *last == "switch nic finish" ? 0 : exit_refused;
}

// Parses "aic,p2p" (or "0,1") into stress operation codes.
bool parse_stress_ops(const std::string& text, ::StressOpList& out,
                      std::string& error) {
  std::stringstream in{text};
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item == "aic" || item == "0")
      out.add_ops(0);
    else if (item == "p2p" || item == "1")
      out.add_ops(1);
    else if (!item.empty() && item.find_first_not_of("0123456789") == std::string::npos)
      out.add_ops(std::stoll(item)); // recoverd says why it is refused
    else {
      error = "unknown stress operation \"" + item + "\" (aic, p2p, 0 or 1)";
      return false;
    }
  }
  if (out.ops().empty()) {
    error = "no stress operations in \"" + text + "\"";
    return false;
  }
  return true;
}

// Starts an online stress test and follows the operator stream to the
// outcome.
int stress_test(const options& opts, const std::string& id,
                const std::string& all_nodes,
                const std::vector<std::string>& per_node) {
  ::StressTestParam req;
  req.set_jobid(id);
  std::string error;
  if (!all_nodes.empty() && !per_node.empty())
    return fail(exit_usage, "give either --all-nodes OPS or NODE=OPS ..., not both");
  if (!all_nodes.empty()) {
    ::StressOpList ops;
    if (!parse_stress_ops(all_nodes, ops, error))
      return fail(exit_usage, error);
    *req.mutable_allnodesops() = ops.ops();
  }
  for (const auto& a : per_node) {
    auto eq = a.find('=');
    if (eq == std::string::npos || eq == 0)
      return fail(exit_usage, "expected NODE=OPS, got \"" + a + "\"");
    if (!parse_stress_ops(a.substr(eq + 1),
                          (*req.mutable_stressparam())[a.substr(0, eq)], error))
      return fail(exit_usage, error);
  }
  if (req.allnodesops().empty() && req.stressparam().empty())
    return fail(exit_usage, "nothing to test: give --all-nodes OPS or NODE=OPS ...");
  auto stub = recover_stub(opts);
  ::Status resp;
  auto ctx = deadline_context(opts);
  if (auto st = stub->StressTest(ctx.get(), req, &resp); !st.ok())
    return rpc_failed(st, opts.server);
  if (resp.code() != 0)
    return fail(exit_refused, "stress test refused (" + std::to_string(resp.code())
                                + "): " + resp.info());
  if (!opts.json())
    std::cout << "stress test started: " << resp.info() << "\n" << std::flush;
  ::StressTestRequest follow;
  follow.set_jobid(id);
  grpc::ClientContext fctx;
  auto last = follow_operator(stub->SubscribeStressTestResponse(&fctx, follow),
                              opts.json());
  if (!last)
    return rpc_failed(last.error(), opts.server);
  return last->rfind("stress test finish", 0) == 0 ? 0 : exit_refused;
}

// Declares a node healthy again.
int node_clear(client& c, const std::string& node, const std::string& job) {
  pb::ClearNodeHealthRequest req;
  req.set_node(node);
  req.set_jobid(job);
  pb::ClearNodeHealthResponse resp;
  auto ctx = c.context();
  if (auto st = c.stub().ClearNodeHealth(ctx.get(), req, &resp); !st.ok())
    return rpc_failed(st, c.server());
  if (c.json()) {
    std::cout << structured(resp);
    return 0;
  }
  for (const auto& j : resp.jobids())
    std::cout << "node " << node << " cleared in job " << j << "\n";
  if (resp.noderegistry())
    std::cout << "node " << node << " cleared in the node registry\n";
  return 0;
}

// -- history: timeline, events, incidents ------------------------------------

/// Where a job's history comes from: a running daemon or a data directory.
struct history_source {
  const options& opts;
  std::string data_dir; // empty: the daemon at opts.server
};

std::chrono::system_clock::time_point deadline_of(const options& opts) {
  return std::chrono::system_clock::now() + opts.timeout_ms;
}

std::unique_ptr<pi::Inspect::Stub> inspect_stub(const options& opts) {
  return pi::Inspect::NewStub(
    channel_of(opts));
}

// Opens the log read-only; exit code 3 when it cannot.
int open_log(const std::string& dir,
             std::unique_ptr<recoverd::storage::event_log>& out) {
  recoverd::storage::event_log_options lo;
  lo.path = dir;
  lo.read_only = true;
  auto log = recoverd::storage::event_log::open(lo);
  if (!log)
    return fail(exit_unreachable, recoverd::message_of(log.error()));
  out = std::move(*log);
  return 0;
}

// Every event of `job` from `from` on, with incidents when asked for.
int load_history(const history_source& src, const std::string& job,
                 uint64_t from, std::vector<pi::EventRecord>& events,
                 pi::ListIncidentsResponse* incidents) {
  if (!src.data_dir.empty()) {
    std::unique_ptr<recoverd::storage::event_log> log;
    if (auto rc = open_log(src.data_dir, log))
      return rc;
    recoverd::job_history history;
    uint64_t count = 0;
    auto err = log->for_each(
      job, 1, [&](uint64_t seq, std::string_view bytes) -> caf::error {
        auto ev = recoverd::storage::decode_event(bytes);
        if (!ev)
          return ev.error();
        ++count;
        history.add(*ev);
        if (seq >= from) {
          recoverd::inspected_event x{job,
                                      ev->seq,
                                      ev->time_ms,
                                      recoverd::kind_name(ev->body),
                                      recoverd::describe(*ev),
                                      std::string{bytes}};
          events.emplace_back();
          recoverd::convert::to_proto(x, events.back());
        }
        return caf::none;
      });
    if (err)
      return fail(exit_refused, "cannot read " + src.data_dir + ": "
                                  + recoverd::message_of(err));
    if (count == 0)
      return fail(exit_refused,
                  "job " + job + " has no events in " + src.data_dir);
    if (incidents != nullptr) {
      // Those the retention kept of removed events come first.
      auto kept = recoverd::storage::kept_incidents(*log, job);
      if (!kept)
        return fail(exit_refused, "cannot read " + src.data_dir + ": "
                                    + recoverd::message_of(kept.error()));
      for (const auto& i : *kept)
        recoverd::convert::to_proto(i, *incidents->add_incidents());
      for (const auto& i : history.all())
        recoverd::convert::to_proto(i, *incidents->add_incidents());
      incidents->set_lastseq(history.seq());
    }
    return 0;
  }
  auto stub = inspect_stub(src.opts);
  for (uint64_t next = std::max<uint64_t>(from, 1); next != 0;) {
    pi::ListEventsRequest req;
    req.set_jobid(job);
    req.set_fromseq(next);
    req.set_limit(1000);
    pi::ListEventsResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline_of(src.opts));
    if (auto st = stub->ListEvents(&ctx, req, &resp); !st.ok())
      return rpc_failed(st, src.opts.server);
    for (auto& e : *resp.mutable_events())
      events.push_back(std::move(e));
    next = resp.nextseq();
  }
  if (incidents != nullptr) {
    pi::ListIncidentsRequest req;
    req.set_jobid(job);
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline_of(src.opts));
    if (auto st = stub->ListIncidents(&ctx, req, incidents); !st.ok())
      return rpc_failed(st, src.opts.server);
  }
  return 0;
}

// "2024-05-01T10:00:00.123Z".
std::string utc(int64_t ms) {
  auto secs = static_cast<time_t>(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof(out), "%s.%03dZ", buf,
                static_cast<int>(((ms % 1000) + 1000) % 1000));
  return out;
}

// "1.234s".
/// "-" for an empty cell.
std::string or_dash(const std::string& x) {
  return x.empty() ? "-" : x;
}

std::string secs(int64_t ms) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%s%lld.%03llds", ms < 0 ? "-" : "",
                static_cast<long long>(std::llabs(ms) / 1000),
                static_cast<long long>(std::llabs(ms) % 1000));
  return buf;
}

std::string phases_text(const pi::Incident& x) {
  std::string out;
  for (const auto& p : x.phases()) {
    if (!out.empty())
      out += ", ";
    out += p.name() + " +" + secs(p.sincestartms());
    if (p.sincestartms() > 0)
      out += " (" + secs(p.durationms()) + ")";
  }
  return out;
}

std::string incident_head(int n, const pi::Incident& x) {
  std::string out = "== incident " + std::to_string(n) + ": " + x.kind();
  if (x.active())
    out += " (running, " + x.state() + ")";
  if (!x.uuid().empty())
    out += " uuid " + x.uuid();
  if (!x.strategy().empty())
    out += ", strategy " + x.strategy();
  if (!x.outcome().empty())
    out += ", outcome " + x.outcome();
  out += ", " + secs(x.durationms());
  if (x.faultranks_size() > 0) {
    out += ", fault ranks";
    for (const auto& r : x.faultranks())
      out += " " + r;
  }
  // The root cause, for a post-mortem.
  const auto& a = x.attribution();
  if (!a.source().empty()) {
    out += ", cause " + a.source();
    if (!a.node().empty())
      out += " at " + a.node() + (a.device().empty() ? "" : "/" + a.device());
    if (a.codes_size() > 0) {
      out += " codes";
      for (const auto& c : a.codes())
        out += " " + c;
    }
    if (!a.level().empty())
      out += " level " + a.level();
  }
  return out;
}

// One event; who caused it (the audit identity) ends the line.
void print_event(const pi::EventRecord& e, const std::string& when) {
  std::string by;
  if (!e.event().by().empty())
    by = " [by " + e.event().by() + "]";
  std::printf("  #%-5llu %-24s %-22s %s%s\n",
              static_cast<unsigned long long>(e.seq()), when.c_str(),
              e.kind().c_str(), e.summary().c_str(), by.c_str());
}

int timeline(const history_source& src, const std::string& job) {
  std::vector<pi::EventRecord> events;
  pi::ListIncidentsResponse incidents;
  if (auto rc = load_history(src, job, 1, events, &incidents))
    return rc;
  if (src.opts.json()) {
    // The story as data: the incidents, then one event a line.
    std::cout << to_json_line(incidents) << "\n";
    for (const auto& e : events)
      std::cout << to_json_line(e) << "\n";
    return 0;
  }
  std::printf("job %s: %zu events, %d incidents (%s)\n", job.c_str(),
              events.size(), incidents.incidents_size(),
              src.data_dir.empty() ? ("recoverd at " + src.opts.server).c_str()
                                   : ("data directory " + src.data_dir).c_str());
  int next = 0;
  const pi::Incident* open = nullptr;
  for (const auto& e : events) {
    if (open == nullptr && next < incidents.incidents_size()
        && e.seq() == incidents.incidents(next).firstseq()) {
      open = &incidents.incidents(next++);
      std::printf("%s\n", incident_head(next, *open).c_str());
    }
    if (open != nullptr)
      print_event(e, "+" + secs(e.timems() - open->startedms()));
    else
      print_event(e, utc(e.timems()));
    if (open != nullptr && (e.seq() == open->lastseq() && !open->active())) {
      std::printf("   phases: %s\n", phases_text(*open).c_str());
      std::printf("== end of incident %d\n", next);
      open = nullptr;
      // A flow that ends in the step that begins the next one.
      if (next < incidents.incidents_size()
          && incidents.incidents(next).firstseq() == e.seq()) {
        open = &incidents.incidents(next++);
        std::printf("%s\n", incident_head(next, *open).c_str());
      }
    }
  }
  if (open != nullptr)
    std::printf("   phases so far: %s\n", phases_text(*open).c_str());
  return 0;
}

int incidents(const history_source& src, const std::string& job, bool json) {
  std::vector<pi::EventRecord> events;
  pi::ListIncidentsResponse resp;
  if (!src.data_dir.empty()) {
    if (auto rc = load_history(src, job, UINT64_MAX, events, &resp))
      return rc;
  } else {
    auto stub = inspect_stub(src.opts);
    pi::ListIncidentsRequest req;
    req.set_jobid(job);
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline_of(src.opts));
    if (auto st = stub->ListIncidents(&ctx, req, &resp); !st.ok())
      return rpc_failed(st, src.opts.server);
  }
  if (json) {
    std::cout << structured(resp);
    return 0;
  }
  recoverctl::table out{
    {"#", "KIND", "STARTED", "DURATION", "STRATEGY", "OUTCOME", "PHASES"}};
  int n = 0;
  for (const auto& x : resp.incidents())
    out.add({std::to_string(++n), x.kind(), utc(x.startedms()),
             secs(x.durationms()), or_dash(x.strategy()),
             x.active() ? "(running)" : x.outcome(), phases_text(x)});
  out.print(std::cout);
  return 0;
}

void print_record(const pi::EventRecord& e, bool json) {
  if (json) {
    std::cout << recoverd::convert::to_json(e) << "\n";
  } else {
    std::printf("#%-5llu %-24s %-22s %s\n",
                static_cast<unsigned long long>(e.seq()), utc(e.timems()).c_str(),
                e.kind().c_str(), e.summary().c_str());
  }
  std::fflush(stdout);
}

int events_cmd(const history_source& src, const std::string& job,
               uint64_t from, bool follow, bool json) {
  if (follow && !src.data_dir.empty())
    return fail(exit_usage, "--follow needs a running daemon, not --data-dir");
  // Watch first, then read the history, so nothing falls in between; the
  // watch's copies of events already printed are skipped.
  std::unique_ptr<pi::Inspect::Stub> stub;
  grpc::ClientContext wctx;
  std::unique_ptr<grpc::ClientReader<pi::EventRecord>> watch;
  if (follow) {
    stub = inspect_stub(src.opts);
    pi::WatchEventsRequest req;
    req.set_jobid(job);
    watch = stub->WatchEvents(&wctx, req);
  }
  std::vector<pi::EventRecord> events;
  if (auto rc = load_history(src, job, from, events, nullptr))
    return rc;
  uint64_t last = 0;
  for (const auto& e : events) {
    print_record(e, json);
    last = e.seq();
  }
  if (!follow)
    return 0;
  pi::EventRecord e;
  while (watch->Read(&e)) {
    if (e.seq() <= last)
      continue;
    last = e.seq();
    print_record(e, json);
  }
  if (auto st = watch->Finish(); !st.ok())
    return rpc_failed(st, src.opts.server);
  return 0;
}

// "name=value" of every counter and fact, ordered by name.
std::string status_details(const pi::ComponentStatus& x) {
  std::map<std::string, std::string> all;
  for (const auto& [k, v] : x.counters())
    all[k] = std::to_string(v);
  for (const auto& [k, v] : x.facts())
    all[k] = v;
  std::string out;
  for (const auto& [k, v] : all) {
    if (!out.empty())
      out += " ";
    out += k + "=" + v;
  }
  return out;
}

// The fleet's node registry: every node with a fault record, its score and
// whether it is quarantined (or only the quarantined ones).
int nodes(const options& opts, bool quarantined_only) {
  auto stub = inspect_stub(opts);
  pi::ListNodesRequest req;
  req.set_quarantinedonly(quarantined_only);
  pi::ListNodesResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline_of(opts));
  if (auto st = stub->ListNodes(&ctx, req, &resp); !st.ok())
    return rpc_failed(st, opts.server);
  if (opts.json()) {
    std::cout << structured(resp);
    return 0;
  }
  recoverctl::table out{{"NODE", "SCORE", "FAULTS", "STRESS", "QUARANTINED",
                         "REASON", "LAST-JOB"}};
  for (const auto& n : resp.nodes()) {
    char score[32];
    std::snprintf(score, sizeof(score), "%.2f", n.score());
    out.add({n.node(), score, std::to_string(n.faults()),
             std::to_string(n.stressfailures()),
             n.quarantined() ? "yes" : "no", or_dash(n.reason()),
             or_dash(n.lastjobid())});
  }
  out.print(std::cout);
  std::printf("quarantine at score %.2f; the score halves every %.1f min\n",
              resp.threshold(),
              static_cast<double>(resp.halflifems()) / 60'000.0);
  return 0;
}

int status_cmd(const options& opts, const std::string& job, bool detailed) {
  auto stub = inspect_stub(opts);
  pi::GetStatusRequest req;
  req.set_jobid(job);
  req.set_detailed(detailed);
  pi::StatusResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline_of(opts));
  if (auto st = stub->GetStatus(&ctx, req, &resp); !st.ok())
    return rpc_failed(st, opts.server);
  auto rc = resp.healthy() ? 0 : exit_refused;
  if (opts.json()) {
    std::cout << structured(resp);
    return rc;
  }
  recoverctl::table out{{"COMPONENT", "STATUS", "DETAILS"}};
  for (const auto& x : resp.components()) {
    const char* state = !x.answered()          ? "NO ANSWER"
                        : !x.problem().empty() ? "PROBLEM"
                                               : "ok";
    out.add({x.name(), state, status_details(x)});
    if (!x.problem().empty())
      out.add({"", "", x.problem()});
  }
  out.print(std::cout);
  std::printf("recoverd at %s is %s\n", opts.server.c_str(),
              resp.healthy() ? "healthy" : "NOT healthy");
  return rc;
}

// "agent-report=3,fault-center=1", or "-".
std::string causes_text(const pi::Goodput& x) {
  std::map<std::string, uint64_t> sorted{x.bycause().begin(),
                                         x.bycause().end()};
  std::string out;
  for (const auto& [cause, n] : sorted)
    out += (out.empty() ? "" : ",") + cause + "=" + std::to_string(n);
  return out.empty() ? "-" : out;
}

std::vector<std::string> goodput_row(const std::string& name,
                                     const pi::Goodput& x) {
  char ettr[16];
  std::snprintf(ettr, sizeof(ettr), "%.4f", x.ettr());
  return {name, std::to_string(x.incidents()), secs(x.mttrms()),
          secs(x.timelostms()), ettr, causes_text(x)};
}

int stats_cmd(const options& opts, const std::string& job) {
  auto stub = inspect_stub(opts);
  pi::GetStatsRequest req;
  req.set_jobid(job);
  pi::StatsResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline_of(opts));
  if (auto st = stub->GetStats(&ctx, req, &resp); !st.ok())
    return rpc_failed(st, opts.server);
  if (opts.json()) {
    std::cout << structured(resp);
    return 0;
  }
  recoverctl::table out{
    {"JOB", "INCIDENTS", "MTTR", "TIME-LOST", "ETTR", "BY-CAUSE"}};
  for (const auto& x : resp.jobs())
    out.add(goodput_row(x.jobid(), x));
  if (job.empty())
    out.add(goodput_row("(fleet)", resp.fleet()));
  out.print(std::cout);
  return 0;
}

// -- jobs -----------------------------------------------------------------------

/// One job as `jobs` shows it, from a list or from one job's status.
struct job_line {
  std::string id;
  std::string name;
  std::string ns;
  std::string state;
  std::string agent;
  int pods = 0;
  int ranks = 0;
  uint64_t seq = 0;
  std::string health;
  uint64_t flows = 0;
  std::string last_outcome;
  std::string flow_uuid;
  int64_t updated_ms = 0;
};

const char* agent_of(bool subscribed, bool registered) {
  return subscribed ? "attached" : registered ? "detached" : "-";
}

job_line line_of(const pb::JobSummary& j, const pi::JobOverview* more) {
  job_line x;
  x.id = j.jobid();
  x.name = j.name();
  x.ns = j.namespace_();
  x.state = j.recoverystate();
  x.agent = agent_of(j.subscribed(), j.registered());
  x.pods = j.pods();
  x.ranks = j.ranks();
  x.seq = j.lastseq();
  if (more != nullptr) {
    x.health = more->healthstate();
    x.flows = more->flows();
    if (more->has_lastincident())
      x.last_outcome = more->lastincident().outcome();
    if (more->has_activeflow())
      x.flow_uuid = more->activeflow().uuid();
    x.updated_ms = more->updatedatms();
  }
  return x;
}

job_line line_of(const pb::JobStatus& j) {
  job_line x;
  const auto& s = j.spec();
  x.id = s.jobid();
  x.name = s.name();
  x.ns = s.namespace_();
  x.state = j.recoverystate();
  x.agent = agent_of(j.subscribed(), j.registered());
  x.pods = s.pods_size();
  for (const auto& pod : s.pods())
    x.ranks += pod.devices_size();
  x.seq = j.lastseq();
  x.health = j.healthstate();
  x.flows = j.flows();
  x.last_outcome = j.lastoutcome();
  x.flow_uuid = j.uuid();
  x.updated_ms = j.updatedatms();
  return x;
}

std::vector<std::string> jobs_head(bool wide) {
  std::vector<std::string> head{"JOB",   "NAME",  "NAMESPACE", "STATE",
                                "AGENT", "PODS",  "RANKS",     "SEQ"};
  if (wide)
    head.insert(head.end(),
                {"HEALTH", "FLOWS", "LAST-OUTCOME", "RUNNING-FLOW", "UPDATED"});
  return head;
}

std::vector<std::string> jobs_row(const job_line& x, bool wide) {
  std::vector<std::string> row{x.id,
                               or_dash(x.name),
                               or_dash(x.ns),
                               x.state,
                               x.agent,
                               std::to_string(x.pods),
                               std::to_string(x.ranks),
                               std::to_string(x.seq)};
  if (wide)
    row.insert(row.end(),
               {or_dash(x.health), std::to_string(x.flows),
                or_dash(x.last_outcome), or_dash(x.flow_uuid),
                x.updated_ms > 0 ? utc(x.updated_ms) : "-"});
  return row;
}

/// Prints the rows of jobs that change, as events arrive, until the daemon
/// goes away (then exit code 3) or the user stops it.
int watch_jobs(const options& opts, client& c, const std::string& ns,
               recoverctl::table& out,
               std::map<std::string, std::vector<std::string>> shown) {
  auto stub = inspect_stub(opts);
  grpc::ClientContext stream_ctx;
  auto reader = stub->WatchEvents(&stream_ctx, pi::WatchEventsRequest{});
  pi::EventRecord ev;
  while (reader->Read(&ev)) {
    pb::JobRef ref;
    ref.set_jobid(ev.jobid());
    pb::JobStatus status;
    auto ctx = c.context();
    auto st = c.stub().GetJob(ctx.get(), ref, &status);
    std::vector<std::string> row;
    if (st.ok()) {
      if (!ns.empty() && status.spec().namespace_() != ns)
        continue;
      row = jobs_row(line_of(status), opts.wide());
    } else if (st.error_code() == grpc::StatusCode::NOT_FOUND) {
      auto it = shown.find(ev.jobid());
      if (it == shown.end())
        continue;
      row = it->second;
      row[3] = "(deleted)";
      status.mutable_spec()->set_jobid(ev.jobid());
      status.set_recoverystate("(deleted)");
    } else {
      return rpc_failed(st, opts.server);
    }
    auto& last = shown[ev.jobid()];
    if (row == last)
      continue;
    last = row;
    if (opts.json()) {
      // One JSON line per change; a deleted job's state is "(deleted)".
      std::cout << to_json_line(status) << "\n" << std::flush;
      continue;
    }
    out.add(row);
    out.print_new(std::cout);
    std::cout << std::flush;
  }
  auto st = reader->Finish();
  return rpc_failed(st.ok() ? grpc::Status{grpc::StatusCode::UNAVAILABLE,
                                           "the watch ended"}
                            : st,
                    opts.server);
}

/// `jobs`: a table (wide: with the Inspect overview of each job), or the
/// whole answer; `-w` then prints each change.
int jobs(const options& opts, client& c, const std::string& ns, bool watch) {
  pb::ListJobsRequest req;
  req.set_namespace_(ns);
  pb::ListJobsResponse resp;
  auto ctx = c.context();
  if (auto st = c.stub().ListJobs(ctx.get(), req, &resp); !st.ok())
    return rpc_failed(st, c.server());
  if (opts.json()) {
    std::cout << structured(resp) << std::flush;
    if (!watch)
      return 0;
  }
  std::map<std::string, pi::JobOverview> more;
  if (opts.wide()) {
    pi::ListJobsRequest ireq;
    ireq.set_namespace_(ns);
    pi::ListJobsResponse iresp;
    grpc::ClientContext ictx;
    ictx.set_deadline(deadline_of(opts));
    if (auto st = inspect_stub(opts)->ListJobs(&ictx, ireq, &iresp); !st.ok())
      return rpc_failed(st, opts.server);
    for (const auto& j : iresp.jobs())
      more[j.jobid()] = j;
  }
  recoverctl::table out{jobs_head(opts.wide())};
  std::map<std::string, std::vector<std::string>> shown;
  for (const auto& j : resp.jobs()) {
    auto it = more.find(j.jobid());
    auto row = jobs_row(line_of(j, it == more.end() ? nullptr : &it->second),
                        opts.wide());
    shown[j.jobid()] = row;
    out.add(std::move(row));
  }
  if (!opts.json())
    out.print_new(std::cout);
  std::cout << std::flush;
  if (!watch)
    return 0;
  return watch_jobs(opts, c, ns, out, std::move(shown));
}

// -- the command line itself ---------------------------------------------------

/// The options every command takes that are followed by a value.
bool takes_value(const std::string& arg) {
  static const char* names[] = {"--server", "--ca",      "--cert", "--key",
                                "--token",  "--timeout", "--output", "-o"};
  for (const auto* name : names)
    if (arg == name)
      return true;
  return false;
}

std::vector<std::string> command_names(CLI::App& cli) {
  std::vector<std::string> result;
  for (const auto* sub : cli.get_subcommands({}))
    result.push_back(sub->get_name());
  return result;
}

/// The first word that is not an option, when it names no command; else
/// empty.
std::string unknown_command(CLI::App& cli, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("-", 0) == 0) {
      if (takes_value(arg))
        ++i;
      continue;
    }
    auto names = command_names(cli);
    return std::find(names.begin(), names.end(), arg) == names.end() ? arg
                                                                     : "";
  }
  return {};
}

/// The words that may follow `app`'s name: its commands and long options.
std::string words_of(const CLI::App& app) {
  std::string result;
  for (const auto* sub : app.get_subcommands({}))
    result += sub->get_name() + " ";
  for (const auto* opt : app.get_options())
    for (const auto& name : opt->get_lnames())
      result += "--" + name + " ";
  if (!result.empty())
    result.pop_back();
  return result;
}

/// A bash completion script for the commands and options of `cli`; job ids
/// where a command takes a JOB (asked of the daemon with `recoverctl jobs`).
std::string bash_completion(CLI::App& cli) {
  std::ostringstream out;
  out << "# bash completion for recoverctl: source <(recoverctl completion "
         "bash)\n"
         "_recoverctl() {\n"
         "  local cur=\"${COMP_WORDS[COMP_CWORD]}\"\n"
         "  local prev=\"${COMP_WORDS[COMP_CWORD-1]}\"\n"
         "  local path=\"\" i w\n"
         "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
         "    w=\"${COMP_WORDS[i]}\"\n"
         "    case \"$w\" in\n"
         "      --server|--ca|--cert|--key|--token|--timeout|--output|-o)"
         " ((i++)) ;;\n"
         "      -*) ;;\n"
         "      *) path=\"${path:+$path }$w\" ;;\n"
         "    esac\n"
         "  done\n"
         "  case \"$prev\" in\n"
         "    -o|--output) COMPREPLY=($(compgen -W \"table wide json yaml\""
         " -- \"$cur\")); return ;;\n"
         "    --ca|--cert|--key|--data-dir) COMPREPLY=($(compgen -f --"
         " \"$cur\")); return ;;\n"
         "  esac\n"
         "  local words=\"\"\n"
         "  case \"$path\" in\n"
         "    \"\") words=\"" << words_of(cli) << "\" ;;\n";
  std::function<void(const CLI::App&, const std::string&)> add
    = [&](const CLI::App& app, const std::string& path) {
        for (const auto* sub : app.get_subcommands({})) {
          auto here = path.empty() ? sub->get_name()
                                   : path + " " + sub->get_name();
          bool takes_job = false;
          for (const auto* opt : sub->get_options())
            takes_job = takes_job || opt->get_name() == "JOB";
          out << "    \"" << here << "\") words=\"" << words_of(*sub) << "\"";
          if (takes_job)
            out << "; words=\"$words $(recoverctl jobs 2>/dev/null | awk "
                   "'NR > 1 {print $1}')\"";
          out << " ;;\n";
          add(*sub, here);
        }
      };
  add(cli, "");
  out << "  esac\n"
         "  COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
         "}\n"
         "complete -F _recoverctl recoverctl\n";
  return out.str();
}

/// `version`: recoverctl's, then the daemon's (exit 3 when unreachable).
int version_cmd(const options& opts) {
  std::cout << "recoverctl " << RECOVERD_VERSION << "\n" << std::flush;
  pi::StatusResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(deadline_of(opts));
  if (auto st = inspect_stub(opts)->GetStatus(&ctx, pi::GetStatusRequest{},
                                              &resp);
      !st.ok())
    return rpc_failed(st, opts.server);
  std::cout << "recoverd " << resp.version() << " at " << opts.server << "\n";
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  options opts;
  // Defaults from the environment, like a kubeconfig: flags win.
  for (auto [var, field] : {std::pair{"RECOVERD_SERVER", &opts.server},
                            std::pair{"RECOVERCTL_SERVER", &opts.server},
                            std::pair{"RECOVERD_CA", &opts.ca},
                            std::pair{"RECOVERD_CERT", &opts.cert},
                            std::pair{"RECOVERD_KEY", &opts.key},
                            std::pair{"RECOVERD_TOKEN", &opts.token}})
    if (const char* x = std::getenv(var); x != nullptr && *x != '\0')
      *field = x;
  CLI::App cli{"recoverctl: operate a recoverd daemon.\n"
               "Exit codes: 0 ok, 1 refused by recoverd, 2 bad usage or "
               "input, 3 recoverd unreachable."};
  cli.set_version_flag("--version", std::string{"recoverctl "} + RECOVERD_VERSION);
  cli.require_subcommand(1);
  // Every command takes --server, --timeout and --output, before or after
  // its name (added to each command once all exist, below).
  auto add_common = [&opts](CLI::App* app) {
    app->add_option("--server", opts.server,
                    "recoverd address host:port (env RECOVERCTL_SERVER)")
      ->capture_default_str();
    app->add_option("--ca", opts.ca,
                    "PEM CA of the server certificate: speak TLS "
                    "(env RECOVERD_CA)");
    app->add_option("--cert", opts.cert,
                    "PEM client certificate for mTLS (env RECOVERD_CERT)");
    app->add_option("--key", opts.key,
                    "PEM key of --cert (env RECOVERD_KEY)");
    app->add_option("--token", opts.token,
                    "bearer token, sent over TLS only (env RECOVERD_TOKEN)");
    app->add_option("--timeout", opts.timeout,
                    "how long to wait for an answer: 5s, 500ms, 1m (a bare "
                    "number is seconds)")
      ->capture_default_str()
      ->check(CLI::Validator(
        [](std::string& text) -> std::string {
          recoverd::millis x{};
          if (!recoverd::parse_duration(text, x) || x.count() <= 0)
            return "not a positive duration (e.g. 5s, 500ms, 1m): " + text;
          return {};
        },
        "DURATION"));
    app->add_option("--output,-o", opts.output,
                    "table or wide (for people), json or yaml (for scripts)")
      ->capture_default_str()
      ->check(CLI::IsMember({"table", "wide", "json", "yaml"}));
  };
  add_common(&cli);

  auto* job = cli.add_subcommand("job", "put, get or delete one job");
  job->require_subcommand(1);
  std::string file;
  auto* put = job->add_subcommand(
    "put", "create or update a job from a JSON JobSpec file ('-' = stdin)");
  put->add_option("FILE", file, "the job file")->required();
  std::string id;
  auto* get = job->add_subcommand("get", "print a job's status");
  get->add_option("JOB", id, "job id")->required();
  auto* del = job->add_subcommand("delete", "delete a job (history is kept)");
  del->add_option("JOB", id, "job id")->required();

  std::string ns;
  bool json = false;
  bool watch = false;
  auto* list = cli.add_subcommand("jobs", "list jobs as a table");
  list->add_option("--namespace", ns, "only this namespace");
  list->add_flag("--json", json, "print JSON instead of a table");
  list->add_flag("--watch,-w", watch,
                 "then print a job's row again each time it changes (JSON: "
                 "one JobStatus per line), until interrupted");

  auto* version = cli.add_subcommand(
    "version", "the version of recoverctl and of the daemon it reaches");
  std::string shell;
  auto* completion = cli.add_subcommand(
    "completion", "print a shell completion script: source <(recoverctl "
                  "completion bash)");
  completion->add_option("SHELL", shell, "bash")
    ->required()
    ->check(CLI::IsMember({"bash"}));

  std::vector<std::string> pairs;
  auto* ann = cli.add_subcommand(
    "annotate", "set annotations (KEY=VALUE) or remove them (KEY-)");
  ann->add_option("JOB", id, "job id")->required();
  ann->add_option("PAIRS", pairs, "KEY=VALUE or KEY-")->required();
  uint64_t expected_seq = 0;
  ann->add_option("--expect-seq", expected_seq,
                  "change only if the job is still at this sequence number "
                  "(the seq annotate or job get printed); refused (exit 1) "
                  "when someone changed it since");

  std::vector<std::string> nic_args;
  auto* sw = cli.add_subcommand(
    "switch-nic",
    "link failover/switchback: recoverctl switch-nic JOB NODE DEV=on|off "
    "[DEV=on|off ...] [NODE ...]; follows the operation to its outcome "
    "(exit 0 when it finished, 1 when it failed)");
  sw->add_option("JOB", id, "job id")->required();
  sw->add_option("OPS", nic_args, "NODE, then DEV=on (to backup) or DEV=off")
    ->required();

  std::string all_nodes;
  std::vector<std::string> stress_args;
  auto* stress = cli.add_subcommand(
    "stress-test",
    "online stress test: recoverctl stress-test JOB --all-nodes OPS | "
    "NODE=OPS ...; OPS is a comma list of aic (0) and p2p (1); follows the "
    "test to its outcome (exit 0 when it passed, 1 when it found a fault or "
    "failed)");
  stress->add_option("JOB", id, "job id")->required();
  stress->add_option("--all-nodes", all_nodes, "operations for every node");
  stress->add_option("NODES", stress_args, "NODE=OPS for chosen nodes");

  std::string node;
  std::string node_job;
  bool quarantined_only = false;
  auto* node_cmd = cli.add_subcommand(
    "nodes", "the fleet's node registry: each node's fault score and "
             "quarantine; 'nodes clear NODE' declares one healthy again");
  node_cmd->add_flag("--json", json, "print JSON instead of a table");
  node_cmd->add_flag("--quarantined", quarantined_only,
                     "only the quarantined nodes");
  auto* clear = node_cmd->add_subcommand(
    "clear", "clear a node's health records and its quarantine");
  clear->add_option("NODE", node, "node name")->required();
  clear->add_option("--job", node_job,
                    "only this job's record (default: every job); the node "
                    "registry's record is cleared either way");
  std::string data_dir;
  auto* tl = cli.add_subcommand(
    "timeline", "print a job's story: one line per event, times relative to "
                "each incident's start, and the phases of each incident");
  tl->add_option("JOB", id, "job id")->required();
  tl->add_option("--data-dir", data_dir,
                 "read this data directory (read-only) instead of asking the "
                 "daemon; works on a copy and while a daemon runs");
  uint64_t from = 1;
  bool follow = false;
  auto* evs = cli.add_subcommand("events", "print a job's events");
  evs->add_option("JOB", id, "job id")->required();
  evs->add_option("--from", from, "first sequence number")
    ->capture_default_str();
  evs->add_flag("--follow", follow,
                "keep printing new events as they become durable");
  evs->add_flag("--json", json, "one EventRecord JSON object per line");
  evs->add_option("--data-dir", data_dir,
                  "read this data directory (read-only) instead");
  auto* inc = cli.add_subcommand(
    "incidents", "list a job's incidents with their phases and outcome");
  inc->add_option("JOB", id, "job id")->required();
  inc->add_flag("--json", json, "print JSON instead of a table");
  inc->add_option("--data-dir", data_dir,
                  "read this data directory (read-only) instead");

  bool detailed = false;
  auto* status = cli.add_subcommand(
    "status", "the status of every component of the daemon (registry with "
              "the jobs counted by state, journal, event hub, inspector, "
              "historian); "
              "exit 1 when one reports a problem or did not answer");
  status->add_option("--job", id, "also this job's status");
  status->add_flag("--detailed", detailed,
                   "every figure, and every job's status (large with many "
                   "jobs)");

  auto* stats = cli.add_subcommand(
    "stats", "goodput: per job and for the fleet, incidents, MTTR (mean time "
             "lost by finished recoveries), time lost and ETTR (effective "
             "training time ratio), incidents by cause");
  stats->add_option("JOB", id, "only this job");
  stats->add_flag("--json", json, "print JSON instead of a table");

  std::function<void(CLI::App*)> add_everywhere = [&](CLI::App* app) {
    for (auto* sub : app->get_subcommands({})) {
      add_common(sub);
      add_everywhere(sub);
    }
  };
  add_everywhere(&cli);

  if (auto unknown = unknown_command(cli, argc, argv); !unknown.empty()) {
    auto near = recoverctl::closest(unknown, command_names(cli));
    return fail(exit_usage,
                "unknown command \"" + unknown + "\""
                  + (near.empty() ? std::string{}
                                  : "; did you mean \"" + near + "\"?")
                  + " (see recoverctl --help)");
  }
  try {
    cli.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    auto rc = cli.exit(e);
    return rc == 0 ? 0 : exit_usage;
  }

  // The older per-command --json flags mean --output json.
  if (json)
    opts.output = "json";
  recoverctl::parse_output_format(opts.output, opts.format);
  chosen_format = opts.format;
  recoverd::parse_duration(opts.timeout, opts.timeout_ms);
  json = opts.json();
  if (completion->parsed()) {
    std::cout << bash_completion(cli);
    return 0;
  }
  if (version->parsed())
    return version_cmd(opts);
  client c{opts};
  if (put->parsed())
    return job_put(c, file);
  if (get->parsed())
    return job_get(c, id);
  if (del->parsed())
    return job_delete(c, id);
  if (list->parsed())
    return jobs(opts, c, ns, watch);
  if (ann->parsed())
    return annotate(c, id, pairs, expected_seq);
  if (sw->parsed())
    return switch_nic(opts, id, nic_args);
  if (stress->parsed())
    return stress_test(opts, id, all_nodes, stress_args);
  if (clear->parsed())
    return node_clear(c, node, node_job);
  if (node_cmd->parsed())
    return nodes(opts, quarantined_only);
  if (status->parsed())
    return status_cmd(opts, id, detailed);
  if (stats->parsed())
    return stats_cmd(opts, id);
  history_source src{opts, data_dir};
  if (tl->parsed())
    return timeline(src, id);
  if (evs->parsed())
    return events_cmd(src, id, from, follow, json);
  if (inc->parsed())
    return incidents(src, id, json);
  return fail(exit_usage, "no command given; see --help");
}
