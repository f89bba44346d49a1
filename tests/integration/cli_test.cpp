// The command line as people meet it: every parse error exits 2 with
// CLI11's message, validators refuse values out of range, --version on the three programs, -q
// silences note: lines, and an empty store file is a new store; mistyped subcommands and options
// get a "did you mean", --help fits 80 columns, the man page names `fanout`. Real binaries; only
// the -q case runs a (built-in no-op) job.
#include <doctest/doctest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "fanout/util/fs.hpp"
#include "harness.hpp"

using namespace fanout::test;

namespace {

RunResult fanout_cli(const TempDir& dir, std::vector<std::string> args) {
  args.insert(args.begin(), fanout_bin());
  return run_capture(args, dir.path(), {}, std::chrono::seconds(60));
}

}  // namespace

TEST_CASE("integration.cli.parse_errors_exit_2") {
  TempDir dir("cli-parse");
  write_file(dir / "job.yaml", "type: parallel\n");
  const std::string db = dir / "fanout.db";
  const std::vector<std::vector<std::string>> bad = {
      {},                                                // no subcommand (CLI11 said 106)
      {"--bogus"},                                       // unknown flag (109)
      {"status", "abc"},                                 // not a number (104)
      {"status", "0"},                                   // job ids start at 1
      {"run", dir / "job.yaml", "--workers", "abc"},     // not a number
      {"run", dir / "job.yaml", "--prefetch", "-1"},     // not negative
      {"run", dir / "job.yaml", "--pools", "0"},         // at least one pool
      {"run", dir / "job.yaml", "--poll-ms", "0"},       // at least 1 ms
      {"run", dir / "job.yaml", "--log-level", "loud"},  // not a level
      {"history", "--db", db, "--state", "done"},        // not a state
      {"resume", "1", "--workers", "0"},                 // at least one worker
      {"perf", "--runtime", "java"},                     // noop or python
      {"perf", "--prefetch", "-5"},                      // not negative
      {"tune", "1", "--target-duration", "-3"},          // positive
      {"wait"},                                          // the job id is required
  };
  for (const auto& args : bad) {
    std::string line;
    for (const auto& a : args) line += a + " ";
    CAPTURE(line);
    auto r = fanout_cli(dir, args);
    CHECK(r.status.code == 2);
    CHECK_FALSE(r.err.empty());  // CLI11 says what was wrong
  }
  // Nothing was started, nothing created.
  CHECK_FALSE(std::filesystem::exists(db));
  // --state takes the new outcome: past the parser, to the missing store.
  auto partial = fanout_cli(dir, {"history", "--db", db, "--state", "partial"});
  CHECK(partial.err.find("no such store") != std::string::npos);
}

TEST_CASE("integration.cli.version_and_help") {
  TempDir dir("cli-version");
  for (const auto& bin : {fanout_bin(), interchange_bin(), pool_bin()}) {
    CAPTURE(bin);
    auto v = run_capture({bin, "--version"}, dir.path());
    CHECK(v.status.code == 0);
    CHECK(v.out == std::string(FANOUT_VERSION) + "\n");
    auto h = run_capture({bin, "--help"}, dir.path());
    CHECK(h.status.code == 0);
  }
  // Help on options that had none, and the allowed values shown.
  auto ix = run_capture({interchange_bin(), "--help"}, dir.path());
  CHECK(ix.out.find("heartbeat period towards pools") != std::string::npos);
  auto hist = fanout_cli(dir, {"history", "--help"});
  CHECK(hist.out.find("partial") != std::string::npos);
  auto resume = fanout_cli(dir, {"resume", "--help"});
  CHECK(resume.out.find("--failed") != std::string::npos);
  CHECK(resume.out.find("--allow-partial") != std::string::npos);
}

TEST_CASE("integration.cli.empty_store_file_is_a_new_store") {
  // `sqlite3 STORE 'select ...'` before the first job leaves a 0-byte file.
  TempDir dir("cli-empty");
  const std::string db = dir / "fanout.db";
  write_file(db, "");
  auto h = fanout_cli(dir, {"history", "--db", db});
  INFO(h.err);
  CHECK(h.status.code == 0);
  CHECK(h.out.find("(no jobs in " + db + ")") != std::string::npos);
  auto j = fanout_cli(dir, {"history", "--db", db, "--json"});
  CHECK(j.out == "[]\n");
  auto s = fanout_cli(dir, {"status", "1", "--db", db});
  CHECK(s.status.code == 2);
  CHECK(s.err.find("no job 1") != std::string::npos);
  CHECK(s.err.find("schema version") == std::string::npos);
}

