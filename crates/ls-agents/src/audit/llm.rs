//! The LLM auditor: any OpenAI-compatible endpoint audits a task's documents and reviews a
//! period's findings as the overseer.
//!
//! One model call per task: the task description, the error types a finding may name, in a
//! campaign the role's context (policy updates and notices, active instructions, pending
//! regulatory shocks, the last prior-period findings), and the documents, one compact JSON row
//! per line. Rows past the prompt's character budget are left out evenly across the documents'
//! lists, and the prompt says how many were shown (the record keeps both counts). The reply is
//! read as a JSON array of findings (code fences stripped; when the array does not parse, every
//! object in the text that names a document and a type is salvaged); a finding needs a document
//! id and one of the task's types, repeats are dropped, at most the step's finding limit is kept.
//! A refusal or a failed call leaves the task with no findings and the reason in the record. The
//! overseer is asked for `approve`/`reject`/`escalate` on each finding of the period by its ref;
//! decisions on refs it was not shown, or with another verdict, are dropped.
//!
//! Nothing depends on the model's name, and the auditor has no assistance options: every model is
//! prompted, capped and read alike.

use super::{AuditHarness, AuditPolicy, Findings, TaskView};
use crate::chat::{CallStats, ChatClient, Endpoint, Reply};
use audit_env::campaign::Instruction;
use serde_json::{json, Map, Value};

/// Default prompt budget in characters (documents of every task fit: the largest, GST and
/// fraud, are about 20,000 characters rendered).
pub const DEFAULT_PROMPT_CHARS: usize = 48_000;
/// Default reply cap (the seed's CLI uses 4096).
pub const DEFAULT_AUDIT_MAX_TOKENS: u32 = 4096;
/// Longest description kept per finding.
const MAX_DESCRIPTION_CHARS: usize = 300;
/// Prior-period findings shown in a campaign prompt.
const HISTORY_SHOWN: usize = 10;

const SYSTEM: &str = "You are a financial auditor. You read accounting documents and report every error, policy violation and discrepancy you can establish from them, and nothing you cannot. \
Reply with a JSON array and nothing else. Each element is one finding: {\"document_id\": \"<id of the document with the error>\", \"error_type\": \"<one of the allowed error types>\", \"description\": \"<what is wrong>\", \"confidence\": <0..1>}. \
Reply [] when you find nothing.";

const OVERSEER: &str = "You are the overseer of an audit team. You review each finding the specialists submitted and decide whether it stands. \
Reply with a JSON array and nothing else: [{\"finding_ref\": \"<ref exactly as listed>\", \"verdict\": \"approve\" | \"reject\" | \"escalate\"}]. \
A finding you leave out stays undecided (it counts as approved).";

pub struct LlmAuditor {
    pub client: ChatClient,
    pub prompt_chars: usize,
}

impl LlmAuditor {
    pub fn new(endpoint: Endpoint, prompt_chars: usize) -> Self {
        Self {
            client: ChatClient::new(endpoint),
            prompt_chars: prompt_chars.max(2_000),
        }
    }

    /// The user message for one task.
    pub fn task_prompt(&self, view: &TaskView<'_>) -> (String, (usize, usize)) {
        let o = view.observation;
        let mut s = String::new();
        if let Some((role, start)) = view.campaign {
            s.push_str(&campaign_context(role, start));
        }
        s.push_str(&format!(
            "Task: {}\n{}\n\nAllowed error types: {}\n",
            view.task,
            o.get("task_description")
                .and_then(Value::as_str)
                .unwrap_or(""),
            view.valid_types.join(", ")
        ));
        if let Some(n) = o.pointer("/metadata/notices").filter(|n| is_nonempty(n)) {
            s.push_str(&format!("Rule changes in force: {}\n", compact(n)));
        }
        let budget = self.prompt_chars.saturating_sub(s.len() + 200);
        let (docs, rows) = render_documents(o.get("documents").unwrap_or(&Value::Null), budget);
        s.push_str("\nDocuments:\n");
        s.push_str(&docs);
        s.push_str("\nReply with the JSON array of findings only.");
        (s, rows)
    }

    fn ask(&mut self, system: &str, user: &str) -> Result<String, String> {
        match self.client.complete(system, user) {
            Reply::Text(t) => Ok(t),
            Reply::Refusal(r) => Err(format!("model refused: {r}")),
            Reply::Failed(e) => Err(format!("model call failed: {e}")),
        }
    }
}

fn is_nonempty(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Array(a) => !a.is_empty(),
        Value::Object(m) => !m.is_empty(),
        Value::String(s) => !s.is_empty(),
        _ => true,
    }
}

