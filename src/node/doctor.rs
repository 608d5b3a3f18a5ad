//! `clawbot_router node --doctor`: while the node serves the gateway's tool
//! calls, a doctor session (seed 000 §4–8) runs beside it on an operator
//! connection — the diagnostic context goes out as the first `agent`
//! message, the assistant's reply streams to stdout as it arrives, each
//! line of stdin is a follow-up in the same session, and end of input ends
//! the session.
//!
//! It never writes to stdout itself: the reply goes to the `print` that
//! app (the only stdout writer) hands down, from a thread of its own.
//!
//! Seed 000's error table: an unreachable gateway is retried with backoff
//! and said so; a link that drops mid-turn is reconnected and the turn
//! followed to its answer (the gateway knows the run by its idempotency
//! key, so nothing runs twice); 60 s without a word from the agent is said.

use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::say;
use crate::gateway::client::{ConnectError, Connection};
use crate::gateway::operator::{self, AgentParams, Progress, Scope, Seen, TurnEnd};
use crate::shared::backoff::Backoff;

/// Seed 000 §"Error Handling": no reply for this long is said
/// (`CLAWBOT_ROUTER_DOCTOR_QUIET_MS` shortens it for tests).
fn quiet_notice() -> Duration {
    std::env::var("CLAWBOT_ROUTER_DOCTOR_QUIET_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
        .map(Duration::from_millis)
        .unwrap_or(Duration::from_secs(60))
}
const CONNECT_LIMIT: Duration = Duration::from_secs(10);
/// A doctor turn may take long (tools, approvals); the gateway's limit.
const TURN_TIMEOUT_SECS: u64 = 1800;

pub struct Options {
    pub gateway: crate::gateway::Endpoint,
    /// The shared token, and the operator identity for remote gateways.
    pub credentials: operator::Credentials,
    pub agent: String,
    /// What the user asks the doctor, sent with the context.
    pub question: String,
    /// This node's device id (the target's instance id).
    pub instance_id: String,
}

/// Runs the session until end of input (0), a refusal that retrying
/// cannot fix (1), or `stop` (Ctrl-C; 0).
pub async fn session(options: Options, print: fn(&str), stop: CancellationToken) -> u8 {
    let Some(mut lines) = crate::ui::stdin_messages() else {
        say("doctor: stdin is already taken");
        return 1;
    };
    let out = Stdout::start(print);
    say(
        "doctor: collecting the diagnostic context (openclaw --version, its config, `openclaw config validate`, recent log errors; a few seconds)",
    );
    let collecting_since = std::time::Instant::now();
    // The installation a doctor is run on may hang: Ctrl-C must not wait
    // for it (dropping the collection stops its openclaw processes).
    let collecting = crate::tools::system::doctor_context(&options.instance_id, &options.question);
    let context = tokio::select! {
        context = collecting => context,
        _ = stop.cancelled() => return 0,
    };
    say(&format!(
        "doctor: context collected in {:.1}s; asking agent {:?} and waiting for its reply",
        collecting_since.elapsed().as_secs_f64(),
        options.agent
    ));
    let session_key = format!(
        "agent:{}:clawbot-doctor-{}",
        options.agent,
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    );
    let mut doctor = Doctor {
        options: &options,
        conn: None,
        backoff: Backoff::new(Duration::from_secs(1), Duration::from_secs(30)),
        out,
        stop: stop.clone(),
        dropped: false,
        announced_pairing: None,
    };
    let mut message = context.to_string();
    let mut first = true;
    loop {
        let params = AgentParams {
            message,
            agent_id: Some(options.agent.clone()),
            to: None,
            session_key: Some(session_key.clone()),
            deliver: false,
            timeout: TURN_TIMEOUT_SECS,
            idempotency_key: uuid::Uuid::new_v4().to_string(),
        };
        match doctor.turn(&params).await {
            Step::Done => {}
            Step::Stopped => {
                doctor.out.flush();
                return 0;
            }
            Step::Fatal if first => return 1,
            Step::Fatal => {}
        }
        first = false;
        // The reply is written by a thread of its own, the hint by the
        // log's: the reply first, whole, or the hint lands inside it.
        doctor.out.flush();
        say("doctor: type a follow-up and press Enter (end of input ends the session)");
        message = loop {
            let line = tokio::select! {
                line = lines.recv() => line,
                _ = stop.cancelled() => return 0,
            };
            match line {
                None => {
                    say("doctor: end of input; session over");
                    doctor.out.flush();
                    return 0;
                }
                Some(line) if line.trim().is_empty() => continue,
                Some(line) => break line.trim_end_matches(['\r', '\n']).to_owned(),
            }
        };
    }
}

enum Step {
    Done,
    /// The user stopped us (Ctrl-C).
    Stopped,
    /// The gateway refused in a way retrying cannot fix.
    Fatal,
}

struct Doctor<'a> {
    options: &'a Options,
    conn: Option<Connection>,
    backoff: Backoff,
    out: Stdout,
    stop: CancellationToken,
    /// A connection was lost: later ones ask for `operator.admin`, the
    /// scope that may abort a run another connection started.
    dropped: bool,
    /// The pairing request already shown (said once, not per retry).
    announced_pairing: Option<String>,
}

