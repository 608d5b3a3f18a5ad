//! `--via gateway`: the same call over one operator WebSocket instead of a
//! spawned `openclaw agent` — about two seconds of Node.js start-up saved
//! per call — with the same JSON result: the reply text as `content`, the
//! seed's sentences for timeouts and interruptions, and a turn we give up
//! on aborted on the gateway rather than left running.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use super::command::Route;
use super::messages;
use super::result::{Meta, Status};
use super::{Format, Options, Reply, Session, Via, push_line, seconds, structured, with_meta};
use crate::gateway::client::ConnectError;
use crate::gateway::frames::ErrorShape;
use crate::gateway::operator::{self, AgentParams, Progress, Scope, TurnEnd};
use crate::shared::signals::Interrupt;

/// How long `--via auto` waits for the gateway before using the CLI.
const AUTO_CONNECT_LIMIT: Duration = Duration::from_secs(3);
const CONNECT_LIMIT: Duration = Duration::from_secs(10);
/// The gateway's own limit is ours plus this, so our deadline (which
/// aborts the run) comes first and the gateway's is only a backstop.
const GATEWAY_TIMEOUT_MARGIN: u64 = 2;
/// Pauses between reconnects when the link drops mid-turn.
const RECONNECT_PAUSES: [Duration; 3] = [
    Duration::from_millis(250),
    Duration::from_secs(1),
    Duration::from_secs(2),
];

pub enum Attempt {
    Done(Reply),
    /// Nothing ran on the gateway (for the message, or the fallback).
    NotReached(NotReached),
}

/// Why a call never reached an agent on the gateway.
pub struct NotReached {
    pub why: String,
    /// The gateway answered and refused us (rather than not answering).
    pub refused: bool,
    /// What the user should change about the token, when that is the cause.
    pub token: Option<messages::TokenProblem>,
}

impl NotReached {
    fn unreachable(why: String) -> Attempt {
        Attempt::NotReached(NotReached {
            why,
            refused: false,
            token: None,
        })
    }
}

