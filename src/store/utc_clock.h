// The store's UTC clock (audit entries, key-store rows): one definition, in store.cpp.
#pragma once
#include <string>

namespace svattn::store_detail {

/// The current UTC time as "YYYY-MM-DDTHH:MM:SS.mmmZ".
std::string now_utc();

}  // namespace svattn::store_detail
