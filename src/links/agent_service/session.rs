//! The conversation's service session (seed 001, `POST /v1/sessions`):
//! opened once, resumed by the next run. Kept per service and
//! conversation in `agent-service-sessions.json` in the state directory,
//! so `chat`'s turns and `chat memory` (another process, later) write in
//! the same session.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use hyper::Method;
use serde_json::json;

use super::super::http::Service;
use super::memory::{self, Problem};

const FILE: &str = "agent-service-sessions.json";

pub struct Session {
    service: Service,
    /// The desktop's conversation id (`jarvis_session_id`).
    conversation: String,
    state_dir: PathBuf,
    current: Mutex<String>,
}

impl Session {
    pub fn new(service: Service, conversation: String, state_dir: PathBuf) -> Self {
        Self {
            service,
            conversation,
            state_dir,
            current: Mutex::new(String::new()),
        }
    }

    pub fn service(&self) -> &Service {
        &self.service
    }

    pub fn conversation(&self) -> &str {
        &self.conversation
    }

    pub fn state_dir(&self) -> &std::path::Path {
        &self.state_dir
    }

    /// The `general_session_id` opened last (empty before [`Self::open`]).
    pub fn id(&self) -> String {
        self.current.lock().unwrap().clone()
    }

    /// `POST /v1/sessions`, resuming the session this conversation had
    /// (`resume`; a new one otherwise), within `within`. Says so in the
    /// log when the id is not the one kept; keeps the new one.
    pub async fn open(&self, resume: bool, within: Duration) -> Result<String, Problem> {
        let key = self.key();
        let mut body = json!({"jarvis_session_id": self.conversation});
        if let Some(previous) = self.saved().remove(&key).filter(|_| resume) {
            body["preferred_session_id"] = json!(previous);
        }
        let (status, answer) = self
            .service
            .exchange(
                Method::POST,
                "/v1/sessions",
                Some(&body),
                None,
                within,
                super::MAX_ANSWER,
            )
            .await
            .map_err(memory::failed)?;
        if !(200..300).contains(&status) {
            return Err(memory::service_problem(status, &answer));
        }
        let Some(id) = answer["general_session_id"]
            .as_str()
            .filter(|s| !s.is_empty() && s.len() <= 256)
        else {
            return Err(memory::bad_answer(
                status,
                format!(
                    "the service answered no usable general_session_id: {}",
                    super::cut(&answer.to_string())
                ),
            ));
        };
        self.keep(&key, id);
        *self.current.lock().unwrap() = id.to_owned();
        Ok(id.to_owned())
    }

    fn key(&self) -> String {
        format!("{} {}", self.service.shown(), self.conversation)
    }

    fn path(&self) -> PathBuf {
        self.state_dir.join(FILE)
    }

    /// Every conversation's kept session (none if the file is unreadable).
    fn saved(&self) -> HashMap<String, String> {
        std::fs::read(self.path())
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    /// Keeps `id` for `key`. The file is shared by every conversation and
    /// process (a running `chat` and a `chat memory` script): it is read,
    /// changed and replaced under a lock, so no process drops another's.
    fn keep(&self, key: &str, id: &str) {
        let _ = crate::shared::paths::create_private_dir(&self.state_dir);
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.path().with_extension("lock"));
        // Held for a read and a write of a small file; without a lock (a
        // filesystem that has none) the write still happens.
        let _held = lock.ok().filter(|f| f.lock().is_ok());
        let mut saved = self.saved();
        if saved.get(key).map(String::as_str) == Some(id) {
            return;
        }
        crate::shared::log::say_as(
            "chat",
            &format!("session {id} for conversation {}", self.conversation),
        );
        saved.insert(key.to_owned(), id.to_owned());
        let written = serde_json::to_vec_pretty(&saved)
            .map_err(std::io::Error::other)
            .and_then(|bytes| crate::shared::paths::write_private(&self.path(), &bytes));
        if let Err(e) = written {
            crate::shared::log::warn_as(
                "chat",
                &format!(
                    "cannot keep session {id} in {}: {e}; the next run opens a new one",
                    self.path().display()
                ),
            );
        }
    }
}
