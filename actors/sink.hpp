#pragma once

/// The one-way channel from a job actor to an open gRPC server stream. The
/// implementation lives in `services/` (it owns the gRPC reactor); actors
/// only see this interface, so they never block and never touch gRPC.

#include <functional>
#include <memory>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/error.hpp>

#include "actors/model/types.hpp"

namespace recoverd {

/// A bounded, non-blocking outlet for messages of type `T`.
template <class T>
class stream_sink {
public:
  virtual ~stream_sink() = default;

  /// Queues `x` for sending. Returns false when the stream has ended; when
  /// the buffer overflows, the stream is ended with RESOURCE_EXHAUSTED and
  /// false is returned.
  virtual bool push(const T& x) = 0;

  /// Ends the stream after what is queued; an empty error ends it with OK.
  virtual void finish(const caf::error& err) = 0;

  /// Calls `f` once when the stream has ended for any reason (the client
  /// went away, `finish`, overflow); at once when it has already ended.
  virtual void on_close(std::function<void()> f) = 0;

  /// True once the stream has ended.
  virtual bool closed() const = 0;
};

/// Where a job sends its agent signals.
using signal_sink_ptr = std::shared_ptr<stream_sink<process_signal>>;

/// Where a job sends annotation changes.
using annotations_sink_ptr = std::shared_ptr<stream_sink<annotations_view>>;

/// Where a job sends SwitchRankList to its workers.
using switch_sink_ptr = std::shared_ptr<stream_sink<switch_rank_list>>;

/// Where a job sends StressTestRankParams to its workers.
using stress_sink_ptr = std::shared_ptr<stream_sink<stress_rank_params>>;

/// Where a job sends messages to the operator of an O&M action.
using om_sink_ptr = std::shared_ptr<stream_sink<om_message>>;

/// A one-shot outlet for the answer to one request, for callers that are
/// not actors (the gRPC edge): the actor answers through it instead of a
/// response message, so no actor sits between the caller and the job.
/// Implementations answer exactly once; one destroyed unanswered (its
/// message was dropped with the actor) answers with an error.
template <class T>
class reply_sink {
public:
  virtual ~reply_sink() = default;

  /// Answers with `x`.
  virtual void deliver(T x) = 0;

  /// Answers with the error `err`.
  virtual void fail(const caf::error& err) = 0;
};

/// Where a job answers a report sent without a request.
using report_reply_ptr = std::shared_ptr<reply_sink<biz_status>>;

/// Where a job answers its part of a ReportDeviceFaults sent without a
/// request.
using faults_reply_ptr = std::shared_ptr<reply_sink<device_faults_outcome>>;

} // namespace recoverd

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(recoverd::switch_sink_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(recoverd::om_sink_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(recoverd::stress_sink_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(recoverd::signal_sink_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(recoverd::annotations_sink_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(recoverd::report_reply_ptr)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(recoverd::faults_reply_ptr)
