// Output of data on stdout: one table printer and one JSON printer, so that every listing
// command can answer `-o json` the same way.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace verl::cli {

// Prints rows under a header, columns padded to their widest cell.
void print_table(std::ostream& out, const std::vector<std::string>& header,
                 const std::vector<std::vector<std::string>>& rows);

void print_json(std::ostream& out, const nlohmann::ordered_json& value);

// A time in milliseconds since the epoch as local HH:MM:SS.
std::string clock_time(int64_t epoch_ms);

}  // namespace verl::cli
