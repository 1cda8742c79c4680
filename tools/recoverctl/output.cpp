#include "tools/recoverctl/output.hpp"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "services/inspect_convert.hpp"

namespace recoverctl {

bool parse_output_format(const std::string& name, output_format& out) {
  static const std::pair<const char*, output_format> names[] = {
    {"table", output_format::table},
    {"wide", output_format::wide},
    {"json", output_format::json},
    {"yaml", output_format::yaml},
  };
  for (const auto& [text, format] : names)
    if (name == text) {
      out = format;
      return true;
    }
  return false;
}

table::table(std::vector<std::string> head) : head_(std::move(head)) {
}

void table::add(std::vector<std::string> row) {
  row.resize(head_.size());
  rows_.push_back(std::move(row));
}

std::vector<size_t> table::widths() const {
  std::vector<size_t> result;
  for (const auto& name : head_)
    result.push_back(name.size());
  for (const auto& row : rows_)
    for (size_t i = 0; i < row.size(); ++i)
      result[i] = std::max(result[i], row[i].size());
  return result;
}

void table::print_row(std::ostream& out, const std::vector<std::string>& row,
                      const std::vector<size_t>& widths) const {
  std::string line;
  for (size_t i = 0; i < row.size(); ++i) {
    line += row[i];
    if (i + 1 < row.size())
      line.append(widths[i] - std::min(widths[i], row[i].size()) + 2, ' ');
  }
  // The last column is not padded: no trailing blanks.
  out << line << "\n";
}

void table::print(std::ostream& out) const {
  auto w = widths();
  print_row(out, head_, w);
  for (const auto& row : rows_)
    print_row(out, row, w);
}

void table::print_new(std::ostream& out) {
  if (printed_widths_.empty()) {
    printed_widths_ = widths();
    print_row(out, head_, printed_widths_);
  }
  for (; printed_ < rows_.size(); ++printed_)
    print_row(out, rows_[printed_], printed_widths_);
}

namespace {

// True when `s` must be quoted to stay a string in YAML: empty, looks like
// another scalar (number, bool, null), or holds characters YAML reads as
// syntax.
bool needs_quotes(const std::string& s) {
  if (s.empty())
    return true;
  static const char* words[] = {"true",  "false", "yes", "no", "on",
                                "off",   "null",  "~",   "y",  "n"};
  std::string lower;
  for (auto c : s)
    lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  for (const auto* w : words)
    if (lower == w)
      return true;
  if (std::isdigit(static_cast<unsigned char>(s[0])) || s[0] == '-'
      || s[0] == '+' || s[0] == '.')
    return true;
  if (std::isspace(static_cast<unsigned char>(s.front()))
      || std::isspace(static_cast<unsigned char>(s.back())))
    return true;
  for (auto c : s)
    if (std::string_view{":#{}[],&*!|>'\"%@`\n\r\t\\"}.find(c)
          != std::string_view::npos
        || static_cast<unsigned char>(c) < 0x20)
      return true;
  return false;
}

// A JSON string literal is also a valid YAML double-quoted scalar.
std::string scalar(const nlohmann::json& v) {
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    return needs_quotes(s) ? v.dump() : s;
  }
  return v.dump();
}

bool is_empty_container(const nlohmann::json& v) {
  return (v.is_object() || v.is_array()) && v.empty();
}

void emit(std::ostream& out, const nlohmann::json& v, int indent);

// A value after "key:" or "- ": inline when a scalar or an empty container,
// else on the following lines.
void emit_value(std::ostream& out, const nlohmann::json& v, int indent) {
  if (v.is_object() && !v.empty()) {
    out << "\n";
    emit(out, v, indent);
  } else if (v.is_array() && !v.empty()) {
    out << "\n";
    emit(out, v, indent);
  } else if (is_empty_container(v)) {
    out << " " << (v.is_object() ? "{}" : "[]") << "\n";
  } else {
    out << " " << scalar(v) << "\n";
  }
}

void emit(std::ostream& out, const nlohmann::json& v, int indent) {
  std::string pad(static_cast<size_t>(indent), ' ');
  if (v.is_object()) {
    for (const auto& [key, value] : v.items()) {
      out << pad << scalar(nlohmann::json(key)) << ":";
      emit_value(out, value, indent + 2);
    }
  } else if (v.is_array()) {
    for (const auto& item : v) {
      if (item.is_object() && !item.empty()) {
        // "- " then the object's first key on the same line, the rest
        // below it, as people write YAML.
        std::ostringstream inner;
        emit(inner, item, indent + 2);
        out << pad << "- " << inner.str().substr(pad.size() + 2);
        continue;
      }
      out << pad << "-";
      emit_value(out, item, indent + 2);
    }
  } else {
    out << pad << scalar(v) << "\n";
  }
}

} // namespace

std::string to_yaml(const nlohmann::json& value) {
  std::ostringstream out;
  if (is_empty_container(value) || !(value.is_object() || value.is_array()))
    out << (is_empty_container(value) ? (value.is_object() ? "{}" : "[]")
                                      : scalar(value))
        << "\n";
  else
    emit(out, value, 0);
  return out.str();
}

std::string render(const google::protobuf::Message& msg, output_format format) {
  auto text = recoverd::convert::to_json(msg, true);
  if (format == output_format::yaml)
    return to_yaml(nlohmann::json::parse(text, nullptr, false));
  return text;
}

namespace {

// Edits (insert, delete, substitute, swap two neighbours) from a to b.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1,
                                     std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i)
    d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j)
    d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i)
    for (size_t j = 1; j <= b.size(); ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1,
                          d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[a.size()][b.size()];
}

} // namespace

std::string closest(const std::string& word,
                    const std::vector<std::string>& names) {
  std::string best;
  size_t best_distance = 3;
  for (const auto& name : names) {
    auto d = edit_distance(word, name);
    if (!word.empty() && name.rfind(word, 0) == 0)
      d = std::min<size_t>(d, 1);
    if (d < best_distance) {
      best = name;
      best_distance = d;
    }
  }
  return best;
}

} // namespace recoverctl
