// The job file of `fanout run -c`: what it writes is what load_job reads back, for commands and
// values that need YAML quoting.
#include "fanout/config/adhoc_job.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "fanout/config/job_spec.hpp"

namespace fs = std::filesystem;
using namespace fanout::config;

TEST_CASE("adhoc_job.yaml_reads_back_as_the_same_job") {
  const fs::path dir = fs::temp_directory_path() / ("fanout-adhoc-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "list.txt") << "a\n";
  AdhocJob j;
  j.name = "adhoc-x";
  j.description = "fanout run -c x";
  j.command = R"(echo "#1: {}" '$x: {y}' | tr a-z A-Z; echo {#})";
  j.input_type = "fanout_list";
  j.input_path = (dir / "list.txt").string();
  j.output_path = (dir / "rows: out.txt").string();
  j.code = dir.string();
  j.mini_batch_size = 7;
  j.error_threshold = 3;
  j.max_retries = 2;
  j.timeout_s = 30;
  j.env = {{"GREETING", "a: b # c"}, {"EMPTY", ""}};
  std::ofstream(dir / "job.yaml") << adhoc_job_yaml(j);

  auto cfg = load_job((dir / "job.yaml").string());
  REQUIRE_MESSAGE(cfg.has_value(), (cfg ? "" : cfg.error().message));
  CHECK(cfg->name == "adhoc-x");
  CHECK(cfg->task_type == "command");
  CHECK(cfg->command == adhoc_shell_line(j.command, 7));
  REQUIRE(cfg->inputs.size() == 1);
  CHECK(cfg->inputs[0].type == "fanout_list");
  CHECK(cfg->inputs[0].path == j.input_path);
  CHECK(cfg->mini_batch_files == 7);
  CHECK(cfg->environment_variables.at("GREETING") == "a: b # c");
  CHECK(cfg->environment_variables.at("EMPTY").empty());
  fs::remove_all(dir);
}

TEST_CASE("adhoc_job.replacement_strings_are_quoted_expansions") {
  const std::string s = adhoc_shell_line("cp {} {//}/{/.}.bak {#}", 4);
  CHECK(s.find(R"(cp "$fanout_item" "$fanout_dir"/"$fanout_base_noext".bak "$fanout_seq")") !=
        std::string::npos);
  CHECK(s.find("FANOUT_MINI_BATCH_INDEX * 4") != std::string::npos);
  // No replacement string: the item is appended, as in GNU parallel.
  CHECK(adhoc_shell_line("gzip -k", 1).find(R"(gzip -k "$fanout_item")") != std::string::npos);
}
