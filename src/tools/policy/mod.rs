//! The one approval policy every link to a remote agent goes through (seeds
//! 000 §6, 001, 003 "airlock"): each call is safe, risky or forbidden, and a
//! risky call runs only when something approved it.
//!
//! Order of rules, first match wins:
//! 1. forbidden — `--deny-command`, or a built-in rule (privilege escalation,
//!    wiping the disk, powering off) — always refused (`FORBIDDEN`);
//! 2. safe (reads) — run;
//! 3. pre-approved — `--allow-command NAME` matching the command or the
//!    executable's name — run;
//! 4. "allow always" remembered in the state directory, bound to the
//!    command and, for commands, to the resolved executable and argv — run;
//! 5. `--approval allow` runs, `deny` refuses, `ask` asks on the terminal —
//!    only when stdin and stderr are terminals, else refuses
//!    (`USER_REJECTED`).
//!
//! The built-in rules are a guard rail against an agent's obvious
//! mistakes, not a sandbox: a shell script can always hide what it runs.
//!
//! This file holds that order (`settle`) and who decides what no rule
//! settles (the terminal, the gateway's operators); `call` the values it
//! speaks in, `lists` the two lists' matching, `always` the remembered
//! answers. Must never run what it decides about.

mod always;
mod call;
mod lists;

use std::path::Path;
use std::time::Duration;

use always::{Always, Remembered};
use lists::Lists;

pub use call::{Call, Decision, Exec, Gate, Mode, Risk, Stance};

use crate::ui::{Answer, Prompter};

/// A call's decision before anyone is asked, or that a human must decide.
enum Settled {
    Done(Decision),
    Human,
}

pub struct Policy {
    mode: Mode,
    /// `--allow-command` and `--deny-command`.
    lists: Lists,
    /// The answers a human gave for good.
    always: Always,
    prompter: Option<Prompter>,
    /// OpenClaw's exec-approvals document, managed from the gateway.
    document: std::sync::Arc<super::approvals::Store>,
    /// Who is asking, as the terminal prompt names it.
    asker: String,
    /// Whether an OpenClaw gateway can ask its operators (the node), or
    /// nobody but this terminal can (a link).
    gateway: bool,
}

impl Policy {
    pub fn new(
        mode: Mode,
        allow: Vec<String>,
        deny: Vec<String>,
        state_dir: &Path,
        prompter: Option<Prompter>,
    ) -> Self {
        Self {
            mode,
            lists: Lists::new(allow, deny),
            always: Always::open(state_dir),
            prompter,
            document: std::sync::Arc::new(super::approvals::Store::open(state_dir)),
            asker: "OpenClaw".into(),
            gateway: true,
        }
    }

    /// Names who asks in the terminal prompt ("OpenClaw" by default).
    pub fn asked_by(mut self, asker: impl Into<String>) -> Self {
        self.asker = asker.into();
        self
    }

    /// No gateway stands behind the caller (a link): a human decides on
    /// this terminal or not at all.
    pub fn without_gateway(mut self) -> Self {
        self.gateway = false;
        self
    }

    /// The exec-approvals document (`system.execApprovals.*`).
    pub fn document(&self) -> &super::approvals::Store {
        &self.document
    }

    /// Whether `--deny-command` forbids the command `name` (`upstream`: a
    /// server's `SERVER.TOOL`) outright.
    pub fn forbids(&self, name: &str, upstream: bool) -> bool {
        let call = Call {
            command: name.to_owned(),
            risk: Risk::Risky,
            summary: String::new(),
            exec: None,
            agent: None,
            upstream,
            one_shot: false,
        };
        self.denied(&call).is_some()
    }

    /// The forbidden rules, which nothing overrides.
    fn forbidden(&self, call: &Call) -> Option<Decision> {
        if let Some(name) = self.denied(call) {
            return Some(Decision::Refused {
                code: "FORBIDDEN",
                message: format!(
                    "{} is forbidden on this node (--deny-command {name})",
                    call.command
                ),
            });
        }
        let rule = call.exec.as_ref().and_then(super::forbidden::rule_broken)?;
        Some(Decision::Refused {
            code: "FORBIDDEN",
            message: format!("{} is forbidden on this node: {rule}", call.command),
        })
    }

