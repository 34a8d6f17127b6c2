//! The evidence ledger: what an episode has revealed so far, compact enough to ride in every step
//! prompt, so that a submission can be written from the current prompt alone.
//!
//! The Rust counterpart of `python/ledgershield/training/ledger.py` (which defines it): the same
//! folding rules (identifier fields, tool verdicts and amounts, OCR lines carrying a value or a
//! control cue, observed signals) and the same rendered sections. It reads only the observations
//! the agent was given.

use serde_json::{Map, Value};

const MAX_VALUE_CHARS: usize = 60;
const MAX_LINE_CHARS: usize = 56;
/// Top-level result keys that are not evidence.
const SKIP_KEYS: [&str; 17] = [
    "tool_name",
    "control_boundary",
    "reward_model",
    "cost",
    "novel_signal_count",
    "scope",
    "message",
    "success",
    "tokens",
    "focus_tokens",
    "text_preview",
    "focus_text",
    "visual_tokens",
    "bbox",
    "page",
    "mode",
    "crop_hint",
];
/// Tools whose verdicts and amounts the ledger keeps.
const VALUE_TOOLS: [&str; 8] = [
    "lookup_vendor",
    "lookup_vendor_history",
    "lookup_po",
    "lookup_receipt",
    "search_ledger",
    "inspect_email_thread",
    "compare_bank_account",
    "lookup_policy",
];
const VALUE_WORDS: [&str; 17] = [
    "amount", "total", "subtotal", "tax", "count", "match", "matched", "score", "status",
    "verdict", "approved", "currency", "date", "days", "risk", "spoof", "urgency",
];
const CUE_WORDS: [&str; 22] = [
    "bank",
    "account",
    "urgent",
    "skip",
    "approv",
    "verif",
    "callback",
    "change",
    "override",
    "immediately",
    "confidential",
    "wire",
    "remit",
    "invoice",
    "payment",
    "release",
    "bypass",
    "new",
    "update",
    "portal",
    "duplicate",
    "resend",
];
const BOILERPLATE: [&str; 10] = [
    "to",
    "cc",
    "sent",
    "importance",
    "customer no",
    "bill to",
    "vat",
    "gstin",
    "thank you",
    "printed from",
];

/// A key whose string values are identifiers a submission may cite.
fn id_key(key: &str) -> bool {
    let last = key.rsplit('_').next().unwrap_or(key);
    matches!(
        last,
        "id" | "ids" | "key" | "number" | "account" | "thread" | "link" | "links"
    )
}

fn value_key(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    VALUE_WORDS.iter().any(|w| k.contains(w))
}

/// An OCR line worth keeping: a value (a digit, a `label:`) or a control cue, not boilerplate.
fn kept_line(text: &str) -> bool {
    let lower = text.to_lowercase();
    let cue = text.chars().any(|c| c.is_ascii_digit() || c == ':')
        || CUE_WORDS.iter().any(|w| lower.contains(w));
    let word_at = |p: &str| {
        lower.starts_with(p)
            && !lower[p.len()..]
                .chars()
                .next()
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
    };
    let page_of = lower.strip_prefix("page ").is_some_and(|r| {
        let digits = r.chars().take_while(char::is_ascii_digit).count();
        digits > 0
            && r[digits..].strip_prefix(" of").is_some_and(|t| {
                !t.chars()
                    .next()
                    .is_some_and(|c| c.is_alphanumeric() || c == '_')
            })
    });
    cue && !(BOILERPLATE.iter().any(|p| word_at(p)) || page_of)
}

/// Python's `f"{round(x, 4):g}"`.
fn g_format(x: f64) -> String {
    let x = ls_core::text::round_dp(x, 4);
    if x == 0.0 {
        return "0".into();
    }
    let exp = x.abs().log10().floor() as i32;
    if !(-5..6).contains(&exp) {
        let s = format!("{:.5e}", x);
        let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
        let m = m.trim_end_matches('0').trim_end_matches('.');
        let e: i32 = e.parse().unwrap_or(0);
        return format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs());
    }
    let decimals = (5 - exp).max(0) as usize;
    let s = format!("{x:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::Bool(b) => Some(if *b { "true" } else { "false" }.into()),
        Value::Number(n) => n.as_f64().map(g_format),
        Value::String(s) if !s.trim().is_empty() => {
            Some(s.trim().chars().take(MAX_VALUE_CHARS).collect())
        }
        _ => None,
    }
}

