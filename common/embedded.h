// Files embedded into the binary at build time (templates/, see cmake/VerlEmbed.cmake).
// Lookups by path relative to templates/, e.g. find("job.yaml"). The data lives for the
// whole program and is NUL-terminated.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace verl::embedded {

struct File {
  const char* path;
  const char* data;
  std::size_t size;
  std::string_view view() const { return {data, size}; }
};

const File* find(std::string_view path);
std::vector<const File*> all();

}  // namespace verl::embedded
