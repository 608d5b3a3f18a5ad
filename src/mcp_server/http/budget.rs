//! Who holds the HTTP server's connections and sessions, and who gives one
//! up when a newcomer needs it — so that nobody, hostile or buggy, can hold
//! them all and lock a new client out.
//!
//! Everything here is bookkeeping and choice; it never touches a socket or
//! a session itself. Each decision hands back [`Victim`]s (connections to
//! close, streams to end) and session ids to end, and the server carries
//! them out once the lock is released.
//!
//! The rules, in the order they apply:
//!
//! - **A connection** belongs to its peer's address. When the address (or
//!   the server) holds all it may, a newcomer takes the place of a
//!   connection that is doing nothing (idle keep-alive, or a request not
//!   sent in full yet) — the least recently used one, from the address
//!   that holds the most;
//!   then of a standing SSE stream, oldest first (a stream is made to be
//!   reconnected: its client comes back, rather than a newcomer never
//!   getting in). A connection running a call is never taken; when every
//!   connection runs one, the newcomer is refused with a reason.
//! - **A session** may have one standing stream (rmcp delivers to one
//!   only; a second replaces the first, so a client reconnecting is not
//!   refused by its own half-dead stream) and a bounded number of requests
//!   in flight.
//! - **Sessions** are bounded per address and in all, the same way as
//!   connections: past the bound the session unused the longest goes first
//!   (one with a standing stream only after every idle one), one with a
//!   request in flight never.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio_util::sync::CancellationToken;

/// The bounds. README.md ("Limits" of `mcp --http`) says why each is what
/// it is.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub connections: usize,
    pub connections_per_address: usize,
    pub sessions: usize,
    pub sessions_per_address: usize,
    pub streams_per_session: usize,
    pub requests_per_session: usize,
}

/// Ends a response that is still streaming (a standing SSE stream), at
/// once: the body it streams is dropped before `stop` returns.
pub trait Stop: Send + Sync {
    fn stop(&self);
}

/// Why a connection, a request or a session is not taken.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Every connection of this address runs a request.
    AddressConnections(usize),
    /// Every connection of the server runs a request.
    AllConnections(usize),
    /// The session has this many requests in flight already.
    SessionRequests(usize),
    /// Every session of this address has a request in flight.
    AddressSessions(usize),
    /// Every session of the server has a request in flight.
    AllSessions(usize),
}

impl Refusal {
    /// The HTTP status: 429 when the client itself has too much running,
    /// 503 when the server does.
    pub fn status(&self) -> u16 {
        match self {
            Refusal::SessionRequests(_) => 429,
            _ => 503,
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::AddressConnections(n) => write!(
                f,
                "this address holds {n} connections to the server already, each running a request; try again when one answers"
            ),
            Refusal::AllConnections(n) => write!(
                f,
                "all {n} connections of the server are running requests; try again when one answers"
            ),
            Refusal::SessionRequests(n) => write!(
                f,
                "this session has {n} requests in flight already; send more when one answers"
            ),
            Refusal::AddressSessions(n) => write!(
                f,
                "this address holds {n} sessions already, each with a request in flight; end one (DELETE) or try again when one answers"
            ),
            Refusal::AllSessions(n) => write!(
                f,
                "all {n} sessions of the server have a request in flight; try again when one answers"
            ),
        }
    }
}

/// What a request is to the budget.
pub enum Request {
    /// Its body is still coming. Until it has come, the connection counts
    /// as one doing nothing: a client trickling a body, like one trickling
    /// a request head, holds no place a newcomer cannot take.
    Receiving,
    /// Outside any session (`initialize`, a refused request).
    Plain,
    /// A POST or DELETE of a session: counts against its requests in flight.
    Posted { session: String },
    /// A GET of a session: a standing SSE stream, ended through `stop`.
    Stream {
        session: String,
        stop: Arc<dyn Stop>,
    },
}

/// What someone else gives up: carry it out with [`Victim::go`] once the
/// decision is made.
#[must_use]
pub struct Victim {
    /// The connection to close (`None`: only its stream ends).
    close: Option<CancellationToken>,
    stop: Option<Arc<dyn Stop>>,
}