fn bbox_text(b: Option<&Value>) -> String {
    b.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_f64)
                .map(|x| format!("{}", x.round() as i64))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default()
}

/// One document page's kept OCR lines: token id -> (text, bbox), in order of first appearance.
type PageLines = Vec<(String, (String, String))>;

/// Everything an episode revealed so far, in order of first appearance.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EvidenceLedger {
    ids: Vec<(String, Vec<String>)>,
    values: Vec<(String, String)>,
    /// (doc, page) -> token id -> (text, bbox).
    ocr: Vec<((String, u64), PageLines)>,
    signals: Vec<String>,
}

impl EvidenceLedger {
    /// Fold one observation (the envelope's `observation`, as JSON) into the ledger.
    pub fn observe(&mut self, observation: &Value) {
        for s in observation
            .pointer("/risk_snapshot/observed_signals")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
        {
            if !self.signals.iter().any(|x| x == s) {
                self.signals.push(s.to_owned());
            }
        }
        if let Some(r) = observation
            .get("last_tool_result")
            .and_then(Value::as_object)
        {
            self.result(r);
        }
    }

    fn result(&mut self, r: &Map<String, Value>) {
        let tool = r.get("tool_name").and_then(Value::as_str).unwrap_or("");
        if tool == "submit_decision" {
            return;
        }
        let doc = r.get("doc_id").and_then(Value::as_str).unwrap_or("");
        for key in ["tokens", "focus_tokens"] {
            for t in r
                .get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_object)
            {
                let tid = t.get("token_id").and_then(Value::as_str).unwrap_or("");
                if !tid.is_empty() {
                    let d = t.get("doc_id").and_then(Value::as_str).unwrap_or(doc);
                    self.token(d, tid, t);
                }
            }
        }
        self.walk(tool, &Value::Object(r.clone()), 0, "");
    }

    fn token(&mut self, doc: &str, tid: &str, t: &Map<String, Value>) {
        let page = t.get("page").and_then(Value::as_u64).unwrap_or(1).max(1);
        let text = t.get("text").and_then(Value::as_str).unwrap_or("");
        if !kept_line(text) {
            return;
        }
        let shown = if text.chars().count() <= MAX_LINE_CHARS {
            text.to_owned()
        } else {
            text.chars().take(MAX_LINE_CHARS - 1).collect::<String>() + "~"
        };
        let key = (doc.to_owned(), page);
        let at = match self.ocr.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                self.ocr.push((key, Vec::new()));
                self.ocr.len() - 1
            }
        };
        let entry = (shown, bbox_text(t.get("bbox")));
        let lines = &mut self.ocr[at].1;
        match lines.iter_mut().find(|(id, _)| id == tid) {
            Some(l) => l.1 = entry,
            None => lines.push((tid.to_owned(), entry)),
        }
    }

    fn walk(&mut self, tool: &str, v: &Value, depth: usize, key: &str) {
        if depth > 5 {
            return;
        }
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    let skip = depth == 0 && SKIP_KEYS.contains(&k.as_str());
                    if skip
                        || matches!(
                            k.as_str(),
                            "tokens" | "focus_tokens" | "bbox" | "rule_id" | "thread_id"
                        )
                    {
                        continue;
                    }
                    self.walk(tool, x, depth + 1, k);
                }
            }
            Value::Array(a) => {
                for x in a.iter().take(64) {
                    self.walk(tool, x, depth + 1, key);
                }
            }
            _ => {
                let Some(s) = scalar(v) else { return };
                if key.is_empty() {
                    return;
                }
                if id_key(key) && v.is_string() {
                    match self.ids.iter_mut().find(|(k, _)| k == key) {
                        Some((_, vals)) if !vals.contains(&s) => vals.push(s),
                        Some(_) => {}
                        None => self.ids.push((key.to_owned(), vec![s])),
                    }
                } else if VALUE_TOOLS.contains(&tool)
                    && value_key(key)
                    && (!v.is_string() || s.chars().count() <= 24)
                {
                    let k = format!("{tool}.{key}");
                    match self.values.iter_mut().find(|(x, _)| *x == k) {
                        Some(e) => e.1 = s,
                        None => self.values.push((k, s)),
                    }
                }
            }
        }
    }

    /// The compact text: ids, values, signals, then OCR lines by document and page (token ids
    /// written after their common `...-t` prefix).
    pub fn render(&self) -> String {
        let mut parts = Vec::new();
        if !self.ids.is_empty() {
            let ids: Vec<String> = self
                .ids
                .iter()
                .map(|(k, v)| format!("{k}={}", v.join(",")))
                .collect();
            parts.push(format!("ids: {}", ids.join("; ")));
        }
        if !self.values.is_empty() {
            let vals: Vec<String> = self
                .values
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            parts.push(format!("values: {}", vals.join("; ")));
        }
        if !self.signals.is_empty() {
            parts.push(format!("signals: {}", self.signals.join(", ")));
        }
        for ((doc, page), lines) in &self.ocr {
            let prefix = common_prefix(lines);
            let mut head = format!("ocr {doc}");
            if *page != 1 {
                head.push_str(&format!(" p{page}"));
            }
            if prefix.is_empty() {
                head.push(':');
            } else {
                head.push_str(&format!(" (token ids {prefix}#):"));
            }
            for (tid, (text, bbox)) in lines {
                head.push_str(&format!("\n {} {text} [{bbox}]", &tid[prefix.len()..]));
            }
            parts.push(head);
        }
        parts.join("\n")
    }
}

