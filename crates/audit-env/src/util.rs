//! Small shared helpers: calendar dates, score rounding, GSTIN identifiers,
//! decimal money on the wire and seeded randomness.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rust_decimal::prelude::ToPrimitive;
use rust_decimal::Decimal;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Fixed "today" of a single-task data set and of campaign period 1 (a Thursday). The wall clock
/// is never used.
pub const REFERENCE_DATE: Date = Date::from_ymd(2026, 1, 15);

/// "Today" of campaign period `p` (1-based): one calendar month per period after
/// [`REFERENCE_DATE`], so period 2 is 2026-02-15, period 3 is 2026-03-15, and so on.
pub fn period_reference_date(period: u32) -> Date {
    REFERENCE_DATE.add_months(period.max(1) as i32 - 1)
}

/// Seeded generator used for every random draw in the crate.
pub type Rng8 = ChaCha8Rng;

/// Build the generator for a given seed and purpose; different purposes give independent streams.
pub fn rng_for(seed: u64, stream: u64) -> Rng8 {
    let mut r = ChaCha8Rng::seed_from_u64(seed);
    r.set_stream(stream);
    r
}

/// A calendar date stored as days since 1970-01-01 (proleptic Gregorian).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date(pub i32);

impl Date {
    pub const fn from_ymd(y: i32, m: u32, d: u32) -> Date {
        // Howard Hinnant's days_from_civil.
        let y = if m <= 2 { y - 1 } else { y };
        let era = if y >= 0 { y } else { y - 399 } / 400;
        let yoe = y - era * 400;
        let mp = (m as i32 + 9) % 12;
        let doy = (153 * mp + 2) / 5 + d as i32 - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        Date(era * 146097 + doe - 719468)
    }

    pub fn ymd(self) -> (i32, u32, u32) {
        let z = self.0 + 719468;
        let era = if z >= 0 { z } else { z - 146096 } / 146097;
        let doe = z - era * 146097;
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
        let y = yoe + era * 400;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        (if m <= 2 { y + 1 } else { y }, m, d)
    }

    /// 0 = Monday … 6 = Sunday.
    pub fn weekday(self) -> u32 {
        // 1970-01-01 was a Thursday (3).
        ((self.0 + 3).rem_euclid(7)) as u32
    }

    pub fn is_weekend(self) -> bool {
        self.weekday() >= 5
    }

    pub fn add_days(self, n: i32) -> Date {
        Date(self.0 + n)
    }

    /// `n` days before this date.
    pub fn days_before(self, n: i32) -> Date {
        Date(self.0 - n)
    }

    /// The same day `n` calendar months later (the day is clamped to the month's length).
    pub fn add_months(self, n: i32) -> Date {
        let (y, m, d) = self.ymd();
        let idx = y * 12 + (m as i32 - 1) + n;
        let (ny, nm) = (idx.div_euclid(12), (idx.rem_euclid(12) + 1) as u32);
        let first_next = if nm == 12 {
            Date::from_ymd(ny + 1, 1, 1)
        } else {
            Date::from_ymd(ny, nm + 1, 1)
        };
        let last = (first_next.0 - Date::from_ymd(ny, nm, 1).0) as u32;
        Date::from_ymd(ny, nm, d.min(last))
    }

    /// "YYYY-MM" key used for monthly aggregation.
    pub fn month_key(self) -> (i32, u32) {
        let (y, m, _) = self.ymd();
        (y, m)
    }

    /// Move backwards until the date is a weekday.
    pub fn back_to_weekday(mut self) -> Date {
        while self.is_weekend() {
            self = self.add_days(-1);
        }
        self
    }

    pub fn parse(s: &str) -> Option<Date> {
        let mut it = s.split('-');
        let y: i32 = it.next()?.parse().ok()?;
        let m: u32 = it.next()?.parse().ok()?;
        let d: u32 = it.next()?.parse().ok()?;
        if it.next().is_some() || !(1..=12).contains(&m) || !(1..=31).contains(&d) {
            return None;
        }
        Some(Date::from_ymd(y, m, d))
    }
}