pub async fn call(
    message: &str,
    route: &Route,
    session: Option<&str>,
    options: &Options,
    started: Instant,
    mut cancel: Pin<&mut impl Future<Output = Interrupt>>,
) -> Attempt {
    let lang = options.lang;
    let deadline = started + options.timeout;
    let limit = if options.via == Via::Auto {
        AUTO_CONNECT_LIMIT
    } else {
        CONNECT_LIMIT
    };
    let token = options.token.as_deref().filter(|t| !t.trim().is_empty());
    let credentials = operator::Credentials {
        token: token.map(str::to_owned),
        device_dir: options.operator_dir.clone(),
    };
    let connecting = operator::connect(
        &options.gateway,
        &credentials,
        limit.min(options.timeout),
        Scope::Write,
    );
    let mut conn = tokio::select! {
        conn = connecting => match conn {
            Ok(conn) => conn,
            // A certificate refused is a warning sign, never a reason to try
            // another way: it is said, not fallen back from.
            Err(e @ ConnectError::Untrusted(_)) => {
                let content = messages::gateway_unreachable(lang, &options.gateway.url, &describe(&e, lang));
                return Attempt::Done(reply(content, Status::Failed(1), started, None, false));
            }
            Err(e) => return Attempt::NotReached(not_reached(&e, token.is_some(), lang)),
        },
        signal = cancel.as_mut() => {
            let mut content = String::new();
            push_line(&mut content, &messages::interrupted(lang, signal.name));
            return Attempt::Done(reply(content, Status::Interrupted(signal.number), started, None, false));
        }
        _ = tokio::time::sleep_until(deadline.into()) => {
            // The whole time went on connecting: a timeout, said as one.
            let sentence = messages::timed_out(lang, &seconds(options.timeout));
            let mut reply = reply(sentence.clone(), Status::TimedOut, started, None, true);
            if options.format == Format::Structured {
                let cleaned = structured::without_answer("timeout", "timeout", sentence);
                reply.result.content = cleaned.content;
                reply.result.details = Some(cleaned.details);
            }
            return Attempt::Done(reply);
        }
    };
    let named = session.and_then(Session::agent);
    let (agent_id, to) = match route {
        Route::Agent(agent) => (Some(agent.clone()), None),
        // A destination alone leaves the gateway to guess the session (and
        // OpenClaw 2026.9.6 then refuses with SESSION_WORK_START_CHANGED);
        // the default agent with it routes as `openclaw agent --to` does.
        // A whole session key names the agent itself.
        Route::To(to) if named.is_some() => (named.map(str::to_owned), Some(to.clone())),
        Route::To(to) => {
            let asked =
                tokio::time::timeout_at(deadline.into(), operator::default_agent(&mut conn));
            let agent = asked.await.ok().flatten();
            (
                Some(agent.unwrap_or_else(|| "main".into())),
                Some(to.clone()),
            )
        }
    };
    let params = AgentParams {
        message: message.to_owned(),
        agent_id,
        to,
        session_key: session.map(str::to_owned),
        deliver: false,
        timeout: options.timeout.as_secs_f64().ceil() as u64 + GATEWAY_TIMEOUT_MARGIN,
        idempotency_key: uuid::Uuid::new_v4().to_string(),
    };
    let interrupt = std::sync::OnceLock::new();
    let mut show = |p: Progress| {
        if let Some(activity) = &options.activity {
            activity.show(&p);
        }
    };
    let give_up = async {
        tokio::select! {
            signal = cancel.as_mut() => { let _ = interrupt.set(signal); }
            _ = tokio::time::sleep_until(deadline.into()) => {}
        }
    };
    let mut give_up = std::pin::pin!(give_up);
    let mut end = operator::turn(&mut conn, &params, give_up.as_mut(), &mut show).await;
    // A link that drops mid-turn is reconnected and the run followed to
    // its end (never sent again: the gateway knows it by its key).
    let mut pauses = RECONNECT_PAUSES.iter();
    let mut resent = false;
    while let TurnEnd::Lost {
        accepted,
        sent: true,
        seen,
        ..
    } = &end
    {
        let Some(pause) = pauses.next() else { break };
        let (accepted, seen) = (accepted.clone(), seen.clone());
        // Admin: only the connection that started a run, or an admin one,
        // may abort it (what `openclaw agent` falls back to as well).
        let reconnect = async {
            tokio::time::sleep(*pause).await;
            operator::connect(&options.gateway, &credentials, CONNECT_LIMIT, Scope::Admin).await
        };
        let conn = tokio::select! {
            conn = reconnect => conn,
            _ = give_up.as_mut() => {
                end = TurnEnd::Cancelled { accepted: accepted.is_some(), aborted: false, partial: seen.text() };
                break;
            }
        };
        let Ok(mut conn) = conn else { continue };
        // Accepted: follow the run. Maybe not: the same request again is
        // safe, the gateway deduplicates it by its key.
        end = match accepted {
            Some(run) => {
                operator::resume(&mut conn, &params, run, seen, give_up.as_mut(), &mut show).await
            }
            None => {
                resent = true;
                operator::turn(&mut conn, &params, give_up.as_mut(), &mut show).await
            }
        };
    }
    let run_id = Some(params.idempotency_key.clone());
    let structured = options.format == Format::Structured;
    let done = |content: String, status, timed_out, cleaned: Option<structured::Cleaned>| {
        let mut reply = reply(content, status, started, run_id.clone(), timed_out);
        if let Some(cleaned) = cleaned {
            reply.result.content = cleaned.content;
            reply.result.details = Some(cleaned.details);
        }
        Attempt::Done(reply)
    };
    match end {
        TurnEnd::Finished(finished) => {
            let status = if finished.ok() {
                Status::Success
            } else {
                Status::Failed(1)
            };
            let cleaned = structured.then(|| structured::from_openclaw(&finished.raw));
            done(
                finished.text(),
                status,
                finished.status == "timeout",
                cleaned,
            )
        }
        TurnEnd::Refused { error, accepted } => {
            if !accepted && !resent && options.via == Via::Auto && channel_refusal(&error) {
                return Attempt::NotReached(NotReached {
                    why: format!("{}: {}", error.code, error.message),
                    refused: true,
                    token: None,
                });
            }
            // As `openclaw agent` prints it on stderr.
            let cleaned = structured.then(|| {
                structured::from_openclaw(&serde_json::json!({
                    "ok": false, "runId": params.idempotency_key,
                    "error": {"type": error.code, "message": error.message},
                }))
            });
            done(
                format!("{}\n", error.message),
                Status::Failed(1),
                false,
                cleaned,
            )
        }
        TurnEnd::Cancelled {
            accepted,
            aborted,
            partial,
        } => {
            let mut content = partial;
            let status = match interrupt.get().copied() {
                Some(signal) => {
                    push_line(&mut content, &messages::interrupted(lang, signal.name));
                    Status::Interrupted(signal.number)
                }
                None => {
                    push_line(
                        &mut content,
                        &messages::timed_out(lang, &seconds(options.timeout)),
                    );
                    Status::TimedOut
                }
            };
            if accepted && !aborted {
                push_line(&mut content, messages::abort_unconfirmed(lang));
            }
            let cleaned = structured.then(|| {
                let (kind, sentence) = match interrupt.get() {
                    Some(signal) => ("interrupted", messages::interrupted(lang, signal.name)),
                    None => (
                        "timeout",
                        messages::timed_out(lang, &seconds(options.timeout)),
                    ),
                };
                let mut cleaned = structured::without_answer(
                    if kind == "timeout" {
                        "timeout"
                    } else {
                        "error"
                    },
                    kind,
                    sentence,
                );
                cleaned.details["runId"] = serde_json::Value::from(params.idempotency_key.clone());
                cleaned
            });
            done(content, status, interrupt.get().is_none(), cleaned)
        }
        TurnEnd::Lost {
            sent: false, why, ..
        } => NotReached::unreachable(why),
        TurnEnd::Lost { why, seen, .. } => {
            let mut content = seen.text();
            let sentence = messages::gateway_lost(lang, &why);
            push_line(&mut content, &sentence);
            let cleaned = structured
                .then(|| structured::without_answer("error", "connection_lost", sentence));
            done(content, Status::Failed(1), false, cleaned)
        }
    }
}

