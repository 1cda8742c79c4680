#include "services/http_gateway.hpp"
#include "services/listener.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include <google/protobuf/util/time_util.h>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <sys/socket.h>

#include "actors/error.hpp"
#include "actors/log.hpp"
#include "actors/model/text.hpp"
#include "services/bridge.hpp"
#include "services/inspect_convert.hpp"
#include "services/inspect_service.hpp"
#include "services/http_server.hpp"
#include "services/metrics.hpp"
#include "services/status_mapping.hpp"
#include "services/stream.hpp"
#include "services/web_assets.hpp"

namespace recoverd {

namespace pi = recoverd::inspection::v1;

namespace {

// How long a request thread waits for the actors (a little longer than the
// actors wait for each other, so their timeout answers first).
constexpr auto wait_limit = edge_timeout + std::chrono::seconds(5);

// How often an idle watch sends an SSE comment; a write that fails tells
// that the client is gone.
constexpr auto watch_heartbeat = std::chrono::seconds(1);

// Request threads: each open watch holds one.
constexpr size_t http_threads = 16;

http_server_limits limits_of(std::chrono::milliseconds request_timeout) {
  http_server_limits result;
  result.request_timeout = request_timeout;
  result.threads = http_threads;
  return result;
}

// Open watches at most, so that some threads stay free for requests.
constexpr size_t max_watches = http_threads - 4;

/// A watch's buffer between the event hub (producer, an actor thread) and
/// the HTTP request thread (consumer). Bounded: when it is full the watch
/// ends with RESOURCE_EXHAUSTED, like a gRPC stream.
class queue_sink final : public stream_sink<published_event> {
public:
  /// What the consumer gets from one wait.
  struct batch {
    std::vector<published_event> events;
    /// The watch is over (after `events`).
    bool ended = false;
    grpc::Status status;
  };

  explicit queue_sink(size_t limit) : limit_(limit) {
    // nop
  }

  bool push(const published_event& x) override {
    std::vector<std::function<void()>> hooks;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (ended_)
        return false;
      if (queue_.size() >= limit_
          || bytes_ + x.bytes.size() > stream_byte_limit) {
        ES_WARN("http watch overflowed with {} events ({} bytes) queued; "
                "closing it",
                queue_.size(), bytes_);
        std::deque<published_event>{}.swap(queue_);
        bytes_ = 0;
        end_locked({grpc::StatusCode::RESOURCE_EXHAUSTED,
                    "watch consumer too slow: buffer of "
                      + std::to_string(limit_) + " events or "
                      + std::to_string(stream_byte_limit) + " bytes full"},
                   hooks);
      } else {
        bytes_ += x.bytes.size();
        queue_.push_back(x);
        cv_.notify_one();
        return true;
      }
    }
    for (auto& f : hooks)
      f();
    return false;
  }

  void finish(const caf::error& err) override {
    std::vector<std::function<void()>> hooks;
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (ended_)
        return;
      end_locked(to_grpc_status(err), hooks);
    }
    for (auto& f : hooks)
      f();
  }

  void on_close(std::function<void()> f) override {
    {
      std::lock_guard<std::mutex> guard{mtx_};
      if (!ended_) {
        hooks_.push_back(std::move(f));
        return;
      }
    }
    f();
  }

  bool closed() const override {
    std::lock_guard<std::mutex> guard{mtx_};
    return ended_;
  }

  /// The client went away: refuse further events.
  void close() {
    finish(make_error(errc::shutting_down, "watch closed"));
  }

  /// Waits up to `timeout` for events or the end.
  batch wait(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> guard{mtx_};
    cv_.wait_for(guard, timeout, [&] { return !queue_.empty() || ended_; });
    batch result;
    result.events.assign(std::make_move_iterator(queue_.begin()),
                         std::make_move_iterator(queue_.end()));
    queue_.clear();
    bytes_ = 0;
    result.ended = ended_;
    result.status = status_;
    return result;
  }

private:
  void end_locked(grpc::Status st, std::vector<std::function<void()>>& hooks) {
    ended_ = true;
    status_ = std::move(st);
    hooks.swap(hooks_);
    cv_.notify_all();
  }

  const size_t limit_;
  mutable std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<published_event> queue_;
  size_t bytes_ = 0;
  bool ended_ = false;
  grpc::Status status_;
  std::vector<std::function<void()>> hooks_;
};

