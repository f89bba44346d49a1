// jobs.settings, typed. See job_settings.hpp.
#include "fanout/store/job_settings.hpp"

#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "fanout/store/db.hpp"

namespace fanout::store {

namespace {

using Json = nlohmann::ordered_json;

// A whole number as a JSON integer, anything else as a real: the store held fmt's "{}" text
// ("60", "0.25") before it was written with a JSON library, and SQL over jobs.settings (the
// job_settings view's `type`) sees the same types as before.
Json number(double v) {
  constexpr double kExact = 9007199254740992.0;  // 2^53: integers up to here convert exactly
  if (std::isfinite(v) && std::trunc(v) == v && std::fabs(v) < kExact) {
    return Json(static_cast<std::int64_t>(v));
  }
  return Json(v);
}

template <typename T>
void read_int(const Json& obj, const char* key, T& out) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_number_integer()) return;
  const auto v = it->get<std::int64_t>();
  if (v < static_cast<std::int64_t>(std::numeric_limits<T>::min()) ||
      (v > 0 &&
       static_cast<std::uint64_t>(v) > static_cast<std::uint64_t>(std::numeric_limits<T>::max()))) {
    return;
  }
  out = static_cast<T>(v);
}

void read_real(const Json& obj, const char* key, double& out) {
  auto it = obj.find(key);
  if (it != obj.end() && it->is_number()) out = it->get<double>();
}

void read_text(const Json& obj, const char* key, std::string& out) {
  auto it = obj.find(key);
  if (it != obj.end() && it->is_string()) out = it->get<std::string>();
}

}  // namespace