/// Refusals that say the channel is wrong (scopes, auth, pairing), not the
/// call: nothing ran, and the CLI may get through with its own credentials.
fn channel_refusal(error: &ErrorShape) -> bool {
    let detail = error.detail_code();
    matches!(
        error.code.as_str(),
        "FORBIDDEN" | "UNAUTHORIZED" | "NOT_PAIRED"
    ) || detail == "MISSING_SCOPE"
        || detail.starts_with("AUTH_")
}

fn not_reached(e: &ConnectError, token_given: bool, lang: messages::Lang) -> NotReached {
    let ConnectError::Rejected(error) = e else {
        return NotReached {
            why: describe(e, lang),
            refused: false,
            token: None,
        };
    };
    let code = error.detail_code();
    let token = match code {
        // Without a token OpenClaw wants a device identity instead (and
        // says only that): the token is what the user can give.
        "AUTH_TOKEN_MISSING" | "AUTH_REQUIRED" | "DEVICE_IDENTITY_REQUIRED" if !token_given => {
            Some(messages::TokenProblem::Missing)
        }
        "AUTH_TOKEN_MISMATCH" | "AUTH_UNAUTHORIZED" if token_given => {
            Some(messages::TokenProblem::Refused)
        }
        "PAIRING_REQUIRED" => error
            .details
            .as_ref()
            .and_then(|d| d.request_id.clone())
            .map(messages::TokenProblem::Pairing),
        _ => None,
    };
    NotReached {
        why: format!("{code}: {}", error.message),
        refused: true,
        token,
    }
}

/// Why the connection failed, in the caller's language (what is ours is
/// translated; what others said is quoted).
fn describe(e: &ConnectError, lang: messages::Lang) -> String {
    if lang == messages::Lang::En {
        return e.to_string();
    }
    match e {
        ConnectError::Transport(os) => format!("无法建立连接（详情：“{os}”）"),
        ConnectError::Timeout(limit) => {
            format!("网关在 {} 秒内没有完成握手", seconds(*limit))
        }
        ConnectError::Closed => "网关在握手中关闭了连接".into(),
        ConnectError::Protocol(what) => {
            format!("网关对 connect 的回答不是 hello-ok（原文：“{what}”）")
        }
        ConnectError::NotGateway(what) => format!("对方不是 OpenClaw 网关（详情：“{what}”）"),
        // Before connecting, or on the server's proof of a wrong scheme.
        ConnectError::Refused(why) => format!("已拒绝连接，需更改设置（详情：“{why}”）"),
        ConnectError::Untrusted(why) => format!("网关的 TLS 证书未被信任（详情：“{why}”）"),
        ConnectError::Rejected(error) => format!("{}: {}", error.detail_code(), error.message),
    }
}

fn reply(
    content: String,
    status: Status,
    started: Instant,
    run_id: Option<String>,
    timed_out: bool,
) -> Reply {
    Reply {
        result: with_meta(
            content,
            Meta {
                timed_out,
                duration_ms: started.elapsed().as_millis() as u64,
                via: Some("gateway"),
                run_id,
                ..Meta::default()
            },
        ),
        status,
    }
}