// Never throws on client text: a message is made valid UTF-8 before it goes
// into the JSON, and the dump replaces anything that still is not.
std::string error_body(const grpc::Status& st) {
  nlohmann::json body;
  body["error"]["code"] = to_http_status(st.error_code());
  body["error"]["status"] = status_code_name(st.error_code());
  body["error"]["message"] = is_utf8(st.error_message())
                               ? st.error_message()
                               : excerpt(st.error_message(), SIZE_MAX);
  return body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void send_error(httplib::Response& res, const grpc::Status& st) {
  res.status = to_http_status(st.error_code());
  res.set_content(error_body(st), "application/json");
}

grpc::Status bad_request(const std::string& msg) {
  return {grpc::StatusCode::INVALID_ARGUMENT, msg};
}

// A query parameter's value as an error message shows it.
std::string shown(const httplib::Request& req, const char* key) {
  return "\"" + excerpt(req.get_param_value(key)) + "\"";
}

// Why a request's path or query cannot be served, or OK. The decoded path
// and parameters are client bytes that end up in JSON and messages: they
// must be UTF-8.
grpc::Status check_text(const httplib::Request& req) {
  if (!is_utf8(req.path))
    return bad_request("the request path is not valid UTF-8 (after "
                       "percent-decoding): "
                       + excerpt(req.path));
  for (const auto& [key, value] : req.params) {
    if (!is_utf8(key))
      return bad_request("a query parameter name is not valid UTF-8 (after "
                         "percent-decoding): "
                         + excerpt(key));
    if (!is_utf8(value))
      return bad_request("query parameter " + key
                         + ": not valid UTF-8 (after percent-decoding): "
                         + excerpt(value));
  }
  return grpc::Status::OK;
}

bool pretty(const httplib::Request& req) {
  auto x = req.get_param_value("pretty");
  return req.has_param("pretty") && x != "0" && x != "false";
}

// A non-negative decimal that fits 64 bits.
bool parse_u64(const std::string& text, uint64_t& out) {
  if (text.empty() || text.size() > 20)
    return false;
  uint64_t x = 0;
  for (auto c : text) {
    if (c < '0' || c > '9')
      return false;
    auto d = static_cast<uint64_t>(c - '0');
    if (x > (UINT64_MAX - d) / 10)
      return false;
    x = x * 10 + d;
  }
  out = x;
  return true;
}

// Unix ms (optionally negative) or an RFC 3339 timestamp.
bool parse_time(const std::string& text, int64_t& out) {
  uint64_t x = 0;
  bool negative = !text.empty() && text[0] == '-';
  if (parse_u64(negative ? text.substr(1) : text, x)) {
    if (x > static_cast<uint64_t>(INT64_MAX))
      return false;
    out = negative ? -static_cast<int64_t>(x) : static_cast<int64_t>(x);
    return true;
  }
  google::protobuf::Timestamp ts;
  if (!google::protobuf::util::TimeUtil::FromString(text, &ts))
    return false;
  out = google::protobuf::util::TimeUtil::TimestampToMilliseconds(ts);
  return true;
}

// The dashboard's pages may talk to this daemon only: no remote script,
// style, image or connection, no framing, no form posts elsewhere.
constexpr const char* dashboard_policy
  = "default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self' data:; connect-src 'self'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'";

// True when an If-None-Match header names `etag` (or is "*").
bool etag_matches(const std::string& header, std::string_view etag) {
  return header == "*" || header.find(etag) != std::string::npos;
}

// Answers with a dashboard file, 304 when the client has it, or 404.
void serve_asset(const httplib::Request& req, httplib::Response& res) {
  const auto* x = find_web_asset(req.path);
  if (x == nullptr) {
    res.status = 404;
    return;
  }
  // The page is re-validated on every load (cheap with the ETag) so an
  // upgraded daemon never runs next to a stale script.
  res.set_header("ETag", std::string{x->etag});
  res.set_header("Cache-Control", "no-cache");
  res.set_header("Content-Security-Policy", dashboard_policy);
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Referrer-Policy", "no-referrer");
  if (etag_matches(req.get_header_value("If-None-Match"), x->etag)) {
    res.status = 304;
    return;
  }
  res.set_content(x->body.data(), x->body.size(),
                  std::string{x->content_type}.c_str());
}

// The route pattern of a path, for the request counter: a fixed set of
// labels whatever the client sends ("other" for anything not served).
std::string route_of(const std::string& path) {
  if (find_web_asset(path) != nullptr)
    return path;
  if (path == "/metrics" || path == "/api/v1/jobs" || path == "/api/v1/watch"
      || path == "/api/v1/status" || path == "/api/v1/stats"
      || path == "/api/v1/nodes"
      || path == "/healthz" || path == "/readyz")
    return path;
  const std::string prefix = "/api/v1/jobs/";
  if (path.rfind(prefix, 0) != 0)
    return "other";
  auto rest = path.substr(prefix.size());
  auto slash = rest.find('/');
  if (slash == 0 || rest.empty())
    return "other";
  if (slash == std::string::npos)
    return prefix + "{id}";
  auto tail = rest.substr(slash);
  if (tail == "/events" || tail == "/incidents" || tail == "/at")
    return prefix + "{id}" + tail;
  return "other";
}

// Waits for `fut`; false after the limit.
template <class T>
bool await(std::future<T>& fut) {
  return fut.wait_for(wait_limit) == std::future_status::ready;
}

} // namespace

