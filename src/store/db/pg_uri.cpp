// postgresql:// store locations (db/pg_uri.h): recognising them, splitting off keys=, and the
// form shown in messages (password masked). Built with or without libpq, so that such a URI is a
// clear error in a build without it.
#include "pg_uri.h"

#include <cctype>

#include "svattn/errors.h"

namespace svattn::store_detail {

bool is_postgres_uri(const std::string& location) {
  return location.rfind("postgresql://", 0) == 0 || location.rfind("postgres://", 0) == 0;
}

namespace {

std::string percent_decode(const std::string& s, const std::string& uri) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size() + 0 || !std::isxdigit(static_cast<unsigned char>(s[i + 1])) ||
        !std::isxdigit(static_cast<unsigned char>(s[i + 2])))
      throw InvalidArgument("store URI '" + uri + "': bad percent escape in '" + s + "'");
    out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
    i += 2;
  }
  return out;
}

}  // namespace

PgLocation parse_postgres_uri(const std::string& uri) {
  PgLocation loc;
  const std::size_t q = uri.find('?');
  std::string base = uri.substr(0, q);
  std::string kept;
  std::string shown;
  if (q != std::string::npos) {
    std::size_t at = q + 1;
    while (at <= uri.size()) {
      std::size_t amp = uri.find('&', at);
      if (amp == std::string::npos) amp = uri.size();
      const std::string param = uri.substr(at, amp - at);
      at = amp + 1;
      if (param.empty()) continue;
      if (param.rfind("keys=", 0) == 0) {
        loc.keys = percent_decode(param.substr(5), uri);
        if (loc.keys.empty()) throw InvalidArgument("store URI '" + uri + "': empty keys=");
        // A key database's URI (keys=postgresql://...) is shown without its password.
        shown +=
            (shown.empty() ? "?" : "&") +
            (is_postgres_uri(loc.keys) ? "keys=" + parse_postgres_uri(loc.keys).display : param);
        continue;
      }
      kept += (kept.empty() ? "?" : "&") + param;
      shown += (shown.empty() ? "?" : "&") +
               (param.rfind("password=", 0) == 0 ? std::string("password=***") : param);
    }
  }
  loc.conninfo = base + kept;
  // scheme://user:password@host...: the password is not shown.
  const std::size_t scheme = base.find("://") + 3;
  const std::size_t atsign = base.find('@', scheme);
  const std::size_t colon = base.find(':', scheme);
  if (atsign != std::string::npos && colon != std::string::npos && colon < atsign)
    base = base.substr(0, colon + 1) + "***" + base.substr(atsign);
  loc.display = base + shown;
  return loc;
}

}  // namespace svattn::store_detail
