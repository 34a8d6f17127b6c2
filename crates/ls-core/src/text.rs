//! Normalisation and matching rules shared by tools, grading and generation.
//!
//! Every comparison of names, ids, statuses and signals in LedgerShield goes through these
//! functions so that the same string always matches the same way everywhere.

use rust_decimal::prelude::ToPrimitive;
use rust_decimal::Decimal;
use std::collections::BTreeSet;
use std::str::FromStr;

pub mod codes;

/// Trim, lowercase, and collapse every run of whitespace to one space.
pub fn normalize_text(value: &str) -> String {
    if value.is_ascii() {
        let bytes: Vec<u8> = AsciiNormalized::new(value).collect();
        return String::from_utf8(bytes).expect("ASCII in, ASCII out");
    }
    normalize_text_unicode(value)
}

/// [`normalize_text`] for any text (the definition the ASCII path matches).
fn normalize_text_unicode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for word in value.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        for ch in word.chars() {
            if ch.is_ascii() {
                out.push(ch.to_ascii_lowercase());
            } else {
                out.extend(ch.to_lowercase());
            }
        }
    }
    out
}

/// Characters of `normalize_text(value)` without allocating.
fn normalized_chars(value: &str) -> impl Iterator<Item = char> + '_ {
    value.split_whitespace().enumerate().flat_map(|(i, w)| {
        (i > 0)
            .then_some(' ')
            .into_iter()
            .chain(w.chars().flat_map(char::to_lowercase))
    })
}

/// `normalize_text(a) == normalize_text(b)` without allocating (hot in lookups).
pub fn text_eq(a: &str, b: &str) -> bool {
    if a.is_ascii() && b.is_ascii() {
        return AsciiNormalized::new(a).eq(AsciiNormalized::new(b));
    }
    normalized_chars(a).eq(normalized_chars(b))
}

/// The bytes of `normalize_text(s)` for ASCII `s`: whitespace runs (as `char::is_whitespace`
/// counts them: tab to carriage return and space) become one space, the ends are trimmed and
/// letters are folded to lowercase.
struct AsciiNormalized<'a> {
    rest: &'a [u8],
    started: bool,
}

impl<'a> AsciiNormalized<'a> {
    fn new(s: &'a str) -> Self {
        Self {
            rest: s.as_bytes(),
            started: false,
        }
    }
}

impl Iterator for AsciiNormalized<'_> {
    type Item = u8;
    fn next(&mut self) -> Option<u8> {
        let space = |c: u8| matches!(c, b'\t'..=b'\r' | b' ');
        let (&c, tail) = self.rest.split_first()?;
        if space(c) {
            // A run of whitespace: one space between words, nothing at the ends.
            let next_word = tail.iter().position(|&c| !space(c))?;
            self.rest = &tail[next_word..];
            if self.started {
                return Some(b' ');
            }
            let (&c, tail) = self.rest.split_first()?;
            self.rest = tail;
            self.started = true;
            return Some(c.to_ascii_lowercase());
        }
        self.rest = tail;
        self.started = true;
        Some(c.to_ascii_lowercase())
    }
}

/// `normalize_id(a) == normalize_id(b)` without allocating.
pub fn id_eq(a: &str, b: &str) -> bool {
    if a.is_ascii() && b.is_ascii() {
        fn bytes(s: &str) -> impl Iterator<Item = u8> + '_ {
            s.bytes()
                .filter(u8::is_ascii_alphanumeric)
                .map(|c| c.to_ascii_lowercase())
        }
        return bytes(a).eq(bytes(b));
    }
    fn chars(s: &str) -> impl Iterator<Item = char> + '_ {
        s.chars()
            .flat_map(char::to_lowercase)
            .filter(|c| c.is_alphanumeric())
    }
    chars(a).eq(chars(b))
}

/// `normalize_text` keeping only alphanumeric characters (`"INV-2048-A"` → `"inv2048a"`).
pub fn normalize_id(value: &str) -> String {
    if value.is_ascii() {
        return value
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .map(|c| c.to_ascii_lowercase())
            .collect();
    }
    normalize_id_unicode(value)
}