struct http_gateway::impl {
  impl(const inspect_api& a, request_metrics& m, size_t b,
       std::chrono::milliseconds request_timeout)
    : api(a), metrics(m), buffer(b), svr(limits_of(request_timeout)) {
    // nop
  }

  const inspect_api& api;
  request_metrics& metrics;
  access_settings access;
  std::function<std::string()> readiness;
  size_t buffer;
  guarded_http_server svr;
  std::thread thread;
  int port = 0;
  std::atomic<bool> stopping{false};
  std::mutex watches_mtx;
  std::vector<std::weak_ptr<queue_sink>> watches;

  // Runs one Inspect operation and answers with its JSON or error.
  template <class Resp, class Call>
  void answer(const httplib::Request& req, httplib::Response& res,
              Call call) {
    auto resp = std::make_shared<Resp>();
    auto promise = std::make_shared<std::promise<grpc::Status>>();
    auto fut = promise->get_future();
    // `resp` lives as long as the answer may still come.
    call(resp.get(), [promise, resp](const grpc::Status& st) {
      promise->set_value(st);
    });
    if (!await(fut))
      return send_error(res, {grpc::StatusCode::DEADLINE_EXCEEDED,
                              "recoverd did not answer in time"});
    auto st = fut.get();
    if (!st.ok())
      return send_error(res, st);
    res.set_content(convert::to_json(*resp, pretty(req)), "application/json");
  }

  // Forgets watches that ended; returns how many are open.
  size_t open_watches() {
    std::lock_guard<std::mutex> guard{watches_mtx};
    watches.erase(std::remove_if(watches.begin(), watches.end(),
                                 [](const auto& w) {
                                   auto sink = w.lock();
                                   return !sink || sink->closed();
                                 }),
                  watches.end());
    return watches.size();
  }

  void watch(const httplib::Request& req, httplib::Response& res) {
    if (open_watches() >= max_watches)
      return send_error(res, {grpc::StatusCode::RESOURCE_EXHAUSTED,
                              "too many open watches over HTTP (at most "
                                + std::to_string(max_watches)
                                + "); use gRPC WatchEvents"});
    pi::WatchEventsRequest r;
    r.set_jobid(req.get_param_value("job"));
    auto sink = std::make_shared<queue_sink>(buffer);
    auto promise = std::make_shared<std::promise<grpc::Status>>();
    auto fut = promise->get_future();
    api.watch_events(r, sink, [promise](const grpc::Status& st) {
      promise->set_value(st);
    });
    if (!await(fut)) {
      sink->close();
      return send_error(res, {grpc::StatusCode::DEADLINE_EXCEEDED,
                              "recoverd did not answer in time"});
    }
    if (auto st = fut.get(); !st.ok())
      return send_error(res, st);
    {
      std::lock_guard<std::mutex> guard{watches_mtx};
      watches.push_back(sink);
    }
    res.set_header("Cache-Control", "no-cache");
    auto greeted = std::make_shared<bool>(false);
    res.set_chunked_content_provider(
      "text/event-stream",
      [this, sink, greeted](size_t, httplib::DataSink& out) {
        // cpp-httplib runs this outside its try block: never throw.
        try {
          return next_chunk(*sink, *greeted, out);
        } catch (const std::exception& e) {
          ES_ERROR("http watch failed: {}", excerpt(e.what()));
        } catch (...) {
          ES_ERROR("http watch failed");
        }
        return false;
      },
      [sink](bool) { sink->close(); });
  }

