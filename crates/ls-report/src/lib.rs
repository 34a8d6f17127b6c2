//! `ls-report`: the LedgerShield ControlBench benchmark report.
//!
//! * [`gen`]: the boundary to case generation ([`CaseSource`]); [`LsGen`] wires `ls-gen`.
//! * [`aging`]: the multi-currency aging report (30/60/90/90+ per currency and converted).
//! * [`audit_board`]: the Financial Audit leaderboard of stored auditor runs (LLM and baseline).
//! * [`compare`]: live multi-model comparison (`ledgershield compare`).
//! * [`eval`]: running agents in-process (fresh environment per trial, or one per sequence).
//! * [`gaming`]: the `gaming_resistance` section (evidence-blind gaming policies per pool).
//! * [`headline`]: the headline score, paired discrimination over twin pairs.
//! * [`metrics`]: stats, per-case rows, aggregate metrics, section summaries.
//! * [`report`]: every documented track in the documented order ([`build_report`]).
//! * [`product`]: leaderboard entries, Certify, visualization payloads with honest fallbacks.
//! * [`human`]: the human-baseline loader (never fabricates data).
//! * [`stored`]: stored runs of any agent (an external model, `run --url`) on the leaderboard.
//! * [`render`]: markdown and HTML; [`html`]: the HTML page (tables, inline SVG charts with axes);
//!   [`tables`]: the tables both show, built once.

pub mod aging;
pub mod audit_board;
pub mod causal_query;
pub mod compare;
pub mod eval;
pub mod gaming;
pub mod gen;
pub mod headline;
pub mod html;
pub mod human;
pub mod metrics;
pub mod product;
pub mod render;
pub mod report;
pub mod stored;
pub mod tables;

pub use eval::{EvalConfig, MemorySnapshot};
pub use gen::{CaseSource, LsGen};
pub use product::{
    certify, leaderboard, leaderboard_entries, visualization, CertifyReport, CertifyRequest,
    Leaderboard, LeaderboardEntry, Visualization,
};
pub use report::{build_report, build_report_with_progress, BenchmarkReport, ReportConfig};
