// ICU readers (MIMIC-III demo vitals extract, PhysioNet/CinC 2012 archives), hourly aggregation,
// critical-hour labels and standardised key vectors.
#include "experiments/icu.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <unordered_map>

#include "svattn/errors.h"

namespace svattn::experiments {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

VitalVector nan_vector() {
  VitalVector v;
  v.fill(kNaN);
  return v;
}

/// Reads a gzip (or plain) file line by line with zlib.
class GzLines {
 public:
  explicit GzLines(const std::string& path) : path_(path), f_(gzopen(path.c_str(), "rb")) {
    if (f_ == nullptr) throw IoError("cannot open '" + path + "'");
    gzbuffer(f_, 1 << 17);
  }
  ~GzLines() {
    if (f_ != nullptr) gzclose(f_);
  }
  GzLines(const GzLines&) = delete;
  GzLines& operator=(const GzLines&) = delete;
  bool next(std::string& line) {
    line.clear();
    char buf[4096];
    while (true) {
      if (gzgets(f_, buf, sizeof buf) == nullptr) {
        int err = 0;
        const char* msg = gzerror(f_, &err);
        if (err != Z_OK && err != Z_STREAM_END) {
          throw FormatError("'" + path_ + "': gzip error: " + msg);
        }
        return !line.empty();
      }
      line += buf;
      if (!line.empty() && line.back() == '\n') {
        line.pop_back();
        if (!line.empty() && line.back() == '\r') line.pop_back();
        return true;
      }
    }
  }

