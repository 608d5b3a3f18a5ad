//! The seed's fixed sentences (seed 002 §3.2, §3.5), in Chinese and English.
//!
//! Every sentence the router adds to `content` comes from here, so the host
//! LLM (and the tests) can rely on them word for word. The Chinese ones are
//! the seed's own; never reword them without updating the seed's readers.

use std::fmt;

/// Language of the router's own sentences (openclaw's output is never
/// translated).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Lang {
    #[default]
    Zh,
    En,
}

impl Lang {
    /// Reads `--lang`-style values leniently, for the paths that run before
    /// (or instead of) clap: anything but "en" is Chinese.
    pub fn guess(value: Option<&str>) -> Self {
        match value.map(str::trim) {
            Some(v) if v.eq_ignore_ascii_case("en") => Lang::En,
            _ => Lang::Zh,
        }
    }
}

const PREFIX: &str = "[clawbot_router]";

/// What the host LLM says before calling (seed §3.2); the spinner shows it too.
pub fn announce(lang: Lang) -> &'static str {
    match lang {
        Lang::Zh => "我正在通过 clawBot 处理复杂任务，可能需要几秒钟。",
        Lang::En => "I'm handing this to clawBot for a complex task; it may take a few seconds.",
    }
}

/// §3.1: `message` missing or blank; openclaw was not started.
pub fn missing_message(lang: Lang) -> String {
    match lang {
        Lang::Zh => format!("{PREFIX} 没有任务描述：参数 message 不能为空，未调用 OpenClaw。"),
        Lang::En => format!(
            "{PREFIX} No task description: the message argument must not be empty; OpenClaw was not called."
        ),
    }
}

/// The arguments could not be understood; `detail` says what was wrong.
pub fn invalid_arguments(lang: Lang, detail: &dyn fmt::Display) -> String {
    match lang {
        Lang::Zh => format!("{PREFIX} 参数无效：{detail}。未调用 OpenClaw。"),
        Lang::En => format!("{PREFIX} Invalid arguments: {detail}. OpenClaw was not called."),
    }
}

/// A whole session key (`--session agent:main:x`) names another agent than
/// the call's: a bad argument, in the documented sentence for one.
pub fn session_for_another_agent(lang: Lang, named: &str, agent: &str) -> String {
    let detail = match lang {
        Lang::En => {
            format!("the session key names agent {named:?}, but this call is for agent {agent:?}")
        }
        Lang::Zh => format!("会话键属于 agent “{named}”，但本次调用的是 agent “{agent}”"),
    };
    invalid_arguments(lang, &detail)
}

/// §3.5.1: the openclaw CLI could not be started.
pub fn spawn_failed(lang: Lang, reason: &dyn fmt::Display) -> String {
    match lang {
        Lang::Zh => format!("{PREFIX} 无法启动远程 Agent（openclaw CLI 启动失败：{reason}）。"),
        Lang::En => format!(
            "{PREFIX} Could not start the remote agent (the openclaw CLI failed to start: {reason})."
        ),
    }
}

/// The small executable cannot reach the full program this call needs.
/// `problem` is English (the executable's own words and the system's
/// error): it goes into the English sentence only, so each language's
/// sentence is in that language alone (the caller logs it otherwise).
#[cfg(unix)]
pub fn cannot_hand_over(lang: Lang, problem: &str) -> String {
    match lang {
        Lang::Zh => format!(
            "{PREFIX} 无法处理本次调用：无法启动完整程序 clawbot_router-full（它必须与 clawbot_router 放在同一目录）。未调用 OpenClaw。"
        ),
        Lang::En => format!("{PREFIX} Cannot run this call: {problem}. OpenClaw was not called."),
    }
}

/// §3.5.2: appended after what was captured when the deadline passed.
pub fn timed_out(lang: Lang, seconds: &str) -> String {
    match lang {
        Lang::Zh => {
            format!("{PREFIX} 远程 clawBot 处理超时（超过 {seconds} 秒未完成），本次结果已中止。")
        }
        Lang::En => format!(
            "{PREFIX} The remote clawBot timed out (not finished after {seconds} seconds); this result was aborted."
        ),
    }
}

/// Appended when the router itself was told to stop (Ctrl-C, SIGTERM).
pub fn interrupted(lang: Lang, signal: &str) -> String {
    match lang {
        Lang::Zh => {
            format!("{PREFIX} 调用被中断（收到 {signal}），远程 clawBot 已终止，本次结果已中止。")
        }
        Lang::En => format!(
            "{PREFIX} Interrupted ({signal}): the remote clawBot was stopped and this result was aborted."
        ),
    }
}

