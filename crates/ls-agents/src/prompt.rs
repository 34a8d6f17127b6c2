//! The **action protocol**: the system message, the step prompt a policy sees and the reply
//! that answers it. The tool lists of the system message are generated from the one action
//! declaration (`ls_core::enums::ActionName`, the catalogue `ls_env::action` parses), so a new
//! action appears in the prompt without an edit here.

use crate::action::Action;
use ls_core::enums::{ActionKind, ActionName, Decision};
use ls_env::candidates::Candidate;
use ls_env::StepEnvelope;
use ls_rl::Ledger as EvidenceLedger;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::LazyLock;

/// The submission fields the system message names, in its order (each one of
/// `ls_core::submission::Submission::FIELDS`: tested).
pub const PROMPT_SUBMISSION_FIELDS: [&str; 6] = [
    "decision",
    "confidence",
    "reason_codes",
    "policy_checks",
    "evidence_map",
    "counterfactual",
];

/// The action names of one kind, in catalogue order, comma separated.
fn names_of(kind: ActionKind) -> String {
    ActionName::ALL
        .iter()
        .filter(|a| a.kind() == kind)
        .map(|a| a.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

static SYSTEM_PROMPT: LazyLock<String> = LazyLock::new(|| {
    let decisions: Vec<&str> = Decision::ALL.iter().map(|d| d.as_str()).collect();
    let final_fields = PROMPT_SUBMISSION_FIELDS[1..].join(", ");
    format!(
        "You are a LedgerShield accounts-payable control agent in a partially observable environment. \
Investigate with tools, use interventions when evidence calls for them, then submit a decision. \
Reply with exactly one JSON object and nothing else: {{\"action_type\": \"...\", \"payload\": {{...}}}}. \
Investigation actions: {}. \
Interventions: {}. \
Final: {} with payload {{{}: {}, {}}}.",
        names_of(ActionKind::Investigation),
        names_of(ActionKind::Intervention),
        ActionName::SubmitDecision.as_str(),
        PROMPT_SUBMISSION_FIELDS[0],
        decisions.join("|"),
        final_fields
    )
});

/// The system message of every model call (the protocol's fixed part), its tool lists built
/// from the action catalogue.
pub fn system_prompt() -> &'static str {
    &SYSTEM_PROMPT
}

/// Longest text of the last tool result shown to the model.
pub const MAX_RESULT_CHARS: usize = 3_000;
/// Most previous action types shown (and recorded) per prompt.
pub const MAX_HISTORY: usize = 24;

/// The user message for one step: the observation in `last` and the previous action types
/// (`history`, at most [`MAX_HISTORY`] are shown). `hint` is the hybrid tier's planner suggestion.
pub fn step_prompt(last: &StepEnvelope, history: &[String], hint: Option<&Action>) -> String {
    let o = &last.observation;
    let mut result = serde_json::to_string(&o.last_tool_result).unwrap_or_default();
    if result.chars().count() > MAX_RESULT_CHARS {
        result = result.chars().take(MAX_RESULT_CHARS).collect::<String>() + "…";
    }
    let docs: Vec<String> = o
        .visible_documents
        .iter()
        .map(|d| format!("{} ({})", d.doc_id, d.doc_type))
        .collect();
    let artifacts: Vec<String> = o
        .revealed_artifacts
        .iter()
        .map(|a| format!("{}: {}", a.artifact_id, a.summary))
        .collect();
    let shown = &history[..history.len().min(MAX_HISTORY)];
    let mut s = format!(
        "Case {} ({}), step {}/{}, budget {:.2}.\nInstruction: {}\nDocuments: {}\nObserved signals: {}\nPending artifacts: {}\nDelivered artifacts: {}\nPrevious actions: {}\nLast result: {}\n",
        o.case_id,
        o.task_type,
        o.step_count,
        o.max_steps,
        o.budget_remaining,
        o.instruction,
        docs.join(", "),
        o.risk_snapshot.observed_signals.join(", "),
        o.pending_events.len(),
        artifacts.join(" | "),
        shown.join("; "),
        result
    );
    if let Some(h) = hint {
        s.push_str(&format!(
            "A heuristic planner suggests: {}\n",
            serde_json::to_string(h).unwrap_or_default()
        ));
    }
    if o.max_steps.saturating_sub(o.step_count) <= 1 {
        s.push_str("This is your last step: submit_decision now.\n");
    }
    s.push_str("Return JSON only.");
    s
}

/// What a step prompt shows beyond the default (all off: the default prompt, byte for byte the
/// recorded training protocol).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PromptOptions {
    /// Show the evidence ledger (what the episode revealed so far: `ls_rl::ledger`).
    pub ledger: bool,
    /// Show the observation's legal candidate actions (`ls_env::candidates`), numbered.
    pub candidates: bool,
    /// Decode against the candidates: the action taken is always one of them (the reply names one
    /// by its number or writes it exactly; anything else takes the `NEEDS_REVIEW` submission).
    pub constrain: bool,
}

/// A candidate as an [`Action`].
pub fn candidate_action(c: &Candidate) -> Action {
    Action {
        action_type: c.action_type.to_owned(),
        payload: c.payload.clone(),
    }
}

