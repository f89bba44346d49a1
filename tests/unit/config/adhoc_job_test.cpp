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
  j.shell.command = R"(echo "#1: {}" '$x: {y}' | tr a-z A-Z; echo {#})";
  j.shell.mini_batch_size = 7;
  j.input_type = "fanout_list";
  j.input_path = (dir / "list.txt").string();
  j.output_path = (dir / "rows: out.txt").string();
  j.code = dir.string();
  j.error_threshold = 3;
  j.max_retries = 2;
  j.timeout_s = 30;
  j.env = {{"GREETING", "a: b # c"}, {"EMPTY", ""}};
  std::ofstream(dir / "job.yaml") << adhoc_job_yaml(j);

  auto cfg = load_job((dir / "job.yaml").string());
  REQUIRE_MESSAGE(cfg.has_value(), (cfg ? "" : cfg.error().message));
  CHECK(cfg->name == "adhoc-x");
  CHECK(cfg->task_type == "command");
  CHECK(cfg->command == adhoc_shell_line(j.shell));
  REQUIRE(cfg->inputs.size() == 1);
  CHECK(cfg->inputs[0].type == "fanout_list");
  CHECK(cfg->inputs[0].path == j.input_path);
  CHECK(cfg->mini_batch_files == 7);
  CHECK(cfg->environment_variables.at("GREETING") == "a: b # c");
  CHECK(cfg->environment_variables.at("EMPTY").empty());
  CHECK(cfg->environment_variables.at("FANOUT_COMMAND_ITEMS") == "exit_status");
  fs::remove_all(dir);
}

TEST_CASE("adhoc_job.replacement_strings_are_put_in_quoted_where_the_shell_needs_it") {
  const std::string s =
      adhoc_shell_line({.command = "cp {} {//}/{/.}.bak {#}", .mini_batch_size = 4});
  CHECK(s.find(R"(fanout_cmd='cp '"$fanout_r_item"' '"$fanout_r_item_dir"'/')") !=
        std::string::npos);
  CHECK(s.find("FANOUT_MINI_BATCH_INDEX * 4") != std::string::npos);
  // No replacement string: the item is appended, as in GNU parallel.
  CHECK(adhoc_shell_line({.command = "gzip -k"}).find(R"(fanout_cmd='gzip -k '"$fanout_r_item")") !=
        std::string::npos);
}