  // Writes the next chunk of a watch; false ends the connection.
  bool next_chunk(queue_sink& sink, bool& greeted, httplib::DataSink& out) {
    // The first chunk tells the client that the watch is in place.
    if (!greeted) {
      greeted = true;
      static const std::string hello = ": watching\n\n";
      return out.write(hello.data(), hello.size());
    }
    auto b = sink.wait(watch_heartbeat);
    std::string chunk;
    for (const auto& x : b.events) {
      pi::EventRecord rec;
      convert::to_proto(x, rec);
      chunk += "id: " + std::to_string(x.position)
               + "\nevent: event\ndata: " + convert::to_json(rec) + "\n\n";
    }
    if (b.ended || stopping) {
      if (b.ended && !b.status.ok())
        chunk += "event: error\ndata: " + error_body(b.status) + "\n\n";
      if (!chunk.empty() && !out.write(chunk.data(), chunk.size()))
        return false;
      out.done();
      return true;
    }
    if (chunk.empty())
      chunk = ": keep-alive\n\n";
    return out.write(chunk.data(), chunk.size());
  }

  void routes() {
    svr.Get("/api/v1/jobs",
            [this](const httplib::Request& req, httplib::Response& res) {
              pi::ListJobsRequest r;
              r.set_namespace_(req.get_param_value("namespace"));
              answer<pi::ListJobsResponse>(req, res, [&](auto* resp, auto done) {
                api.list_jobs(r, resp, std::move(done));
              });
            });
    svr.Get(R"(/api/v1/jobs/([^/]+))",
            [this](const httplib::Request& req, httplib::Response& res) {
              pi::GetJobRequest r;
              r.set_jobid(req.matches[1]);
              answer<pi::JobDetail>(req, res, [&](auto* resp, auto done) {
                api.get_job(r, resp, std::move(done));
              });
            });
    svr.Get(R"(/api/v1/jobs/([^/]+)/events)",
            [this](const httplib::Request& req, httplib::Response& res) {
              pi::ListEventsRequest r;
              r.set_jobid(req.matches[1]);
              uint64_t x = 0;
              if (req.has_param("from")) {
                if (!parse_u64(req.get_param_value("from"), x))
                  return send_error(res, bad_request(
                                           "from: not a sequence number: "
                                           + shown(req, "from")));
                r.set_fromseq(x);
              }
              if (req.has_param("limit")) {
                if (!parse_u64(req.get_param_value("limit"), x))
                  return send_error(res, bad_request(
                                           "limit: not a count: "
                                           + shown(req, "limit")));
                r.set_limit(static_cast<uint32_t>(std::min<uint64_t>(x, 1000)));
              }
              answer<pi::ListEventsResponse>(req, res,
                                             [&](auto* resp, auto done) {
                                               api.list_events(r, resp,
                                                               std::move(done));
                                             });
            });
    svr.Get(R"(/api/v1/jobs/([^/]+)/incidents)",
            [this](const httplib::Request& req, httplib::Response& res) {
              pi::ListIncidentsRequest r;
              r.set_jobid(req.matches[1]);
              answer<pi::ListIncidentsResponse>(
                req, res, [&](auto* resp, auto done) {
                  api.list_incidents(r, resp, std::move(done));
                });
            });
    svr.Get(R"(/api/v1/jobs/([^/]+)/at)",
            [this](const httplib::Request& req, httplib::Response& res) {
              pi::GetJobAtRequest r;
              r.set_jobid(req.matches[1]);
              bool by_seq = req.has_param("seq");
              bool by_time = req.has_param("time");
              if (by_seq == by_time)
                return send_error(res, bad_request("give either seq=SEQ or "
                                                   "time=UNIX_MS|RFC3339"));
              if (by_seq) {
                uint64_t seq = 0;
                if (!parse_u64(req.get_param_value("seq"), seq))
                  return send_error(res, bad_request(
                                           "seq: not a sequence number: "
                                           + shown(req, "seq")));
                r.set_seq(seq);
              } else {
                int64_t t = 0;
                if (!parse_time(req.get_param_value("time"), t))
                  return send_error(res,
                                    bad_request("time: neither Unix "
                                                "milliseconds nor RFC 3339: "
                                                + shown(req, "time")));
                r.set_timems(t);
              }
              answer<pi::JobAt>(req, res, [&](auto* resp, auto done) {
                api.get_job_at(r, resp, std::move(done));
              });
            });
    svr.Get("/api/v1/status",
            [this](const httplib::Request& req, httplib::Response& res) {
              pi::GetStatusRequest r;
              r.set_jobid(req.get_param_value("job"));
              auto x = req.get_param_value("detailed");
              r.set_detailed(req.has_param("detailed") && x != "0"
                             && x != "false");
              answer<pi::StatusResponse>(req, res, [&](auto* resp, auto done) {
                api.get_status(r, resp, std::move(done));
              });
            });
    svr.Get("/api/v1/stats",
            [this](const httplib::Request& req, httplib::Response& res) {
              pi::GetStatsRequest r;
              r.set_jobid(req.get_param_value("job"));
              answer<pi::StatsResponse>(req, res, [&](auto* resp, auto done) {
                api.get_stats(r, resp, std::move(done));
              });
            });
    svr.Get("/api/v1/nodes",
            [this](const httplib::Request& req, httplib::Response& res) {
              pi::ListNodesRequest r;
              auto x = req.get_param_value("quarantined");
              r.set_quarantinedonly(req.has_param("quarantined") && x != "0"
                                    && x != "false");
              answer<pi::ListNodesResponse>(req, res,
                                            [&](auto* resp, auto done) {
                                              api.list_nodes(r, resp,
                                                             std::move(done));
                                            });
            });
    svr.Get("/api/v1/watch",
            [this](const httplib::Request& req, httplib::Response& res) {
              watch(req, res);
            });
    // The dashboard: "/" and its files under /ui/.
    svr.Get(R"(/|/ui/[^/]+)",
            [](const httplib::Request& req, httplib::Response& res) {
              serve_asset(req, res);
            });
    // Liveness: the process answers HTTP.
    svr.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("ok\n", "text/plain");
    });
    // Readiness: start-up done and the event log writes (a Kubernetes
    // Service sends agents only to a ready daemon).
    svr.Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
      auto why = readiness ? readiness() : std::string{};
      if (why.empty()) {
        res.set_content("ready\n", "text/plain");
        return;
      }
      res.status = 503;
      res.set_content("not ready: " + why + "\n", "text/plain");
    });
    svr.Get("/metrics", [this](const httplib::Request&,
                               httplib::Response& res) {
      using result = caf::expected<cluster_stats>;
      auto promise = std::make_shared<std::promise<result>>();
      auto fut = promise->get_future();
      api.cluster([promise](result x) { promise->set_value(std::move(x)); });
      if (!await(fut))
        return send_error(res, {grpc::StatusCode::DEADLINE_EXCEEDED,
                                "recoverd did not answer in time"});
      auto x = fut.get();
      if (!x)
        return send_error(res, to_grpc_status(x.error()));
      metrics.http_connections_closed(svr.timed_out(), svr.refused());
      res.set_content(render_metrics(metrics, *x),
                      "text/plain; version=0.0.4; charset=utf-8");
    });
    // Client bytes are checked before any route sees them.
    svr.set_pre_routing_handler([this](const httplib::Request& req,
                                       httplib::Response& res) {
      if (auto st = check_text(req); !st.ok()) {
        send_error(res, st);
        return httplib::Server::HandlerResponse::Handled;
      }
      // Probes carry no credentials and answer nothing about jobs. Nor do
      // the dashboard's files (the same bytes for everyone): a browser
      // cannot send a token with a page load, and every API call the page
      // makes then carries the viewer's credentials.
      if (req.path == "/healthz" || req.path == "/readyz"
          || find_web_asset(req.path) != nullptr)
        return httplib::Server::HandlerResponse::Unhandled;
      // The one access check of the HTTP port: a verified client
      // certificate (HTTPS), else a token.
      caller_credentials caller;
      caller.cert_names = guarded_http_server::current_cert_names();
      caller.bearer_token = bearer_token_of(
        req.get_header_value("Authorization"));
      auto who = authorize(access, http_method, caller);
      if (!who) {
        send_error(res, to_grpc_status(who.error()));
        return httplib::Server::HandlerResponse::Handled;
      }
      int64_t retry_ms = 0;
      if (auto err = limit(access, http_method, *who, req.remote_addr, {},
                           retry_ms)) {
        res.set_header("Retry-After", std::to_string((retry_ms + 999) / 1000));
        send_error(res, to_grpc_status(err));
        return httplib::Server::HandlerResponse::Handled;
      }
      return httplib::Server::HandlerResponse::Unhandled;
    });
    // cpp-httplib calls the error handler and the logger outside its own
    // try block (an exception there ends the process): neither may throw.
    svr.set_error_handler([](const httplib::Request& req,
                             httplib::Response& res) {
      if (!res.body.empty())
        return;
      auto status = res.status;
      try {
        auto code = status == 404 ? grpc::StatusCode::NOT_FOUND
                                  : grpc::StatusCode::INVALID_ARGUMENT;
        auto msg = status == 404 ? "no such resource: " + excerpt(req.path)
                                 : "cannot serve " + excerpt(req.path);
        send_error(res, {code, msg});
      } catch (...) {
        res.set_content(R"({"error":{"code":500,"status":"INTERNAL",)"
                        R"("message":"cannot render the error"}})",
                        "application/json");
      }
      res.status = status;
    });
    // A handler that throws answers 500 with a JSON error; the server goes
    // on serving.
    svr.set_exception_handler([](const httplib::Request& req,
                                 httplib::Response& res,
                                 std::exception_ptr ep) {
      std::string what = "unknown exception";
      try {
        if (ep)
          std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
        // nop
      }
      try {
        ES_ERROR("http request for {} failed: {}", excerpt(req.path),
                 excerpt(what));
        res.headers.erase("EXCEPTION_WHAT");
        send_error(res, {grpc::StatusCode::INTERNAL,
                         "internal error: " + excerpt(what)});
      } catch (...) {
        res.status = 500;
        res.set_content(R"({"error":{"code":500,"status":"INTERNAL",)"
                        R"("message":"internal error"}})",
                        "application/json");
      }
    });
    svr.set_logger([this](const httplib::Request& req,
                          const httplib::Response& res) {
      try {
        metrics.http_finished(route_of(req.path), res.status);
      } catch (...) {
        // nop: a lost count is better than an abort
      }
    });
  }
};

