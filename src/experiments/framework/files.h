// Output directories and files of the report (text and JSON), and reading a file whole.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace svattn::experiments {

/// Creates the directory (and parents); throws IoError naming it.
void ensure_dir(const std::string& dir);
/// Writes text / JSON (2-space indent); throws IoError naming the file.
void write_text_file(const std::string& path, const std::string& text);
void write_json_file(const std::string& path, const nlohmann::json& j);
/// Reads a whole file; throws IoError naming it.
std::string read_text_file(const std::string& path);

}  // namespace svattn::experiments
