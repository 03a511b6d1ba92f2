// RemovalCertificate <-> JSON: the one place that knows the certificate's field names
// (docs/api.md "Certificates"). Every field round-trips; doubles exactly.
#include <cmath>
#include <limits>

#include "svattn/certificate.h"
#include "svattn/errors.h"
#include "svattn/io.h"

namespace svattn {
namespace {

using nlohmann::json;

const json& member(const json& j, const char* key, const std::string& where) {
  if (!j.is_object()) throw FormatError("certificate: '" + where + "' is not a JSON object");
  const auto it = j.find(key);
  if (it == j.end()) throw FormatError("certificate: missing field '" + where + "." + key + "'");
  return *it;
}

double get_double(const json& j, const char* key, const std::string& where) {
  const json& v = member(j, key, where);
  // nlohmann writes a non-finite double as null; the only one a certificate holds is an infinite
  // max_abs_dalpha (the re-solve's ids differ).
  if (v.is_null()) return std::numeric_limits<double>::infinity();
  if (!v.is_number()) throw FormatError("certificate: '" + where + "." + key + "' is not a number");
  return v.get<double>();
}

std::int64_t get_int(const json& j, const char* key, const std::string& where) {
  const json& v = member(j, key, where);
  if (!v.is_number_integer()) {
    throw FormatError("certificate: '" + where + "." + key + "' is not an integer");
  }
  if (v.is_number_unsigned() &&
      v.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    throw FormatError("certificate: '" + where + "." + key + "' is out of the int64 range, got " +
                      v.dump());
  return v.get<std::int64_t>();
}

/// A count or size: an integer >= 0 (a negative one would wrap in an unsigned field).
std::int64_t get_count(const json& j, const char* key, const std::string& where) {
  const std::int64_t v = get_int(j, key, where);
  if (v < 0) {
    throw FormatError("certificate: '" + where + "." + key + "' must be >= 0, got " +
                      std::to_string(v));
  }
  return v;
}

bool get_bool(const json& j, const char* key, const std::string& where) {
  const json& v = member(j, key, where);
  if (!v.is_boolean())
    throw FormatError("certificate: '" + where + "." + key + "' is not a boolean");
  return v.get<bool>();
}

std::string get_string(const json& j, const char* key, const std::string& where) {
  const json& v = member(j, key, where);
  if (!v.is_string()) throw FormatError("certificate: '" + where + "." + key + "' is not a string");
  return v.get<std::string>();
}

json summary_to_json(const StateSummary& s, bool after) {
  json j{{"n", s.n},
         {"margin", s.margin},
         {"error", s.error},
         {"reserve", s.reserve},
         {"state_sha256", s.state_sha256}};
  if (after) {
    j["status"] = to_string(s.status);
    j["kkt"] = {{"max_violation", s.kkt.max_violation},
                {"sum_error", s.kkt.sum_error},
                {"box_violation", s.kkt.box_violation}};
  }
  return j;
}

StateSummary summary_from_json(const json& j, bool after, const std::string& where) {
  StateSummary s;
  s.n = static_cast<std::size_t>(get_count(j, "n", where));
  s.margin = static_cast<std::size_t>(get_count(j, "margin", where));
  s.error = static_cast<std::size_t>(get_count(j, "error", where));
  s.reserve = static_cast<std::size_t>(get_count(j, "reserve", where));
  s.state_sha256 = get_string(j, "state_sha256", where);
  if (after) {
    s.status = status_from_string(get_string(j, "status", where));
    const json& k = member(j, "kkt", where);
    s.kkt.max_violation = get_double(k, "max_violation", where + ".kkt");
    s.kkt.sum_error = get_double(k, "sum_error", where + ".kkt");
    s.kkt.box_violation = get_double(k, "box_violation", where + ".kkt");
  }
  return s;
}

json solver_to_json(const OpDiagnostics& d) {
  return {{"events", d.events},
          {"zero_steps", d.zero_steps},
          {"refused_entrants", d.refused_entrants},
          {"refactorizations", d.refactorizations},
          {"canonical_solves", d.canonical_solves},
          {"repairs", d.repairs},
          {"batch_fallbacks", d.batch_fallbacks},
          {"boundary_solves", d.boundary_solves},
          {"tracked", d.tracked},
          {"kernel_evaluations", d.kernel_evaluations},
          {"status", to_string(d.status)},
          {"seconds", d.seconds},
          {"canonical_seconds", d.canonical_seconds}};
}

OpDiagnostics solver_from_json(const json& j) {
  const std::string w = "solver";
  OpDiagnostics d;
  d.events = get_count(j, "events", w);
  d.zero_steps = get_count(j, "zero_steps", w);
  d.refused_entrants = get_count(j, "refused_entrants", w);
  d.refactorizations = get_count(j, "refactorizations", w);
  d.canonical_solves = get_count(j, "canonical_solves", w);
  d.repairs = get_count(j, "repairs", w);
  d.batch_fallbacks = get_count(j, "batch_fallbacks", w);
  d.boundary_solves = get_count(j, "boundary_solves", w);
  d.tracked = get_count(j, "tracked", w);
  d.kernel_evaluations = get_count(j, "kernel_evaluations", w);
  d.status = status_from_string(get_string(j, "status", w));
  d.seconds = get_double(j, "seconds", w);
  d.canonical_seconds = get_double(j, "canonical_seconds", w);
  return d;
}

ProblemSettings problem_from_json(const json& j) {
  const std::string w = "settings";
  ProblemSettings p;
  try {
    p.kernel.type = kernel_type_from_string(get_string(j, "kernel", w));
  } catch (const InvalidArgument& e) {
    throw FormatError(std::string("certificate: settings.kernel: ") + e.what());
  }
  p.kernel.bandwidth = get_double(j, "bandwidth", w);
  p.kernel.degree = static_cast<int>(get_int(j, "degree", w));
  p.kernel.coef0 = get_double(j, "coef0", w);
  p.C = get_double(j, "C", w);
  p.ridge = get_double(j, "ridge", w);
  return p;
}

json verify_to_json(const OptimalityCheck& v) {
  if (!v.performed) return {{"performed", false}, {"argument", "none"}, {"note", v.note}};
  json j{{"performed", true},   {"argument", to_string(v.argument)},
         {"checks", v.checks},  {"feasible", v.feasible},
         {"kkt_ok", v.kkt_ok},  {"max_kkt_violation", v.max_kkt_violation},
         {"unique", v.unique},  {"uniqueness_reason", v.uniqueness_reason},
         {"hash_ok", v.hash_ok}};
  if (v.argument == CertificateArgument::kReference) {
    j["reference_sha256"] = v.reference_sha256;
    j["from_stored_rows"] = v.from_stored_rows;
  }
  return j;
}

OptimalityCheck verify_from_json(const json& j) {
  const std::string w = "verify";
  OptimalityCheck v;
  v.performed = get_bool(j, "performed", w);
  v.argument = certificate_argument_from_string(get_string(j, "argument", w));
  if (!v.performed) {
    v.note = get_string(j, "note", w);
    return v;
  }
  for (const json& c : member(j, "checks", w)) {
    if (!c.is_string()) throw FormatError("certificate: 'verify.checks' holds a non-string");
    v.checks.push_back(c.get<std::string>());
  }
  v.feasible = get_bool(j, "feasible", w);
  v.kkt_ok = get_bool(j, "kkt_ok", w);
  v.max_kkt_violation = get_double(j, "max_kkt_violation", w);
  v.unique = get_bool(j, "unique", w);
  v.uniqueness_reason = get_string(j, "uniqueness_reason", w);
  v.hash_ok = get_bool(j, "hash_ok", w);
  if (v.argument == CertificateArgument::kReference) {
    v.reference_sha256 = get_string(j, "reference_sha256", w);
    v.from_stored_rows = j.contains("from_stored_rows") && get_bool(j, "from_stored_rows", w);
  }
  return v;
}

json check_to_json(const ResolveCheck& c) {
  if (!c.performed) return {{"performed", false}};
  return {{"performed", true},
          {"retrained_sha256", c.retrained_sha256},
          {"hash_equal", c.hash_equal},
          {"partition_equal", c.partition_equal},
          {"max_abs_dalpha", c.max_abs_dalpha},
          {"max_abs_ddecision", c.max_abs_ddecision},
          {"max_abs_dreadout", c.max_abs_dreadout},
          {"probes", c.probes},
          {"retrain_seconds", c.retrain_seconds}};
}

ResolveCheck check_from_json(const json& j) {
  const std::string w = "check";
  ResolveCheck c;
  c.performed = get_bool(j, "performed", w);
  if (!c.performed) return c;
  c.retrained_sha256 = get_string(j, "retrained_sha256", w);
  c.hash_equal = get_bool(j, "hash_equal", w);
  c.partition_equal = get_bool(j, "partition_equal", w);
  c.max_abs_dalpha = get_double(j, "max_abs_dalpha", w);
  c.max_abs_ddecision = get_double(j, "max_abs_ddecision", w);
  c.max_abs_dreadout = get_double(j, "max_abs_dreadout", w);
  c.probes = get_count(j, "probes", w);
  c.retrain_seconds = get_double(j, "retrain_seconds", w);
  return c;
}

json store_to_json(const StoreErasure& s) {
  json j = {{"path", s.path},
          {"memory", s.memory},
          {"record", s.record},
          {"record_was_suspended", s.record_was_suspended},
          {"token_rows_erased", s.token_rows_erased},
          {"tokens_removed_from_memory", s.tokens_removed_from_memory},
          {"secure_delete", s.secure_delete},
          {"encryption", s.encryption},
          {"data_key_id", s.data_key_id},
          {"data_key_sha256", s.data_key_sha256},
          {"data_key_destroyed", s.data_key_destroyed}};
  if (s.bounds_group >= 0) {  // schema 6
    j["bounds_group"] = s.bounds_group;
    j["bounds_key_id"] = s.bounds_key_id;
    j["bounds_key_sha256"] = s.bounds_key_sha256;
    j["bounds_key_destroyed"] = s.bounds_key_destroyed;
  }
  if (!s.erasure_basis.empty()) j["erasure_basis"] = s.erasure_basis;  // PostgreSQL only
  return j;
}

StoreErasure store_from_json(const json& j) {
  const std::string w = "store";
  StoreErasure s;
  s.path = get_string(j, "path", w);
  s.memory = get_string(j, "memory", w);
  s.record = get_int(j, "record", w);
  s.record_was_suspended = get_bool(j, "record_was_suspended", w);
  s.token_rows_erased = get_count(j, "token_rows_erased", w);
  s.tokens_removed_from_memory = get_count(j, "tokens_removed_from_memory", w);
  s.secure_delete = get_bool(j, "secure_delete", w);
  s.encryption = j.contains("encryption") ? get_string(j, "encryption", w) : "none";
  if (j.contains("data_key_id")) {
    s.data_key_id = get_string(j, "data_key_id", w);
    s.data_key_sha256 = get_string(j, "data_key_sha256", w);
    s.data_key_destroyed = get_bool(j, "data_key_destroyed", w);
  }
  if (j.contains("bounds_group")) {
    s.bounds_group = get_count(j, "bounds_group", w);
    s.bounds_key_id = get_string(j, "bounds_key_id", w);
    s.bounds_key_sha256 = get_string(j, "bounds_key_sha256", w);
    s.bounds_key_destroyed = get_bool(j, "bounds_key_destroyed", w);
  }
  if (j.contains("erasure_basis")) s.erasure_basis = get_string(j, "erasure_basis", w);
  return s;
}

}  // namespace

Status status_from_string(const std::string& s) {
  for (Status st : {Status::kOptimal, Status::kWarmup, Status::kEmpty, Status::kIterationLimit,
                    Status::kKktViolated, Status::kSingular}) {
    if (to_string(st) == s) return st;
  }
  throw FormatError("unknown status '" + s + "'");
}

std::string to_string(CertificateArgument a) {
  switch (a) {
    case CertificateArgument::kNone:
      return "none";
    case CertificateArgument::kFull:
      return "full";
    case CertificateArgument::kReference:
      return "reference";
  }
  return "none";
}

CertificateArgument certificate_argument_from_string(const std::string& s) {
  for (CertificateArgument a :
       {CertificateArgument::kNone, CertificateArgument::kFull, CertificateArgument::kReference}) {
    if (to_string(a) == s) return a;
  }
  throw FormatError("certificate: unknown verify.argument '" + s + "'");
}

json RemovalCertificate::to_json() const {
  json j;
  j["certificate"] = certificate;
  j["mode"] = svattn::to_string(mode);
  j["settings"] = settings_to_json(settings);
  j["record_id"] = record_id;
  j["removed_ids"] = removed_ids;
  j["before"] = summary_to_json(before, false);
  j["after"] = summary_to_json(after, true);
  j["solver"] = solver_to_json(solver);
  j["evictions"] = evictions;
  j["verify"] = verify_to_json(verify);
  j["check"] = check_to_json(check);
  if (store) j["store"] = store_to_json(*store);
  j["scope"] = scope;
  j["limits"] = limits;
  return j;
}

RemovalCertificate RemovalCertificate::from_json(const json& j) {
  const std::string w = "certificate";
  RemovalCertificate c;
  c.certificate = get_string(j, "certificate", w);
  if (c.certificate != "svattn-removal-v1") {
    throw FormatError("certificate: unknown certificate type '" + c.certificate + "'");
  }
  try {
    c.mode = memory_mode_from_string(get_string(j, "mode", w));
  } catch (const InvalidArgument& e) {
    throw FormatError(std::string("certificate: mode: ") + e.what());
  }
  c.settings = problem_from_json(member(j, "settings", w));
  c.record_id = get_string(j, "record_id", w);
  for (const json& id : member(j, "removed_ids", w)) {
    if (!id.is_number_integer())
      throw FormatError("certificate: 'removed_ids' holds a non-integer");
    if (id.is_number_unsigned() && id.get<std::uint64_t>() > static_cast<std::uint64_t>(
                                       std::numeric_limits<TokenId>::max()))
      throw FormatError("certificate: 'removed_ids' holds " + id.dump() +
                        ", out of the int64 id range");
    const TokenId v = id.get<TokenId>();
    if (!c.removed_ids.empty() && v <= c.removed_ids.back())
      throw FormatError("certificate: 'removed_ids' is not strictly ascending at " +
                        std::to_string(v));
    c.removed_ids.push_back(v);
  }
  c.before = summary_from_json(member(j, "before", w), false, "before");
  c.after = summary_from_json(member(j, "after", w), true, "after");
  c.solver = solver_from_json(member(j, "solver", w));
  c.evictions = static_cast<std::uint64_t>(get_count(j, "evictions", w));
  c.verify = verify_from_json(member(j, "verify", w));
  c.check = check_from_json(member(j, "check", w));
  if (j.contains("store")) c.store = store_from_json(j["store"]);
  c.scope = get_string(j, "scope", w);
  c.limits = get_string(j, "limits", w);
  return c;
}

}  // namespace svattn
