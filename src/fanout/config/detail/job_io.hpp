// Private to config/: a parallel job's `inputs:` and `outputs:`, and the ${{inputs.x}} /
// ${{outputs.x}} references to them in its other values. See docs/job-spec.md#inputs.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fanout/config/detail/located_yaml.hpp"
#include "fanout/config/job_spec.hpp"

namespace fanout::config::detail {

// Reads `inputs:` in file order: literals, and path inputs resolved against `base_dir`. Records
// where each path input's path was written in `path_where` (for the existence checks made later).
[[nodiscard]] std::vector<InputSpec> read_inputs(const YamlReader& r, const Entry& e,
                                                 const std::string& base_dir,
                                                 std::map<std::string, Where>& path_where);

// Reads `outputs:` in file order; a path, when given, resolved against `base_dir`.
[[nodiscard]] std::vector<OutputSpec> read_outputs(const YamlReader& r, const Entry& e,
                                                   const std::string& base_dir);

// A parsed `${{inputs.x}}` / `${{outputs.x}}` reference.
struct Ref {
  bool output = false;
  std::string name{};
};

// `inner` is what sits between `${{` and `}}`; nullopt unless it is inputs.<x> or outputs.<x>.
std::optional<Ref> parse_ref(std::string_view inner);

// The reference when `s` is exactly one ${{inputs.x}} or ${{outputs.x}} (spaces around allowed).
std::optional<Ref> sole_io_ref(std::string_view s);

// Resolves references against a job's inputs and outputs, failing (through the reader) with the
// names it knows. Borrows both lists; they must outlive it.
class JobRefs final {
 public:
  JobRefs(const YamlReader& r, const std::vector<InputSpec>& inputs,
          const std::vector<OutputSpec>& outputs)
      : r_(r), inputs_(inputs), outputs_(outputs) {}

  // What `ref` stands for: an output's path, an input's path or a literal input's text.
  // `written` is the reference as written, for messages.
  [[nodiscard]] std::string resolve(const Where& w, const Ref& ref, std::string_view written) const;
  // `s` with every reference replaced by what it stands for.
  [[nodiscard]] std::string substitute(const Where& w, std::string_view s) const;

 private:
  const YamlReader& r_;
  const std::vector<InputSpec>& inputs_;
  const std::vector<OutputSpec>& outputs_;
};

}  // namespace fanout::config::detail