TEST_CASE("integration.cli.quiet_silences_notes") {
  TempDir dir("cli-quiet");
  make_files(dir / "data", 3);
  // `environment:` is ignored with a note (fanout runs locally).
  write_file(dir / "job.yaml", R"(type: parallel
name: quiet
environment: azureml:some-env:1
inputs:
  files: {type: uri_folder, path: ./data}
input_data: ${{inputs.files}}
mini_batch_size: "3"
task:
  type: native
  library: builtin:noop
)");
  const std::string db = dir / "fanout.db";
  auto loud = fanout_cli(dir, {"run", dir / "job.yaml", "--db", db});
  INFO("stderr:\n" << loud.err);
  CHECK(loud.status.code == 0);
  CHECK(loud.err.find("note: environment") != std::string::npos);
  auto quiet = fanout_cli(dir, {"run", dir / "job.yaml", "--db", db, "-q"});
  INFO("stderr -q:\n" << quiet.err);
  CHECK(quiet.status.code == 0);
  CHECK(quiet.err.find("note:") == std::string::npos);
  // history --json: real JSON, a finished job's end is a number.
  auto hj = fanout_cli(dir, {"history", "--db", db, "--json"});
  CHECK(hj.out.find("\"ended\":null") == std::string::npos);
  CHECK(hj.out.find("\"state\":\"succeeded\"") != std::string::npos);
}

TEST_CASE("integration.cli.typos_get_suggestions") {
  TempDir dir("cli-typos");
  // A mistyped subcommand is named, with the nearest one (CLI11 said "A subcommand is required").
  auto sub = fanout_cli(dir, {"staus", "3"});
  CHECK(sub.status.code == 2);
  CHECK(sub.err.find("unknown command 'staus'; did you mean 'status'?") != std::string::npos);
  auto far = fanout_cli(dir, {"frobnicate"});
  CHECK(far.status.code == 2);
  CHECK(far.err.find("unknown command 'frobnicate'") != std::string::npos);
  CHECK(far.err.find("did you mean") == std::string::npos);
  // A mistyped option of a subcommand, separate from its value or joined with '='.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", "job.yaml", "--wokers", "4"},
        std::vector<std::string>{"run", "--wokers=4", "job.yaml"}}) {
    auto opt = fanout_cli(dir, args);
    INFO(opt.err);
    CHECK(opt.status.code == 2);
    CHECK(opt.err.find("fanout run: unknown option '--wokers'; did you mean '--workers'?") !=
          std::string::npos);
  }
  auto status_opt = fanout_cli(dir, {"status", "3", "--jsno"});
  CHECK(status_opt.err.find("did you mean '--json'?") != std::string::npos);
  // Other errors keep CLI11's own message.
  auto bad_value = fanout_cli(dir, {"run", "job.yaml", "--workers", "abc"});
  CHECK(bad_value.status.code == 2);
  CHECK(bad_value.err.find("--workers") != std::string::npos);
  CHECK(bad_value.err.find("did you mean") == std::string::npos);
}

TEST_CASE("integration.cli.help_fits_80_columns_with_plain_value_names") {
  TempDir dir("cli-help-width");
  auto top = fanout_cli(dir, {"--help"});
  REQUIRE(top.status.code == 0);
  // Every subcommand, as `fanout --help` lists them (a line of its own, indented by two).
  std::vector<std::string> commands;
  std::istringstream lines(top.out);
  bool listing = false;
  for (std::string line; std::getline(lines, line);) {
    if (line == "Subcommands:") listing = true;
    if (listing && line.size() > 2 && line.rfind("  ", 0) == 0 && line[2] != ' ') {
      commands.push_back(line.substr(2, line.find(' ', 2) - 2));
    }
  }
  CHECK(commands.size() >= 11);
  std::vector<std::vector<std::string>> helps = {{"--help"}};
  for (const auto& c : commands) helps.push_back({c, "--help"});
  for (const auto& args : helps) {
    auto h = fanout_cli(dir, args);
    CAPTURE(args.front());
    CHECK(h.status.code == 0);
    std::istringstream text(h.out);
    for (std::string line; std::getline(text, line);) {
      CAPTURE(line);
      CHECK(line.size() <= 80);
    }
    // Value names, not CLI11's validator text ("INT:INT in [-1 - 9223372036854775807]").
    CHECK(h.out.find(" in [") == std::string::npos);
    for (const char* cli11 : {"INT:", " INT ", " UINT", " FLOAT"}) {
      CAPTURE(cli11);
      CHECK(h.out.find(cli11) == std::string::npos);
    }
    CHECK(h.out.find("Usage: fanout") != std::string::npos);
  }
  auto run = fanout_cli(dir, {"run", "--help"});
  for (const char* want :
       {"\nOutput:\n", "\nWorkers:\n", "\nFailures:\n", "\nCluster:\n", "\nAdvanced:\n",
        "--workers N ", "--db PATH ", "--poll-ms MS ", "--launcher KIND "}) {
    CAPTURE(want);
    CHECK(run.out.find(want) != std::string::npos);
  }
  CHECK(run.out.find("\nOutput:\n") < run.out.find("\nAdvanced:\n"));
}

