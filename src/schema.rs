//! The one tool declaration (seed 002 §2), rendered in the shapes hosts load:
//! OpenAI function tools, Anthropic tools and MCP tools.
//!
//! `tool-schemas/*.json` are generated from here (`clawbot_router schema
//! --format …`); a test fails when the files and the binary disagree.
//! Descriptions are the seed's Chinese, with English alongside.

use serde::Serialize;

use crate::cli::SchemaFormat;
use crate::router::messages::Lang;

pub const TOOL_NAME: &str = "clawbot_router";

/// The system-prompt fragment that teaches a host LLM when and how to call
/// the tool (`clawbot_router prompt`, MCP's `instructions` and prompt).
pub const PROMPT_ZH: &str = include_str!("../prompts/clawbot_router.zh.md");
pub const PROMPT_EN: &str = include_str!("../prompts/clawbot_router.en.md");

pub fn prompt(lang: Lang) -> &'static str {
    match lang {
        Lang::Zh => PROMPT_ZH,
        Lang::En => PROMPT_EN,
    }
}

const DESCRIPTION: &str = "\
使用远程 clawBot / OpenClaw 多 Agent 能力处理复杂任务，例如日志分析、运维排查、跨系统信息整合。\
当本地 tools 无法完成任务（如「总结最近日志」「综合多天运维记录」）时，可以调用本工具。\
本工具只在远端环境工作，不会直接操作当前用户电脑。\
调用前请先对用户说：「我正在通过 clawBot 处理复杂任务，可能需要几秒钟。」\n\n\
Uses the remote clawBot / OpenClaw multi-agent service for complex tasks such as log analysis, \
operations troubleshooting and pulling information together across systems. Call it only when \
local tools cannot do the job (e.g. \"summarise the recent logs\", \"combine several days of \
ops records\"). It works only in the remote environment and never touches the user's computer. \
Before calling, tell the user: \"I'm handing this to clawBot for a complex task; it may take a few seconds.\"";

const AGENT_DESCRIPTION: &str = "\
要调用的远程 Agent 名称，缺省时使用默认主 Agent（例如 main）。例如：\"ops\"。\n\
The remote agent to use; omit it for the default main agent. Example: \"ops\".";

const MESSAGE_DESCRIPTION: &str = "\
要转交给 clawBot 的用户任务描述，自然语言，例如：\"把最近的运维日志总结成两条要点\"。\n\
The user's task for clawBot, in natural language. Example: \"Summarise the recent ops logs in two bullet points\".";

#[derive(Debug, Serialize)]
struct Parameters {
    #[serde(rename = "type")]
    kind: &'static str,
    properties: Properties,
    required: [&'static str; 1],
    #[serde(rename = "additionalProperties")]
    additional_properties: bool,
}

#[derive(Debug, Serialize)]
struct Properties {
    agent: Property,
    message: Property,
}

#[derive(Debug, Serialize)]
struct Property {
    #[serde(rename = "type")]
    kind: &'static str,
    description: &'static str,
}

fn parameters() -> Parameters {
    Parameters {
        kind: "object",
        properties: Properties {
            agent: Property {
                kind: "string",
                description: AGENT_DESCRIPTION,
            },
            message: Property {
                kind: "string",
                description: MESSAGE_DESCRIPTION,
            },
        },
        required: ["message"],
        additional_properties: false,
    }
}

#[derive(Debug, Serialize)]
struct OpenAiTool {
    #[serde(rename = "type")]
    kind: &'static str,
    function: OpenAiFunction,
}

#[derive(Debug, Serialize)]
struct OpenAiFunction {
    name: &'static str,
    description: &'static str,
    parameters: Parameters,
}

#[derive(Debug, Serialize)]
struct AnthropicTool {
    name: &'static str,
    description: &'static str,
    input_schema: Parameters,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct McpTool {
    name: &'static str,
    title: &'static str,
    description: &'static str,
    input_schema: Parameters,
}

/// The MCP declaration as data (what `clawbot_router mcp` lists).
pub fn mcp_tool() -> serde_json::Value {
    serde_json::to_value(McpTool {
        name: TOOL_NAME,
        title: "clawBot router",
        description: DESCRIPTION,
        input_schema: parameters(),
    })
    .expect("the declaration is plain data")
}

/// The declaration in `format`, pretty-printed, with a final newline.
pub fn render(format: SchemaFormat) -> String {
    let json = match format {
        SchemaFormat::Openai => serde_json::to_string_pretty(&OpenAiTool {
            kind: "function",
            function: OpenAiFunction {
                name: TOOL_NAME,
                description: DESCRIPTION,
                parameters: parameters(),
            },
        }),
        SchemaFormat::Anthropic => serde_json::to_string_pretty(&AnthropicTool {
            name: TOOL_NAME,
            description: DESCRIPTION,
            input_schema: parameters(),
        }),
        SchemaFormat::Mcp => serde_json::to_string_pretty(&McpTool {
            name: TOOL_NAME,
            title: "clawBot router",
            description: DESCRIPTION,
            input_schema: parameters(),
        }),
    };
    json.expect("the declaration is plain data") + "\n"
}
