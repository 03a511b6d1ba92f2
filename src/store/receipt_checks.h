// The erasure receipt's checks of the certificate, the key destruction and the backups
// (store_receipt_checks.cpp).
// Private to the store.
#pragma once
#include <string>
#include <vector>

#include "svattn/certificate.h"
#include "svattn/store_evidence.h"

namespace svattn::store_detail {

/// "certificate": the recorded certificate's optimality check ran and passed, and it certifies
/// the states and the token count the forget entry records. Fills certificate_argument/_checks.
ReceiptCheck receipt_check_certificate(const RemovalCertificate& cert, ErasureReceipt& r);
/// "key_destroyed": a shred entry after the forget names the certificate's data key with the same
/// wrapped-key hash, and the key store (`key_store`: Store::key_store_path) answers "shredded"
/// for it (plaintext: not applicable).
ReceiptCheck receipt_check_key(const RemovalCertificate& cert, const std::vector<AuditEntry>& all,
                               const StoreOptions& o, const std::string& key_store,
                               ErasureReceipt& r);
/// "backup PATH" per named copy: taken before the erasure (its chain a prefix of the store's,
/// ending before the forget), and its rows of the record sealed under the destroyed key.
void receipt_check_backups(const std::vector<std::string>& paths,
                           const std::vector<AuditEntry>& all, ErasureReceipt& r);

}  // namespace svattn::store_detail