TEST_CASE("adhoc_job.gnu_quote_quotes_only_what_the_shell_would_read") {
  CHECK(gnu_quote("1") == "1");
  CHECK(gnu_quote("a/b.txt") == "a/b.txt");
  CHECK(gnu_quote("a b") == "'a b'");
  CHECK(gnu_quote("it's") == R"('it'"'"'s')");
  CHECK(gnu_quote("") == "''");
  CHECK(gnu_quote("$x") == "'$x'");
  CHECK(gnu_quote("1", true) == "'1'");
}

TEST_CASE("adhoc_job.command_for_an_item_is_what_dry_run_prints") {
  CHECK(adhoc_command_for("echo $(( {} * {} ))", {"3"}, 1, false) == "echo $(( 3 * 3 ))");
  CHECK(adhoc_command_for("echo", {"a b"}, 1, false) == "echo 'a b'");
  CHECK(adhoc_command_for("echo {1}-{2} {#}", {"a", "1"}, 5, false) == "echo a-1 5");
  CHECK(adhoc_command_for("echo", {"a", "b c"}, 1, false) == "echo a 'b c'");
  CHECK(adhoc_command_for("mv {} {.}.bak {/} {//} {/.}", {"d/x.tar.gz"}, 1, false) ==
        "mv d/x.tar.gz d/x.tar.bak x.tar.gz d x.tar");
  CHECK(adhoc_command_for("echo {}", {"x"}, 1, true) == "echo 'x'");
}

TEST_CASE("adhoc_job.every_replacement_string_of_gnu_parallel_is_put_in") {
  // {%}: the job slot, from the worker's number in its pool.
  const std::string s = adhoc_shell_line({.command = "echo {%} {}"});
  CHECK(s.find("fanout_slot=${FANOUT_PROCESS#process}") != std::string::npos);
  CHECK(s.find(R"(fanout_cmd='echo '"$fanout_slot"' '"$fanout_r_item")") != std::string::npos);
  CHECK(adhoc_command_for("echo {%}", {"a"}, 1, false, AdhocArgs::Sources, "3") == "echo 3");
  // {n.} {n/} {n//} {n/.}, negative n, and n past the sources (empty, as GNU parallel).
  CHECK(adhoc_command_for("echo {1.} {1/} {2//} {2/.} {-1} x{3}y", {"a/b.c", "d/e.f"}, 1, false) ==
        "echo a/b b.c d e d/e.f xy");
  // A replacement string that starts the command is put in unquoted (GNU's rule).
  CHECK(adhoc_command_for("{} x", {"echo a b"}, 1, false) == "echo a b x");
  CHECK(adhoc_command_for("{}", {"echo a b"}, 1, false) == "echo a b");
  // Unknown braces are text, as in GNU parallel without --plus.
  CHECK(adhoc_command_for("echo {+/} {..} {x}", {"a"}, 1, false) == "echo {+/} {..} {x} a");
}

TEST_CASE("adhoc_job.unsupported_replacement_strings_are_named") {
  auto why = unsupported_replacement("echo {= s/a/b/ =} {}");
  REQUIRE(why.has_value());
  CHECK(why->find("{= s/a/b/ =}") != std::string::npos);
  REQUIRE(unsupported_replacement("echo {0#}").has_value());
  CHECK(unsupported_replacement("echo {0#}")->find("{0#}") != std::string::npos);
  CHECK_FALSE(unsupported_replacement("echo {} {%} {#} {1/} {-1.}").has_value());
}

TEST_CASE("adhoc_job.several_values_per_command_line_as_with_m_and_X") {
  // -m: {} is every value; -X: the word holding {} is repeated per value.
  CHECK(adhoc_command_for("echo {}", {"a", "b c"}, 1, false, AdhocArgs::Multi) == "echo a 'b c'");
  CHECK(adhoc_command_for("echo pre{}post", {"1", "2"}, 1, false, AdhocArgs::Context) ==
        "echo pre1post pre2post");
  CHECK(adhoc_command_for("echo", {"1", "2"}, 1, false, AdhocArgs::Context) == "echo 1 2");
  // -N: {1} {2} are the values; missing ones are empty; -N0 appends nothing.
  CHECK(adhoc_command_for("echo {1}-{2}", {"e"}, 3, false, AdhocArgs::Multi) == "echo e-");
  CHECK(adhoc_command_for("echo x", {}, 1, false, AdhocArgs::Multi) == "echo x");
}

TEST_CASE("adhoc_job.results_name_a_slash_as_gnu_parallel_20221122") {
  const std::string s = adhoc_shell_line({.command = "echo", .results = true});
  CHECK(s.find(R"(sed 's:\\:\\\\:g;s:/:\\_:g')") != std::string::npos);
}

TEST_CASE("adhoc_job.no_timeout_unless_asked_is_written_and_read_back_as_none") {
  // Left out, Azure's 60 s default would apply: it is always written, 0 for none.
  const fs::path dir = fs::temp_directory_path() / ("fanout-adhoc-t-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "list.txt") << "a\n";
  AdhocJob j;
  j.name = "adhoc-sleep";
  j.shell.command = "sleep 65";
  j.input_type = "fanout_list";
  j.input_path = (dir / "list.txt").string();
  j.output_path = (dir / "rows.txt").string();
  j.code = dir.string();
  const std::string yaml = adhoc_job_yaml(j);
  CHECK(yaml.find("timeout: 0") != std::string::npos);
  std::ofstream(dir / "job.yaml") << yaml;
  auto cfg = load_job((dir / "job.yaml").string());
  REQUIRE_MESSAGE(cfg.has_value(), (cfg ? "" : cfg.error().message));
  CHECK(cfg->timeout_s == 0);
  fs::remove_all(dir);
}