std::string settings_json(const JobSettings& s) {
  Json j = Json::object();
  j["mini_batch_size"] = s.mini_batch_size;
  j["instance_count"] = s.instance_count;
  j["max_concurrency_per_instance"] = s.max_concurrency_per_instance;
  j["prefetch"] = s.prefetch;
  j["poll_ms"] = s.poll_ms;
  j["heartbeat_period_ms"] = s.heartbeat_period_ms;
  j["heartbeat_threshold_ms"] = s.heartbeat_threshold_ms;
  j["max_retries"] = s.max_retries;
  j["timeout_s"] = number(s.timeout_s);
  j["error_threshold"] = s.error_threshold;
  j["mini_batch_error_threshold"] = s.mini_batch_error_threshold;
  j["allowed_failed_percent"] = number(s.allowed_failed_percent);
  j["logging_level"] = s.logging_level;
  j["python"] = s.python;
  j["task_type"] = s.task_type;
  j["resource_monitor_interval"] = number(s.resource_monitor_interval_s);
  j["profiling_module"] = s.profiling_module;
  j["priority"] = s.priority;
  if (!s.launcher.empty() && s.launcher != "local") {
    j["launcher"] = s.launcher;
    j["nodes"] = s.nodes;
    j["min_nodes"] = s.min_nodes;
    j["max_nodes"] = s.max_nodes;
    j["partition"] = s.partition;
    j["walltime"] = s.walltime;
  }
  if (s.mem_per_worker_gib > 0) j["mem_per_worker"] = number(s.mem_per_worker_gib);
  if (s.worker_memory_limit_bytes > 0) j["worker_memory_limit"] = s.worker_memory_limit_bytes;
  if (s.max_minibatches_per_worker > 0) {
    j["max_minibatches_per_worker"] = s.max_minibatches_per_worker;
  }
  if (!s.accelerators.empty()) j["accelerators"] = s.accelerators;
  if (!s.accelerator_kind.empty()) j["accelerator_kind"] = s.accelerator_kind;
  if (s.workers_per_accelerator > 0) j["workers_per_accelerator"] = s.workers_per_accelerator;
  if (s.cores_per_worker > 0) j["cores_per_worker"] = s.cores_per_worker;
  if (!s.cpu_affinity.empty()) j["cpu_affinity"] = s.cpu_affinity;
  if (!s.output_dir.empty()) j["output_dir"] = s.output_dir;
  if (!s.input_changed_on_resume.empty()) j["input_changed_on_resume"] = s.input_changed_on_resume;
  // Paths and names are UTF-8 in practice; a stray byte is replaced rather than thrown on.
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Expected<JobSettings> parse_settings_json(std::string_view json) {
  Json j = Json::parse(json.begin(), json.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return make_error(ErrorCode::InvalidArgument, "settings: expected a JSON object (got '" +
                                                      std::string(json.substr(0, 60)) + "')");
  }
  JobSettings s;
  read_text(j, "mini_batch_size", s.mini_batch_size);
  read_int(j, "instance_count", s.instance_count);
  read_int(j, "max_concurrency_per_instance", s.max_concurrency_per_instance);
  read_int(j, "prefetch", s.prefetch);
  read_int(j, "poll_ms", s.poll_ms);
  read_int(j, "heartbeat_period_ms", s.heartbeat_period_ms);
  read_int(j, "heartbeat_threshold_ms", s.heartbeat_threshold_ms);
  read_int(j, "max_retries", s.max_retries);
  read_real(j, "timeout_s", s.timeout_s);
  read_int(j, "error_threshold", s.error_threshold);
  read_int(j, "mini_batch_error_threshold", s.mini_batch_error_threshold);
  read_real(j, "allowed_failed_percent", s.allowed_failed_percent);
  read_text(j, "logging_level", s.logging_level);
  read_text(j, "python", s.python);
  read_text(j, "task_type", s.task_type);
  read_real(j, "resource_monitor_interval", s.resource_monitor_interval_s);
  read_text(j, "profiling_module", s.profiling_module);
  read_int(j, "priority", s.priority);
  read_text(j, "launcher", s.launcher);
  read_int(j, "nodes", s.nodes);
  read_int(j, "min_nodes", s.min_nodes);
  read_int(j, "max_nodes", s.max_nodes);
  read_text(j, "partition", s.partition);
  read_text(j, "walltime", s.walltime);
  read_real(j, "mem_per_worker", s.mem_per_worker_gib);
  read_int(j, "worker_memory_limit", s.worker_memory_limit_bytes);
  read_int(j, "max_minibatches_per_worker", s.max_minibatches_per_worker);
  read_text(j, "accelerators", s.accelerators);
  read_text(j, "accelerator_kind", s.accelerator_kind);
  read_int(j, "workers_per_accelerator", s.workers_per_accelerator);
  read_int(j, "cores_per_worker", s.cores_per_worker);
  read_text(j, "cpu_affinity", s.cpu_affinity);
  read_text(j, "output_dir", s.output_dir);
  if (auto it = j.find("input_changed_on_resume"); it != j.end() && it->is_array()) {
    for (const auto& note : *it) {
      if (note.is_string()) s.input_changed_on_resume.push_back(note.get<std::string>());
    }
  }
  return s;
}

std::optional<JobSettings> read_job_settings(const std::string& path, std::uint64_t job_id) {
  Db db(path, Db::Mode::ReadOnly);
  db.exec("PRAGMA busy_timeout = 5000", "set busy_timeout");
  Statement st(db, "SELECT coalesce(settings, '{}') FROM jobs WHERE id = ?1");
  st.bind(1, job_id);
  if (!st.step()) return std::nullopt;
  auto s = parse_settings_json(st.column_text(0));
  if (!s) {
    throw Failure(ErrorCode::InvalidArgument,
                  path + ": job " + std::to_string(job_id) + ": " + s.error().message);
  }
  return *s;
}

void record_input_change(const std::string& path, std::uint64_t job_id, const std::string& note) {
  Db db(path, Db::Mode::ReadWriteCreate);
  db.exec("PRAGMA busy_timeout = 5000", "set busy_timeout");
  Transaction tx(db);
  Statement get(db, "SELECT coalesce(settings, '{}') FROM jobs WHERE id = ?1");
  get.bind(1, job_id);
  if (!get.step()) {
    throw Failure(ErrorCode::NotFound, path + ": no job " + std::to_string(job_id));
  }
  // Through JobSettings, so the keys stay the ones settings_json() writes; settings that are not
  // a JSON object are replaced by the defaults plus the note.
  auto parsed = parse_settings_json(get.column_text(0));
  JobSettings s = parsed ? *parsed : JobSettings{};
  get.reset();
  s.input_changed_on_resume.push_back(note);
  const std::string text = settings_json(s);
  Statement put(db, "UPDATE jobs SET settings = ?2 WHERE id = ?1");
  put.bind(1, job_id).bind(2, text).run();
  tx.commit();
}

}  // namespace fanout::store