impl std::fmt::Display for Date {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (y, m, d) = self.ymd();
        write!(f, "{y:04}-{m:02}-{d:02}")
    }
}

impl Serialize for Date {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Date {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Date::parse(&s).ok_or_else(|| serde::de::Error::custom(format!("invalid date '{s}'")))
    }
}

/// Round the exact binary value of `x` to `n` decimals, ties to even (Python's `round`).
pub fn round_n(x: f64, n: usize) -> f64 {
    if !x.is_finite() {
        return 0.0;
    }
    format!("{x:.n$}").parse().unwrap_or(0.0)
}

/// `round_2`, then clamp into [0.01, 0.99].
/// Wall-clock Unix seconds (millisecond precision), for records outside the world (leaderboard).
pub fn unix_seconds() -> f64 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    round_n(d.as_secs_f64(), 3)
}

/// `num / den`, or `if_zero` when `den` is 0.
pub fn ratio(num: f64, den: f64, if_zero: f64) -> f64 {
    if den == 0.0 {
        if_zero
    } else {
        num / den
    }
}

/// The arithmetic mean, 0 for no values.
pub fn mean(xs: impl IntoIterator<Item = f64>) -> f64 {
    let xs: Vec<f64> = xs.into_iter().collect();
    ratio(xs.iter().sum(), xs.len() as f64, 0.0)
}

/// Append `item`, first dropping the oldest entry when `v` already holds `max`.
pub fn push_bounded<T>(v: &mut Vec<T>, item: T, max: usize) {
    if v.len() >= max {
        v.remove(0);
    }
    v.push(item);
}

pub fn clamp_score(x: f64) -> f64 {
    let r = round_n(x, 2);
    if r <= 0.01 || r.is_nan() {
        0.01
    } else if r >= 0.99 {
        0.99
    } else {
        r
    }
}

/// Money on the wire: a JSON number (integer when whole), read from a number or a string.
pub mod money {
    use super::*;

