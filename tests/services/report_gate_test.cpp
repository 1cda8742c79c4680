// The gate that holds agents' answers while a fault is still stopping other
// jobs: what passes at once, what waits, in which order, and for how long.

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "actors/model/types.hpp"
#include "fixtures/eventually.hpp"
#include "recover.pb.h"
#include "services/metrics.hpp"
#include "services/report_gate.hpp"
#include "services/stream.hpp"

using namespace recoverd;
using namespace std::chrono_literals;

namespace {

// Polled often: the waits under test are tens of milliseconds.
bool eventually(const std::function<bool()>& pred) {
  return test::eventually(pred, 5s, 1ms);
}

// An agent signal stream that is never bound to a call: gRPC keeps its
// writes in the reactor's backlog, and the test completes them.
using signal_stream = grpc_stream<::ProcessManageSignal, process_signal>;

signal_stream* new_stream(const std::shared_ptr<report_gate>& gate) {
  auto* x = new signal_stream(
    nullptr, 16, [](const process_signal& sig, ::ProcessManageSignal& out) {
      out.set_signaltype(sig.signal_type);
    });
  x->sink()->count_writes(gate);
  return x;
}

process_signal stop_train() {
  process_signal x;
  x.signal_type = "stopTrain";
  return x;
}

} // namespace

TEST_CASE("report gate: open, a report goes at once on the caller's thread") {
  report_gate gate;
  std::thread::id ran_on;
  gate.admit([&] { ran_on = std::this_thread::get_id(); });
  bool same_thread = ran_on == std::this_thread::get_id();
  CHECK(same_thread);
  MESSAGE("a fault of one job does not close it");
  CHECK_FALSE(gate.begin(1));
  bool ran = false;
  gate.admit([&] { ran = true; });
  CHECK(ran);
  CHECK(gate.held_total() == 0);
}

TEST_CASE("report gate: closed by fan-outs, opened by the last one's end") {
  report_gate gate{10s};
  std::vector<int> order;
  REQUIRE(gate.begin(1000));
  REQUIRE(gate.begin(2));
  for (int i = 0; i < 3; ++i)
    gate.admit([&order, i] { order.push_back(i); });
  CHECK(order.empty());
  gate.end();
  CHECK_MESSAGE(order.empty(), "one fan-out is still stopping jobs");
  gate.end();
  CHECK(order == std::vector<int>{0, 1, 2});
  CHECK(gate.held_total() == 3);
  MESSAGE("open again: the next report goes at once");
  gate.admit([&order] { order.push_back(3); });
  CHECK(order.size() == 4);
  MESSAGE("an end without a begin does not wedge it");
  gate.end();
  gate.admit([&order] { order.push_back(4); });
  CHECK(order.size() == 5);
}

TEST_CASE("report gate: a report waits at most max_hold") {
  // Long enough that a test thread the machine preempts between two lines
  // does not see the wait over already.
  report_gate gate{500ms};
  std::atomic<int> ran{0};
  REQUIRE(gate.begin(10));
  auto t0 = std::chrono::steady_clock::now();
  gate.admit([&] { ran = 1; });
  CHECK(ran == 0);
  REQUIRE(eventually([&] { return ran == 1; }));
  CHECK(std::chrono::steady_clock::now() - t0 >= 500ms);
  MESSAGE("the fan-out still runs: the next report waits its own turn");
  gate.admit([&] { ran = 2; });
  CHECK(ran == 1);
  REQUIRE(eventually([&] { return ran == 2; }));
  gate.end();
}

TEST_CASE("report gate: what is held when it goes is run, not dropped") {
  bool ran = false;
  {
    report_gate gate{10s};
    REQUIRE(gate.begin(5));
    gate.admit([&] { ran = true; });
    CHECK_FALSE(ran);
  }
  CHECK(ran);
  MESSAGE("closed, it holds nothing, even while a fan-out runs");
  report_gate gate{10s};
  REQUIRE(gate.begin(5));
  gate.admit([&] { ran = false; });
  gate.close();
  CHECK_FALSE(ran);
  gate.admit([&] { ran = true; });
  CHECK(ran);
}

