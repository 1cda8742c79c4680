#pragma once

/// From a gRPC callback to an actor and back without blocking: a one-shot
/// actor sends the request and finishes the reactor from the response.

#include <atomic>
#include <chrono>
#include <memory>
#include <utility>

#include <caf/actor_system.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/logger.hpp>
#include <caf/sec.hpp>
#include <grpcpp/support/server_callback.h>

#include "actors/sink.hpp"

#include "services/status_mapping.hpp"

namespace recoverd {

/// How long the edge waits for an actor's answer.
constexpr auto edge_timeout = std::chrono::seconds(60);

/// Spawns `fn(self, xs...)` from a thread that is not CAF's (a gRPC
/// callback). CAF 0.17's spawn leaves the calling thread holding a
/// reference to the system's logger, and the actor system's destructor waits
/// until the logger is gone: a gRPC thread that outlives the app (another
/// channel or server in the process keeps gRPC's threads up) would hang the
/// shutdown for good. The reference is dropped at once.
template <class Fn, class... Ts>
void spawn_at_edge(caf::actor_system& sys, Fn fn, Ts&&... xs) {
  sys.spawn(std::move(fn), std::forward<Ts>(xs)...);
  caf::logger::set_current_actor_system(nullptr);
}

/// Sends `xs...` to `dest`; on a `Response` calls `on_reply(response)`, which
/// fills the gRPC reply and returns the status to finish with; on an error
/// finishes with its mapped status. `Finish` is called exactly once.
template <class Response, class Handle, class OnReply, class... Ts>
void ask(caf::actor_system& sys, const Handle& dest,
         grpc::ServerUnaryReactor* reactor, OnReply on_reply, Ts... xs) {
  // Data goes in as spawn arguments, not captures (see stack.md, CAF + UBSan).
  spawn_at_edge(
    sys,
    [](caf::event_based_actor* self, Handle dest,
       grpc::ServerUnaryReactor* reactor, OnReply on_reply, Ts... xs) {
      self->request(dest, edge_timeout, std::move(xs)...)
        .then([=](Response& x) mutable { reactor->Finish(on_reply(x)); },
              [=](caf::error& err) { reactor->Finish(to_grpc_status(err)); });
    },
    dest, reactor, std::move(on_reply), std::move(xs)...);
}

/// A reply sink that hands its answer to `fn(err, x)` exactly once (`x`
/// default-constructed on an error), from whichever thread answers; also
/// when the sink is dropped unanswered (the actor holding it ended): then
/// with `request_receiver_down`.
template <class T, class Fn>
class once_reply final : public reply_sink<T> {
public:
  explicit once_reply(Fn fn) : fn_(std::move(fn)) {
    // nop
  }

  ~once_reply() override {
    fail(caf::make_error(caf::sec::request_receiver_down));
  }

  void deliver(T x) override {
    if (!done_.exchange(true))
      fn_(caf::error{}, x);
  }

  void fail(const caf::error& err) override {
    if (!done_.exchange(true)) {
      T none{};
      fn_(err, none);
    }
  }

private:
  Fn fn_;
  std::atomic<bool> done_{false};
};

/// Makes a `once_reply` calling `fn(err, x)`.
template <class T, class Fn>
std::shared_ptr<reply_sink<T>> make_once_reply(Fn fn) {
  return std::make_shared<once_reply<T, Fn>>(std::move(fn));
}

/// A reply sink that finishes a unary reactor: `on_reply(x)` fills the gRPC
/// reply and returns the status to finish with; an error finishes with its
/// mapped status. `Finish` is called exactly once (see `once_reply`).
template <class T, class OnReply>
std::shared_ptr<reply_sink<T>>
make_unary_reply(grpc::ServerUnaryReactor* reactor, OnReply on_reply) {
  return make_once_reply<T>(
    [reactor, on_reply = std::move(on_reply)](const caf::error& err,
                                              T& x) mutable {
      reactor->Finish(err ? to_grpc_status(err) : on_reply(x));
    });
}

/// Like `ask`, for callers that are not a unary reactor (the Inspect API,
/// serving gRPC and HTTP alike): `done` gets the status to answer with,
/// exactly once, on an actor thread.
template <class Response, class Handle, class OnReply, class Done,
          class... Ts>
void ask_then(caf::actor_system& sys, const Handle& dest, OnReply on_reply,
              Done done, Ts... xs) {
  spawn_at_edge(
    sys,
    [](caf::event_based_actor* self, Handle dest, OnReply on_reply, Done done,
       Ts... xs) {
      self->request(dest, edge_timeout, std::move(xs)...)
        .then([=](Response& x) mutable { done(on_reply(x)); },
              [=](caf::error& err) mutable { done(to_grpc_status(err)); });
    },
    dest, std::move(on_reply), std::move(done), std::move(xs)...);
}

/// Like `ask`, for streams: on a `Response` does nothing (the actor now feeds
/// the sink); on an error ends the stream through `sink->finish`.
template <class Response, class Handle, class Sink, class... Ts>
void open_stream(caf::actor_system& sys, const Handle& dest, Sink sink,
                 Ts... xs) {
  spawn_at_edge(
    sys,
    [](caf::event_based_actor* self, Handle dest, Sink sink, Ts... xs) {
      self->request(dest, edge_timeout, std::move(xs)..., sink)
        .then([](Response&) {}, [=](caf::error& err) { sink->finish(err); });
    },
    dest, sink, std::move(xs)...);
}

} // namespace recoverd
