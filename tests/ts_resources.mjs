// The TypeScript SDK's client (npm @modelcontextprotocol/sdk) against the front door: it lists the resource
// templates and the first page of resources and reads one resource, then prints what it saw as JSON for
// tests/test_resources.py. Run from the directory whose node_modules holds the SDK (the test copies it there).
// Usage: node ts_resources.mjs URL TOKEN URI
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

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
console.log(
  JSON.stringify({
    capabilities: client.getServerCapabilities()?.resources ?? null,
    templates: templates.resourceTemplates.map((t) => t.uriTemplate),
    listed: listed.resources.map((r) => r.uri),
    nextCursor: listed.nextCursor ?? null,
    text: read.contents[0].text,
    refused,
  }),
);
await client.close();
