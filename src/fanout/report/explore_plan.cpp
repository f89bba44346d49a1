// The sequential plan of `fanout explore`. See explore_plan.hpp and docs/explore.md.
#include "fanout/report/explore_plan.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

namespace fanout::report {

namespace {

Treatment base_of(const std::vector<ExploreFactor>& factors) {
  Treatment t(factors.size());
  for (std::size_t i = 0; i < factors.size(); ++i) t[i] = factors[i].base;
  return t;
}

bool usable(const ExploreRun& r) { return r.ok && r.seconds_per_item > 0; }

// The factors whose levels the walk may extend: numbers, each with its limits.
bool walks(const std::string& name) {
  return name == "mini_batch_size" || name == "workers" || name == "pools" || name == "prefetch" ||
         name == "poll_ms";
}

bool numeric(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The paired comparison of treatment `t` with the base over runs [from, to).
Comparison compare(const Treatment& t, const Treatment& base, const std::vector<ExploreRun>& runs,
                   std::size_t from, std::size_t to) {
  std::vector<double> d;
  double util = 0;
  for (std::size_t i = from; i < to; ++i) {
    if (runs[i].treatment != t || !usable(runs[i])) continue;
    std::size_t best = to;
    for (std::size_t j = from; j < to; ++j) {
      if (runs[j].treatment != base || !usable(runs[j])) continue;
      const auto dist = [&](std::size_t k) { return k > i ? k - i : i - k; };
      if (best == to || dist(j) < dist(best)) best = j;
    }
    if (best == to) continue;
    d.push_back(std::log(runs[i].seconds_per_item / runs[best].seconds_per_item));
    util += runs[best].utilisation;
  }
  const auto mi = mean_interval(d);
  return {.n = mi.n,
          .mean_log = mi.mean,
          .half_log = mi.half,
          .utilisation = d.empty() ? 0 : util / static_cast<double>(d.size())};
}

// The verdict on a candidate over runs [0, to): failures at once; then after min_reps paired
// runs, faster or slower once the interval leaves 0 (unsupported when the base's workers were
// busy less than min_utilisation); no clear effect after max_reps runs.
Verdict judge(const Treatment& t, const Treatment& base, const std::vector<ExploreRun>& runs,
              std::size_t to, const ExploreRules& rules, Comparison& cmp) {
  std::size_t tried = 0;
  for (std::size_t i = 0; i < to; ++i) {
    if (runs[i].treatment != t) continue;
    ++tried;
    if (runs[i].has_failures()) return Verdict::Failures;
  }
  cmp = compare(t, base, runs, 0, to);
  if (cmp.n >= rules.min_reps && cmp.separated()) {
    if (cmp.utilisation < rules.min_utilisation) return Verdict::Unsupported;
    return cmp.mean_log < 0 ? Verdict::Faster : Verdict::Slower;
  }
  return tried >= rules.max_reps ? Verdict::NoClearEffect : Verdict::Pending;
}

// The level index of `value` in factor f, appended when missing.
std::size_t level_index(ExploreFactor& f, const std::string& value) {
  const auto it = std::find(f.levels.begin(), f.levels.end(), value);
  if (it != f.levels.end()) return static_cast<std::size_t>(it - f.levels.begin());
  f.levels.push_back(value);
  return f.levels.size() - 1;
}

// A note, once.
void add_note(Plan& p, std::string note) {
  if (std::find(p.notes.begin(), p.notes.end(), note) == p.notes.end()) {
    p.notes.push_back(std::move(note));
  }
}

// How far a level is from the factor's base: |log(value / base)| for numbers, else 1.
double distance(const ExploreFactor& f, std::size_t level) {
  const auto& v = f.levels[level];
  const auto& b = f.levels[f.base];
  if (!numeric(v) || !numeric(b) || v.size() > 15 || b.size() > 15) return 1;
  return std::abs(std::log((std::stod(v) + 1) / (std::stod(b) + 1)));
}

// The factor's winner: of its clearly faster levels, the one nearest the base among those not
// clearly slower than the fastest (a gain within the noise of a nearer level buys nothing);
// nullptr when none is clearly faster.
const Candidate* best_of(const std::vector<Candidate>& cs, const ExploreFactor& fac,
                         std::size_t f) {
  const Candidate* fastest = nullptr;
  for (const auto& c : cs) {
    if (c.factor == f && c.verdict == Verdict::Faster &&
        (fastest == nullptr || c.cmp.mean_log < fastest->cmp.mean_log)) {
      fastest = &c;
    }
  }
  if (fastest == nullptr) return nullptr;
  const Candidate* best = fastest;
  for (const auto& c : cs) {
    if (c.factor != f || c.verdict != Verdict::Faster) continue;
    const double gap = c.cmp.mean_log - fastest->cmp.mean_log;
    const double half = std::hypot(c.cmp.half_log, fastest->cmp.half_log);
    if (gap <= half && distance(fac, c.level) < distance(fac, best->level)) best = &c;
  }
  return best;
}

// Replicates until clear between levels too: when a factor's fastest level is not clearly faster
// than the level best_of() would pick (nearer the base), both run again (their verdicts back to
// pending) until the difference is clear or either has max_reps runs.
void resolve_ties(Plan& p, const ExploreRules& rules) {
  for (std::size_t f = 0; f < p.factors.size(); ++f) {
    const Candidate* pick = best_of(p.candidates, p.factors[f], f);
    if (pick == nullptr) continue;
    Candidate* fastest = nullptr;
    for (auto& c : p.candidates) {
      if (c.factor == f && c.verdict == Verdict::Faster &&
          (fastest == nullptr || c.cmp.mean_log < fastest->cmp.mean_log)) {
        fastest = &c;
      }
    }
    if (fastest == pick || fastest->cmp.n >= rules.max_reps || pick->cmp.n >= rules.max_reps) {
      continue;
    }
    const std::size_t pick_level = pick->level;
    fastest->verdict = Verdict::Pending;
    for (auto& c : p.candidates) {
      if (c.factor == f && c.level == pick_level) c.verdict = Verdict::Pending;
    }
  }
}

// One step of the walk for factor f: a level past its best when the best is at the edge of
// those tried. True when a candidate was added.
bool walk_factor(Plan& p, std::size_t f, const ExploreRules& rules, const Capacity& cap) {
  const auto& fac = p.factors[f];
  const Candidate* best = best_of(p.candidates, fac, f);
  if (!walks(fac.name) || best == nullptr || !numeric(fac.levels[best->level]) ||
      !numeric(fac.levels[fac.base])) {
    return false;
  }
  const auto value = std::stoull(fac.levels[best->level]);
  const bool up = value > std::stoull(fac.levels[fac.base]);
  for (const auto& c : p.candidates) {
    if (c.factor != f || !numeric(fac.levels[c.level])) continue;
    const auto v = std::stoull(fac.levels[c.level]);
    if (up ? v > value : v < value) return false;  // not at the edge: the gain stopped
  }
  const std::string next = next_level(fac.name, fac.levels[best->level], up);
  const std::string at = fac.name + " " + fac.levels[best->level];
  if (next.empty()) {
    add_note(p, fmt::format("{}: still faster at the edge, which is the factor's limit", at));
    return false;
  }
  if (fac.name == "workers" && rules.max_workers > 0 && std::stoull(next) > rules.max_workers) {
    add_note(p,
             fmt::format(
                 "{}: still faster at the edge; {} workers would pass the limit of {} (4 per core)",
                 at, next, rules.max_workers));
    return false;
  }
  // Checked on a copy: a level that does not fit is not added (nor an existing one moved).
  auto trial = p.factors;
  Treatment t = base_of(trial);
  t[f] = level_index(trial[f], next);
  for (const auto& c : p.candidates) {
    if (c.factor == f && c.level == t[f]) return false;  // tried already
  }
  if (!fits(cap, rules, trial, t)) {
    add_note(
        p,
        fmt::format(
            "{}: still faster at the edge; {} would leave fewer than {} mini-batches per worker in "
            "the sample (a larger --sample would tell whether the gain goes on)",
            at, next, rules.batches_per_worker));
    return false;
  }
  p.factors = std::move(trial);
  p.candidates.push_back({.factor = f, .level = t[f]});
  return true;
}

// Every factor at its clearly faster level; factors with the smallest gain go back to base
// until a run of the combination fits the sample.
Treatment combine(Plan& p, const ExploreRules& rules, const Capacity& cap) {
  Treatment w = base_of(p.factors);
  std::vector<const Candidate*> won;
  for (std::size_t f = 0; f < p.factors.size(); ++f) {
    if (const auto* c = best_of(p.candidates, p.factors[f], f)) {
      w[f] = c->level;
      won.push_back(c);
    }
  }
  std::sort(won.begin(), won.end(), [](const Candidate* a, const Candidate* b) {
    return a->cmp.mean_log > b->cmp.mean_log;  // smallest gain first
  });
  for (const auto* c : won) {
    if (fits(cap, rules, p.factors, w)) break;
    w[c->factor] = p.factors[c->factor].base;
    p.notes.push_back(
        fmt::format("{} {} left out of the combination: with the other winners a "
                    "run would have fewer than {} mini-batches per worker",
                    p.factors[c->factor].name, p.factors[c->factor].levels[c->level],
                    rules.batches_per_worker));
  }
  return w;
}

std::string pct(double v) { return fmt::format("{:+.1f}%", 100 * v); }

std::string interval_text(const Comparison& c) {
  if (c.n < 2) return fmt::format("{} (1 run: no interval)", pct(c.effect()));
  return fmt::format("{} [{} .. {}]", pct(c.effect()), pct(c.low()), pct(c.high()));
}

}  // namespace

double Comparison::effect() const { return std::exp(mean_log) - 1; }
double Comparison::low() const { return std::exp(mean_log - half_log) - 1; }
double Comparison::high() const { return std::exp(mean_log + half_log) - 1; }

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::Pending:
      return "not settled";
    case Verdict::Faster:
      return "faster";
    case Verdict::Slower:
      return "slower";
    case Verdict::NoClearEffect:
      return "no clear effect";
    case Verdict::Failures:
      return "failures: never chosen";
    case Verdict::Unsupported:
      return "not called real: the workers were busy under the threshold";
  }
  return "";
}

