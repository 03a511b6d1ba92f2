// The row statements both backends run, rewritten for PostgreSQL (db/dialect.h; docs/store.md
// "Backends"): a small tokenizer (words, literals, parameters) and two rewrites on its tokens,
// parameters (?N -> $N) and conflict clauses (INSERT OR IGNORE/REPLACE -> ON CONFLICT); and the
// array literals of the batched statements.
#include "dialect.h"

#include <cctype>
#include <cmath>
#include <cstdio>

#include "svattn/errors.h"
#include "svattn/store_errors.h"

namespace svattn::store_detail {

namespace {

struct Tok {
  enum Kind { kWord, kString, kQuoted, kParam, kSpace, kOther } kind;
  std::string text;
};

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

bool is_word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Copies a quoted run starting at s[i] (quote q, doubled q escapes it) into `out`.
std::size_t quoted_end(const std::string& s, std::size_t i, char q) {
  std::size_t j = i + 1;
  while (j < s.size()) {
    if (s[j] == q) {
      if (j + 1 < s.size() && s[j + 1] == q) {
        j += 2;
        continue;
      }
      return j + 1;
    }
    ++j;
  }
  throw StoreError("unterminated literal in SQL: " + s);
}

std::vector<Tok> tokenize(const std::string& s) {
  std::vector<Tok> out;
  std::size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    std::size_t j = i + 1;
    Tok::Kind k = Tok::kOther;
    if (c == '\'' || c == '"') {
      j = quoted_end(s, i, c);
      k = c == '\'' ? Tok::kString : Tok::kQuoted;
    } else if (c == '-' && i + 1 < s.size() && s[i + 1] == '-') {
      j = s.find('\n', i);
      j = j == std::string::npos ? s.size() : j;
      k = Tok::kSpace;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      while (j < s.size() && std::isspace(static_cast<unsigned char>(s[j]))) ++j;
      k = Tok::kSpace;
    } else if (c == '?') {
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      k = Tok::kParam;
    } else if (is_word_char(c)) {
      while (j < s.size() && is_word_char(s[j])) ++j;
      k = Tok::kWord;
    }
    out.push_back({k, s.substr(i, j - i)});
    i = j;
  }
  return out;
}

// The words of a statement (upper case), for recognising its kind.
std::vector<std::string> words_of(const std::vector<Tok>& t) {
  std::vector<std::string> w;
  for (const Tok& x : t)
    if (x.kind == Tok::kWord) w.push_back(upper(x.text));
  return w;
}

std::vector<std::vector<Tok>> split_statements(const std::vector<Tok>& toks) {
  std::vector<std::vector<Tok>> out(1);
  for (const Tok& t : toks) {
    if (t.kind == Tok::kOther && t.text == ";") {
      out.emplace_back();
      continue;
    }
    out.back().push_back(t);
  }
  return out;
}

std::string join(const std::vector<Tok>& t) {
  std::string s;
  for (const Tok& x : t) s += x.text;
  const std::size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\r\n") - a + 1);
}

class Rewriter {
 public:
  Rewriter(const std::vector<Tok>& t, const PrimaryKeyLookup& pk) : t_(t), pk_(pk) {}
  std::string run();

