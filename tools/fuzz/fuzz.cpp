#include "fuzz.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <random>
#include <sstream>
#include <stdexcept>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <httplib.h>

#include "actors/error.hpp"
#include "actors/model/incidents.hpp"
#include "actors/model/job_model.hpp"
#include "actors/model/text.hpp"
#include "events.pb.h"
#include "platform.grpc.pb.h"
#include "recover.grpc.pb.h"
#include "services/app.hpp"
#include "storage/event_codec.hpp"
#include "storage/event_log.hpp"
#include "storage/incident_codec.hpp"

namespace recoverd::fuzz {

namespace {

namespace fs = std::filesystem;
namespace gp = google::protobuf;
using rng = std::mt19937_64;
using clock_type = std::chrono::steady_clock;

// -- shared ------------------------------------------------------------------

std::string read_all(const fs::path& p) {
  std::ifstream f{p, std::ios::binary};
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The files of `dir` with extension `ext`, in name order (the corpus order
// is part of a run: PutJob comes first).
std::vector<fs::path> files_of(const fs::path& dir, const std::string& ext) {
  std::vector<fs::path> xs;
  if (!fs::is_directory(dir))
    throw std::runtime_error("no corpus folder " + dir.string());
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ext)
      xs.push_back(e.path());
  std::sort(xs.begin(), xs.end());
  if (xs.empty())
    throw std::runtime_error("empty corpus folder " + dir.string());
  return xs;
}

size_t pick(rng& r, size_t n) {
  return n == 0 ? 0 : static_cast<size_t>(r() % n);
}

// An input for a finding: printable, bounded.
std::string shown(const std::string& x) {
  std::string out;
  for (unsigned char c : x.substr(0, 160)) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  if (x.size() > 160)
    out += "...(" + std::to_string(x.size()) + " bytes)";
  return out;
}

// 1-4 byte-level edits: flip, set, insert, erase, truncate, duplicate.
void mutate_bytes(std::string& s, rng& r) {
  auto n = 1 + pick(r, 4);
  for (size_t k = 0; k < n; ++k) {
    switch (pick(r, 6)) {
      case 0:
        if (!s.empty())
          s[pick(r, s.size())] ^= static_cast<char>(1u << pick(r, 8));
        break;
      case 1:
        if (!s.empty())
          s[pick(r, s.size())] = static_cast<char>(r());
        break;
      case 2:
        s.insert(s.begin() + static_cast<long>(pick(r, s.size() + 1)),
                 static_cast<char>(r()));
        break;
      case 3:
        if (!s.empty())
          s.erase(pick(r, s.size()), 1 + pick(r, 8));
        break;
      case 4:
        s.resize(pick(r, s.size() + 1));
        break;
      default:
        if (!s.empty()) {
          auto at = pick(r, s.size());
          auto len = std::min<size_t>(1 + pick(r, 16), s.size() - at);
          s.insert(pick(r, s.size()), s.substr(at, len));
        }
    }
  }
}

// Strings that have broken parsers before, all valid UTF-8 (proto3 string
// fields must be).
const std::vector<std::string>& interesting_strings() {
  static const std::vector<std::string> xs = {
    "", "0", "1", "01", "-1", "+1", " 1", "1e3", "4294967296",
    "99999999999999999999", "fz", "fz-other", "/", "a/b", "..", "%ff",
    "\n", "line\nforged INFO", "\t", "\xc3\xa9", "\xe6\x97\xa5", "retry",
    "recover", "dump", "exit", "teleport", "stopTrain", "UnHealthy",
    "Healthy", "SubHealthy", "n0", "n1", "u0", std::string(300, 'a'),
    std::string(5000, 'z')};
  return xs;
}

const std::vector<int64_t>& interesting_numbers() {
  static const std::vector<int64_t> xs
    = {0,   1,   -1,  2,    3,       200, 201,      400,     406,
       500, 502, 999, 1024, INT_MAX, INT_MIN, LLONG_MAX, LLONG_MIN};
  return xs;
}

std::string some_string(rng& r) {
  const auto& xs = interesting_strings();
  return xs[pick(r, xs.size())];
}

int64_t some_number(rng& r) {
  const auto& xs = interesting_numbers();
  return pick(r, 4) == 0 ? static_cast<int64_t>(r())
                         : xs[pick(r, xs.size())];
}

void set_scalar(gp::Message& m, const gp::FieldDescriptor* f, rng& r);

// Changes one field of `m` (recursing into sub-messages): a value replaced,
// an element added, removed, duplicated or changed, or many elements added.
void mutate_message(gp::Message& m, rng& r, int depth = 0) {
  const auto* d = m.GetDescriptor();
  const auto* refl = m.GetReflection();
  if (d->field_count() == 0)
    return;
  const auto* f = d->field(static_cast<int>(pick(r, d->field_count())));
  using cpp = gp::FieldDescriptor::CppType;
  if (!f->is_repeated()) {
    if (f->cpp_type() == cpp::CPPTYPE_MESSAGE) {
      if (depth < 4)
        mutate_message(*refl->MutableMessage(&m, f), r, depth + 1);
    } else {
      set_scalar(m, f, r);
    }
    return;
  }
  auto size = refl->FieldSize(m, f);
  switch (pick(r, 6)) {
    case 0: // remove the last element
      if (size > 0)
        refl->RemoveLast(&m, f);
      return;
    case 1: // duplicate an element
      if (size > 0) {
        auto i = static_cast<int>(pick(r, static_cast<size_t>(size)));
        if (f->cpp_type() == cpp::CPPTYPE_MESSAGE)
          refl->AddMessage(&m, f)->CopyFrom(refl->GetRepeatedMessage(m, f, i));
        else if (f->cpp_type() == cpp::CPPTYPE_STRING)
          refl->AddString(&m, f, refl->GetRepeatedString(m, f, i));
      }
      return;
    case 2: // clear
      refl->ClearField(&m, f);
      return;
    case 3: // many elements: quadratic or uncapped paths
      for (int k = 0; k < 1 + static_cast<int>(pick(r, 2000)); ++k) {
        if (f->cpp_type() == cpp::CPPTYPE_MESSAGE) {
          auto* x = refl->AddMessage(&m, f);
          if (size > 0)
            x->CopyFrom(refl->GetRepeatedMessage(m, f, 0));
          if (depth < 4 && pick(r, 2) == 0)
            mutate_message(*x, r, depth + 1);
        } else if (f->cpp_type() == cpp::CPPTYPE_STRING) {
          refl->AddString(&m, f, std::to_string(k));
        }
      }
      return;
    default: // add one, or change one
      if (size == 0 || pick(r, 2) == 0) {
        if (f->cpp_type() == cpp::CPPTYPE_MESSAGE) {
          auto* x = refl->AddMessage(&m, f);
          if (size > 0 && pick(r, 2) == 0)
            x->CopyFrom(refl->GetRepeatedMessage(m, f, 0));
          if (depth < 4)
            mutate_message(*x, r, depth + 1);
        } else if (f->cpp_type() == cpp::CPPTYPE_STRING) {
          refl->AddString(&m, f, some_string(r));
        } else if (f->cpp_type() == cpp::CPPTYPE_BOOL) {
          refl->AddBool(&m, f, pick(r, 2) == 0);
        } else if (f->cpp_type() == cpp::CPPTYPE_INT64) {
          refl->AddInt64(&m, f, some_number(r));
        } else if (f->cpp_type() == cpp::CPPTYPE_INT32) {
          refl->AddInt32(&m, f, static_cast<int32_t>(some_number(r)));
        }
      } else {
        auto i = static_cast<int>(pick(r, static_cast<size_t>(size)));
        if (f->cpp_type() == cpp::CPPTYPE_MESSAGE && depth < 4)
          mutate_message(*refl->MutableRepeatedMessage(&m, f, i), r,
                         depth + 1);
        else if (f->cpp_type() == cpp::CPPTYPE_STRING)
          refl->SetRepeatedString(&m, f, i, some_string(r));
        else if (f->cpp_type() == cpp::CPPTYPE_BOOL)
          refl->SetRepeatedBool(&m, f, i, !refl->GetRepeatedBool(m, f, i));
        else if (f->cpp_type() == cpp::CPPTYPE_INT64)
          refl->SetRepeatedInt64(&m, f, i, some_number(r));
      }
  }
}

void set_scalar(gp::Message& m, const gp::FieldDescriptor* f, rng& r) {
  const auto* refl = m.GetReflection();
  using cpp = gp::FieldDescriptor::CppType;
  switch (f->cpp_type()) {
    case cpp::CPPTYPE_STRING: refl->SetString(&m, f, some_string(r)); break;
    case cpp::CPPTYPE_BOOL: refl->SetBool(&m, f, !refl->GetBool(m, f)); break;
    case cpp::CPPTYPE_INT32:
      refl->SetInt32(&m, f, static_cast<int32_t>(some_number(r)));
      break;
    case cpp::CPPTYPE_INT64: refl->SetInt64(&m, f, some_number(r)); break;
    case cpp::CPPTYPE_UINT32:
      refl->SetUInt32(&m, f, static_cast<uint32_t>(some_number(r)));
      break;
    case cpp::CPPTYPE_UINT64:
      refl->SetUInt64(&m, f, static_cast<uint64_t>(some_number(r)));
      break;
    case cpp::CPPTYPE_ENUM: {
      const auto* e = f->enum_type();
      refl->SetEnum(&m, f,
                    e->value(static_cast<int>(pick(r, e->value_count()))));
      break;
    }
    default: break;
  }
}

// Runs `step` until the budget of `opts` is spent; returns the report.
template <class Step>
report drive(const std::string& target, const options& opts, Step step) {
  report out;
  out.target = target;
  auto start = clock_type::now();
  auto spent = [&] {
    return std::chrono::duration<double>(clock_type::now() - start).count();
  };
  for (size_t i = 0;; ++i) {
    if (opts.seconds > 0 ? spent() >= opts.seconds : i >= opts.iterations)
      break;
    step(out);
  }
  out.seconds = spent();
  return out;
}

// -- events ------------------------------------------------------------------

report fuzz_events(const options& opts) {
  // Damaged strings make protobuf log an error per record: not news here.
  gp::LogSilencer quiet;
  std::vector<std::string> seeds;
  for (const auto& p : files_of(fs::path{opts.corpus} / "events", ".bin"))
    seeds.push_back(read_all(p));
  rng r{opts.seed};
  // A job to apply decoded events to, as replay would.
  job_model base;
  for (const auto& s : seeds)
    if (auto ev = storage::decode_event(s);
        ev && std::holds_alternative<job_put>(ev->body)) {
      base = apply(std::move(base), *ev);
      break;
    }
  // The inspector's stored folds: the seed events folded one by one, each
  // fold a seed of its own (taken up after a crash, as the log gives it).
  std::vector<event> seed_events;
  {
    job_history h{2};
    for (const auto& s : seeds)
      if (auto ev = storage::decode_event(s)) {
        h.add(*ev);
        seed_events.push_back(std::move(*ev));
        seeds.push_back(storage::encode_history(h.state()));
      }
  }
  size_t next_seed = 0;
  return drive("events", opts, [&](report& out) {
    auto input = seeds[next_seed++ % seeds.size()];
    if (next_seed > seeds.size())
      mutate_bytes(input, r);
    ++out.inputs;
    if (auto x = storage::decode_history(input)) {
      ++out.accepted;
      auto again = storage::encode_history(*x);
      auto twice = storage::decode_history(again);
      if (!twice || storage::encode_history(*twice) != again)
        out.findings.push_back("history round trip does not hold for "
                               + shown(input));
      // A fold taken up from a damaged record folds the job's next events
      // and answers: it must not bring the process down.
      job_history h{std::move(*x), 2};
      for (int k = 0; k < 3 && !seed_events.empty(); ++k)
        h.add(seed_events[pick(r, seed_events.size())]);
      auto figures = h.figures(INT64_MAX / 2);
      auto all = h.all();
      (void) figures;
      (void) all;
    }
    if (auto ev = storage::decode_event(input)) {
      ++out.accepted;
      // What decodes must encode and decode to the same record (compared
      // as records: protobuf writes map entries in no fixed order).
      auto again = storage::encode_event(*ev);
      auto twice = storage::decode_event(again);
      recoverd::events::v1::Event a;
      recoverd::events::v1::Event b;
      if (!twice || !a.ParseFromString(again)
          || !b.ParseFromString(storage::encode_event(*twice))
          || !gp::util::MessageDifferencer::Equals(a, b))
        out.findings.push_back("event round trip does not hold for "
                               + shown(input));
      // A decoded record of a damaged log is applied by replay: it must
      // not bring the process down (a crash ends the run here).
      auto state = apply(base, *ev);
      (void) state;
    }
    // The head decoder (start-up after a crash) takes what the full one
    // takes, and counts the same pods and ranks.
    storage::spec_size size;
    auto head = storage::decode_snapshot_head(input, size);
    if (auto snap = storage::decode_snapshot(input)) {
      ++out.accepted;
      auto again = storage::encode_snapshot(*snap);
      if (!storage::decode_snapshot(again))
        out.findings.push_back("snapshot round trip does not hold for "
                               + shown(input));
      auto full_size = storage::size_of(snap->spec);
      if (!head || size.pods != full_size.pods
          || size.ranks != full_size.ranks
          || head->spec.job_id != snap->spec.job_id
          || head->spec.name != snap->spec.name)
        out.findings.push_back("snapshot head differs from the full decode "
                               "for "
                               + shown(input));
    }
  });
}

// -- grpc --------------------------------------------------------------------

// One seed request: the method it goes to and its message.
struct grpc_seed {
  std::string method;    // "/Recover/Init"
  std::string name;      // file name, for findings
  const gp::Descriptor* type = nullptr;
  std::string bytes;     // the serialized seed
};

// The service of a corpus file name "NN.Service.Method.txtpb".
const gp::ServiceDescriptor* service_named(const std::string& short_name) {
  const auto* pool = gp::DescriptorPool::generated_pool();
  if (short_name == "Recover")
    return pool->FindServiceByName("Recover");
  if (short_name == "Platform")
    return pool->FindServiceByName("recoverd.platform.v1.Platform");
  return nullptr;
}

std::vector<grpc_seed> grpc_seeds(const fs::path& dir) {
  // Referencing the generated types links their descriptors in.
  (void) ::ClientInfo::descriptor();
  (void) recoverd::platform::v1::PutJobRequest::descriptor();
  std::vector<grpc_seed> xs;
  for (const auto& p : files_of(dir, ".txtpb")) {
    auto stem = p.stem().string(); // NN.Service.Method
    auto a = stem.find('.');
    auto b = stem.find('.', a + 1);
    if (a == std::string::npos || b == std::string::npos)
      throw std::runtime_error("corpus file not NN.Service.Method: "
                               + p.string());
    const auto* svc = service_named(stem.substr(a + 1, b - a - 1));
    const auto* m = svc ? svc->FindMethodByName(stem.substr(b + 1)) : nullptr;
    if (m == nullptr || m->client_streaming() || m->server_streaming())
      throw std::runtime_error("corpus file names no unary method: "
                               + p.string());
    std::unique_ptr<gp::Message> msg{
      gp::MessageFactory::generated_factory()
        ->GetPrototype(m->input_type())
        ->New()};
    if (!gp::TextFormat::ParseFromString(read_all(p), msg.get()))
      throw std::runtime_error("corpus file does not parse: " + p.string());
    xs.push_back({"/" + svc->full_name() + "/" + m->name(), p.filename(),
                  m->input_type(), msg->SerializeAsString()});
  }
  return xs;
}

// Calls `method` with raw `bytes`; the status.
grpc::Status call_raw(grpc::GenericStub& stub, const std::string& method,
                      const std::string& bytes) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::Slice slice{bytes};
  grpc::ByteBuffer request{&slice, 1};
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&ctx, method, grpc::StubOptions{}, &request, &response,
                 [&](grpc::Status st) { done.set_value(std::move(st)); });
  return done.get_future().get();
}

// A daemon for the run, in a fresh data directory.
struct daemon_under_test {
  fs::path dir;
  std::unique_ptr<app> daemon;

