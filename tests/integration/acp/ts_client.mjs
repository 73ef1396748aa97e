// An ACP client on the official TypeScript SDK (@agentclientprotocol/sdk): starts `keel acp`,
// initializes, opens a session, sends one prompt (permission asks answered "allow"), and prints
// what it got as one JSON line. Run by test_acp_typescript.py.
import { spawn } from "node:child_process";
import { Readable, Writable } from "node:stream";
import * as acp from "@agentclientprotocol/sdk";

const [keel, cwd, text] = process.argv.slice(2);
const child = spawn(keel, ["acp"], { cwd, stdio: ["pipe", "pipe", "inherit"] });
const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
const updates = [];
const asked = [];
const app = acp
  .client({ name: "keel-tests-ts" })
  .onNotification(acp.methods.client.session.update, ({ params }) => {
    updates.push(params.update);
  })
  .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
    asked.push(params);
    return { outcome: { outcome: "selected", optionId: "allow" } };
  });
const result = await app.connectWith(stream, async (ctx) => {
  const init = await ctx.request(acp.methods.agent.initialize, {
    protocolVersion: acp.PROTOCOL_VERSION,
    clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
  });
  const session = await ctx.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
  const answer = await ctx.request(acp.methods.agent.session.prompt, {
    sessionId: session.sessionId,
    prompt: [{ type: "text", text }],
  });
  return { init, session, answer };
});
child.stdin.end();
process.stdout.write(JSON.stringify({ ...result, updates, asked }) + "\n");
process.exit(0);
