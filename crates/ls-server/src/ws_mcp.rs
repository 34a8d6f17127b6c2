//! MCP JSON-RPC 2.0, as openenv-core 0.3 serves it: `POST /mcp` and `{"type": "mcp"}` messages
//! on `/ws`.
//!
//! Methods: `tools/list` (one tool per action), `tools/call` (one environment step),
//! `openenv/session/create` (a named session; `params.reset` optionally starts an episode) and
//! `openenv/session/close`. Over HTTP a tool call needs `params.session_id`: a session created
//! here or an HTTP session reset with `X-Session-Id` (they are the same sessions). Over `/ws`
//! the connection is the session. Every reply is a JSON-RPC response with HTTP 200.

use crate::body::MAX_BODY_BYTES;
use crate::error::ApiError;
use crate::protocol::{OpenEnvBackend, OpenEnvService};
use crate::sessions::{lock_env, SessionManager};
use axum::body::Body;
use axum::extract::State;
use axum::Json;
use ls_json::RawJson;
use serde_json::{json, Map, Value};
use std::sync::Arc;

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
pub const SERVER_ERROR: i64 = -32000;

/// A validated JSON-RPC request.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcRequest {
    pub method: String,
    pub params: Map<String, Value>,
    pub id: Value,
}

pub fn rpc_error(id: &Value, code: i64, message: impl Into<String>, data: Option<Value>) -> Value {
    let mut err = json!({"code": code, "message": message.into()});
    if let Some(d) = data {
        err["data"] = d;
    }
    json!({"jsonrpc": "2.0", "id": id, "error": err})
}

pub fn rpc_result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// Validate a request object (`jsonrpc: "2.0"`, `method`, optional object `params`, `id`).
pub fn parse_rpc(v: Value) -> Result<RpcRequest, Value> {
    let null = Value::Null;
    let Value::Object(mut o) = v else {
        return Err(rpc_error(
            &null,
            INVALID_REQUEST,
            "Invalid Request: expected a JSON-RPC 2.0 request object",
            None,
        ));
    };
    let id = match o.remove("id") {
        None | Some(Value::Null) => Value::Null,
        Some(id @ (Value::String(_) | Value::Number(_))) => id,
        Some(_) => {
            return Err(rpc_error(
                &null,
                INVALID_REQUEST,
                "Invalid Request: id must be a string, a number or null",
                None,
            ))
        }
    };
    if o.get("jsonrpc") != Some(&json!("2.0")) {
        return Err(rpc_error(
            &id,
            INVALID_REQUEST,
            "Invalid Request: jsonrpc must be \"2.0\"",
            None,
        ));
    }
    let method = match o.remove("method") {
        Some(Value::String(m)) => m,
        _ => {
            return Err(rpc_error(
                &id,
                INVALID_REQUEST,
                "Invalid Request: method must be a string",
                None,
            ))
        }
    };
    let params = match o.remove("params") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(p)) => p,
        Some(_) => {
            return Err(rpc_error(
                &id,
                INVALID_PARAMS,
                "Params must be an object",
                None,
            ))
        }
    };
    if let Some(k) = o.keys().find(|k| k.as_str() != "jsonrpc") {
        return Err(rpc_error(
            &id,
            INVALID_REQUEST,
            format!(
                "Invalid Request: unexpected field '{}'",
                k.chars().take(64).collect::<String>()
            ),
            None,
        ));
    }
    Ok(RpcRequest { method, params, id })
}

fn api_error(id: &Value, e: ApiError) -> Value {
    let code = match e {
        ApiError::Validation(_) | ApiError::BadRequest(_) | ApiError::InvalidJson(_) => {
            INVALID_PARAMS
        }
        ApiError::Internal(_) => INTERNAL_ERROR,
        _ => SERVER_ERROR,
    };
    rpc_error(id, code, e.to_string(), Some(json!({"code": e.code()})))
}

/// MCP `tools/call` result: the step reply as structured content and as text.
fn tool_result(step: RawJson) -> Value {
    json!({"content": [{"type": "text", "text": step.get()}], "structuredContent": step, "isError": false})
}

fn tool_args(req: &RpcRequest) -> Result<(String, Map<String, Value>), Value> {
    let name = match req.params.get("name") {
        Some(Value::String(n)) if !n.is_empty() => n.clone(),
        _ => {
            return Err(rpc_error(
                &req.id,
                INVALID_PARAMS,
                "Missing 'name' in params",
                None,
            ))
        }
    };
    let args = match req.params.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(a)) => a.clone(),
        Some(_) => {
            return Err(rpc_error(
                &req.id,
                INVALID_PARAMS,
                "'arguments' must be an object",
                None,
            ))
        }
    };
    Ok((name, args))
}

fn call_tool<B: OpenEnvBackend>(backend: &mut B, req: &RpcRequest) -> Value {
    match tool_args(req) {
        Err(e) => e,
        Ok((name, args)) => match backend.call_tool(&name, args) {
            Ok(step) => rpc_result(&req.id, tool_result(step)),
            Err(e) => api_error(&req.id, e),
        },
    }
}

fn tools_list<S: OpenEnvService>(svc: &S, id: &Value) -> Value {
    rpc_result(id, json!({"tools": svc.tools()}))
}