    /// How `call` is decided before anyone is asked: the one reading that
    /// deciding, deciding with a gateway's approval and telling the gateway
    /// (`system.run.prepare`) all share.
    fn settle(&self, call: &Call) -> Settled {
        use super::approvals::Verdict;
        if let Some(refusal) = self.forbidden(call) {
            return Settled::Done(refusal);
        }
        if call.risk == Risk::Safe {
            return Settled::Done(Decision::Allowed("safe"));
        }
        let verdict = call
            .exec
            .as_ref()
            .map(|e| self.document.verdict(e, call.agent.as_deref()))
            .unwrap_or(Verdict::Silent);
        match verdict {
            Verdict::Denied => {
                return Settled::Done(Decision::Refused {
                    code: "FORBIDDEN",
                    message: format!(
                        "{} is refused: the exec approvals document says security=deny (openclaw approvals get --node)",
                        call.command
                    ),
                });
            }
            // The document is the gateway operators' standing decision: it
            // stands where they are this node's approvers, and never for a
            // call that changes the environment it runs in.
            Verdict::Allowed
                if self.asks_gateway() && call.exec.as_ref().is_some_and(|e| e.env.is_empty()) =>
            {
                return Settled::Done(Decision::Allowed("allowlist"));
            }
            Verdict::MustAsk => return Settled::Human,
            Verdict::Allowed | Verdict::Silent => {}
        }
        if self.pre_approved(call) {
            return Settled::Done(Decision::Allowed("allow-command"));
        }
        if self.is_remembered(call) {
            return Settled::Done(Decision::Allowed("always"));
        }
        match self.mode {
            Mode::Allow => Settled::Done(Decision::Allowed("approval-allow")),
            Mode::Deny => Settled::Done(rejected("the node's approval policy is deny")),
            Mode::Ask | Mode::Gateway => Settled::Human,
        }
    }

    /// Decides `call`; a question on the terminal waits at most `wait`.
    pub async fn decide(&self, call: &Call, wait: Duration) -> Decision {
        match self.settle(call) {
            Settled::Done(decision) => decision,
            Settled::Human => self.ask_human(call, wait, true).await,
        }
    }

    /// A call the gateway's operator approved (`system.run` re-sent with
    /// `approved`): the approval stands in for the human only — what this
    /// node forbids or refuses stays so — and only where the gateway's
    /// operators are this node's approvers (no terminal, or `gateway`).
    pub async fn decide_granted(
        &self,
        call: &Call,
        wait: Duration,
        grant: Option<super::plans::Grant>,
    ) -> Decision {
        let Some(grant) = grant.filter(|_| self.asks_gateway()) else {
            return self.decide(call, wait).await;
        };
        match self.settle(call) {
            Settled::Done(decision) => decision,
            Settled::Human if grant.always && !call.one_shot => {
                if let Some(exec) = &call.exec {
                    self.document.allow_always(exec, call.agent.as_deref());
                }
                Decision::Allowed("gateway-always")
            }
            Settled::Human => Decision::Allowed("gateway-once"),
        }
    }