    pub fn serialize<S: Serializer>(v: &Decimal, s: S) -> Result<S::Ok, S::Error> {
        let n = v.normalize();
        if n.scale() == 0 {
            if let Some(i) = n.to_i64() {
                return s.serialize_i64(i);
            }
        }
        s.serialize_f64(n.to_f64().unwrap_or(0.0))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Decimal, D::Error> {
        <Decimal as Deserialize>::deserialize(d)
    }
}

/// Decimal → f64 for display and scoring arithmetic.
pub fn dec_f64(d: Decimal) -> f64 {
    d.to_f64().unwrap_or(0.0)
}

/// Round a decimal amount to paise with banker's rounding.
pub fn paise(d: Decimal) -> Decimal {
    d.round_dp(2)
}

// ---------------------------------------------------------------------------------------------
// GSTIN: 2-digit state code + 10-character PAN + entity code + 'Z' + check character.
// ---------------------------------------------------------------------------------------------

const GSTIN_ALPHABET: &[u8; 36] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";

fn gstin_value(c: u8) -> Option<u32> {
    GSTIN_ALPHABET
        .iter()
        .position(|&x| x == c)
        .map(|p| p as u32)
}

/// The GSTN check character for the first 14 characters.
pub fn gstin_check_char(first14: &str) -> Option<char> {
    let bytes = first14.as_bytes();
    if bytes.len() != 14 {
        return None;
    }
    let mut sum = 0u32;
    for (i, &b) in bytes.iter().enumerate() {
        let v = gstin_value(b)?;
        let factor = if i % 2 == 0 { 1 } else { 2 };
        let p = v * factor;
        sum += p / 36 + p % 36;
    }
    let check = (36 - sum % 36) % 36;
    Some(GSTIN_ALPHABET[check as usize] as char)
}

/// Full structural + checksum validation of a GSTIN.
pub fn gstin_is_valid(g: &str) -> bool {
    let b = g.as_bytes();
    if b.len() != 15 {
        return false;
    }
    let state: u32 = match g[0..2].parse() {
        Ok(v) => v,
        Err(_) => return false,
    };
    if !(1..=38).contains(&state) {
        return false;
    }
    let pan = &b[2..12];
    let pan_ok = pan[0..5].iter().all(u8::is_ascii_uppercase)
        && pan[5..9].iter().all(u8::is_ascii_digit)
        && pan[9].is_ascii_uppercase();
    if !pan_ok || !(b[12].is_ascii_uppercase() || (b'1'..=b'9').contains(&b[12])) || b[13] != b'Z' {
        return false;
    }
    gstin_check_char(&g[0..14]) == Some(b[14] as char)
}

/// The PAN embedded in a GSTIN (characters 3–12).
pub fn gstin_pan(g: &str) -> &str {
    g.get(2..12).unwrap_or("")
}

pub fn random_pan<R: Rng>(rng: &mut R) -> String {
    let mut s = String::with_capacity(10);
    for i in 0..10 {
        let c = match i {
            3 => 'C', // company holder type
            0..=4 | 9 => (b'A' + rng.random_range(0..26u8)) as char,
            _ => (b'0' + rng.random_range(0..10u8)) as char,
        };
        s.push(c);
    }
    s
}

pub fn gstin_from(state: &str, pan: &str, entity: char) -> String {
    let first = format!("{state}{pan}{entity}Z");
    let check = gstin_check_char(&first).unwrap_or('0');
    format!("{first}{check}")
}

pub fn random_gstin<R: Rng>(rng: &mut R, state: &str) -> String {
    let pan = random_pan(rng);
    let entity = (b'1' + rng.random_range(0..9u8)) as char;
    gstin_from(state, &pan, entity)
}

/// A GSTIN that looks plausible but fails validation (bad checksum or malformed PAN).
pub fn invalid_gstin<R: Rng>(rng: &mut R, state: &str) -> String {
    let valid = random_gstin(rng, state);
    let mut chars: Vec<char> = valid.chars().collect();
    if rng.random_bool(0.5) {
        // corrupt the checksum
        let c = chars[14];
        let mut n = (gstin_value(c as u8).unwrap_or(0) + 1 + rng.random_range(0..34)) % 36;
        if GSTIN_ALPHABET[n as usize] as char == c {
            n = (n + 1) % 36;
        }
        chars[14] = GSTIN_ALPHABET[n as usize] as char;
    } else {
        // a digit where the PAN needs a letter; checksum recomputed so only the format is wrong
        chars[2] = (b'0' + rng.random_range(0..10u8)) as char;
        let first: String = chars[..14].iter().collect();
        chars[14] = gstin_check_char(&first).unwrap_or('0');
    }
    chars.into_iter().collect()
}

pub fn pick<'a, T, R: Rng>(rng: &mut R, items: &'a [T]) -> &'a T {
    &items[rng.random_range(0..items.len())]
}

pub fn shuffle<T, R: Rng>(rng: &mut R, items: &mut [T]) {
    for i in (1..items.len()).rev() {
        let j = rng.random_range(0..=i);
        items.swap(i, j);
    }
}

/// Sample `k` distinct indices of `0..n` in random order.
pub fn sample_indices<R: Rng>(rng: &mut R, n: usize, k: usize) -> Vec<usize> {
    let mut all: Vec<usize> = (0..n).collect();
    shuffle(rng, &mut all);
    all.truncate(k.min(n));
    all
}