 private:
  std::string path_;
  gzFile f_;
};

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (char c : line) {
    if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

bool parse_double(const std::string& s, double& v) {
  if (s.empty()) return false;
  char* end = nullptr;
  v = std::strtod(s.c_str(), &end);
  return end != s.c_str() && *end == '\0' && std::isfinite(v);
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
long days_from_civil(long y, unsigned m, unsigned d) {
  y -= m <= 2;
  const long era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<long>(doe) - 719468;
}

/// "YYYY-MM-DD HH:MM:SS" -> absolute clock hour; false when malformed.
bool parse_clock_hour(const std::string& s, long& hour) {
  int y = 0;
  unsigned mo = 0, d = 0, h = 0, mi = 0, se = 0;
  if (std::sscanf(s.c_str(), "%d-%u-%u %u:%u:%u", &y, &mo, &d, &h, &mi, &se) < 4) return false;
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23) return false;
  hour = days_from_civil(y, mo, d) * 24 + static_cast<long>(h);
  return true;
}

/// Sum and count per vital within one hour.
struct HourAcc {
  VitalVector sum{};
  std::array<int, kNumVitals> count{};
};

/// Adds a measurement unless implausible; returns false when dropped.
bool accumulate(std::map<long, HourAcc>& hours, long hour, int vital, double value) {
  const PlausibleRange r = plausible_range(vital);
  if (!(value >= r.lo && value <= r.hi)) return false;
  HourAcc& a = hours[hour];
  a.sum[static_cast<std::size_t>(vital)] += value;
  a.count[static_cast<std::size_t>(vital)] += 1;
  return true;
}

std::vector<IcuHour> finish_hours(const std::map<long, HourAcc>& hours) {
  std::vector<IcuHour> out;
  if (hours.empty()) return out;
  const long first = hours.begin()->first;
  for (const auto& [h, acc] : hours) {
    IcuHour ih;
    ih.hour = h - first;
    ih.measured = nan_vector();
    bool any = false;
    for (int v = 0; v < kNumVitals; ++v) {
      const auto k = static_cast<std::size_t>(v);
      if (acc.count[k] > 0) {
        ih.measured[k] = acc.sum[k] / acc.count[k];
        any = true;
      }
    }
    if (any) out.push_back(ih);
  }
  return out;
}

int mimic_vital(const std::string& name, bool& fahrenheit) {
  fahrenheit = false;
  if (name == "HeartRate") return kHeartRate;
  if (name == "SysBP") return kSysBp;
  if (name == "DiasBP") return kDiasBp;
  if (name == "MeanBP") return kMeanBp;
  if (name == "RespRate") return kRespRate;
  if (name == "SpO2") return kSpO2;
  if (name == "TempC") return kTempC;
  if (name == "TempF") {
    fahrenheit = true;
    return kTempC;
  }
  return -1;
}

int physionet_vital(const std::string& p) {
  if (p == "HR") return kHeartRate;
  if (p == "SysABP" || p == "NISysABP") return kSysBp;
  if (p == "DiasABP" || p == "NIDiasABP") return kDiasBp;
  if (p == "MAP" || p == "NIMAP") return kMeanBp;
  if (p == "RespRate") return kRespRate;
  if (p == "SaO2") return kSpO2;
  if (p == "Temp") return kTempC;
  return -1;
}

long parse_octal(const char* p, std::size_t n) {
  long v = 0;
  for (std::size_t i = 0; i < n && p[i] != '\0' && p[i] != ' '; ++i) {
    if (p[i] < '0' || p[i] > '7') return -1;
    v = v * 8 + (p[i] - '0');
  }
  return v;
}

}  // namespace

const char* vital_name(int vital) {
  switch (vital) {
    case kHeartRate: return "HR";
    case kSysBp: return "SBP";
    case kDiasBp: return "DBP";
    case kMeanBp: return "MAP";
    case kRespRate: return "RR";
    case kSpO2: return "SpO2";
    case kTempC: return "TempC";
    default: return "?";
  }
}

PlausibleRange plausible_range(int vital) {
  switch (vital) {
    case kHeartRate: return {20, 300};
    case kSysBp: return {40, 300};
    case kDiasBp: return {10, 200};
    case kMeanBp: return {20, 250};
    case kRespRate: return {1, 80};
    case kSpO2: return {50, 100};
    case kTempC: return {25, 45};
    default: return {kNaN, kNaN};
  }
}

const std::vector<CriticalThreshold>& critical_thresholds() {
  static const std::vector<CriticalThreshold> t = {
      {kSpO2, '<', 90, "SpO2 < 90 %"},       {kMeanBp, '<', 65, "MAP < 65 mmHg"},
      {kHeartRate, '>', 130, "HR > 130 /min"}, {kHeartRate, '<', 40, "HR < 40 /min"},
      {kRespRate, '>', 30, "RR > 30 /min"},    {kSysBp, '<', 90, "SBP < 90 mmHg"},
  };
  return t;
}

bool rule_met(const CriticalThreshold& rule, const VitalVector& measured) {
  const double v = measured[static_cast<std::size_t>(rule.vital)];
  if (std::isnan(v)) return false;
  switch (rule.op) {
    case '<':
      return v < rule.value;
    case '>':
      return v > rule.value;
    case 'l':
      return v <= rule.value;
    case 'g':
      return v >= rule.value;
    default:
      throw InvalidArgument(std::string("critical rule '") + rule.label + "': unknown op '" +
                            rule.op + "' (expected <, >, l or g)");
  }
}

std::vector<std::string> critical_reasons(const VitalVector& measured) {
  std::vector<std::string> out;
  for (const auto& t : critical_thresholds())
    if (rule_met(t, measured)) out.emplace_back(t.label);
  return out;
}

int CriticalityDefinition::rules_met(const VitalVector& measured) const {
  int met = 0;
  for (const auto& r : rules) met += rule_met(r, measured) ? 1 : 0;
  return met;
}

const std::vector<CriticalityDefinition>& criticality_definitions() {
  static const std::vector<CriticalityDefinition> d = {
      {"extreme",
       "peri-arrest range: a value seen just before or during resuscitation",
       {{kSpO2, '<', 80, "SpO2 < 80 %"},
        {kMeanBp, '<', 50, "MAP < 50 mmHg"},
        {kHeartRate, '>', 160, "HR > 160 /min"},
        {kHeartRate, '<', 30, "HR < 30 /min"},
        {kRespRate, '>', 40, "RR > 40 /min"},
        {kSysBp, '<', 70, "SBP < 70 mmHg"}},
       1},
      {"profound",
       "profound derangement: a value that on its own calls for immediate intervention",
       {{kSpO2, '<', 85, "SpO2 < 85 %"},
        {kMeanBp, '<', 55, "MAP < 55 mmHg"},
        {kHeartRate, '>', 150, "HR > 150 /min"},
        {kHeartRate, '<', 35, "HR < 35 /min"},
        {kRespRate, '>', 35, "RR > 35 /min"},
        {kSysBp, '<', 80, "SBP < 80 mmHg"}},
       1},
      {"two-system",
       "concurrent derangement: two or more of the standard rules met in the same hour",
       critical_thresholds(), 2},
      {"standard",
       "critical deterioration: one vital beyond the usual ICU alarm limits (the main tables)",
       critical_thresholds(), 1},
      {"news2-red",
       "NEWS2 red score: one parameter scoring 3 points in the Royal College of Physicians' "
       "National Early Warning Score 2 (urgent review)",
       {{kRespRate, 'l', 8, "RR <= 8 /min"},
        {kRespRate, 'g', 25, "RR >= 25 /min"},
        {kSpO2, 'l', 91, "SpO2 <= 91 %"},
        {kSysBp, 'l', 90, "SBP <= 90 mmHg"},
        {kSysBp, 'g', 220, "SBP >= 220 mmHg"},
        {kHeartRate, 'l', 40, "HR <= 40 /min"},
        {kHeartRate, 'g', 131, "HR >= 131 /min"},
        {kTempC, 'l', 35.0, "Temp <= 35.0 C"}},
       1},
      {"early-warning",
       "early warning: one vital outside the normal range (a reason to look, not yet critical)",
       {{kSpO2, '<', 94, "SpO2 < 94 %"},
        {kMeanBp, '<', 70, "MAP < 70 mmHg"},
        {kHeartRate, '>', 110, "HR > 110 /min"},
        {kHeartRate, '<', 50, "HR < 50 /min"},
        {kRespRate, '>', 24, "RR > 24 /min"},
        {kSysBp, '<', 100, "SBP < 100 mmHg"},
        {kTempC, '>', 38.5, "Temp > 38.5 C"},
        {kTempC, '<', 36.0, "Temp < 36.0 C"}},
       1},
  };
  return d;
}

const CriticalityDefinition& criticality_definition(const std::string& name) {
  for (const auto& d : criticality_definitions())
    if (name == d.name) return d;
  std::string known;
  for (const auto& d : criticality_definitions())
    known += (known.empty() ? "" : ", ") + std::string(d.name);
  throw InvalidArgument("unknown criticality definition '" + name + "' (known: " + known + ")");
}

bool is_critical(const VitalVector& measured) { return !critical_reasons(measured).empty(); }

IcuDataset load_mimic_vitals(const std::string& path) {
  GzLines in(path);
  IcuDataset data;
  data.source = "MIMIC-III demo v1.4 vitals";
  std::string line;
  if (!in.next(line)) throw FormatError("'" + path + "' is empty");
  const std::vector<std::string> header = split_csv(line);
  auto col = [&](const char* name) {
    const auto it = std::find(header.begin(), header.end(), name);
    if (it == header.end()) {
      throw FormatError("'" + path + "': header lacks the column '" + name + "' (expected "
                        "icustay_id,charttime,itemid,subject_id,hadm_id,vital,valuenum,error,row_id)");
    }
    return static_cast<std::size_t>(it - header.begin());
  };
  const std::size_t c_stay = col("icustay_id"), c_time = col("charttime"), c_vital = col("vital"),
                    c_value = col("valuenum"), c_error = col("error");
  const std::size_t need = std::max({c_stay, c_time, c_vital, c_value, c_error}) + 1;
  std::vector<std::string> order;  // stays in order of first appearance
  std::unordered_map<std::string, std::map<long, HourAcc>> per_stay;
  long line_no = 1;
  while (in.next(line)) {
    ++line_no;
    if (line.empty()) continue;
    const std::vector<std::string> f = split_csv(line);
    if (f.size() < need) {
      throw FormatError("'" + path + "' line " + std::to_string(line_no) + ": expected " +
                        std::to_string(header.size()) + " fields, got " + std::to_string(f.size()));
    }
    bool fahrenheit = false;
    const int vital = mimic_vital(f[c_vital], fahrenheit);
    if (vital < 0) continue;
    double value = 0;
    if (!parse_double(f[c_value], value)) continue;
    long hour = 0;
    if (!parse_clock_hour(f[c_time], hour)) {
      throw FormatError("'" + path + "' line " + std::to_string(line_no) + ": bad charttime '" +
                        f[c_time] + "'");
    }
    ++data.rows_read;
    if (f[c_error] == "1") {
      ++data.rows_flagged_error;
      continue;
    }
    if (fahrenheit) value = (value - 32.0) * 5.0 / 9.0;
    auto it = per_stay.find(f[c_stay]);
    if (it == per_stay.end()) {
      order.push_back(f[c_stay]);
      it = per_stay.emplace(f[c_stay], std::map<long, HourAcc>{}).first;
    }
    if (!accumulate(it->second, hour, vital, value)) ++data.rows_out_of_range;
  }
  for (const auto& id : order) {
    IcuStay s;
    s.id = id;
    s.hours = finish_hours(per_stay[id]);
    if (!s.hours.empty()) data.stays.push_back(std::move(s));
  }
  return data;
}

IcuStay parse_physionet_record(const std::string& text, const std::string& id, long* rows_read,
                               long* rows_out_of_range) {
  IcuStay stay;
  stay.id = id;
  std::map<long, HourAcc> hours;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::vector<std::string> f = split_csv(line);
    if (f.size() < 3) continue;
    if (f[1] == "RecordID") {
      double v = 0;
      if (parse_double(f[2], v)) stay.id = std::to_string(static_cast<long>(v));
      continue;
    }
    const int vital = physionet_vital(f[1]);
    if (vital < 0) continue;
    unsigned hh = 0, mm = 0;
    if (std::sscanf(f[0].c_str(), "%u:%u", &hh, &mm) != 2) continue;
    double value = 0;
    if (!parse_double(f[2], value)) continue;
    if (value < 0) continue;  // -1 marks a missing value in these records
    if (rows_read) ++*rows_read;
    const long minute = static_cast<long>(hh) * 60 + static_cast<long>(mm);
    if (!accumulate(hours, minute / 60, vital, value) && rows_out_of_range) ++*rows_out_of_range;
  }
  stay.hours = finish_hours(hours);
  // PhysioNet hours count from admission, not from the first measurement.
  if (!hours.empty()) {
    const long first = hours.begin()->first;
    for (auto& h : stay.hours) h.hour += first;
  }
  return stay;
}