impl Victim {
    pub fn go(self) {
        if let Some(stop) = self.stop {
            stop.stop();
        }
        if let Some(close) = self.close {
            close.cancel();
        }
    }
}

pub struct Budget {
    limits: Limits,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Orders uses: a larger value is more recent.
    clock: u64,
    next_id: u64,
    connections: HashMap<u64, Connection>,
    sessions: HashMap<String, Session>,
}

struct Connection {
    peer: IpAddr,
    used: u64,
    doing: Doing,
    close: CancellationToken,
}

enum Doing {
    Nothing,
    Receiving {
        seq: u64,
    },
    /// `seq` tells this request's end from a later one's.
    Plain {
        seq: u64,
    },
    Posted {
        seq: u64,
        session: String,
    },
    Stream {
        seq: u64,
        session: String,
        stop: Arc<dyn Stop>,
    },
}

impl Doing {
    fn seq(&self) -> Option<u64> {
        match self {
            Doing::Nothing => None,
            Doing::Receiving { seq }
            | Doing::Plain { seq }
            | Doing::Posted { seq, .. }
            | Doing::Stream { seq, .. } => Some(*seq),
        }
    }

    fn session(&self) -> Option<&str> {
        match self {
            Doing::Posted { session, .. } | Doing::Stream { session, .. } => Some(session),
            _ => None,
        }
    }
}

struct Session {
    peer: IpAddr,
    used: u64,
}

/// How readily something gives up its place: idle before streaming;
/// `None` for something running a request, which never does.
type Rank = Option<u8>;
const IDLE: Rank = Some(0);
const STREAMING: Rank = Some(1);

/// Of `candidates` (key, owner, rank, last use), the one to give up its
/// place: the lowest rank, then the owner holding the most, then the
/// least recently used.
fn choose<K: Clone>(candidates: &[(K, IpAddr, Rank, u64)]) -> Option<K> {
    let mut held: HashMap<IpAddr, usize> = HashMap::new();
    for (_, owner, _, _) in candidates {
        *held.entry(*owner).or_default() += 1;
    }
    candidates
        .iter()
        .filter_map(|(key, owner, rank, used)| {
            rank.map(|rank| (rank, std::cmp::Reverse(held[owner]), *used, key))
        })
        .min_by(|a, b| (a.0, a.1, a.2).cmp(&(b.0, b.1, b.2)))
        .map(|(_, _, _, key)| key.clone())
}

impl State {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn connection_candidates(&self, only: Option<IpAddr>) -> Vec<(u64, IpAddr, Rank, u64)> {
        self.connections
            .iter()
            .filter(|(_, c)| only.is_none_or(|peer| c.peer == peer))
            .map(|(id, c)| {
                let rank = match c.doing {
                    Doing::Nothing | Doing::Receiving { .. } => IDLE,
                    Doing::Stream { .. } => STREAMING,
                    Doing::Plain { .. } | Doing::Posted { .. } => None,
                };
                (*id, c.peer, rank, c.used)
            })
            .collect()
    }

    /// Takes a connection out of the budget: it is closing.
    fn evict_connection(&mut self, id: u64) -> Victim {
        let connection = self
            .connections
            .remove(&id)
            .expect("a connection chosen from the map");
        let stop = match connection.doing {
            Doing::Stream { stop, .. } => Some(stop),
            _ => None,
        };
        Victim {
            close: Some(connection.close),
            stop,
        }
    }

    /// `(streams, requests)` of a session now.
    fn session_use(&self, session: &str) -> (usize, usize) {
        let mut used = (0, 0);
        for c in self.connections.values() {
            match &c.doing {
                Doing::Stream { session: s, .. } if s == session => used.0 += 1,
                Doing::Posted { session: s, .. } if s == session => used.1 += 1,
                _ => {}
            }
        }
        used
    }

    fn session_candidates(&self, only: Option<IpAddr>) -> Vec<(String, IpAddr, Rank, u64)> {
        self.sessions
            .iter()
            .filter(|(_, s)| only.is_none_or(|peer| s.peer == peer))
            .map(|(id, s)| {
                let rank = match self.session_use(id) {
                    (_, requests) if requests > 0 => None,
                    (streams, _) if streams > 0 => STREAMING,
                    _ => IDLE,
                };
                (id.clone(), s.peer, rank, s.used)
            })
            .collect()
    }