/// Deterministic opaque id from a seed and a counter (no OS randomness, reproducible runs).
/// An id that is not part of the seeded world (episode, session, campaign): 96 bits from the
/// operating system's random source, so no client can predict another's id.
pub fn random_id(prefix: &str) -> String {
    use rand::TryRngCore;
    let mut bytes = [0u8; 12];
    // The OS source failing is an unrecoverable platform fault; fall back to the thread RNG
    // (itself seeded from the OS) rather than hand out a predictable id.
    if rand::rngs::OsRng.try_fill_bytes(&mut bytes).is_err() {
        rand::Rng::fill(&mut rand::rng(), &mut bytes);
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{prefix}-{hex}")
}

/// A number from the operating system's random source (for draws that must not be predictable
/// or chosen by a client, such as a leaderboard run's seeds), with the thread RNG as fallback.
pub fn random_u64() -> u64 {
    use rand::TryRngCore;
    rand::rngs::OsRng
        .try_next_u64()
        .unwrap_or_else(|_| rand::Rng::random(&mut rand::rng()))
}

pub fn opaque_id(prefix: &str, seed: u64, counter: u64) -> String {
    let mut r = rng_for(seed ^ 0x05ee_d1d5, counter);
    let a: u64 = r.random();
    let b: u32 = r.random();
    format!("{prefix}-{a:016x}{b:08x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_round_trip_and_weekdays() {
        assert_eq!(REFERENCE_DATE.to_string(), "2026-01-15");
        assert_eq!(REFERENCE_DATE.weekday(), 3, "2026-01-15 is a Thursday");
        assert_eq!(Date::parse("2025-12-20").unwrap().weekday(), 5);
        for n in -800..800 {
            let d = REFERENCE_DATE.add_days(n);
            assert_eq!(Date::parse(&d.to_string()), Some(d));
        }
        assert!(Date::parse("2025-13-01").is_none());
    }

    #[test]
    fn months_and_period_dates() {
        assert_eq!(period_reference_date(1), REFERENCE_DATE);
        let p: Vec<String> = (1..=6)
            .map(|p| period_reference_date(p).to_string())
            .collect();
        assert_eq!(
            p,
            [
                "2026-01-15",
                "2026-02-15",
                "2026-03-15",
                "2026-04-15",
                "2026-05-15",
                "2026-06-15"
            ]
        );
        assert_eq!(period_reference_date(13).to_string(), "2027-01-15");
        assert_eq!(
            Date::from_ymd(2026, 1, 31).add_months(1).to_string(),
            "2026-02-28"
        );
        assert_eq!(
            Date::from_ymd(2028, 1, 31).add_months(1).to_string(),
            "2028-02-29"
        );
        assert_eq!(
            Date::from_ymd(2026, 3, 31).add_months(-1).to_string(),
            "2026-02-28"
        );
        assert_eq!(
            Date::from_ymd(2025, 12, 10).add_months(1).to_string(),
            "2026-01-10"
        );
        assert_eq!(REFERENCE_DATE.days_before(20).to_string(), "2025-12-26");
    }

    #[test]
    fn python_rounding_vectors() {
        assert_eq!(round_n(0.125, 2), 0.12);
        assert_eq!(round_n(0.375, 2), 0.38);
        assert_eq!(round_n(2.675, 2), 2.67);
        assert_eq!(clamp_score(-0.02 - 0.005 + 0.12), 0.1);
        assert_eq!(clamp_score(1.305), 0.99);
        assert_eq!(clamp_score(-3.0), 0.01);
    }

    #[test]
    fn gstin_checksum_known_value() {
        // Publicly documented sample GSTIN with a valid check character.
        assert!(gstin_is_valid("27AAPFU0939F1ZV"));
        assert!(!gstin_is_valid("27AAPFU0939F1ZA"));
        let mut r = rng_for(7, 0);
        for _ in 0..200 {
            let g = random_gstin(&mut r, "29");
            assert_eq!(g.len(), 15);
            assert!(gstin_is_valid(&g), "{g}");
            let bad = invalid_gstin(&mut r, "27");
            assert_eq!(bad.len(), 15);
            assert!(!gstin_is_valid(&bad), "{bad}");
        }
    }
}
