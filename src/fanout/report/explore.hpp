// `fanout explore`: the design of an experiment over a job's settings and its analysis, pure (no
// I/O): which treatments to run (one factor at a time from the base, then a two-level fractional
// factorial over the factors that mattered, with repeats), the per-factor deltas over every pair
// of runs that differ in that factor only, a linear model with pairwise interactions fitted by
// least squares, and explore.html. client/commands/explore.cpp runs the treatments. See
// docs/explore.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace fanout::report {

// A setting the experiment varies, with its levels as written in a `fanout:` block (or a
// command-line flag); `base` is the index of the user's own level.
struct ExploreFactor {
  std::string name{};
  std::vector<std::string> levels{};
  std::size_t base = 0;
};

// One configuration: a level index per factor (in the order of the factors).
using Treatment = std::vector<std::size_t>;

// One run of a treatment: seconds per item of the whole job (the measure), its wall time, and
// whether it succeeded (a failed run is not analysed).
struct ExploreRun {
  Treatment treatment{};
  double seconds_per_item = 0;
  double wall_s = 0;
  std::uint64_t job_id = 0;
  bool ok = true;
};

// Stage 1: the base `repeats` times, then every other level of each factor alone, once.
[[nodiscard]] std::vector<Treatment> one_factor_design(const std::vector<ExploreFactor>& factors,
                                                       std::size_t repeats);

// Stage 2: a two-level fractional factorial over `chosen` (indexes of factors), each at its
// levels lo[i] and hi[i]; the others stay at their base. At most max_runs runs (a power of two
// at least 4, when there are 2 or more factors): the first m factors take every combination and
// each further factor the product of a distinct set of two or more of them (resolution III or
// better: no main effect is aliased with another). Deterministic.
[[nodiscard]] std::vector<Treatment> fractional_factorial(const std::vector<ExploreFactor>& factors,
                                                          const std::vector<std::size_t>& chosen,
                                                          const std::vector<std::size_t>& lo,
                                                          const std::vector<std::size_t>& hi,
                                                          std::size_t max_runs);

// Least squares: the coefficients b minimising |X b - y|, X given by rows, through the normal
// equations solved by Cholesky with a tiny ridge so an aliased column gets 0 rather than NaN.
[[nodiscard]] std::vector<double> least_squares(const std::vector<std::vector<double>>& x,
                                                const std::vector<double>& y);

// The mean and half-width of its 95% interval (Student's t); half-width 0 for one value.
struct MeanInterval {
  double mean = 0, half = 0;
  std::size_t n = 0;
};
[[nodiscard]] MeanInterval mean_interval(const std::vector<double>& v);

// The effect of one factor: the relative change of seconds per item over every pair of runs
// (X, X+t) that differ in this factor only, from its lower level index to its higher.
struct FactorEffect {
  std::size_t factor = 0;
  MeanInterval delta{};              // relative change, -0.3 = 30% less time per item
  double best_vs_base = 0;           // relative change from its base level to its best level
  double spread = 0;                 // (slowest level - fastest level) / base, the others at base
  std::size_t best_level = 0;        // the level with the least mean time (other factors at base)
  std::vector<double> before{};      // the pairs' seconds per item at the lower level ...
  std::vector<double> after{};       // ... and at the higher level
  std::vector<std::string> other{};  // the other factors' levels of each pair, in words
  double model = 0;                  // the model's main effect (log scale, low to high)
  bool matters = false;              // its effect is larger than the noise
};

// An interaction of two factors in the model: coefficient on the log scale and in words.
struct Interaction {
  std::size_t a = 0, b = 0;
  double coefficient = 0;
  std::string words{};
};

struct ExploreAnalysis {
  double noise = 0;                         // relative spread of the base's repeats (sd / mean)
  std::vector<FactorEffect> effects{};      // ranked: largest effect first
  std::vector<double> coefficients{};       // intercept, main effects, then pairs (a<b) in order
  std::vector<Interaction> interactions{};  // every pair, largest |coefficient| first
  Treatment best{};                         // the measured treatment with the least mean time
  double best_seconds_per_item = 0, base_seconds_per_item = 0;
  MeanInterval speedup{};  // base time / best time, with its interval
};

// The factor's coded value in the model: its level index mapped onto [-1, 1].
[[nodiscard]] double coded_level(const ExploreFactor& f, std::size_t level);

// The model's columns for one treatment: 1, each factor's coded level, each pair's product.
[[nodiscard]] std::vector<double> model_row(const std::vector<ExploreFactor>& factors,
                                            const Treatment& t);

// Analyses the runs (failed ones are left out). Factors are ranked by their spread; one matters
// when its spread exceeds noise_factor × the noise (and 2%).
[[nodiscard]] ExploreAnalysis analyse(const std::vector<ExploreFactor>& factors,
                                      const std::vector<ExploreRun>& runs,
                                      double noise_factor = 2.0);

// The `fanout:` block of a treatment's settings that differ from the base: the lines of
// `--write FILE`.
[[nodiscard]] std::string explore_yaml(const std::vector<ExploreFactor>& factors,
                                       const Treatment& t);

// A treatment in words: "mini_batch_size=8 prefetch=2" (every factor).
[[nodiscard]] std::string treatment_text(const std::vector<ExploreFactor>& factors,
                                         const Treatment& t);

// The terminal summary: factors ranked, interactions in words, best vs base.
[[nodiscard]] std::string explore_text(const std::vector<ExploreFactor>& factors,
                                       const std::vector<ExploreRun>& runs,
                                       const ExploreAnalysis& a);

// explore.html: the effects with their intervals, a before/after scatter per factor coloured
// by the other factors, the interaction tiles, and best vs base. Uses html_page().
[[nodiscard]] std::string explore_html(const std::string& experiment,
                                       const std::vector<ExploreFactor>& factors,
                                       const std::vector<ExploreRun>& runs,
                                       const ExploreAnalysis& a);

}  // namespace fanout::report