bool fits(const Capacity& cap, const ExploreRules& rules, const std::vector<ExploreFactor>& factors,
          const Treatment& t) {
  if (!cap.mini_batches || !cap.workers) return true;
  return cap.mini_batches(factors, t) >=
         rules.batches_per_worker * std::max<std::uint64_t>(1, cap.workers(factors, t));
}

SampleChoice choose_sample(std::uint64_t input_items, std::uint64_t requested,
                           std::uint64_t items_per_batch, std::uint64_t workers,
                           const ExploreRules& rules) {
  SampleChoice s{.items = std::min(std::max<std::uint64_t>(requested, 1), input_items)};
  const std::uint64_t need = rules.batches_per_worker * std::max<std::uint64_t>(workers, 1) *
                             std::max<std::uint64_t>(items_per_batch, 1);
  if (input_items < need) {
    s.too_small = true;
    s.items = input_items;
    s.note = fmt::format(
        "the input is too small for an experiment: {} items make {} mini-batches of {} for {} "
        "workers, fewer than {} per worker; a run needs at least {} items (or a smaller "
        "mini_batch_size) before any setting can be told apart",
        input_items,
        (input_items + items_per_batch - 1) / std::max<std::uint64_t>(items_per_batch, 1),
        items_per_batch, workers, rules.batches_per_worker, need);
    return s;
  }
  const std::uint64_t want = std::min(input_items, 4 * need);
  if (s.items < want) {
    s.note = fmt::format(
        "sample grown from {} to {} items: at least {} mini-batches per worker at the base and at "
        "one step up of mini_batch_size or workers ({} × {} workers × {} × 4)",
        s.items, want, rules.batches_per_worker, rules.batches_per_worker, workers,
        items_per_batch);
    s.items = want;
    s.grown = true;
  }
  return s;
}