    fn touch(&mut self, session: &str) {
        let now = self.tick();
        if let Some(s) = self.sessions.get_mut(session) {
            s.used = now;
        }
    }
}

impl Budget {
    pub fn new(limits: Limits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            state: Mutex::new(State::default()),
        })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Bookkeeping only: a panic elsewhere leaves nothing half-done.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new connection from `peer`: its ticket, and whom it displaced;
    /// or why there is no room.
    pub fn admit(self: &Arc<Self>, peer: IpAddr) -> Result<(Ticket, Vec<Victim>), Refusal> {
        let mut state = self.state();
        let mut victims = Vec::new();
        let from_peer = state
            .connections
            .values()
            .filter(|c| c.peer == peer)
            .count();
        if from_peer >= self.limits.connections_per_address {
            let id = choose(&state.connection_candidates(Some(peer)))
                .ok_or(Refusal::AddressConnections(from_peer))?;
            victims.push(state.evict_connection(id));
        } else if state.connections.len() >= self.limits.connections {
            let id = choose(&state.connection_candidates(None))
                .ok_or(Refusal::AllConnections(state.connections.len()))?;
            victims.push(state.evict_connection(id));
        }
        let id = state.next_id;
        state.next_id += 1;
        let used = state.tick();
        let close = CancellationToken::new();
        state.connections.insert(
            id,
            Connection {
                peer,
                used,
                doing: Doing::Nothing,
                close: close.clone(),
            },
        );
        Ok((
            Ticket {
                budget: Arc::clone(self),
                id,
                peer,
                closed: close,
            },
            victims,
        ))
    }

    /// A session `initialize` just opened for `peer`: the sessions to end
    /// to make room for it; or why there is none (then end the new one).
    pub fn session_opened(&self, session: &str, peer: IpAddr) -> Result<Vec<String>, Refusal> {
        let mut state = self.state();
        let used = state.tick();
        state
            .sessions
            .insert(session.to_owned(), Session { peer, used });
        let mut ending = Vec::new();
        let others = |state: &State, only: Option<IpAddr>| {
            let mut candidates = state.session_candidates(only);
            candidates.retain(|(id, ..)| id != session);
            candidates
        };
        let from_peer = state.sessions.values().filter(|s| s.peer == peer).count();
        let refusal = if from_peer > self.limits.sessions_per_address {
            match choose(&others(&state, Some(peer))) {
                Some(id) => {
                    ending.push(id);
                    None
                }
                None => Some(Refusal::AddressSessions(from_peer - 1)),
            }
        } else if state.sessions.len() > self.limits.sessions {
            match choose(&others(&state, None)) {
                Some(id) => {
                    ending.push(id);
                    None
                }
                None => Some(Refusal::AllSessions(state.sessions.len() - 1)),
            }
        } else {
            None
        };
        if let Some(refusal) = refusal {
            state.sessions.remove(session);
            return Err(refusal);
        }
        for id in &ending {
            state.sessions.remove(id);
        }
        Ok(ending)
    }

    /// A session ended (DELETE).
    pub fn session_closed(&self, session: &str) {
        self.state().sessions.remove(session);
    }

    #[cfg(test)]
    fn held(&self) -> (usize, usize) {
        let state = self.state();
        (state.connections.len(), state.sessions.len())
    }
}

/// A connection's place in the budget, given up when it is dropped.
/// `closed` fires when a newcomer took its place.
pub struct Ticket {
    budget: Arc<Budget>,
    id: u64,
    pub peer: IpAddr,
    pub closed: CancellationToken,
}

