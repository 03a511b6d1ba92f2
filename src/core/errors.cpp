#include "svattn/errors.h"

#include <sstream>

namespace svattn {

void invariant_failed(const char* expr, const char* file, int line, const std::string& msg) {
  std::ostringstream os;
  os << "internal invariant violated: " << expr << " at " << file << ":" << line;
  if (!msg.empty()) os << ": " << msg;
  throw std::logic_error(os.str());
}

}  // namespace svattn