std::string next_level(const std::string& factor, const std::string& value, bool up) {
  if (!numeric(value) || value.size() > 15) return {};
  const std::uint64_t v = std::stoull(value);
  std::uint64_t n = 0;
  if (factor == "mini_batch_size") {
    n = up ? v * 4 : v / 4;
    if (n < 1) return {};
  } else if (factor == "workers" || factor == "pools") {
    n = up ? v * 2 : v / 2;
    if (n < 1) return {};
  } else if (factor == "prefetch") {
    n = up ? (v == 0 ? 2 : v * 4) : v / 4;
    if (n > 256 || n == v) return {};
  } else if (factor == "poll_ms") {
    n = up ? v * 5 : v / 5;
    if (n < 1 || n > 1000) return {};
  } else {
    return {};
  }
  return std::to_string(n);
}

Plan plan_experiment(std::vector<ExploreFactor> factors, const std::vector<ExploreRun>& runs,
                     const ExploreRules& rules, const Capacity& cap) {
  Plan p{.factors = std::move(factors)};
  const Treatment base = base_of(p.factors);
  p.winner = base;
  for (std::size_t f = 0; f < p.factors.size(); ++f) {
    const auto& fac = p.factors[f];
    const std::size_t initial = fac.initial == 0 ? fac.levels.size() : fac.initial;
    for (std::size_t l = 0; l < initial && l < fac.levels.size(); ++l) {
      if (l == fac.base) continue;
      Treatment t = base;
      t[f] = l;
      if (fits(cap, rules, p.factors, t)) {
        p.candidates.push_back({.factor = f, .level = l});
      } else {
        p.notes.push_back(
            fmt::format("{} {} not tried: a run would have fewer than {} mini-batches per worker",
                        fac.name, fac.levels[l], rules.batches_per_worker));
      }
    }
  }
  std::size_t pos = 0;
  // Runs `list` from where the runs end; true when it set p.next (a run is needed).
  auto consume = [&](std::vector<Treatment> list) {
    std::mt19937_64 rng(rules.seed * 1000003 + p.rounds);
    std::shuffle(list.begin(), list.end(), rng);
    for (const auto& t : list) {
      if (pos < runs.size()) {
        ++pos;
        continue;
      }
      p.next = t;
      return true;
    }
    ++p.rounds;
    return false;
  };
  for (;;) {
    std::vector<Treatment> list{base};
    for (const auto& c : p.candidates) {
      if (c.verdict != Verdict::Pending) continue;
      Treatment t = base;
      t[c.factor] = c.level;
      list.push_back(t);
    }
    if (list.size() == 1) {
      bool added = false;
      for (std::size_t f = 0; f < p.factors.size(); ++f)
        added = walk_factor(p, f, rules, cap) || added;
      if (added) continue;
      break;
    }
    p.phase = Phase::Screen;
    if (consume(list)) return p;
    for (auto& c : p.candidates) {
      if (c.verdict != Verdict::Pending) continue;
      Treatment t = base;
      t[c.factor] = c.level;
      c.verdict = judge(t, base, runs, pos, rules, c.cmp);
    }
    resolve_ties(p, rules);
  }
  p.winner = combine(p, rules, cap);
  p.phase = Phase::Done;
  if (p.winner == base) return p;
  const std::size_t from = pos;
  for (;;) {
    p.phase = Phase::Confirm;
    if (consume({base, p.winner})) return p;
    p.confirmation = compare(p.winner, base, runs, from, pos);
    bool failed = false;
    for (std::size_t i = from; i < pos; ++i) failed = failed || runs[i].has_failures();
    const auto& c = p.confirmation;
    if (failed || (c.n >= rules.confirm_reps && (c.separated() || c.n >= rules.max_reps))) {
      p.confirmed = !failed && c.separated() && c.mean_log < 0;
      break;
    }
    // No usable pairs after max_reps rounds: stop rather than loop.
    if (pos - from >= 2 * rules.max_reps) break;
  }
  p.phase = Phase::Done;
  return p;
}

