// Markdown and JSON tables (framework/table.h).
#include "experiments/framework/table.h"

#include "svattn/errors.h"

namespace svattn::experiments {

Table::Table(std::vector<std::string> columns) : columns_(std::move(columns)) {}

void Table::add_row(std::vector<std::string> cells) {
  if (cells.size() != columns_.size()) {
    throw InvalidArgument("table row has " + std::to_string(cells.size()) + " cells but the table has " +
                          std::to_string(columns_.size()) + " columns");
  }
  rows_.push_back(std::move(cells));
}

namespace {
std::string md_cell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}
}  // namespace

std::string Table::markdown() const {
  std::ostringstream o;
  o << "|";
  for (const auto& c : columns_) o << " " << md_cell(c) << " |";
  o << "\n|";
  for (std::size_t i = 0; i < columns_.size(); ++i) o << " --- |";
  o << "\n";
  for (const auto& r : rows_) {
    o << "|";
    for (const auto& c : r) o << " " << md_cell(c) << " |";
    o << "\n";
  }
  return o.str();
}

nlohmann::json Table::json() const {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : rows_) {
    nlohmann::json row = nlohmann::json::object();
    for (std::size_t i = 0; i < columns_.size(); ++i) row[columns_[i]] = r[i];
    rows.push_back(row);
  }
  return {{"columns", columns_}, {"rows", rows}};
}

}  // namespace svattn::experiments