http_gateway::http_gateway(const inspect_api& api, request_metrics& metrics,
                           size_t stream_buffer,
                           std::chrono::milliseconds request_timeout)
  : impl_(std::make_unique<impl>(api, metrics, stream_buffer,
                                 request_timeout)) {
  // nop
}

http_gateway::~http_gateway() {
  stop();
}

void http_gateway::set_access(access_settings access) {
  impl_->access = std::move(access);
}

void http_gateway::set_readiness(std::function<std::string()> f) {
  impl_->readiness = std::move(f);
}

void http_gateway::set_tls(ssl_context_ptr ctx) {
  tls_ = ctx != nullptr;
  impl_->svr.set_tls(std::move(ctx));
}

caf::error http_gateway::start(const std::string& listen) {
  auto where = parse_listen_address(listen);
  if (!where)
    return where.error();
  const auto& host = where->host;
  auto port = where->port;
  auto& svr = impl_->svr;
  // SO_REUSEADDR only: a second daemon must not share the port silently.
  svr.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  impl_->routes();
  int bound = -1;
  if (port == 0)
    bound = svr.bind_to_any_port(host);
  else if (svr.bind_to_port(host, static_cast<int>(port)))
    bound = static_cast<int>(port);
  if (bound <= 0)
    return make_error(errc::invalid_argument,
                      "cannot listen for HTTP on " + listen
                        + " (address in use or invalid)");
  svr.set_backlog(512);
  impl_->port = bound;
  impl_->thread = std::thread([this] { impl_->svr.listen_after_bind(); });
  // `stop` only works on a running server: wait until it runs.
  for (int i = 0; i < 2000 && !svr.is_running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ES_INFO("recoverd serving {} on {}:{}", tls_ ? "HTTPS" : "HTTP", host,
          bound);
  return caf::none;
}

int http_gateway::port() const {
  return impl_->port;
}

void http_gateway::stop() {
  if (!impl_ || impl_->stopping.exchange(true))
    return;
  {
    std::lock_guard<std::mutex> guard{impl_->watches_mtx};
    for (auto& w : impl_->watches)
      if (auto sink = w.lock())
        sink->finish(make_error(errc::shutting_down,
                                "recoverd is shutting down"));
    impl_->watches.clear();
  }
  if (impl_->thread.joinable()) {
    impl_->svr.stop();
    impl_->thread.join();
  }
}

} // namespace recoverd