/// [`normalize_id`] for any text (the definition the ASCII path matches).
fn normalize_id_unicode(value: &str) -> String {
    normalize_text_unicode(value)
        .chars()
        .filter(|c| c.is_alphanumeric())
        .collect()
}

/// Lenient money parse: strips `,`, `₹`, `$`, `€`, `£`, `¥` and spaces; failure gives `None`.
pub fn parse_decimal(value: &str) -> Option<Decimal> {
    let cleaned: String = value
        .chars()
        .filter(|c| !matches!(c, ',' | '₹' | '$' | '€' | '£' | '¥') && !c.is_whitespace())
        .collect();
    if cleaned.is_empty() {
        return None;
    }
    Decimal::from_str(&cleaned)
        .or_else(|_| Decimal::from_scientific(&cleaned))
        .ok()
}

/// Parse a JSON value (number or string) as a decimal amount.
pub fn json_decimal(value: &serde_json::Value) -> Option<Decimal> {
    match value {
        serde_json::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Some(Decimal::from(i))
            } else {
                // Go through the shortest decimal text of the float so 1201.9 stays 1201.9.
                parse_decimal(&n.to_string())
            }
        }
        serde_json::Value::String(s) => parse_decimal(s),
        _ => None,
    }
}

use codes::{ReasonCode, RiskLevel, Signal};
pub use codes::{DISCREPANCY_CODES, FRAUD_CODES};

/// Slug: lowercase, every run of characters outside `a-z0-9` becomes `_`, trimmed of `_`.
pub fn slug(value: &str) -> String {
    let norm = normalize_text(value);
    let mut out = String::with_capacity(norm.len());
    let mut pending_sep = false;
    for ch in norm.chars() {
        if ch.is_ascii_lowercase() || ch.is_ascii_digit() {
            if pending_sep && !out.is_empty() {
                out.push('_');
            }
            pending_sep = false;
            out.push(ch);
        } else {
            pending_sep = true;
        }
    }
    out
}

/// Canonicalise one reason code: slug if canonical, else alias of the normalised text, else `None`
/// (the wire spelling of [`ReasonCode::canonical`]).
pub fn canonical_code(value: &str) -> Option<&'static str> {
    ReasonCode::canonical(value).map(ReasonCode::as_str)
}

/// Canonicalise a list in order, dropping unknown codes and duplicates.
pub fn canonical_codes<'a>(values: impl IntoIterator<Item = &'a str>) -> Vec<&'static str> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for v in values {
        if let Some(code) = canonical_code(v) {
            if seen.insert(code) {
                out.push(code);
            }
        }
    }
    out
}

/// The highest [`RiskLevel`] of a signal set, spelled `high` / `medium` / `low` (strings that are
/// not signals mark no risk).
pub fn risk_level<'a>(signals: impl IntoIterator<Item = &'a str>) -> RiskLevel {
    signals
        .into_iter()
        .filter_map(Signal::from_wire)
        .map(Signal::risk)
        .max()
        .unwrap_or(RiskLevel::Low)
}

/// [`risk_level`] as its wire spelling.
pub fn risk_bucket<'a>(signals: impl IntoIterator<Item = &'a str>) -> &'static str {
    risk_level(signals).as_str()
}

const VENDOR_STOP_WORDS: [&str; 19] = [
    "ag",
    "co",
    "company",
    "components",
    "corp",
    "corporation",
    "gmbh",
    "group",
    "holdings",
    "industrial",
    "inc",
    "incorporated",
    "limited",
    "llc",
    "llp",
    "ltd",
    "manufacturing",
    "pvt",
    "supplies",
];

/// Alphanumeric chunks longer than 2 characters, minus corporate stop words.
pub fn identity_tokens(value: &str) -> BTreeSet<String> {
    normalize_text(value)
        .split(|c: char| !c.is_alphanumeric())
        .filter(|t| t.len() > 2 && !VENDOR_STOP_WORDS.contains(t))
        .map(str::to_owned)
        .collect()
}