IcuDataset load_physionet2012(const std::vector<std::string>& archives, int max_stays) {
  IcuDataset data;
  data.source = "PhysioNet/CinC 2012";
  for (const auto& path : archives) {
    gzFile f = gzopen(path.c_str(), "rb");
    if (f == nullptr) throw IoError("cannot open '" + path + "'");
    std::unique_ptr<gzFile_s, int (*)(gzFile)> guard(f, gzclose);
    gzbuffer(f, 1 << 17);
    char header[512];
    long member = 0;
    while (true) {
      const int got = gzread(f, header, 512);
      if (got == 0) break;
      if (got != 512) throw FormatError("'" + path + "': truncated tar header");
      bool zero = true;
      for (char c : header) zero = zero && c == '\0';
      if (zero) break;
      ++member;
      const long size = parse_octal(header + 124, 12);
      if (size < 0) {
        throw FormatError("'" + path + "': bad tar size field in member " + std::to_string(member));
      }
      const char type = header[156];
      std::string name(header, strnlen(header, 100));
      if (std::memcmp(header + 257, "ustar", 5) == 0 && header[345] != '\0') {
        name = std::string(header + 345, strnlen(header + 345, 155)) + "/" + name;
      }
      std::string body(static_cast<std::size_t>(size), '\0');
      if (size > 0 && gzread(f, body.data(), static_cast<unsigned>(size)) != size) {
        throw FormatError("'" + path + "': truncated member '" + name + "'");
      }
      const long pad = (512 - size % 512) % 512;
      if (pad > 0) {
        char skip[512];
        if (gzread(f, skip, static_cast<unsigned>(pad)) != pad) {
          throw FormatError("'" + path + "': truncated padding after '" + name + "'");
        }
      }
      if ((type != '0' && type != '\0') || name.size() < 4 ||
          name.compare(name.size() - 4, 4, ".txt") != 0) {
        continue;
      }
      const std::size_t slash = name.find_last_of('/');
      const std::string id = name.substr(slash == std::string::npos ? 0 : slash + 1,
                                         name.size() - 4 - (slash == std::string::npos ? 0 : slash + 1));
      IcuStay s = parse_physionet_record(body, id, &data.rows_read, &data.rows_out_of_range);
      if (!s.hours.empty()) data.stays.push_back(std::move(s));
      if (max_stays > 0 && static_cast<int>(data.stays.size()) >= max_stays) break;
    }
    int err = 0;
    const char* msg = gzerror(f, &err);
    if (err != Z_OK && err != Z_STREAM_END) throw FormatError("'" + path + "': gzip error: " + msg);
    if (max_stays > 0 && static_cast<int>(data.stays.size()) >= max_stays) break;
  }
  return data;
}

