// The integration tests' job fixture. See job_fixture.hpp.
#include "job_fixture.hpp"

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>

#include <doctest/doctest.h>

namespace fanout::test {

std::vector<std::string> run_argv(const std::string& job, const std::string& db,
                                  const std::string& client_ep,
                                  const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {fanout_bin(), "run", job};
  if (!client_ep.empty()) argv.insert(argv.end(), {"--interchange", client_ep});
  if (!db.empty()) argv.insert(argv.end(), {"--db", db});
  argv.insert(argv.end(), {"--python", python_bin(), "--quiet"});
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

ChildProcess start_run(const std::string& job, const std::string& db, const std::string& client_ep,
                       const std::string& stem, const std::vector<std::string>& extra) {
  return spawn(run_argv(job, db, client_ep, extra), stem + ".out", stem + ".err");
}

std::vector<std::string> fast_beats(const std::string& threshold_ms) {
  return {"--heartbeat-period-ms", "200", "--heartbeat-threshold-ms", threshold_ms};
}

long long sql_int_or(const std::string& db, const std::string& query, long long fallback) {
  try {
    return sql_int(db, query);
  } catch (const std::exception&) {
    return fallback;
  }
}

bool has(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

long long peak_rss_kb(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6));
  }
  return -1;
}

std::size_t line_of(const std::string& text, const std::string& what) {
  const auto at = text.find(what);
  if (at == std::string::npos) return 0;
  return 1 + static_cast<std::size_t>(
                 std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
}

std::string error_line(const std::string& err) {
  const auto at = err.find("error: ");
  return at == std::string::npos ? std::string() : err.substr(at, err.find('\n', at) - at);
}

long long succeeded(const std::string& db) {
  return sql_int(db, "select count(*) from minibatches where state='succeeded'");
}

bool submitted_and_done(const std::string& db, long long done) {
  return sql_int(db, "select submit_done from jobs where id=1") == 1 && succeeded(db) >= done;
}

bool pool_connected(const std::string& db, const std::string& name) {
  return sql_int(db,
                 "select count(*) from pools where name='" + name + "' and state='connected'") == 1;
}

void kill_all(std::initializer_list<ChildProcess*> procs) {
  for (auto* p : procs) p->signal(SIGKILL);
  for (auto* p : procs) (void)p->wait_for(std::chrono::seconds(10));
}

void check_rows_once(const std::string& out, std::size_t n) {
  const auto lines = read_lines(out);
  INFO("rows of " << out);
  CHECK(lines.size() == n);
  CHECK(std::set<std::string>(lines.begin(), lines.end()).size() == n);
}

void check_rows_once(const std::string& out, const std::vector<std::string>& expected) {
  const auto lines = read_lines(out);
  INFO("rows of " << out);
  CHECK(lines.size() == expected.size());
  std::map<std::string, std::size_t> seen;
  for (const auto& l : lines) ++seen[l];
  for (const auto& e : expected) {
    INFO("row " << e);
    CHECK(seen[e] == 1u);
  }
}

std::vector<std::string> files_ending(const std::string& dir, const std::string& suffix) {
  std::vector<std::string> out;
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string p = it->path().string();
    if (it->is_regular_file() && p.ends_with(suffix)) out.push_back(p);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::size_t temporaries_under(const std::string& dir) {
  std::size_t n = 0;
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->path().filename().string().find(".tmp") != std::string::npos) ++n;
  }
  return n;
}

std::vector<std::string> file_names(unsigned n) {
  std::vector<std::string> names;
  char name[32];
  for (unsigned i = 0; i < n; ++i) {
    std::snprintf(name, sizeof name, "file%05u.txt", i);
    names.emplace_back(name);
  }
  return names;
}

std::string job_yaml(const JobSpec& s) {
  std::string y = "type: parallel\nname: " + s.name +
                  "\ninputs:\n  files:\n    type: " + s.input_type + "\n    path: " + s.data + "\n";
  if (!s.output.empty()) {
    y += "outputs:\n  " + s.output_key + ":\n    type: uri_file\n    path: " + s.output + "\n";
  }
  y += "input_data: ${{inputs.files}}\nmini_batch_size: \"" + s.mini_batch_size + "\"\n";
  if (s.instance_count) {
    y += "resources:\n  instance_count: " + std::to_string(*s.instance_count) + "\n";
  }
  if (s.concurrency) y += "max_concurrency_per_instance: " + std::to_string(*s.concurrency) + "\n";
  if (s.max_retries || s.timeout_s) {
    y += "retry_settings:\n";
    if (s.max_retries) y += "  max_retries: " + std::to_string(*s.max_retries) + "\n";
    if (s.timeout_s) y += "  timeout: " + std::to_string(*s.timeout_s) + "\n";
  }
  if (!s.env.empty()) {
    y += "environment_variables:\n";
    for (const auto& [k, v] : s.env) y += "  " + k + ": \"" + v + "\"\n";
  }
  y += s.top + "task:\n" + s.task;
  if (!s.program_arguments.empty()) y += "  program_arguments: \"" + s.program_arguments + "\"\n";
  y += s.task_extra;
  if (!s.output.empty()) y += "  append_row_to: ${{outputs." + s.output_key + "}}\n";
  return y;
}

std::string echo_script(const std::string& nap) {
  return "import os, time\ndef run(mini_batch):\n" +
         (nap.empty() ? std::string() : "    time.sleep(" + nap + ")\n") +
         "    return [os.path.basename(p) for p in mini_batch]\n";
}

std::string fail_on_script(const std::string& fragment, const std::string& nap,
                           const std::string& message) {
  return "import os, time\ndef run(mini_batch):\n" +
         (nap.empty() ? std::string() : "    time.sleep(" + nap + ")\n") + "    if any(\"" +
         fragment + "\" in p for p in mini_batch):\n" + "        raise ValueError(\"" + message +
         "\" + os.path.basename(mini_batch[0]))\n" +
         "    return [os.path.basename(p) for p in mini_batch]\n";
}

JobSpec counting_job_spec(const std::string& name, const std::string& runs,
                          const std::string& nap) {
  JobSpec s;
  s.name = name;
  s.max_retries = 3;
  s.timeout_s = 120;
  s.env = {{"RUNS", runs}, {"NAP", nap}};
  return s;
}

std::string counting_job_yaml(const std::string& name, const std::string& runs,
                              const std::string& nap) {
  return job_yaml(counting_job_spec(name, runs, nap));
}

void make_echo_job(const std::string& folder, unsigned files, const JobSpec& spec,
                   const std::string& nap) {
  make_files(folder + "/data", files);
  write_file(folder + "/src/score.py", echo_script(nap));
  write_file(folder + "/job.yaml", job_yaml(spec));
}

void make_first_try_job(const std::string& folder, const std::string& name, unsigned files,
                        const std::string& script, int timeout_s) {
  make_files(folder + "/data", files);
  write_file(folder + "/src/score.py", script);
  write_file(folder + "/markers/.keep", "");
  JobSpec job;
  job.name = name;
  job.max_retries = 2;
  job.timeout_s = timeout_s;
  job.env = {{"MARKERS", folder + "/markers"}};
  write_file(folder + "/job.yaml", job_yaml(job));
}

void make_counting_job(const std::string& folder, const std::string& name, unsigned files,
                       const std::string& nap, const std::string& yaml_more) {
  make_files(folder + "/data", files);
  write_file(folder + "/src/score.py", kCountingScript);
  write_file(folder + "/job.yaml", counting_job_yaml(name, folder + "/runs.txt", nap) + yaml_more);
}

}  // namespace fanout::test