 private:
  // Index of the next non-space token after i (t_.size() when none).
  std::size_t next(std::size_t i) const {
    for (++i; i < t_.size() && t_[i].kind == Tok::kSpace; ++i) {
    }
    return i;
  }
  bool word_at(std::size_t i, const char* w) const {
    return i < t_.size() && t_[i].kind == Tok::kWord && upper(t_[i].text) == w;
  }
  std::string conflict_clause() const;
  const std::vector<Tok>& t_;
  const PrimaryKeyLookup& pk_;
  std::string conflict_;  // "", "IGNORE" or "REPLACE"
  std::string table_;
  std::vector<std::string> columns_;
};

std::string Rewriter::run() {
  std::string out;
  int anon = 0;
  for (std::size_t i = 0; i < t_.size(); ++i) {
    const Tok& x = t_[i];
    if (x.kind == Tok::kParam) {
      out += "$" + (x.text.size() > 1 ? x.text.substr(1) : std::to_string(++anon));
      continue;
    }
    if (x.kind != Tok::kWord) {
      out += x.text;
      continue;
    }
    const std::string w = upper(x.text);
    const std::size_t n1 = next(i);
    if (w == "INSERT" && word_at(n1, "OR")) {
      const std::size_t n2 = next(n1);
      if (!word_at(n2, "IGNORE") && !word_at(n2, "REPLACE"))
        throw StoreError("no PostgreSQL translation of INSERT OR " + t_[n2].text);
      conflict_ = upper(t_[n2].text);
      const std::size_t into = next(n2);
      const std::size_t table = next(into);
      if (!word_at(into, "INTO") || table >= t_.size())
        throw StoreError("INSERT OR " + conflict_ + " without INTO");
      table_ = t_[table].text;
      for (std::size_t j = next(table); j < t_.size() && t_[j].text != ")"; ++j)
        if (t_[j].kind == Tok::kWord) columns_.push_back(t_[j].text);
      out += "INSERT";
      i = n2;
    } else if (w == "SQLITE_MASTER" || w == "SQLITE_SCHEMA" || w == "PRAGMA_TABLE_INFO") {
      throw StoreError(
          "the catalog is read through Database's methods (has_table, has_column, "
          "...), each backend in its own dialect, not through the rewrite: " +
          x.text);
    } else {
      out += x.text;
    }
  }
  return out + conflict_clause();
}

std::string Rewriter::conflict_clause() const {
  if (conflict_.empty()) return "";
  if (conflict_ == "IGNORE") return " ON CONFLICT DO NOTHING";
  const std::vector<std::string> key = pk_ ? pk_(table_) : std::vector<std::string>{};
  if (key.empty())
    throw StoreError("INSERT OR REPLACE INTO " + table_ + ": the table has no primary key");
  std::string k, set;
  for (const std::string& c : key) k += (k.empty() ? "" : ", ") + c;
  for (const std::string& c : columns_) {
    bool in_key = false;
    for (const std::string& kc : key) in_key = in_key || upper(kc) == upper(c);
    if (!in_key) set += (set.empty() ? "" : ", ") + c + " = excluded." + c;
  }
  return " ON CONFLICT (" + k + ")" + (set.empty() ? " DO NOTHING" : " DO UPDATE SET " + set);
}

}  // namespace

std::vector<std::string> sqlite_to_postgres(const std::string& sql, const PrimaryKeyLookup& pk) {
  std::vector<std::string> out;
  for (const std::vector<Tok>& st : split_statements(tokenize(sql))) {
    const std::string text = join(st);
    if (text.empty()) continue;
    const std::vector<std::string> w = words_of(st);
    if (!w.empty() && w[0] == "PRAGMA") {
      throw StoreError(
          "a PRAGMA is a Database method (user_version, enable_wal, ...) each backend implements "
          "in its own dialect, not rewritten: " +
          text);
    } else if (!w.empty() && (w[0] == "CREATE" || w[0] == "ALTER")) {
      throw StoreError(
          "a table definition goes to Database::exec_ddl in the backend's own "
          "dialect (schema_ddl.h), not through the rewrite: " +
          text);
    } else {
      out.push_back(join(tokenize(Rewriter(st, pk).run())));
    }
  }
  return out;
}

std::string pg_array(const std::vector<std::int64_t>& v) {
  std::string out = "{";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(v[i]);
  }
  return out + '}';
}

std::string pg_array(const std::vector<double>& v) {
  std::string out = "{";
  char buf[40];
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!std::isfinite(v[i]))
      throw InvalidArgument("pg_array: element " + std::to_string(i) + " is not finite");
    std::snprintf(buf, sizeof buf, "%.17g", v[i]);
    if (i > 0) out += ',';
    out += buf;
  }
  return out + '}';
}

// Each element double-quoted, with '"' and '\\' backslash-escaped (the array literal's quoting).
std::string pg_array(const std::vector<std::string>& v) {
  std::string out = "{";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i > 0) out += ',';
    out += '"';
    for (char c : v[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + '}';
}

}  // namespace svattn::store_detail
