//! The bridge's sessions: which connection serves each, and the messages
//! waiting for one whose client is away (at most N, oldest dropped first).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use super::frames::Out;

/// Characters of a message `bridge send` takes (the frame limit applies too).
const MAX_CONTENT: usize = 1 << 20;

struct Binding {
    id: u64,
    out: mpsc::Sender<Message>,
    cancel: CancellationToken,
}

#[derive(Default)]
struct Session {
    bound: Option<Binding>,
    waiting: VecDeque<Out>,
}

pub struct Hub {
    sessions: Mutex<HashMap<String, Session>>,
    buffer: usize,
    next: std::sync::atomic::AtomicU64,
}

impl Hub {
    pub fn new(sessions: Vec<String>, buffer: usize) -> Self {
        Self {
            sessions: Mutex::new(
                sessions
                    .into_iter()
                    .map(|s| (s, Session::default()))
                    .collect(),
            ),
            buffer,
            next: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Binds `session` to a connection, replacing (and ending) an older one
    /// — a client reconnects before the bridge notices it left. The
    /// binding's id, and the messages that waited; None: no such session.
    pub fn bind(
        &self,
        session: &str,
        out: mpsc::Sender<Message>,
        cancel: CancellationToken,
    ) -> Option<(u64, Vec<Out>)> {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut sessions = self.sessions.lock().unwrap();
        let state = sessions.get_mut(session)?;
        if let Some(old) = state.bound.replace(Binding { id, out, cancel }) {
            super::say(&format!(
                "session {session}: a new connection replaces the old one"
            ));
            old.cancel.cancel();
        }
        Some((id, state.waiting.drain(..).collect()))
    }

    /// Forgets the binding `id` of `session` (not a newer one).
    pub fn unbind(&self, session: &str, id: u64) {
        let mut sessions = self.sessions.lock().unwrap();
        if let Some(state) = sessions.get_mut(session)
            && state.bound.as_ref().is_some_and(|b| b.id == id)
        {
            state.bound = None;
        }
    }

    /// Delivers a message to `session`'s client now, or keeps it for the
    /// next `hello`: its request id, whether it went out, and how many
    /// wait.
    pub fn deliver(
        &self,
        session: &str,
        content: String,
        meta: Value,
    ) -> Result<(String, bool, usize), String> {
        if content.chars().count() > MAX_CONTENT {
            return Err(format!("a message is limited to {MAX_CONTENT} characters"));
        }
        if !(meta.is_null() || meta.is_object()) {
            return Err("meta must be a JSON object".into());
        }
        let mut sessions = self.sessions.lock().unwrap();
        let Some(state) = sessions.get_mut(session) else {
            return Err(format!(
                "unknown session {session:?}: this bridge serves {}",
                {
                    let mut names: Vec<&str> = sessions.keys().map(String::as_str).collect();
                    names.sort_unstable();
                    names.join(", ")
                }
            ));
        };
        let request_id = format!("msg_{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        let mut meta = match meta {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        meta.entry("chat_id").or_insert_with(|| json!(session));
        meta.entry("ts")
            .or_insert_with(|| json!(crate::shared::clock::now_ms()));
        meta.entry("source_channel")
            .or_insert_with(|| json!("clawbot_router"));
        let frame = Out::InboundMessage {
            request_id: request_id.clone(),
            content,
            meta: Value::Object(meta),
        };
        if let Some(binding) = &state.bound {
            if binding.out.try_send(Message::text(frame.text())).is_ok() {
                return Ok((request_id, true, state.waiting.len()));
            }
            // Not reading, or gone: end that connection; the message waits
            // for the next hello.
            super::say(&format!(
                "session {session}: its client takes no frames; the connection is ended and the message kept"
            ));
            binding.cancel.cancel();
            state.bound = None;
        }
        if self.buffer == 0 {
            return Err(format!(
                "session {session} has no client connected and --buffer is 0: the message is not kept"
            ));
        }
        if state.waiting.len() >= self.buffer {
            state.waiting.pop_front();
            super::say(&format!(
                "session {session}: buffer full ({} messages); the oldest is dropped",
                self.buffer
            ));
        }
        state.waiting.push_back(frame);
        Ok((request_id, false, state.waiting.len()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_wait_for_the_client_and_the_oldest_go_first() {
        let hub = Hub::new(vec!["s1".into()], 2);
        for text in ["one", "two", "three"] {
            let (_, delivered, _) = hub.deliver("s1", text.into(), Value::Null).unwrap();
            assert!(!delivered);
        }
        let (tx, _rx) = mpsc::channel(8);
        let (_, waited) = hub.bind("s1", tx, CancellationToken::new()).unwrap();
        let texts: Vec<String> = waited
            .iter()
            .map(|m| {
                serde_json::from_str::<Value>(&m.text()).unwrap()["content"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(texts, ["two", "three"]);
        assert!(
            hub.deliver("nope", "x".into(), Value::Null)
                .unwrap_err()
                .contains("unknown session")
        );
        assert!(hub.deliver("s1", "x".into(), json!([1])).is_err());
    }

    #[test]
    fn a_new_connection_replaces_the_old_one() {
        let hub = Hub::new(vec!["s1".into()], 4);
        let (tx1, _rx1) = mpsc::channel(8);
        let first = CancellationToken::new();
        let (id1, _) = hub.bind("s1", tx1, first.clone()).unwrap();
        let (tx2, mut rx2) = mpsc::channel(8);
        let (id2, _) = hub.bind("s1", tx2, CancellationToken::new()).unwrap();
        assert!(first.is_cancelled());
        hub.unbind("s1", id1); // the old one leaving unbinds nothing
        let (_, delivered, _) = hub.deliver("s1", "hi".into(), Value::Null).unwrap();
        assert!(delivered);
        assert!(rx2.try_recv().is_ok());
        hub.unbind("s1", id2);
        assert!(!hub.deliver("s1", "later".into(), Value::Null).unwrap().1);
    }
}
