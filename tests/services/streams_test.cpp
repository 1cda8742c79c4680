// Server streams over real gRPC against clients that stop reading or come
// and go: what a stream holds is bounded in bytes, an overflowed stream is
// closed even when its client never reads again, and cancelled streams are
// forgotten.

#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "fixtures/service_fixture.hpp"
#include "inspect.grpc.pb.h"
#include "services/stream.hpp"

using namespace recoverd;
using namespace recoverd::test;
namespace pi = recoverd::inspection::v1;
using namespace std::chrono_literals;

namespace {

// The job's detailed status counter `name`, via Inspect.GetStatus.
int64_t job_counter(service_fixture& fx, const std::string& job,
                    const std::string& name) {
  auto inspect = pi::Inspect::NewStub(fx.channel);
  pi::GetStatusRequest req;
  req.set_jobid(job);
  req.set_detailed(true);
  pi::StatusResponse resp;
  auto c = service_fixture::ctx();
  auto st = inspect->GetStatus(c.get(), req, &resp);
  REQUIRE_MESSAGE(st.ok(), st.error_message());
  for (const auto& component : resp.components())
    if (component.name() == "job/" + job)
      for (const auto& [key, value] : component.counters())
        if (key == name)
          return static_cast<int64_t>(value);
  FAIL("no counter " << name);
  return -1;
}

// Sets annotation `key` of `job` to `value`.
void annotate(service_fixture& fx, const std::string& job,
              const std::string& key, const std::string& value) {
  pb::SetAnnotationsRequest set;
  set.set_jobid(job);
  (*set.mutable_set())[key] = value;
  pb::Annotations out;
  auto c = service_fixture::ctx();
  auto st = fx.platform->SetAnnotations(c.get(), set, &out);
  REQUIRE_MESSAGE(st.ok(), st.error_message());
}

} // namespace

TEST_CASE_FIXTURE(service_fixture, "streams: a watcher that stops reading "
                                   "is bounded in bytes, not messages, and "
                                   "its stream is closed") {
  REQUIRE(put(spec_of("j")).ok());
  // A 100 KB annotation: every view the watch sends carries it.
  annotate(*this, "j", "big", std::string(100 * 1024, 'b'));
  pb::JobRef ref;
  ref.set_jobid("j");
  grpc::ClientContext watch_ctx;
  watch_ctx.set_deadline(std::chrono::system_clock::now() + 30s);
  auto watch = platform->WatchAnnotations(&watch_ctx, ref);
  pb::Annotations first;
  REQUIRE(watch->Read(&first));
  CHECK(job_counter(*this, "j", "annotationWatchers") == 1);
  MESSAGE("the client reads nothing more; 100 changes would queue 10 MB");
  // Far below the message limit (1024), far above the byte limit (4 MiB).
  for (int i = 0; i < 100; ++i)
    annotate(*this, "j", "n", std::to_string(i));
  // The stream is closed by the server, not left "subscribed".
  bool closed = false;
  for (int i = 0; i < 100 && !closed; ++i) {
    closed = job_counter(*this, "j", "annotationWatchers") == 0;
    if (!closed)
      std::this_thread::sleep_for(50ms);
  }
  CHECK(closed);
  pb::Annotations change;
  int read = 0;
  while (watch->Read(&change))
    ++read;
  auto st = watch->Finish();
  CAPTURE(read);
  CHECK(read < 100);
  // Cancelled under a write its client never took, or finished after it.
  CHECK((st.error_code() == grpc::StatusCode::CANCELLED
         || st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED));
  MESSAGE("the job is unharmed: a new watcher gets the latest view");
  grpc::ClientContext again_ctx;
  again_ctx.set_deadline(std::chrono::system_clock::now() + 10s);
  auto again = platform->WatchAnnotations(&again_ctx, ref);
  REQUIRE(again->Read(&change));
  CHECK(change.annotations().at("n") == "99");
  again_ctx.TryCancel();
  while (again->Read(&change)) {
  }
  again->Finish();
}

TEST_CASE_FIXTURE(service_fixture, "streams: watchers opened and cancelled "
                                   "without any change are forgotten") {
  REQUIRE(put(spec_of("j")).ok());
  pb::JobRef ref;
  ref.set_jobid("j");
  for (int i = 0; i < 200; ++i) {
    grpc::ClientContext c;
    c.set_deadline(std::chrono::system_clock::now() + 10s);
    auto watch = platform->WatchAnnotations(&c, ref);
    pb::Annotations first;
    REQUIRE(watch->Read(&first));
    c.TryCancel();
    while (watch->Read(&first)) {
    }
    watch->Finish();
  }
  // The server learns of each cancel a moment after the client: on a
  // loaded machine the last few may still be counted for a while.
  for (int i = 0; i < 100 && job_counter(*this, "j", "annotationWatchers") > 0;
       ++i)
    std::this_thread::sleep_for(50ms);
  CHECK(job_counter(*this, "j", "annotationWatchers") == 0);
  // A new watcher drops the ended ones (the server learns of a cancel a
  // moment after the client): the job holds the new one only.
  std::this_thread::sleep_for(300ms);
  grpc::ClientContext c;
  c.set_deadline(std::chrono::system_clock::now() + 10s);
  auto watch = platform->WatchAnnotations(&c, ref);
  pb::Annotations first;
  REQUIRE(watch->Read(&first));
  auto held = job_counter(*this, "j", "annotationWatcherSlots");
  CAPTURE(held);
  CHECK(held == 1);
  CHECK(job_counter(*this, "j", "annotationWatchers") == 1);
  c.TryCancel();
  while (watch->Read(&first)) {
  }
  watch->Finish();
}
