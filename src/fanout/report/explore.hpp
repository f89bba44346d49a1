// `fanout explore`'s analysis, pure (no I/O): the measures per treatment and per factor level,
// the per-factor deltas over every pair of runs that differ in that factor only (explore.html's
// before/after figures), a linear model fitted by least squares, and explore.html. Which
// treatment runs next, and what is decided, is explore_plan.hpp's. See docs/explore.md.
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
  std::size_t initial =
      0;  // the levels the experiment started with; 0: all (the rest the walk added)
};

// One configuration: a level index per factor (in the order of the factors).
using Treatment = std::vector<std::size_t>;

// One run of a treatment: seconds per item of the whole job (the measure), its wall time, and
// whether it succeeded (a failed run is not analysed). The other measures come from its job's
// attempts in the store: the median per-mini-batch overhead (elapsed - run() time), the workers'
// utilisation (run() time summed / (workers x wall)), and its attempts and failed attempts.
struct ExploreRun {
  Treatment treatment{};
  double seconds_per_item = 0;
  double wall_s = 0;
  std::uint64_t job_id = 0;
  bool ok = true;
  double overhead_s = 0;
  double utilisation = 0;
  std::uint64_t attempts = 0, attempts_failed = 0;

  // Failed attempts over attempts; 0 without attempts.
  [[nodiscard]] double failure_rate() const {
    return attempts == 0 ? 0 : static_cast<double>(attempts_failed) / static_cast<double>(attempts);
  }
  // A failed run, or one with a failed attempt (retried or not): never chosen as best.
  [[nodiscard]] bool has_failures() const { return !ok || attempts_failed > 0; }
};

// The measures of one treatment over its runs (successful runs; failures over every run).
struct TreatmentMeasures {
  Treatment treatment{};
  std::size_t runs = 0, ok = 0;
  double seconds_per_item = 0, half = 0;  // mean and 95% half-width
  double overhead_s = 0, utilisation = 0;
  double failures = 0;        // failed attempts / attempts, over its runs
  bool has_failures = false;  // any run failed or had a failed attempt
};

// The measures of each level of a factor, over the runs with every other factor at base.
struct LevelMeasures {
  std::size_t factor = 0, level = 0, runs = 0;
  double seconds_per_item = 0, overhead_s = 0, utilisation = 0, failures = 0;
};

// Every treatment measured, in the order of its first run.
[[nodiscard]] std::vector<TreatmentMeasures> treatment_measures(
    const std::vector<ExploreRun>& runs);

// Every level of every factor that has runs with the others at base, factor by factor.
[[nodiscard]] std::vector<LevelMeasures> level_measures(const std::vector<ExploreFactor>& factors,
                                                        const std::vector<ExploreRun>& runs);

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
  Treatment best{};  // the measured treatment with the least mean time and no failures
  double best_seconds_per_item = 0, base_seconds_per_item = 0;
  MeanInterval speedup{};  // base time / best time, with its interval
};

// The factor's coded value in the model: its level index mapped onto [-1, 1].
[[nodiscard]] double coded_level(const ExploreFactor& f, std::size_t level);

// The model's columns for one treatment: 1, each factor's coded level, each pair's product.
[[nodiscard]] std::vector<double> model_row(const std::vector<ExploreFactor>& factors,
                                            const Treatment& t);

// Analyses the runs (failed ones are left out). Factors are ranked by their spread; one matters
// when its spread exceeds noise_factor × the noise (and 2%). A treatment with failures is never
// the best, nor its level a factor's best level.
[[nodiscard]] ExploreAnalysis analyse(const std::vector<ExploreFactor>& factors,
                                      const std::vector<ExploreRun>& runs,
                                      double noise_factor = 2.0);

// A treatment in words: "mini_batch_size=8 prefetch=2" (every factor).
[[nodiscard]] std::string treatment_text(const std::vector<ExploreFactor>& factors,
                                         const Treatment& t);

// explore.html: the effects with their intervals, a before/after scatter per factor coloured
// by the other factors, the interaction tiles, best vs base, and the measures' tables per
// treatment and per factor. Uses html_page().
// `summary` is the terminal's summary, shown at the top.
[[nodiscard]] std::string explore_html(const std::string& experiment,
                                       const std::vector<ExploreFactor>& factors,
                                       const std::vector<ExploreRun>& runs,
                                       const ExploreAnalysis& a, const std::string& summary);

// The measures per treatment and per factor level, as text tables (the end of the summary).
[[nodiscard]] std::string explore_measures_text(const std::vector<ExploreFactor>& factors,
                                                const std::vector<ExploreRun>& runs);

// Student's t for a two-sided 95% interval with `df` degrees of freedom (0 for none).
[[nodiscard]] double t95(std::size_t df);

}  // namespace fanout::report
