// The Grid Engine launcher's I/O: qsub, qstat, qdel. See sge_launcher.hpp.
#include "client/launch/sge_launcher.hpp"

#include <fmt/format.h>
#include <pwd.h>
#include <unistd.h>

#include <cstdlib>

#include "client/launch/embedded.hpp"
#include "fanout/util/error.hpp"

namespace fanout::client {

namespace {

// qstat -u takes a name only (a uid lists nothing): the passwd entry's, else $USER.
std::string user_name() {
  if (const passwd* pw = ::getpwuid(::getuid()); pw != nullptr && pw->pw_name != nullptr) {
    return pw->pw_name;
  }
  if (const char* u = std::getenv("USER"); u != nullptr && *u != '\0') return u;
  return "*";
}

}  // namespace

SgeLauncher::SgeLauncher(Options opts, Logger log)
    : BatchLauncher(std::move(opts), std::move(log), "sge", "pools.sh", "qw") {}

SgeLauncher::~SgeLauncher() {
  if (!detached()) release();
}

void SgeLauncher::write_scripts(const PoolCommand& pool) {
  sge::ScriptInput in{
      .job_name = o_.job_name, .run_dir = o_.run_dir, .launch = o_.launch, .pool_argv = pool.argv};
  write_script(script_, sge::job_script(in));
}

std::string SgeLauncher::submit_job() {
  auto o = run_command({"qsub", "-terse", script_}, dir_);
  const std::uint64_t id = o.status.success() ? sge::parse_job_id(o.out) : 0;
  if (id == 0) {
    throw Failure(ErrorCode::Runtime,
                  fmt::format("qsub {} failed ({}): {}{}", script_, o.status.describe(), o.err,
                              o.status.code == 127 ? " (is Grid Engine's qsub on PATH?)" : ""));
  }
  return std::to_string(id);
}

std::optional<std::map<std::string, std::string>> SgeLauncher::query_states() {
  auto o = run_command({"qstat", "-u", user_name()}, dir_);
  if (!o.status.success()) return std::nullopt;  // qmaster busy or away
  std::map<std::string, std::string> out;
  for (auto& [id, state] : sge::parse_qstat(o.out)) out[std::to_string(id)] = std::move(state);
  return out;
}

bool SgeLauncher::is_active(const std::string& state) const { return sge::is_active(state); }

bool SgeLauncher::holds(const std::string& state) const { return !state.empty(); }

std::string SgeLauncher::describe() const {
  std::vector<std::uint64_t> ids;
  for (const auto& id : ids_) ids.push_back(std::stoull(id));
  std::map<std::uint64_t, std::string> states;
  for (const auto& [id, state] : states_) states[std::stoull(id)] = state;
  return sge::describe_jobs(ids, states);
}

std::vector<std::string> SgeLauncher::cancel_command(const std::vector<std::string>& ids) const {
  std::vector<std::string> argv = {"qdel"};
  argv.insert(argv.end(), ids.begin(), ids.end());
  return argv;
}

std::optional<BatchLauncher::EndNote> SgeLauncher::end_note() {
  const std::string& last = ids_.back();
  const std::string out = fmt::format("{}/pools-{}.out", dir_, last);
  return EndNote{.output = fmt::format("the last job's output in {} (qacct -j {} says how it "
                                       "ended):{}",
                                       out, last, tail_of(out, 10))};
}

}  // namespace fanout::client