impl Ticket {
    /// A request starts on this connection: its hold (until its response
    /// ends), and the streams it replaces; or why it may not run.
    pub fn request(&self, request: Request) -> Result<(InFlight, Vec<Victim>), Refusal> {
        let limits = self.budget.limits;
        let mut state = self.budget.state();
        let mut victims = Vec::new();
        let seq = state.tick();
        let doing = match request {
            Request::Receiving => Doing::Receiving { seq },
            Request::Plain => Doing::Plain { seq },
            Request::Posted { session } => {
                state.touch(&session);
                let (_, requests) = state.session_use(&session);
                if requests >= limits.requests_per_session {
                    return Err(Refusal::SessionRequests(requests));
                }
                Doing::Posted { seq, session }
            }
            Request::Stream { session, stop } => {
                state.touch(&session);
                // The newest stream wins: the oldest ones end (their
                // connections stay, idle).
                let mut streams: Vec<(u64, u64)> = state
                    .connections
                    .iter()
                    .filter(|(_, c)| {
                        matches!(&c.doing, Doing::Stream { session: s, .. } if *s == session)
                    })
                    .map(|(id, c)| (c.used, *id))
                    .collect();
                streams.sort_unstable();
                let over = (streams.len() + 1).saturating_sub(limits.streams_per_session);
                for (_, id) in streams.into_iter().take(over) {
                    let connection = state.connections.get_mut(&id).expect("listed just now");
                    if let Doing::Stream { stop, .. } =
                        std::mem::replace(&mut connection.doing, Doing::Nothing)
                    {
                        connection.used = seq;
                        victims.push(Victim {
                            close: None,
                            stop: Some(stop),
                        });
                    }
                }
                Doing::Stream { seq, session, stop }
            }
        };
        // A connection a newcomer took over finishes this request outside
        // the budget, then closes.
        if let Some(connection) = state.connections.get_mut(&self.id) {
            connection.doing = doing;
            connection.used = seq;
        }
        Ok((
            InFlight {
                budget: Arc::clone(&self.budget),
                connection: self.id,
                seq,
            },
            victims,
        ))
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.budget.state().connections.remove(&self.id);
    }
}