TEST_CASE("report gate: /metrics counts the reports it held") {
  auto gate = std::make_shared<report_gate>(10s);
  request_metrics metrics;
  metrics.set_report_gate(gate);
  REQUIRE(gate->begin(3));
  for (int i = 0; i < 3; ++i)
    gate->admit([] {});
  gate->end();
  std::string page;
  metrics.render(page);
  CHECK(page.find("# TYPE recoverd_reports_held_total counter")
        != std::string::npos);
  CHECK(page.find("\nrecoverd_reports_held_total 3\n") != std::string::npos);
}

TEST_CASE("report gate: each caller's reports keep their order") {
  report_gate gate{2ms};
  constexpr int callers = 4;
  constexpr int each = 2000;
  std::mutex mtx;
  std::vector<std::vector<int>> seen(callers);
  std::atomic<bool> done{false};
  // Fan-outs come and go while the callers report.
  std::thread storms{[&] {
    while (!done) {
      if (gate.begin(100)) {
        std::this_thread::sleep_for(100us);
        gate.end();
      }
    }
  }};
  std::vector<std::thread> threads;
  for (int c = 0; c < callers; ++c)
    threads.emplace_back([&, c] {
      for (int i = 0; i < each; ++i)
        gate.admit([&, c, i] {
          std::lock_guard<std::mutex> guard{mtx};
          seen[c].push_back(i);
        });
    });
  for (auto& t : threads)
    t.join();
  done = true;
  storms.join();
  REQUIRE(eventually([&] {
    std::lock_guard<std::mutex> guard{mtx};
    for (const auto& x : seen)
      if (x.size() != each)
        return false;
    return true;
  }));
  CHECK(gate.held_total() > 0);
  for (int c = 0; c < callers; ++c) {
    bool in_order = true;
    for (int i = 0; i < each; ++i)
      in_order = in_order && seen[c][static_cast<size_t>(i)] == i;
    CHECK_MESSAGE(in_order, "caller " << c);
  }
}

TEST_CASE("report gate: after the fan-out it waits for the stops to be "
          "written") {
  auto gate = std::make_shared<report_gate>(10s, 10s);
  auto* a = new_stream(gate);
  auto* b = new_stream(gate);
  REQUIRE(gate->begin(2));
  REQUIRE(a->sink()->push(stop_train()));
  REQUIRE(b->sink()->push(stop_train()));
  REQUIRE(b->sink()->push(stop_train()));
  int ran = 0;
  gate->admit([&] { ++ran; });
  gate->end();
  CHECK_MESSAGE(ran == 0, "three stops are not written yet");
  a->OnWriteDone(true);
  b->OnWriteDone(true);
  CHECK_MESSAGE(ran == 0, "one stop is still queued");
  MESSAGE("a stream that ends with its queue counts it as gone");
  b->OnDone();
  CHECK(ran == 1);
  gate->admit([&] { ++ran; });
  CHECK(ran == 2);
  a->OnDone();
}

TEST_CASE("report gate: an agent that never reads holds it at most "
          "max_drain") {
  auto gate = std::make_shared<report_gate>(10s, 500ms);
  auto* a = new_stream(gate);
  REQUIRE(gate->begin(2));
  REQUIRE(a->sink()->push(stop_train()));
  std::atomic<int> ran{0};
  gate->admit([&] { ran = 1; });
  auto t0 = std::chrono::steady_clock::now();
  gate->end();
  CHECK(ran == 0);
  REQUIRE(eventually([&] { return ran == 1; }));
  CHECK(std::chrono::steady_clock::now() - t0 >= 500ms);
  MESSAGE("the drain is over: reports go at once again");
  gate->admit([&] { ran = 2; });
  CHECK(ran == 2);
  a->OnDone();
}
