#include "actors/node_registry.hpp"

#include <algorithm>
#include <iterator>
#include <memory>
#include <optional>

#include <caf/typed_event_based_actor.hpp>

#include "actors/error.hpp"
#include "actors/log.hpp"
#include "storage/node_codec.hpp"

namespace recoverd {

namespace {

using self_ptr = node_registry_actor::stateful_pointer<node_registry_state>;

// Writes everything queued as one append to the node stream (with a
// snapshot when one is due), then folds it; work arriving meanwhile waits
// for the next write. Jobs' observations are fire-and-forget, so the
// registry never holds a report up and its mailbox does not grow with the
// journal's latency. A clear is decided against the table as the events
// before it in the same write leave it.
void flush(self_ptr self) {
  auto& st = self->state;
  if (st.writing || st.queued.empty())
    return;
  auto work = std::move(st.queued);
  st.queued.clear();
  std::vector<node_event> evs;
  size_t observed = 0;
  std::vector<caf::typed_response_promise<bool>> cleared;
  std::optional<node_table> projected;
  size_t folded = 0;
  auto now = st.cfg.clock();
  for (auto& w : work) {
    if (auto* xs = std::get_if<std::vector<node_observation>>(&w)) {
      auto more = decide(st.table, std::move(*xs));
      observed += more.size();
      std::move(more.begin(), more.end(), std::back_inserter(evs));
      continue;
    }
    auto& c = std::get<pending_clear>(w);
    if (!projected)
      projected = st.table;
    for (; folded < evs.size(); ++folded)
      projected = recoverd::apply(std::move(*projected), evs[folded]);
    auto ev = decide_clear(*projected, c.node, c.by, now);
    if (!ev) {
      c.reply.deliver(false);
      continue;
    }
    ES_INFO("node_registry: {} clears node {}", c.by, c.node);
    evs.push_back(std::move(*ev));
    cleared.push_back(std::move(c.reply));
  }
  if (evs.empty())
    return;
  std::vector<log_record> records;
  records.reserve(evs.size());
  auto seq = st.seq;
  for (const auto& e : evs)
    records.push_back(
      {storage::node_stream, ++seq, storage::encode_node_event(e)});
  std::vector<snapshot_record> snapshots;
  auto tail = st.tail;
  tail.events += evs.size();
  for (const auto& r : records)
    tail.bytes += r.bytes.size();
  if (snapshot_due(tail, st.cfg.snapshot_every)) {
    auto next = st.table;
    for (const auto& e : evs)
      next = recoverd::apply(std::move(next), e);
    snapshots.push_back(
      {storage::node_stream, seq, storage::encode_node_snapshot(next)});
    tail = {0, 0, snapshots.back().bytes.size()};
  }
  st.writing = true;
  // Both handlers answer the clears; only one of them runs.
  auto replies = std::make_shared<decltype(cleared)>(std::move(cleared));
  self
    ->request(st.journal, caf::infinite, append_atom::value, fleet_atom::value,
              std::move(records), std::move(snapshots))
    .then(
      [self, seq, tail, evs = std::move(evs), replies](uint64_t) mutable {
        auto& st = self->state;
        for (const auto& e : evs)
          st.table = recoverd::apply(std::move(st.table), e);
        st.seq = seq;
        st.tail = tail;
        st.recorded += evs.size();
        for (auto& rp : *replies)
          rp.deliver(true);
        st.writing = false;
        flush(self);
      },
      [self, observed, replies](caf::error& err) {
        auto& st = self->state;
        // The jobs' own events are durable; only the fleet's record of
        // them is lost (the status reports it).
        st.lost += observed;
        if (observed > 0)
          ES_WARN("node_registry lost {} node observations: {}", observed,
                  message_of(err));
        for (auto& rp : *replies)
          rp.deliver(err);
        st.writing = false;
        flush(self);
      });
}

component_status status_of(const node_registry_state& st) {
  component_status result;
  result.name = node_registry_state::name;
  result.kind = node_registry_state::name;
  auto n = count(st.table);
  result.counters["nodes"] = n.tracked;
  result.counters["quarantined"] = n.quarantined;
  result.counters["lastSeq"] = st.seq;
  result.counters["recorded"] = st.recorded;
  result.counters["lost"] = st.lost;
  if (st.lost > 0)
    result.problem = std::to_string(st.lost)
                     + " node observations were lost to failed writes";
  return result;
}

} // namespace

node_registry_actor::behavior_type
node_registry(node_registry_actor::stateful_pointer<node_registry_state> self,
              initial_nodes initial, nodes_config cfg, journal_actor journal) {
  if (auto err = validate(cfg)) {
    self->quit(err);
    return node_registry_actor::behavior_type::make_empty_behavior();
  }
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.journal = std::move(journal);
  st.table = std::move(initial.table);
  st.table.cfg = st.cfg.scoring;
  st.seq = initial.seq;
  st.tail = initial.tail;
  return {
    [=](observe_atom, std::vector<node_observation>& xs) {
      self->state.queued.emplace_back(std::move(xs));
      flush(self);
    },
    [=](list_atom, bool quarantined_only) {
      return list(self->state.table, self->state.cfg.clock(),
                  quarantined_only);
    },
    [=](nodeclear_atom, std::string& node,
        std::string& who) -> caf::result<bool> {
      auto rp = self->make_response_promise<bool>();
      self->state.queued.emplace_back(
        pending_clear{std::move(node), std::move(who), rp});
      flush(self);
      return rp;
    },
    [=](status_atom) { return count(self->state.table); },
    [=](status_atom, status_verbosity) { return status_of(self->state); },
  };
}

} // namespace recoverd
