//! The multi-currency aging report of the currency engine: open accounts-payable items aged
//! into `0_30` (≤ 30 days), `31_60`, `61_90` and `90_plus` buckets as of a date, per currency in
//! the item's own currency and in total converted to a base currency (no spread; an item whose
//! currency cannot be converted counts at its original amount and is listed in `unconverted`, as
//! the reference does). Money is `Decimal` throughout and a JSON number on the wire.
//!
//! Open items are the ledger rows not yet paid and the invoices of the curated cases (the AP
//! queue awaiting a decision), each dated by its invoice date.

use ls_core::schema::money;
use ls_core::FixtureSet;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const BUCKETS: [&str; 4] = ["0_30", "31_60", "61_90", "90_plus"];

/// One open item to age.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenItem {
    pub item_id: String,
    pub vendor: String,
    pub currency: String,
    pub amount: Decimal,
    /// `YYYY-MM-DD`.
    pub date: String,
    pub source: &'static str,
}

/// Amounts per bucket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BucketTotals {
    #[serde(rename = "0_30", with = "money")]
    pub d0_30: Decimal,
    #[serde(rename = "31_60", with = "money")]
    pub d31_60: Decimal,
    #[serde(rename = "61_90", with = "money")]
    pub d61_90: Decimal,
    #[serde(rename = "90_plus", with = "money")]
    pub d90_plus: Decimal,
}

impl Default for BucketTotals {
    /// Zero in cents (`0.00`), like every amount it is added to.
    fn default() -> Self {
        let zero = Decimal::new(0, 2);
        Self {
            d0_30: zero,
            d31_60: zero,
            d61_90: zero,
            d90_plus: zero,
        }
    }
}

