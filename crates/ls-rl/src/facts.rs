//! What the teacher reads from OCR tokens: invoice lines and email lines, each kept with the
//! token it came from so that every claim can cite `{doc_id, page, bbox, token_ids}`.

use ls_core::text::{compact_account, normalize_text, parse_decimal};
use rust_decimal::Decimal;
use serde_json::Value;

/// One OCR line the agent actually saw.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub doc_id: String,
    pub page: u32,
    pub bbox: [f64; 4],
    pub token_id: String,
    pub text: String,
}

impl Line {
    /// The line as an evidence citation (one token).
    pub fn cite(&self) -> ls_core::draft::Cite {
        ls_core::draft::Cite::Place(ls_core::draft::PlaceCite {
            doc_id: self.doc_id.clone(),
            page: self.page,
            bbox: self.bbox,
            token_ids: vec![self.token_id.clone()],
        })
    }

    /// [`Self::cite`] as the JSON it is written as.
    pub fn evidence(&self) -> Value {
        serde_json::to_value(self.cite()).unwrap_or(Value::Null)
    }
}

/// Parse the `tokens` array of an OCR tool result.
pub fn lines_from_ocr(doc_id: &str, result: &serde_json::Map<String, Value>) -> Vec<Line> {
    let Some(tokens) = result.get("tokens").and_then(Value::as_array) else {
        return Vec::new();
    };
    tokens
        .iter()
        .take(512)
        .filter_map(|t| {
            let o = t.as_object()?;
            let bb = o.get("bbox")?.as_array()?;
            if bb.len() != 4 {
                return None;
            }
            let mut bbox = [0.0; 4];
            for (b, v) in bbox.iter_mut().zip(bb) {
                *b = v.as_f64()?;
            }
            Some(Line {
                doc_id: doc_id.to_owned(),
                page: o.get("page").and_then(Value::as_u64).unwrap_or(1) as u32,
                bbox,
                token_id: o.get("token_id")?.as_str()?.to_owned(),
                text: o.get("text")?.as_str()?.to_owned(),
            })
        })
        .collect()
}

#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub description: String,
    pub qty: Decimal,
    pub unit_price: Decimal,
    pub line_total: Decimal,
    pub line: Line,
}

/// An invoice as read from its accurate OCR.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Invoice {
    pub doc_id: String,
    pub vendor: Option<Line>,
    pub number: Option<(String, Line)>,
    pub date: Option<(String, Line)>,
    pub currency: Option<(String, Line)>,
    pub po: Option<(String, Line)>,
    pub receipt: Option<(String, Line)>,
    pub subtotal: Option<(Decimal, Line)>,
    pub tax: Option<(Decimal, Line)>,
    pub total: Option<(Decimal, Line)>,
    pub bank: Option<(String, Line)>,
    pub items: Vec<Item>,
    /// Free-text lines that are neither fields nor items (notes such as "part 1 of 3").
    pub notes: Vec<Line>,
}

fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let t = text.trim();
    match (t.get(..key.len()), t.get(key.len()..)) {
        (Some(head), Some(rest)) if head.eq_ignore_ascii_case(key) => Some(rest.trim()),
        _ => None,
    }
}

impl Invoice {
    pub fn parse(doc_id: &str, lines: &[Line]) -> Self {
        let mut inv = Invoice {
            doc_id: doc_id.to_owned(),
            ..Default::default()
        };
        inv.vendor = lines.first().cloned();
        for (i, l) in lines.iter().enumerate() {
            let t = l.text.as_str();
            let s = |v: &str| Some((v.to_owned(), l.clone()));
            let d = |v: &str| parse_decimal(v).map(|x| (x, l.clone()));
            if let Some(v) = field(t, "Invoice No:") {
                inv.number = s(v);
            } else if let Some(v) = field(t, "Invoice Date:") {
                inv.date = s(v);
            } else if let Some(v) = field(t, "Currency:") {
                inv.currency = s(v);
            } else if let Some(v) = field(t, "PO:") {
                inv.po = s(v);
            } else if let Some(v) = field(t, "Receipt:") {
                inv.receipt = s(v);
            } else if let Some(v) = field(t, "Subtotal:") {
                inv.subtotal = d(v);
            } else if let Some(v) = field(t, "Tax:") {
                inv.tax = d(v);
            } else if let Some(v) = field(t, "Total:") {
                inv.total = d(v);
            } else if let Some(v) = field(t, "Bank:")
                .or_else(|| field(t, "IBAN:"))
                .or_else(|| field(t, "SWIFT:"))
            {
                if inv.bank.is_none() {
                    inv.bank = s(v);
                }
            } else {
                let parts: Vec<&str> = t.split('|').map(str::trim).collect();
                if parts.len() == 4 {
                    if let (Some(q), Some(u), Some(lt)) = (
                        parse_decimal(parts[1]),
                        parse_decimal(parts[2]),
                        parse_decimal(parts[3]),
                    ) {
                        inv.items.push(Item {
                            description: parts[0].to_owned(),
                            qty: q,
                            unit_price: u,
                            line_total: lt,
                            line: l.clone(),
                        });
                        continue;
                    }
                }
                if i > 0 && !t.contains(':') {
                    inv.notes.push(l.clone());
                }
            }
        }
        inv
    }