std::vector<BlockInteraction> block_interactions(const std::vector<ExploreFactor>& factors,
                                                 const std::vector<ExploreRun>& runs) {
  const Treatment base = base_of(factors);
  // Log times of a treatment's usable runs without failures.
  auto cell = [&](const Treatment& t) {
    std::vector<double> v;
    for (const auto& r : runs) {
      if (r.treatment == t && usable(r) && !r.has_failures())
        v.push_back(std::log(r.seconds_per_item));
    }
    return mean_interval(v);
  };
  std::set<Treatment> seen;
  for (const auto& r : runs) seen.insert(r.treatment);
  std::vector<BlockInteraction> out;
  for (const auto& t : seen) {
    std::vector<std::size_t> moved;
    for (std::size_t i = 0; i < t.size(); ++i) {
      if (t[i] != base[i]) moved.push_back(i);
    }
    if (moved.size() != 2) continue;
    Treatment ta = base, tb = base;
    ta[moved[0]] = t[moved[0]];
    tb[moved[1]] = t[moved[1]];
    const MeanInterval cells[] = {cell(base), cell(ta), cell(tb), cell(t)};
    double var = 0;
    std::size_t df = 1000;
    bool enough = true;
    for (const auto& c : cells) {
      if (c.n < 2) enough = false;
      if (c.n >= 2) {
        const double se = c.half / t95(c.n - 1);
        var += se * se;
        df = std::min(df, c.n - 1);
      }
    }
    if (!enough) continue;
    out.push_back({.a = moved[0],
                   .b = moved[1],
                   .level_a = t[moved[0]],
                   .level_b = t[moved[1]],
                   .mean_log = cells[3].mean - cells[1].mean - cells[2].mean + cells[0].mean,
                   .half_log = t95(df) * std::sqrt(var)});
  }
  return out;
}

