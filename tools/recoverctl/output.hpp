#pragma once

/// How recoverctl prints: tables whose columns fit their content, and the
/// proto3 JSON mapping of an answer as JSON or YAML.

#include <ostream>
#include <string>
#include <vector>

#include <google/protobuf/message.h>
#include <nlohmann/json.hpp>

namespace recoverctl {

/// `-o`: a table for people (`wide`: with more columns), or the whole answer
/// for scripts as JSON or YAML.
enum class output_format { table, wide, json, yaml };

/// The format named `name` ("table", "wide", "json", "yaml"); false on
/// another name.
bool parse_output_format(const std::string& name, output_format& out);

/// A table printed with each column as wide as its widest cell, two spaces
/// between columns, like kubectl's.
class table {
public:
  /// @param head The column names, upper case.
  explicit table(std::vector<std::string> head);

  /// Adds a row (missing cells are empty; extra cells are dropped).
  void add(std::vector<std::string> row);

  /// Prints the head and the rows.
  void print(std::ostream& out) const;

  /// Prints rows added since the last call, in the widths of the first
  /// print (a watch adds rows after the table was printed).
  void print_new(std::ostream& out);

  /// The widths of the columns now.
  std::vector<size_t> widths() const;

private:
  void print_row(std::ostream& out, const std::vector<std::string>& row,
                 const std::vector<size_t>& widths) const;

  std::vector<std::string> head_;
  std::vector<std::vector<std::string>> rows_;
  std::vector<size_t> printed_widths_;
  size_t printed_ = 0;
};

/// A JSON value as a YAML document (block style; strings quoted when YAML
/// would read them as something else).
std::string to_yaml(const nlohmann::json& value);

/// A message in the proto3 JSON mapping (every field, defaults included),
/// pretty-printed, or as YAML.
std::string render(const google::protobuf::Message& msg, output_format format);

/// The known name closest to `word` (an edit distance of at most 2, or a
/// name it is a prefix of); empty when none is close.
std::string closest(const std::string& word,
                    const std::vector<std::string>& names);

} // namespace recoverctl
