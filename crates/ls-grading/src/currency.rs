//! Currency validation used by grading: ISO currency and FX sanity, IBAN (MOD-97 checksum plus the
//! national BBAN format via `iban_validate`), SWIFT/BIC format, and currency mismatch between the
//! invoice, the PO and the vendor master.
//!
//! Unlike the reference, an account that merely *looks* like an IBAN (two letters, ≥ 15 chars) is
//! only checked as an IBAN when its country actually uses IBANs; a domestic account such as an
//! Indian `IN55…` number is not an "invalid IBAN".

use ls_core::text::compact_account;
use rust_decimal::Decimal;
use serde::Serialize;
use std::collections::BTreeMap;
use std::str::FromStr;

/// USD per one unit (reference FX table).
pub const FX_USD_PER_UNIT: [(&str, &str); 25] = [
    ("USD", "1.0"),
    ("EUR", "1.085"),
    ("GBP", "1.265"),
    ("JPY", "0.0067"),
    ("CHF", "1.12"),
    ("CAD", "0.74"),
    ("AUD", "0.655"),
    ("INR", "0.012"),
    ("CNY", "0.138"),
    ("SGD", "0.745"),
    ("HKD", "0.128"),
    ("KRW", "0.00075"),
    ("MXN", "0.058"),
    ("BRL", "0.20"),
    ("ZAR", "0.055"),
    ("AED", "0.2723"),
    ("SAR", "0.2667"),
    ("THB", "0.028"),
    ("SEK", "0.096"),
    ("NOK", "0.094"),
    ("DKK", "0.1455"),
    ("NZD", "0.61"),
    ("TRY", "0.031"),
    ("PLN", "0.25"),
    ("CZK", "0.044"),
];
pub const SANCTIONED_CURRENCIES: [&str; 4] = ["KPW", "SYP", "IRR", "CUP"];

pub fn usd_rate(code: &str) -> Option<Decimal> {
    let c = code.trim().to_ascii_uppercase();
    FX_USD_PER_UNIT
        .iter()
        .find(|(k, _)| *k == c)
        .and_then(|(_, v)| Decimal::from_str(v).ok())
}

/// Convert `amount` from one currency to another (no spread). Correct direction: from/to.
pub fn convert(amount: Decimal, from: &str, to: &str) -> Option<Decimal> {
    let (f, t) = (usd_rate(from)?, usd_rate(to)?);
    if t.is_zero() {
        return None;
    }
    Some((amount * f / t).round_dp(2))
}

/// MOD-97 remainder of an IBAN-shaped string (first four characters moved to the end, letters
/// A..Z as 10..35). `None` for characters outside `[0-9A-Z]`.
pub fn iban_mod97(compact: &str) -> Option<u32> {
    if compact.len() < 5 {
        return None;
    }
    let rearranged = format!("{}{}", &compact[4..], &compact[..4]);
    let mut rem: u32 = 0;
    for ch in rearranged.chars() {
        let v = match ch {
            '0'..='9' => ch as u32 - '0' as u32,
            'A'..='Z' => ch as u32 - 'A' as u32 + 10,
            _ => return None,
        };
        rem = if v >= 10 {
            (rem * 100 + v) % 97
        } else {
            (rem * 10 + v) % 97
        };
    }
    Some(rem)
}

/// Result of validating one IBAN.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IbanCheck {
    pub account: String,
    pub country: String,
    /// Whether the country code belongs to the IBAN registry.
    pub iban_country: bool,
    pub checksum_valid: bool,
    pub bban_format_valid: bool,
    pub valid: bool,
    pub errors: Vec<String>,
}

/// Does this account look like an IBAN of a country that uses IBANs?
pub fn is_iban_candidate(account: &str) -> bool {
    let c = compact_account(account);
    c.len() >= 15
        && c.len() <= 34
        && c.chars().take(2).all(|ch| ch.is_ascii_alphabetic())
        && iban_country(&c)
}

/// Registry membership: rebuild the string with correct check digits and ask `iban_validate`.
fn iban_country(compact: &str) -> bool {
    if compact.len() < 5 || !compact.chars().all(|c| c.is_ascii_alphanumeric()) {
        return false;
    }
    let probe = format!("{}00{}", &compact[..2], &compact[4..]);
    let Some(rem) = iban_mod97(&probe) else {
        return false;
    };
    let check = 98 - rem;
    let fixed = format!("{}{:02}{}", &compact[..2], check, &compact[4..]);
    !matches!(
        iban::Iban::from_str(&fixed),
        Err(iban::ParseIbanError::UnknownCountry(_))
            | Err(iban::ParseIbanError::InvalidBaseIban { .. })
    )
}

