// The TypeScript SDK's client (npm @modelcontextprotocol/sdk) against the front door: it lists the resource
// templates and the first page of resources, reads one resource and gets a prompt; then it prints
// {"listening": true} on a line of its own, waits (at most 90 s) for the resources/list_changed that a file
// the test adds meanwhile brings, and prints what it saw as JSON for tests/test_resources.py. Run from the
// directory whose node_modules holds the SDK (the test copies it there).
// Usage: node ts_resources.mjs URL TOKEN URI
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ResourceListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, token, uri] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: "foldermind-ts-test", version: "0" });
await client.connect(transport);
const templates = await client.listResourceTemplates();
const listed = await client.listResources();
const read = await client.readResource({ uri });
let refused = null;
try {
  await client.readResource({ uri: "foldermind://document/relative%2Fx.txt" });
} catch (error) {
  refused = { code: error.code, message: error.message };
}
const prompt = await client.getPrompt({ name: "answer_from_documents", arguments: { query: "quick brown fox" } });
let changed = false;
const announced = new Promise((resolve) => {
  client.setNotificationHandler(ResourceListChangedNotificationSchema, () => {
    changed = true;
    resolve();
  });
});
console.log(JSON.stringify({ listening: true }));
// The timer is cleared once the race is decided: a pending one keeps node running to its end, and the
// test's read of stdout waited the whole 90 s after the notification had come.
let timer;
await Promise.race([announced, new Promise((resolve) => (timer = setTimeout(resolve, 90000)))]);
clearTimeout(timer);
console.log(
  JSON.stringify({
    capabilities: client.getServerCapabilities()?.resources ?? null,
    templates: templates.resourceTemplates.map((t) => t.uriTemplate),
    listed: listed.resources.map((r) => r.uri),
    nextCursor: listed.nextCursor ?? null,
    text: read.contents[0].text,
    refused,
    prompt: prompt.messages.map((m) => m.content.text ?? "").join("\n"),
    changed,
  }),
);
await client.close();