  /// @param snapshot_every As the job config's, when not 0.
  explicit daemon_under_test(uint64_t seed, uint64_t snapshot_every = 0) {
    dir = fs::temp_directory_path()
          / ("recoverd-fuzz-" + std::to_string(::getpid()) + "-"
             + std::to_string(seed));
    fs::remove_all(dir);
    fs::create_directories(dir);
    app_options o;
    o.listen = "127.0.0.1:0";
    o.http_listen = "127.0.0.1:0";
    o.data_dir = (dir / "data").string();
    o.worker_threads = 2;
    if (snapshot_every > 0)
      o.registry.job.snapshot_every = snapshot_every;
    auto x = app::start(o);
    if (!x)
      throw std::runtime_error("cannot start a daemon: "
                               + message_of(x.error()));
    daemon = std::move(*x);
  }

  ~daemon_under_test() {
    if (daemon)
      daemon->stop();
    daemon.reset();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

// Codes that mean a bug on our side, not a refusal of bad input.
bool is_bug(grpc::StatusCode c) {
  return c == grpc::StatusCode::INTERNAL || c == grpc::StatusCode::UNKNOWN
         || c == grpc::StatusCode::DEADLINE_EXCEEDED
         || c == grpc::StatusCode::UNIMPLEMENTED;
}

report fuzz_grpc(const options& opts, daemon_under_test& d) {
  auto seeds = grpc_seeds(fs::path{opts.corpus} / "grpc");
  auto channel = grpc::CreateChannel(d.daemon->address(),
                                     grpc::InsecureChannelCredentials());
  grpc::GenericStub stub{channel};
  rng r{opts.seed};
  size_t next_seed = 0;
  auto out = drive("grpc", opts, [&](report& out) {
    const auto& seed = seeds[next_seed++ % seeds.size()];
    std::string bytes = seed.bytes;
    std::string what = seed.name;
    // Bytes that do not parse are gRPC's to refuse (UNIMPLEMENTED or
    // INTERNAL, before any of our code runs); only a wedge counts then.
    bool parses = true;
    if (next_seed > seeds.size()) {
      if (pick(r, 8) == 0) {
        mutate_bytes(bytes, r);
        what += " (bytes mutated)";
        std::unique_ptr<gp::Message> msg{
          gp::MessageFactory::generated_factory()->GetPrototype(seed.type)->New()};
        parses = msg->ParseFromString(bytes);
      } else {
        std::unique_ptr<gp::Message> msg{
          gp::MessageFactory::generated_factory()->GetPrototype(seed.type)->New()};
        msg->ParseFromString(bytes);
        for (size_t k = 0, n = 1 + pick(r, 3); k < n; ++k)
          mutate_message(*msg, r);
        bytes = msg->SerializeAsString();
        what += " as " + shown(msg->ShortDebugString());
      }
    }
    ++out.inputs;
    auto st = call_raw(stub, seed.method, bytes);
    if (st.ok())
      ++out.accepted;
    else if (parses ? is_bug(st.error_code())
                    : st.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED)
      out.findings.push_back(seed.method + " answered "
                             + std::to_string(st.error_code()) + " ("
                             + shown(st.error_message()) + ") to " + what);
  });
  // Still serving: the first seed (PutJob) is accepted as it was at first.
  auto st = call_raw(stub, seeds.front().method, seeds.front().bytes);
  if (!st.ok())
    out.findings.push_back("the daemon stopped serving after the run: "
                           + st.error_message());
  return out;
}

// -- http --------------------------------------------------------------------

// Mutates a request target: percent escapes, raw bytes, long or repeated
// segments, odd parameters.
void mutate_target(std::string& t, rng& r) {
  static const std::vector<std::string> bits = {
    "%ff", "%00", "%2f", "%", "%zz", "/", "//", "?", "&", "=", "..", "%c0%af",
    "from=-1", "limit=99999999999999999999", "seq=", "time=yesterday",
    "detailed=2", "job=%ff", std::string(3000, 'a'), "\xff", "#frag"};
  switch (pick(r, 4)) {
    case 0:
      t.insert(pick(r, t.size() + 1), bits[pick(r, bits.size())]);
      break;
    case 1:
      if (t.size() > 1)
        t.erase(1 + pick(r, t.size() - 1), 1 + pick(r, 6));
      break;
    case 2: t += (t.find('?') == std::string::npos ? "?" : "&")
                 + bits[pick(r, bits.size())];
      break;
    default: mutate_bytes(t, r);
  }
  if (t.empty() || t[0] != '/')
    t.insert(t.begin(), '/');
}

report fuzz_http(const options& opts, daemon_under_test& d) {
  std::vector<std::pair<std::string, std::string>> seeds;
  {
    std::istringstream in{read_all(fs::path{opts.corpus} / "http" / "paths.txt")};
    std::string method;
    std::string target;
    while (in >> method >> target)
      seeds.emplace_back(method, target);
  }
  if (seeds.empty())
    throw std::runtime_error("no http corpus");
  httplib::Client http{"http://" + d.daemon->http_address()};
  http.set_read_timeout(5, 0);
  http.set_connection_timeout(5, 0);
  rng r{opts.seed};
  size_t next_seed = 0;
  auto started = std::chrono::steady_clock::now();
  auto out = drive("http", opts, [&](report& out) {
    auto [method, target] = seeds[next_seed++ % seeds.size()];
    if (next_seed > seeds.size())
      for (size_t k = 0, n = 1 + pick(r, 2); k < n; ++k)
        mutate_target(target, r);
    ++out.inputs;
    httplib::Result res = method == "POST"   ? http.Post(target)
                          : method == "DELETE" ? http.Delete(target)
                                               : http.Get(target);
    if (!res) {
      // The client refuses some targets itself (control bytes): not ours.
      if (res.error() != httplib::Error::Read
          && res.error() != httplib::Error::Connection
          && res.error() != httplib::Error::ConnectionTimeout)
        return;
      // When it happened tells a stall of the daemon from a bad input.
      auto at = std::chrono::duration<double>(std::chrono::steady_clock::now()
                                              - started)
                  .count();
      out.findings.push_back(method + " " + shown(target) + ": no answer ("
                             + httplib::to_string(res.error()) + ") at "
                             + std::to_string(static_cast<int>(at)) + " s");
      return;
    }
    if (res->status < 300)
      ++out.accepted;
    if (res->status >= 500)
      out.findings.push_back(method + " " + shown(target) + ": "
                             + std::to_string(res->status) + " "
                             + shown(res->body));
  });
  auto res = http.Get("/metrics");
  if (!res || res->status != 200)
    out.findings.push_back("the HTTP server stopped serving after the run");
  return out;
}

} // namespace

std::vector<std::string> split_targets(const std::string& list) {
  std::vector<std::string> out;
  std::istringstream in{list};
  std::string t;
  while (std::getline(in, t, ','))
    if (!t.empty())
      out.push_back(t);
  return out;
}

std::vector<report> run(const options& opts) {
  std::vector<report> out;
  auto wants = [&](const char* t) {
    auto ts = split_targets(opts.target);
    return std::find(ts.begin(), ts.end(), "all") != ts.end()
      || std::find(ts.begin(), ts.end(), t) != ts.end();
  };
  if (wants("events"))
    out.push_back(fuzz_events(opts));
  if (wants("grpc") || wants("http")) {
    daemon_under_test d{opts.seed};
    if (wants("grpc"))
      out.push_back(fuzz_grpc(opts, d));
    if (wants("http"))
      out.push_back(fuzz_http(opts, d));
  }
  return out;
}

size_t write_event_corpus(const std::string& dir) {
  fs::create_directories(dir);
  options o;
  o.corpus = (fs::path{dir}.parent_path()).string();
  // Drive the grpc seeds through a daemon once, then take its log (its
  // latest snapshot too: one every 5 events).
  daemon_under_test d{0, 5};
  auto seeds = grpc_seeds(fs::path{o.corpus} / "grpc");
  auto channel = grpc::CreateChannel(d.daemon->address(),
                                     grpc::InsecureChannelCredentials());
  grpc::GenericStub stub{channel};
  for (const auto& s : seeds)
    call_raw(stub, s.method, s.bytes);
  auto& log = d.daemon->log();
  size_t n = 0;
  auto write = [&](const std::string& name, std::string_view bytes) {
    std::ofstream f{fs::path{dir} / name, std::ios::binary};
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    ++n;
  };
  auto err = log.for_each("fz", 1, [&](uint64_t seq, std::string_view bytes) {
    write("event-" + std::to_string(seq) + ".bin", bytes);
    return caf::error{};
  });
  if (err)
    throw std::runtime_error("cannot read the log: " + message_of(err));
  auto snap = log.snapshot("fz");
  if (snap && *snap)
    write("snapshot.bin", (*snap)->bytes);
  return n;
}

} // namespace recoverd::fuzz
