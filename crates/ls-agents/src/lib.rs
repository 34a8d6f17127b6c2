//! `ls-agents`: agents that play LedgerShield through its public interface only.
//!
//! * [`action`]: the [`Action`] an agent takes (action name and JSON payload).
//! * [`prompt`]: the action protocol: the system message (tool lists generated from the action
//!   catalogue), the step prompt and the reply that answers it.
//! * [`client`]: the environment interface ([`EnvClient`]) with in-process and HTTP implementations.
//! * [`runner`]: the [`Agent`] trait, [`run_episode`] and the recorded [`EpisodeRecord`].
//! * [`baselines`]: seeded `random`, `naive-pay`, `always-escalate`.
//! * [`teacher`]: the deterministic investigating teacher (observations and tool results only).
//! * [`redteam`]: evidence-blind gaming policies (the red-team suite's agents).
//! * [`learned`]: the learned attacker (blind probe features, per-family scan, random forest, acting policy).
//! * The evidence ledger a policy can be shown is `ls_rl::ledger` (one ledger for prompts, the
//!   structured observation and the Python training code).
//! * [`facts`]: reading OCR lines into invoices and emails with their token references (declared
//!   in `ls-rl`, whose evidence ledger reads them too; re-exported here).
//! * [`llm`]: an OpenAI-compatible chat-completions agent (every model played alike), retries,
//!   and the `[START]`/`[STEP]`/`[END]` stdout contract.
//! * [`assist`]: the llm agent's assistance options (teacher hint, repair, guardrails), off by
//!   default, and the [`Harness`] a run's provenance records.
//! * [`guardrails`]: agent-side guardrails on submissions (an assistance option).
//! * [`audit`]: auditors for the Financial Audit environment (the LLM auditor, the rule-based
//!   baseline), single tasks and campaigns, in process or over HTTP, with the seed's stdout
//!   contract.
//! * [`chat`]: one OpenAI-compatible call: reply reading, token usage, a bounded blocking client.
//! * [`outbound`]: the bounded HTTP transport every model call goes through (checked base URL,
//!   deadline, cancellation, reply cap, no redirects, optionally opaque errors).
//!
//! No agent reads `case.gold` or the hidden world: they see `StepEnvelope`s, nothing else.

pub mod action;
pub mod assist;
pub mod audit;
pub mod baselines;
pub mod chat;
pub mod client;
pub use ls_rl::facts;
pub mod guardrails;
pub mod learned;
pub mod llm;
pub mod outbound;
pub mod prompt;
pub mod redteam;
pub mod runner;
pub mod teacher;

pub use assist::{Assistance, Harness};
pub use baselines::{FixedDecisionAgent, RandomAgent};
pub use chat::CallStats;
pub use client::{ClientError, EnvClient, HttpEnv, LocalEnv};
pub use llm::{LlmAgent, LlmConfig};
pub use redteam::{GamingAgent, GamingFamily};
pub use runner::{run_episode, Action, Agent, EpisodeRecord, Silent, StepObserver, StepRecord};
pub use teacher::{TeacherAgent, TeacherConfig};

/// Agents that need no external service.
pub const OFFLINE_AGENTS: [&str; 4] = ["teacher", "random", "naive-pay", "always-escalate"];

/// The checklist-PAY red-team policy ([`redteam::ChecklistPay`]): the family's checks, every
/// follow-up the control boundary announces, PAY citing the record ids passed to the checks.
/// Registry name of the mechanical checklist-PAY policy (`redteam::ChecklistPay`).
pub const CHECKLIST_PAY: &str = "game-checklist-pay";
/// Registry name of the random-decision policy (`redteam::Gate::Random` with p = 0.5).
pub const RANDOM_DECISION: &str = "game-random-decision";

/// Build an offline agent by name.
pub fn offline_agent(name: &str) -> Option<Box<dyn Agent>> {
    Some(match name {
        "teacher" => Box::new(TeacherAgent::new()),
        "random" => Box::new(RandomAgent::default()),
        "naive-pay" | "naive_pay" => Box::new(FixedDecisionAgent::NAIVE_PAY),
        "always-escalate" | "always_escalate" => Box::new(FixedDecisionAgent::ALWAYS_ESCALATE),
        "teacher-no-controls" => Box::new(TeacherAgent::with_config(TeacherConfig {
            interventions: false,
            ..Default::default()
        })),
        "teacher-no-certificate" => Box::new(TeacherAgent::with_config(TeacherConfig {
            certificate: false,
            ..Default::default()
        })),
        "teacher-no-artifact-wait" => Box::new(TeacherAgent::with_config(TeacherConfig {
            wait_for_artifacts: false,
            ..Default::default()
        })),
        CHECKLIST_PAY => Box::new(redteam::ChecklistPay::default()),
        RANDOM_DECISION => Box::new(redteam::GatedPolicy::new(redteam::Gate::Random {
            p_pay: 0.5,
        })),
        other => Box::new(GamingAgent::new(GamingFamily::parse(other)?)),
    })
}

/// Every intervention's wire name but the hand-off's (which needs a packet): what the policies
/// and probes that "take every intervention" must list, each in its own order.
#[cfg(test)]
pub(crate) fn interventions_but_handoff() -> std::collections::BTreeSet<&'static str> {
    ls_core::ActionName::interventions()
        .filter(|&a| a != ls_core::ActionName::CreateHumanHandoff)
        .map(ls_core::ActionName::as_str)
        .collect()
}