    pub fn account(&self) -> Option<String> {
        self.bank
            .as_ref()
            .map(|(b, _)| compact_account(b))
            .filter(|a| !a.is_empty())
    }

    pub fn total_value(&self) -> Option<Decimal> {
        self.total.as_ref().map(|t| t.0)
    }

    pub fn vendor_name(&self) -> String {
        self.vendor
            .as_ref()
            .map(|l| l.text.trim().to_owned())
            .unwrap_or_default()
    }

    /// A note saying the bill is one part of a larger order ("part 1 of 3", "phase A", "invoiced separately").
    pub fn split_marker(&self) -> Option<&Line> {
        let all = self.notes.iter().chain(self.items.iter().map(|i| &i.line));
        all.into_iter().find(|l| {
            let t = normalize_text(&l.text);
            t.contains("invoiced separately")
                || t.contains(" part ")
                || t.starts_with("part ")
                || t.contains("phase ")
                || (t.contains(" of ") && t.contains("part"))
        })
    }
}

/// An email document read line by line.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Email {
    pub doc_id: String,
    pub lines: Vec<Line>,
}

pub const URGENCY: [&str; 6] = [
    "urgent",
    "asap",
    "immediately",
    "today",
    "right away",
    "before quarter close",
];
pub const BYPASS: [&str; 20] = [
    "skip callback",
    "skip the callback",
    "skip callback verification",
    "do not call",
    "don't call",
    "do not phone",
    "cannot take calls",
    "no need to call",
    "do not verify",
    "ignore standard workflow",
    "ignore the standard workflow",
    "override policy",
    "bypass",
    "treat this email as the source of truth",
    "portal is offline",
    "avoid reapproval",
    "skip normal review",
    "personally approved",
    "dual sign-off",
    "not to call",
];
pub const TAKEOVER: [&str; 5] = [
    "new banking partner",
    "banking partner",
    "previous banking team",
    "moved its receivables",
    "moved our receivables",
];
pub const THRESHOLD_WORDS: [&str; 6] = [
    "approver",
    "approval",
    "limit",
    "threshold",
    "sign-off",
    "second approver",
];

impl Email {
    pub fn from_line(&self) -> Option<&Line> {
        self.lines
            .iter()
            .find(|l| normalize_text(&l.text).starts_with("from:"))
    }
    fn body(&self) -> impl Iterator<Item = &Line> {
        self.lines.iter().filter(|l| {
            let t = normalize_text(&l.text);
            !["from:", "to:", "sent:", "cc:"]
                .iter()
                .any(|p| t.starts_with(p))
        })
    }
    /// First body line containing any phrase (subject lines last).
    pub fn line_with(&self, phrases: &[&str]) -> Option<&Line> {
        let hit = |l: &&Line| {
            let t = normalize_text(&l.text);
            phrases.iter().any(|p| t.contains(p))
        };
        let is_subject = |l: &&Line| normalize_text(&l.text).starts_with("subject:");
        self.body()
            .filter(|l| !is_subject(l))
            .find(hit)
            .or_else(|| self.body().filter(is_subject).find(hit))
    }
    /// A statement that amounts were kept below an approval limit.
    pub fn threshold_evasion_line(&self) -> Option<&Line> {
        self.body().find(|l| {
            let t = normalize_text(&l.text);
            (t.contains("below")
                || t.contains("under ")
                || t.contains("stays under")
                || t.contains("kept each"))
                && THRESHOLD_WORDS.iter().any(|w| t.contains(w))
                || (t.contains("split") && (t.contains("below") || t.contains("under")))
        })
    }
}