/// `prompt` (a [`step_prompt`]) with the ledger and the numbered candidate actions inserted
/// before its last line (`Return JSON only.`), as the Python `ledger_prompt` inserts the ledger.
pub fn extend_prompt(
    prompt: &str,
    ledger: Option<&EvidenceLedger>,
    candidates: Option<&[Candidate]>,
) -> String {
    let mut extra = String::new();
    if let Some(text) = ledger.map(EvidenceLedger::render).filter(|t| !t.is_empty()) {
        extra.push_str("Evidence so far:\n");
        extra.push_str(&text);
        extra.push('\n');
    }
    if let Some(cands) = candidates.filter(|c| !c.is_empty()) {
        extra.push_str("Candidate actions (reply with one of them exactly, or its number):\n");
        for (i, c) in cands.iter().enumerate() {
            extra.push_str(&format!("{i} {}\n", action_target(&candidate_action(c))));
        }
    }
    match prompt.rfind('\n') {
        Some(cut) => format!("{}{extra}{}", &prompt[..=cut], &prompt[cut + 1..]),
        None => format!("{prompt}\n{extra}"),
    }
}

/// The candidate a reply chooses: its number, or an action equal to one of them.
pub fn choose_candidate<'a>(reply: &str, candidates: &'a [Candidate]) -> Option<&'a Candidate> {
    let t = reply.trim().trim_matches('`').trim();
    if let Ok(i) = t.parse::<usize>() {
        return candidates.get(i);
    }
    let a = crate::action::parse_action(t)?;
    candidates
        .iter()
        .find(|c| c.action_type == a.action_type && c.payload == a.payload)
}

/// The reply that answers a step prompt with `action`: one compact JSON object (sorted keys,
/// ASCII), `{"action_type": ..., "payload": {...}}`. [`crate::action::parse_action`] reads it back
/// unchanged.
pub fn action_target(action: &Action) -> String {
    compact_ascii_json(&json!({"action_type": action.action_type, "payload": action.payload}))
}

/// `v` with every object's keys in sorted order, recursively (the canonical form the prompts
/// and the exported training rows print).
pub fn sorted_keys(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let b: BTreeMap<&String, Value> = m.iter().map(|(k, x)| (k, sorted_keys(x))).collect();
            Value::Object(b.into_iter().map(|(k, x)| (k.clone(), x)).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted_keys).collect()),
        x => x.clone(),
    }
}

/// Compact JSON with sorted keys and non-ASCII escaped.
pub fn compact_ascii_json(v: &Value) -> String {
    let s = serde_json::to_string(&sorted_keys(v)).unwrap_or_else(|_| "null".into());
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut buf = [0u16; 2];
            for u in c.encode_utf16(&mut buf) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ls_core::submission::Submission;

    /// The system message as it was written by hand before the lists were generated: the
    /// recorded training data and the Python reproduction use it byte for byte (its lists are
    /// the catalogue of that time; the test compares the text around them).
    const HISTORICAL: &str = "You are a LedgerShield accounts-payable control agent in a partially observable environment. \
Investigate with tools, use interventions when evidence calls for them, then submit a decision. \
Reply with exactly one JSON object and nothing else: {\"action_type\": \"...\", \"payload\": {...}}. \
Investigation actions: zoom, get_doc_crop, ocr, lookup_vendor, lookup_vendor_history, lookup_policy, lookup_po, lookup_receipt, search_ledger, inspect_email_thread, compare_bank_account. \
Interventions: request_callback_verification, freeze_vendor_profile, request_bank_change_approval_chain, request_po_reconciliation, request_additional_receipt_evidence, route_to_procurement, route_to_security, flag_duplicate_cluster_review, create_human_handoff. \
Final: submit_decision with payload {decision: PAY|HOLD|NEEDS_REVIEW|ESCALATE_FRAUD, confidence, reason_codes, policy_checks, evidence_map, counterfactual}.";

    /// `text` with the names listed after each label replaced by `{label}` (the frame the
    /// lists sit in).
    fn frame(text: &str) -> String {
        let mut out = text.to_owned();
        for label in ["Investigation actions: ", "Interventions: "] {
            let start = out.find(label).expect(label) + label.len();
            let end = start + out[start..].find(". ").expect("a list ends with '. '");
            out.replace_range(start..end, &format!("{{{label}}}"));
        }
        out
    }

    #[test]
    fn system_prompt_is_generated_from_the_catalogue_and_unchanged() {
        // The text around the lists is the historical one byte for byte; the lists are the
        // catalogue's (so a new action changes the prompt only by its name).
        assert_eq!(frame(system_prompt()), frame(HISTORICAL));
        // Every catalogued action is named in the section of its kind, and nothing else is.
        let section = |label: &str| -> Vec<String> {
            let s = system_prompt();
            let start = s.find(label).expect(label) + label.len();
            s[start..]
                .split(". ")
                .next()
                .unwrap()
                .split(", ")
                .map(str::to_owned)
                .collect()
        };
        let listed: Vec<String> = section("Investigation actions: ")
            .into_iter()
            .chain(section("Interventions: "))
            .chain(["submit_decision".to_owned()])
            .collect();
        let catalogue: Vec<String> = ActionName::ALL
            .iter()
            .map(|a| a.as_str().to_owned())
            .collect();
        assert_eq!(listed, catalogue);
        // While the catalogue is the historical one, so is the whole prompt.
        let historical =
            |label: &str| HISTORICAL.contains(&format!("{label}{}.", section(label).join(", ")));
        if historical("Investigation actions: ") && historical("Interventions: ") {
            assert_eq!(system_prompt(), HISTORICAL);
        }
        for f in PROMPT_SUBMISSION_FIELDS {
            assert!(
                Submission::FIELDS.iter().any(|s| s.name == f),
                "the prompt names {f}, which the submission does not read"
            );
        }
        for d in Decision::ALL {
            assert!(system_prompt().contains(d.as_str()));
        }
    }
}