/// A `{"type": "mcp"}` message on `/ws`: the connection's environment serves the calls.
pub fn ws_rpc<S: OpenEnvService>(svc: &S, backend: &mut S::Backend, v: Value) -> Value {
    let req = match parse_rpc(v) {
        Ok(r) => r,
        Err(e) => return e,
    };
    match req.method.as_str() {
        "tools/list" => tools_list(svc, &req.id),
        "tools/call" => call_tool(backend, &req),
        "openenv/session/create" | "openenv/session/close" => rpc_error(
            &req.id,
            INVALID_REQUEST,
            "Sessions on /ws are managed by the WebSocket connection",
            None,
        ),
        m => rpc_error(
            &req.id,
            METHOD_NOT_FOUND,
            format!(
                "Method not found: {}",
                m.chars().take(64).collect::<String>()
            ),
            None,
        ),
    }
}

/// A session id from the operating system's random source (never guessable from the clock).
fn new_session_id() -> String {
    SessionManager::<()>::new_id("mcp")
}

fn session_param(req: &RpcRequest) -> Result<String, Value> {
    match req.params.get("session_id") {
        Some(Value::String(s)) => SessionManager::<()>::validate_id(s)
            .map(|_| s.clone())
            .map_err(|e| api_error(&req.id, e)),
        _ => Err(rpc_error(
            &req.id,
            INVALID_PARAMS,
            "Invalid params - 'session_id' is required (create one with openenv/session/create)",
            None,
        )),
    }
}

/// Handle one JSON-RPC request over HTTP.
pub fn http_rpc<S: OpenEnvService>(
    svc: &S,
    owner: Option<crate::capacity::ClientKey>,
    v: Value,
) -> Value {
    let req = match parse_rpc(v) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let sessions = svc.sessions();
    match req.method.as_str() {
        "tools/list" => tools_list(svc, &req.id),
        "openenv/session/create" => {
            let reset = match req.params.get("reset") {
                None | Some(Value::Null) => None,
                Some(Value::Object(r)) => Some(r.clone()),
                Some(_) => {
                    return rpc_error(&req.id, INVALID_PARAMS, "'reset' must be an object", None)
                }
            };
            let id = new_session_id();
            let backend = match svc.new_backend() {
                Ok(b) => b,
                Err(e) => return api_error(&req.id, e),
            };
            let env = match sessions.get_or_create(&id, owner, || backend) {
                Ok(env) => env,
                Err(ApiError::TooManySessions(n)) => {
                    return rpc_error(
                        &req.id,
                        SERVER_ERROR,
                        ApiError::TooManySessions(n).to_string(),
                        Some(json!({"active_sessions": n, "max_sessions": sessions.max_sessions})),
                    )
                }
                Err(e) => return api_error(&req.id, e),
            };
            let mut result = json!({"session_id": id});
            if let Some(r) = reset {
                match lock_env(&env).reset(r) {
                    Ok(obs) => {
                        result["observation"] = serde_json::to_value(&obs).unwrap_or(Value::Null)
                    }
                    Err(e) => {
                        sessions.remove(&id);
                        return api_error(&req.id, e);
                    }
                }
            }
            rpc_result(&req.id, result)
        }
        "openenv/session/close" => match session_param(&req) {
            Err(e) => e,
            Ok(id) if sessions.remove(&id) => {
                rpc_result(&req.id, json!({"session_id": id, "closed": true}))
            }
            Ok(id) => rpc_error(
                &req.id,
                INVALID_PARAMS,
                format!("Unknown session_id: {id}"),
                None,
            ),
        },
        "tools/call" => {
            let id = match session_param(&req) {
                Ok(id) => id,
                Err(e) => return e,
            };
            match sessions.get(&id) {
                Some(env) => call_tool(&mut *lock_env(&env), &req),
                None => rpc_error(
                    &req.id,
                    INVALID_PARAMS,
                    format!("Unknown session_id: {id}"),
                    None,
                ),
            }
        }
        m => rpc_error(
            &req.id,
            METHOD_NOT_FOUND,
            format!(
                "Method not found: {}",
                m.chars().take(64).collect::<String>()
            ),
            None,
        ),
    }
}

/// `POST /mcp`.
pub async fn http_mcp<S: OpenEnvService>(
    State(svc): State<Arc<S>>,
    client: Option<axum::Extension<crate::security::ClientAddr>>,
    body: Body,
) -> Json<Value> {
    let bytes = match crate::body::read(body, MAX_BODY_BYTES).await {
        Ok(b) => b,
        Err(e @ ApiError::BodyTimeout(_)) => {
            return Json(rpc_error(&Value::Null, INVALID_REQUEST, e.message(), None))
        }
        Err(_) => {
            return Json(rpc_error(
                &Value::Null,
                INVALID_REQUEST,
                format!("request body exceeds the {MAX_BODY_BYTES}-byte limit"),
                None,
            ))
        }
    };
    let v: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => {
            return Json(rpc_error(
                &Value::Null,
                PARSE_ERROR,
                format!("Parse error: {}", crate::error::prefix(&e.to_string())),
                None,
            ))
        }
    };
    Json(http_rpc(
        &*svc,
        crate::security::client_key(client.as_ref()),
        v,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_validation() {
        assert_eq!(
            parse_rpc(json!({})).unwrap_err()["error"]["code"],
            INVALID_REQUEST
        );
        assert_eq!(parse_rpc(json!([1])).unwrap_err()["jsonrpc"], "2.0");
        assert_eq!(
            parse_rpc(json!({"jsonrpc": "2.0", "method": "x", "params": [1], "id": 3}))
                .unwrap_err()["error"]["code"],
            INVALID_PARAMS
        );
        assert_eq!(
            parse_rpc(json!({"jsonrpc": "2.0", "method": "x", "id": 3, "foo": 1})).unwrap_err()
                ["id"],
            3
        );
        let r = parse_rpc(json!({"jsonrpc": "2.0", "method": "tools/list", "id": "a"})).unwrap();
        assert_eq!(r.method, "tools/list");
        assert!(r.params.is_empty());
    }
}
