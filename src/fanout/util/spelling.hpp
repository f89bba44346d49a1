// "Did you mean": the nearest of a set of known words to a mistyped one, for the errors of the
// job-file reader (unknown keys) and the command line (unknown subcommands and options).
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace fanout {

// Levenshtein distance: single-character insertions, deletions and substitutions.
std::size_t edit_distance(std::string_view a, std::string_view b);

// The word of `known` nearest to `word` within `max_edits` edits (the first of equals), or empty
// when none is that near. The result views an element of `known`.
std::string_view nearest_word(std::string_view word, const std::vector<std::string_view>& known,
                              std::size_t max_edits = 2);

}  // namespace fanout
