//! One OpenAI-compatible chat-completions call: what a reply means (text, refusal, failure), the
//! token usage it reports, and a bounded blocking call (a deadline per request and across its
//! retries, no redirects, the reply body read with a size cap) for the audit auditor.
//!
//! The ControlBench `llm` agent reads replies with [`interpret`] too, so both agents treat a
//! refusal, a filtered reply and a missing message alike, and both count their calls in
//! [`CallStats`] (what a run's provenance records, and how a run whose endpoint never answered is
//! told apart from one whose model answered badly).

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::io::Read;
use std::time::{Duration, Instant};

/// Longest reply body read from an endpoint (a longer one is a failed call).
pub const MAX_REPLY_BYTES: u64 = 4 * 1024 * 1024;

/// What one model call came to, after retries.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// The model's message text.
    Text(String),
    /// The model refused (`message.refusal`, or `finish_reason: content_filter`).
    Refusal(String),
    /// No answer: transport errors, timeouts, 4xx/5xx, a reply that is not a completion.
    Failed(String),
}

/// A model endpoint's calls: attempts, answers, refusals, failures and the token usage the
/// endpoint reported (0 when it reports none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CallStats {
    /// Model calls made (one per decision the agent asked the model for).
    pub calls: u64,
    /// Calls the model answered (text or a refusal).
    pub answered: u64,
    /// Answers that were refusals.
    pub refused: u64,
    /// Calls that got no answer after their retries.
    pub failed: u64,
    /// HTTP requests sent (calls plus retries).
    pub requests: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Wall-clock seconds spent waiting for the endpoint.
    pub seconds: f64,
}

impl CallStats {
    /// What happened between `before` and `self` (both from the same agent).
    pub fn since(&self, before: &CallStats) -> CallStats {
        CallStats {
            calls: self.calls.saturating_sub(before.calls),
            answered: self.answered.saturating_sub(before.answered),
            refused: self.refused.saturating_sub(before.refused),
            failed: self.failed.saturating_sub(before.failed),
            requests: self.requests.saturating_sub(before.requests),
            prompt_tokens: self.prompt_tokens.saturating_sub(before.prompt_tokens),
            completion_tokens: self
                .completion_tokens
                .saturating_sub(before.completion_tokens),
            seconds: ls_core::text::round_dp((self.seconds - before.seconds).max(0.0), 3),
        }
    }

    /// The sum of several.
    pub fn total<'a>(all: impl IntoIterator<Item = &'a CallStats>) -> CallStats {
        let mut t = CallStats::default();
        for s in all {
            t.calls += s.calls;
            t.answered += s.answered;
            t.refused += s.refused;
            t.failed += s.failed;
            t.requests += s.requests;
            t.prompt_tokens += s.prompt_tokens;
            t.completion_tokens += s.completion_tokens;
            t.seconds += s.seconds;
        }
        t.seconds = ls_core::text::round_dp(t.seconds, 3);
        t
    }

    /// Calls were made and none was answered: the endpoint failed, so the run is an error, not a
    /// score of the model.
    pub fn endpoint_failed(&self) -> bool {
        self.calls > 0 && self.answered == 0
    }

    /// Count one finished call and the time since it `started`.
    pub fn record(&mut self, reply: &Reply, started: Instant) {
        self.calls += 1;
        match reply {
            Reply::Text(_) => self.answered += 1,
            Reply::Refusal(_) => {
                self.answered += 1;
                self.refused += 1;
            }
            Reply::Failed(_) => self.failed += 1,
        }
        self.seconds += started.elapsed().as_secs_f64();
    }

    /// Add the `usage` object of a completion, if it has one.
    pub fn add_usage(&mut self, completion: &Value) {
        let u = completion.get("usage");
        let n = |k: &str| {
            u.and_then(|u| u.get(k))
                .and_then(Value::as_u64)
                .unwrap_or(0)
        };
        self.prompt_tokens += n("prompt_tokens");
        self.completion_tokens += n("completion_tokens");
    }
}

/// What a parsed completion says: `Ok(reply)` for text or a refusal, `Err(why)` when it carries
/// no message (worth a retry).
pub fn interpret(completion: &Value) -> Result<Reply, String> {
    let choice = completion.get("choices").and_then(|c| c.get(0));
    let msg = choice.and_then(|c| c.get("message"));
    if let Some(r) = msg
        .and_then(|m| m.get("refusal"))
        .and_then(Value::as_str)
        .filter(|r| !r.is_empty())
    {
        return Ok(Reply::Refusal(r.chars().take(200).collect()));
    }
    if choice
        .and_then(|c| c.get("finish_reason"))
        .and_then(Value::as_str)
        == Some("content_filter")
    {
        return Ok(Reply::Refusal("content_filter".into()));
    }
    match msg.and_then(|m| m.get("content")).and_then(Value::as_str) {
        Some(c) => Ok(Reply::Text(c.to_owned())),
        None => Err("no message content".into()),
    }
}

/// A chat-completions request: the model, temperature, token cap and the system and user
/// messages (what every model is sent, whatever its name).
pub fn request_body(
    model: &str,
    temperature: f64,
    max_tokens: u32,
    system: &str,
    user: &str,
) -> Value {
    json!({
        "model": model,
        "temperature": temperature,
        "max_tokens": max_tokens,
        "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
    })
}

/// An OpenAI-compatible endpoint and how to call it.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// `http(s)://host[:port]/v1`; calls go to `{api_base}/chat/completions`.
    pub api_base: String,
    pub model: String,
    pub api_key: Option<String>,
    pub temperature: f64,
    /// Reply token cap sent with every call.
    pub max_tokens: u32,
    /// Deadline of one request (connect, send, the whole reply).
    pub timeout: Duration,
    /// Retries of a call after a transport error, a timeout, 429 or 5xx.
    pub max_retries: u32,
    pub backoff: Duration,
}

