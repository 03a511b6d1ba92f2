// A table of string cells rendered as GitHub Markdown and as JSON (the report's tables).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace svattn::experiments {

/// A table with string cells, rendered as GitHub Markdown and as JSON (array of row objects keyed
/// by column name).
class Table {
 public:
  explicit Table(std::vector<std::string> columns);
  /// Throws InvalidArgument when the row's width differs from the column count.
  void add_row(std::vector<std::string> cells);
  std::string markdown() const;
  nlohmann::json json() const;
  std::size_t rows() const { return rows_.size(); }
  const std::vector<std::string>& columns() const { return columns_; }

 private:
  std::vector<std::string> columns_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace svattn::experiments
