// How an agent cuts a rank's log file into the chunks it sends the head. Offsets count the
// file's bytes and the head advances by the bytes it gets, so a chunk must keep its length and
// be valid UTF-8 (JSON carries text: an invalid byte would become a 3-byte replacement and shift
// every later offset). Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <string>

namespace verl::launcher {

// Where a chunk of data ends: after its last newline when it is full; never inside a UTF-8
// sequence unless it is the stream's last (final).
size_t chunk_end(const std::string& data, bool full, bool final);

// Each byte that is not part of a valid UTF-8 sequence becomes '?' (the length stays).
void sanitize_utf8(std::string& data);

}  // namespace verl::launcher
