// Audit entries: canonical byte layout of the hash chain (docs/store.md "Audit entry hash") and
// JSON helpers for settings, diagnostics and verification reports.
#include <cmath>
#include <string>

#include "svattn/hash.h"
#include "svattn/kernel.h"
#include "svattn/settings_fields.h"
#include "svattn/store.h"

namespace svattn {
namespace {

void append_field(std::vector<std::uint8_t>& out, const char* name, const std::string& value) {
  // name=<decimal byte length>:<bytes>\n  -- length-prefixed, so no field value can forge another.
  const std::string head = std::string(name) + "=" + std::to_string(value.size()) + ":";
  out.insert(out.end(), head.begin(), head.end());
  out.insert(out.end(), value.begin(), value.end());
  out.push_back('\n');
}

}  // namespace

std::vector<std::uint8_t> canonical_audit_bytes(const AuditEntry& e) {
  std::vector<std::uint8_t> out;
  const std::string magic = "svattn-audit-v1\n";
  out.insert(out.end(), magic.begin(), magic.end());
  append_field(out, "seq", std::to_string(e.seq));
  append_field(out, "time_utc", e.time_utc);
  append_field(out, "operation", e.operation);
  append_field(out, "memory", e.memory);
  append_field(out, "record", std::to_string(e.record));
  append_field(out, "token_count", std::to_string(e.token_count));
  append_field(out, "state_before", e.state_before);
  append_field(out, "state_after", e.state_after);
  append_field(out, "certificate", e.certificate);
  append_field(out, "prev_hash", e.prev_hash);
  return out;
}

nlohmann::json audit_entry_to_json(const AuditEntry& e) {
  nlohmann::json j;
  j["seq"] = e.seq;
  j["time_utc"] = e.time_utc;
  j["operation"] = e.operation;
  j["memory"] = e.memory;
  j["record"] = e.record >= 0 ? nlohmann::json(e.record) : nlohmann::json(nullptr);
  j["token_count"] = e.token_count;
  j["state_before"] = e.state_before;
  j["state_after"] = e.state_after;
  nlohmann::json cert = nlohmann::json::parse(e.certificate, nullptr, false);
  j["certificate"] = cert.is_discarded() ? nlohmann::json(e.certificate) : cert;
  j["prev_hash"] = e.prev_hash;
  j["entry_hash"] = e.entry_hash;
  return j;
}

// The stored settings JSON (part of the audited entries, so its keys never change): one key per
// row of the core's field table (include/svattn/settings_fields.h), named by the row's last
// component ("problem.kernel.bandwidth" -> "bandwidth"), except the kernel type, stored as "kernel".
namespace {
std::string stored_key(const std::string& field) {
  if (field == "problem.kernel.type") return "kernel";
  const auto dot = field.rfind('.');
  return dot == std::string::npos ? field : field.substr(dot + 1);
}
}  // namespace

nlohmann::json memory_settings_to_json(const MemorySettings& s) {
  nlohmann::json j = nlohmann::json::object();
  for (const Field<MemorySettings>& f : memory_settings_fields()) j[stored_key(f.name)] = to_json(f.get(s));
  return j;
}

MemorySettings memory_settings_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw FormatError("stored memory settings: not a JSON object");
  MemorySettings s;
  try {
    for (const Field<MemorySettings>& f : memory_settings_fields()) {
      const std::string key = stored_key(f.name);
      if (!j.contains(key)) throw FormatError("missing field '" + key + "'");
      f.set(s, value_from_json(f, j.at(key)));
    }
    s.validate();
  } catch (const Error& e) {
    throw FormatError(std::string("stored memory settings: ") + e.what());
  }
  return s;
}

nlohmann::json verification_to_json(const StoreVerification& v) {
  nlohmann::json j;
  j["ok"] = v.ok();
  j["integrity_ok"] = v.integrity_ok;
  j["integrity_checked"] = v.integrity_checked;
  j["chain_ok"] = v.chain_ok;
  j["audit_entries"] = v.audit_entries;
  j["audit_head"] = v.audit_head;
  nlohmann::json mems = nlohmann::json::array();
  for (const MemoryVerification& m : v.memories) {
    nlohmann::json mj;
    mj["memory"] = m.name;
    mj["ok"] = m.ok();
    mj["tokens"] = m.tokens;
    mj["stored_sha256"] = m.stored_sha256;
    mj["resolved_sha256"] = m.resolved_sha256;
    mj["resolve_equal"] = m.resolve_equal;
    mj["audit_consistent"] = m.audit_consistent;
    mj["fields_ok"] = m.fields_ok;
    mj["uniqueness_not_established"] = m.uniqueness_not_established;
    mj["shredded_records"] = m.shredded_records;
    mj["feasible"] = m.report.feasible;
    mj["kkt_ok"] = m.report.kkt_ok;
    mj["hash_ok"] = m.report.hash_ok;
    mj["unique"] = m.report.unique;
    mj["uniqueness_reason"] = m.report.uniqueness_reason;
    if (!m.report.error.empty()) mj["error"] = m.report.error;
    mj["kkt_max_violation"] = m.report.kkt.max_violation;
    mj["sum_error"] = m.report.kkt.sum_error;
    mj["box_violation"] = m.report.kkt.box_violation;
    mems.push_back(mj);
  }
  j["memories"] = mems;
  j["problems"] = v.problems;
  j["notes"] = v.notes;
  return j;
}

TokenId store_token_id(std::int64_t record, std::int64_t position) {
  if (record < 0 || record > kMaxRecordId) {
    throw InvalidArgument("record id " + std::to_string(record) + " out of range [0, 2^40)");
  }
  if (position < 0 || position > kMaxPosition) {
    throw InvalidArgument("token position " + std::to_string(position) + " out of range [0, 2^23)");
  }
  return (record << kPositionBits) | position;
}

}  // namespace svattn
