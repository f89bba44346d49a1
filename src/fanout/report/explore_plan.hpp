// `fanout explore`'s sequential plan, pure (no I/O, no clock): how large the sample must be, which
// treatment runs next, when a comparison is clear, how numeric levels follow the gain, and what a
// confirmation backs. The plan is a function of the runs so far (replayed from the first), so a
// --resume continues it exactly. client/commands/explore.cpp runs what it says. See
// docs/explore.md ("The rules").
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fanout/report/explore.hpp"

namespace fanout::report {

// The rules of an experiment (docs/explore.md states them).
struct ExploreRules {
  std::size_t batches_per_worker = 4;  // K: every run has at least K mini-batches per worker
  std::size_t min_reps = 3;       // a candidate's runs (each beside a base run) before a verdict
  std::size_t max_reps = 6;       // ... and at most: then "no clear effect"
  std::size_t confirm_reps = 3;   // the confirmation: the winner and the base, each at least
  double min_utilisation = 0.05;  // below it, the runs measure start-up: nothing is called real
  std::uint64_t max_workers = 0;  // the workers walk's limit (0: none)
  std::uint64_t seed = 1;         // the shuffle of each round
};

// What the input allows: the mini-batches one run of a treatment makes, and its workers in all
// (given the factors as they are then: the walk adds levels).
struct Capacity {
  using Measure = std::function<std::uint64_t(const std::vector<ExploreFactor>&, const Treatment&)>;
  Measure mini_batches{};
  Measure workers{};
};

// Whether a run of `t` has at least K mini-batches per worker.
[[nodiscard]] bool fits(const Capacity& cap, const ExploreRules& rules,
                        const std::vector<ExploreFactor>& factors, const Treatment& t);

// The sample: `requested` items (of `input_items`), grown to 4 × K × workers × mini_batch_size (so
// the base and one step up of mini_batch_size or workers fit), at most the whole input.
// `too_small` when even the whole input gives the base fewer than K mini-batches per worker.
struct SampleChoice {
  std::uint64_t items = 0;
  bool grown = false, too_small = false;
  std::string note{};
};
[[nodiscard]] SampleChoice choose_sample(std::uint64_t input_items, std::uint64_t requested,
                                         std::uint64_t items_per_batch, std::uint64_t workers,
                                         const ExploreRules& rules);

// A paired comparison of a treatment with the base: each of its runs against the base run
// nearest in the sequence (the same round), on the log scale.
struct Comparison {
  std::size_t n = 0;
  double mean_log = 0, half_log = 0;    // mean log ratio (treatment / base) and its 95% half-width
  double utilisation = 0;               // the mean utilisation of the base runs paired
  [[nodiscard]] double effect() const;  // relative change of time per item: -0.3 = 30% less
  [[nodiscard]] double low() const;     // the interval's ends, relative
  [[nodiscard]] double high() const;
  [[nodiscard]] bool separated() const {
    return n >= 2 && half_log > 0 && std::abs(mean_log) > half_log;
  }
};

enum class Verdict { Pending, Faster, Slower, NoClearEffect, Failures, Unsupported };
[[nodiscard]] const char* verdict_name(Verdict v);

// One level of one factor, the others at base, compared with the base.
struct Candidate {
  std::size_t factor = 0, level = 0;
  Comparison cmp{};
  Verdict verdict = Verdict::Pending;
};

enum class Phase { Screen, Confirm, Done };

struct Plan {
  std::vector<ExploreFactor> factors{};  // with the levels the walk added (appended)
  Phase phase = Phase::Done;
  Treatment next{};  // the treatment to run next (phase Screen or Confirm)
  std::vector<Candidate> candidates{};
  std::vector<std::string> notes{};  // levels dropped or capped, and why
  Treatment winner{};                // every factor at its clearly faster level (else base)
  Comparison confirmation{};         // the winner vs the base, over the confirmation's runs
  bool confirmed = false;            // the winner is clearly faster, confirm_reps runs each
  std::size_t rounds = 0;
};

// Replays `runs` through the plan and says what comes next. `factors` as stored (their
// `initial` levels are the ones the experiment started with).
[[nodiscard]] Plan plan_experiment(std::vector<ExploreFactor> factors,
                                   const std::vector<ExploreRun>& runs, const ExploreRules& rules,
                                   const Capacity& cap);

// The next level past `value` for a numeric factor (up or down), or "" when there is none:
// mini_batch_size and prefetch ×4 (prefetch 0 → 2), workers and pools ×2, poll_ms ×5 and ÷5.
[[nodiscard]] std::string next_level(const std::string& factor, const std::string& value, bool up);

// An interaction measured in a balanced block: base, a alone, b alone, a and b together, each
// with at least two runs (the others at base). `ratio` is time(ab)·time(base)/(time(a)·time(b))
// − 1 on the runs' geometric means, with its 95% half-width on the log scale.
struct BlockInteraction {
  std::size_t a = 0, b = 0;
  std::size_t level_a = 0, level_b = 0;
  double mean_log = 0, half_log = 0;
};
[[nodiscard]] std::vector<BlockInteraction> block_interactions(
    const std::vector<ExploreFactor>& factors, const std::vector<ExploreRun>& runs);

// The terminal summary of a plan: the rule, every candidate with its verdict and interval, the
// notes, the interactions a balanced block supports, and the confirmation.
[[nodiscard]] std::string plan_text(const Plan& p, const std::vector<ExploreRun>& runs,
                                    const ExploreRules& rules);

// explore.html's analysis: analyse()'s figures, with the interactions of balanced blocks only and
// the best treatment the confirmed winner (else the base), its speed-up the confirmation's.
[[nodiscard]] ExploreAnalysis plan_analysis(const Plan& p, const std::vector<ExploreRun>& runs);

// --write's YAML: the confirmed winner's settings that differ from the base, each with its
// measured gain and interval in a comment; empty when nothing is confirmed.
[[nodiscard]] std::string confirmed_yaml(const Plan& p);

}  // namespace fanout::report