impl BucketTotals {
    fn add(&mut self, bucket: &str, amount: Decimal) {
        let slot = match bucket {
            "0_30" => &mut self.d0_30,
            "31_60" => &mut self.d31_60,
            "61_90" => &mut self.d61_90,
            _ => &mut self.d90_plus,
        };
        *slot += amount;
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgingEntry {
    pub invoice_id: String,
    pub vendor: String,
    pub source: String,
    #[serde(with = "money")]
    pub original_amount: Decimal,
    pub currency: String,
    #[serde(with = "money")]
    pub base_amount: Decimal,
    pub converted: bool,
    pub days: i64,
    pub bucket: String,
}

/// One currency's items in that currency.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CurrencyAging {
    pub item_count: usize,
    #[serde(with = "money")]
    pub total: Decimal,
    pub bucket_totals: BucketTotals,
    /// The same items converted to the base currency.
    #[serde(with = "money")]
    pub base_total: Decimal,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SkippedItem {
    pub invoice_id: String,
    pub reason: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgingReport {
    pub base_currency: String,
    pub as_of: String,
    pub item_count: usize,
    /// Everything converted to the base currency.
    #[serde(with = "money")]
    pub total: Decimal,
    pub bucket_totals: BucketTotals,
    pub per_currency: BTreeMap<String, CurrencyAging>,
    pub buckets: BTreeMap<String, Vec<AgingEntry>>,
    /// Items counted at their original amount (currency not in the FX table).
    pub unconverted: Vec<String>,
    /// Items that could not be aged (no or malformed date).
    pub skipped: Vec<SkippedItem>,
}

/// Days since 1970-01-01 of a `YYYY-MM-DD` date (proleptic Gregorian), `None` when malformed.
pub fn day_number(date: &str) -> Option<i64> {
    let mut it = date.trim().splitn(3, '-');
    let y: i64 = it.next()?.parse().ok()?;
    let m: i64 = it.next()?.parse().ok()?;
    let d: i64 = it.next()?.get(..2)?.parse().ok()?;
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let month_days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&m) || d < 1 || d > month_days[(m - 1) as usize] {
        return None;
    }
    // Days from civil (H. Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146_097 + doe - 719_468)
}

/// The bucket of an item `days` old (a future-dated item is in `0_30`).
pub fn bucket_of(days: i64) -> &'static str {
    match days {
        d if d <= 30 => "0_30",
        31..=60 => "31_60",
        61..=90 => "61_90",
        _ => "90_plus",
    }
}

/// Age `items` as of `as_of` (`YYYY-MM-DD`) in `base` currency.
pub fn aging_report(items: &[OpenItem], base: &str, as_of: &str) -> Result<AgingReport, String> {
    let base = base.trim().to_ascii_uppercase();
    if ls_grading::currency::usd_rate(&base).is_none() {
        return Err(format!("unknown base currency '{base}'"));
    }
    let today =
        day_number(as_of).ok_or_else(|| format!("as-of date '{as_of}' is not YYYY-MM-DD"))?;
    let mut r = AgingReport {
        base_currency: base.clone(),
        as_of: as_of.trim().to_owned(),
        buckets: BUCKETS
            .iter()
            .map(|b| ((*b).to_owned(), Vec::new()))
            .collect(),
        ..Default::default()
    };
    for it in items {
        let Some(day) = day_number(&it.date) else {
            r.skipped.push(SkippedItem {
                invoice_id: it.item_id.clone(),
                reason: format!("no usable date ('{}')", it.date),
            });
            continue;
        };
        let currency = it.currency.trim().to_ascii_uppercase();
        let converted = ls_grading::currency::convert(it.amount, &currency, &base);
        if converted.is_none() {
            r.unconverted.push(it.item_id.clone());
        }
        let base_amount = converted.unwrap_or(it.amount);
        let days = today - day;
        let bucket = bucket_of(days);
        r.item_count += 1;
        r.total += base_amount;
        r.bucket_totals.add(bucket, base_amount);
        let c = r.per_currency.entry(currency.clone()).or_default();
        c.item_count += 1;
        c.total += it.amount;
        c.base_total += base_amount;
        c.bucket_totals.add(bucket, it.amount);
        r.buckets
            .entry(bucket.to_owned())
            .or_default()
            .push(AgingEntry {
                invoice_id: it.item_id.clone(),
                vendor: it.vendor.clone(),
                source: it.source.into(),
                original_amount: it.amount,
                currency,
                base_amount,
                converted: converted.is_some(),
                days,
                bucket: bucket.into(),
            });
    }
    Ok(r)
}

/// The open items of a fixture set: unpaid ledger rows and the curated cases' invoices.
pub fn open_items(set: &FixtureSet) -> Vec<OpenItem> {
    let mut out: Vec<OpenItem> = set
        .master
        .ledger_index
        .iter()
        .filter(|l| !l.payment_status.eq_ignore_ascii_case("paid"))
        .map(|l| OpenItem {
            item_id: l.ledger_id.clone(),
            vendor: l.vendor_name.clone(),
            currency: l.currency.clone(),
            amount: l.amount,
            date: l.payment_date.clone(),
            source: "ledger",
        })
        .collect();
    for case in &set.cases {
        for doc in case.invoices() {
            let f = ls_core::validate::invoice_facts(doc);
            let (Some(total), Some(currency)) = (f.total, f.currency.clone()) else {
                continue;
            };
            out.push(OpenItem {
                item_id: format!(
                    "{}:{}",
                    case.case_id,
                    f.invoice_number
                        .clone()
                        .unwrap_or_else(|| doc.doc_id.clone())
                ),
                vendor: f.vendor_display.clone(),
                currency,
                amount: total,
                date: f.invoice_date.clone().unwrap_or_default(),
                source: "case",
            });
        }
    }
    out
}

/// The latest item date (the default as-of date), `None` without dated items.
pub fn latest_date(items: &[OpenItem]) -> Option<String> {
    items
        .iter()
        .filter(|i| day_number(&i.date).is_some())
        .max_by_key(|i| day_number(&i.date))
        .map(|i| i.date.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn item(id: &str, cur: &str, amount: &str, date: &str) -> OpenItem {
        OpenItem {
            item_id: id.into(),
            vendor: "v".into(),
            currency: cur.into(),
            amount: Decimal::from_str(amount).unwrap(),
            date: date.into(),
            source: "ledger",
        }
    }

    fn d(s: &str) -> Decimal {
        Decimal::from_str(s).unwrap()
    }

    #[test]
    fn dates_count_days_across_months_and_leap_years() {
        assert_eq!(day_number("1970-01-01"), Some(0));
        assert_eq!(
            day_number("2024-03-01").unwrap() - day_number("2024-02-01").unwrap(),
            29
        );
        assert_eq!(
            day_number("2026-03-01").unwrap() - day_number("2026-02-01").unwrap(),
            28
        );
        assert_eq!(
            day_number("2026-12-31").unwrap() - day_number("2026-01-01").unwrap(),
            364
        );
        assert_eq!(day_number("2026-02-30"), None);
        assert_eq!(day_number("April 1"), None);
    }

    #[test]
    fn hand_computed_buckets_per_currency_and_converted() {
        // As of 2026-04-30. Days: A 0, B 30, C 31, D 60, E 61, F 90, G 91, H 120.
        let items = [
            item("A", "USD", "100.00", "2026-04-30"),
            item("B", "EUR", "200.00", "2026-03-31"),
            item("C", "EUR", "50.00", "2026-03-30"),
            item("D", "INR", "10000.00", "2026-02-29x"),
            item("D2", "INR", "10000.00", "2026-03-01"),
            item("E", "GBP", "10.00", "2026-02-28"),
            item("F", "USD", "1.00", "2026-01-30"),
            item("G", "XYZ", "5.00", "2026-01-29"),
            item("H", "EUR", "1000.00", "2025-12-31"),
        ];
        let r = aging_report(&items, "usd", "2026-04-30").unwrap();
        assert_eq!(r.base_currency, "USD");
        // "2026-02-29x" is not a date (2026 is not a leap year): skipped, named.
        assert_eq!(r.skipped.len(), 1);
        assert_eq!(r.skipped[0].invoice_id, "D");
        assert_eq!(r.item_count, 8);
        let days: BTreeMap<String, i64> = r
            .buckets
            .values()
            .flatten()
            .map(|e| (e.invoice_id.clone(), e.days))
            .collect();
        assert_eq!(days["A"], 0);
        assert_eq!(days["B"], 30);
        assert_eq!(days["C"], 31);
        assert_eq!(days["D2"], 60);
        assert_eq!(days["E"], 61);
        assert_eq!(days["F"], 90);
        assert_eq!(days["G"], 91);
        assert_eq!(days["H"], 120);
        // EUR 1.085, INR 0.012, GBP 1.265 USD per unit; XYZ is unknown (original amount).
        // 0_30: A 100 + B 217.00 = 317.00; 31_60: C 54.25 + D2 120.00 = 174.25;
        // 61_90: E 12.65 + F 1.00 = 13.65; 90_plus: G 5.00 + H 1085.00 = 1090.00.
        assert_eq!(r.bucket_totals.d0_30, d("317.00"));
        assert_eq!(r.bucket_totals.d31_60, d("174.25"));
        assert_eq!(r.bucket_totals.d61_90, d("13.65"));
        assert_eq!(r.bucket_totals.d90_plus, d("1090.00"));
        assert_eq!(r.total, d("1594.90"));
        assert_eq!(r.unconverted, vec!["G"]);
        let eur = &r.per_currency["EUR"];
        assert_eq!(eur.item_count, 3);
        assert_eq!(eur.total, d("1250.00"));
        assert_eq!(eur.bucket_totals.d0_30, d("200.00"));
        assert_eq!(eur.bucket_totals.d31_60, d("50.00"));
        assert_eq!(eur.bucket_totals.d90_plus, d("1000.00"));
        assert_eq!(eur.base_total, d("1356.25"));
        // Money is a JSON number with its exact digits.
        let v = serde_json::to_string(&r.bucket_totals).unwrap();
        assert_eq!(
            v,
            r#"{"0_30":317.00,"31_60":174.25,"61_90":13.65,"90_plus":1090.00}"#
        );
        // In EUR the same items convert the other way.
        let e = aging_report(&items, "EUR", "2026-04-30").unwrap();
        assert_eq!(e.per_currency["EUR"].base_total, d("1250.00"));
        assert_eq!(e.buckets["0_30"][0].base_amount, d("92.17"));
    }

    #[test]
    fn bad_base_or_date_is_refused() {
        assert!(aging_report(&[], "ZZZ", "2026-01-01")
            .unwrap_err()
            .contains("unknown base currency 'ZZZ'"));
        assert!(aging_report(&[], "USD", "01/02/2026")
            .unwrap_err()
            .contains("not YYYY-MM-DD"));
    }

    #[test]
    fn the_curated_queue_ages() {
        let set = FixtureSet::embedded().unwrap();
        let items = open_items(&set);
        assert!(items.len() >= 10, "{}", items.len());
        let as_of = latest_date(&items).unwrap();
        let r = aging_report(&items, "USD", &as_of).unwrap();
        assert_eq!(r.item_count + r.skipped.len(), items.len());
        let sum = r.bucket_totals.d0_30
            + r.bucket_totals.d31_60
            + r.bucket_totals.d61_90
            + r.bucket_totals.d90_plus;
        assert_eq!(sum, r.total);
        assert!(r.per_currency.len() >= 2, "{:?}", r.per_currency.keys());
    }
}
