// The TypeScript Agent SDK's checks (#34), run by test_sdk_ts.py with node: `node checks.mjs NAME`.
// The CLI is whatever CLAUDE_EXE names (a shim running keel, or Claude Code as the oracle); the
// project is PROJECT_DIR. Each check prints one JSON line: what the SDK gave the host.
import { query, createSdkMcpServer, tool, getSessionMessages, listSessions, listSubagents,
  getSubagentMessages } from "@anthropic-ai/claude-agent-sdk";
import { z } from "zod";

const base = () => ({
  pathToClaudeCodeExecutable: process.env.CLAUDE_EXE,
  cwd: process.env.PROJECT_DIR,
  stderr: (data) => process.stderr.write(data),
});

// the SDK's messages, short: what a host reads of each
function brief(m) {
  const out = { type: m.type };
  for (const k of ["subtype", "is_error", "result", "errors", "terminal_reason", "parent_tool_use_id",
    "task_id", "tool_use_id", "status", "description", "origin", "stop_reason", "num_turns", "uuid", "session_id"]) {
    if (m[k] !== undefined) out[k] = m[k];
  }
  if (m.message && Array.isArray(m.message.content)) {
    out.content = m.message.content.map((b) => ({ type: b.type, name: b.name, text: b.text,
      content: typeof b.content === "string" ? b.content
        : Array.isArray(b.content) ? b.content.map((c) => c.text || "").join("\n") : undefined }));
  }
  return out;
}

async function collect(q) {
  const messages = [];
  let thrown = null;
  try {
    for await (const m of q) messages.push(brief(m));
  } catch (e) {
    thrown = String(e && e.message ? e.message : e);
  }
  return { messages, thrown };
}

// a prompt as an async iterable of user messages (streaming input), held open until `done`
function stream(texts, done) {
  return (async function* () {
    for (const text of texts) {
      yield { type: "user", message: { role: "user", content: text }, parent_tool_use_id: null, session_id: "" };
    }
    await done;
  })();
}