pub fn validate_iban(account: &str) -> IbanCheck {
    let c = compact_account(account);
    let country: String = c.chars().take(2).collect();
    let mut errors = Vec::new();
    let checksum_valid = iban_mod97(&c) == Some(1);
    if !checksum_valid {
        errors.push("iban_checksum_invalid".to_owned());
    }
    let registered = iban_country(&c);
    if !registered {
        errors.push("iban_country_unknown".to_owned());
    }
    let bban_format_valid = match iban::Iban::from_str(&c) {
        Ok(_) => true,
        Err(iban::ParseIbanError::InvalidBban(_)) => false,
        // Checksum failures hide the BBAN check; re-run it with corrected check digits.
        Err(_) => {
            registered && {
                let probe = format!("{}00{}", &c[..2.min(c.len())], c.get(4..).unwrap_or(""));
                iban_mod97(&probe).is_some_and(|rem| {
                    let fixed = format!("{}{:02}{}", &c[..2], 98 - rem, &c[4..]);
                    iban::Iban::from_str(&fixed).is_ok()
                })
            }
        }
    };
    if registered && !bban_format_valid {
        errors.push("iban_bban_format_invalid".to_owned());
    }
    IbanCheck {
        account: c,
        country,
        iban_country: registered,
        checksum_valid,
        bban_format_valid,
        valid: errors.is_empty(),
        errors,
    }
}

/// SWIFT/BIC: 8 or 11 characters, bank code 4 letters, country 2 letters, location 2
/// alphanumerics, optional branch 3 alphanumerics.
pub fn looks_like_swift(value: &str) -> bool {
    let c = compact_account(value);
    (c.len() == 8 || c.len() == 11) && c.chars().take(4).all(|ch| ch.is_ascii_alphabetic())
}

pub fn validate_swift(value: &str) -> (bool, Vec<String>) {
    let c = compact_account(value);
    let mut errors = Vec::new();
    if c.len() != 8 && c.len() != 11 {
        errors.push("swift_length_invalid".to_owned());
        return (false, errors);
    }
    if !c[..4].chars().all(|ch| ch.is_ascii_alphabetic()) {
        errors.push("swift_bank_code_invalid".to_owned());
    }
    if !c[4..6].chars().all(|ch| ch.is_ascii_alphabetic()) {
        errors.push("swift_country_invalid".to_owned());
    }
    if !c[6..].chars().all(|ch| ch.is_ascii_alphanumeric()) {
        errors.push("swift_location_invalid".to_owned());
    }
    (errors.is_empty(), errors)
}

/// Currency mismatch across invoice / PO / vendor master (blanks ignored).
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct CurrencyMismatch {
    pub has_mismatch: bool,
    pub mismatches: Vec<String>,
    pub risk_level: String,
    pub currencies_seen: Vec<String>,
}

pub fn detect_mismatch(pairs: &[(&str, &str)]) -> CurrencyMismatch {
    let named: Vec<(String, String)> = pairs
        .iter()
        .map(|(n, c)| ((*n).to_owned(), c.trim().to_ascii_uppercase()))
        .filter(|(_, c)| !c.is_empty())
        .collect();
    let mut mismatches = Vec::new();
    for i in 0..named.len() {
        for j in i + 1..named.len() {
            if named[i].1 != named[j].1 {
                mismatches.push(format!(
                    "{}:{}!={}:{}",
                    named[i].0, named[i].1, named[j].0, named[j].1
                ));
            }
        }
    }
    let mut seen: Vec<String> = named.iter().map(|(_, c)| c.clone()).collect();
    seen.sort();
    seen.dedup();
    let risk_level = match mismatches.len() {
        0 => "none",
        1 => "medium",
        _ => "high",
    };
    CurrencyMismatch {
        has_mismatch: !mismatches.is_empty(),
        mismatches,
        risk_level: risk_level.to_owned(),
        currencies_seen: seen,
    }
}

/// The grader's currency snapshot.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CurrencyReport {
    pub applicable: bool,
    pub score: f64,
    /// check name → passed.
    pub checks: BTreeMap<String, bool>,
    pub iban: Option<IbanCheck>,
    pub swift_valid: Option<bool>,
    pub mismatch: CurrencyMismatch,
    /// Invoice total converted to USD when the currency is in the FX table.
    #[serde(serialize_with = "ls_core::schema::money_number::serialize_opt")]
    pub total_usd: Option<Decimal>,
    pub risk_flags: Vec<String>,
}