std::string plan_text(const Plan& p, const std::vector<ExploreRun>& runs,
                      const ExploreRules& rules) {
  const auto& fs = p.factors;
  std::string s = fmt::format(
      "rules: every run has at least {} mini-batches per worker; a level is compared with the "
      "job's "
      "own settings run beside it in the same shuffled round, {} to {} times, until the 95% "
      "interval of the change leaves 0; the winner is confirmed against the job's own settings, "
      "interleaved, at least {} runs each\n\n",
      rules.batches_per_worker, rules.min_reps, rules.max_reps, rules.confirm_reps);
  s += "levels against the job's own (time per item, 95% interval over the paired runs):\n";
  for (const auto& c : p.candidates) {
    const auto& f = fs[c.factor];
    s += fmt::format("  {:<18} {:>6} (base {:>5})  {:<32} {} runs  {}\n", f.name, f.levels[c.level],
                     f.levels[f.base], c.cmp.n == 0 ? std::string("-") : interval_text(c.cmp),
                     c.cmp.n, verdict_name(c.verdict));
  }
  for (const auto& n : p.notes) s += "note: " + n + "\n";
  const auto inter = block_interactions(fs, runs);
  if (inter.empty()) {
    s += "\ninteractions: none measured (that takes the base, each factor alone and both "
         "together, each run at least twice)\n";
  } else {
    s += "\ninteractions (balanced blocks with replicates; + = together slower than the two "
         "effects alone):\n";
    for (const auto& i : inter) {
      s += fmt::format("  {}={} with {}={}: {:+.1f}% [{:+.1f}% .. {:+.1f}%]{}\n", fs[i.a].name,
                       fs[i.a].levels[i.level_a], fs[i.b].name, fs[i.b].levels[i.level_b],
                       100 * (std::exp(i.mean_log) - 1),
                       100 * (std::exp(i.mean_log - i.half_log) - 1),
                       100 * (std::exp(i.mean_log + i.half_log) - 1),
                       std::abs(i.mean_log) > i.half_log ? "" : "  (within noise)");
    }
  }
  const Treatment base = base_of(fs);
  if (p.winner == base) {
    s += "\nbest: the job's own settings (no level was clearly faster)\n";
  } else {
    const auto& c = p.confirmation;
    s += fmt::format(
        "\ncandidate: {}\nconfirmation against the job's own, interleaved: {} over {} "
        "runs each: {}\n",
        treatment_text(fs, p.winner), c.n == 0 ? "-" : interval_text(c), c.n,
        p.phase != Phase::Done ? "not finished"
        : p.confirmed          ? fmt::format("confirmed, {:.2f}x", 1 / (1 + c.effect()))
                               : "not confirmed: nothing is recommended");
  }
  return s;
}