fn compact(v: &Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// A campaign role's context: period, role, policy updates, instructions, shocks, memory.
fn campaign_context(role: &str, start: &Value) -> String {
    let mut s = format!(
        "You are the {role} of a multi-period audit (period {}).\n",
        start
            .pointer("/observation/current_period")
            .and_then(Value::as_u64)
            .unwrap_or(1)
    );
    if let Some(u) = start
        .pointer("/world_state/policy_updates")
        .filter(|u| is_nonempty(u))
    {
        s.push_str(&format!("Policy updates: {}\n", compact(u)));
    }
    let instructions: Vec<String> = start
        .get("active_instructions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|i| {
            format!(
                "- [{}] {}",
                i.get("id").and_then(Value::as_str).unwrap_or(""),
                i.get("text").and_then(Value::as_str).unwrap_or("")
            )
        })
        .collect();
    if !instructions.is_empty() {
        s.push_str(&format!("Instructions:\n{}\n", instructions.join("\n")));
    }
    if let Some(sh) = start
        .get("pending_regulatory_shocks")
        .filter(|v| is_nonempty(v))
    {
        s.push_str(&format!("Regulatory shocks in force: {}\n", compact(sh)));
    }
    let history: Vec<String> = start
        .get("findings_history")
        .and_then(Value::as_array)
        .map(|h| {
            h.iter()
                .rev()
                .take(HISTORY_SHOWN)
                .map(|e| {
                    format!(
                        "- period {}: {} {}",
                        e.get("period").and_then(Value::as_u64).unwrap_or(0),
                        e.get("document_id").and_then(Value::as_str).unwrap_or(""),
                        e.get("error_type").and_then(Value::as_str).unwrap_or("")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    if !history.is_empty() {
        s.push_str(&format!(
            "Findings of earlier periods (latest {HISTORY_SHOWN}):\n{}\n",
            history.join("\n")
        ));
    }
    s.push('\n');
    s
}

/// The documents as text within `budget` characters: every object (policy, context) whole, then
/// the rows of every list, one compact JSON line each, taken in turn from each list until the
/// budget is spent. Returns the text and (rows shown, rows in all).
pub fn render_documents(docs: &Value, budget: usize) -> (String, (usize, usize)) {
    let Some(map) = docs.as_object() else {
        return (compact(docs), (0, 0));
    };
    let mut head = String::new();
    let mut lists: Vec<(&String, Vec<String>)> = Vec::new();
    for (k, v) in map {
        match v {
            Value::Array(rows) => lists.push((k, rows.iter().map(compact).collect())),
            other => head.push_str(&format!("## {k}\n{}\n", compact(other))),
        }
    }
    let total: usize = lists.iter().map(|(_, r)| r.len()).sum();
    // Each list's heading line ("## name (k of n rows shown)").
    let headings: usize = lists.iter().map(|(k, _)| k.len() + 40).sum();
    let mut left = budget.saturating_sub(head.len() + headings);
    let mut shown = vec![0usize; lists.len()];
    let mut progressed = true;
    while progressed {
        progressed = false;
        for (i, (_, rows)) in lists.iter().enumerate() {
            if let Some(r) = rows.get(shown[i]).filter(|r| r.len() < left) {
                left -= r.len() + 1;
                shown[i] += 1;
                progressed = true;
            }
        }
    }
    let mut s = head;
    for ((k, rows), n) in lists.iter().zip(&shown) {
        if *n < rows.len() {
            s.push_str(&format!("## {k} ({n} of {} rows shown)\n", rows.len()));
        } else {
            s.push_str(&format!("## {k} ({} rows)\n", rows.len()));
        }
        for r in &rows[..*n] {
            s.push_str(r);
            s.push('\n');
        }
    }
    (s, (shown.iter().sum(), total))
}

/// The JSON values a reply holds: the first array that parses (after a code fence), else every
/// object in the text that parses on its own.
fn json_items(text: &str) -> Vec<Value> {
    let t = text.trim();
    let t = t
        .strip_prefix("```json")
        .or_else(|| t.strip_prefix("```"))
        .unwrap_or(t);
    let t = t.trim().trim_end_matches("```");
    if let Some(i) = t.find('[') {
        let mut de = serde_json::Deserializer::from_str(&t[i..]).into_iter::<Value>();
        if let Some(Ok(Value::Array(items))) = de.next() {
            return items;
        }
    }
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = t[from..].find('{').map(|i| from + i) {
        let mut de = serde_json::Deserializer::from_str(&t[i..]).into_iter::<Value>();
        match de.next() {
            Some(Ok(v @ Value::Object(_))) => {
                out.push(v);
                from = i + de.byte_offset();
            }
            _ => from = i + 1,
        }
    }
    out
}

fn text_field(o: &Map<String, Value>, k: &str) -> Option<String> {
    match o.get(k)? {
        Value::String(s) => Some(s.trim().to_owned()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
    .filter(|s| !s.is_empty())
}

/// The usable findings of a reply, and how many it wrote that were not (see the module docs).
pub fn parse_findings(text: &str, valid: &[String], max: usize) -> (Vec<Value>, usize) {
    let mut out: Vec<Value> = Vec::new();
    let mut dropped = 0;
    for item in json_items(text) {
        let Some(o) = item.as_object() else {
            dropped += 1;
            continue;
        };
        let doc = text_field(o, "document_id").filter(|d| d.chars().count() <= 100);
        let ty =
            text_field(o, "error_type").map(|t| t.to_ascii_lowercase().replace([' ', '-'], "_"));
        let (Some(doc), Some(ty)) = (doc, ty) else {
            dropped += 1;
            continue;
        };
        let known = valid.is_empty() || valid.contains(&ty);
        let repeat = out
            .iter()
            .any(|f| f["document_id"] == doc && f["error_type"] == ty);
        if !known || repeat || out.len() >= max {
            dropped += 1;
            continue;
        }
        let mut f = json!({
            "document_id": doc,
            "error_type": ty,
            "description": text_field(o, "description")
                .map(|d| d.chars().take(MAX_DESCRIPTION_CHARS).collect::<String>())
                .unwrap_or_else(|| "Finding".into()),
        });
        if let Some(c) = o
            .get("confidence")
            .and_then(Value::as_f64)
            .filter(|c| c.is_finite())
        {
            f["confidence"] = json!(c.clamp(0.0, 1.0));
        }
        out.push(f);
    }
    (out, dropped)
}

/// The overseer's usable decisions: refs it was shown, verdicts approve/reject/escalate, once.
pub fn parse_decisions(text: &str, refs: &[String]) -> (Vec<Value>, usize) {
    let mut out: Vec<Value> = Vec::new();
    let mut dropped = 0;
    for item in json_items(text) {
        let o = item.as_object();
        let r = o.and_then(|o| text_field(o, "finding_ref"));
        let v = o
            .and_then(|o| text_field(o, "verdict"))
            .map(|v| v.to_ascii_lowercase());
        match (r, v) {
            (Some(r), Some(v))
                if refs.contains(&r)
                    && ["approve", "reject", "escalate"].contains(&v.as_str())
                    && !out.iter().any(|d| d["finding_ref"] == r) =>
            {
                out.push(json!({"finding_ref": r, "verdict": v}));
            }
            _ => dropped += 1,
        }
    }
    (out, dropped)
}

/// A finding's overseer ref: `ROLE:DOC:type`.
pub fn finding_ref(submitted: &Value) -> String {
    format!(
        "{}:{}:{}",
        submitted["role"].as_str().unwrap_or(""),
        submitted["finding"]["document_id"].as_str().unwrap_or(""),
        submitted["finding"]["error_type"].as_str().unwrap_or("")
    )
}

impl AuditPolicy for LlmAuditor {
    fn name(&self) -> String {
        "audit-llm".into()
    }
    fn model(&self) -> String {
        self.client.endpoint.model.clone()
    }
    fn agent_type(&self) -> String {
        "llm-auditor".into()
    }
    fn findings(&mut self, view: &TaskView<'_>) -> Findings {
        let (prompt, rows) = self.task_prompt(view);
        match self.ask(SYSTEM, &prompt) {
            Ok(text) => {
                let (findings, dropped) =
                    parse_findings(&text, &view.valid_types, view.max_findings);
                let error = (findings.is_empty() && !text.trim_start().starts_with('['))
                    .then(|| "model reply holds no findings array".to_owned());
                Findings {
                    findings,
                    dropped,
                    error,
                    rows,
                }
            }
            Err(e) => Findings {
                error: Some(e),
                rows,
                ..Default::default()
            },
        }
    }
    fn review(
        &mut self,
        period: u32,
        submitted: &[Value],
        instructions: &[Instruction],
    ) -> Findings {
        if submitted.is_empty() {
            return Findings::default();
        }
        let refs: Vec<String> = submitted.iter().map(finding_ref).collect();
        let lines: Vec<String> = submitted
            .iter()
            .zip(&refs)
            .map(|(s, r)| {
                format!(
                    "- {r}: {}",
                    s["finding"]["description"].as_str().unwrap_or("")
                )
            })
            .collect();
        let prompt = format!(
            "Period {period}. Active instructions: {}\n\nFindings:\n{}\n\nReply with the JSON array of decisions only.",
            serde_json::to_string(instructions).unwrap_or_default(),
            lines.join("\n")
        );
        match self.ask(OVERSEER, &prompt) {
            Ok(text) => {
                let (findings, dropped) = parse_decisions(&text, &refs);
                Findings {
                    findings,
                    dropped,
                    ..Default::default()
                }
            }
            Err(e) => Findings {
                error: Some(e),
                ..Default::default()
            },
        }
    }
    fn call_stats(&self) -> Option<CallStats> {
        Some(self.client.stats)
    }
    fn harness(&self) -> Option<AuditHarness> {
        let e = &self.client.endpoint;
        Some(AuditHarness {
            harness: crate::assist::Harness {
                track: crate::assist::UNASSISTED.into(),
                assistance: Vec::new(),
                max_tokens: e.max_tokens,
                temperature: e.temperature,
            },
            prompt_chars: self.prompt_chars,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn types() -> Vec<String> {
        vec!["over_limit".into(), "weekend_expense".into()]
    }

    #[test]
    fn findings_are_read_from_arrays_fences_and_salvaged_objects() {
        let (f, d) = parse_findings(
            "```json\n[{\"document_id\": \"EXP-1\", \"error_type\": \"Over Limit\", \"confidence\": 3}, {\"document_id\": \"EXP-1\", \"error_type\": \"over_limit\"}, {\"document_id\": \"EXP-2\", \"error_type\": \"made_up\"}, 7]\n```",
            &types(),
            200,
        );
        assert_eq!(f.len(), 1);
        assert_eq!(f[0]["error_type"], "over_limit");
        assert_eq!(f[0]["confidence"], 1.0);
        assert_eq!(f[0]["description"], "Finding");
        assert_eq!(d, 3);
        // A truncated array: the complete objects are salvaged.
        let (f, _) = parse_findings(
            "Here: [{\"document_id\": \"EXP-3\", \"error_type\": \"weekend_expense\"}, {\"document_id\": \"EXP-4\", \"err",
            &types(),
            200,
        );
        assert_eq!(f.len(), 1);
        assert_eq!(f[0]["document_id"], "EXP-3");
        let (f, d) = parse_findings("I cannot audit these.", &types(), 200);
        assert!(f.is_empty() && d == 0);
        // The step's limit holds.
        let many: Vec<Value> = (0..5)
            .map(|i| json!({"document_id": format!("EXP-{i}"), "error_type": "over_limit"}))
            .collect();
        let (f, d) = parse_findings(&Value::Array(many).to_string(), &types(), 3);
        assert_eq!((f.len(), d), (3, 2));
    }

    #[test]
    fn decisions_keep_only_shown_refs_and_known_verdicts() {
        let refs = vec!["expense_specialist:EXP-1:over_limit".to_owned()];
        let (d, dropped) = parse_decisions(
            "[{\"finding_ref\": \"expense_specialist:EXP-1:over_limit\", \"verdict\": \"Reject\"}, {\"finding_ref\": \"x:y:z\", \"verdict\": \"approve\"}, {\"finding_ref\": \"expense_specialist:EXP-1:over_limit\", \"verdict\": \"maybe\"}]",
            &refs,
        );
        assert_eq!(
            d,
            vec![json!({"finding_ref": refs[0], "verdict": "reject"})]
        );
        assert_eq!(dropped, 2);
    }

    #[test]
    fn documents_are_cut_evenly_and_the_cut_is_said() {
        let rows: Vec<Value> = (0..50)
            .map(|i| json!({"id": format!("R-{i:03}"), "amount": i}))
            .collect();
        let docs = json!({"policy": {"limit": 5}, "a": rows.clone(), "b": rows});
        let (all, (shown, total)) = render_documents(&docs, 100_000);
        assert_eq!((shown, total), (100, 100));
        assert!(all.contains("## a (50 rows)") && all.contains("## policy"));
        let (cut, (shown, total)) = render_documents(&docs, 1_500);
        assert!(cut.len() <= 1_500, "{}", cut.len());
        assert_eq!(total, 100);
        assert!(shown > 10 && shown < 100, "{shown}");
        let a = cut
            .lines()
            .filter(|l| l.contains("R-") && l.starts_with('{'))
            .count();
        assert!(cut.contains("rows shown)"));
        assert_eq!(a, shown);
    }
}