/// Two vendor names match when equal after normalisation or when they share at least
/// `min(2, |query|, |candidate|)` identity tokens.
pub fn vendor_alias_match(query: &str, candidates: &[&str]) -> bool {
    VendorAlias::new(query).matches(candidates)
}

/// [`vendor_alias_match`] with the query normalised once, for one query against many candidate
/// lists (a ledger search scores every row).
pub struct VendorAlias {
    query: String,
    query_id: String,
    query_tokens: BTreeSet<String>,
}

impl VendorAlias {
    pub fn new(query: &str) -> Self {
        let query = normalize_text(query);
        Self {
            query_id: normalize_id(&query),
            query_tokens: identity_tokens(&query),
            query,
        }
    }

    pub fn matches(&self, candidates: &[&str]) -> bool {
        if self.query.is_empty() {
            return false;
        }
        if candidates
            .iter()
            .any(|c| text_eq(c, &self.query) || id_eq(c, &self.query_id))
        {
            return true;
        }
        // `need` below is 0 without query tokens, and nothing matches.
        if self.query_tokens.is_empty() {
            return false;
        }
        let mut c_tokens = BTreeSet::new();
        for c in candidates {
            c_tokens.extend(identity_tokens(c));
        }
        let need = 2.min(self.query_tokens.len()).min(c_tokens.len());
        if need == 0 {
            return false;
        }
        self.query_tokens.intersection(&c_tokens).count() >= need
    }
}

/// Standard intersection-over-union of `[x1, y1, x2, y2]` boxes; malformed boxes give 0.
pub fn bbox_iou(a: &[f64], b: &[f64]) -> f64 {
    if a.len() != 4 || b.len() != 4 || a.iter().chain(b).any(|v| !v.is_finite()) {
        return 0.0;
    }
    let ix = (a[2].min(b[2]) - a[0].max(b[0])).max(0.0);
    let iy = (a[3].min(b[3]) - a[1].max(b[1])).max(0.0);
    let inter = ix * iy;
    let area_a = (a[2] - a[0]).max(0.0) * (a[3] - a[1]).max(0.0);
    let area_b = (b[2] - b[0]).max(0.0) * (b[3] - b[1]).max(0.0);
    let union = area_a + area_b - inter;
    if union <= 0.0 {
        0.0
    } else {
        inter / union
    }
}

/// Days between two ISO dates (`YYYY-MM-DD…`), if both parse (proleptic Gregorian).
pub fn days_between(a: &str, b: &str) -> Option<i64> {
    fn days(s: &str) -> Option<i64> {
        let mut it = s.trim().splitn(3, '-');
        let y: i64 = it.next()?.parse().ok()?;
        let m: i64 = it.next()?.parse().ok()?;
        let d: i64 = it.next()?.get(..2)?.parse().ok()?;
        if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
            return None;
        }
        let y2 = if m <= 2 { y - 1 } else { y };
        let era = y2.div_euclid(400);
        let yoe = y2 - era * 400;
        let mp = (m + 9) % 12;
        let doy = (153 * mp + 2) / 5 + d - 1;
        Some(era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy)
    }
    Some((days(b)? - days(a)?).abs())
}

/// Compact form of a bank identifier for comparison: uppercase alphanumerics only.
pub fn compact_account(value: &str) -> String {
    value
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_uppercase())
        .collect()
}

/// A money amount as `f64` (`rust_decimal`'s `to_f64`; every `Decimal` has one).
pub fn decimal_to_f64(d: Decimal) -> f64 {
    d.to_f64().unwrap_or(0.0)
}

/// Round half away from zero to `dp` decimals, as is: a non-finite value stays itself and a
/// negative value that rounds to zero stays `-0.0`. Callers that serialize the result want
/// [`round_to`]; this is for the few whose output has always kept those edges.
pub fn round_dp(value: f64, dp: i32) -> f64 {
    let factor = 10f64.powi(dp);
    (value * factor).round() / factor
}

/// Round half away from zero to `dp` decimals (reward values, probabilities); a non-finite value
/// is `0.0` and so is `-0.0`.
pub fn round_to(value: f64, dp: i32) -> f64 {
    if !value.is_finite() {
        return 0.0;
    }
    let r = round_dp(value, dp);
    if r == 0.0 {
        0.0
    } else {
        r
    }
}

