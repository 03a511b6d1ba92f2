// A check of a typed result's from_json against its own JSON: every key of every nested object,
// erased or given a value of another type, is a FormatError naming the key (or, for a key of a
// map, the map's key). docs/experiments.md "Code layout" (the field tables).
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "svattn/errors.h"

namespace svattn::test {

/// `read(broken)` for every broken copy of `result`: keys under an `opaque` key (a type nlohmann
/// converts, such as settings) are not visited, `any` keys (free JSON such as `machine`) are
/// neither visited nor mistyped, `optional` keys may be erased. A message names the key when it
/// holds `key` in backquotes or the name of an enclosing key.
inline void expect_every_key_checked(const nlohmann::json& result,
                                     const std::function<void(const nlohmann::json&)>& read,
                                     const std::set<std::string>& opaque,
                                     const std::set<std::string>& any,
                                     const std::set<std::string>& optional = {}) {
  int checked = 0;
  const auto error_of = [&](const nlohmann::json& broken) -> std::string {
    try {
      read(broken);
    } catch (const svattn::FormatError& e) {
      return e.what();
    }
    return "(accepted)";
  };
  using Path = std::vector<std::string>;
  std::function<void(const nlohmann::json::json_pointer&, const Path&)> walk =
      [&](const nlohmann::json::json_pointer& at, const Path& enclosing) {
        const nlohmann::json& node = result.at(at);
        if (node.is_array()) {
          // the first element of an array stands for the others (one table reads them all)
          if (!node.empty() && node[0].is_structured()) walk(at / 0, enclosing);
          return;
        }
        if (!node.is_object()) return;
        for (const auto& [key, value] : node.items()) {
          const auto named = [&, k = key](const std::string& msg) {
            if (msg.find("`" + k + "`") != std::string::npos) return true;
            for (const auto& e : enclosing)
              if (msg.find(e) != std::string::npos) return true;
            return false;
          };
          nlohmann::json broken = result;
          if (!optional.count(key)) {
            broken.at(at).erase(key);
            const std::string msg = error_of(broken);
            EXPECT_TRUE(named(msg)) << (at / key).to_string() << " erased: " << msg;
            ++checked;
          }
          if (any.count(key)) continue;
          broken = result;
          broken.at(at / key) = value.is_string() ? nlohmann::json(12345) : nlohmann::json("wrong");
          const std::string msg = error_of(broken);
          EXPECT_TRUE(named(msg)) << (at / key).to_string() << " mistyped: " << msg;
          Path inner = enclosing;
          inner.push_back(key);
          if (!opaque.count(key)) walk(at / key, inner);
        }
      };
  walk(nlohmann::json::json_pointer(), {});
  EXPECT_GT(checked, 0);
}

}  // namespace svattn::test