ExploreAnalysis plan_analysis(const Plan& p, const std::vector<ExploreRun>& runs) {
  auto a = analyse(p.factors, runs);
  a.interactions.clear();
  for (const auto& i : block_interactions(p.factors, runs)) {
    const auto& fa = p.factors[i.a];
    const auto& fb = p.factors[i.b];
    a.interactions.push_back(
        {i.a, i.b, i.mean_log,
         fmt::format("{}={} with {}={}: {:+.1f}% [{:+.1f}% .. {:+.1f}%] beyond the two alone",
                     fa.name, fa.levels[i.level_a], fb.name, fb.levels[i.level_b],
                     100 * (std::exp(i.mean_log) - 1),
                     100 * (std::exp(i.mean_log - i.half_log) - 1),
                     100 * (std::exp(i.mean_log + i.half_log) - 1))});
  }
  const Treatment base = base_of(p.factors);
  a.best = p.confirmed ? p.winner : base;
  for (const auto& t : treatment_measures(runs)) {
    if (t.treatment == base) a.base_seconds_per_item = t.seconds_per_item;
    if (t.treatment == a.best) a.best_seconds_per_item = t.seconds_per_item;
  }
  const auto& c = p.confirmation;
  a.speedup = p.confirmed ? MeanInterval{.mean = std::exp(-c.mean_log),
                                         .half = std::exp(-c.mean_log) * c.half_log,
                                         .n = c.n}
                          : MeanInterval{.mean = 1, .half = 0, .n = 0};
  return a;
}

std::string confirmed_yaml(const Plan& p) {
  if (!p.confirmed) return {};
  const auto& c = p.confirmation;
  std::string top, block;
  for (std::size_t f = 0; f < p.factors.size(); ++f) {
    const auto& fac = p.factors[f];
    if (p.winner[f] == fac.base) continue;
    const Comparison* alone = nullptr;
    for (const auto& cand : p.candidates) {
      if (cand.factor == f && cand.level == p.winner[f]) alone = &cand.cmp;
    }
    const std::string why =
        fmt::format("# {} {} -> {}: time per item {} over {} paired runs\n", fac.name,
                    fac.levels[fac.base], fac.levels[p.winner[f]],
                    alone ? interval_text(*alone) : std::string("-"), alone ? alone->n : 0);
    const auto& v = fac.levels[p.winner[f]];
    if (fac.name == "curve") {
      top += why + "# (curve is how explore's loopback TCP interchange listened: not written)\n";
    } else if (fac.name == "mini_batch_size") {
      top += why + fmt::format("mini_batch_size: \"{}\"\n", v);
    } else if (fac.name == "pools") {
      top += why + fmt::format("resources:\n  instance_count: {}\n", v);
    } else {
      block += "  " + why + fmt::format("  {}: {}\n", fac.name, v);
    }
  }
  std::string out = fmt::format(
      "# fanout explore: settings a confirmation backs (together against the job's own, "
      "interleaved, {} runs each: time per item {}, {:.2f}x)\n",
      c.n, interval_text(c), 1 / (1 + c.effect()));
  out += top;
  if (!block.empty()) out += "fanout:\n" + block;
  return out;
}

}  // namespace fanout::report