/// The id prefix shared by a document's token ids, up to and including its last `-t`, or empty.
fn common_prefix(lines: &PageLines) -> &str {
    let Some((first, _)) = lines.first() else {
        return "";
    };
    let prefix = first.rfind("-t").map_or("", |cut| &first[..cut + 2]);
    if !prefix.is_empty() && lines.iter().all(|(id, _)| id.starts_with(prefix)) {
        prefix
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn folds_ids_values_ocr_and_signals_once() {
        let mut l = EvidenceLedger::default();
        l.observe(&json!({
            "risk_snapshot": {"observed_signals": ["bank_account_mismatch"]},
            "last_tool_result": {"tool_name": "ocr", "doc_id": "INV-1", "success": true, "tokens": [
                {"token_id": "INV-1-t1", "text": "Total: 2,478.00", "page": 1, "bbox": [10.4, 20, 30, 40]},
                {"token_id": "INV-1-t2", "text": "Thank you for your business", "page": 1, "bbox": [0, 0, 1, 1]},
                {"token_id": "INV-1-t3", "text": "Bank account DE44 5001", "page": 1, "bbox": [1, 2, 3, 4]}
            ]}
        }));
        l.observe(&json!({
            "risk_snapshot": {"observed_signals": ["bank_account_mismatch"]},
            "last_tool_result": {"tool_name": "compare_bank_account", "vendor_key": "northwind", "matched": false, "cost": 0.15}
        }));
        l.observe(&json!({"last_tool_result": {"tool_name": "lookup_vendor", "vendor": {"vendor_key": "northwind"}}}));
        let text = l.render();
        // The Python ledger (`training/ledger.py`) renders this input to the same text.
        assert_eq!(
            text,
            "ids: doc_id=INV-1; vendor_key=northwind\nvalues: compare_bank_account.matched=false\nsignals: bank_account_mismatch\nocr INV-1 (token ids INV-1-t#):\n 1 Total: 2,478.00 [10,20,30,40]\n 3 Bank account DE44 5001 [1,2,3,4]"
        );
        // A submission's own report is not evidence.
        let before = l.clone();
        l.observe(
            &json!({"last_tool_result": {"tool_name": "submit_decision", "ledger_id": "L-9"}}),
        );
        assert_eq!(l, before);
    }

    #[test]
    fn numbers_render_as_python_g() {
        assert_eq!(g_format(2478.0), "2478");
        assert_eq!(g_format(0.15), "0.15");
        assert_eq!(g_format(12345678.0), "1.23457e+07");
        assert_eq!(g_format(1.0 / 3.0), "0.3333");
    }
}
