// Audit entries: canonical byte layout of the hash chain (docs/store.md "Audit entry hash") and
// JSON helpers for settings, diagnostics and verification reports.
#include <cmath>
#include <string>

#include "svattn/hash.h"
#include "svattn/kernel.h"
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

double get_double(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || !j.at(key).is_number()) {
    throw FormatError(std::string("stored memory settings: missing or non-numeric field '") + key +
                      "'");
  }
  return j.at(key).get<double>();
}

long long get_int(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || !j.at(key).is_number_integer()) {
    throw FormatError(std::string("stored memory settings: missing or non-integer field '") + key +
                      "'");
  }
  return j.at(key).get<long long>();
}

std::string get_string(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || !j.at(key).is_string()) {
    throw FormatError(std::string("stored memory settings: missing or non-string field '") + key +
                      "'");
  }
  return j.at(key).get<std::string>();
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

nlohmann::json memory_settings_to_json(const MemorySettings& s) {
  nlohmann::json j;
  j["kernel"] = to_string(s.problem.kernel.type);
  j["bandwidth"] = s.problem.kernel.bandwidth;
  j["degree"] = s.problem.kernel.degree;
  j["coef0"] = s.problem.kernel.coef0;
  j["C"] = s.problem.C;
  j["ridge"] = s.problem.ridge;
  j["mode"] = to_string(s.mode);
  j["token_budget"] = s.token_budget;
  j["alpha_tol"] = s.tolerances.alpha_tol;
  j["kkt_tol"] = s.tolerances.kkt_tol;
  j["max_refine_iterations"] = s.tolerances.max_refine_iterations;
  j["refactor_period"] = s.refactor_period;
  j["max_steps_per_op"] = s.max_steps_per_op;
  j["schur_tol"] = s.schur_tol;
  return j;
}

MemorySettings memory_settings_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw FormatError("stored memory settings: not a JSON object");
  MemorySettings s;
  try {
    s.problem.kernel.type = kernel_type_from_string(get_string(j, "kernel"));
    s.mode = memory_mode_from_string(get_string(j, "mode"));
  } catch (const InvalidArgument& e) {
    throw FormatError(std::string("stored memory settings: ") + e.what());
  }
  s.problem.kernel.bandwidth = get_double(j, "bandwidth");
  s.problem.kernel.degree = static_cast<int>(get_int(j, "degree"));
  s.problem.kernel.coef0 = get_double(j, "coef0");
  s.problem.C = get_double(j, "C");
  s.problem.ridge = get_double(j, "ridge");
  const long long budget = get_int(j, "token_budget");
  if (budget < 0) throw FormatError("stored memory settings: negative token_budget");
  s.token_budget = static_cast<std::size_t>(budget);
  s.tolerances.alpha_tol = get_double(j, "alpha_tol");
  s.tolerances.kkt_tol = get_double(j, "kkt_tol");
  s.tolerances.max_refine_iterations = static_cast<int>(get_int(j, "max_refine_iterations"));
  s.refactor_period = static_cast<int>(get_int(j, "refactor_period"));
  s.max_steps_per_op = static_cast<int>(get_int(j, "max_steps_per_op"));
  s.schur_tol = get_double(j, "schur_tol");
  try {
    s.validate();
  } catch (const InvalidArgument& e) {
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
