// The design and analysis of `fanout explore`. See explore.hpp and docs/explore.md.
#include "fanout/report/explore.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "fanout/report/html_report.hpp"
#include "fanout/util/json.hpp"

namespace fanout::report {

double t95(std::size_t df) {
  static constexpr double kT[] = {12.71, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306,
                                  2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131};
  if (df == 0) return 0;
  if (df <= std::size(kT)) return kT[df - 1];
  return df < 30 ? 2.05 : 1.96;
}

namespace {

// Whether a and b differ in factor f only.
bool differ_only_in(const Treatment& a, const Treatment& b, std::size_t f) {
  for (std::size_t i = 0; i < a.size(); ++i) {
    if ((a[i] != b[i]) != (i == f)) return false;
  }
  return true;
}

// The other factors' levels of a treatment, in words (the scatter's colour groups).
std::string others_text(const std::vector<ExploreFactor>& factors, const Treatment& t,
                        std::size_t f) {
  std::string s;
  for (std::size_t i = 0; i < factors.size(); ++i) {
    if (i == f || t[i] == factors[i].base) continue;
    s += fmt::format("{}{}={}", s.empty() ? "" : " ", factors[i].name, factors[i].levels[t[i]]);
  }
  return s.empty() ? "others at base" : s;
}

// Mean seconds per item of each measured treatment (successful runs).
std::map<Treatment, std::vector<double>> by_treatment(const std::vector<ExploreRun>& runs) {
  std::map<Treatment, std::vector<double>> m;
  for (const auto& r : runs) {
    if (r.ok && r.seconds_per_item > 0) m[r.treatment].push_back(r.seconds_per_item);
  }
  return m;
}

double mean(const std::vector<double>& v) {
  return v.empty() ? 0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

// The treatments with a failed run or a failed attempt: never a best.
std::set<Treatment> failing_treatments(const std::vector<ExploreRun>& runs) {
  std::set<Treatment> out;
  for (const auto& r : runs) {
    if (r.has_failures()) out.insert(r.treatment);
  }
  return out;
}

// The pairs (X, X+t) of factor f, and its best level with the others at base.
FactorEffect factor_effect(const std::vector<ExploreFactor>& factors,
                           const std::vector<ExploreRun>& runs, std::size_t f,
                           const std::map<Treatment, std::vector<double>>& groups,
                           const std::set<Treatment>& failing) {
  FactorEffect e{.factor = f};
  std::vector<double> deltas;
  for (const auto& a : runs) {
    for (const auto& b : runs) {
      if (!a.ok || !b.ok || a.seconds_per_item <= 0 || b.seconds_per_item <= 0) continue;
      if (a.treatment[f] >= b.treatment[f] || !differ_only_in(a.treatment, b.treatment, f)) {
        continue;
      }
      deltas.push_back((b.seconds_per_item - a.seconds_per_item) / a.seconds_per_item);
      e.before.push_back(a.seconds_per_item);
      e.after.push_back(b.seconds_per_item);
      e.other.push_back(others_text(factors, a.treatment, f));
    }
  }
  e.delta = mean_interval(deltas);
  Treatment t(factors.size());
  for (std::size_t i = 0; i < factors.size(); ++i) t[i] = factors[i].base;
  const auto base = groups.find(t);
  e.best_level = factors[f].base;
  if (base == groups.end()) return e;
  double best = mean(base->second), worst = best;
  for (std::size_t l = 0; l < factors[f].levels.size(); ++l) {
    t[f] = l;
    const auto it = groups.find(t);
    if (it == groups.end()) continue;
    worst = std::max(worst, mean(it->second));
    if (mean(it->second) < best && !failing.contains(t)) {
      best = mean(it->second);
      e.best_level = l;
    }
  }
  e.best_vs_base = (best - mean(base->second)) / mean(base->second);
  e.spread = (worst - best) / mean(base->second);
  return e;
}

// The interaction of a and b in words, from the model's coefficients (log scale).
std::string interaction_words(const std::vector<ExploreFactor>& factors, std::size_t a,
                              std::size_t b, double main_a, double c) {
  const auto& fa = factors[a];
  const auto& fb = factors[b];
  const double at_low = std::exp(2 * (main_a - c)) - 1;
  const double at_high = std::exp(2 * (main_a + c)) - 1;
  return fmt::format(
      "{} from {} to {} changes the time per item by {:+.0f}% when {}={}, by "
      "{:+.0f}% when {}={}",
      fa.name, fa.levels.front(), fa.levels.back(), 100 * at_low, fb.name, fb.levels.front(),
      100 * at_high, fb.name, fb.levels.back());
}

// The model fit on log seconds per item, and its pairwise interactions ranked.
void fit_model(const std::vector<ExploreFactor>& factors, const std::vector<ExploreRun>& runs,
               ExploreAnalysis& out) {
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  for (const auto& r : runs) {
    if (!r.ok || r.seconds_per_item <= 0) continue;
    x.push_back(model_row(factors, r.treatment));
    y.push_back(std::log(r.seconds_per_item));
  }
  if (x.empty()) return;
  out.coefficients = least_squares(x, y);
  const std::size_t k = factors.size();
  std::size_t col = 1 + k;
  for (std::size_t a = 0; a < k; ++a) {
    for (std::size_t b = a + 1; b < k; ++b, ++col) {
      const double c = out.coefficients[col];
      out.interactions.push_back(
          {a, b, c, interaction_words(factors, a, b, out.coefficients[1 + a], c)});
    }
  }
  std::stable_sort(out.interactions.begin(), out.interactions.end(),
                   [](const Interaction& l, const Interaction& r) {
                     return std::abs(l.coefficient) > std::abs(r.coefficient);
                   });
}

// The best measured treatment and its speed-up over the base.
void pick_best(const std::vector<ExploreFactor>& factors,
               const std::map<Treatment, std::vector<double>>& groups,
               const std::set<Treatment>& failing, ExploreAnalysis& out) {
  Treatment base(factors.size());
  for (std::size_t i = 0; i < factors.size(); ++i) base[i] = factors[i].base;
  out.best = base;
  const auto b = groups.find(base);
  if (b == groups.end()) return;
  // The base stays the answer only when no treatment without failures was measured.
  double best = failing.contains(base) ? std::numeric_limits<double>::infinity() : mean(b->second);
  for (const auto& [t, v] : groups) {
    if (mean(v) < best && !failing.contains(t)) {
      best = mean(v);
      out.best = t;
    }
  }
  const auto mb = mean_interval(b->second);
  const auto mt = mean_interval(groups.at(out.best));
  out.base_seconds_per_item = mb.mean;
  out.best_seconds_per_item = mt.mean;
  const double s = mb.mean / mt.mean;
  // Without repeats of the best, its spread is taken as the base's.
  const double rb = mb.half / mb.mean;
  const double rt = mt.n > 1 ? mt.half / mt.mean : rb;
  out.speedup = {s, s * std::sqrt(rb * rb + rt * rt), std::min(mb.n, mt.n)};
}

// The measures of a group of runs: times over the successful ones, failures over all.
struct Measures {
  std::vector<double> spi{};
  double overhead_s = 0, utilisation = 0, failures = 0;
  std::size_t runs = 0, ok = 0;
  bool has_failures = false;
};
Measures measures_of(const std::vector<const ExploreRun*>& runs) {
  Measures m;
  std::uint64_t attempts = 0, failed = 0;
  for (const auto* r : runs) {
    ++m.runs;
    attempts += r->attempts;
    failed += r->attempts_failed;
    m.has_failures = m.has_failures || r->has_failures();
    if (!r->ok || r->seconds_per_item <= 0) continue;
    ++m.ok;
    m.spi.push_back(r->seconds_per_item);
    m.overhead_s += r->overhead_s;
    m.utilisation += r->utilisation;
  }
  if (m.ok > 0) {
    m.overhead_s /= static_cast<double>(m.ok);
    m.utilisation /= static_cast<double>(m.ok);
  }
  m.failures = attempts == 0 ? 0 : static_cast<double>(failed) / static_cast<double>(attempts);
  return m;
}

// A percentage, or "-" for a measure with no successful run behind it.
std::string percent_or_dash(double v, std::size_t ok) {
  return ok == 0 ? "-" : fmt::format("{:.1f}%", 100 * v);
}

}  // namespace

std::vector<TreatmentMeasures> treatment_measures(const std::vector<ExploreRun>& runs) {
  std::vector<Treatment> order;
  std::map<Treatment, std::vector<const ExploreRun*>> groups;
  for (const auto& r : runs) {
    auto& g = groups[r.treatment];
    if (g.empty()) order.push_back(r.treatment);
    g.push_back(&r);
  }
  std::vector<TreatmentMeasures> out;
  for (const auto& t : order) {
    const Measures m = measures_of(groups[t]);
    const auto mi = mean_interval(m.spi);
    out.push_back({.treatment = t,
                   .runs = m.runs,
                   .ok = m.ok,
                   .seconds_per_item = mi.mean,
                   .half = mi.half,
                   .overhead_s = m.overhead_s,
                   .utilisation = m.utilisation,
                   .failures = m.failures,
                   .has_failures = m.has_failures});
  }
  return out;
}

std::vector<LevelMeasures> level_measures(const std::vector<ExploreFactor>& factors,
                                          const std::vector<ExploreRun>& runs) {
  std::vector<LevelMeasures> out;
  for (std::size_t f = 0; f < factors.size(); ++f) {
    for (std::size_t l = 0; l < factors[f].levels.size(); ++l) {
      std::vector<const ExploreRun*> at;
      for (const auto& r : runs) {
        bool others_base = r.treatment[f] == l;
        for (std::size_t i = 0; i < factors.size() && others_base; ++i) {
          others_base = i == f || r.treatment[i] == factors[i].base;
        }
        if (others_base) at.push_back(&r);
      }
      if (at.empty()) continue;
      const Measures m = measures_of(at);
      out.push_back({.factor = f,
                     .level = l,
                     .runs = m.runs,
                     .seconds_per_item = mean(m.spi),
                     .overhead_s = m.overhead_s,
                     .utilisation = m.utilisation,
                     .failures = m.failures});
    }
  }
  return out;
}

std::vector<double> least_squares(const std::vector<std::vector<double>>& x,
                                  const std::vector<double>& y) {
  const std::size_t p = x.empty() ? 0 : x.front().size();
  std::vector<double> a(p * p, 0.0), rhs(p, 0.0);
  for (std::size_t r = 0; r < x.size(); ++r) {
    for (std::size_t i = 0; i < p; ++i) {
      rhs[i] += x[r][i] * y[r];
      for (std::size_t j = 0; j < p; ++j) a[i * p + j] += x[r][i] * x[r][j];
    }
  }
  double trace = 0;
  for (std::size_t i = 0; i < p; ++i) trace += a[i * p + i];
  for (std::size_t i = 0; i < p; ++i) a[i * p + i] += 1e-10 * (trace + 1);
  // Cholesky: a = L L^T, L stored in the lower triangle of a.
  for (std::size_t j = 0; j < p; ++j) {
    double d = a[j * p + j];
    for (std::size_t k = 0; k < j; ++k) d -= a[j * p + k] * a[j * p + k];
    a[j * p + j] = std::sqrt(std::max(d, 1e-300));
    for (std::size_t i = j + 1; i < p; ++i) {
      double s = a[i * p + j];
      for (std::size_t k = 0; k < j; ++k) s -= a[i * p + k] * a[j * p + k];
      a[i * p + j] = s / a[j * p + j];
    }
  }
  std::vector<double> z(p), b(p);
  for (std::size_t i = 0; i < p; ++i) {
    double s = rhs[i];
    for (std::size_t k = 0; k < i; ++k) s -= a[i * p + k] * z[k];
    z[i] = s / a[i * p + i];
  }
  for (std::size_t i = p; i-- > 0;) {
    double s = z[i];
    for (std::size_t k = i + 1; k < p; ++k) s -= a[k * p + i] * b[k];
    b[i] = s / a[i * p + i];
  }
  return b;
}

MeanInterval mean_interval(const std::vector<double>& v) {
  MeanInterval m{.mean = mean(v), .half = 0, .n = v.size()};
  if (v.size() < 2) return m;
  double ss = 0;
  for (double x : v) ss += (x - m.mean) * (x - m.mean);
  const double sd = std::sqrt(ss / static_cast<double>(v.size() - 1));
  m.half = t95(v.size() - 1) * sd / std::sqrt(static_cast<double>(v.size()));
  return m;
}

double coded_level(const ExploreFactor& f, std::size_t level) {
  if (f.levels.size() < 2) return 0;
  return -1.0 + 2.0 * static_cast<double>(level) / static_cast<double>(f.levels.size() - 1);
}

std::vector<double> model_row(const std::vector<ExploreFactor>& factors, const Treatment& t) {
  std::vector<double> row{1.0};
  for (std::size_t i = 0; i < factors.size(); ++i) row.push_back(coded_level(factors[i], t[i]));
  for (std::size_t a = 0; a < factors.size(); ++a) {
    for (std::size_t b = a + 1; b < factors.size(); ++b) row.push_back(row[1 + a] * row[1 + b]);
  }
  return row;
}

ExploreAnalysis analyse(const std::vector<ExploreFactor>& factors,
                        const std::vector<ExploreRun>& runs, double noise_factor) {
  ExploreAnalysis out;
  const auto groups = by_treatment(runs);
  Treatment base(factors.size());
  for (std::size_t i = 0; i < factors.size(); ++i) base[i] = factors[i].base;
  if (auto b = groups.find(base); b != groups.end() && b->second.size() > 1) {
    const double m = mean(b->second);
    double ss = 0;
    for (double x : b->second) ss += (x - m) * (x - m);
    out.noise = std::sqrt(ss / static_cast<double>(b->second.size() - 1)) / m;
  }
  fit_model(factors, runs, out);
  const auto failing = failing_treatments(runs);
  for (std::size_t f = 0; f < factors.size(); ++f) {
    auto e = factor_effect(factors, runs, f, groups, failing);
    if (out.coefficients.size() > 1 + f) e.model = 2 * out.coefficients[1 + f];
    e.matters = e.spread > std::max(noise_factor * out.noise, 0.02);
    out.effects.push_back(std::move(e));
  }
  std::stable_sort(
      out.effects.begin(), out.effects.end(),
      [](const FactorEffect& l, const FactorEffect& r) { return l.spread > r.spread; });
  pick_best(factors, groups, failing, out);
  return out;
}

std::string treatment_text(const std::vector<ExploreFactor>& factors, const Treatment& t) {
  std::string s;
  for (std::size_t i = 0; i < factors.size(); ++i) {
    s += fmt::format("{}{}={}", i ? " " : "", factors[i].name, factors[i].levels[t[i]]);
  }
  return s;
}

namespace {

// The measures per treatment and per factor level, as text tables.
std::string measures_text(const std::vector<ExploreFactor>& factors,
                          const std::vector<ExploreRun>& runs) {
  std::string s =
      "\nper treatment (overhead: median elapsed - run() time per mini-batch; utilisation: run() "
      "time / (workers x wall); failures: failed attempts / attempts):\n";
  s += fmt::format("  {:<22} {:>10} {:>11} {:>8} {:>5}  {}\n", "time per item (s)", "overhead",
                   "utilisation", "failures", "runs", "treatment");
  Treatment base(factors.size());
  for (std::size_t i = 0; i < factors.size(); ++i) base[i] = factors[i].base;
  for (const auto& t : treatment_measures(runs)) {
    s += fmt::format("  {:<22} {:>10} {:>11} {:>8} {:>5}  {}{}{}\n",
                     t.ok == 0   ? "-"
                     : t.ok == 1 ? fmt::format("{:.4g}", t.seconds_per_item)
                                 : fmt::format("{:.4g} ± {:.2g}", t.seconds_per_item, t.half),
                     t.ok == 0 ? "-" : fmt::format("{:.1f} ms", 1000 * t.overhead_s),
                     percent_or_dash(t.utilisation, t.ok), fmt::format("{:.1f}%", 100 * t.failures),
                     fmt::format("{}/{}", t.ok, t.runs), treatment_text(factors, t.treatment),
                     t.treatment == base ? " (base)" : "",
                     t.has_failures ? "  FAILURES: never the best" : "");
  }
  s += "per factor level (the other factors at base):\n";
  for (const auto& l : level_measures(factors, runs)) {
    const auto& f = factors[l.factor];
    s += fmt::format(
        "  {:<18} {:<10} {:>10.4g} s/item  overhead {:6.1f} ms  utilisation {:5.1f}%  "
        "failures {:4.1f}%  ({} runs)\n",
        f.name, f.levels[l.level], l.seconds_per_item, 1000 * l.overhead_s, 100 * l.utilisation,
        100 * l.failures, l.runs);
  }
  return s;
}

// The measures per treatment and per factor level, as HTML tables.
void measures_tables(std::string& b, const std::vector<ExploreFactor>& factors,
                     const std::vector<ExploreRun>& runs) {
  b += "<h2>Measures per treatment</h2>\n<table class=\"measures\" id=\"treatments\">\n<tr>"
       "<th>treatment</th><th>runs ok</th><th>time per item (s)</th><th>±</th><th>overhead per "
       "mini-batch (ms, median)</th><th>utilisation</th><th>failures</th></tr>\n";
  for (const auto& t : treatment_measures(runs)) {
    b += fmt::format(
        "<tr{}><td>{}{}</td><td>{}/{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{:.1f}%</td></tr>\n",
        t.has_failures ? " class=\"failures\"" : "",
        html_escape(treatment_text(factors, t.treatment)),
        t.has_failures ? " <b>(failures: never the best)</b>" : "", t.ok, t.runs,
        t.ok == 0 ? "-" : fmt::format("{:.4g}", t.seconds_per_item),
        t.ok < 2 ? "-" : fmt::format("{:.2g}", t.half),
        t.ok == 0 ? "-" : fmt::format("{:.1f}", 1000 * t.overhead_s),
        percent_or_dash(t.utilisation, t.ok), 100 * t.failures);
  }
  b += "</table>\n<h2>Measures per factor level (the other factors at base)</h2>\n"
       "<table class=\"measures\" id=\"levels\">\n<tr><th>factor</th><th>level</th><th>runs</th>"
       "<th>time per item (s)</th><th>overhead (ms)</th><th>utilisation</th><th>failures</th>"
       "</tr>\n";
  for (const auto& l : level_measures(factors, runs)) {
    const auto& f = factors[l.factor];
    b += fmt::format(
        "<tr><td>{}</td><td>{}{}</td><td>{}</td><td>{:.4g}</td><td>{:.1f}</td><td>{:.1f}%</td>"
        "<td>{:.1f}%</td></tr>\n",
        html_escape(f.name), html_escape(f.levels[l.level]), l.level == f.base ? " (base)" : "",
        l.runs, l.seconds_per_item, 1000 * l.overhead_s, 100 * l.utilisation, 100 * l.failures);
  }
  b += "</table>\n";
}

}  // namespace

std::string explore_measures_text(const std::vector<ExploreFactor>& factors,
                                  const std::vector<ExploreRun>& runs) {
  return measures_text(factors, runs);
}

// The page's figures: window.fanoutReport with kind "explore".
std::string explore_data_json(const std::vector<ExploreFactor>& factors, const ExploreAnalysis& a) {
  std::string j = "{\"kind\":\"explore\",\"effects\":[";
  bool first = true;
  for (const auto& e : a.effects) {
    j += first ? "{\"name\":" : ",{\"name\":";
    first = false;
    json_quote(j, factors[e.factor].name);
    j += fmt::format(",\"index\":{},\"mean\":{},\"half\":{},\"n\":{},\"before\":", e.factor,
                     100 * e.delta.mean, 100 * e.delta.half, e.delta.n);
    append_json_numbers(j, e.before);
    j += ",\"after\":";
    append_json_numbers(j, e.after);
    j += ",\"other\":[";
    for (std::size_t i = 0; i < e.other.size(); ++i) {
      if (i) j += ",";
      json_quote(j, e.other[i]);
    }
    j += "]}";
  }
  j +=
      fmt::format("],\"best\":{{\"base\":{},\"best\":{},\"speedup\":{},\"half\":{}}}}}",
                  a.base_seconds_per_item, a.best_seconds_per_item, a.speedup.mean, a.speedup.half);
  return j;
}

// The interaction tiles: one cell per pair, coloured by the size of its coefficient.
void interaction_tiles(std::string& b, const std::vector<ExploreFactor>& factors,
                       const ExploreAnalysis& a) {
  b += "<h2>Interactions (balanced blocks with replicates only)</h2>\n<div class=\"tiles\">\n";
  if (a.interactions.empty()) b += "<p>none measured</p>\n";
  for (const auto& i : a.interactions) {
    const double strength = std::min(1.0, std::abs(i.coefficient) / 0.3);
    const char* hue = i.coefficient > 0 ? "207,34,46" : "45,164,78";
    b += fmt::format(
        "<div class=\"tile\" style=\"background:rgba({},{:.2f})\" title=\"{}\">"
        "<b>{} × {}</b><br>{:+.3f}</div>\n",
        hue, strength, html_escape(i.words), html_escape(factors[i.a].name),
        html_escape(factors[i.b].name), i.coefficient);
  }
  b += "</div>\n";
}

std::string explore_html(const std::string& experiment, const std::vector<ExploreFactor>& factors,
                         const std::vector<ExploreRun>& runs, const ExploreAnalysis& a,
                         const std::string& summary) {
  std::string b = fmt::format("<h1>fanout explore {}</h1>\n<pre>{}</pre>\n",
                              html_escape(experiment), html_escape(summary));
  b += "<style>.tiles{display:flex;flex-wrap:wrap;gap:4px}.tile{border:1px solid #ccc;"
       "padding:4px;font-size:.8em;min-width:9em}table.measures{border-collapse:collapse}"
       "table.measures td,table.measures th{border:1px solid #ccc;padding:2px 6px}"
       "tr.failures{background:#fde}</style>\n";
  b += "<h2>Mean effect per factor (time per item, one step up, %)</h2>\n";
  chart_canvas(b, "chart-explore-effects", 320);
  b += "<h2>Best vs the job's settings (seconds per item)</h2>\n";
  chart_canvas(b, "chart-explore-best", 200);
  b += "<h2>Before and after, per factor (seconds per item)</h2>\n<div class=\"grid\">\n";
  for (const auto& e : a.effects) {
    if (!e.before.empty()) chart_canvas(b, fmt::format("chart-explore-factor-{}", e.factor), 260);
  }
  b += "</div>\n";
  interaction_tiles(b, factors, a);
  measures_tables(b, factors, runs);
  return html_page("fanout explore " + experiment, b, explore_data_json(factors, a));
}

}  // namespace fanout::report
