// The erasure receipt as one Markdown page, one self-contained HTML page (inline style, no script,
// no external resource) and JSON (docs/audit.md "Erasure receipt").
#include <sstream>
#include <string>

#include "svattn/store_evidence.h"

namespace svattn {
namespace {

using Rows = std::vector<std::pair<std::string, std::string>>;

// A page is a title, then sections of key/value rows, check lists, or paragraphs.
struct Section {
  std::string title;
  Rows rows;
  std::vector<ReceiptCheck> checks;
  std::vector<std::string> paragraphs;
};

// Uniqueness is informational (docs/math.md §7): not established is not a failure.
std::string outcome(const ReceiptCheck& c) {
  if (c.ok) return "passed";
  return c.name == "uniqueness" ? "not established" : "FAILED";
}

// The shortest decimal that reads back as v.
std::string number(double v) {
  for (int digits = 15;; ++digits) {
    std::ostringstream s;
    s.precision(digits);
    s << v;
    if (digits == 17 || std::stod(s.str()) == v) return s.str();
  }
}

Rows settings_rows(const nlohmann::json& s) {
  Rows rows;
  const std::string kernel = s.value("kernel", "");
  rows.emplace_back("kernel", kernel);
  if (kernel == "rbf") rows.emplace_back("bandwidth σ", number(s.value("bandwidth", 0.0)));
  if (kernel == "poly") {
    rows.emplace_back("degree", std::to_string(s.value("degree", 0)));
    rows.emplace_back("coef0", number(s.value("coef0", 0.0)));
  }
  rows.emplace_back("C", number(s.value("C", 0.0)));
  rows.emplace_back("ridge μ", number(s.value("ridge", 0.0)));
  rows.emplace_back("mode", s.value("mode", ""));
  if (s.value("mode", "") == "bounded")
    rows.emplace_back("token budget", std::to_string(s.value("token_budget", 0)));
  rows.emplace_back("key / value dimension", std::to_string(s.value("dim", 0)) + " / " +
                                                 std::to_string(s.value("value_dim", 0)));
  return rows;
}

std::vector<std::string> guarantees(const ErasureReceipt& r) {
  std::vector<std::string> p;
  const bool bounded = r.settings.value("mode", "") == "bounded";
  const double ridge = r.settings.value("ridge", 0.0);
  p.push_back(std::string("Guaranteed: the memory's state after the erasure (hash above) is, bit "
                          "for bit, the state svattn computes for the ") +
              (bounded ? "tokens it retained, without the record's"
                       : "remaining tokens alone, as if the record had never been added") +
              "; its optimality was checked by the certificate listed above and can be "
              "re-checked without svattn (svattn memory export, then python3 -m svattn_verify).");
  p.push_back(r.data_key_id.empty()
                  ? "Plaintext store: no data key existed, so none was destroyed. The record's "
                    "rows were deleted with secure_delete; copies of the file made before the "
                    "erasure (backups, snapshots) still hold the record in readable form."
                  : "The record's data key was destroyed: any copy of its ciphertext (the backups "
                    "listed above, snapshots of the store file) can no longer be decrypted by "
                    "anyone, svattn included.");
  p.push_back(
      "Not guaranteed — the whole model: this receipt covers this one memory. Anything computed "
      "from it before the erasure (query results, logs, exports, other memories, or the weights "
      "of a model trained while this memory was in use) is outside its scope and keeps whatever "
      "the record contributed to it.");
  p.push_back(bounded ? "Bounded mode: this memory evicts reserve tokens as they arrive, so the "
                        "erasure is exact relative to the tokens it had retained, not to every "
                        "token it ever saw."
                      : "Audit mode: the memory keeps every token, so the erasure is exact "
                        "relative to the full history of the remaining records.");
  p.push_back(ridge == 0 ? "Ridge 0: with duplicate keys the optimum need not be unique, and the "
                           "state is then one optimal state among several (see the uniqueness "
                           "check)."
                         : "Ridge μ > 0: the optimum is unique, so the state after the erasure "
                           "is the only optimal state for the remaining tokens.");
  p.push_back(
      "The audit chain is tamper-evident, not tamper-proof: keep the head hash printed here "
      "outside "
      "the store (in the ticket) so that a later rewrite of the history is detectable. Hashes are "
      "bit-identical on the same build and platform (docs/math.md §3).");
  return p;
}

std::vector<Section> sections(const ErasureReceipt& r) {
  std::vector<Section> s;
  s.push_back({"Erasure",
               {{"store", r.store},
                {"memory", r.memory},
                {"record", std::to_string(r.record)},
                {"erased at (UTC)", r.forget.time_utc},
                {"receipt generated (UTC)", r.generated_utc},
                {"reason / ticket", r.reason.empty() ? "(none given)" : r.reason},
                {"tokens removed from the memory", std::to_string(r.tokens_removed)},
                {"token rows erased", std::to_string(r.token_rows_erased)},
                {"encryption at rest", r.encryption}},
               {},
               {}});
  s.push_back({"Settings", settings_rows(r.settings), {}, {}});
  s.push_back({"State hashes (SHA-256, docs/math.md §6)",
               {{"before the erasure", r.forget.state_before},
                {"after the erasure", r.forget.state_after},
                {"the memory now", r.current_state_sha256}},
               {},
               {}});
  s.push_back({"Certificate checks (recorded at the erasure)",
               {{"argument", r.certificate_argument}},
               r.certificate_checks,
               {}});
  Rows key{{"data key id", r.data_key_id.empty() ? "(plaintext: none)" : r.data_key_id}};
  if (!r.data_key_id.empty()) {
    key.emplace_back("SHA-256 of the wrapped key", r.data_key_sha256);
    key.emplace_back("destroyed at (UTC)", r.key_destroyed_utc);
    key.emplace_back("key store answers", r.key_store_state);
    for (std::size_t k = 0; k < r.shreds.size(); ++k) {
      key.emplace_back("shred entry " + std::to_string(r.shreds[k].seq) +
                           (k == 0 ? " (data key)" : " (bounds-group key " + r.bounds_key_id + ")"),
                       r.shreds[k].entry_hash);
    }
  }
  s.push_back({"Key destruction", key, {}, {}});
  s.push_back({"Audit chain",
               {{"forget entry", std::to_string(r.forget.seq) + " at " + r.forget.time_utc},
                {"its entry hash", r.forget.entry_hash},
                {"its prev_hash", r.forget.prev_hash},
                {"head (anchor) entry", std::to_string(r.audit_head_seq)},
                {"head hash", r.audit_head_hash},
                {"anchor in the store", r.anchor_hash}},
               {},
               {}});
  Section b{"Backups taken before the erasure", {}, {}, {}};
  for (const ReceiptBackup& x : r.backups) {
    b.rows.emplace_back(x.path, "sha256 " + x.sha256 + ", audit head " +
                                    std::to_string(x.audit_head_seq) + " (" + x.audit_head_time +
                                    ")" + (x.taken_before_erasure ? ", before" : ", after") +
                                    " the erasure: " + x.note);
  }
  if (r.backups.empty()) b.paragraphs.push_back("No backup was named (--backup).");
  s.push_back(b);
  s.push_back({"Receipt checks", {}, r.checks, {}});
  s.push_back({"What is and is not guaranteed", {}, {}, guarantees(r)});
  return s;
}

std::string title(const ErasureReceipt& r) {
  return "Erasure receipt: record " + std::to_string(r.record) + " of memory '" + r.memory + "'";
}

std::string verdict(const ErasureReceipt& r) {
  return r.ok() ? "Verdict: all " + std::to_string(r.checks.size()) + " receipt checks passed."
                : "Verdict: REFUSED, " + r.first_failure();
}

std::string html_escape(const std::string& t) {
  std::string o;
  for (const char c : t) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      case '\'':
        o += "&#39;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

std::string md_escape(const std::string& t) {
  std::string o;
  for (const char c : t) {
    if (c == '|' || c == '\\' || c == '*' || c == '_' || c == '`' || c == '<') o += '\\';
    o += c == '\n' ? ' ' : c;
  }
  return o;
}

}  // namespace

std::string render_receipt_markdown(const ErasureReceipt& r) {
  std::string o = "# " + md_escape(title(r)) + "\n\n**" + md_escape(verdict(r)) + "**\n";
  for (const Section& s : sections(r)) {
    o += "\n## " + s.title + "\n\n";
    if (!s.rows.empty()) o += "| | |\n| --- | --- |\n";
    for (const auto& [k, v] : s.rows) o += "| " + md_escape(k) + " | " + md_escape(v) + " |\n";
    if (!s.rows.empty() && (!s.checks.empty() || !s.paragraphs.empty())) o += "\n";
    for (const ReceiptCheck& c : s.checks)
      o += "- **" + md_escape(c.name) + "**: " + outcome(c) +
           (c.detail.empty() ? "" : " — " + md_escape(c.detail)) + "\n";
    for (const std::string& p : s.paragraphs) o += md_escape(p) + "\n\n";
  }
  return o;
}

std::string render_receipt_html(const ErasureReceipt& r) {
  std::string o =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" +
      html_escape(title(r)) +
      "</title>\n<style>body{font-family:sans-serif;max-width:60em;margin:2em auto;font-size:"
      "10pt}table{border-collapse:collapse;width:100%}td{border:1px solid #999;padding:2px 6px;"
      "vertical-align:top;word-break:break-all}td:first-child{width:16em;word-break:normal}"
      ".ok{color:#060}.failed{color:#a00;font-weight:bold}h2{font-size:12pt;margin-top:1.2em}"
      "</style>\n</head>\n<body>\n<h1>" +
      html_escape(title(r)) + "</h1>\n<p id=\"verdict\" class=\"" + (r.ok() ? "ok" : "failed") +
      "\"><strong>" + html_escape(verdict(r)) + "</strong></p>\n";
  for (const Section& s : sections(r)) {
    o += "<h2>" + html_escape(s.title) + "</h2>\n";
    if (!s.rows.empty()) o += "<table>\n";
    for (const auto& [k, v] : s.rows)
      o += "<tr><td>" + html_escape(k) + "</td><td>" + html_escape(v) + "</td></tr>\n";
    if (!s.rows.empty()) o += "</table>\n";
    if (!s.checks.empty()) o += "<ul>\n";
    for (const ReceiptCheck& c : s.checks) {
      o += "<li class=\"" + std::string(c.ok ? "ok" : "failed") + "\"><strong>" +
           html_escape(c.name) + "</strong>: " + outcome(c) +
           (c.detail.empty() ? "" : " — " + html_escape(c.detail)) + "</li>\n";
    }
    if (!s.checks.empty()) o += "</ul>\n";
    for (const std::string& p : s.paragraphs) o += "<p>" + html_escape(p) + "</p>\n";
  }
  return o + "</body>\n</html>\n";
}

nlohmann::json ErasureReceipt::to_json() const {
  auto checks_json = [](const std::vector<ReceiptCheck>& cs) {
    nlohmann::json a = nlohmann::json::array();
    for (const ReceiptCheck& c : cs)
      a.push_back({{"name", c.name}, {"ok", c.ok}, {"detail", c.detail}});
    return a;
  };
  nlohmann::json backups_json = nlohmann::json::array();
  for (const ReceiptBackup& b : backups) {
    backups_json.push_back({{"path", b.path},
                            {"sha256", b.sha256},
                            {"bytes", b.bytes},
                            {"audit_head_seq", b.audit_head_seq},
                            {"taken_before_erasure", b.taken_before_erasure},
                            {"holds_record", b.holds_record},
                            {"key_id", b.key_id},
                            {"covered", b.covered},
                            {"note", b.note}});
  }
  return {{"receipt", "svattn-erasure-receipt-v1"},
          {"ok", ok()},
          {"store", store},
          {"memory", memory},
          {"record", record},
          {"reason", reason},
          {"generated_utc", generated_utc},
          {"settings", settings},
          {"forget", forget.seq > 0 ? audit_entry_to_json(forget) : nlohmann::json()},
          {"tokens_removed", tokens_removed},
          {"token_rows_erased", token_rows_erased},
          {"encryption", encryption},
          {"data_key_id", data_key_id},
          {"data_key_sha256", data_key_sha256},
          {"key_destroyed_utc", key_destroyed_utc},
          {"key_store_state", key_store_state},
          {"certificate_argument", certificate_argument},
          {"certificate_checks", checks_json(certificate_checks)},
          {"current_state_sha256", current_state_sha256},
          {"audit_head_seq", audit_head_seq},
          {"audit_head_hash", audit_head_hash},
          {"anchor_hash", anchor_hash},
          {"backups", backups_json},
          {"checks", checks_json(checks)}};
}

}  // namespace svattn