/// Inputs read from the submission / case.
pub struct CurrencyInput<'a> {
    pub task_a: bool,
    pub gold_currency: Option<&'a str>,
    pub gold_bank_account: Option<&'a str>,
    pub submitted_currency: Option<String>,
    pub submitted_bank_account: Option<String>,
    pub invoice_currency: Option<&'a str>,
    pub po_currency: Option<&'a str>,
    pub vendor_currency: Option<&'a str>,
    pub invoice_total: Option<Decimal>,
}

pub fn evaluate(input: &CurrencyInput<'_>) -> CurrencyReport {
    let mut checks = BTreeMap::new();
    let mut iban = None;
    let mut swift_valid = None;
    let mut risk_flags = Vec::new();
    if input.task_a {
        if let Some(g) = input.gold_currency.filter(|g| !g.trim().is_empty()) {
            let sub = input
                .submitted_currency
                .as_deref()
                .unwrap_or("")
                .trim()
                .to_ascii_uppercase();
            checks.insert(
                "currency_matches_document".to_owned(),
                sub == g.trim().to_ascii_uppercase(),
            );
        }
        if let Some(g) = input.gold_bank_account.filter(|g| !g.trim().is_empty()) {
            let sub = input.submitted_bank_account.as_deref().unwrap_or("");
            checks.insert(
                "bank_account_matches_document".to_owned(),
                compact_account(sub) == compact_account(g),
            );
            if is_iban_candidate(g) {
                let r = validate_iban(sub);
                checks.insert("iban_valid".to_owned(), r.valid);
                iban = Some(r);
            } else if looks_like_swift(g) {
                let (ok, _) = validate_swift(sub);
                checks.insert("swift_format_valid".to_owned(), ok);
                swift_valid = Some(ok);
            }
        }
    }
    let mismatch = detect_mismatch(&[
        ("invoice", input.invoice_currency.unwrap_or("")),
        ("po", input.po_currency.unwrap_or("")),
        ("vendor_master", input.vendor_currency.unwrap_or("")),
    ]);
    if mismatch.has_mismatch {
        risk_flags.push("currency_mismatch".to_owned());
    }
    let cur = input
        .invoice_currency
        .map(|c| c.trim().to_ascii_uppercase())
        .unwrap_or_default();
    if SANCTIONED_CURRENCIES.contains(&cur.as_str()) {
        risk_flags.push(format!("sanctioned_currency_{}", cur.to_ascii_lowercase()));
    }
    let total_usd = input.invoice_total.and_then(|t| convert(t, &cur, "USD"));
    if !cur.is_empty() && usd_rate(&cur).is_none() && !SANCTIONED_CURRENCIES.contains(&cur.as_str())
    {
        risk_flags.push("unknown_currency".to_owned());
    }
    let applicable = !checks.is_empty();
    let score = if applicable {
        checks.values().filter(|v| **v).count() as f64 / checks.len() as f64
    } else {
        1.0
    };
    CurrencyReport {
        applicable,
        score: crate::round4(score),
        checks,
        iban,
        swift_valid,
        mismatch,
        total_usd,
        risk_flags,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iban_checksums() {
        // Published example IBANs.
        assert!(validate_iban("GB82 WEST 1234 5698 7654 32").valid);
        assert!(validate_iban("CH93 0076 2011 6238 5295 7").valid);
        assert!(validate_iban("DE89370400440532013000").valid);
        let bad = validate_iban("DE89370400440532013001");
        assert!(!bad.checksum_valid && bad.bban_format_valid);
        // India has no IBAN: not a candidate, so a domestic account is not an "invalid IBAN".
        assert!(!is_iban_candidate("IN55NW000111222"));
        assert!(is_iban_candidate("CH9300762011623852957"));
    }

    #[test]
    fn swift_and_fx() {
        assert!(validate_swift("MUFGJPJT").0);
        assert!(validate_swift("DEUTDEFF500").0);
        assert!(!validate_swift("MUF1JPJT").0);
        assert!(!validate_swift("MUFGJP").0);
        // 100 EUR is 108.50 USD (the reference inverts this).
        assert_eq!(
            convert(Decimal::from(100), "EUR", "USD")
                .unwrap()
                .to_string(),
            "108.50"
        );
        let m = detect_mismatch(&[("invoice", "eur"), ("po", "EUR"), ("vendor_master", "USD")]);
        assert_eq!(m.mismatches.len(), 2);
        assert_eq!(m.risk_level, "high");
    }
}
