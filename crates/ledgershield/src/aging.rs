//! `ledgershield aging`: the multi-currency aging report of the open AP items (docs/reports.md).

use anyhow::{Context, Result};
use clap::ValueEnum;
use ls_report::aging::{aging_report, latest_date, open_items, AgingReport, BUCKETS};

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum AgingFormat {
    Json,
    Table,
}

#[derive(clap::Args, Debug, Clone)]
pub struct AgingArgs {
    /// Currency every item is converted to (no spread).
    #[arg(long, default_value = "USD")]
    pub base: String,
    /// Age as of this date (YYYY-MM-DD); default: the latest item date.
    #[arg(long)]
    pub as_of: Option<String>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: AgingFormat,
}

pub fn run(args: AgingArgs, set: &ls_core::FixtureSet) -> Result<()> {
    let items = open_items(set);
    let as_of = match &args.as_of {
        Some(d) => d.clone(),
        None => latest_date(&items).context("no open item has a date; pass --as-of")?,
    };
    let r = aging_report(&items, &args.base, &as_of).map_err(anyhow::Error::msg)?;
    match args.format {
        AgingFormat::Json => println!("{}", serde_json::to_string_pretty(&r)?),
        AgingFormat::Table => print_table(&r),
    }
    Ok(())
}

fn print_table(r: &AgingReport) {
    println!(
        "aging of {} open items as of {} (base {})",
        r.item_count, r.as_of, r.base_currency
    );
    println!(
        "{:<10} {:>6} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14}",
        "currency", "items", "0_30", "31_60", "61_90", "90_plus", "total", "base total"
    );
    for (c, x) in &r.per_currency {
        let t = &x.bucket_totals;
        println!(
            "{c:<10} {:>6} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14}",
            x.item_count, t.d0_30, t.d31_60, t.d61_90, t.d90_plus, x.total, x.base_total
        );
    }
    let b = &r.bucket_totals;
    println!(
        "{:<10} {:>6} {:>14} {:>14} {:>14} {:>14} {:>14} {:>14}",
        format!("all {}", r.base_currency),
        r.item_count,
        b.d0_30,
        b.d31_60,
        b.d61_90,
        b.d90_plus,
        r.total,
        r.total
    );
    for bucket in BUCKETS {
        let n = r.buckets.get(bucket).map_or(0, Vec::len);
        println!("{bucket}: {n} items");
    }
    if !r.unconverted.is_empty() {
        println!(
            "counted at original amount (no FX rate): {}",
            r.unconverted.join(", ")
        );
    }
    for s in &r.skipped {
        println!("skipped {}: {}", s.invoice_id, s.reason);
    }
}