/// [`round_to`] four decimals: the precision of scores, rewards and probabilities on the wire.
pub fn round4(value: f64) -> f64 {
    round_to(value, 4)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every code is its own slug, so canonicalising a code finds it.
    #[test]
    fn every_code_is_its_own_slug() {
        for code in DISCREPANCY_CODES.iter().chain(FRAUD_CODES.iter()) {
            assert_eq!(slug(code), *code);
            assert_eq!(canonical_code(code), Some(*code));
            assert_eq!(
                canonical_code(&format!("  {}  ", code.to_uppercase().replace('_', " "))),
                Some(*code),
                "the slow path agrees"
            );
        }
    }
    use proptest::prelude::*;

    #[test]
    fn allocation_free_equality_matches_normalisation() {
        for (a, b) in [
            ("  Hello \t World", "hello world"),
            ("INV-2048-A", "inv2048a"),
            ("a b", "ab"),
            ("Ünïcode X", "ünïcode x"),
        ] {
            assert_eq!(
                text_eq(a, b),
                normalize_text(a) == normalize_text(b),
                "{a:?} {b:?}"
            );
            assert_eq!(
                id_eq(a, b),
                normalize_id(a) == normalize_id(b),
                "{a:?} {b:?}"
            );
        }
    }

    #[test]
    fn normalizes_text_and_ids() {
        assert_eq!(normalize_text("  Hello \t  World\n"), "hello world");
        assert_eq!(normalize_id("INV-2048-A"), "inv2048a");
    }

    #[test]
    fn canonicalizes_reason_codes_with_aliases() {
        assert_eq!(
            canonical_code("Sender Domain Spoof"),
            Some("sender_domain_spoof")
        );
        assert_eq!(canonical_code("domain spoof"), Some("sender_domain_spoof"));
        assert_eq!(
            canonical_code("bank account mismatch"),
            Some("bank_account_mismatch")
        );
        assert_eq!(canonical_code("made up"), None);
        assert_eq!(
            canonical_codes(["shared bank", "shared_bank_account", "x"]),
            vec!["shared_bank_account"]
        );
    }

    #[test]
    fn vendor_alias_matching() {
        assert!(vendor_alias_match(
            "northwind-industrial",
            &["Northwind Industrial Supplies Pvt Ltd"]
        ));
        assert!(vendor_alias_match(
            "Northwind Industrial",
            &["northwind-industrial"]
        ));
        assert!(!vendor_alias_match(
            "bluepeak-logistics",
            &["northwind-industrial"]
        ));
    }

    #[test]
    fn iou_examples() {
        assert!(
            (bbox_iou(&[10.0, 10.0, 95.0, 20.0], &[10.0, 10.0, 180.0, 20.0]) - 0.5).abs() < 1e-9
        );
        assert_eq!(bbox_iou(&[0.0, 0.0, 1.0], &[0.0, 0.0, 1.0, 1.0]), 0.0);
    }

    #[test]
    fn day_gaps() {
        assert_eq!(days_between("2026-04-02", "2026-04-04"), Some(2));
        assert_eq!(days_between("2026-02-28", "2026-03-01"), Some(1));
        assert_eq!(
            days_between("2024-02-28", "2024-03-01"),
            Some(2),
            "leap year"
        );
        assert_eq!(days_between("x", "2026-03-01"), None);
        assert_eq!(days_between("2026-13-01", "2026-03-01"), None);
    }

    #[test]
    fn parses_money() {
        assert_eq!(parse_decimal("₹2,478.00").unwrap().to_string(), "2478.00");
        assert_eq!(
            json_decimal(&serde_json::json!(1201.9))
                .unwrap()
                .to_string(),
            "1201.9"
        );
        assert!(parse_decimal("abc").is_none());
    }

    proptest! {
        #[test]
        fn iou_in_unit_interval(a in proptest::collection::vec(-100f64..100.0, 4), b in proptest::collection::vec(-100f64..100.0, 4)) {
            let v = bbox_iou(&a, &b);
            prop_assert!((0.0..=1.0 + 1e-12).contains(&v));
        }

        /// The prepared matcher agrees with the allocating definition on arbitrary names.
        #[test]
        fn prepared_alias_matches_the_definition(q in "[A-Za-z0-9 .,-]{0,24}", a in "[A-Za-z0-9 .,-]{0,24}", b in "(Northwind|Acme|Ltd|Pvt| |-|[a-z]{1,6}){0,5}") {
            fn reference(query: &str, candidates: &[&str]) -> bool {
                let q = normalize_text(query);
                if q.is_empty() {
                    return false;
                }
                if candidates.iter().any(|c| normalize_text(c) == q || normalize_id(c) == normalize_id(&q)) {
                    return true;
                }
                let q_tokens = identity_tokens(&q);
                let mut c_tokens = BTreeSet::new();
                for c in candidates {
                    c_tokens.extend(identity_tokens(c));
                }
                let need = 2.min(q_tokens.len()).min(c_tokens.len());
                need > 0 && q_tokens.intersection(&c_tokens).count() >= need
            }
            let prepared = VendorAlias::new(&q);
            for cands in [vec![a.as_str()], vec![a.as_str(), b.as_str()], vec![b.as_str()], vec![q.as_str()]] {
                prop_assert_eq!(prepared.matches(&cands), reference(&q, &cands));
            }
        }

        /// The allocation-free comparisons (ASCII fast paths included) are the normalisations'.
        #[test]
        fn equality_helpers_match_normalisation(a in "[ a-zA-Z0-9\t\n\u{b}\u{c}._-]{0,16}", b in "[ a-zA-Z0-9\t\u{b}._-]{0,16}", u in "[ aÄé\u{3000}ẞİ0-9-]{0,8}") {
            for (x, y) in [(a.as_str(), b.as_str()), (a.as_str(), a.as_str()), (u.as_str(), a.as_str()), (u.as_str(), u.as_str())] {
                let upper = y.to_uppercase();
                for y in [y, upper.as_str()] {
                    prop_assert_eq!(text_eq(x, y), normalize_text(x) == normalize_text(y), "{:?} {:?}", x, y);
                    prop_assert_eq!(id_eq(x, y), normalize_id(x) == normalize_id(y), "{:?} {:?}", x, y);
                }
            }
        }

        /// The ASCII fast paths of the normalisations are the general definitions.
        #[test]
        fn ascii_normalisation_matches_the_general_one(a in "[ a-zA-Z0-9\t\n\u{b}\u{c}\r._:-]{0,24}") {
            prop_assert_eq!(normalize_text(&a), normalize_text_unicode(&a));
            prop_assert_eq!(normalize_id(&a), normalize_id_unicode(&a));
        }

        #[test]
        fn canonical_never_panics(s in ".{0,40}") {
            let _ = canonical_code(&s);
            let _ = vendor_alias_match(&s, &["northwind-industrial"]);
        }
    }

    #[test]
    fn rounding_is_half_away_from_zero_and_round_to_cleans_the_edges() {
        assert_eq!(round4(0.123_45), 0.1235);
        assert_eq!(round4(-0.123_45), -0.1235);
        assert_eq!(round4(2.5e-5), 0.0);
        assert_eq!(round_to(1.005_5, 3), 1.006);
        // The wire form: no NaN, infinity or negative zero.
        for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, -0.000_04] {
            let r = round4(v);
            assert!(r == 0.0 && r.is_sign_positive(), "{v} -> {r}");
        }
        // As is: the edges stay, the arithmetic is the same.
        assert!(round_dp(-0.000_04, 4).is_sign_negative());
        assert!(round_dp(f64::NAN, 4).is_nan());
        assert_eq!(round_dp(f64::INFINITY, 4), f64::INFINITY);
        for v in [0.123_45, -7.654_35, 1e6 + 0.000_05, 3.0] {
            assert_eq!(round_dp(v, 4).to_bits(), round4(v).to_bits(), "{v}");
            assert_eq!(
                round_dp(v, 4).to_bits(),
                ((v * 10_000.0).round() / 10_000.0).to_bits()
            );
        }
    }
}