    /// Decides `call` under what the remote side said of it (`gate`): the
    /// stricter of the two wins, and the forbidden rules always stand.
    /// (`grant`: a gateway operator's approval, which only our own gate
    /// can carry.)
    pub async fn decide_gated(
        &self,
        call: &Call,
        wait: Duration,
        gate: Gate,
        grant: Option<super::plans::Grant>,
    ) -> Decision {
        if let Some(refusal) = self.forbidden(call) {
            return refusal;
        }
        match gate {
            Gate::Ours => self.decide_granted(call, wait, grant).await,
            Gate::Risky => {
                let call = Call {
                    risk: Risk::Risky,
                    ..call.clone()
                };
                self.decide(&call, wait).await
            }
            // Headless stands in for the human only: what the policy
            // settles without one (--approval deny, a pre-approval) stands.
            Gate::Headless => match self.settle(call) {
                Settled::Done(decision) => decision,
                Settled::Human if call.exec.is_none() => Decision::Allowed("headless"),
                Settled::Human => self.ask_human(call, wait, true).await,
            },
            Gate::Human if self.mode == Mode::Deny => {
                rejected("the node's approval policy is deny")
            }
            Gate::Human if self.prompter.is_none() => Decision::Refused {
                code: "APPROVAL_REQUIRED",
                message: format!(
                    "{} needs a human's approval every time it is asked for this way, and no terminal can ask here (start on a terminal with --approval ask)",
                    call.command
                ),
            },
            // Asked every time: an "always" answer is not remembered.
            Gate::Human => self.ask_human(call, wait, false).await,
        }
    }

    /// Whether a human's decision comes from the gateway's operators.
    fn asks_gateway(&self) -> bool {
        self.gateway
            && (self.mode == Mode::Gateway || (self.mode == Mode::Ask && self.prompter.is_none()))
    }

    /// What `system.run.prepare` tells the gateway about this call: open
    /// when it is allowed without a human or our terminal will ask;
    /// approvals when the gateway's operators must decide; closed when it
    /// is refused here anyway.
    pub fn stance_for(&self, call: Option<&Call>) -> Stance {
        let human = if self.asks_gateway() {
            Stance::Approvals
        } else {
            Stance::Open
        };
        match call.map(|c| self.settle(c)) {
            None if self.mode == Mode::Deny => Stance::Closed,
            None | Some(Settled::Human) => human,
            Some(Settled::Done(Decision::Allowed(_))) => Stance::Open,
            Some(Settled::Done(Decision::Refused { .. })) => Stance::Closed,
        }
    }

    /// A human decides: on the terminal when there is one (and the mode is
    /// not `gateway`); otherwise the call is refused as needing approval,
    /// which for `system.run` makes OpenClaw's gateway ask its operators.
    async fn ask_human(&self, call: &Call, wait: Duration, remember: bool) -> Decision {
        let prompter = self
            .prompter
            .as_ref()
            .filter(|_| self.mode != Mode::Gateway);
        match prompter {
            None if call.exec.is_none() || !self.gateway => Decision::Refused {
                code: "APPROVAL_REQUIRED",
                message: format!(
                    "{} needs a human's approval and no terminal can ask here: start clawbot_router on a terminal to be asked, or with --allow-command {} or --approval allow",
                    call.command, call.command
                ),
            },
            None => Decision::Refused {
                code: "APPROVAL_REQUIRED",
                message: format!(
                    "{} needs a human's approval and no terminal can ask here: approve it from the gateway (an agent's exec on this node raises an exec approval: openclaw approvals pending / resolve), allowlist the program (openclaw approvals allowlist add --node <this node> <program path>), or start the node with --allow-command {} or --approval allow",
                    call.command, call.command
                ),
            },
            Some(prompter) => match prompter.ask(&self.asker, &call.summary, wait).await {
                Answer::Once => Decision::Allowed("user-once"),
                Answer::Always => {
                    if remember {
                        self.remember(call);
                    }
                    Decision::Allowed("user-always")
                }
                Answer::Deny => rejected("User declined to execute this operation"),
                Answer::TimedOut => rejected("no answer from the user in time"),
            },
        }
    }

    fn denied(&self, call: &Call) -> Option<&str> {
        self.lists.denied(call)
    }

    fn pre_approved(&self, call: &Call) -> bool {
        self.lists.pre_approved(call)
    }

    fn key(&self, call: &Call) -> Remembered {
        Remembered {
            // The node's own answers (those a gateway stands behind) keep
            // the shape they had before links existed.
            asker: (!self.gateway).then(|| self.asker.clone()),
            command: call.command.clone(),
            exec: call.exec.clone(),
        }
    }

