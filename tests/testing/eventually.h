// A bounded wait: every wait in the tests polls a condition for at most a limit.
#pragma once

#include <chrono>
#include <functional>

namespace verl::testing {

// Polls cond every 10 ms for at most limit; its last answer.
bool eventually(const std::function<bool()>& cond,
                std::chrono::milliseconds limit = std::chrono::milliseconds(3000));

}  // namespace verl::testing
