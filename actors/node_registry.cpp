#include "actors/node_registry.hpp"

#include <caf/typed_event_based_actor.hpp>

#include "actors/error.hpp"
#include "actors/log.hpp"
#include "storage/node_codec.hpp"

namespace recoverd {

namespace {

using self_ptr = node_registry_actor::stateful_pointer<node_registry_state>;

// Writes `evs` to the node stream (with a snapshot when one is due), then
// folds them and calls `on_durable`; on a failed write nothing changes and
// `on_error` gets why. Other messages wait meanwhile, so events are
// numbered and folded in order.
template <class OnDurable, class OnError>
void commit(self_ptr self, std::vector<node_event> evs, OnDurable on_durable,
            OnError on_error) {
  auto& st = self->state;
  if (evs.empty()) {
    on_durable();
    return;
  }
  std::vector<log_record> records;
  auto seq = st.seq;
  for (const auto& e : evs)
    records.push_back(
      {storage::node_stream, ++seq, storage::encode_node_event(e)});
  std::vector<snapshot_record> snapshots;
  auto since = st.since_snapshot + evs.size();
  if (since >= st.cfg.snapshot_every) {
    auto next = st.table;
    for (const auto& e : evs)
      next = recoverd::apply(std::move(next), e);
    snapshots.push_back(
      {storage::node_stream, seq, storage::encode_node_snapshot(next)});
    since = 0;
  }
  self
    ->request(st.journal, caf::infinite, append_atom::value, fleet_atom::value,
              std::move(records), std::move(snapshots))
    .await(
      [self, seq, since, evs = std::move(evs), on_durable](uint64_t) mutable {
        auto& st = self->state;
        for (const auto& e : evs)
          st.table = recoverd::apply(std::move(st.table), e);
        st.seq = seq;
        st.since_snapshot = since;
        st.recorded += evs.size();
        on_durable();
      },
      [on_error](caf::error& err) mutable { on_error(err); });
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
  st.since_snapshot = initial.since_snapshot;
  return {
    [=](observe_atom, std::vector<node_observation>& xs) {
      auto evs = decide(self->state.table, std::move(xs));
      auto n = evs.size();
      commit(
        self, std::move(evs), [] {},
        [self, n](caf::error& err) {
          // The job's own events are durable; only the fleet's record of
          // them is lost (the status reports it).
          self->state.lost += n;
          ES_WARN("node_registry lost {} node observations: {}", n,
                  message_of(err));
        });
    },
    [=](list_atom, bool quarantined_only) {
      return list(self->state.table, self->state.cfg.clock(),
                  quarantined_only);
    },
    [=](nodeclear_atom, std::string& node,
        std::string& who) -> caf::result<bool> {
      auto ev = decide_clear(self->state.table, node, who,
                             self->state.cfg.clock());
      if (!ev)
        return false;
      auto rp = self->make_response_promise<bool>();
      commit(
        self, {std::move(*ev)},
        [=]() mutable {
          ES_INFO("node_registry: {} cleared node {}", who, node);
          rp.deliver(true);
        },
        [=](caf::error& err) mutable { rp.deliver(err); });
      return rp;
    },
    [=](status_atom) { return count(self->state.table); },
    [=](status_atom, status_verbosity) { return status_of(self->state); },
  };
}

} // namespace recoverd
