// GNU parallel's command line for `fanout run`. See adhoc_argv.hpp.
#include "client/commands/adhoc_argv.hpp"

#include <array>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string_view>
#include <utility>

namespace fanout::client {

namespace {

// GNU parallel options fanout does not take, with what to use instead.
constexpr std::array<std::pair<std::string_view, std::string_view>, 32> kRefused{{
    {"--ungroup", "output comes whole lines at a time (--line-buffer is accepted)"},
    {"-u", "output comes whole lines at a time (--line-buffer is accepted)"},
    {"--files", "--results DIR (each item's stdout, stderr and seq under DIR)"},
    {"-S", "--launcher ssh --hosts H1,H2 (docs/cluster.md)"},
    {"--sshlogin", "--launcher ssh --hosts H1,H2 (docs/cluster.md)"},
    {"--slf", "--launcher ssh --hosts H1,H2 (docs/cluster.md)"},
    {"--sshloginfile", "--launcher ssh --hosts H1,H2 (docs/cluster.md)"},
    {"--onall", "--launcher ssh --hosts H1,H2 (docs/cluster.md)"},
    {"--nonall", "--launcher ssh --hosts H1,H2 (docs/cluster.md)"},
    {"--resume", "fanout resume N (the job number the summary names)"},
    {"--resume-failed", "fanout resume N --failed"},
    {"--retry-failed", "fanout resume N --failed"},
    {"--plus", "the replacement strings of docs/adhoc.md ({} {.} {/} {//} {/.} {#} {%} {n})"},
    {"-I", "{} as it is"},
    {"-i", "{} as it is"},
    {"--replace", "{} as it is"},
    {"--extensionreplace", "{.} as it is"},
    {"--basenamereplace", "{/} as it is"},
    {"--dirnamereplace", "{//} as it is"},
    {"--seqreplace", "{#} as it is"},
    {"--slotreplace", "{%} as it is"},
    {"-0", "--input DIR (a folder's file names may hold any character)"},
    {"--null", "--input DIR (a folder's file names may hold any character)"},
    {"-d", "one item per line (--colsep splits a line into {1}..{n})"},
    {"--delimiter", "one item per line (--colsep splits a line into {1}..{n})"},
    {"--xargs", "-m"},
    {"--pipepart", "--pipe"},
    {"--cat", "--pipe (each chunk on the command's stdin)"},
    {"--fifo", "--pipe (each chunk on the command's stdin)"},
    {"--tagstring", "--tag"},
    {"--header", "--colsep with {1}..{n} (the header line is an item)"},
    {"--shuf", "the input in the order wanted (e.g. ... | shuf | fanout run -c CMD)"},
}};

bool is_source(std::string_view a) {
  return a == ":::" || a == ":::+" || a == "::::" || a == "::::+";
}

// `--name=VALUE` or `--name VALUE` (or `-xVALUE` for a one-letter `-x`) at argv[i]: its value,
// advancing i past it; nullopt when argv[i] is not that option. `missing` is set when the value
// is not there.
std::optional<std::string> value_of(std::string_view name, int argc, char** argv, int& i,
                                    bool& missing) {
  const std::string_view a = argv[i];
  if (a == name) {
    if (i + 1 >= argc) {
      missing = true;
      return std::string();
    }
    return std::string(argv[++i]);
  }
  if (a.size() > name.size() && a.substr(0, name.size()) == name) {
    if (name.size() == 2 && name[0] == '-' && name[1] != '-') return std::string(a.substr(2));
    if (a[name.size()] == '=') return std::string(a.substr(name.size() + 1));
  }
  return std::nullopt;
}

bool read_lines(const std::string& file, std::vector<std::string>& out, const char* option) {
  std::ifstream f;
  if (file != "-") f.open(file);
  std::istream& in = file == "-" ? std::cin : f;
  if (!in) {
    std::fprintf(stderr, "error: %s %s: cannot read the file\n", option, file.c_str());
    return false;
  }
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return true;
}

// -N / -n / --max-args: a count >= 0.
bool read_count(const std::string& v, const char* option, std::int64_t& out) {
  if (v.empty() || v.size() > 9 || v.find_first_not_of("0123456789") != std::string::npos) {
    std::fprintf(stderr, "error: %s: expected a count >= 0 (got '%s')\n", option, v.c_str());
    return false;
  }
  out = std::stoll(v);
  return true;
}

// One GNU option of an ad-hoc run at argv[i]. Returns 1 when it was read (i advanced past its
// value), 0 when it is not one, -1 after printing why it is refused.
int gnu_option(int argc, char** argv, int& i, AdhocArgv& out) {
  const std::string_view a = argv[i];
  bool missing = false;
  auto need = [&](const char* option) {
    if (missing) std::fprintf(stderr, "error: %s: expected a value\n", option);
    return missing ? -1 : 1;
  };
  if (auto v = value_of("--jobs", argc, argv, i, missing)) {
    out.args.insert(out.args.end(), {"-j", *v});
    return need("--jobs");
  }
  if (auto v = value_of("-P", argc, argv, i, missing)) {
    out.args.insert(out.args.end(), {"-j", *v});
    return need("-P");
  }
  if (a == "--eta" || a == "--progress") {
    out.args.emplace_back("--bar");
    return 1;
  }
  // Accepted as they are: fanout prints whole lines, grouped per item, and skips blank lines.
  if (a == "--line-buffer" || a == "--lb" || a == "--group" || a == "--will-cite" || a == "-r" ||
      a == "--no-run-if-empty") {
    return 1;
  }
  if (a == "--dryrun") {
    out.args.emplace_back("--dry-run");
    return 1;
  }
  if (a == "--link" || a == "--xapply") {
    out.link = true;
    return 1;
  }
  for (const char* name : {"-a", "--arg-file"}) {
    if (auto v = value_of(name, argc, argv, i, missing)) {
      if (missing) return need(name);
      out.sources.push_back({});
      return read_lines(*v, out.sources.back().values, name) ? 1 : -1;
    }
  }
  for (const char* name : {"-N", "-n", "--max-args", "--max-replace-args"}) {
    if (auto v = value_of(name, argc, argv, i, missing)) {
      if (missing) return need(name);
      return read_count(*v, name, out.gnu.max_args) ? 1 : -1;
    }
  }
  if (a == "-m" || a == "-X") {
    out.gnu.multi = a[1];
    return 1;
  }
  if (auto v = value_of("--colsep", argc, argv, i, missing)) {
    out.gnu.colsep = *v;
    return need("--colsep");
  }
  if (a == "--pipe" || a == "--spreadstdin") {
    out.gnu.pipe = true;
    return 1;
  }
  for (const char* name : {"--block", "--block-size"}) {
    if (auto v = value_of(name, argc, argv, i, missing)) {
      out.gnu.block = *v;
      return need(name);
    }
  }
  for (const auto& [name, instead] : kRefused) {
    if (a == name ||
        (a.size() > name.size() && a.substr(0, name.size()) == name && a[name.size()] == '=')) {
      std::fprintf(stderr, "error: run: GNU parallel's %s is not supported by fanout; use %s\n",
                   std::string(name).c_str(), std::string(instead).c_str());
      return -1;
    }
  }
  return 0;
}

}  // namespace

std::optional<AdhocArgv> split_adhoc_argv(int argc, char** argv) {
  AdhocArgv out;
  out.args = {argv, argv + argc};
  if (argc < 2 || std::string_view(argv[1]) != "run") return out;  // e.g. `fanout python -c`
  bool adhoc = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "-c" || a == "--command" || a.rfind("--command=", 0) == 0 || is_source(a)) {
      adhoc = true;
    }
  }
  out.args = {argv[0]};
  bool files = false;
  bool in_sources = false;
  bool file_read = false;  // a file of the current `::::` was read
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (is_source(a)) {
      out.sources.push_back({.values = {}, .linked = a.back() == '+'});
      files = a.rfind("::::", 0) == 0;
      file_read = false;
      in_sources = true;
    } else if (in_sources && files) {
      // Each file after `::::` is a source of its own (`:::: a b` combines a's lines with b's).
      if (file_read) out.sources.push_back({});
      if (!read_lines(a, out.sources.back().values, "::::")) return std::nullopt;
      file_read = true;
    } else if (in_sources) {
      out.sources.back().values.push_back(a);
    } else if (adhoc && (a == "-c" || a == "--command") && i + 1 < argc) {
      out.args.push_back(a);
      out.args.emplace_back(argv[++i]);  // the command, whatever it looks like
    } else if (adhoc && a == "-q") {
      out.args.emplace_back("--quote");
    } else if (adhoc) {
      const int r = gnu_option(argc, argv, i, out);
      if (r < 0) return std::nullopt;
      if (r == 0) out.args.push_back(a);
    } else {
      out.args.push_back(a);
    }
  }
  // --link: every source goes with the one before, value by value (as :::+).
  for (std::size_t k = 1; out.link && k < out.sources.size(); ++k) {
    out.sources[k].linked = true;
    out.sources[k].wrap = true;
  }
  return out;
}

}  // namespace fanout::client