/// A request's hold on its connection, until its response has ended.
pub struct InFlight {
    budget: Arc<Budget>,
    connection: u64,
    seq: u64,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut state = self.budget.state();
        let now = state.tick();
        let Some(connection) = state.connections.get_mut(&self.connection) else {
            return;
        };
        if connection.doing.seq() != Some(self.seq) {
            return;
        }
        let session = connection.doing.session().map(str::to_owned);
        connection.doing = Doing::Nothing;
        connection.used = now;
        if let Some(session) = session {
            state.touch(&session);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    const SMALL: Limits = Limits {
        connections: 4,
        connections_per_address: 2,
        sessions: 4,
        sessions_per_address: 2,
        streams_per_session: 1,
        requests_per_session: 2,
    };

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[derive(Default)]
    struct Flag(AtomicBool);
    impl Stop for Flag {
        fn stop(&self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    impl Flag {
        fn stopped(&self) -> bool {
            self.0.load(Ordering::SeqCst)
        }
    }

    fn go(victims: Vec<Victim>) {
        victims.into_iter().for_each(Victim::go);
    }

    fn stream(ticket: &Ticket, session: &str) -> (InFlight, Arc<Flag>) {
        let flag = Arc::new(Flag::default());
        let (held, victims) = ticket
            .request(Request::Stream {
                session: session.into(),
                stop: flag.clone(),
            })
            .unwrap();
        go(victims);
        (held, flag)
    }

    fn posted(ticket: &Ticket, session: &str) -> Result<InFlight, Refusal> {
        ticket
            .request(Request::Posted {
                session: session.into(),
            })
            .map(|(held, victims)| {
                assert!(victims.is_empty());
                held
            })
    }

    #[test]
    fn an_idle_connection_of_the_same_address_makes_room_least_recently_used_first() {
        let budget = Budget::new(SMALL);
        let (first, _) = budget.admit(ip(1)).unwrap();
        let (second, _) = budget.admit(ip(1)).unwrap();
        // The first was used since: the second is the one unused longest.
        drop(first.request(Request::Plain).unwrap());
        let (_third, victims) = budget.admit(ip(1)).unwrap();
        assert_eq!(victims.len(), 1);
        go(victims);
        assert!(second.closed.is_cancelled());
        assert!(!first.closed.is_cancelled());
        assert_eq!(budget.held().0, 2);
    }

    #[test]
    fn a_standing_stream_goes_only_after_every_idle_connection() {
        let budget = Budget::new(SMALL);
        let (streaming, _) = budget.admit(ip(1)).unwrap();
        let (_held, flag) = stream(&streaming, "s1");
        let (idle, _) = budget.admit(ip(1)).unwrap();
        let (_next, victims) = budget.admit(ip(1)).unwrap();
        go(victims);
        assert!(idle.closed.is_cancelled() && !streaming.closed.is_cancelled());
        assert!(!flag.stopped());
        // Now only the stream and the newcomer (idle) are left.
        let (_next, victims) = budget.admit(ip(1)).unwrap();
        go(victims);
        assert!(
            !streaming.closed.is_cancelled(),
            "the idle newcomer went first"
        );
    }

    #[test]
    fn a_stream_is_ended_and_its_connection_closed_when_nothing_idle_is_left() {
        let budget = Budget::new(SMALL);
        let (a, _) = budget.admit(ip(1)).unwrap();
        let (b, _) = budget.admit(ip(1)).unwrap();
        let (_ha, flag_a) = stream(&a, "s1");
        let (_hb, flag_b) = stream(&b, "s2");
        let (_c, victims) = budget.admit(ip(1)).unwrap();
        go(victims);
        // The oldest stream.
        assert!(flag_a.stopped() && a.closed.is_cancelled());
        assert!(!flag_b.stopped() && !b.closed.is_cancelled());
    }

    #[test]
    fn a_running_request_is_never_displaced_and_the_newcomer_hears_why() {
        let budget = Budget::new(SMALL);
        let (a, _) = budget.admit(ip(1)).unwrap();
        let (b, _) = budget.admit(ip(1)).unwrap();
        let _ha = posted(&a, "s1").unwrap();
        let _hb = posted(&b, "s2").unwrap();
        assert_eq!(
            budget.admit(ip(1)).err(),
            Some(Refusal::AddressConnections(2))
        );
        // Another address still gets in.
        assert!(budget.admit(ip(2)).is_ok());
    }

    #[test]
    fn a_full_server_takes_from_the_address_holding_the_most() {
        let budget = Budget::new(SMALL);
        let (a1, _) = budget.admit(ip(1)).unwrap();
        let (a2, _) = budget.admit(ip(1)).unwrap();
        let (b1, _) = budget.admit(ip(2)).unwrap();
        let (b2, victims) = budget.admit(ip(2)).unwrap();
        assert!(victims.is_empty());
        drop(b1.request(Request::Plain).unwrap());
        // ip(1) and ip(2) hold as many: the least recently used goes.
        let (_c, victims) = budget.admit(ip(3)).unwrap();
        go(victims);
        assert!(a1.closed.is_cancelled());
        // Now ip(2) holds the most, although a2 is older than b2.
        let (_d, victims) = budget.admit(ip(3)).unwrap();
        go(victims);
        assert!(b2.closed.is_cancelled());
        assert!(!a2.closed.is_cancelled() && !b1.closed.is_cancelled());
        assert_eq!(budget.held().0, 4);
    }

    #[test]
    fn a_full_server_of_running_requests_refuses_a_newcomer() {
        let budget = Budget::new(SMALL);
        let tickets: Vec<_> = [1, 1, 2, 2]
            .map(|peer| budget.admit(ip(peer)).unwrap().0)
            .into_iter()
            .collect();
        let mut running: Vec<_> = tickets
            .iter()
            .map(|t| t.request(Request::Plain).unwrap().0)
            .collect();
        assert_eq!(budget.admit(ip(3)).err(), Some(Refusal::AllConnections(4)));
        // One answers: room again.
        running.pop();
        assert!(budget.admit(ip(3)).is_ok());
    }

    #[test]
    fn a_session_has_one_standing_stream_and_the_newest_wins() {
        let budget = Budget::new(SMALL);
        let (a, _) = budget.admit(ip(1)).unwrap();
        let (b, _) = budget.admit(ip(2)).unwrap();
        let (_ha, first) = stream(&a, "s1");
        let (_hb, second) = stream(&b, "s1");
        assert!(first.stopped() && !second.stopped());
        // Its connection stays, idle: the next newcomer of ip(1) past the
        // bound takes it.
        assert!(!a.closed.is_cancelled());
        let (_c, victims) = budget.admit(ip(1)).unwrap();
        assert!(victims.is_empty());
        let (_d, victims) = budget.admit(ip(1)).unwrap();
        go(victims);
        assert!(a.closed.is_cancelled());
    }

    #[test]
    fn a_session_takes_a_bounded_number_of_requests_at_once() {
        let budget = Budget::new(SMALL);
        let tickets: Vec<_> = [1, 1, 2, 2]
            .map(|peer| budget.admit(ip(peer)).unwrap().0)
            .into_iter()
            .collect();
        let first = posted(&tickets[0], "s1").unwrap();
        let _second = posted(&tickets[2], "s1").unwrap();
        assert_eq!(
            posted(&tickets[1], "s1").err(),
            Some(Refusal::SessionRequests(2))
        );
        // Another session is not held back by it.
        let _other = posted(&tickets[1], "s2").unwrap();
        drop(first);
        assert!(posted(&tickets[3], "s1").is_ok());
    }

    #[test]
    fn a_request_whose_body_is_still_coming_holds_no_place() {
        let budget = Budget::new(SMALL);
        let (a, _) = budget.admit(ip(1)).unwrap();
        let (b, _) = budget.admit(ip(1)).unwrap();
        let (_receiving_a, _) = a.request(Request::Receiving).unwrap();
        let (_receiving_b, _) = b.request(Request::Receiving).unwrap();
        let (_c, victims) = budget.admit(ip(1)).unwrap();
        go(victims);
        assert!(a.closed.is_cancelled(), "the one trickling longest went");
        // Once its body has come, a request runs: no longer displaced.
        let _running = posted(&b, "s1").unwrap();
        let (_d, victims) = budget.admit(ip(1)).unwrap();
        go(victims);
        assert!(!b.closed.is_cancelled());
    }

    #[test]
    fn a_response_ending_late_does_not_free_the_request_after_it() {
        let budget = Budget::new(SMALL);
        let (a, _) = budget.admit(ip(1)).unwrap();
        let (first, _) = a.request(Request::Plain).unwrap();
        let (_second, _) = a.request(Request::Plain).unwrap();
        drop(first);
        let (b, _) = budget.admit(ip(1)).unwrap();
        let (_c, victims) = budget.admit(ip(1)).unwrap();
        go(victims);
        assert!(b.closed.is_cancelled(), "the idle one made room");
        assert!(
            !a.closed.is_cancelled(),
            "`a` still runs its second request"
        );
    }

    #[test]
    fn sessions_past_the_bound_end_idle_first_and_busy_never() {
        let budget = Budget::new(SMALL);
        assert_eq!(budget.session_opened("s1", ip(1)), Ok(vec![]));
        assert_eq!(budget.session_opened("s2", ip(1)), Ok(vec![]));
        // s1 has a standing stream, s2 is idle: s2 goes.
        let (a, _) = budget.admit(ip(1)).unwrap();
        let (_ha, _) = stream(&a, "s1");
        assert_eq!(budget.session_opened("s3", ip(1)), Ok(vec!["s2".into()]));
        // s3 runs a request: s1 (streaming) goes rather than s3.
        let (b, _) = budget.admit(ip(2)).unwrap();
        let hb = posted(&b, "s3").unwrap();
        assert_eq!(budget.session_opened("s4", ip(1)), Ok(vec!["s1".into()]));
        // s3 and s4 both running requests: the next one is refused, and
        // not counted.
        let (c, _) = budget.admit(ip(2)).unwrap();
        let _hc = posted(&c, "s4").unwrap();
        assert_eq!(
            budget.session_opened("s5", ip(1)),
            Err(Refusal::AddressSessions(2))
        );
        assert_eq!(budget.held().1, 2);
        // Other addresses fill the server; then the one holding the most
        // gives up its idle session.
        drop(hb);
        assert_eq!(budget.session_opened("t1", ip(2)), Ok(vec![]));
        assert_eq!(budget.session_opened("t2", ip(2)), Ok(vec![]));
        assert_eq!(budget.session_opened("u1", ip(3)), Ok(vec!["s3".into()]));
        budget.session_closed("t1");
        assert_eq!(budget.held().1, 3);
    }
}
