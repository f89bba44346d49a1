// Error categories (TaskResult::error_category) that carry a rule beyond their text: the
// interchange acts on them. docs/worker-pipe.md describes where each comes from.
#pragma once

#include <string_view>

namespace fanout::proto {

// An attempt whose input is no longer what the client listed (a file truncated, grown or
// replaced since): the worker that finds it says so, and the interchange does not retry it,
// since every try would read the same changed file.
inline constexpr std::string_view kInputChangedCategory = "INPUT_CHANGED";

// An entry of the input the client's listing could not make an input (MiniBatch::refused): the
// interchange fails its mini-batch at once with this category, never retried.
inline constexpr std::string_view kInputUnreadableCategory = "INPUT_UNREADABLE";

}  // namespace fanout::proto
