//! Server-sent events as seed 001 streams them: `event:` and `data:` lines,
//! `:` comments (the heartbeat), a blank line ending each event. Bounded:
//! a line or an event past the limit is an error, not a growing buffer.

/// One event: its name (`message` when none was given) and its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub name: String,
    pub data: String,
}

/// Bytes one event may hold.
pub const MAX_EVENT: usize = 1 << 20;

#[derive(Default)]
pub struct Parser {
    line: Vec<u8>,
    name: Option<String>,
    data: Option<String>,
}

impl Parser {
    /// Feeds `bytes`; the events they complete, or why the stream is bad.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Vec<Event>, String> {
        let mut events = Vec::new();
        for &b in bytes {
            if b != b'\n' {
                if self.line.len() >= MAX_EVENT {
                    return Err(format!("an event line is longer than {MAX_EVENT} bytes"));
                }
                self.line.push(b);
                continue;
            }
            if self.line.last() == Some(&b'\r') {
                self.line.pop();
            }
            let line = String::from_utf8_lossy(&std::mem::take(&mut self.line)).into_owned();
            if line.is_empty() {
                if let Some(data) = self.data.take() {
                    events.push(Event {
                        name: self.name.take().unwrap_or_else(|| "message".into()),
                        data,
                    });
                }
                self.name = None;
                continue;
            }
            if line.starts_with(':') {
                continue; // a comment: the heartbeat
            }
            let (field, value) = line.split_once(':').unwrap_or((line.as_str(), ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "event" => self.name = Some(value.to_owned()),
                "data" => {
                    let data = self.data.get_or_insert_with(String::new);
                    if !data.is_empty() {
                        data.push('\n');
                    }
                    if data.len() + value.len() > MAX_EVENT {
                        return Err(format!("an event is larger than {MAX_EVENT} bytes"));
                    }
                    data.push_str(value);
                }
                _ => {} // id, retry, unknown fields: nothing we use
            }
        }
        Ok(events)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_stream_parses_across_any_chunking() {
        let stream = b"event: assistant.delta\ndata: {\"text\":\"Sure - \"}\n\n: heartbeat\n\nevent: tool.request\r\ndata: {\"id\":\"t1\"}\r\n\r\nevent: assistant.final\ndata: {\"text\":\"Done.\"}\n\n";
        for size in [1, 3, 7, stream.len()] {
            let mut parser = Parser::default();
            let mut events = Vec::new();
            for chunk in stream.chunks(size) {
                events.extend(parser.feed(chunk).unwrap());
            }
            let names: Vec<&str> = events.iter().map(|e| e.name.as_str()).collect();
            assert_eq!(
                names,
                ["assistant.delta", "tool.request", "assistant.final"],
                "chunks of {size}"
            );
            assert_eq!(events[1].data, "{\"id\":\"t1\"}");
        }
    }

    #[test]
    fn multi_line_data_joins_and_oversized_lines_fail() {
        let mut parser = Parser::default();
        let events = parser.feed(b"data: a\ndata: b\n\n").unwrap();
        assert_eq!(
            events,
            [Event {
                name: "message".into(),
                data: "a\nb".into()
            }]
        );
        let mut parser = Parser::default();
        assert!(parser.feed(&vec![b'x'; MAX_EVENT + 1]).is_err());
    }
}