/// The line that replaces the middle of an over-long output.
pub fn truncated(lang: Lang, dropped: u64) -> String {
    match lang {
        Lang::Zh => format!("{PREFIX} ……输出过长，中间省略了 {dropped} 字节……"),
        Lang::En => format!("{PREFIX} ... output too long: {dropped} bytes omitted here ..."),
    }
}

/// openclaw failed without saying anything; without this line the host LLM
/// would get an empty string for a failure.
pub fn silent_failure(lang: Lang, how: &str) -> String {
    match lang {
        Lang::Zh => format!("{PREFIX} openclaw {how}，没有任何输出。"),
        Lang::En => format!("{PREFIX} openclaw {how} without any output."),
    }
}

pub fn exited_with(lang: Lang, code: i32) -> String {
    match lang {
        Lang::Zh => format!("以退出码 {code} 结束"),
        Lang::En => format!("exited with code {code}"),
    }
}

pub fn killed_by(lang: Lang, signal: i32) -> String {
    match lang {
        Lang::Zh => format!("被信号 {signal} 终止"),
        Lang::En => format!("was killed by signal {signal}"),
    }
}

/// `--via gateway`: the gateway could not be reached or refused us.
pub fn gateway_unreachable(lang: Lang, url: &str, reason: &dyn fmt::Display) -> String {
    match lang {
        Lang::Zh => {
            format!("{PREFIX} 无法连接 OpenClaw 网关 {url}（{reason}），未调用远程 Agent。")
        }
        Lang::En => format!(
            "{PREFIX} Could not reach the OpenClaw gateway at {url} ({reason}); the remote agent was not called."
        ),
    }
}

/// What the user can do about a refusal, when we know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenProblem {
    /// No token was given (OpenClaw then asks for a device identity instead).
    Missing,
    /// The one given was refused.
    Refused,
    /// This operator device awaits approval: the gateway's request id.
    Pairing(String),
}

/// `--via gateway`: the gateway answered and refused the connection.
pub fn gateway_refused(lang: Lang, url: &str, reason: &str, token: Option<TokenProblem>) -> String {
    let hint = match (token, lang) {
        (Some(TokenProblem::Missing), Lang::Zh) => {
            "；没有提供网关令牌：请用 --token 或环境变量 OPENCLAW_GATEWAY_TOKEN 给出网关的 gateway.auth.token".to_owned()
        }
        (Some(TokenProblem::Missing), Lang::En) => {
            "; no gateway token was given: pass the gateway's gateway.auth.token with --token or OPENCLAW_GATEWAY_TOKEN".to_owned()
        }
        (Some(TokenProblem::Refused), Lang::Zh) => {
            "；网关不接受这个令牌：请核对 --token / OPENCLAW_GATEWAY_TOKEN 与网关的 gateway.auth.token".to_owned()
        }
        (Some(TokenProblem::Refused), Lang::En) => {
            "; the gateway does not accept this token: check --token / OPENCLAW_GATEWAY_TOKEN against the gateway's gateway.auth.token".to_owned()
        }
        (Some(TokenProblem::Pairing(request)), Lang::Zh) => format!(
            "；这台设备需要网关管理员批准：请在网关上运行 openclaw devices approve {request}，批准后重试"
        ),
        (Some(TokenProblem::Pairing(request)), Lang::En) => format!(
            "; this device awaits the gateway operator's approval: run openclaw devices approve {request} on the gateway, then try again"
        ),
        (None, _) => String::new(),
    };
    match lang {
        Lang::Zh => format!(
            "{PREFIX} OpenClaw 网关 {url} 拒绝了连接（网关原文：“{reason}”{hint}），未调用远程 Agent。"
        ),
        Lang::En => format!(
            "{PREFIX} The OpenClaw gateway at {url} refused the connection ({reason}{hint}); the remote agent was not called."
        ),
    }
}

/// `--via gateway`: the connection ended before the answer.
pub fn gateway_lost(lang: Lang, reason: &str) -> String {
    match lang {
        Lang::Zh => {
            format!("{PREFIX} 与 OpenClaw 网关的连接中断（详情：“{reason}”），没有拿到本次结果。")
        }
        Lang::En => format!(
            "{PREFIX} The connection to the OpenClaw gateway was lost ({reason}) before the result arrived."
        ),
    }
}

/// `--via gateway`: we gave up, but the gateway did not confirm the abort.
pub fn abort_unconfirmed(lang: Lang) -> &'static str {
    match lang {
        Lang::Zh => "[clawbot_router] 网关没有确认已停止这次运行，它可能仍在运行。",
        Lang::En => {
            "[clawbot_router] The gateway did not confirm that the run was stopped; it may still be running."
        }
    }
}