/// A bounded blocking client for one [`Endpoint`], counting its calls.
pub struct ChatClient {
    pub endpoint: Endpoint,
    http: Option<reqwest::blocking::Client>,
    pub stats: CallStats,
}

impl ChatClient {
    pub fn new(endpoint: Endpoint) -> Self {
        let http = reqwest::blocking::Client::builder()
            .timeout(endpoint.timeout)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .ok();
        Self {
            endpoint,
            http,
            stats: CallStats::default(),
        }
    }

    /// The request body of a call.
    pub fn body(&self, system: &str, user: &str) -> Value {
        let e = &self.endpoint;
        request_body(&e.model, e.temperature, e.max_tokens, system, user)
    }

    /// One model call: retried on transport errors, timeouts, 429 and 5xx with exponential
    /// backoff, never past `timeout × (retries + 1)` in all; a refusal is not retried.
    pub fn complete(&mut self, system: &str, user: &str) -> Reply {
        let started = Instant::now();
        let reply = self.attempts(system, user, started);
        self.stats.record(&reply, started);
        reply
    }

    fn attempts(&mut self, system: &str, user: &str, started: Instant) -> Reply {
        let Some(http) = self.http.clone() else {
            return Reply::Failed("HTTP client unavailable".into());
        };
        let e = self.endpoint.clone();
        let url = format!("{}/chat/completions", e.api_base.trim_end_matches('/'));
        let overall = e.timeout.saturating_mul(e.max_retries.min(8) + 1);
        let body = self.body(system, user);
        let mut last_err = String::from("no attempt");
        for attempt in 0..=e.max_retries.min(8) {
            if attempt > 0 {
                let wait = e.backoff.saturating_mul(1 << (attempt - 1).min(6));
                if started.elapsed() + wait >= overall {
                    break;
                }
                std::thread::sleep(wait);
            }
            self.stats.requests += 1;
            let mut req = http.post(&url).json(&body);
            if let Some(k) = &e.api_key {
                req = req.bearer_auth(k);
            }
            match send(req) {
                Ok(v) => {
                    self.stats.add_usage(&v);
                    match interpret(&v) {
                        Ok(r) => return r,
                        Err(why) => last_err = why,
                    }
                }
                Err(Attempt::Retry(why)) => last_err = why,
                Err(Attempt::Stop(why)) => return Reply::Failed(why),
            }
        }
        Reply::Failed(last_err)
    }
}

/// Why an attempt did not produce a completion.
enum Attempt {
    /// Worth another try (transport, timeout, 429, 5xx, an unreadable reply).
    Retry(String),
    /// Not worth one (another 4xx, a reply over the size cap).
    Stop(String),
}

/// Send one request and read its reply, at most [`MAX_REPLY_BYTES`].
fn send(req: reqwest::blocking::RequestBuilder) -> Result<Value, Attempt> {
    let resp = req.send().map_err(|e| {
        Attempt::Retry(if e.is_timeout() {
            "timeout".into()
        } else {
            "transport error".into()
        })
    })?;
    let status = resp.status();
    if status.as_u16() == 429 || status.is_server_error() {
        return Err(Attempt::Retry(format!("HTTP {}", status.as_u16())));
    }
    if !status.is_success() {
        return Err(Attempt::Stop(format!("HTTP {}", status.as_u16())));
    }
    let bytes = read_bounded(resp, MAX_REPLY_BYTES).map_err(Attempt::Stop)?;
    serde_json::from_slice(&bytes).map_err(|_| Attempt::Retry("response is not JSON".into()))
}

/// A reply body, at most `max` bytes (streamed: a longer body is an error, never read whole).
pub fn read_bounded(resp: reqwest::blocking::Response, max: u64) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    resp.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|_| "reply body unreadable".to_owned())?;
    if bytes.len() as u64 > max {
        return Err(format!("reply over {max} bytes"));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_are_read_alike() {
        let text = json!({"choices": [{"message": {"content": "[]"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 7, "completion_tokens": 2}});
        assert_eq!(interpret(&text), Ok(Reply::Text("[]".into())));
        let refusal = json!({"choices": [{"message": {"content": null, "refusal": "no"}}]});
        assert_eq!(interpret(&refusal), Ok(Reply::Refusal("no".into())));
        let filtered =
            json!({"choices": [{"message": {"content": "x"}, "finish_reason": "content_filter"}]});
        assert_eq!(
            interpret(&filtered),
            Ok(Reply::Refusal("content_filter".into()))
        );
        assert!(interpret(&json!({"error": "x"})).is_err());
        let mut s = CallStats::default();
        s.add_usage(&text);
        assert_eq!((s.prompt_tokens, s.completion_tokens), (7, 2));
    }

    #[test]
    fn an_endpoint_that_never_answered_failed() {
        let none = CallStats {
            calls: 3,
            failed: 3,
            ..Default::default()
        };
        assert!(none.endpoint_failed());
        let refused = CallStats {
            calls: 3,
            answered: 1,
            refused: 1,
            failed: 2,
            ..Default::default()
        };
        assert!(!refused.endpoint_failed(), "a refusal is an answer");
        assert!(
            !CallStats::default().endpoint_failed(),
            "no call, no failure"
        );
        let later = CallStats {
            calls: 5,
            answered: 2,
            failed: 3,
            seconds: 1.5,
            ..Default::default()
        };
        let d = later.since(&none);
        assert_eq!((d.calls, d.answered, d.failed), (2, 2, 0));
    }
}
