// Comparing a job's input with what was submitted. See input_drift.hpp.
#include "client/input/input_drift.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_set>

#include "client/input/inputs.hpp"

namespace fanout::client {

namespace {

std::string names(const std::vector<std::string>& v, std::uint64_t n) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return n > v.size() ? s + ", ..." : s;
}

}  // namespace

std::string InputDrift::describe() const {
  std::string s;
  auto add = [&](const std::string& part) { s += (s.empty() ? "" : "; ") + part; };
  if (added != 0) add(fmt::format("{} added (e.g. {})", added, names(first_added, added)));
  if (removed != 0)
    add(fmt::format("{} removed (e.g. {})", removed, names(first_removed, removed)));
  if (changed != 0) {
    std::string ids;
    for (auto id : first_changed) ids += (ids.empty() ? "" : ", ") + std::to_string(id);
    add(ids.empty() ? fmt::format("{} mini-batch(es) read their input differently now", changed)
                    : fmt::format("{} mini-batch(es) read their input differently now (e.g. "
                                  "mini-batch {}{})",
                                  changed, ids, changed > first_changed.size() ? ", ..." : ""));
  }
  if (listed != submitted) {
    add(fmt::format("{} mini-batches listed now, {} submitted", listed, submitted));
  }
  return s;
}

Expected<InputDrift> compare_input(const config::JobConfig& cfg,
                                   const std::vector<store::SubmittedInput>& submitted,
                                   bool complete, const std::vector<std::string>& own) {
  InputDrift d;
  d.submitted = submitted.size();
  std::unordered_set<std::string> before;
  for (const auto& in : submitted) {
    for (const auto& item : in.items) {
      if (!item.empty()) before.insert(item);
    }
  }
  std::unordered_set<std::string> now;
  std::size_t at = 0;  // position in `submitted`, which is sorted by id
  auto listed = stream_minibatches(
      cfg,
      [&](proto::MiniBatch&& mb) {
        if (!complete && mb.index >= d.submitted) return false;  // not submitted yet: not compared
        ++d.listed;
        for (auto& item : mb.items) {
          if (item.empty()) continue;  // a table's rows: the detail says what they are
          if (!before.contains(item)) {
            ++d.added;
            if (d.first_added.size() < kDriftNames) d.first_added.push_back(item);
          }
          now.insert(std::move(item));
        }
        while (at < submitted.size() && submitted[at].id < mb.index) ++at;
        if (at < submitted.size() && submitted[at].id == mb.index &&
            submitted[at].detail != mb.detail) {
          ++d.changed;
          if (d.first_changed.size() < kDriftNames) d.first_changed.push_back(mb.index);
        }
        return true;
      },
      own);
  if (!listed) return Unexpected{listed.error()};
  for (const auto& in : submitted) {
    for (const auto& item : in.items) {
      if (item.empty() || now.contains(item)) continue;
      ++d.removed;
      if (d.first_removed.size() < kDriftNames) d.first_removed.push_back(item);
    }
  }
  // A table that lists more or fewer mini-batches than were submitted changed too, though no
  // name differs (its items are rows).
  if (d.listed != d.submitted && d.added == 0 && d.removed == 0) {
    d.changed += d.listed > d.submitted ? d.listed - d.submitted : d.submitted - d.listed;
  }
  return d;
}

}  // namespace fanout::client