    fn is_remembered(&self, call: &Call) -> bool {
        self.always.contains(&self.key(call))
    }

    fn remember(&self, call: &Call) {
        self.always.add(self.key(call));
    }
}

fn rejected(message: &str) -> Decision {
    Decision::Refused {
        code: "USER_REJECTED",
        message: message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn exec_call(argv: &[&str]) -> Call {
        let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        Call {
            command: "run_command".into(),
            risk: Risk::Risky,
            summary: argv.join(" "),
            exec: Some(Exec {
                executable: PathBuf::from(format!("/usr/bin/{}", argv[0])),
                argv,
                cwd: PathBuf::from("/tmp"),
                env: Vec::new(),
                bound: None,
            }),
            agent: None,
            upstream: false,
            one_shot: false,
        }
    }

    fn policy(mode: Mode, allow: &[&str], deny: &[&str], dir: &Path) -> Policy {
        let owned = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
        Policy::new(mode, owned(allow), owned(deny), dir, None)
    }

    fn write_call() -> Call {
        Call {
            command: "write_file".into(),
            risk: Risk::Risky,
            summary: "write_file: a (1 bytes)".into(),
            exec: None,
            agent: None,
            upstream: false,
            one_shot: false,
        }
    }

    fn read_call() -> Call {
        Call {
            risk: Risk::Safe,
            command: "read_file".into(),
            ..write_call()
        }
    }

    #[tokio::test]
    async fn a_remote_gate_only_makes_a_call_stricter() {
        let dir = tempfile::tempdir().unwrap();
        let wait = Duration::from_secs(1);
        let allowed = |d: &Decision| matches!(d, Decision::Allowed(_));
        let linked = |mode, allow: &[&str], deny: &[&str]| {
            policy(mode, allow, deny, dir.path())
                .asked_by("a link")
                .without_gateway()
        };
        // Risky: a read then needs what a write needs.
        let deny = linked(Mode::Deny, &[], &[]);
        assert!(allowed(
            &deny
                .decide_gated(&read_call(), wait, Gate::Ours, None)
                .await
        ));
        assert!(!allowed(
            &deny
                .decide_gated(&read_call(), wait, Gate::Risky, None)
                .await
        ));
        // Headless stands in for the human, never for --approval deny or
        // a forbidden rule, and never for a program.
        assert!(!allowed(
            &deny
                .decide_gated(&write_call(), wait, Gate::Headless, None)
                .await
        ));
        let ask = linked(Mode::Ask, &[], &["claude.Bash"]);
        assert_eq!(
            ask.decide_gated(&write_call(), wait, Gate::Headless, None)
                .await,
            Decision::Allowed("headless")
        );
        assert!(!allowed(
            &ask.decide_gated(&exec_call(&["ls"]), wait, Gate::Headless, None)
                .await
        ));
        let forbidden = Call {
            command: "claude.Bash".into(),
            upstream: true,
            one_shot: false,
            ..write_call()
        };
        for gate in [Gate::Ours, Gate::Risky, Gate::Headless, Gate::Human] {
            let d = ask.decide_gated(&forbidden, wait, gate, None).await;
            assert_eq!(refusal_code(&d), Some("FORBIDDEN"), "{gate:?}");
        }
        // Human: no pre-approval, no --approval allow stands in.
        let allow = linked(Mode::Allow, &["write_file"], &[]);
        assert!(allowed(
            &allow
                .decide_gated(&write_call(), wait, Gate::Risky, None)
                .await
        ));
        let d = allow
            .decide_gated(&write_call(), wait, Gate::Human, None)
            .await;
        assert_eq!(refusal_code(&d), Some("APPROVAL_REQUIRED"));
        assert!(!allowed(
            &allow
                .decide_gated(&read_call(), wait, Gate::Human, None)
                .await
        ));
    }

    #[test]
    fn an_always_answer_belongs_to_who_was_answered() {
        let dir = tempfile::tempdir().unwrap();
        let node = policy(Mode::Deny, &[], &[], dir.path());
        node.remember(&write_call());
        assert!(node.is_remembered(&write_call()));
        let link = policy(Mode::Deny, &[], &[], dir.path())
            .asked_by("The bridged agent")
            .without_gateway();
        assert!(
            !link.is_remembered(&write_call()),
            "the node's answer is not the link's"
        );
        link.remember(&write_call());
        let again = policy(Mode::Deny, &[], &[], dir.path())
            .asked_by("The bridged agent")
            .without_gateway();
        assert!(again.is_remembered(&write_call()));
        let other = policy(Mode::Deny, &[], &[], dir.path())
            .asked_by("The cloud command queue")
            .without_gateway();
        assert!(!other.is_remembered(&write_call()));
    }

    fn refusal_code(d: &Decision) -> Option<&'static str> {
        match d {
            Decision::Refused { code, .. } => Some(code),
            Decision::Allowed(_) => None,
        }
    }

    async fn decide(p: &Policy, call: &Call) -> Decision {
        p.decide(call, Duration::from_millis(10)).await
    }

    #[tokio::test]
    async fn reads_run_without_approval() {
        let dir = tempfile::tempdir().unwrap();
        let call = Call {
            command: "read_file".into(),
            risk: Risk::Safe,
            summary: "read_file notes.md".into(),
            exec: None,
            agent: None,
            upstream: false,
            one_shot: false,
        };
        assert_eq!(
            decide(&policy(Mode::Deny, &[], &[], dir.path()), &call).await,
            Decision::Allowed("safe")
        );
    }

    #[tokio::test]
    async fn risky_calls_without_a_terminal_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let d = decide(
            &policy(Mode::Ask, &[], &[], dir.path()),
            &exec_call(&["ls"]),
        )
        .await;
        // Approval required: the tools make it OpenClaw's SYSTEM_RUN_DENIED
        // (system.run, so the gateway asks) or USER_REJECTED (the rest).
        assert_eq!(refusal_code(&d), Some("APPROVAL_REQUIRED"), "{d:?}");
        if let Decision::Refused { message, .. } = &d {
            assert!(
                message.contains("openclaw approvals allowlist add --node"),
                "{message}"
            );
        }
    }

    #[tokio::test]
    async fn what_prepare_tells_the_gateway_is_what_the_node_decides() {
        let dir = tempfile::tempdir().unwrap();
        let ls = exec_call(&["ls"]);
        // Pre-approved even under deny: said open, and allowed.
        let p = policy(Mode::Deny, &["run_command"], &[], dir.path());
        assert_eq!(p.stance_for(Some(&ls)), Stance::Open);
        assert_eq!(decide(&p, &ls).await, Decision::Allowed("allow-command"));
        // Deny: closed, and refused.
        let p = policy(Mode::Deny, &[], &[], dir.path());
        assert_eq!(p.stance_for(Some(&ls)), Stance::Closed);
        assert_eq!(refusal_code(&decide(&p, &ls).await), Some("USER_REJECTED"));
        // No terminal: the gateway's operators decide; forbidden stays closed.
        let p = policy(Mode::Ask, &[], &["ls"], dir.path());
        assert_eq!(p.stance_for(Some(&ls)), Stance::Closed);
        let p = policy(Mode::Ask, &[], &[], dir.path());
        assert_eq!(p.stance_for(Some(&ls)), Stance::Approvals);
        assert_eq!(p.stance_for(None), Stance::Approvals);
        // A grant stands in for that human only.
        let grant = Some(super::super::plans::Grant { always: false });
        assert_eq!(
            p.decide_granted(&ls, Duration::from_secs(1), grant).await,
            Decision::Allowed("gateway-once")
        );
        let forbidden = policy(Mode::Ask, &[], &["ls"], dir.path());
        assert_eq!(
            refusal_code(
                &forbidden
                    .decide_granted(&ls, Duration::from_secs(1), grant)
                    .await
            ),
            Some("FORBIDDEN")
        );
    }

    #[tokio::test]
    async fn deny_and_allow_modes() {
        let dir = tempfile::tempdir().unwrap();
        let call = exec_call(&["ls"]);
        assert_eq!(
            refusal_code(&decide(&policy(Mode::Deny, &[], &[], dir.path()), &call).await),
            Some("USER_REJECTED")
        );
        assert_eq!(
            decide(&policy(Mode::Allow, &[], &[], dir.path()), &call).await,
            Decision::Allowed("approval-allow")
        );
    }

    #[tokio::test]
    async fn allow_command_pre_approves_by_command_or_program() {
        let dir = tempfile::tempdir().unwrap();
        let mut call = exec_call(&["ls", "-la"]);
        if let Some(exec) = call.exec.as_mut() {
            exec.executable = std::fs::canonicalize(which::which("ls").unwrap()).unwrap();
        }
        for name in ["run_command", "ls"] {
            assert_eq!(
                decide(&policy(Mode::Deny, &[name], &[], dir.path()), &call).await,
                Decision::Allowed("allow-command")
            );
        }
    }

    #[tokio::test]
    async fn allow_command_does_not_cover_a_lookalike_program() {
        let dir = tempfile::tempdir().unwrap();
        let mut call = exec_call(&["ls"]);
        if let Some(exec) = call.exec.as_mut() {
            exec.executable = dir.path().join("vendor/ls");
        }
        let d = decide(&policy(Mode::Deny, &["ls"], &[], dir.path()), &call).await;
        assert_eq!(refusal_code(&d), Some("USER_REJECTED"), "{d:?}");
    }

    #[tokio::test]
    async fn deny_command_sees_through_shells_and_wrappers() {
        let dir = tempfile::tempdir().unwrap();
        let p = policy(Mode::Allow, &[], &["uname"], dir.path());
        for argv in [
            &["sh", "-c", "uname -s"][..],
            &["env", "uname"],
            &["nice", "-n", "5", "/bin/uname"],
        ] {
            let d = decide(&p, &exec_call(argv)).await;
            assert_eq!(refusal_code(&d), Some("FORBIDDEN"), "{argv:?}: {d:?}");
        }
    }

    #[tokio::test]
    async fn deny_command_wins_over_everything() {
        let dir = tempfile::tempdir().unwrap();
        let d = decide(
            &policy(Mode::Allow, &["curl"], &["curl"], dir.path()),
            &exec_call(&["curl", "x"]),
        )
        .await;
        assert_eq!(refusal_code(&d), Some("FORBIDDEN"), "{d:?}");
    }

    #[tokio::test]
    async fn builtin_rules_forbid_escalation_and_wiping() {
        let dir = tempfile::tempdir().unwrap();
        let p = policy(Mode::Allow, &[], &[], dir.path());
        for argv in [
            &["sudo", "ls"][..],
            &["sh", "-c", "echo hi && sudo rm x"],
            &["rm", "-rf", "/"],
            &["bash", "-lc", "rm -fr ~"],
            &["mkfs.ext4", "/dev/sda"],
        ] {
            let d = decide(&p, &exec_call(argv)).await;
            assert_eq!(refusal_code(&d), Some("FORBIDDEN"), "{argv:?}: {d:?}");
        }
        for argv in [&["rm", "-rf", "build"][..], &["sh", "-c", "ls -la /"]] {
            assert_eq!(
                decide(&p, &exec_call(argv)).await,
                Decision::Allowed("approval-allow")
            );
        }
    }

    #[test]
    fn always_is_remembered_per_executable_and_argv() {
        let dir = tempfile::tempdir().unwrap();
        let p = policy(Mode::Deny, &[], &[], dir.path());
        let call = exec_call(&["ls", "-la"]);
        p.remember(&call);
        assert!(p.is_remembered(&call));
        assert!(!p.is_remembered(&exec_call(&["ls", "-R"])));
        // and it survives a restart
        let again = policy(Mode::Deny, &[], &[], dir.path());
        assert!(again.is_remembered(&call));
    }
}