impl Doctor<'_> {
    /// A connection, retried with backoff until it works or `stop`.
    async fn connection(&mut self) -> Result<&mut Connection, Step> {
        while self.conn.is_none() {
            let scope = if self.dropped {
                Scope::Admin
            } else {
                Scope::Write
            };
            let attempt = operator::connect(
                &self.options.gateway,
                &self.options.credentials,
                CONNECT_LIMIT,
                scope,
            );
            let result = tokio::select! {
                result = attempt => result,
                _ = self.stop.cancelled() => return Err(Step::Stopped),
            };
            match result {
                Ok(conn) => {
                    self.backoff.reset();
                    self.conn = Some(conn);
                }
                Err(ConnectError::Refused(why) | ConnectError::Untrusted(why)) => {
                    say(&format!("doctor: {why}"));
                    return Err(Step::Fatal);
                }
                Err(ConnectError::Rejected(e)) if e.code == "INVALID_REQUEST" => {
                    say(&format!(
                        "doctor: the gateway refused the operator connection: {}: {} (check --token / OPENCLAW_GATEWAY_TOKEN)",
                        e.detail_code(),
                        e.message
                    ));
                    return Err(Step::Fatal);
                }
                Err(ConnectError::Rejected(e)) if e.detail_code() == "PAIRING_REQUIRED" => {
                    let request = e
                        .details
                        .as_ref()
                        .and_then(|d| d.request_id.clone())
                        .unwrap_or_default();
                    if self.announced_pairing.as_deref() != Some(request.as_str()) {
                        say(
                            "doctor: this operator device awaits the gateway operator's approval: run",
                        );
                        say(&format!("    openclaw devices approve {request}"));
                        say("  (retrying until approved; Ctrl-C stops)");
                        self.announced_pairing = Some(request);
                    }
                    let delay = self.backoff.next().min(Duration::from_secs(10));
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        _ = self.stop.cancelled() => return Err(Step::Stopped),
                    }
                }
                Err(e) => {
                    let delay = self.backoff.next();
                    say(&format!(
                        "doctor: cannot reach the gateway at {} ({e}); retrying in {:.1}s",
                        self.options.gateway,
                        delay.as_secs_f64()
                    ));
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        _ = self.stop.cancelled() => return Err(Step::Stopped),
                    }
                }
            }
        }
        Ok(self.conn.as_mut().expect("just connected"))
    }

    /// One message and its streamed answer; survives dropped links.
    async fn turn(&mut self, params: &AgentParams) -> Step {
        let mut accepted = None;
        let mut seen = Seen::default();
        let mut printed = String::new();
        let mut rewritten = false;
        loop {
            let stop = self.stop.clone();
            let out = self.out.clone();
            let (quiet_tx, mut quiet_rx) = mpsc::unbounded_channel::<()>();
            let show = |p: Progress| {
                let _ = quiet_tx.send(());
                match p {
                    Progress::Text(text) => {
                        out.write(&text);
                        printed.push_str(&text);
                    }
                    Progress::Rewritten => rewritten = true,
                    Progress::Tool { name, title } => {
                        let what = if title.is_empty() { name } else { title };
                        say(&format!("doctor: the agent runs {what}"));
                    }
                    Progress::Accepted(_) | Progress::Activity => {}
                }
            };
            let conn = match self.connection().await {
                Ok(conn) => conn,
                Err(step) => return step,
            };
            // Said once per quiet minute; the turn goes on.
            let quiet = async {
                let limit = quiet_notice();
                loop {
                    match tokio::time::timeout(limit, quiet_rx.recv()).await {
                        Ok(Some(())) => continue,
                        Ok(None) => std::future::pending::<()>().await,
                        Err(_) => say(&format!(
                            "doctor: no reply from the agent for {}s; still waiting (Ctrl-C stops)",
                            limit.as_secs_f64()
                        )),
                    }
                }
            };
            let turn = async {
                match &accepted {
                    None => operator::turn(conn, params, stop.cancelled(), show).await,
                    Some(run) => {
                        let (run, seen) = (Clone::clone(run), seen.clone());
                        operator::resume(conn, params, run, seen, stop.cancelled(), show).await
                    }
                }
            };
            let end = tokio::select! {
                end = turn => end,
                _ = quiet => unreachable!("the quiet notice never ends"),
            };
            match end {
                TurnEnd::Finished(finished) => {
                    let text = finished.text();
                    if rewritten || text.trim() != printed.trim() {
                        // What streamed was not the answer: show the answer.
                        if !printed.is_empty() {
                            self.out.write("\n\n");
                        }
                        self.out.write(&text);
                    } else if !printed.ends_with('\n') {
                        self.out.write("\n");
                    }
                    if !finished.ok() {
                        say(&format!(
                            "doctor: the run ended with status {}",
                            finished.status
                        ));
                    }
                    return Step::Done;
                }
                TurnEnd::Refused { error, accepted } => {
                    self.out.write("\n");
                    say(&format!("doctor: {}: {}", error.code, error.message));
                    if error.message.contains("unknown agent id") {
                        say("doctor: name the gateway's doctor agent with --agent");
                    }
                    return if accepted { Step::Done } else { Step::Fatal };
                }
                TurnEnd::Cancelled { aborted, .. } => {
                    self.out.write("\n");
                    say(if aborted {
                        "doctor: stopped; the run was aborted on the gateway"
                    } else {
                        "doctor: stopped; the gateway did not confirm the abort, the run may still be going"
                    });
                    return Step::Stopped;
                }
                TurnEnd::Lost {
                    accepted: run,
                    why,
                    seen: said,
                    ..
                } => {
                    say(&format!(
                        "doctor: connection lost ({why}); reconnecting to resume the session"
                    ));
                    self.conn = None;
                    self.dropped = true;
                    // What streamed so far is not streamed again.
                    seen = said;
                    // Not accepted yet: sending again with the same key is
                    // safe (the gateway deduplicates); accepted: follow it.
                    if run.is_some() {
                        accepted = run;
                    }
                    let delay = self.backoff.next();
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        _ = self.stop.cancelled() => return Step::Stopped,
                    }
                }
            }
        }
    }
}

/// The reply handed to app's `print` by a thread of its own: a reader of
/// stdout that stops reading must not stall the node.
#[derive(Clone)]
struct Stdout(std::sync::mpsc::SyncSender<Write_>);

enum Write_ {
    Text(String),
    Flush(std::sync::mpsc::Sender<()>),
}

impl Stdout {
    fn start(print: fn(&str)) -> Self {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Write_>(4096);
        std::thread::spawn(move || {
            for item in rx {
                match item {
                    Write_::Text(text) => print(&text),
                    Write_::Flush(done) => {
                        let _ = done.send(());
                    }
                }
            }
        });
        Self(tx)
    }

    /// The agent's words, escaped: its reply must not drive the terminal.
    fn write(&self, text: &str) {
        let text = crate::shared::escape::text(text).into_owned();
        let _ = self.0.try_send(Write_::Text(text));
    }

    /// Waits (briefly) until everything written so far is out.
    fn flush(&self) {
        let (done, flushed) = std::sync::mpsc::channel();
        if self.0.try_send(Write_::Flush(done)).is_ok() {
            let _ = flushed.recv_timeout(Duration::from_secs(1));
        }
    }
}
