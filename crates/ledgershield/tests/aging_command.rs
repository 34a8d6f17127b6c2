//! `ledgershield aging` over the embedded fixtures: buckets add up per currency and converted,
//! and a bad base currency or date is refused with a message.

use serde_json::Value;
use std::process::Command;

fn aging(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_ledgershield"))
        .arg("aging")
        .args(args)
        .env_remove("LEDGERSHIELD_FIXTURES")
        .output()
        .unwrap()
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap()
}

#[test]
fn aging_json_adds_up_and_bad_input_is_refused() {
    let o = aging(&["--format", "json", "--as-of", "2026-06-30", "--base", "EUR"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["base_currency"], "EUR");
    assert_eq!(r["as_of"], "2026-06-30");
    let b = &r["bucket_totals"];
    let sum: f64 = ["0_30", "31_60", "61_90", "90_plus"]
        .iter()
        .map(|k| num(&b[k]))
        .sum();
    assert!(
        (sum - num(&r["total"])).abs() < 0.005,
        "{b} vs {}",
        r["total"]
    );
    // Later as-of dates move items into older buckets: by June 30 nothing is under 31 days.
    assert_eq!(num(&b["0_30"]), 0.0, "{b}");
    let eur = &r["per_currency"]["EUR"];
    assert!((num(&eur["total"]) - num(&eur["base_total"])).abs() < 0.005);
    let items: usize = r["buckets"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_array().unwrap().len())
        .sum();
    assert_eq!(items as u64, r["item_count"].as_u64().unwrap());

    let bad = aging(&["--base", "ZZZ"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("unknown base currency 'ZZZ'"));
    let bad = aging(&["--as-of", "30/06/2026"]);
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not YYYY-MM-DD"));
}