TEST_CASE("integration.cli.daemons_help_and_man_pages_fit_80_columns_with_plain_value_names") {
  TempDir dir("cli-daemon-help");
  auto which = run_capture({"sh", "-c", "command -v help2man"}, dir.path());
  const std::string tools = env_or("FANOUT_TOOLS_DIR", "tools");
  for (const auto& [bin, name] : {std::pair{interchange_bin(), std::string("fanout-interchange")},
                                  std::pair{pool_bin(), std::string("fanout-pool")}}) {
    CAPTURE(name);
    auto h = run_capture({bin, "--help"}, dir.path(), {}, std::chrono::seconds(60));
    CHECK(h.status.code == 0);
    CHECK(h.out.find("Usage: " + name) != std::string::npos);
    std::istringstream text(h.out);
    for (std::string line; std::getline(text, line);) {
      CAPTURE(line);
      CHECK(line.size() <= 80);
    }
    CHECK(h.out.find(" in [") == std::string::npos);
    // " INT:", not "INT:": the pool's help says "SIGINT: running tasks may finish".
    for (const char* cli11 : {" INT:", " INT ", " UINT", " FLOAT", ":POSITIVE", ":NONNEGATIVE"}) {
      CAPTURE(cli11);
      CHECK(h.out.find(cli11) == std::string::npos);
    }
    CHECK(h.out.find("--heartbeat-period-ms N ") != std::string::npos);
    // The man page, made from that help as the build makes it (tools/packaging/meson.build).
    if (which.status.code != 0) {
      MESSAGE("SKIP: help2man is not installed (tools/deps-debian.txt): no man page checked");
      continue;
    }
    const std::string page = dir / (name + ".1");
    auto gen = run_capture({"bash", tools + "/packaging/gen_man.sh", bin, "0.0", page}, dir.path());
    INFO(gen.err);
    REQUIRE(gen.status.code == 0);
    auto man = run_capture({"sh", "-c", "LC_ALL=C MANWIDTH=80 man -l \"$0\" | col -b", page},
                           dir.path(), {}, std::chrono::seconds(60));
    REQUIRE(man.status.code == 0);
    CHECK(man.out.find("--heartbeat-period-ms N") != std::string::npos);
    CHECK(man.out.find(" in [") == std::string::npos);
    std::istringstream lines(man.out);
    for (std::string line; std::getline(lines, line);) {
      CAPTURE(line);
      CHECK(line.size() <= 80);
    }
  }
}

TEST_CASE("integration.cli.man_page_names_the_program_not_a_build_path") {
  TempDir dir("cli-man");
  // The page as the build makes it (tools/packaging/meson.build), from this build's program.
  const std::string tools = env_or("FANOUT_TOOLS_DIR", "tools");
  auto which = run_capture({"sh", "-c", "command -v help2man"}, dir.path());
  if (which.status.code != 0) {
    MESSAGE("SKIP: help2man is not installed (tools/deps-debian.txt)");
    return;
  }
  const std::string page = dir / "fanout.1";
  auto gen =
      run_capture({"bash", tools + "/packaging/gen_man.sh", fanout_bin(), "0.0", page}, dir.path());
  INFO(gen.err);
  REQUIRE(gen.status.code == 0);
  auto text = fanout::read_file(page);
  REQUIRE(text.has_value());
  const std::string bin_dir = std::filesystem::path(fanout_bin()).parent_path().string();
  CHECK(text->find(bin_dir) == std::string::npos);
  CHECK(text->find("/build/") == std::string::npos);
  CHECK(text->find("Usage: fanout run [OPTIONS]") != std::string::npos);
  CHECK(text->find(".SS \"fanout perf\"") != std::string::npos);
}
