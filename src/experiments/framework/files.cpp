// Output directories and files (framework/files.h).
#include "experiments/framework/files.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "svattn/errors.h"

namespace svattn::experiments {

namespace fs = std::filesystem;

void ensure_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    throw IoError("cannot create output directory '" + dir + "': " + ec.message());
  }
}

void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw IoError("cannot write '" + path + "'");
  out << text;
  out.close();
  if (!out) throw IoError("error while writing '" + path + "'");
}

void write_json_file(const std::string& path, const nlohmann::json& j) {
  write_text_file(path, j.dump(2) + "\n");
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot read '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace svattn::experiments
