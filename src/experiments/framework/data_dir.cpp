// Data-file lookup and download hints of the experiments (framework/data_dir.h); the directory
// itself is resolved by the support layer (src/support/data_dir.h).
#include "experiments/framework/data_dir.h"

#include <filesystem>

#include "support/data_dir.h"
#include "svattn/errors.h"

#ifndef SVATTN_SOURCE_DIR
#define SVATTN_SOURCE_DIR ""
#endif

namespace svattn::experiments {

namespace fs = std::filesystem;

DataDir resolve_data_dir(const std::string& flag) {
  const support::DataDirChoice c = support::find_data_dir(flag, SVATTN_SOURCE_DIR);
  if (!c.path.empty()) return {c.path, c.source};
  std::string tried;
  for (const std::string& t : c.tried) tried += (tried.empty() ? "'" : " and '") + t + "'";
  throw IoError("no data directory found (looked for " + tried +
                "): pass --data-dir DIR or set SVATTN_DATA=DIR; docs/experiments.md lists the files "
                "and where to download them");
}

std::string download_hint(const std::string& relative) {
  if (relative.rfind("mimic-iii-demo/", 0) == 0) {
    if (relative == "mimic-iii-demo/vitals.csv.gz") {
      return "it is derived from CHARTEVENTS of the MIMIC-III Clinical Database Demo v1.4 "
             "(open access, ODbL: https://physionet.org/content/mimiciii-demo/1.4/); keep the rows "
             "with a numeric value, an ICU stay and a vital-sign itemid (table in "
             "mimic-iii-demo/PROVENANCE.md and docs/experiments.md), columns "
             "icustay_id,charttime,itemid,subject_id,hadm_id,vital,valuenum,error,row_id, sorted by "
             "(icustay_id, charttime, itemid), gzip-compressed";
    }
    return "download the MIMIC-III Clinical Database Demo v1.4 from "
           "https://physionet.org/content/mimiciii-demo/1.4/ (open access, ODbL)";
  }
  if (relative.rfind("physionet2012/", 0) == 0) {
    return "download set-a.tar.gz and set-b.tar.gz (and Outcomes-a/b.txt) of the "
           "PhysioNet/CinC Challenge 2012 from https://physionet.org/content/challenge-2012/1.0.0/ "
           "(open access) into <data-dir>/physionet2012/";
  }
  if (relative.rfind("enwik8/", 0) == 0) {
    return "enwik8 is at http://mattmahoney.net/dc/enwik8.zip; svattn uses its first 4,154,064 "
           "bytes (see enwik8/PROVENANCE.md)";
  }
  if (relative.rfind("tinyshakespeare/", 0) == 0) {
    return "download input.txt from "
           "https://github.com/karpathy/char-rnn/tree/master/data/tinyshakespeare";
  }
  return "see docs/experiments.md for the data files and their sources";
}

std::string data_file(const DataDir& dir, const std::string& relative) {
  const fs::path p = fs::path(dir.path) / relative;
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) {
    throw IoError("missing data file '" + p.string() + "' (data directory '" + dir.path +
                  "' from " + dir.source + "): " + download_hint(relative));
  }
  return p.string();
}

}  // namespace svattn::experiments
