// The TypeScript SDK's stdio client (npm @modelcontextprotocol/sdk) launching the bridge (`foldermind mcp`)
// once: it calls a tool and prints {"step": "before", "ok": ...}; then, for each line "call" on its stdin
// (the test changes foldermind in between), it calls again on the same session and prints {"step": "after",
// "ok": ..., "closed": ...}; "closed" says whether the client was ever told the connection closed. Run from
// the directory whose node_modules holds the SDK (the test copies it there).
// Usage: node ts_bridge.mjs PYTHON HOME
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import readline from "node:readline";

const [python, home] = process.argv.slice(2);
const transport = new StdioClientTransport({
  command: python,
  args: ["-m", "foldermind.kernel.cli", "--home", home, "mcp"],
  env: process.env,
  stderr: "inherit",
});
const client = new Client({ name: "foldermind-ts-bridge-test", version: "0" });
let closed = false;
client.onclose = () => {
  closed = true;
};
await client.connect(transport);

async function call() {
  try {
    const result = await client.callTool({ name: "list_smart_folders", arguments: {} });
    return { ok: !result.isError && Array.isArray(result.structuredContent?.folders) };
  } catch (error) {
    return { ok: false, error: { code: error.code, message: error.message } };
  }
}

console.log(JSON.stringify({ step: "before", ...(await call()) }));
for await (const line of readline.createInterface({ input: process.stdin })) {
  if (line !== "call") break;
  console.log(JSON.stringify({ step: "after", ...(await call()), closed }));
}
await client.close();
