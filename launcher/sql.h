// What the head's two SQLite stores (job_store.cc, node_registry.cc) share over SQLiteCpp: a
// statement's values bound in order (sql::bind, sql::exec), a row's columns read in order into
// typed variables (sql::read), and SQLite's errors turned into verl::Error at the module
// boundary (sql::guarded). Each value's column type follows from its C++ type, written once
// here: an enum is its states.h name, JSON its text, a bool 0 / 1, an unset optional NULL.
//
// Stateless; a statement is used by one thread, as SQLiteCpp's are.
#pragma once

#include <SQLiteCpp/SQLiteCpp.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "common/error.h"
#include "launcher/states.h"

namespace verl::launcher::sql {

// Bytes bound as a BLOB: they need not be text.
struct Blob {
  const std::string& bytes;
};

// A BLOB (or TEXT) column's bytes as they are.
inline std::string blob(const SQLite::Column& c) {
  return std::string(static_cast<const char*>(c.getBlob()), static_cast<size_t>(c.getBytes()));
}

// Runs f; SQLite's errors become verl::Error(kFailure) "<store>: <what>: <SQLite's message>".
template <typename F>
auto guarded(const char* store, const char* what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const SQLite::Exception& e) {
    throw Error(ExitCode::kFailure, std::string(store) + ": " + what + ": " + e.what(),
                "check the disk and the permissions of the state directory");
  }
}

namespace detail {

template <typename T>
struct IsOptional : std::false_type {};
template <typename T>
struct IsOptional<std::optional<T>> : std::true_type {};

template <typename T>
void bind_one(SQLite::Statement& q, int i, const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    q.bind(i, v ? 1 : 0);
  } else if constexpr (std::is_enum_v<T>) {
    q.bind(i, to_string(v));
  } else if constexpr (std::is_same_v<T, nlohmann::ordered_json>) {
    q.bind(i, v.dump());
  } else if constexpr (std::is_same_v<T, Blob>) {
    q.bind(i, v.bytes.data(), static_cast<int>(v.bytes.size()));
  } else if constexpr (IsOptional<T>::value) {
    if (v) bind_one(q, i, *v);
    else q.bind(i);
  } else {
    q.bind(i, v);
  }
}

template <typename T>
void read_one(SQLite::Statement& q, int i, T& out) {
  const SQLite::Column c = q.getColumn(i);
  if constexpr (std::is_same_v<T, bool>) {
    out = c.getInt() != 0;
  } else if constexpr (std::is_enum_v<T>) {
    out = from_string<T>(c.getString());
  } else if constexpr (std::is_same_v<T, nlohmann::ordered_json>) {
    out = nlohmann::ordered_json::parse(c.getString());
  } else if constexpr (std::is_same_v<T, std::optional<int>>) {
    if (c.isNull()) out.reset();
    else out = c.getInt();
  } else if constexpr (std::is_same_v<T, std::string>) {
    out = c.getString();
  } else if constexpr (std::is_same_v<T, double>) {
    out = c.getDouble();
  } else if constexpr (std::is_same_v<T, int>) {
    out = c.getInt();
  } else {
    static_assert(std::is_same_v<T, int64_t>, "sql::read: no column type for this C++ type");
    out = c.getInt64();
  }
}

}  // namespace detail

// Binds values to the statement's parameters 1, 2, ... in order.
template <typename... T>
void bind(SQLite::Statement& q, const T&... values) {
  int i = 0;
  (detail::bind_one(q, ++i, values), ...);
}

// Prepares sql on db, binds values and runs it once; the number of rows it changed.
template <typename... T>
int exec(SQLite::Database& db, const std::string& sql, const T&... values) {
  SQLite::Statement q(db, sql);
  bind(q, values...);
  return q.exec();
}

// Reads the current row's columns 0, 1, ... into out..., in order.
template <typename... T>
void read(SQLite::Statement& q, T&... out) {
  int i = 0;
  (detail::read_one(q, i++, out), ...);
}

// Runs the query sql on db with values bound; each row as row(statement) makes it, in order.
template <typename Row, typename... T>
auto select(SQLite::Database& db, const std::string& sql, Row&& row, const T&... values) {
  SQLite::Statement q(db, sql);
  bind(q, values...);
  std::vector<decltype(row(q))> out;
  while (q.executeStep()) out.push_back(row(q));
  return out;
}

}  // namespace verl::launcher::sql