IcuKeys icu_keys(const IcuDataset& data) {
  IcuKeys out;
  std::array<double, kNumVitals> sum{}, sum2{};
  std::array<long, kNumVitals> cnt{};
  long rows = 0;
  for (const auto& s : data.stays) {
    rows += static_cast<long>(s.hours.size());
    for (const auto& h : s.hours) {
      for (int v = 0; v < kNumVitals; ++v) {
        const double x = h.measured[static_cast<std::size_t>(v)];
        if (std::isnan(x)) continue;
        sum[static_cast<std::size_t>(v)] += x;
        cnt[static_cast<std::size_t>(v)] += 1;
      }
    }
  }
  for (int v = 0; v < kNumVitals; ++v) {
    const auto k = static_cast<std::size_t>(v);
    out.mean[k] = cnt[k] > 0 ? sum[k] / static_cast<double>(cnt[k]) : 0.0;
  }
  for (const auto& s : data.stays) {
    for (const auto& h : s.hours) {
      for (int v = 0; v < kNumVitals; ++v) {
        const auto k = static_cast<std::size_t>(v);
        const double x = h.measured[k];
        if (!std::isnan(x)) sum2[k] += (x - out.mean[k]) * (x - out.mean[k]);
      }
    }
  }
  for (int v = 0; v < kNumVitals; ++v) {
    const auto k = static_cast<std::size_t>(v);
    const double sd = cnt[k] > 1 ? std::sqrt(sum2[k] / static_cast<double>(cnt[k] - 1)) : 0.0;
    out.std[k] = sd > 0 ? sd : 1.0;
  }
  out.keys.resize(rows, kNumVitals);
  out.critical.reserve(static_cast<std::size_t>(rows));
  out.stay_begin.reserve(data.stays.size() + 1);
  long r = 0;
  for (const auto& s : data.stays) {
    out.stay_begin.push_back(static_cast<int>(r));
    VitalVector last = out.mean;
    for (const auto& h : s.hours) {
      for (int v = 0; v < kNumVitals; ++v) {
        const auto k = static_cast<std::size_t>(v);
        if (!std::isnan(h.measured[k])) last[k] = h.measured[k];
        out.keys(r, v) = (last[k] - out.mean[k]) / out.std[k];
      }
      out.critical.push_back(is_critical(h.measured) ? 1 : 0);
      ++r;
    }
  }
  out.stay_begin.push_back(static_cast<int>(r));
  return out;
}

}  // namespace svattn::experiments