const checks = {
  async result() {
    return collect(query({ prompt: "say hello", options: base() }));
  },

  async max_turns() {
    return collect(query({ prompt: "keep going", options: { ...base(), maxTurns: 1, allowedTools: ["Bash"] } }));
  },

  async api_error() {
    return collect(query({ prompt: "fail", options: base() }));
  },

  async sdk_mcp() {
    const calls = [];
    const server = createSdkMcpServer({ name: "calc", version: "1.0.0", tools: [
      tool("add", "Add two numbers", { a: z.number(), b: z.number() }, async (args) => {
        calls.push(args);
        return { content: [{ type: "text", text: `sum=${args.a + args.b}` }] };
      }),
    ] });
    const run = await collect(query({ prompt: "add 2 and 3", options: {
      ...base(), mcpServers: { calc: server }, allowedTools: ["mcp__calc__add"] } }));
    return { ...run, calls };
  },

  async hooks() {
    const seen = [];
    const hook = async (input) => {
      seen.push({ event: input.hook_event_name, tool: input.tool_name, command: input.tool_input && input.tool_input.command });
      return { hookSpecificOutput: { hookEventName: "PreToolUse", permissionDecision: "deny",
        permissionDecisionReason: "blocked by the TS hook" } };
    };
    const run = await collect(query({ prompt: "run it", options: { ...base(), allowedTools: ["Bash"],
      hooks: { PreToolUse: [{ matcher: "Bash", hooks: [hook] }] } } }));
    return { ...run, seen };
  },

  async can_use_tool() {
    const asked = [];
    const run = await collect(query({ prompt: "write it", options: { ...base(),
      canUseTool: async (name, input) => {
        asked.push({ name, file_path: input.file_path });
        return { behavior: "deny", message: "no writing today" };
      } } }));
    return { ...run, asked };
  },

  async interrupt() {
    let release;
    const done = new Promise((r) => { release = r; });
    const q = query({ prompt: stream(["take your time"], done), options: base() });
    const messages = [];
    let thrown = null;
    let interrupted = false;
    try {
      for await (const m of q) {
        messages.push(brief(m));
        if (m.type === "system" && m.subtype === "init" && !interrupted) {
          interrupted = true;
          setTimeout(() => q.interrupt().catch((e) => { thrown = String(e); }), 500);
        }
        if (m.type === "result") {
          release();
          break;
        }
      }
    } catch (e) {
      thrown = String(e && e.message ? e.message : e);
    }
    return { messages, thrown };
  },

  async setting_sources() {
    const out = {};
    for (const [name, sources] of [["none", []], ["project", ["project"]]]) {
      const q = query({ prompt: "hi", options: { ...base(), settingSources: sources } });
      let commands = null;
      try {
        for await (const m of q) {
          if (m.type === "system" && m.subtype === "init") commands = m.slash_commands;
        }
      } catch (e) {
        out[name + "_thrown"] = String(e);
      }
      out[name] = commands;
    }
    return out;
  },

  async streaming_command() {
    let release;
    const done = new Promise((r) => { release = r; });
    const q = query({ prompt: stream(["/greet Ada"], done), options: { ...base(), settingSources: ["project"] } });
    const messages = [];
    let thrown = null;
    try {
      for await (const m of q) {
        messages.push(brief(m));
        if (m.type === "result") {
          release();
          break;
        }
      }
    } catch (e) {
      thrown = String(e && e.message ? e.message : e);
    }
    return { messages, thrown };
  },

  async elicitation() {
    const asked = [];
    const run = await collect(query({ prompt: "elicit", options: { ...base(),
      mcpServers: { ev: { type: "stdio", command: "node", args: [process.env.EVERYTHING, "stdio"] } },
      allowedTools: ["mcp__ev__trigger-elicitation-request"],
      onElicitation: async (request) => {
        asked.push({ serverName: request.serverName, message: request.message, mode: request.mode,
          fields: Object.keys((request.requestedSchema || {}).properties || {}) });
        return { action: "accept", content: { name: "Ada Lovelace", check: true, integer: 7 } };
      } } }));
    return { ...run, asked };
  },

  async session_readers() {
    const run = await collect(query({ prompt: "delegate", options: { ...base(), allowedTools: ["Task", "Agent", "Bash"] } }));
    const result = run.messages.find((m) => m.type === "result");
    const sid = result && result.session_id;
    const dir = process.env.PROJECT_DIR;
    const messages = await getSessionMessages(sid, { dir });
    const sessions = await listSessions({ dir });
    const agents = await listSubagents(sid, { dir });
    const sub = agents.length ? await getSubagentMessages(sid, agents[0], { dir }) : [];
    return { ...run, sid,
      messages_read: messages.map((m) => ({ type: m.type, uuid: m.uuid })),
      sessions: sessions.map((s) => s.sessionId), agents,
      subagent: sub.map((m) => ({ type: m.type, parent_tool_use_id: m.parent_tool_use_id ?? null })) };
  },

  async mcp_initialize() {
    const q = query({ prompt: "echo", options: { ...base(), mcpServersDelivery: "initialize",
      mcpServers: { ev: { type: "stdio", command: "node", args: [process.env.EVERYTHING, "stdio"] } },
      allowedTools: ["mcp__ev__echo"] } });
    const run = await collect(q);
    return run;
  },

  async subagent() {
    return collect(query({ prompt: "delegate", options: { ...base(), allowedTools: ["Task", "Agent", "Bash"],
      forwardSubagentText: process.env.FORWARD === "1" } }));
  },
};

const name = process.argv[2];
if (!checks[name]) {
  console.error(`unknown check ${name}; one of ${Object.keys(checks).join(", ")}`);
  process.exit(2);
}
const out = await checks[name]();
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(0);
